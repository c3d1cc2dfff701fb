"""Resource limits (docs/limits.md): steps, depth, String and Array sizes, wall-clock time.

Each limit stops a runaway program with its SenseLimitError (or, for depth, the reference's
recursion error), placed at the instruction that hit it, on both tiers, through the VM and
through both `sensevm run` paths (the click CLI and the click-free fast path); ordinary programs
never meet the defaults; the step count of a run is the same on both tiers and is exactly the
boundary between success and the step-limit error.
"""

from __future__ import annotations

import glob
import io
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings

from conftest import ROOT
from program_strategies import programs
from test_cli_fast_path import both, build

TIERS = ("1", "2")
SPIN = 'print("start")\ni = 0\nwhile true:\n    i = i + 1\n'


def _verified(source: str, tmp_path, name="main.sns"):
    from sensec.driver import compile_file
    from sensevm.bytecode.snb import dump
    from sensevm.bytecode.verify import load_verified
    path = tmp_path / name
    path.write_text(source, encoding="utf-8")
    return load_verified(dump(compile_file(str(path), defer_import_errors=True)))


def run_vm(source, tmp_path, tier, stdin="", **limits):
    """(stdout, error, vm) of running ``source`` with ``limits`` on ``tier``."""
    from sensevm.base.errors import SenseError
    from sensevm.runtime.vm import VM
    out = io.StringIO()
    if limits and "timeout" not in limits:
        limits["timeout"] = 300.0       # a backstop: a limit that failed to stop a test fails it
    vm = VM(_verified(source, tmp_path), stdout=out, tier=tier, stdin=io.StringIO(stdin),
            **limits)
    try:
        vm.run()
    except SenseError as err:
        return out.getvalue(), err, vm
    return out.getvalue(), None, vm


def sensevm(args, cwd, *, env=None, stdin=subprocess.DEVNULL, timeout=120):
    full_env = dict(os.environ, NO_COLOR="1", PYTHONPATH=ROOT)
    full_env.pop("SENSE_TIER", None)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "sensevm", *args], capture_output=True,
                          text=True, cwd=cwd, env=full_env, stdin=stdin, timeout=timeout)


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


# ----------------------------------------------------------------------------- the VM API

@pytest.mark.parametrize("tier", TIERS)
def test_step_limit_stops_a_runaway_loop(tmp_path, tier):
    out, err, vm = run_vm(SPIN, tmp_path, tier, max_steps=1000)
    assert out == "start\n"
    assert err is not None and err.kind == "SenseLimitError" and err.limit == "steps"
    assert err.message == "step limit exceeded (1000 steps)"
    assert (err.pos.line, err.pos.col) == (3, 1)          # the loop's back-edge: `while`
    assert vm.steps == 1001


@pytest.mark.parametrize("tier", TIERS)
def test_step_limit_counts_calls_too(tmp_path, tier):
    # No loop at all: exponential recursion only takes calls.
    source = ("def fib(n):\n    if n < 2:\n        return n\n"
              "    return fib(n - 1) + fib(n - 2)\nprint(fib(30))\n")
    out, err, vm = run_vm(source, tmp_path, tier, max_steps=5000)
    assert out == "" and err.kind == "SenseLimitError"
    assert err.message == "step limit exceeded (5000 steps)"
    assert err.pos.line == 4                               # a call inside fib
    assert vm.steps == 5001


@pytest.mark.parametrize("tier", TIERS)
def test_step_limit_in_a_leaf_function(tmp_path, tier):
    # Tier 2 runs a function that calls nothing without a frame: its loop still counts.
    source = "def f():\n    while true:\n        x = 1\n    return 0\nprint(f())\n"
    _, err, _ = run_vm(source, tmp_path, tier, max_steps=100)
    assert err.kind == "SenseLimitError" and (err.pos.line, err.pos.col) == (2, 5)


