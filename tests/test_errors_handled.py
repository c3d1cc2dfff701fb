"""Errors a program handles (EXTENSIONS.md E4): what catching must not undo or hide (limits,
actions, audit, sessions, labels), saved agents with running handlers, the REPL, and try/finally
control flow on both tiers held to a Python model (tests/programs/errors_handled/ has the rest)."""

from __future__ import annotations

import io
import shutil

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from saved_state import read_state, write_state
from test_limits import run_vm, sensevm
from test_provenance_routes import HEAD as LAUNDER_HEAD
from test_tiers import _run_source

TIERS = ("1", "2")


def run(tmp_path, source, tier="1"):
    out, error, *_ = _run_source(tmp_path, source, tier)
    return out.splitlines(), error


# ----------------------------------------------------------------------------- limits

LIMITED = '''def spin():
    while true:
        x = 1
try:
    spin()
except:
    print("caught the limit")
finally:
    print("finally ran")
'''


# The string limit is met once: a handler could print (a step limit, met, is met again at the
# handler's first call).
GROWING = '''s = "ab"
try:
    while true:
        s = s + s
except:
    print("caught the limit")
finally:
    print("finally ran")
'''


@pytest.mark.parametrize("tier", TIERS)
def test_a_resource_limit_runs_no_handler_and_no_finally(tmp_path, tier):
    out, err, _ = run_vm(LIMITED, tmp_path, tier, max_steps=2000)
    assert out == ""
    assert type(err).__name__ == "SenseLimitError" and err.limit == "steps"


def test_a_resource_limit_exits_4_from_the_command_line(tmp_path):
    (tmp_path / "spin.sns").write_text(LIMITED)
    proc = sensevm(["run", "--max-steps", "2000", "spin.sns"], tmp_path)
    assert proc.returncode == 4, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr


@pytest.mark.parametrize("tier", TIERS)
def test_a_memory_limit_is_not_caught(tmp_path, tier):
    out, err, _ = run_vm(GROWING, tmp_path, tier, max_string=1000)
    assert out == ""
    assert type(err).__name__ == "SenseLimitError" and err.limit == "string"


def test_a_timeout_is_not_caught_either(tmp_path):
    out, err, _ = run_vm(LIMITED, tmp_path, "1", timeout=0.3)
    assert out == "" and err.limit == "timeout"


# ----------------------------------------------------------------------------- nothing undone

ACTIONS = '''irreversible action boom() requires ledger.write:
    print("body runs")
    x = 1 / 0
irreversible action wire() requires payment.send:
    print("never")
policy:
    allow ledger.write
    deny payment.send
b = boom()
b.verify()
try:
    b.commit()
except SenseRuntimeError as e:
    print("caught: " + e.message)
print(b.state)
w = wire()
try:
    w.verify()
    w.commit()
except SensePolicyError as e:
    print("refused: " + e.class)
print(w.state)
for line in audit_log():
    print(line)
'''


@pytest.mark.parametrize("tier", TIERS)
def test_catching_leaves_a_failed_action_failed_and_a_denial_audited(tmp_path, tier):
    lines, err = run(tmp_path, ACTIONS, tier)
    assert err is None, err
    assert lines[:5] == ["body runs", "caught: division by zero", "failed", "refused: SensePolicyError",
                         "denied"]
    audit = lines[5:]
    assert any("boom" in line and "failed" in line for line in audit), audit
    assert any("wire" in line and "denied" in line for line in audit), audit


SESSION_DECLS = '''irreversible action send(to: String) requires email.send:
    print("SENT", to)
policy:
    allow email.send
def run(a):
    a.verify()
    return a.commit()
'''


def _session(tmp_path, body):
    from sensec.driver import compile_source
    from sensevm.base.errors import SenseError
    from sensevm.bytecode.snb import dump
    from sensevm.bytecode.verify import load_verified
    from sensevm.runtime.vm import VM
    verified = load_verified(dump(compile_source(SESSION_DECLS + body, str(tmp_path / "m.sns"))))
    out = io.StringIO()
    try:
        VM(verified, stdout=out).run()
    except SenseError as err:
        return out.getvalue().splitlines(), err
    return out.getvalue().splitlines(), None


def test_an_error_caught_inside_a_session_does_not_abort_it(tmp_path):
    lines, err = _session(tmp_path, '''session weekly as s:
    run(send("a@x.example"))
    try:
        x = 1 / 0
    except:
        print("caught inside")
    print(s.state)
    s.commit(s.manifest().hash)
    print(s.state)
''')
    assert err is None, err
    assert lines == ["caught inside", "open", "SENT a@x.example", "committed"]


