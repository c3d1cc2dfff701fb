"""connect_mcp (spec 18.6, docs/mcp.md): a real stdio MCP server (tests/mcp_server.py, written
with the SDK's own server class) started from Sense code, its tools called by a scripted model
through ask_with_tools, under policy, audit, the second look, failures and shutdown."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import shlex
import subprocess
import sys
import time

import pytest

from conftest import ROOT, reference_binary
from sensevm.base.errors import SenseApprovalError, SenseError, SensePolicyError, SenseRuntimeError

HAVE_MCP = importlib.util.find_spec("mcp") is not None
needs_mcp = pytest.mark.skipif(not HAVE_MCP, reason="the optional 'mcp' package is not "
                               "installed (pip install mcp, or '.[test]')")

SERVER = os.path.join(ROOT, "tests", "mcp_server.py")
PY = sys.executable
CONNECT = f'connect_mcp("demo", "{PY}", ["{SERVER}"]'
HEAD = 'model bot = inference("scripted", "s.json")\nset delegation = bot\n'


class Run:
    def __init__(self, stdout, error, vm):
        self.stdout = stdout
        self.lines = stdout.splitlines()
        self.error = error
        self.vm = vm

    @property
    def records(self):
        return list(self.vm.audit.records)


def run(tmp_path, source, script=None, *, dry_run=False, second_look=True, tier=None,
        grant=True, dry_run_allow=()):
    """Compile and run ``source`` as main.sns in ``tmp_path`` (s.json: the model's script).

    ``grant``: the host grants ``mcp.connect`` (an allow rule on the builtins, outside the
    program), so that tests of what a connection does need not change their line numbers;
    the tests of the grant itself run without it."""
    from sensec.driver import compile_file
    from sensevm.bytecode.snb import dump
    from sensevm.bytecode.verify import load_verified
    from sensevm.runtime.vm import VM
    if script is not None:
        (tmp_path / "s.json").write_text(json.dumps(script), encoding="utf-8")
    path = tmp_path / "main.sns"
    path.write_text(source, encoding="utf-8")
    out = io.StringIO()
    vm = None
    try:
        verified = load_verified(dump(compile_file(str(path))))
        vm = VM(verified, stdout=out, dry_run=dry_run, second_look=second_look, tier=tier,
                dry_run_allow=dry_run_allow)
        if grant:
            vm.builtins.policy = {"mcp.connect": "allow"}
        vm.run()
    except SenseError as err:
        return Run(out.getvalue(), err, vm)
    return Run(out.getvalue(), None, vm)


def calls(*pairs):
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in pairs]}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) is not running.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# ----------------------------------------------------------------------------- argument checks
# (before anything is imported or started: these need no mcp package)

USAGE = ("connect_mcp() expects (name: String, command: String, args: Array<String>, "
         "capability: String = nil)")


@pytest.mark.parametrize("call, message", [
    ('connect_mcp("demo", "python3")', USAGE),
    ('connect_mcp("a", "b", [], "c", "d")', USAGE),
    ('connect_mcp(1, "python3", [])', "connect_mcp()'s name argument must be a String"),
    ('connect_mcp("d", 2, [])', "connect_mcp()'s command argument must be a String"),
    ('connect_mcp("d", "x", [1])', "connect_mcp()'s args argument must be an Array of Strings"),
    ('connect_mcp("d", "x", "a")', "connect_mcp()'s args argument must be an Array of Strings"),
    ('connect_mcp("d", "x", [], 5)', "connect_mcp()'s capability argument must be a String"),
    ('connect_mcp("d", "x", [], timeout: 0)',
     "connect_mcp()'s timeout option must be a positive number of seconds"),
    ('connect_mcp("d", "x", [], retries: 2)',
     "connect_mcp(): unknown option(s) retries -- supported: timeout"),
])
def test_argument_errors_are_the_references(tmp_path, call, message):
    out = run(tmp_path, f"print(1)\nx = {call}\n")
    assert type(out.error) is SenseRuntimeError
    assert out.error.message == message
    assert not out.error.located                 # a builtin's error: no [line N], as the reference
    assert out.error.pos.line == 2               # ... but we still know where (FILE:2:COL)


# ----------------------------------------------------------------------------- the value

VALUE_PROGRAM = f'''s = {CONNECT})
print(s)
print(type_of(s))
print(s.name)
print(s.tools)
print(len(s.tools))
t = s.tools[0]
print(type_of(t))
print(t)
print(s == s)
print(s.tools[0] == s.tools[0], s.tools[0] == s.tools[1])
b = {CONNECT[:-1]}, "--no-tools"])
c = {CONNECT[:-1]}, "--no-tools"])
print(b == c, b == b, b)
c.close()
close = s.close
print(close)
print(type_of(close))
print(s.close())
print(s.close())
print(s)
def takes(x: McpServer, y: Tool) -> String:
    return x.name
print(takes(b, t))
'''

VALUE_OUTPUT = [
    "<mcp server demo (7 tools)>",
    "McpServer",
    "demo",
    "[<mcp tool demo.echo>, <mcp tool demo.add>, <mcp tool demo.fail>, <mcp tool demo.slow>, "
    "<mcp tool demo.crash>, <mcp tool demo.pid>, <mcp tool demo.contact>]",
    "7",
    "Tool",
    "<mcp tool demo.echo>",
    "true",
    "true false",
    "false true <mcp server demo (0 tools)>",
    "<builtin demo.close>",
    "Function",
    "nil",
    "nil",
    "<mcp server demo (7 tools)>",
    "demo",
]


@needs_mcp
@pytest.mark.parametrize("tier", ["1", "2"])
def test_the_server_value_lists_tools_and_closes(tmp_path, tier):
    out = run(tmp_path, VALUE_PROGRAM, tier=tier)
    assert out.error is None, out.error
    assert out.lines == VALUE_OUTPUT
    assert out.vm.mcp_servers and all(s.bridge.closed for s in out.vm.mcp_servers)
    # Connections are recorded host-side only: audit_log() keeps the reference's lines.
    connected = [r for r in out.records if r.kind == "mcp"]
    assert [r.event for r in connected] == ["connected"] * 3 + ["closed"] * 2
    assert all(r.host_only for r in connected)
    assert connected[0].detail.endswith("(7 tools)")


@needs_mcp
@pytest.mark.parametrize("member, message", [
    ("s.foo", "mcp server 'demo' has no member 'foo'"),
    ("s.tools[0].name", "cannot access member 'name' on type Tool"),
    ('s.tools[0]("x")', "value of type Tool is not callable"),
    ("s.close(1)", "'demo.close' expects 0 argument(s), got 1"),
])
def test_members_and_calls_that_do_not_exist(tmp_path, member, message):
    out = run(tmp_path, f"s = {CONNECT})\nx = {member}\n")
    assert isinstance(out.error, SenseRuntimeError)
    assert out.error.message == message
    assert out.error.text == f"[line 2] {message}"


def _reference_with_mcp():
    ref = reference_binary()
    if ref is None:
        return None
    python = os.path.join(os.path.dirname(ref), "python")
    probe = subprocess.run([python, "-c", "import mcp"], capture_output=True)
    return ref if probe.returncode == 0 else None


def test_same_output_as_the_reference(tmp_path):
    if not HAVE_MCP:
        pytest.skip("the optional 'mcp' package is not installed")
    ref = _reference_with_mcp()
    if ref is None:
        pytest.skip("the reference interpreter, with mcp in its venv, is not installed "
                    "(/work/refvenv/bin/pip install mcp)")
    (tmp_path / "v.sns").write_text(VALUE_PROGRAM, encoding="utf-8")
    proc = subprocess.run([ref, "run", "v.sns"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == VALUE_OUTPUT


# ----------------------------------------------------------------------------- calls by a model

TOOLS_PROGRAM = HEAD + f'''s = {CONNECT})
reply = ask_with_tools("use the tools", s.tools)
print(reply.value)
for e in audit_log():
    print(e)
'''


@needs_mcp
@pytest.mark.parametrize("tier", ["1", "2"])
def test_a_model_calls_the_servers_tools_through_the_tool_path(tmp_path, tier):
    script = [calls(("demo.echo", {"text": "hello"}), ("demo.add", {"a": 2, "b": 40})),
              calls(("demo.fail", {"message": "boom"}), ("echo", {"text": "x"})),
              {"text": "{results}"}]
    out = run(tmp_path, TOOLS_PROGRAM, script, tier=tier)
    assert out.error is None, out.error
    # The server's wording of its own error differs between SDK versions ("...: boom" in 1.x).
    failed = out.lines[0].removeprefix("error: [line 4] mcp tool 'demo.fail' failed: ")
    assert failed.startswith("RuntimeError: Error executing tool fail")
    assert out.lines == [
        "error: [line 4] mcp tool 'demo.fail' failed: " + failed,
        "error: no such tool 'echo'",
        "[line 4] tool 'demo.echo' -> called",
        "[line 4] tool 'demo.add' -> called",
        f"[line 4] tool 'demo.fail' -> failed ({failed})",
        "[line 4] model 'bot' -> called",
    ]
    # What the model was sent back: each result under the tool's qualified name.
    received = _provider(out).received
    assert received[1][-2:] == [
        {"role": "tool", "id": "call_1_1", "name": "demo.echo", "text": "hello"},
        {"role": "tool", "id": "call_1_2", "name": "demo.add", "text": "42"}]


def _provider(out):
    """The provider of the program's model ``bot`` (its ``received``: what it was sent)."""
    return _MAIN_SCOPES[id(out.vm)].vars["bot"].provider


_MAIN_SCOPES: dict = {}


@pytest.fixture(autouse=True)
def _keep_main_scope(monkeypatch):
    """Remember each VM's module scope, so a test can look at the values a program made."""
    from sensevm.runtime import vm as vm_module

    def _run_main(self):
        from sensevm.runtime.values import Scope
        scope = Scope(self.builtins, tag="module")
        _MAIN_SCOPES[id(self)] = scope
        return self.run_unit(self.prepared, scope)
    monkeypatch.setattr(vm_module.VM, "_run_main", _run_main)
    yield
    _MAIN_SCOPES.clear()


@needs_mcp
def test_tools_in_a_skill_with_lineage(tmp_path):
    script = [calls(("demo.echo", {"text": "hi"})), {"text": "{results}"}]
    src = HEAD + f'''s = {CONNECT})
k = skill("web", "things from the web", s.tools)
print(k)
agent helper:
    print(ask_with_tools("go", [k]).value)
start(helper)
for e in audit_log():
    print(e)
'''
    out = run(tmp_path, src, script)
    assert out.error is None, out.error
    assert out.lines == ["<skill web (7 tools)>", "hi",
                         "[line 7] tool 'demo.echo' -> called (via agent:helper)",
                         "[line 7] model 'bot' -> called (via agent:helper)"]
    sent = _provider(out).received[0]
    assert sent[0]["text"] == "Available skills:\n- web: things from the web\n\ngo"


@needs_mcp
def test_the_model_sees_the_servers_schema(tmp_path):
    script = [{"text": "ok"}]
    src = HEAD + f"s = {CONNECT})\nprint(ask_with_tools(\"x\", s.tools).value)\n"
    seen = {}
    from sensevm.world import providers
    original = providers.ScriptedProvider.turn

    def turn(self, conversation, specs):
        seen["specs"] = specs
        return original(self, conversation, specs)
    providers.ScriptedProvider.turn = turn
    try:
        out = run(tmp_path, src, script)
    finally:
        providers.ScriptedProvider.turn = original
    assert out.error is None, out.error
    add = next(s for s in seen["specs"] if s["name"] == "demo.add")
    assert add["description"] == "Add two integers."
    assert add["parameters"]["properties"]["a"]["type"] == "integer"
    assert sorted(add["parameters"]["required"]) == ["a", "b"]


def test_a_sense_tool_and_an_mcp_tool_of_the_same_name_do_not_collide(tmp_path):
    if not HAVE_MCP:
        pytest.skip("the optional 'mcp' package is not installed")
    script = [calls(("echo", {"text": "local"}), ("demo.echo", {"text": "remote"})),
              {"text": "{results}"}]
    src = HEAD + f'''tool echo(text: String) returns String "local echo":
    return "sense:" + text
s = {CONNECT})
tools = [echo]
for t in s.tools:
    push(tools, t)
print(ask_with_tools("x", tools).value)
'''
    out = run(tmp_path, src, script)
    assert out.error is None, out.error
    assert out.lines == ["sense:local", "remote"]


# ----------------------------------------------------------------------------- policy

@needs_mcp
def test_the_tool_capability_is_checked_at_each_call_and_denials_are_audited(tmp_path):
    script = [calls(("demo.echo", {"text": "a"})), {"text": "{results}"},
              calls(("demo.echo", {"text": "b"})), {"text": "{results}"}]
    src = HEAD + f'''s = connect_mcp("demo", "{PY}", ["{SERVER}"], "web.read")
print(ask_with_tools("x", s.tools).value)
def restricted():
    policy:
        deny web.read
    return ask_with_tools("y", s.tools).value
print(restricted())
for e in audit_log():
    print(e)
'''
    out = run(tmp_path, src, script)
    assert out.error is None, out.error
    assert out.lines == [
        "a",
        "error: [line 8] mcp tool 'demo.echo' requires capability 'web.read', which is "
        "denied by policy",
        "[line 4] tool 'demo.echo' -> called",
        "[line 4] model 'bot' -> called",
        "[line 8] tool 'demo.echo' -> denied (capability 'web.read' denied by policy)",
        "[line 8] model 'bot' -> called",
    ]


@needs_mcp
def test_a_callers_deny_reaches_the_tool_call_chain(tmp_path):
    # spec 21.2: the deny is in the caller, not on the lexical chain of the ask.
    script = [calls(("demo.echo", {"text": "a"})), {"text": "{results}"}]
    src = HEAD + f'''s = connect_mcp("demo", "{PY}", ["{SERVER}"], "web.read")
def ask_it():
    return ask_with_tools("y", s.tools).value
def careful():
    policy:
        deny web.read
    return ask_it()
print(careful())
'''
    out = run(tmp_path, src, script)
    assert out.error is None, out.error
    assert out.lines == ["error: [line 5] mcp tool 'demo.echo' requires capability "
                         "'web.read', which is denied by policy"]


MARKER_SERVER = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text('started')"


@pytest.mark.parametrize("where", ["top", "caller"])
def test_deny_mcp_connect_stops_it_before_any_process_starts(tmp_path, where):
    marker = tmp_path / "started"
    connect = f'connect_mcp("files", "{PY}", ["-c", "{MARKER_SERVER}", "{marker}"])'
    if where == "top":
        src = f"policy:\n    deny mcp.connect\ns = {connect}\n"
        line = 3
    else:
        src = (f"def open_it():\n    return {connect}\n"
               "def sandboxed():\n    policy:\n        deny mcp.connect\n    return open_it()\n"
               "sandboxed()\n")
        line = 2
    out = run(tmp_path, src)
    assert isinstance(out.error, SensePolicyError)
    # The reference-style text, and the message naming the deciding rule and the chain.
    assert out.error.text.endswith("connect_mcp() to 'files' requires capability "
                                   "'mcp.connect', which is denied by policy")
    rule = f"which is denied by 'deny mcp.connect' at {tmp_path / 'main.sns'}:"
    assert rule + ("2" if where == "top" else "5, in sandboxed() which called open_it()") \
        in out.error.message
    assert out.error.pos.line == line
    assert not marker.exists()
    denied = [r for r in out.vm.audit.records if r.kind == "mcp"]
    assert [(r.event, r.detail, r.host_only) for r in denied] == [
        ("denied", "capability 'mcp.connect' denied by policy; command: "
                   + shlex.join([PY, "-c", MARKER_SERVER, str(marker)]), True)]


def test_mcp_connect_needs_an_explicit_allow(tmp_path):
    """Issue 21, item 9: connect_mcp("x", "sh", ["-c", "id > F"]) ran with no policy at all.
    Starting a host process needs an explicit allow, as python.import does."""
    marker = tmp_path / "started"
    out = run(tmp_path, f'print("before")\ns = connect_mcp("x", "sh", ["-c", "id > {marker}"])\n',
              grant=False)
    assert type(out.error) is SensePolicyError and out.error.pos.line == 2
    assert out.error.message == ("connect_mcp() to 'x' requires capability 'mcp.connect', "
                                 "which is not allowed by any policy (add 'policy: allow "
                                 "mcp.connect')")
    assert out.stdout == "before\n" and not marker.exists()
    (record,) = [r for r in out.vm.audit.records if r.kind == "mcp"]
    assert record.detail == (f"capability 'mcp.connect' not allowed by any policy; command: "
                             f"sh -c 'id > {marker}'")


def test_a_dry_run_starts_no_server_unless_the_command_line_allows_it(tmp_path):
    marker = tmp_path / "started"
    src = (f'policy:\n    allow mcp.connect\n'
           f'test "connect":\n    s = connect_mcp("x", "sh", ["-c", "id > {marker}"])\n')
    out = run(tmp_path, src, grant=False, dry_run=True)
    assert out.error is None and not marker.exists()
    (test,) = out.vm.tests
    assert "is not done in a dry run" in test.error.message
    assert "--dry-run-allow mcp.connect" in test.error.message
    (record,) = [r for r in out.vm.audit.records if r.kind == "mcp"]
    assert record.detail.startswith("a dry run without --dry-run-allow mcp.connect; command: sh")


@needs_mcp
def test_allow_mcp_connect_connects(tmp_path):
    out = run(tmp_path, f"policy:\n    allow mcp.connect\ns = {CONNECT})\nprint(s)\n",
              grant=False)
    assert out.error is None, out.error
    assert out.lines == ["<mcp server demo (7 tools)>"]
    out = run(tmp_path, f"policy:\n    allow mcp.connect\ns = {CONNECT})\nprint(s)\n",
              grant=False, dry_run=True, dry_run_allow={"mcp.connect"})
    assert out.error is None and "<mcp server demo (7 tools)>" in out.lines


# ----------------------------------------------------------------------------- failures

def test_without_the_mcp_package_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "mcp", None)      # import mcp -> ImportError
    marker = tmp_path / "started"
    out = run(tmp_path, f'print("before")\ns = connect_mcp("files", "{PY}", '
                        f'["-c", "{MARKER_SERVER}", "{marker}"])\n')
    assert out.stdout == "before\n"
    assert type(out.error) is SenseRuntimeError
    assert out.error.message == (
        "connect_mcp() needs the 'mcp' Python package, which is not installed -- install it "
        "with 'pip install mcp' (or 'pip install \"sense-compiled[mcp]\"')")
    assert out.error.pos.line == 2
    assert not marker.exists()


