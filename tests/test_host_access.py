"""Host access only through capabilities (issue 9): a Sense program reaches files, processes,
the network or Python only through declared tools and actions and builtins that name a
capability a policy can deny -- from source and from hand-made bytecode alike.

(Python interop's `python.import` is tested in test_interop.py, MCP's `mcp.connect` in
test_mcp.py; model providers that leave the process in test_model_http.py.)
"""

from __future__ import annotations

import dataclasses
import io
import json

import pytest

from sensec.driver import compile_source
from sensevm.runtime.builtins import builtin_scope
from sensevm.base.errors import SensePolicyError
from sensevm.bytecode.opcodes import Op
from sensevm.bytecode.snb import dump
from sensevm.bytecode.verify import load_verified
from sensevm.runtime.vm import VM

# Every builtin, by what it can touch outside the program. A new builtin fails this test until
# it is placed here -- and if it reaches the host, given a capability.
PURE = {"assert", "float", "int", "len", "push", "range", "str", "type_of", "print",
        "audit_log", "await", "user_request", "ask_human", "pause", "resume", "send", "receive",
        "start", "skill", "@set", "@model", "@session_open", "@session_close", "mock_model",
        "verify", "approve", "rollback"}
# Builtins that reach the host, and the capability each asks (a policy can deny it):
GATED = {
    "@memory": "memory.persistent",          # a persistent memory's SQLite file
    "inference": "model.*",                  # providers: model.scripted (a file),
    "ask": "model.*",                        # model.openai / model.anthropic (the network)
    "ask_with_tools": "model.*",
    "ask_with_memory": "model.*",
    "connect_mcp": "mcp.connect",            # starts a process (test_mcp.py)
}


def test_every_builtin_is_accounted_for():
    names = set(builtin_scope().vars)
    assert names - PURE - set(GATED) == set(), "a new builtin: is it pure, or gated?"


def run(source, tmp_path, *, forge=None):
    path = tmp_path / "main.sns"
    program = compile_source(source, str(path))
    if forge is not None:
        program = forge(program)
    out = io.StringIO()
    vm = VM(load_verified(dump(program)), stdout=out)
    try:
        vm.run()
    except SensePolicyError as err:
        return vm, out.getvalue(), err
    return vm, out.getvalue(), None


def test_a_denied_persistent_memory_touches_no_file(tmp_path):
    db = tmp_path / "m.db"
    vm, out, err = run(f'policy:\n    deny memory.persistent\n'
                       f'persistent memory log: {json.dumps(str(db))}\nprint("after")\n', tmp_path)
    assert isinstance(err, SensePolicyError)
    assert "persistent memory 'log' requires capability 'memory.persistent'" in err.message
    assert out == "" and not db.exists()
    denied = [r for r in vm.audit.records if r.event == "denied"]
    assert denied and denied[0].host_only and denied[0].name == "log"


def test_a_callers_deny_reaches_a_memory_declared_in_a_function(tmp_path):
    db = tmp_path / "m.db"
    source = (f'def keep():\n    persistent memory log: {json.dumps(str(db))}\n'
              f'    log.remember("k", 1)\n'
              f'def careful():\n    policy:\n        deny memory.persistent\n    keep()\n'
              f'keep()\nprint("first ok")\ncareful()\n')
    db2 = tmp_path / "m.db"
    vm, out, err = run(source, tmp_path)
    assert out == "first ok\n"
    assert isinstance(err, SensePolicyError)
    assert db2.exists()          # the first, allowed declaration


def test_allowed_by_default_and_recorded(tmp_path):
    db = tmp_path / "m.db"
    vm, out, err = run(f'persistent memory log: {json.dumps(str(db))}\nlog.remember("k", 2)\n'
                       'print(log.recall("k"))\n', tmp_path)
    assert err is None and out == "2\n" and db.exists()
    opened = [r for r in vm.audit.records if r.event == "opened"]
    assert len(opened) == 1 and opened[0].host_only
    assert vm.audit.lines() == []       # audit_log() keeps the reference's lines


