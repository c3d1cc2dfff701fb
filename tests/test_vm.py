"""VM guarantees that example programs cannot show: frames off the host stack, verified-only input, lazy imports."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT


def test_ten_thousand_nested_calls_work(run):
    out = run("def depth(n):\n    if n == 0: return 0\n    return 1 + depth(n - 1)\nprint(depth(10000))\n")
    assert out.error is None
    assert out.stdout == "10000\n"


def test_unbounded_recursion_is_a_sense_error_not_a_host_crash(run):
    out = run("def down(n): return down(n + 1)\nprint(\"start\")\ndown(0)\n")
    assert out.stdout == "start\n"
    assert out.error is not None
    assert out.error.text == "maximum recursion depth exceeded"


def test_hundred_thousand_nested_calls_end_in_recursion_error(run):
    out = run("def depth(n):\n    if n == 0: return 0\n    return 1 + depth(n - 1)\nprint(depth(100000))\n")
    assert out.error is not None and out.error.text == "maximum recursion depth exceeded"


def test_recursion_error_is_caught_by_a_test_block_and_the_program_goes_on(run):
    out = run("def down(n): return down(n + 1)\ntest \"deep\":\n    down(0)\nprint(\"after\")\n")
    assert out.error is None
    assert out.stdout == "after\n"


def test_python_recursion_limit_is_untouched_by_deep_sense_calls(run):
    before = sys.getrecursionlimit()
    run("def d(n):\n    if n == 0: return 0\n    return d(n - 1)\nd(5000)\n")
    assert sys.getrecursionlimit() == before


def test_deeply_nested_array_printing_is_a_sense_error(run):
    out = run("a = []\nb = a\nfor i in range(100000):\n    c = []\n    push(b, c)\n    b = c\nprint(a)\n")
    assert out.error is not None and "recursion" in out.error.text


def test_the_vm_refuses_an_unverified_program():
    from sensevm.bytecode.program import Program
    from sensevm.runtime.vm import VM
    with pytest.raises(TypeError):
        VM(Program())


def test_every_opcode_has_a_handler():
    from sensevm.bytecode.opcodes import Op
    from sensevm.runtime.vm import VM
    for op in Op:
        assert callable(getattr(VM, "op_" + op.name, None)), op.name


def test_running_a_snb_file_does_not_import_the_compiler(tmp_path):
    # Nor what only some programs need: model providers, memory logs, sessions.
    src = tmp_path / "hello.sns"
    src.write_text('print("hello")\n')
    snb = tmp_path / "hello.snb"
    subprocess.run([sys.executable, "-m", "sensec", "build", str(src), "-o", str(snb)],
                   check=True, cwd=ROOT)
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['sensevm', 'run', sys.argv[1]]\n"
        "try:\n"
        "    runpy.run_module('sensevm', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('ply', 'sensec', 'prompt_toolkit', 'pygments',\n"
        "    'sqlite3', 'http') or m in ('urllib.request', 'sensevm.world.providers', 'sensevm.guard.session', 'sensevm.guard.wal'))\n"
        "print('IMPORTED', heavy)\n")
    proc = subprocess.run([sys.executable, "-c", probe, str(snb)], capture_output=True,
                          text=True, cwd=ROOT)
    assert "hello" in proc.stdout
    assert "IMPORTED []" in proc.stdout, proc.stdout + proc.stderr