@pytest.mark.parametrize("tier", TIERS)
def test_a_test_block_does_not_catch_a_limit(tmp_path, tier):
    source = ('test "spins":\n    while true:\n        x = 1\n'
              'test "after":\n    print("not reached")\n')
    out, err, vm = run_vm(source, tmp_path, tier, max_steps=50)
    assert out == "" and err.kind == "SenseLimitError"
    assert vm.tests == []


@pytest.mark.parametrize("tier", TIERS)
def test_a_test_block_still_catches_ordinary_errors_with_a_limit_set(tmp_path, tier):
    source = 'test "t":\n    print(1 / 0)\nprint("after")\n'
    out, err, vm = run_vm(source, tmp_path, tier, max_steps=50)
    assert out == "after\n" and err is None
    assert [t.passed for t in vm.tests] == [False]


@pytest.mark.parametrize("tier", TIERS)
def test_depth_limit(tmp_path, tier):
    source = ("def down(n):\n    if n == 0:\n        return 0\n    return down(n - 1)\n"
              "print(down(40))\nprint(down(60))\n")
    out, err, _ = run_vm(source, tmp_path, tier, max_depth=50)
    assert out == "0\n"
    assert err.kind == "SenseRuntimeError" and err.message == "maximum recursion depth exceeded"
    assert err.pos.line == 4


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("source, line, message", [
    ('s = "ab"\nwhile true:\n    s = s + s\n', 3,
     "string size limit exceeded (a String of 128 characters; the limit is 100)"),
    ('a = [1, 2]\nprint(str([a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a]))\n', 2,
     "string size limit exceeded (a String of 160 characters; the limit is 100)"),
    # (case mapping can make several characters of one: 60 'ß' are 120 'S', 51 'ŉ' are 102)
    ('s = "ß".repeat(60)\nt = s.upper()\n', 2,
     "string size limit exceeded (a String of 120 characters; the limit is 100)"),
    ('i = 0\nwhile i < 50:\n    t = "ŉ".repeat(34 + i).upper()\n    i = i + 1\n', 3,
     "string size limit exceeded (a String of 102 characters; the limit is 100)"),
])
def test_string_limit(tmp_path, tier, source, line, message):
    _, err, _ = run_vm(source, tmp_path, tier, max_string=100)
    assert err.kind == "SenseLimitError" and err.limit == "string"
    assert err.message == message and err.pos.line == line


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("source, line, message", [
    ("a = []\nwhile true:\n    push(a, 1)\n", 3,
     "array size limit exceeded (an Array of 11 elements; the limit is 10)"),
    ("a = range(11)\n", 1, "array size limit exceeded (an Array of 11 elements; the limit is 10)"),
    ("a = [1]\nwhile true:\n    a = a + a\n", 3,
     "array size limit exceeded (an Array of 16 elements; the limit is 10)"),
])
def test_array_limit(tmp_path, tier, source, line, message):
    _, err, _ = run_vm(source, tmp_path, tier, max_array=10)
    assert err.kind == "SenseLimitError" and err.limit == "array"
    assert err.message == message and err.pos.line == line


@pytest.mark.parametrize("tier", TIERS)
def test_sizes_at_the_limit_are_allowed(tmp_path, tier):
    source = 's = "0123456789"\nprint(len(s + s))\na = range(5)\npush(a, 5)\nprint(len(a))\n'
    out, err, _ = run_vm(source, tmp_path, tier, max_string=20, max_array=6)
    assert err is None and out == "20\n6\n"


@pytest.mark.parametrize("tier", TIERS)
def test_timeout_stops_a_runaway_loop(tmp_path, tier):
    out, err, _ = run_vm(SPIN, tmp_path, tier, timeout=0.3)
    assert out == "start\n"
    assert err.kind == "SenseLimitError" and err.limit == "timeout"
    assert err.message == "time limit exceeded (0.3 seconds)"
    assert (err.pos.line, err.pos.col) == (3, 1)