def test_hand_made_bytecode_calling_the_memory_builtin_is_checked_too(tmp_path):
    """`@memory` cannot be named in source; bytecode can call it directly, and meets the
    same check, because the check is in the builtin."""
    db = tmp_path / "forged.db"

    def forge(program):
        strings = list(program.strings)
        constants = list(program.constants)
        for s in ("@memory",):
            if s not in strings:
                strings.append(s)
        for c in ("log", str(db), True):
            constants.append(c)
        k = len(constants) - 3
        from sensevm.bytecode.decode import encode
        prefix = [(Op.LOAD_NAME, [strings.index("@memory")]), (Op.LOAD_CONST, [k]),
                  (Op.LOAD_CONST, [k + 1]), (Op.LOAD_CONST, [k + 2]), (Op.CALL, [3]),
                  (Op.POP, [])]
        # Right after the policy rule (the entry code has no jumps to shift).
        from sensevm.bytecode.decode import decode
        code = program.codes[program.entry]
        at = next(i.offset + len(encode(i.op, i.args)) for i in decode(code.code)
                  if i.op is Op.POLICY_DENY)
        head = b"".join(encode(op, args) for op, args in prefix)
        shifted = tuple((off + (len(head) if off >= at else 0), line, col)
                        for off, line, col in code.positions)
        codes = list(program.codes)
        codes[program.entry] = dataclasses.replace(
            code, code=code.code[:at] + head + code.code[at:],
            positions=tuple(sorted(shifted + ((at, 2, 1),))), max_stack=code.max_stack + 4)
        return dataclasses.replace(program, strings=tuple(strings), constants=tuple(constants),
                                   codes=tuple(codes))

    vm, out, err = run('policy:\n    deny memory.persistent\nprint("body")\n', tmp_path,
                       forge=forge)
    assert isinstance(err, SensePolicyError) and not db.exists()


def test_a_denied_scripted_model_reads_no_file(tmp_path):
    # The script does not exist: a policy error (not a missing-file error) proves the
    # capability is asked before the file is opened.
    vm, out, err = run('policy:\n    deny model.scripted\n'
                       'model m = inference("scripted", "no-such-script.json")\n', tmp_path)
    assert isinstance(err, SensePolicyError)
    assert "model.scripted" in err.message


# ----------------------------------------------------------------------------- imports

def _tree(tmp_path):
    """app/ (the program, lib/util.sns, a symlink out), other/x.sns, a secret file."""
    import os
    app, other = tmp_path / "app", tmp_path / "other"
    (app / "lib").mkdir(parents=True)
    other.mkdir()
    (app / "lib" / "util.sns").write_text('def ok():\n    return "ok"\n')
    (other / "x.sns").write_text('def hi():\n    return "hi from elsewhere"\n')
    (tmp_path / "secret.txt").write_text("the secret line\n")
    os.symlink(other / "x.sns", app / "sneaky.sns")
    return app


@pytest.mark.parametrize("spelling", ['"../other/x.sns"', '"sneaky.sns"', '"{root}/secret.txt"'])
def test_an_import_outside_the_programs_directory_is_refused_at_the_import(tmp_path, spelling):
    """Issue 21, item 9: imports followed `..`, absolute paths and symlinks, and a compile
    error then printed a line of any readable file."""
    import subprocess
    import sys
    from conftest import ROOT
    app = _tree(tmp_path)
    spelling = spelling.format(root=tmp_path)
    (app / "main.sns").write_text(f'import lib.util\nprint(util.ok())\nimport {spelling}\n')
    env = dict(__import__("os").environ, PYTHONPATH=ROOT, NO_COLOR="1")
    run = subprocess.run([sys.executable, "-m", "sensevm", "run", "main.sns"], cwd=app,
                         capture_output=True, text=True, env=env)
    assert run.returncode == 1 and run.stdout == "ok\n"
    assert run.stderr.startswith("main.sns:3:1: SenseImportError: import of ")
    assert "reaches outside the program's directory" in run.stderr
    assert "hi from elsewhere" not in run.stderr and "the secret line" not in run.stderr
    assert "def hi" not in run.stderr
    build = subprocess.run([sys.executable, "-m", "sensec", "build", "main.sns"], cwd=app,
                           capture_output=True, text=True, env=env)
    assert build.returncode == 1 and build.stderr.startswith("main.sns:3:8: SenseImportError")
    assert "the secret line" not in build.stderr and not (app / "main.snb").exists()
    check = subprocess.run([sys.executable, "-m", "sensec", "check", "main.sns"], cwd=app,
                           capture_output=True, text=True, env=env)
    assert check.returncode == 1 and "reaches outside" in check.stderr


def test_import_root_widens_where_imports_may_come_from(tmp_path):
    import subprocess
    import sys
    from conftest import ROOT
    app = _tree(tmp_path)
    (app / "main.sns").write_text('import "sneaky.sns"\nprint(sneaky.hi())\n'
                                  'import "../other/x.sns"\nprint(x.hi())\n')
    env = dict(__import__("os").environ, PYTHONPATH=ROOT, NO_COLOR="1")
    for cmd in (["sensevm", "run", "main.sns"], ["sensec", "build", "main.sns"]):
        proc = subprocess.run([sys.executable, "-m", *cmd, "--import-root", str(tmp_path)],
                              cwd=app, capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and (app / "main.snb").exists()
    run = subprocess.run([sys.executable, "-m", "sensevm", "run", "main.snb"], cwd=app,
                         capture_output=True, text=True, env=env)
    assert run.stdout == "hi from elsewhere\nhi from elsewhere\n"