def test_an_error_leaving_the_session_still_aborts_it(tmp_path):
    lines, err = _session(tmp_path, '''keep = nil
try:
    session weekly as s:
        keep = s
        run(send("a@x.example"))
        x = 1 / 0
except SenseRuntimeError:
    print("caught outside")
print(keep.state)
''')
    assert err is None, err
    assert lines == ["caught outside", "aborted"]


# ----------------------------------------------------------------------------- provenance

@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("route, body", [
    # the message quotes the page's text (cannot convert '...' to Int)
    # (read after the try statement, where the handler's own pc label has closed)
    ("message", 'keep = nil\ntry:\n    int(page())\nexcept SenseRuntimeError as e:\n'
                '    keep = e\nprint(asks(launder(keep.message)))\n'),
    ("str_of_error", 'keep = nil\ntry:\n    int(page())\nexcept SenseError as e:\n'
                     '    keep = e\nprint(asks(launder(str(keep))))\n'),
    # raise of a labelled string keeps its labels
    ("raised_text", 'keep = nil\ntry:\n    raise page()\nexcept SenseError as e:\n'
                    '    keep = e\nprint(asks(launder(keep.message)))\n'),
    # whether the handler runs depends on the page (an index out of bounds quotes it, behind
    # no branch): the digits it misses, stored by the handler, give the page's number away
    ("caught_index", 'p = str(count())\nm = ""\nfor i in range(2):\n'
                     '    for d in range(10):\n        try:\n            x = [0][int(p[i]) - d]\n'
                     '        except:\n            m = m + str(d)\nprint(asks(m))\n'),
    # whether the handler runs is a branch on the page: each character picked by catching
    ("caught_branch", 'p = page()\nout = ""\nfor i in range(20):\n'
                      '    for k in ["a", "e", "i", "l", "m", "o", "r", "v", "x", "y", "@", ".", "p"]:\n'
                      '        try:\n            if p[i] == k:\n                raise "hit"\n'
                      '        except:\n            out = out + k\nprint(asks(out))\n'),
])
def test_a_caught_error_keeps_the_labels_of_what_it_quotes(tmp_path, tier, route, body):
    lines, err = run(tmp_path, LAUNDER_HEAD + body, tier)
    assert err is None, err
    assert lines[-1] == "true"


@pytest.mark.parametrize("tier", TIERS)
def test_the_same_routes_from_clean_text_do_not_ask(tmp_path, tier):
    lines, err = run(tmp_path, LAUNDER_HEAD + '''a = "mallory@evil.example"
try:
    int(a)
except SenseRuntimeError as e:
    print(asks(launder(e.message)))
try:
    raise a
except SenseError as e:
    print(asks(launder(str(e))))
''', tier)
    assert err is None, err
    assert lines == ["false", "false"]


# ----------------------------------------------------------------------------- saved agents

AGENT = '''agent clerk:
    first = nil
    try:
        int("one")
    except SenseRuntimeError as e:
        first = e
    for k in [1, 2]:
        try:
            try:
                answer = ask_human("go on?")
                print("heard", answer, k)
                if answer == "fail":
                    x = 1 / 0
            except SenseRuntimeError as e:
                print("caught after resume:", e.message, e.line)
        finally:
            print("finally", k)
        break
    print(first.message, first.line)
    try:
        raise first
    except SenseError as again:
        print("again:", str(again))
start(clerk)
'''