@pytest.mark.parametrize("tier", TIERS)
def test_timeout_stops_a_loop_in_a_tool_body(tmp_path, tier):
    source = ('tool spin() returns String:\n    while true:\n        x = 1\n    return "no"\n'
              'print(spin())\n')
    _, err, _ = run_vm(source, tmp_path, tier, timeout=0.3)
    assert err.kind == "SenseLimitError" and (err.pos.line, err.pos.col) == (2, 5)


@pytest.mark.parametrize("tier", TIERS)
def test_limits_reach_async_tool_bodies(tmp_path, tier):
    # The body spins on a worker thread while the program waits for it at await().
    source = ('async tool spin() returns String:\n    while true:\n        x = 1\n'
              '    return "no"\nf = spin()\nprint(await(f))\n')
    _, err, _ = run_vm(source, tmp_path, tier, max_steps=2000)
    assert err.kind == "SenseLimitError" and err.limit == "steps"
    _, err, _ = run_vm(source, tmp_path, tier, timeout=0.3)
    assert err.kind == "SenseLimitError" and err.limit == "timeout"


def test_the_clock_is_stopped_after_a_run(tmp_path):
    import signal
    before = signal.getsignal(signal.SIGALRM)
    out, err, _ = run_vm('print("quick")\n', tmp_path, "1", timeout=0.2)
    assert out == "quick\n" and err is None
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is before


@pytest.mark.parametrize("tier", TIERS)
def test_step_count_is_exact_and_the_same_on_both_tiers(tmp_path, tier):
    source = ("def f(n):\n    i = 0\n    while i < n:\n        i = i + 1\n    return i\n"
              "total = 0\nfor k in range(10):\n    total = total + f(k)\nprint(total)\n")
    out, err, vm = run_vm(source, tmp_path, tier, max_steps=10**9)
    # 45 iterations in f, 10 of the for loop; calls: range, f (10 times), print.
    assert (out, err, vm.steps) == ("45\n", None, 67)
    assert run_vm(source, tmp_path, tier, max_steps=67)[1] is None
    _, err, _ = run_vm(source, tmp_path, tier, max_steps=66)
    assert err.message == "step limit exceeded (66 steps)" and err.pos.line == 9


CORPUS = sorted(glob.glob(os.path.join(ROOT, "examples", "*.sns")))


@pytest.mark.parametrize("path", CORPUS, ids=os.path.basename)
def test_ordinary_programs_meet_no_limit_and_count_the_same_on_both_tiers(path):
    from sensec.driver import compile_file
    from sensevm.base.errors import SenseError
    from sensevm.bytecode.snb import dump
    from sensevm.bytecode.verify import load_verified
    from sensevm.runtime.vm import VM
    try:
        verified = load_verified(dump(compile_file(path, defer_import_errors=True)))
    except SenseError:
        pytest.skip("does not compile")
    seen = []
    for tier, limits in (("1", {}), ("1", {"max_steps": 10**9, "timeout": 600.0}),
                         ("2", {"max_steps": 10**9, "timeout": 600.0})):
        out = io.StringIO()
        vm = VM(verified, stdout=out, tier=tier, stdin=io.StringIO(""), **limits)
        try:
            vm.run()
            error = None
        except SenseError as err:
            error = (err.kind, err.text, err.pos)
        assert error is None or error[0] != "SenseLimitError"
        seen.append((out.getvalue(), error, vm.steps))
    assert seen[0][:2] == seen[1][:2] == seen[2][:2]
    assert seen[1][2] == seen[2][2]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(source=programs())
def test_property_the_step_count_is_the_boundary_on_both_tiers(tmp_path, source):
    """A program that takes k steps runs exactly as without a limit when allowed k steps, and
    stops with the step-limit error when allowed k - 1; k is the same on both tiers."""
    counts = {}
    for tier in TIERS:
        free_out, free_err, _ = run_vm(source, tmp_path, tier)
        out, err, vm = run_vm(source, tmp_path, tier, max_steps=10**9)
        k = counts[tier] = vm.steps
        assert (out, err and err.text) == (free_out, free_err and free_err.text)
        out, err, _ = run_vm(source, tmp_path, tier, max_steps=max(k, 1))
        assert (out, err and err.text) == (free_out, free_err and free_err.text)
        if k >= 2:
            out, err, _ = run_vm(source, tmp_path, tier, max_steps=k - 1)
            assert err is not None and err.kind == "SenseLimitError"
            assert err.message == f"step limit exceeded ({k - 1} steps)"
            assert free_out.startswith(out)
    assert counts["1"] == counts["2"]


