"""Python interop (spec 18.7) behind the python.import capability (docs/interop.md).

The corpus (tests/programs/interop/, deliberate/interop_*) pins the observable behaviour
against the reference; here: the capability cannot be got around from Sense code or from
hand-made bytecode, in either tier; the boundary conversions; the audit trail; saved agents;
and that a program without interop never loads the interop machinery.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, run_source
from sensec.driver import compile_source
from sensevm.bytecode.decode import encode
from sensevm.base.errors import SensePolicyError, SenseRuntimeError, SenseImportError
from sensevm.bytecode.opcodes import Op
from sensevm.bytecode.snb import dump
from sensevm.bytecode.verify import load_verified
from sensevm.runtime.vm import VM

ALLOW = "policy: allow python.import\n"
TIERS = ["1", "2"]


def run_vm(program, *, tier="1", dry_run=False, audit=None, dry_run_allow=()):
    out = io.StringIO()
    vm = VM(load_verified(dump(program)), stdout=out, tier=tier, dry_run=dry_run, audit=audit,
            dry_run_allow=dry_run_allow)
    try:
        vm.run()
    except Exception as err:        # noqa: BLE001 - the tests look at what it was
        return vm, out.getvalue(), err
    return vm, out.getvalue(), None


def run_text(source, tmp_path, *, tier="1", **kw):
    return run_vm(compile_source(source, str(tmp_path / "main.sns")), tier=tier, **kw)


# ----------------------------------------------------------------------------- the capability

@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("source, why", [
    ('import python "os"\n', "not allowed by any policy"),
    ('from python "os" import system\n', "not allowed by any policy"),
    ('policy: deny python.import\nimport python "os"\n', "denied by policy"),
    (ALLOW + 'def f():\n    policy: deny python.import\n    import python "os"\nf()\n',
     "denied by policy"),
    # An allow in a scope that has ended grants nothing.
    ('def g():\n    policy: allow python.import\n    return 1\ng()\nimport python "os"\n',
     "not allowed by any policy"),
    # Inside a loop body 32 times (tier 2 compiles the module code by then).
    ('for i in range(40):\n    if i == 39:\n        import python "os"\n',
     "not allowed by any policy"),
    # A test block records the refusal, like any error; the run then goes on without os.
    ('test "t":\n    import python "os"\nprint(type_of(os))\n', None),
    # Agents and tools check it like any code: lexically and along the call chain.
    ('agent a:\n    import python "os"\nstart(a)\n', "not allowed by any policy"),
    (ALLOW + 'tool t() returns Int:\n    import python "os"\n    return 1\n'
     'policy: deny python.import\nprint(t())\n', "denied by policy"),
    (ALLOW + 'async tool t() returns Int:\n    import python "os"\n    return 1\n'
     'def run():\n    policy: deny python.import\n    return await(t())\nrun()\n',
     "denied by policy"),
])
def test_sense_code_cannot_import_without_the_capability(tmp_path, source, why, tier):
    vm, out, err = run_text(source, tmp_path, tier=tier)
    if why is None:
        # The test block records the refusal and the run goes on, without os.
        assert not vm.tests[0].passed
        assert "requires capability 'python.import'" in str(vm.tests[0].error)
        assert "undefined variable 'os'" in str(err)
        return
    assert isinstance(err, SensePolicyError), err
    assert f"python module 'os' requires capability 'python.import', which is {why}" in str(err)


def forged(prefix_ops, *, source='print("body ran")\n'):
    """A real program whose entry code is prefixed by hand-made instructions (no compiler
    check between them and the VM); strings the prefix names are appended to the table."""
    program = compile_source(source, "forged.sns")
    strings = list(program.strings)
    instructions = []
    for op, args in prefix_ops:
        resolved = []
        for a in args:
            if isinstance(a, str):
                if a not in strings:
                    strings.append(a)
                a = strings.index(a)
            resolved.append(a)
        instructions.append((op, resolved))
    program = dataclasses.replace(program, strings=tuple(strings))
    index = program.entry
    code = program.codes[index]
    prefix = b"".join(encode(op, args) for op, args in instructions)
    shifted = tuple((off + len(prefix), line, col) for off, line, col in code.positions)
    codes = list(program.codes)
    codes[index] = dataclasses.replace(code, code=prefix + code.code,
                                       positions=((0, 1, 1),) + shifted,
                                       max_stack=code.max_stack + 2)
    return dataclasses.replace(program, codes=tuple(codes))


@pytest.fixture
def probe(tmp_path, monkeypatch):
    """A Python module on sys.path that leaves a file behind if it is ever imported."""
    marker = tmp_path / "probe_ran"
    (tmp_path / "sense_interop_probe.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "sense_interop_probe", raising=False)
    yield marker
    sys.modules.pop("sense_interop_probe", None)


def test_the_probe_detects_an_import(probe):
    program = forged([(Op.POLICY_ALLOW, ["python.import"]),
                      (Op.IMPORT_PYTHON, ["sense_interop_probe"]), (Op.POP, [])])
    _, out, err = run_vm(program)
    assert err is None and out == "body ran\n" and probe.exists()


@pytest.mark.parametrize("tier", TIERS)
def test_hand_made_bytecode_cannot_import_without_the_capability(tier, probe):
    program = forged([(Op.IMPORT_PYTHON, ["sense_interop_probe"]), (Op.POP, [])])
    vm, out, err = run_vm(program, tier=tier)
    assert isinstance(err, SensePolicyError), err
    assert "python module 'sense_interop_probe' requires capability 'python.import'" in str(err)
    assert out == "" and not probe.exists()
    denied = [r for r in vm.audit.records if r.kind == "python"]
    assert [(r.event, r.name, r.host_only) for r in denied] == [
        ("denied", "sense_interop_probe", True)]
    assert vm.audit.lines() == []       # audit_log() keeps the reference's lines


@pytest.mark.parametrize("tier", TIERS)
def test_hand_made_bytecode_under_a_deny_cannot_import(tier, probe):
    program = forged([(Op.POLICY_ALLOW, ["python.import"]), (Op.POLICY_DENY, ["python.import"]),
                      (Op.IMPORT_PYTHON, ["sense_interop_probe"]), (Op.POP, [])])
    _, _, err = run_vm(program, tier=tier)
    assert isinstance(err, SensePolicyError) and "denied by policy" in str(err)
    assert not probe.exists()


def test_hand_made_bytecode_with_the_allow_imports():
    program = forged([(Op.POLICY_ALLOW, ["python.import"]), (Op.IMPORT_PYTHON, ["math"]),
                      (Op.STORE_LOCAL, ["m"])], source='print(m.sqrt(4))\n')
    vm, out, err = run_vm(program)
    assert err is None and out == "2.0\n"
    assert [(r.event, r.name) for r in vm.audit.records] == [("imported", "math")]


def test_import_from_on_a_value_that_is_no_module_is_refused_before_it_runs():
    from sensevm.base.errors import VerifyError
    program = forged([(Op.LOAD_CONST, [0]), (Op.IMPORT_FROM, ["x"]), (Op.POP, [])],
                     source='print("body ran")\n')
    with pytest.raises(VerifyError, match="not a module"):
        run_vm(program)


def test_the_disassembler_names_the_module():
    from sensevm.bytecode.disasm import disassemble
    text = disassemble(compile_source(ALLOW + 'import python "os.path" as p\n', "d.sns"))
    assert "IMPORT_PYTHON" in text and "(os.path)" in text


@pytest.mark.parametrize("member", [
    "__class__", "__dict__", "__loader__", "__spec__", "__builtins__", "__import__", "_x"])
def test_private_members_of_an_allowed_module_are_refused(tmp_path, member):
    out = run_source(ALLOW + f'import python "math"\nprint(math.{member})\n', tmp_path)
    assert isinstance(out.error, SenseRuntimeError)
    assert f"python member '{member}' of module 'math' is not accessible" in out.error.message


def test_a_python_function_has_no_members(tmp_path):
    # Functions read from Python are Sense Functions: no __globals__, no __self__.
    out = run_source(ALLOW + 'import python "math"\nprint(math.sqrt.__globals__)\n', tmp_path)
    assert out.error.message == "cannot access member '__globals__' on type Function"


def test_a_relative_or_empty_module_name_is_a_clean_import_error(tmp_path):
    for name in (".sibling", ""):
        out = run_source(ALLOW + f'import python "{name}" as x\n', tmp_path)
        assert isinstance(out.error, SenseImportError), out.error
        assert out.error.message.startswith(f"python module not found: '{name}' (")


# ----------------------------------------------------------------------------- the boundary

def test_every_python_value_enters_through_from_python(tmp_path, monkeypatch):
    from sensevm.world import interop
    seen = []
    original = interop.from_python

    def spy(value, **kw):
        seen.append(value)
        return original(value, **kw)
    monkeypatch.setattr(interop, "from_python", spy)
    out = run_source(ALLOW + 'from python "json" import loads\nimport python "math"\n'
                     'd = loads("{\\"a\\": [1]}")\nx = d["a"]\ny = math.pi\nz = d.get("a")\n',
                     tmp_path)
    assert out.error is None
    # The imported name, the call's result, the index read, the member reads and the call.
    import json as pyjson
    import math as pymath
    assert seen[0] is pyjson.loads
    assert seen[1] == {"a": [1]} and seen[2] == [1] and seen[3] == pymath.pi
    assert seen[5] == [1] and len(seen) == 6


def test_conversions_normalise_subclasses_and_keep_cycles():
    import enum
    from sensevm.world.interop import PyObject, from_python, to_python

    class Color(enum.IntEnum):
        RED = 1

    class Name(str):
        pass
    assert type(from_python(Color.RED)) is int and from_python(Color.RED) == 1
    assert type(from_python(Name("x"))) is str
    loop = [1]
    loop.append(loop)
    back = from_python(loop)
    assert back[1] is back and back is not loop
    sense = [2]
    sense.append(sense)
    there = to_python(sense)
    assert there[1] is there
    assert type(from_python((1, 2))) is PyObject
    assert to_python(from_python({"a": 1})) == {"a": 1}


def test_a_broken_str_prints_a_placeholder():
    from sensevm.world.interop import PyObject
    from sensevm.runtime.values import to_str

    class Broken:
        def __str__(self):
            raise RuntimeError("no")
    assert to_str(PyObject(Broken(), "Broken")) == "<python Broken>"


def test_an_attribute_that_raises_is_a_clean_error():
    from sensevm.world.interop import PyObject, read_member

    class Prop:
        @property
        def boom(self):
            raise ValueError("bad")
    with pytest.raises(SenseRuntimeError) as info:
        read_member(PyObject(Prop(), "Prop"), "boom")
    assert info.value.message == "python error reading boom: ValueError: bad"


def test_a_dry_run_imports_python_only_when_the_command_line_allows_it(tmp_path):
    """A dry run starts no host code nobody asked it to (issue 21, item 9): the program's own
    allow is not enough; --dry-run-allow python.import is."""
    source = ALLOW + 'print("before")\nimport python "math"\nprint(math.sqrt(9))\n'
    vm, out, err = run_text(source, tmp_path, dry_run=True)
    assert isinstance(err, SensePolicyError) and err.pos.line == 3
    assert err.message == ("python module 'math' is not done in a dry run, which starts no "
                           "host code unless the command line allows it (--dry-run-allow "
                           "python.import)")
    assert "before" in out and "3.0" not in out
    (record,) = [r for r in vm.audit.records if r.kind == "python"]
    assert (record.event, record.detail) == ("denied",
                                             "a dry run without --dry-run-allow python.import")
    vm, out, err = run_text(source, tmp_path, dry_run=True, dry_run_allow={"python.import"})
    assert err is None
    assert out.splitlines()[3] == "3.0"
    assert out.endswith("--- dry run summary ---\n(no actions were prepared)\n")
    # A deny still wins over the command line's leave.
    vm, out, err = run_text(source.replace("allow", "deny"), tmp_path, dry_run=True,
                            dry_run_allow={"python.import"})
    assert isinstance(err, SensePolicyError) and "denied by 'deny python.import' at" in err.message


def test_the_command_line_takes_dry_run_allow(tmp_path):
    import subprocess
    import sys
    (tmp_path / "p.sns").write_text(ALLOW + 'import python "math"\nprint(math.floor(2.5))\n')
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    cmd = [sys.executable, "-m", "sensevm", "run", "--dry-run", "p.sns"]
    refused = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env)
    assert refused.returncode == 1 and "--dry-run-allow python.import" in refused.stderr
    allowed = subprocess.run(cmd + ["--dry-run-allow", "python.import"], cwd=tmp_path,
                             capture_output=True, text=True, env=env)
    assert allowed.returncode == 0 and "\n2\n" in allowed.stdout, allowed.stderr


def test_imports_are_in_the_durable_audit_log(tmp_path):
    from sensevm.guard.audit import AuditFile, AuditLog, verify_chain
    path = str(tmp_path / "audit.jsonl")
    log = AuditLog(AuditFile(path))
    vm, out, err = run_text(ALLOW + 'import python "math"\nfor l in audit_log():\n    print(l)\n'
                            'def f():\n    policy: deny python.import\n    import python "json"\n'
                            'f()\n', tmp_path, audit=log)
    log.close()
    assert isinstance(err, SensePolicyError) and out == ""
    lines = [json.loads(x) for x in open(path, encoding="utf-8")]
    lines = [x for x in lines if x["kind"] != "audit"]      # the log's own opened and sealed
    assert [(x["subject"], x["event"], x["line"], x["host_only"]) for x in lines] == [
        ("python module 'math'", "imported", 2, True),
        ("python module 'json'", "denied", 7, True)]
    assert lines[1]["detail"] == "capability 'python.import' denied by policy"
    assert verify_chain(path).sealed


# ----------------------------------------------------------------------------- start-up

def test_a_run_without_interop_never_loads_it(tmp_path):
    script = ("import sys\nsys.argv = ['sensevm', 'run', sys.argv[1]]\n"
              "from sensevm.cli.launch import entry\n"
              "try:\n    entry()\nexcept SystemExit:\n    pass\n"
              "print('INTEROP', 'sensevm.world.interop' in sys.modules)\n")
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    for source, loaded in (('print(1)\n', False),
                           (ALLOW + 'import python "math"\nprint(1)\n', True)):
        src = tmp_path / "p.sns"
        src.write_text(source)
        build = subprocess.run([sys.executable, "-m", "sensec", "build", str(src)], env=env,
                               capture_output=True, text=True)
        assert build.returncode == 0, build.stderr
        proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "p.snb")],
                              env=env, capture_output=True, text=True)
        assert proc.stdout.splitlines() == ["1", f"INTEROP {loaded}"], proc.stderr


# ----------------------------------------------------------------------------- saved agents

def sensevm(*args, cwd):
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "sensevm", *args], cwd=cwd,
                          capture_output=True, text=True, env=env)


def test_an_agent_holding_python_modules_and_functions_resumes(tmp_path):
    (tmp_path / "p.sns").write_text(
        ALLOW + 'import python "math"\nfrom python "os.path" import basename\n'
        'agent a:\n    j = math.floor\n    answer = ask_human("go?")\n'
        '    print(answer, j(2.5), math.pi, basename("x/y"))\nstart(a)\n')
    first = sensevm("run", "p.sns", "--state-dir", "state", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    second = sensevm("resume", "state", "a", "yes", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout == "yes 2 3.141592653589793 y\n"


def test_an_agent_holding_a_python_value_made_by_a_call_is_not_saved(tmp_path):
    (tmp_path / "p.sns").write_text(
        ALLOW + 'from python "json" import loads\nd = loads("{}")\n'
        'agent a:\n    answer = ask_human("go?")\n    print(d)\nstart(a)\n')
    proc = sensevm("run", "p.sns", "--state-dir", "state", cwd=tmp_path)
    assert proc.returncode == 1
    assert "it holds a Python value (dict) made by Python code" in proc.stderr
    assert not (tmp_path / "state" / "a.json").exists()


def test_a_saved_state_cannot_name_a_module_the_program_does_not_import(tmp_path):
    (tmp_path / "p.sns").write_text(
        ALLOW + 'import python "math"\nagent a:\n    answer = ask_human("go?")\n'
        '    print(answer, math.floor(1.5))\nstart(a)\n')
    assert sensevm("run", "p.sns", "--state-dir", "state", cwd=tmp_path).returncode == 0
    from saved_state import read_state, write_state
    state = read_state(tmp_path / "state", "a")
    (python,) = [o for o in state["objects"] if o["type"] == "python"]
    python["module"] = "colorsys"
    write_state(tmp_path / "state", "a", state, sign=False)       # as anyone could
    proc = sensevm("resume", "state", "a", "yes", cwd=tmp_path)
    assert proc.returncode == 1 and "refused (integrity)" in proc.stderr
    write_state(tmp_path / "state", "a", state)                   # as a holder of the key
    proc = sensevm("resume", "state", "a", "yes", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout == ""
    assert "refused (coherence)" in proc.stderr
    assert "names Python module 'colorsys', which the program does not import" in proc.stderr


def test_python_code_handed_a_sense_value_finds_no_vm_object_on_it(tmp_path):
    """Issue 21, item 9: Python code could set `approved = true` on an action handed to it.
    A Sense value crosses as an opaque wrapper holding a number, not the value."""
    vm, out, err = run_text(ALLOW + '''irreversible action pay(n: Int) requires payment.send, approval:
    print("PAID", n)
from python "builtins" import getattr, setattr, vars, dir
a = pay(5)
holder = [a]
import python "json"
print(dir(a))
test "reach in":
    inner = getattr(a, "_token")
    setattr(a, "approved", true)
print(a.approved)
a.verify()
test "commit":
    a.commit()
print(a.state)
''', tmp_path)
    assert err is None, err
    lines = out.splitlines()
    assert "_sense_value" not in lines[0] and "approved" not in lines[0]
    assert lines[1:] == ["false", "verified"]
    (failed,) = [t for t in vm.tests if not t.passed and t.name == "reach in"]
    assert "cannot be changed" in failed.error.message
    assert "requires approval" in [t for t in vm.tests if t.name == "commit"][0].error.message


def test_a_sense_value_comes_back_as_itself_and_is_released_with_its_wrapper():
    import gc
    from sensevm.world import interop
    value = object()
    wrapped = interop.to_python(value)
    assert type(wrapped) is interop.SenseValue and not hasattr(wrapped, "_sense_value")
    assert interop.from_python(wrapped) is value
    token = wrapped._token
    assert interop._HANDED[token] is value
    del wrapped
    gc.collect()
    assert token not in interop._HANDED
