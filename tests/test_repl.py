"""The REPL typed through prompt_toolkit's pipe input, fed through a pipe, and in a real pty."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time

from prompt_toolkit.application import create_app_session
from prompt_toolkit.document import Document
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from sensevm.cli.repl import BANNER, history_path, make_completer, make_history, run_repl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UP = "\x1b[A"

ACTION = ('irreversible action send_mail(to) requires email.send:\r'
          '    print("sending to " + to)\r'
          '\r')


class LockedText(io.StringIO):
    """The REPL's stdout, written by the REPL's thread and polled by the test's."""

    def __init__(self):
        super().__init__()
        self.lock = threading.Lock()

    def write(self, s):
        with self.lock:
            return super().write(s)

    def text(self) -> str:
        with self.lock:
            return self.getvalue()


class TypedRepl:
    """``run_repl(interactive=True)`` on a thread, with keys typed into prompt_toolkit's pipe input.

    Typing waits for results rather than sleeping, except where prompt_toolkit itself works in
    the background (history loads asynchronously when a prompt first renders).
    """

    def __init__(self, history=None):
        self.out = LockedText()
        self.history = history if history is not None else InMemoryHistory()
        self.status = None
        self.error = None

    def __enter__(self):
        self._pipe = create_pipe_input()
        self.input = self._pipe.__enter__()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.wait_for(BANNER)
        return self

    def _run(self):
        try:
            with create_app_session(input=self.input, output=DummyOutput()):
                self.status = run_repl(None, self.out, interactive=True, history=self.history)
        except BaseException as exc:      # surfaced by finish()
            self.error = exc

    def type(self, keys: str) -> "TypedRepl":
        self.input.send_text(keys)
        return self

    def wait_for(self, text: str, count: int = 1, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while self.out.text().count(text) < count:
            if self.error is not None:
                raise self.error
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} (x{count}) never appeared in:\n{self.out.text()}")
            time.sleep(0.005)
        return self.out.text()

    def finish(self, keys: str = "exit\r") -> int:
        self.type(keys)
        self.thread.join(10)
        assert not self.thread.is_alive(), "the REPL did not leave"
        if self.error is not None:
            raise self.error
        return self.status

    def __exit__(self, *exc):
        if self.thread.is_alive():
            self.input.send_text("\x04")         # Ctrl-D: leave, whatever happened
            self.thread.join(5)
        self._pipe.__exit__(*exc)


# --------------------------------------------------------------------- typed (terminal) mode


def test_multiline_def_then_call():
    with TypedRepl() as repl:
        # Typed as a person types it: the continuation line is indented for them.
        repl.type("def f(x):\rreturn x * 2\r")
        time.sleep(0.05)
        assert repl.out.text() == BANNER + "\n"      # the block is still open: nothing ran
        repl.type("\rprint(f(21))\r")
        repl.wait_for("42\n")
        assert repl.finish() == 0
    assert repl.out.text() == BANNER + "\n42\n"


def test_state_persists_and_expression_values_are_echoed():
    with TypedRepl() as repl:
        repl.type('x = 3\rx + 1\rprint(x)\rx += 1\rnil\rprint("s")\r"s"\r[x, "a"]\r')
        repl.wait_for('[4, "a"]\n')
        assert repl.finish("exit()\r") == 0
    # Assignments and nil values show nothing; a String is shown quoted, print's text is not.
    assert repl.out.text() == BANNER + '\n4\n3\ns\n"s"\n[4, "a"]\n'


def test_error_then_working_input():
    with TypedRepl() as repl:
        repl.type("print(nope)\rprint(1 + 1)\r")
        out = repl.wait_for("2\n")
        assert repl.finish() == 0
    assert ("<repl>:1:7: SenseNameError: undefined variable 'nope'\n"
            "    1 | print(nope)\n"
            "      |       ^\n"
            "2\n") in out
    assert "\x1b[" not in out                        # not a terminal: no colour


def test_dis_shows_the_bytecode_of_a_function():
    with TypedRepl() as repl:
        repl.type("def f(x):\r    return x * 2\r\r:dis f\r")
        out = repl.wait_for("RETURN")
        repl.type(":dis nope\r:dis print\r")
        out = repl.wait_for("not a function")
        assert repl.finish() == 0
    assert "Disassembly of f" in out
    assert "LOAD_NAME" in out and "MUL" in out
    assert "no name 'nope' is defined" in out


def test_dis_of_an_action_audit_and_policy():
    with TypedRepl() as repl:
        repl.type(ACTION)
        repl.type('a = send_mail("bob")\ra.verify()\ra.approve()\ra.commit()\r')
        repl.wait_for("sending to bob\n")
        repl.type(":audit\r")
        out = repl.wait_for("committed")
        repl.type("policy:\r    deny email.send\r\r:policy\r")
        out = repl.wait_for("deny email.send\n")
        repl.type(":dis send_mail\r")
        out = repl.wait_for("Disassembly of send_mail")
        assert repl.finish() == 0
    assert "irreversible action 'send_mail' -> prepared" in out
    assert "irreversible action 'send_mail' -> verified" in out
    assert "irreversible action 'send_mail' -> committed" in out