# ----------------------------------------------------------------------------- the command line

@pytest.mark.parametrize("tier", ["1", "2", "auto"])
def test_cli_step_limit(tmp_path, tier):
    src = write(tmp_path, "spin.sns", SPIN)
    proc = sensevm(["run", src, "--max-steps", "1000", "--tier", tier], tmp_path)
    assert proc.returncode == 4
    assert proc.stdout == "start\n"
    assert proc.stderr == (f"{src}:3:1: SenseLimitError: step limit exceeded (1000 steps)\n"
                           "    3 | while true:\n      | ^\n")
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("tier", ["1", "2"])
def test_cli_fast_path_limits_same_as_click_and_no_click(tmp_path, tier, monkeypatch):
    monkeypatch.setenv("SENSE_TIER", tier)
    snb = build(write(tmp_path, "spin.sns", SPIN))
    for args in (["run", snb, "--max-steps", "300"], ["run", "--max-steps=300", snb],
                 ["run", "--timeout", "0.2", "--max-depth", "9", snb],
                 ["run", "--max-string", "5", "--max-array", "7", "--max-steps", "99", snb]):
        fast, click, heavy = both(args, tmp_path)
        assert fast == click
        assert heavy == []
        assert fast[0] == 4 and "SenseLimitError" in fast[2]


def test_cli_fast_path_leaves_bad_limit_values_to_click(tmp_path):
    snb = build(write(tmp_path, "a.sns", 'print("hi")\n'))
    for args in (["run", snb, "--max-steps", "0"], ["run", snb, "--max-steps", "x"],
                 ["run", snb, "--timeout", "-1"], ["run", snb, "--timeout", "nan"],
                 ["run", snb, "--timeout", "inf"], ["run", snb, "--max-steps"],
                 ["run", snb, "--max-steps=", "2"], ["run", snb, snb, "--max-steps", "2"]):
        fast, click, heavy = both(args, tmp_path)
        assert fast == click
        assert fast[0] == 2, args
        assert heavy == ["click"] or "click" in heavy


def test_cli_limits_given_twice_the_last_wins(tmp_path):
    snb = build(write(tmp_path, "spin.sns", SPIN))
    fast, click, heavy = both(["run", "--max-steps", "5", snb, "--max-steps", "7"], tmp_path)
    assert fast == click and heavy == []
    assert "step limit exceeded (7 steps)" in fast[2]


def test_cli_depth_limit_keeps_exit_status_1(tmp_path):
    src = write(tmp_path, "deep.sns", "def down(n):\n    return down(n + 1)\ndown(0)\n")
    proc = sensevm(["run", src, "--max-depth", "30"], tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"{src}:2:16: SenseRuntimeError: maximum recursion depth "
                                  "exceeded\n")


def test_cli_size_limits(tmp_path):
    src = write(tmp_path, "grow.sns", 's = "x"\nwhile true:\n    s = s + s\n')
    proc = sensevm(["run", src, "--max-string", "1000"], tmp_path)
    assert proc.returncode == 4
    assert proc.stderr.startswith(f"{src}:3:11: SenseLimitError: string size limit exceeded "
                                  "(a String of 1024 characters; the limit is 1000)\n")
    src = write(tmp_path, "push.sns", "a = []\nwhile true:\n    push(a, 0)\n")
    proc = sensevm(["run", src, "--max-array", "1000"], tmp_path)
    assert proc.returncode == 4
    assert proc.stderr.startswith(f"{src}:3:9: SenseLimitError: array size limit exceeded "
                                  "(an Array of 1001 elements; the limit is 1000)\n")