@pytest.fixture
def paused(tmp_path):
    (tmp_path / "clerk.sns").write_text(AGENT)
    from test_saved_state import sensevm as run_cli
    proc = run_cli("run", "clerk.sns", "--state-dir", "state", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    return tmp_path / "state"


def _resume(directory, answer):
    from test_saved_state import resume
    return resume(directory, answer)


def test_a_paused_agent_keeps_its_handlers_and_errors(paused, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(paused, copy)
    code, out, err = _resume(paused, "fail")
    assert code == 0, err
    assert out.splitlines() == [
        "heard fail 1", "caught after resume: division by zero 13", "finally 1",
        "cannot convert 'one' to Int 4", "again: SenseRuntimeError: cannot convert 'one' to Int"]
    code, out, err = _resume(copy, "fine")
    assert code == 0, err
    assert out.splitlines()[:2] == ["heard fine 1", "finally 1"]


def test_a_forged_handler_is_refused(paused):
    state = read_state(paused, "clerk")
    (agent,) = [o for o in state["objects"] if o["type"] == "agent"]
    frame = agent["frames"][0]
    handlers = frame["tests"]
    assert [h[0] for h in handlers] == [None, None]        # two try handlers are running
    handlers[-1][1] += 1                                   # resume the inner one elsewhere
    write_state(paused, "clerk", state)
    code, out, err = _resume(paused, "fail")
    assert (code, out) == (1, ""), err
    assert "not the handler the verifier proved there" in err


def test_a_dropped_handler_is_refused(paused):
    state = read_state(paused, "clerk")
    (agent,) = [o for o in state["objects"] if o["type"] == "agent"]
    agent["frames"][0]["tests"].pop()
    write_state(paused, "clerk", state)
    code, out, err = _resume(paused, "fail")
    assert (code, out) == (1, ""), err
    assert "1 running handlers where the verifier proved 2" in err


def test_a_forged_error_class_is_refused(paused):
    state = read_state(paused, "clerk")
    (error,) = [o for o in state["objects"] if o["type"] == "error"]
    error["class"] = "SenseLimitError"
    write_state(paused, "clerk", state)
    code, out, err = _resume(paused, "fail")
    assert (code, out) == (1, ""), err
    assert "not an error class a program can catch" in err


# ----------------------------------------------------------------------------- the REPL

def test_the_repl_waits_for_a_whole_try_statement():
    from sensevm.cli.interactive import needs_more
    assert needs_more("try:\n")
    assert needs_more("try:\n    x = 1 / 0\nexcept SenseRuntimeError as e:\n")
    assert needs_more("try:\n    x = 1 / 0\nexcept SenseRuntimeError as e:\n    print(e)\n")
    assert not needs_more("try:\n    x = 1 / 0\nexcept:\n    print(1)\n\n")


def test_a_try_block_typed_in_the_repl():
    from test_repl import TypedRepl
    from sensevm.cli.repl import BANNER
    with TypedRepl() as repl:
        # Typed as at a terminal: the REPL indents after ':', Backspace (\x7f) dedents.
        repl.type("try:\rprint(1 / 0)\r\x7fexcept SenseRuntimeError as e:\r"
                  "print(\"caught \" + e.message)\r\x7ffinally:\rprint(\"done\")\r\r")
        repl.wait_for("done\n")
        assert repl.finish() == 0
    assert repl.out.text() == BANNER + "\ncaught division by zero\ndone\n"


# ----------------------------------------------------------------------------- the property

# Small programs of nested try/except/finally, loops, break, continue, return and raise, in
# Sense and in Python; both must print the same. Jumps never leave a finally block (Sense
# refuses that at compile time).

def _block(depth, loops, final):
    return st.lists(_stmt(depth, loops, final), min_size=1, max_size=3)


def _stmt(depth, loops, final):
    leaves = [st.tuples(st.just("print"))]
    if not final:
        leaves.append(st.tuples(st.just("return")))
        if loops:
            leaves += [st.tuples(st.just("break")), st.tuples(st.just("continue"))]
    leaves.append(st.tuples(st.just("raise")))
    if depth == 0:
        return st.one_of(leaves)
    inner = depth - 1
    compound = [
        st.tuples(st.just("try_finally"), _block(inner, loops, final), _block(inner, 0, True)),
        st.tuples(st.just("try_except"), _block(inner, loops, final), _block(inner, loops, final)),
        st.tuples(st.just("loop"), _block(inner, 1, final)),
    ]
    return st.one_of(leaves + compound)


def _render(stmts, python: bool):
    lines, counter = [], [0]

    def emit(indent, text):
        lines.append("    " * indent + text)

    def walk(block, indent):
        for s in block:
            kind = s[0]
            counter[0] += 1
            n = counter[0]
            if kind == "print":
                emit(indent, f"print({n})")
            elif kind == "return":
                emit(indent, f"return {n}")
            elif kind in ("break", "continue"):
                emit(indent, kind)
            elif kind == "raise":
                emit(indent, f'raise SenseErr("e{n}")' if python else f'raise "e{n}"')
            elif kind == "loop":
                emit(indent, f"for i{n} in range(2):")
                walk(s[1], indent + 1)
            else:
                emit(indent, "try:")
                walk(s[1], indent + 1)
                if kind == "try_finally":
                    emit(indent, "finally:")
                else:
                    emit(indent, "except SenseErr as e:" if python else "except SenseError as e:")
                    emit(indent + 1, "print(str(e))" if python else "print(e.message)")
                walk(s[2], indent + 1)

    emit(0, "def f():")
    walk(stmts, 1)
    emit(1, "return 0")
    if python:
        lines[:0] = ["class SenseErr(Exception):", "    pass"]
        lines += ["try:", "    print(f())", "except SenseErr as e:", '    print("error " + str(e))']
    else:
        lines += ["try:", "    print(f())", "except SenseError as e:",
                  '    print("error " + e.message)']
    return "\n".join(lines) + "\n"


def _python_output(source: str) -> list:
    import contextlib
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "<model>", "exec"), {})
    return out.getvalue().splitlines()


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(_block(3, 0, False))
def test_try_finally_control_flow_matches_python(tmp_path_factory, stmts):
    sense, python = _render(stmts, False), _render(stmts, True)
    expected = _python_output(python)
    tmp = tmp_path_factory.mktemp("flow")
    for tier in TIERS:
        lines, err = run(tmp, sense, tier)
        assert err is None, (err, sense)
        assert lines == expected, (tier, sense)


