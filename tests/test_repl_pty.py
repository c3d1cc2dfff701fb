"""The REPL in a real pseudo-terminal (pty.fork: no pexpect), keys typed as a user types them.

Echo of expression values, auto-indent of a def typed line by line, exit(), Ctrl-C at the
prompt and during a running input, Ctrl-D, and line numbers counted across the session; plus
`sensevm` alone starting the REPL in a terminal and printing its usage through a pipe.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BANNER = "Sense (sensevm)"
_ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]|\x1b\].*?\x07")

pty = pytest.importorskip("pty")


def _env(tmp_path):
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                XDG_DATA_HOME=str(tmp_path), TERM="xterm", NO_COLOR="1",
                # No terminal answers cursor-position requests here; don't wait for one.
                PROMPT_TOOLKIT_NO_CPR="1")


class PtyRepl:
    """``python -m sensevm ARGS`` with a pty as its controlling terminal."""

    def __init__(self, tmp_path, *args: str):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:                                    # the child
            try:
                os.chdir(ROOT)
                os.execve(sys.executable, [sys.executable, "-m", "sensevm", *args],
                          _env(tmp_path))
            finally:
                os._exit(127)
        self.raw = ""
        self.mark = 0                                        # where expect() looks from
        self.status = None

    def read(self, timeout: float = 0.1) -> None:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if ready:
            try:
                data = os.read(self.fd, 65536)
            except OSError:                                  # EIO: the child has gone
                data = b""
            if not data:
                raise EOFError
            self.raw += data.decode("utf-8", "replace")

    @property
    def text(self) -> str:
        """What the terminal shows, escape sequences dropped, CRLF as LF."""
        return _ANSI.sub("", self.raw).replace("\r\n", "\n")

    def expect(self, needle: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.text
            at = text.find(needle, self.mark)
            if at >= 0:
                self.mark = at + len(needle)
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} never appeared after {self.mark} in:\n{text}")
            try:
                self.read()
            except EOFError:
                raise AssertionError(f"the REPL ended before {needle!r}:\n{text}")

    def send(self, keys: str) -> "PtyRepl":
        os.write(self.fd, keys.encode("utf-8"))
        return self

    def line(self, text: str) -> "PtyRepl":
        """Type a line key by key as a person does (prompt_toolkit reads them one at a time),
        then Enter."""
        for ch in text:
            self.send(ch)
        return self.send("\r")

    def prompt(self) -> "PtyRepl":
        """Wait for the next prompt and for the terminal to settle into it (keys sent before
        it is up are read by the terminal's cooked mode, where Ctrl-D is no key)."""
        self.expect("sense> ")
        time.sleep(0.3)
        return self

    def wait(self, timeout: float = 20.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.read()
            except EOFError:
                pass
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                return self.status
        raise AssertionError(f"the REPL did not leave:\n{self.text}")

    def close(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(self.fd)


@pytest.fixture
def repl(tmp_path):
    child = PtyRepl(tmp_path, "repl")
    child.expect(BANNER)
    child.expect("sense> ")
    yield child
    child.close()


def test_expression_values_are_echoed_and_assignments_are_not(repl):
    repl.line("x = 1 + 2")
    repl.expect("sense> ")
    repl.line("x")
    repl.expect("\n3\n")
    repl.line('name = "ada"')
    repl.expect("sense> ")
    repl.line('[name, {"k": 1.5}, nil]')
    repl.expect('\n["ada", {"k": 1.5}, nil]\n')
    repl.line('print(name)')                 # print's own output, and nil is not echoed
    repl.expect("\nada\n")
    repl.prompt().line("nil")                # typed into the prompt, not the cooked terminal
    repl.prompt().line("exit()")
    assert repl.wait() == 0
    assert not re.search(r"^nil$", repl.text, re.M)


def test_a_def_typed_line_by_line_is_auto_indented(repl):
    repl.line("def greet(who):")
    repl.expect("...    ")
    # Typed without indentation: the continuation line starts 4 spaces in.
    repl.line('if who == "":')
    repl.line('return "nobody"')             # 8 spaces in, after the nested ':'
    repl.line('return "hi " + who')          # return dedented the line after it ...
    repl.line("")                            # ... an empty line ends the def
    repl.expect("sense> ")
    repl.line('greet("ada")')
    repl.expect('\n"hi ada"\n')
    repl.line('greet("")')
    repl.expect('\n"nobody"\n')
    repl.prompt().send("\x04")                        # Ctrl-D
    assert repl.wait() == 0
    shown = repl.text
    assert '...            return "nobody"' in shown
    assert "SenseSyntaxError" not in shown and "SenseError" not in shown


def test_quit_and_exit_words_leave_with_status_0(tmp_path):
    for word in ("quit()", "exit", "quit"):
        child = PtyRepl(tmp_path, "repl")
        try:
            child.expect("sense> ")
            child.line(word)
            assert child.wait() == 0, word
        finally:
            child.close()


def test_ctrl_c_clears_the_line_and_interrupts_a_running_input(repl):
    repl.send("print(1234")
    repl.expect("print(1234")
    repl.send("\x03")                        # Ctrl-C at the prompt: the line is dropped
    repl.expect("sense> ")
    repl.line("n = 0")
    repl.line("while true:")
    repl.line("n = n + 1")
    repl.line("")
    time.sleep(0.5)                          # the loop is running
    repl.send("\x03")
    repl.expect("KeyboardInterrupt\n")
    repl.expect("sense> ")
    repl.line("40 + 2")
    repl.expect("\n42\n")
    repl.line("n > 0")                       # the loop ran, and its state is still there
    repl.expect("\ntrue\n")
    repl.prompt().send("\x04")
    assert repl.wait() == 0
    assert "1234\n" not in repl.text.replace("print(1234", "")


def test_errors_name_the_line_of_the_session(repl):
    repl.line("a = 1")
    repl.line("def f():")
    repl.line("return nope")
    repl.line("")
    repl.expect("sense> ")
    # The empty line that closed the def is not part of it: f() is line 4, and the error is
    # in f, on line 3.
    repl.line("f()")
    repl.expect("undefined variable 'nope'")
    repl.line("print(oops)")                  # line 5
    repl.expect("undefined variable 'oops'")
    repl.prompt().send("\x04")
    assert repl.wait() == 0
    # All the session printed, read once the REPL has left: what expect() returned can end
    # before the source line that follows the error's first line has arrived through the pty.
    out = repl.text
    assert "<repl>:3:12: SenseNameError: undefined variable 'nope'" in out
    assert "    3 |     return nope" in out
    assert "<repl>:5:7: SenseNameError: undefined variable 'oops'" in out
    assert "    5 | print(oops)" in out
    assert "[line 1]" not in out


def test_sensevm_alone_in_a_terminal_starts_the_repl(tmp_path):
    child = PtyRepl(tmp_path)
    try:
        child.expect(BANNER)
        child.expect("sense> ")
        child.line("6 * 7")
        child.expect("\n42\n")
        child.line("exit()")
        assert child.wait() == 0
    finally:
        child.close()


def test_sensevm_alone_through_a_pipe_prints_the_usage(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "sensevm"], input="print(1)\n",
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env=_env(tmp_path))
    assert proc.returncode == 2
    assert "Usage: sensevm" in proc.stdout + proc.stderr