def test_help_and_unknown_meta_command():
    with TypedRepl() as repl:
        repl.type(":help\r:frobnicate\r")
        out = repl.wait_for("unknown command ':frobnicate'")
        assert repl.finish() == 0
    assert ":dis NAME" in out and ":audit" in out and ":policy" in out
    assert "':help'" in out


def test_up_arrow_recalls_the_previous_input():
    with TypedRepl() as repl:
        repl.type("print(7)\r")
        repl.wait_for("7\n")
        # History loads in the background once the next prompt renders.
        time.sleep(0.2)
        repl.type(UP + "\r")
        repl.wait_for("7\n", count=2)
        assert repl.finish() == 0


def test_history_persists_in_the_data_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    path = history_path()
    assert path == os.path.join(str(tmp_path), "sense", "repl_history")
    with TypedRepl(history=make_history()) as repl:
        repl.type('print("first session")\r')
        repl.wait_for("first session\n")
        assert repl.finish() == 0
    with open(path, encoding="utf-8") as fh:
        assert 'print("first session")' in fh.read()
    with TypedRepl(history=make_history()) as repl:
        time.sleep(0.2)
        repl.type(UP + "\r")
        repl.wait_for("first session\n")
        assert repl.finish() == 0


def test_unwritable_history_falls_back_to_memory(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("XDG_DATA_HOME", str(blocker))
    history = make_history()
    history.append_string("print(1)")                # must not raise
    assert list(history.get_strings()) == ["print(1)"]


def test_relative_xdg_data_home_is_ignored(monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", "relative/dir")
    assert history_path() == os.path.join(os.path.expanduser("~"), ".local", "share", "sense",
                                          "repl_history")


def test_ctrl_c_cancels_the_input_and_ctrl_d_leaves():
    with TypedRepl() as repl:
        repl.type("print(1\x03")
        repl.type("print(2)\r")
        out = repl.wait_for("2\n")
        assert repl.finish("\x04") == 0
    assert "1" not in out.replace(BANNER, "")


def test_open_bracket_continues_the_input():
    with TypedRepl() as repl:
        repl.type("x = [1,\r2]\rprint(x)\r")
        out = repl.wait_for("[1, 2]\n")
        assert repl.finish() == 0
    assert "Error" not in out


def test_tab_indents_at_line_start_and_completes_elsewhere():
    with TypedRepl() as repl:
        repl.type("if true:\r\tprint(3)\r\r")
        repl.wait_for("3\n")
        repl.type("pri\t")
        time.sleep(0.2)                              # completion runs as a background task
        repl.type("(4)\r")
        repl.wait_for("4\n")
        assert repl.finish() == 0


# --------------------------------------------------------------------- the completer


class _FakeSession:
    def names(self):
        return ["a", "print", "prompt_text", "send_mail"]

    def members(self, name):
        return ["approve", "approved", "commit", "kind", "name", "rollback", "state",
                "verify"] if name == "a" else []


def complete(text: str, requested: bool = True):
    completer = make_completer(_FakeSession())
    return [c.text for c in completer.get_completions(
        Document(text), CompleteEvent(completion_requested=requested))]


def test_completes_keywords_and_names_in_scope():
    assert complete("pr") == ["print", "prompt_text"]
    assert complete("x = whi") == ["while"]
    assert "reversible" in complete("re") and "return" in complete("re")


def test_completes_members_after_a_dot():
    assert complete("a.") == ["approve", "approved", "commit", "kind", "name", "rollback",
                              "state", "verify"]
    assert complete("a.app") == ["approve", "approved"]
    assert complete("send_mail.") == []


def test_completes_meta_commands_and_names_after_dis():
    assert complete(":d") == [":dis"]
    assert complete(":dis se") == ["send_mail"]


def test_no_completion_inside_strings_or_comments():
    assert complete('print("pr') == []
    assert complete("x = 1  # pr") == []
    assert complete('x = "#" + pr') == ["print", "prompt_text"]
    assert complete('x = "a\\"b" + pr') == ["print", "prompt_text"]


def test_completer_against_a_real_session():
    from sensevm.cli.interactive import Interactive
    session = Interactive(stdout=io.StringIO())
    assert session.execute(ACTION.replace("\r", "\n") + 'a = send_mail("x")\n') is None
    completer = make_completer(session)
    got = [c.text for c in completer.get_completions(Document("a.co"), CompleteEvent())]
    assert got == ["commit"]
    got = [c.text for c in completer.get_completions(Document("sen"), CompleteEvent())]
    assert "send_mail" in got


# --------------------------------------------------------------------- piped mode


def piped(text: str):
    out, err = io.StringIO(), io.StringIO()
    status = run_repl(io.StringIO(text), out, interactive=False, stderr=err)
    return status, out.getvalue(), err.getvalue()


def test_piped_runs_blocks_and_lines_like_typed_input():
    status, out, err = piped("def f(x):\n    return x * 2\n\nprint(f(21))\nx = 5\nprint(x)\n")
    assert (status, out, err) == (0, "42\n5\n", "")


def test_piped_map_literal_over_lines_and_methods():
    # A '{' left open waits for its '}' as a '[' does (EXTENSIONS.md E1).
    status, out, err = piped('m = {\n    "a": 1,\n    "b": [2],\n}\nprint(m, m.keys())\n'
                             'print("x y".split())\n')
    assert (status, out, err) == (0, "{a: 1, b: [2]} [a, b]\n[x, y]\n", "")


def test_completes_the_methods_of_strings_arrays_and_maps():
    from sensevm.cli.interactive import Interactive
    session = Interactive(stdout=io.StringIO())
    assert session.execute('s = "x"\nxs = [1]\nm = {"k": 1}\n') is None
    completer = make_completer(session)

    def got(text):
        return [c.text for c in completer.get_completions(Document(text), CompleteEvent())]
    assert got("s.up") == ["upper"] and "trim_start" in got("s.tr")
    assert got("xs.so") == ["sorted"] and got("xs.re") == ["reduce", "remove_at", "reversed"]
    assert got("m.me") == ["merged"] and got("m.ha") == ["has"]


def test_piped_error_goes_to_stderr_and_the_input_goes_on():
    status, out, err = piped("print(1)\nprint(nope)\nprint(2)\n")
    assert status == 1
    assert out == "1\n2\n"
    # The line of the input it came from (the reference says [line 1] for every input).
    assert err.startswith("<repl>:2:7: SenseNameError: undefined variable 'nope'\n"
                          "    2 | print(nope)\n")


def test_piped_lines_count_blank_lines_and_meta_commands_and_errors_in_functions():
    status, out, err = piped("def f():\n    return nope\n\n:policy\n\nx = 1\nf()\n")
    assert status == 1
    assert err == ("<repl>:2:12: SenseNameError: undefined variable 'nope'\n"
                   "    2 |     return nope\n"
                   "      |            ^\n")


def test_piped_input_does_not_echo_and_exit_call_stops():
    # Like `python < script` (and the reference's piped REPL): values are not echoed.
    assert piped('1 + 2\n"ada"\nprint(3)\nexit()\nprint(4)\n')[:2] == (0, "3\n")
    assert piped("print(1)\nquit()\nprint(2)\n")[:2] == (0, "1\n")


def test_piped_block_at_end_of_input_runs_and_exit_stops():
    assert piped("if true:\n    print(1)")[:2] == (0, "1\n")
    assert piped("print(1)\nexit\nprint(2)\n")[:2] == (0, "1\n")


def test_piped_meta_commands():
    status, out, err = piped("def f():\n    return 1\n\n:dis f\n:policy\n:nope\n")
    assert status == 1
    assert "Disassembly of f" in out and "RETURN" in out
    assert "no policy rules" in out
    assert "unknown command ':nope'" in err


def test_python_m_sensevm_repl_through_a_pipe():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    script = ("def f(x):\n    return x * 2\n\nprint(f(21))\nprint(nope)\n"
              'print("still here")\n:dis f\n')
    proc = subprocess.run([sys.executable, "-m", "sensevm", "repl"], input=script, env=env,
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 1
    assert proc.stdout.startswith("42\nstill here\nDisassembly of f")
    assert "sense>" not in proc.stdout and BANNER not in proc.stdout
    assert proc.stderr == ("<repl>:5:7: SenseNameError: undefined variable 'nope'\n"
                           "    5 | print(nope)\n"
                           "      |       ^\n")


# --------------------------------------------------------------------- a real terminal


def test_in_a_pseudo_terminal(tmp_path):
    # A real pty through pty.fork (tests/test_repl_pty.py has the rest): no pexpect needed.
    from test_repl_pty import PtyRepl
    child = PtyRepl(tmp_path, "repl")
    try:
        child.expect(BANNER)
        child.prompt()
        child.line("def f(x):")
        child.expect("...    ")
        child.line("return x * 2")              # indented for us
        child.line("")
        child.prompt().line("print(f(21))")
        child.expect("42\n")
        child.prompt().send(UP + "\r")
        child.expect("42\n")
        child.prompt().send("\x04")
        assert child.wait() == 0
    finally:
        child.close()
    with open(os.path.join(str(tmp_path), "sense", "repl_history"), encoding="utf-8") as fh:
        assert "print(f(21))" in fh.read()