# ----------------------------------------------------------------------------- compile errors

@pytest.mark.parametrize("source, message, at", [
    ("try:\n    x\nprint(1)\n",
     "expected 'except' or 'finally' after the 'try' block (got IDENT 'print')", (3, 1)),
    ("try:\n    x\n", "expected 'except' or 'finally' after the 'try' block (got EOF '')", (3, 1)),
    ("except:\n    x\n", "'except' must follow a 'try' block (or an 'except' clause of one)",
     (1, 1)),
    ("finally:\n    x\n", "'finally' must follow a 'try' block (or an 'except' clause of one)",
     (1, 1)),
    ("try:\n    x\nexcept SenseError as:\n    y\n", "expected a name after 'as' (got COLON ':')",
     (3, 21)),
    ("try:\n    x\nexcept Oops:\n    y\n",
     "unknown error class 'Oops' (one of: SenseError, SenseSyntaxError, SenseNameError, "
     "SenseTypeError, SenseRuntimeError, SenseImportError, SensePolicyError, "
     "SenseApprovalError, SenseSessionError)", (3, 8)),
    ("try:\n    x\nexcept SenseLimitError:\n    y\n",
     "SenseLimitError cannot be caught: a resource limit always ends the run", (3, 8)),
    ("try:\n    x\nexcept:\n    y\nexcept SenseError:\n    z\n",
     "a bare 'except:' must be the last clause (it catches every error, so the clauses after "
     "it could never run)", (3, 1)),
    ("def f():\n    raise\n",
     "a bare 'raise' re-raises the error being handled: it must be inside an 'except' block",
     (2, 5)),
    ("try:\n    x\nexcept:\n    def g():\n        raise\n",
     "a bare 'raise' re-raises the error being handled: it must be inside an 'except' block",
     (5, 9)),
    ("def f():\n    try:\n        x\n    finally:\n        return 1\n",
     "'return' cannot leave a 'finally' block (it would drop the error that may be passing "
     "through it)", (5, 9)),
    ("while true:\n    try:\n        x\n    finally:\n        continue\n",
     "'continue' cannot leave a 'finally' block (it would drop the error that may be passing "
     "through it)", (5, 9)),
])
def test_compile_errors_are_positioned(tmp_path, source, message, at):
    from sensec.driver import compile_source
    from sensevm.base.errors import SenseSyntaxError
    with pytest.raises(SenseSyntaxError) as info:
        compile_source(source, str(tmp_path / "m.sns"))
    err = getattr(info.value, "errors", [info.value])[0]
    assert (err.message, (err.pos.line, err.pos.col)) == (message, at)
    assert err.path == str(tmp_path / "m.sns")


def test_a_loop_inside_finally_may_break(tmp_path):
    lines, err = run(tmp_path, "try:\n    print(1)\nfinally:\n    for i in range(3):\n"
                               "        print(i)\n        break\n")
    assert err is None and lines == ["1", "0"]


def test_a_5_1_file_still_loads(tmp_path):
    """A file of format 5.1 (no try opcodes) loads and runs with this VM."""
    import struct
    from sensec.driver import compile_source
    from sensevm.bytecode import snb
    from sensevm.bytecode.opcodes import FINGERPRINTS
    from sensevm.bytecode.verify import load_verified
    data = bytearray(snb.dump(compile_source('print("old")\n', str(tmp_path / "o.sns"))))
    struct.pack_into("<H", data, 10, 1)
    data[16:24] = FINGERPRINTS[1]
    import zlib
    data[-4:] = struct.pack("<I", zlib.crc32(bytes(data[:-4])))
    assert load_verified(bytes(data)).program.codes