def test_cli_timeout_stops_a_runaway_program(tmp_path):
    src = write(tmp_path, "spin.sns", SPIN)
    proc = sensevm(["run", src, "--timeout", "1"], tmp_path, timeout=60)
    assert proc.returncode == 4
    assert proc.stdout == "start\n"
    assert proc.stderr.startswith(f"{src}:3:1: SenseLimitError: time limit exceeded "
                                  "(1 second)\n")


def test_cli_timeout_ends_a_read_blocked_on_stdin(tmp_path):
    src = write(tmp_path, "ask.sns", 'print("asking")\na = ask_human("name?")\nprint(a)\n')
    full_env = dict(os.environ, NO_COLOR="1", PYTHONPATH=ROOT)
    # stdin is a pipe that nobody writes to or closes: the read blocks until the timeout.
    proc = subprocess.Popen([sys.executable, "-m", "sensevm", "run", src, "--timeout", "0.5"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path, env=full_env)
    try:
        proc.wait(timeout=60)           # (communicate() would close stdin: end of input)
    finally:
        if proc.poll() is None:
            proc.kill()
        out, err = proc.communicate()
    assert proc.returncode == 4
    assert out == "asking\nname?\n> "
    assert err.startswith(f"{src}:2:14: SenseLimitError: time limit exceeded (0.5 seconds)\n")


def test_cli_environment_defaults_and_the_option_wins(tmp_path):
    src = write(tmp_path, "spin.sns", SPIN)
    proc = sensevm(["run", src], tmp_path, env={"SENSE_MAX_STEPS": "40"})
    assert proc.returncode == 4 and "step limit exceeded (40 steps)" in proc.stderr
    proc = sensevm(["run", src, "--max-steps", "41"], tmp_path, env={"SENSE_MAX_STEPS": "40"})
    assert proc.returncode == 4 and "step limit exceeded (41 steps)" in proc.stderr
    proc = sensevm(["run", src], tmp_path, env={"SENSE_MAX_STEPS": "lots"})
    assert proc.returncode == 2
    assert proc.stderr == "sensevm: SENSE_MAX_STEPS: 'lots' is not a whole number\n"


def test_cli_normal_program_with_limits(tmp_path):
    src = write(tmp_path, "ok.sns", "total = 0\nfor i in range(100):\n    total = total + i\n"
                                    "print(total)\n")
    proc = sensevm(["run", src, "--max-steps", "102", "--timeout", "60", "--max-depth", "5",
                    "--max-string", "10", "--max-array", "100"], tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "4950\n", "")
    proc = sensevm(["run", src, "--max-steps", "101"], tmp_path)
    assert proc.returncode == 4


def test_sensevm_test_applies_limits_per_file(tmp_path):
    write(tmp_path, "test_spin.sns", 'test "spins":\n    while true:\n        x = 1\n')
    write(tmp_path, "test_fine.sns", 'test "fine":\n    assert(1 + 1 == 2)\n')
    proc = sensevm(["test", str(tmp_path), "--max-steps", "100"], tmp_path)
    assert proc.returncode == 1
    assert "PASS  fine" in proc.stdout
    assert "ERROR  [line 2] step limit exceeded (100 steps)" in proc.stderr


def test_repl_counts_steps_per_input(tmp_path):
    # A runaway input stops; the next input has a fresh budget (51 steps < 100).
    proc = subprocess.run(
        [sys.executable, "-m", "sensevm", "repl"],
        input="while true:\n    x = 1\n\ny = 0\nfor i in range(50):\n    y = i\n\nprint(y)\n",
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env=dict(os.environ, NO_COLOR="1", PYTHONPATH=ROOT, SENSE_MAX_STEPS="100"))
    assert proc.stdout == "49\n"
    assert "SenseLimitError: step limit exceeded (100 steps)" in proc.stderr
    assert proc.returncode == 1