def test_without_the_mcp_package_the_cli_prints_a_clean_error(tmp_path):
    # A directory named mcp that cannot be imported hides the real package from the VM.
    hide = tmp_path / "hide"
    (hide / "mcp").mkdir(parents=True)
    (hide / "mcp" / "__init__.py").write_text("raise ImportError('hidden for a test')\n")
    (tmp_path / "p.sns").write_text('policy: allow mcp.connect\ns = connect_mcp("demo", "x", [])\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(hide), ROOT]), NO_COLOR="1")
    proc = subprocess.run([PY, "-m", "sensevm", "run", "p.sns"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("p.sns:2:16: SenseRuntimeError: connect_mcp() needs the "
                                  "'mcp' Python package")


@needs_mcp
@pytest.mark.parametrize("command, args, reason", [
    ("/nonexistent/cmd", "[]",
     "FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/cmd'"),
    (PY, '["-c", "pass"]', "Error: Connection closed"),     # McpError (1.x) / MCPError (2.x)
])
def test_a_server_that_cannot_start_is_a_clean_error(tmp_path, command, args, reason):
    out = run(tmp_path, f'x = 1\ns = connect_mcp("bad", "{command}", {args})\n')
    assert type(out.error) is SenseRuntimeError
    assert out.error.message.startswith("connect_mcp() failed to connect to 'bad': ")
    assert out.error.message.endswith(reason)
    assert out.error.pos.line == 2
    assert [r.event for r in out.vm.audit.records if r.kind == "mcp"] == ["failed"]


@needs_mcp
def test_a_server_that_dies_mid_call_is_a_clean_error_and_the_program_goes_on(tmp_path):
    script = [calls(("demo.pid", {})), calls(("demo.crash", {})),
              calls(("demo.echo", {"text": "again"})), {"text": "{results}"}]
    out = run(tmp_path, TOOLS_PROGRAM, script)
    assert out.error is None, out.error
    received = _provider(out).received
    pid = int(received[1][-1]["text"])
    crash, again = received[2][-1]["text"], out.lines[0]
    assert crash.startswith("error: [line 4] mcp tool 'demo.crash' failed: ")
    assert crash.endswith("Error: Connection closed")
    assert again.startswith("error: [line 4] mcp tool 'demo.echo' failed: ")
    assert out.lines[1:4] == ["[line 4] tool 'demo.pid' -> called",
                              crash.replace("error: [line 4] mcp tool 'demo.crash' failed: ",
                                            "[line 4] tool 'demo.crash' -> failed (") + ")",
                              again.replace("error: [line 4] mcp tool 'demo.echo' failed: ",
                                            "[line 4] tool 'demo.echo' -> failed (") + ")"]
    assert gone(pid)


@needs_mcp
def test_a_call_that_takes_too_long_times_out(tmp_path):
    script = [calls(("demo.slow", {"seconds": 5})), calls(("demo.echo", {"text": "still here"})),
              {"text": "{results}"}]
    src = HEAD + f'''s = connect_mcp("demo", "{PY}", ["{SERVER}"], timeout: 1)
print(ask_with_tools("x", s.tools).value)
'''
    started = time.monotonic()
    out = run(tmp_path, src, script)
    assert out.error is None, out.error
    assert out.lines == ["still here"]
    assert time.monotonic() - started < 60
    received = _provider(out).received
    assert received[1][-1]["text"] == ("error: [line 4] mcp tool 'demo.slow' failed: "
                                       "TimeoutError: no reply within 1s")


# ----------------------------------------------------------------------------- lifetime

@needs_mcp
def test_close_stops_the_server_and_later_calls_fail_cleanly(tmp_path):
    script = [calls(("demo.pid", {})), {"text": "{results}"},
              calls(("demo.echo", {"text": "x"})), {"text": "{results}"}]
    src = HEAD + f'''s = {CONNECT})
pid = ask_with_tools("pid?", s.tools).value
print(pid)
s.close()
print(ask_with_tools("again", s.tools).value)
'''
    out = run(tmp_path, src, script)
    assert out.error is None, out.error
    pid = int(out.lines[0])
    assert out.lines[1] == ("error: [line 7] mcp tool 'demo.echo' failed: the connection to "
                            "'demo' is closed")
    assert gone(pid)


@needs_mcp
def test_servers_left_open_are_stopped_when_the_run_ends(tmp_path):
    script = [calls(("demo.pid", {})), {"text": "{results}"}]
    src = HEAD + f"s = {CONNECT})\nprint(ask_with_tools(\"pid?\", s.tools).value)\n"
    out = run(tmp_path, src, script)
    assert out.error is None, out.error
    assert gone(int(out.lines[0]))


@needs_mcp
def test_servers_are_stopped_when_the_program_fails(tmp_path):
    script = [calls(("demo.pid", {})), {"text": "{results}"}]
    src = HEAD + f"s = {CONNECT})\nprint(ask_with_tools(\"pid?\", s.tools).value)\nprint(1 / 0)\n"
    out = run(tmp_path, src, script)
    assert out.error is not None and out.error.message == "division by zero"
    assert gone(int(out.lines[0]))


@needs_mcp
def test_no_orphan_process_after_a_cli_run(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps([calls(("demo.pid", {})), {"text": "{results}"}]))
    (tmp_path / "p.sns").write_text(
        "policy: allow mcp.connect\n" + HEAD
        + f"s = {CONNECT})\nprint(ask_with_tools(\"pid?\", s.tools).value)\n")
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    proc = subprocess.run([PY, "-m", "sensevm", "run", "p.sns"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert gone(int(proc.stdout.strip()))


@needs_mcp
def test_the_exit_hook_stops_servers_the_vm_did_not_close(tmp_path):
    # A host program that drives the VM itself (no VM.run): atexit still stops the server.
    code = f'''
import sys, io, json
sys.path.insert(0, {ROOT!r})
from sensevm.runtime.values import Scope
from sensevm.world.mcp import b_connect_mcp
from sensevm.base.errors import Pos
class FakeFrame:
    scope = Scope(None)
    scope.policy = {{"mcp.connect": "allow"}}
    caller = origin = None
    tags = ()
    pos = Pos(1, 1)
class FakeVM:
    frame = FakeFrame()
    dry_run = False
    dry_run_allow = frozenset()
    mcp_servers = []
    audit = type("A", (), {{"append": lambda self, r: None}})()
    look = None
    def lineage(self, f):
        return ()
s = b_connect_mcp(FakeVM(), ["demo", {PY!r}, [{SERVER!r}]])
print(s.bridge.call("pid", {{}}), flush=True)
'''
    proc = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert gone(int(proc.stdout.strip()))


# ----------------------------------------------------------------------------- second look

SEND = '''irreversible action send_mail(to: String, body: String) requires email.send:
    print("sent to " + to)
'''


@needs_mcp
@pytest.mark.parametrize("second_look", [True, False])
def test_an_mcp_result_routed_to_an_outgoing_action_is_flagged(tmp_path, second_look):
    script = [calls(("demo.contact", {"name": "Mallory"})), {"text": "{results}"}]
    src = HEAD + SEND + f'''s = {CONNECT})
to = ask_with_tools("find Mallory's address", s.tools).value
m = send_mail(to, "the minutes")
m.verify()
m.commit()
print(m.state)
'''
    out = run(tmp_path, src, script, second_look=second_look)
    if not second_look:
        assert out.error is None, out.error
        assert out.lines == ["sent to mallory@evil.example", "committed"]
        return
    assert type(out.error) is SenseApprovalError
    assert "mallory@evil.example" in out.error.message
    assert "the tool demo.contact" in out.error.message
    assert "sent to" not in out.stdout


# ----------------------------------------------------------------------------- dry run, saving

@needs_mcp
def test_a_dry_run_allowed_to_connect_calls_for_real_and_summarises_the_calls(tmp_path):
    script = [calls(("demo.add", {"a": 1, "b": 2})), {"text": "{results}"}]
    out = run(tmp_path, HEAD + f's = {CONNECT})\nprint(ask_with_tools("x", s.tools).value)\n',
              script, dry_run=True, dry_run_allow={"mcp.connect"})
    assert out.error is None, out.error
    assert out.lines == ["DRY RUN — no actions will actually commit", "", "3", "",
                         "--- dry run summary ---",
                         "[line 4] tool 'demo.add' -> called",
                         "[line 4] model 'bot' -> called"]


@needs_mcp
def test_a_paused_agent_holding_a_server_is_not_saved(tmp_path):
    (tmp_path / "p.sns").write_text(f'''policy: allow mcp.connect
agent a:
    s = {CONNECT})
    answer = ask_human("go on?")
    print(s, answer)
start(a)
print(a.status)
''')
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    proc = subprocess.run([PY, "-m", "sensevm", "run", "p.sns", "--state-dir", "state"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    # Saved when it pauses: the error names what holds the server.
    assert ("p.sns:4:23: SenseRuntimeError: cannot save variable 's': it holds MCP server 'demo' (a connection to a running "
            "process cannot be saved; connect again after resuming)") in proc.stderr
    state = tmp_path / "state"
    assert not state.exists() or not [f for f in os.listdir(state) if f.endswith(".json")]


# ----------------------------------------------------------------------------- start-up

def test_start_up_imports_neither_mcp_nor_anyio_nor_asyncio(tmp_path):
    (tmp_path / "x.sns").write_text('print("hi")\n')
    subprocess.run([PY, "-m", "sensec", "build", "x.sns"], cwd=tmp_path, check=True,
                   env=dict(os.environ, PYTHONPATH=ROOT))
    code = ("import sys, atexit\n"
            "atexit.register(lambda: sys.__stderr__.write('LOADED ' + ' '.join(sorted(\n"
            "    m for m in sys.modules if m.split('.')[0] in ('mcp', 'anyio', 'asyncio',\n"
            "    'pydantic', 'httpx'))) + '\\n'))\n"
            "sys.argv = ['sensevm', 'run', 'x.snb']\n"
            "from sensevm.cli.launch import entry\nentry()\n")
    proc = subprocess.run([PY, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.stdout == "hi\n"
    assert proc.stderr.strip() == "LOADED"


@needs_mcp
def test_a_tool_cannot_go_into_persistent_memory(tmp_path):
    db = tmp_path / "n.db"
    out = run(tmp_path, f's = {CONNECT})\npersistent memory notes: "{db}"\n'
                        'notes.remember("t", s.tools[0])\n')
    assert isinstance(out.error, SenseRuntimeError)
    assert out.error.message.endswith("TypeError: Object of type McpTool is not JSON "
                                      "serializable")
