"""Both execution tiers give identical results: every corpus program and example, run on tier 1
and on tier 2, prints the same output, fails with the same error class, message and position, and
leaves the same audit log and test results; plus the tier-switching paths tier 2 adds."""

from __future__ import annotations

import glob
import importlib
import io
import os
import re

import pytest

from conftest import ROOT, TESTS
from expectations import parse_expectations

PROGRAMS = sorted(glob.glob(os.path.join(TESTS, "programs", "*", "*.sns")))
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.sns")))


# A tool whose results are labelled and an outgoing action the second look checks, for
# programs that test what a tier does with labelled values.
TOOL_AND_SEND = """\
untrusted tool count(k: Int) returns Int requires web.read:
    return 40 + k
irreversible action send(to: String) requires email.send:
    print("sent to", to)
policy:
    allow web.read
    allow email.send
"""


def _verified(path):
    from sensec.driver import compile_file
    from sensevm.bytecode.snb import dump
    from sensevm.bytecode.verify import load_verified
    return load_verified(dump(compile_file(path, defer_import_errors=True)))


def run_tier(verified, tier, *, dry_run=False, source=None):
    """Everything observable about one run: stdout, the error, the audit log, test results."""
    from sensevm.base.errors import SenseError
    from sensevm.runtime.vm import VM
    out = io.StringIO()
    vm = VM(verified, stdout=out, dry_run=dry_run, tier=tier, stdin=io.StringIO(""))
    error = None
    try:
        vm.run()
    except SenseError as err:
        error = (type(err).__name__, err.text, err.pos, err.path, err.kind, tuple(err.frames))
    tests = [(t.name, t.passed, t.error and t.error.text, t.pos) for t in vm.tests]
    records = [(r.subject, r.event, r.detail, r.line, r.lineage, r.host_only)
               for r in vm.audit.records]
    return out.getvalue(), error, vm.audit.lines(), records, tests, vm


def assert_same_on_both_tiers(path, dry_run=False):
    from sensevm.base.errors import SenseError
    try:
        verified = _verified(path)
    except SenseError:
        pytest.skip("does not compile (a compile-error program)")
    one = run_tier(verified, "1", dry_run=dry_run)
    two = run_tier(verified, "2", dry_run=dry_run)
    assert one[:5] == two[:5]
    return two


def _id(path: str) -> str:
    return os.path.relpath(path, os.path.join(TESTS, "programs"))


def _meets_expectations(stdout, error, expected):
    """The `# expect` lines of a corpus program, as test_programs.py checks them."""
    if expected.syntax_error_line is not None:
        assert error is not None and error[0] == "SenseSyntaxError", error
        assert error[2].line == expected.syntax_error_line
        return
    assert stdout.split("\n")[:-1] == expected.stdout_lines
    if expected.error_text is None:
        assert error is None, error
    else:
        assert error is not None and error[1] == expected.error_text, error
        if expected.error_class:
            assert error[4] == expected.error_class


@pytest.mark.parametrize("path", PROGRAMS, ids=_id)
def test_corpus_program_same_on_both_tiers(path):
    """Tier 2 passes the conformance corpus, and matches tier 1 in everything observable."""
    expected = parse_expectations(path)
    stdout, error, *_ = assert_same_on_both_tiers(path, dry_run="--dry-run" in expected.flags)
    _meets_expectations(stdout, error, expected)


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_example_same_on_both_tiers(path):
    stdout, error, *_ = assert_same_on_both_tiers(
        path, dry_run=os.path.basename(path) == "dry_run.sns")
    with open(path[:-4] + ".out", encoding="utf-8", newline="") as fh:
        assert stdout == fh.read()
    assert error is None


def test_tier_two_really_compiles(tmp_path):
    """The comparison above would be vacuous if tier 2 declined everything."""
    path = tmp_path / "p.sns"
    path.write_text("def f(n):\n    return n + 1\nx = 0\nwhile x < 5:\n    x = f(x)\nprint(x)\n")
    vm = assert_same_on_both_tiers(str(path))[5]
    assert all(code.t2 for code in vm.prepared)


def _run_source(tmp_path, source, tier, **kw):
    path = tmp_path / "p.sns"
    path.write_text(source)
    return run_tier(_verified(str(path)), tier, **kw)


HOT_LOOP = """\
total = 0
def step(i):
    if i % 7 == 3:
        return i * 2
    return 1
i = 0
while i < 500:
    local k = step(i)
    total = total + k
    i = i + 1
print(total)
print(i / 0)
"""


def test_auto_switches_a_running_frame_to_tier_two(tmp_path):
    """A hot loop in a frame that started in tier 1 continues in tier 2 (at a loop header), with
    the same result and the same error position afterwards."""
    auto = _run_source(tmp_path, HOT_LOOP, "auto")
    one = _run_source(tmp_path, HOT_LOOP, "1")
    assert auto[:5] == one[:5]
    assert one[1][0] == "SenseRuntimeError" and one[1][2].line == 12
    vm = auto[5]
    assert vm.prepared[vm.program.entry].t2, "the module's loop should have switched tiers"


def test_deep_recursion_on_tier_two(tmp_path):
    source = ("def down(n):\n    if n == 0:\n        return 0\n    return 1 + down(n - 1)\n"
              "print(down(10000))\nprint(down(100000))\n")
    out, error, *_ = _run_source(tmp_path, source, "2")
    assert out == "10000\n"
    assert error[0] == "SenseRecursionError" and error[1] == "maximum recursion depth exceeded"


def test_code_keeping_a_deep_stack_stays_in_tier_one(tmp_path):
    """Tier 2 writes the operand stack back at every call, so code whose stack is hundreds
    deep across its calls would generate code quadratic in its size (700 nested calls took
    1 GB and 8 seconds): it stays in tier 1, in memory of about its own size."""
    import tracemalloc
    source = "def f(a):\n    return a\nprint(" + "f(" * 300 + "7" + ")" * 300 + ")\n"
    tracemalloc.start()
    try:
        out, error, *_, vm = _run_source(tmp_path, source, "2")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (out, error) == ("7\n", None)
    assert not vm.prepared[vm.program.entry].t2
    assert vm.prepared[1].t2            # f itself is compiled
    assert peak < 20_000_000


SCOPES = """\
g = 1
def f(x):
    g = g + x          # updates the global
    y = 0
    if x > 0:
        y = 5          # updates f's y
        z = 1          # a block binding, gone after the if
        local g = 100  # shadows the global inside the block
        y = y + g
    return y
print(f(1), g)
def h():
    return later     # a global created after h was defined (and compiled)
i = 0
while i < 40:
    i = i + 1
    f(i)
later = 7
print(h(), g)
def noz():
    if true:
        q = 1
    return q
print(noz())
"""


def test_scope_rules_on_both_tiers(tmp_path):
    one = _run_source(tmp_path, SCOPES, "1")
    two = _run_source(tmp_path, SCOPES, "2")
    auto = _run_source(tmp_path, SCOPES, "auto")
    assert one[:5] == two[:5] == auto[:5]
    assert one[0].splitlines() == ["105 2", "7 822"]
    assert one[1][:2] == ("SenseNameError", "[line 23] undefined variable 'q'")


OUTER_STORES = """\
seen = 0
reversible action note(k: Int) requires log.write:
    seen = seen + k
rollback:
    seen = seen - k

policy:
    allow log.write

def outer():
    hits = 0
    def inner(n):
        i = 0
        while i < n:
            a = note(i)
            a.verify()
            a.commit()
            seen = seen + 1000
            hits = hits + 1
            fresh = i * 2
            seen = seen + fresh
            i = i + 1
        return i
    return [inner(30), hits]

def top(n):
    i = 0
    while i < n:
        b = note(i)
        b.verify()
        b.commit()
        seen = seen + 1
        mine = i
        i = i + 1
    return i

print(top(40), seen)
print(outer(), seen)
"""


def test_block_stores_find_outer_bindings_on_both_tiers(tmp_path):
    """A store in a loop's block of a function tier 2 runs with frames updates the binding in
    the function's parent (hits, of outer) or grandparent (seen, the module's) scope, written
    out in the generated code, or else binds the name in the block (b, a, mine, fresh)."""
    one = _run_source(tmp_path, OUTER_STORES, "1")
    two = _run_source(tmp_path, OUTER_STORES, "2")
    assert one[:5] == two[:5]
    assert one[0] == "40 820\n[30, 30] 32125\n" and one[1] is None


def test_unknown_tier_is_refused(monkeypatch):
    from sensevm.runtime.vm import default_tier
    monkeypatch.setenv("SENSE_TIER", "3")
    with pytest.raises(ValueError):
        default_tier()
    monkeypatch.setenv("SENSE_TIER", "2")
    assert default_tier() == "2"


LEAF = """\
def bad(x):
    y = 1
    if x > 40:
        return x + "s"
    return x
def typed(x) -> Int:
    return x
def run():
    i = 0
    while i < 50:
        i = i + 1
        bad(i)
    return i
test "caught in a leaf":
    run()
print(typed(3))
print(typed("no"))
"""


def test_leaf_functions_fail_where_tier_one_does(tmp_path):
    """A function that calls nothing runs without a frame in tier 2: its errors still carry its
    own position, a test block around the call still records them, and a declared return type
    is still reported at the call."""
    one = _run_source(tmp_path, LEAF, "1")
    two = _run_source(tmp_path, LEAF, "2")
    assert one[:5] == two[:5]
    (name, passed, text, _), = one[4]
    assert not passed and text.startswith("[line 4] '+' requires both operands to be String")
    assert one[0] == "3\n"
    assert one[1][1] == "[line 17] 'typed' declared to return Int, got String"
    assert two[5].prepared[1].direct is not None       # `bad` really ran as a leaf


BLOCKS = """\
x = "global x"
def show():
    return x
def blocks(n):
    total = 0
    for x in range(n):              # the loop variable is a fresh binding per iteration
        if x % 2 == 0:
            local total = 100       # shadows `total` inside this block only
            total = total + x
            continue
        seen = x                    # bound in the iteration's scope
        while seen > 0:
            step = 1
            seen = seen - step
            if seen == 3:
                break
        total = total + seen + len(show())
    return total
print(blocks(60), x)
def after():
    for k in [1, 2]:
        inner = k
    return inner
print(after())
"""


def test_block_variables_on_both_tiers(tmp_path):
    """Names bound in block scopes (for variables, `local`, first assignments) live in Python
    locals in tier 2: shadowing, freshness per iteration and invisibility after the block must
    stay exactly tier 1's, and so must a frame switching tiers in the middle of nested loops."""
    one = _run_source(tmp_path, BLOCKS, "1")
    for tier in ("2", "auto"):
        assert _run_source(tmp_path, BLOCKS, tier)[:5] == one[:5]
    assert one[0] == "324 global x\n" and one[1][1] == "[line 23] undefined variable 'inner'"


IN_PLACE = """\
tool probe(k: Int) returns Int requires t.probe:
    return k
policy:
    allow t.probe
def run():
    i = 0
    while i < 30:
        i = i + 1
        a = i
        if i > 25:
            b = probe(i)        # the frame is spilled: both block scopes are built
            a = a * 100         # the outer block's `a`, while the inner scopes are cached
            b = b + 1
            r = probe(1)        # spilled again: the cached scopes are reused
            if r > 0:           # an untrusted comparison: tier 1 takes the frame over
                print(a, b)
        print(a)                # read by tier 1 from the outer block's scope
    return i
print(run())
"""


def test_cached_block_scopes_are_updated_in_place(tmp_path):
    """Tier 2 builds a frame's block scopes when it spills the frame and keeps them while no
    block is entered: a later store to a block variable updates them in place, at the right
    level, so the tier-1 continuation that takes them over reads the new values."""
    one = _run_source(tmp_path, IN_PLACE, "1")
    two = _run_source(tmp_path, IN_PLACE, "2")
    assert one[:5] == two[:5]
    assert one[0].splitlines()[-11:] == ["2600 27", "2600", "2700 28", "2700", "2800 29",
                                         "2800", "2900 30", "2900", "3000 31", "3000", "30"]


REENTERED = """\
tool probe(k: Int) returns Int requires t.probe:
    return k
policy:
    allow t.probe
def run():
    v = 0
    i = 0
    while i < 30:
        i = i + 1
        if v > 0:               # untrusted from the 29th iteration: tier 1 takes over here
            print(q)            # not bound yet in this iteration's scope
        if i == 28:
            v = probe(1)
        r = probe(i)            # the frame is spilled: the loop body's scope is built
        q = i
    return i
print(run())
"""


def test_reentered_block_scope_starts_empty(tmp_path):
    """A block scope tier 2 keeps from one entry of a block to the next is emptied on entry: a
    tier-1 continuation in a later iteration does not see the last iteration's bindings."""
    one = _run_source(tmp_path, REENTERED, "1")
    two = _run_source(tmp_path, REENTERED, "2")
    assert one[:5] == two[:5]
    assert one[0] == "" and one[1][:2] == ("SenseNameError", "[line 11] undefined variable 'q'")


NIL_COMPARISONS = """\
tool probe(k: Int) returns Int requires t.probe:
    return k
policy:
    allow t.probe
def check(values):
    out = []
    for v in values:
        push(out, v == nil)
        push(out, v != nil)
    return out
def run():
    i = 0
    seen = 0
    last = []
    while i < 40:
        i = i + 1
        last = check([nil, 0, false, true, "", [], [nil], 1.5, i])
        p = probe(i)            # untrusted: compared with nil on the labelled path
        if p != nil:
            seen = seen + 1
        if p == nil:
            seen = seen - 100
    print(last)
    return seen
print(run())
"""


def test_comparisons_with_nil_on_both_tiers(tmp_path):
    """`x == nil` and `x != nil` are an identity test in tier 2 for any value but a labelled one,
    which still takes values.equal (its result is labelled, and a branch on it goes to tier 1)."""
    one = _run_source(tmp_path, NIL_COMPARISONS, "1")
    two = _run_source(tmp_path, NIL_COMPARISONS, "2")
    assert one[:5] == two[:5]
    assert one[0].splitlines() == ["[true, false" + ", false, true" * 8 + "]", "40"]


def test_run_command_forces_a_tier(tmp_path):
    """`sensevm run --tier` selects the tier (through SENSE_TIER), and refuses an unknown one."""
    import subprocess
    import sys
    path = tmp_path / "p.sns"
    path.write_text(HOT_LOOP)
    outs = []
    for tier in ("1", "2", "auto"):
        done = subprocess.run([sys.executable, "-m", "sensevm", "run", "--tier", tier, str(path)],
                              capture_output=True, text=True, cwd=ROOT,
                              env=dict(os.environ, NO_COLOR="1"))
        assert done.returncode == 1
        outs.append((done.stdout, done.stderr))
    assert outs[0] == outs[1] == outs[2]
    assert "p.sns:12:" in outs[0][1] and "division by zero" in outs[0][1]
    bad = subprocess.run([sys.executable, "-m", "sensevm", "run", "--tier", "3", str(path)],
                         capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2


def test_tier_option_sets_the_environment_the_vm_reads(tmp_path, monkeypatch):
    from click.testing import CliRunner
    from sensevm.cli.commands import main
    from sensevm.runtime.vm import default_tier
    monkeypatch.setenv("SENSE_TIER", "auto")    # and restored after the test, whatever it was
    path = tmp_path / "p.sns"
    path.write_text('print("hi")\n')
    result = CliRunner().invoke(main, ["run", "--tier", "2", str(path)])
    assert result.exit_code == 0 and result.output == "hi\n"
    assert default_tier() == "2"


DECLARED_HERE = """\
policy:
    allow ledger.write
def outer(n):
    count = 0
    seen = 0
    total = 0
    hits = 0
    ran = 0
    def bump():
        count = count + 1
    def deep():
        def inner():
            seen = seen + 10
        inner()
    reversible action note(k: Int) requires ledger.write:
        total = total + k
    rollback:
        total = total - k
    tool probe(k: Int) returns Int requires calc.probe:
        hits = hits + 1
        return k
    agent clerk:
        "bumps ran"
        ran = ran + 1
    i = 0
    while i < n:
        bump()
        deep()
        a = note(probe(i))
        a.verify()
        a.commit()
        if i % 2 == 0:
            a.rollback()
        if i == n - 1:
            start(clerk)
        i = i + 1
    return [count, seen, total, hits, ran, i]
print(outer(60))
print(outer(3))
"""


def test_names_code_declared_here_uses_stay_in_the_scope_on_both_tiers(tmp_path):
    """A function that declares closures, actions, tools and agents mirrors in Python locals
    only the names none of them uses: each write those make to a name of the function (a
    closure's, a nested closure's, an action body's and its rollback's, a tool body's, an
    agent body's) is seen by the function's own tier-2 code."""
    one = _run_source(tmp_path, DECLARED_HERE, "1")
    two = _run_source(tmp_path, DECLARED_HERE, "2")
    assert one[:5] == two[:5]
    assert one[0] == "[60, 600, 900, 60, 1, 60]\n[3, 30, 1, 3, 1, 3]\n" and one[1] is None
    from sensevm.runtime.tier2 import _Gen
    code = next(c for c in two[5].prepared if c.code.name == "outer")
    gen = _Gen(code)
    gen.analyse()
    # the loop counter, the parameter and the names of what is declared here, which no
    # declared code names itself
    assert set(gen.cached) == {"i", "n", "bump", "deep", "note", "probe", "clerk"}



MOVED_BINDING = """\
def make(early):
    def read():
        return z
    if early:
        return read
    z = "make's z"
    return read
def twice(f):
    return f() + " / " + f()
i = 0
while i < 40:
    print(twice(make(false)))
    i = i + 1
{module}print(twice(make(true)))
print(twice(make(false)))
"""


@pytest.mark.parametrize("module", ['z = "module z"\n', ""])
def test_a_load_predicted_from_the_declaring_scope_falls_back_where_the_binding_is_not(
        tmp_path, module):
    """`read` is made while its declaring scope binds `z`, so its tier-2 code reads that
    scope's dict once for it; a closure of the same code whose declaring scope has no `z`
    finds the module's (or tier 1's undefined-variable error, at the same position) instead."""
    source = MOVED_BINDING.format(module=module)
    one = _run_source(tmp_path, source, "1")
    two = _run_source(tmp_path, source, "2")
    assert one[:5] == two[:5]
    lines = one[0].splitlines()
    assert lines[:40] == ["make's z / make's z"] * 40
    if module:
        assert lines[40:] == ["module z / module z", "make's z / make's z"] and one[1] is None
    else:
        assert len(lines) == 40
        assert one[1][0] == "SenseNameError" and one[1][1].endswith("undefined variable 'z'")
        assert one[1][2].line == 3
    read = next(c for c in two[5].prepared if c.code.name == "read").t2
    predicted = [line for line in read.direct_source.splitlines() if "pv['z']" in line]
    assert predicted and all(line.lstrip().startswith("try:") for line in predicted)


NESTED_LOOPS = """\
def f(n):
    t = 0
    for a in range(3):
        t = t + a
    while n > 0:
        k = 0
        while k < 3:
            t = t + k * 2 + n - 1 + k * k
            k = k + 1
        n = n - 1
    return t
print(f(40))
"""


def test_the_innermost_loops_header_is_tested_first(tmp_path):
    """Tier 2 finds the block to run next by testing L; the header of the deepest loop (not
    merely the shortest: the first loop here is shorter) is tested before all others."""
    one = _run_source(tmp_path, NESTED_LOOPS, "1")
    two = _run_source(tmp_path, NESTED_LOOPS, "2")
    assert one[:5] == two[:5] and one[0] == f"{3 + sum(3 * n + 6 + 5 for n in range(40))}\n"
    from sensevm.runtime.tier2 import _Gen
    code = next(c for c in two[5].prepared if c.code.name == "f")
    gen = _Gen(code)
    gen.analyse()
    source = gen.generate()
    inner = gen.innermost_loop(sorted(j for j in gen.dispatch if gen.state[j] is not None))
    assert code.positions[inner].line == 7
    assert source.split("while True:\n", 1)[1].lstrip().startswith(f"if L == {inner}:")


REUSED_BLOCKS = """\
t = "outer"
u = "none"
def f(n):
    def g(x):
        return x * 10
    seen = []
    i = 0
    while i < n:
        push(seen, t)
        local t = g(i)
        push(seen, t)
        for k in range(2):
            push(seen, k + i)
        j = 0
        while j < 2:
            push(seen, [t, u])
            local u = j
            j = j + 1
        keep = []
        for k in range(2):
            def h():
                return k
            push(keep, h)
        push(seen, keep[0]() + keep[1]())
        i = i + 1
    return seen
print(f(3))
"""


def test_a_loop_bodys_block_scope_serves_again_only_where_nothing_keeps_it(tmp_path):
    """In a function that declares a closure, a loop body's block scope that nothing can keep
    is reused, emptied, every turn (a `local` of the last turn is gone) while its parent is the
    same (the inner loop's sees each outer turn's `t`); the block that declares a closure gets
    a scope of its own every turn, which each closure keeps."""
    one = _run_source(tmp_path, REUSED_BLOCKS, "1")
    two = _run_source(tmp_path, REUSED_BLOCKS, "2")
    assert one[:5] == two[:5] and one[1] is None
    assert one[0] == ("[outer, 0, 0, 1, [0, none], [0, none], 1, outer, 10, 1, 2, [10, none], "
                      "[10, none], 1, outer, 20, 2, 3, [20, none], [20, none], 1]\n")
    from sensevm.runtime.tier2 import _Gen
    code = next(c for c in two[5].prepared if c.code.name == "f")
    gen = _Gen(code)
    gen.analyse()
    lines = {code.positions[i].line for i in gen.reused}
    # The inner while body and the first for body; not the for body that declares h, nor the
    # outer while body around it (each h keeps both).
    assert lines == {12, 15}


STEP_FAILS = """\
policy:
    allow ledger.write
    allow ledger.stamp
reversible action credit(k: Int) requires ledger.write:
    print("credit", k)
rollback:
    print("undo", k)
irreversible action stamp(k: Int) requires ledger.stamp, approval:
    return k
def go(n, bad):
    i = 0
    while i < n:
        c = credit(i)
        c.verify()
        c.commit()
        s = stamp(i)
        s.verify()
        s.approve()
        s.commit()
        if i == bad:
            FAIL
        i = i + 1
go(50, 40)
"""


@pytest.mark.parametrize("fail, column, kind", [
    ("c.verify()", 15, "SenseRuntimeError"),
    ("s.approve()", 15, "SenseRuntimeError"),
    ('x = credit("no")', 23, "SenseTypeError"),
])
def test_a_failing_lifecycle_step_in_a_hot_loop_is_placed_alike_on_both_tiers(tmp_path, fail,
                                                                               column, kind):
    """Tier 2 calls prepare, verify and approve with the position and without spilling the
    stack: an error they raise is still placed at the step, as tier 1 places it."""
    source = STEP_FAILS.replace("FAIL", fail)
    one = _run_source(tmp_path, source, "1")
    two = _run_source(tmp_path, source, "2")
    assert one[:5] == two[:5]
    name, _, pos, *_ = one[1]
    assert name == kind and (pos.line, pos.col) == (21, column)
    assert one[0].count("credit") == 41


def _unread_per_line(lines):
    """The prologue lines prune_unread drops, found as it once found them: a regular expression
    searched in every other line, per candidate (which cost more than the rest of generating
    the code: such a search tries every position of the line)."""
    import re
    from sensevm.runtime.tier2 import _DIRECT_GRAND, _DIRECT_GREAT, _GRAND, _GREAT
    reads = {"    " + _GRAND: r"\bppv\b", "    " + _GREAT: r"\bP3\b",
             "    " + _DIRECT_GRAND: r"\bppv\b", "    " + _DIRECT_GREAT: r"\bP3\b",
             "    L = 0": r"\bL\b(?!\s*=[^=])", "    bk = False": r"\bbk\b(?!\s*=[^=])",
             "    bsc = None": r"\bbsc\b(?!\s*=[^=])", "    pv = P.vars": r"\bpv\b(?!\s*=[^=])",
             "    pv = cl.scope.vars": r"\bpv\b(?!\s*=[^=])", "    _hot = 0": r"\b_hot\b"}
    body = next((k for k, line in enumerate(lines) if line == "    try:"), len(lines))
    for k in range(body):
        local = re.fullmatch(r"    ([lb]\d+(?:_\d+)?) = U", lines[k])
        if local:       # a local's start as unbound
            reads[lines[k]] = rf"\b{local.group(1)}\b(?!\s*=[^=])"
    gone = {k for k in range(body) if lines[k] in reads and not any(
        re.search(reads[lines[k]], line) for n, line in enumerate(lines) if n != k)}
    # UNSET's local, once nothing that was left reads it.
    then = {"    U = UNSET": r"\bU\b"}
    return gone | {k for k in range(body) if lines[k] in then and not any(
        re.search(then[lines[k]], line) for n, line in enumerate(lines)
        if n != k and n not in gone)}


def test_a_read_is_a_whole_word_not_assigned_to():
    from sensevm.runtime.tier2 import _reads
    assert _reads("    bk = False\n    if bk: x", "bk")
    assert _reads("    bk = False\n    if bk == 3: x", "bk")
    assert not _reads("    bk = False\n    bk = 3\n    bkx = 1\n    _bk = 2", "bk")
    assert _reads("L = 0\nx = L", "L") and not _reads("L = 0\nLINEMAP = L2", "L")
    assert _reads("U = UNSET\nl0 = U", "U") and not _reads("U = UNSET\nUNSET", "U")


def _generated(verified) -> list:
    """The tier-2 source of every code object of ``verified`` tier 2 takes: its generator's,
    with Int versions, and its direct form's where it has one (skips the test when tier 2
    declines them all)."""
    from sensevm.runtime import tier2
    from sensevm.runtime.vm import VM
    sources = []
    for prepared in VM(verified, stdout=io.StringIO()).prepared:
        gen = tier2._Gen(prepared)
        try:
            gen.analyse()
        except tier2._Declined:
            continue
        gen.specialise = True
        sources.append(gen.generate())
        if gen.has_direct_form():
            gen.direct, gen.lazy = True, gen.scope_is_lazy()
            sources.append(gen.generate_direct())
    if not sources:
        pytest.skip("tier 2 declines all its code")
    return sources


@pytest.mark.parametrize("path", PROGRAMS[::5] + EXAMPLES, ids=_id)
def test_unread_prologue_lines_are_the_ones_a_search_per_line_found(path, monkeypatch):
    """prune_unread (one str.find walk of the text per variable) drops the very lines a
    regular expression searched in every line dropped."""
    from sensevm.base.errors import SenseError
    from sensevm.runtime import tier2
    try:
        verified = _verified(path)
    except SenseError:
        pytest.skip("does not compile")
    pruned = []
    original = tier2._Gen.prune_unread

    def prune(self):
        before = list(self.lines)
        original(self)
        pruned.append((before, self.lines))
    monkeypatch.setattr(tier2._Gen, "prune_unread", prune)
    _generated(verified)
    for before, after in pruned:
        gone = _unread_per_line(before)
        assert after == [line for k, line in enumerate(before) if k not in gone]


@pytest.mark.parametrize("path", PROGRAMS[::7] + EXAMPLES, ids=_id)
def test_generated_code_reads_a_values_class_without_calling_type(path):
    """Tier 2 tests a value's type as ``x.__class__`` (an attribute read: about 60 fewer
    instructions a test under 3.11 than a call of the builtin ``type``), in every form it
    makes; the same answer as ``type(x)`` for every value (see the next test)."""
    from sensevm.base.errors import SenseError
    try:
        verified = _verified(path)
    except SenseError:
        pytest.skip("does not compile")
    for source in _generated(verified):
        assert not re.search(r"\btype\(", source)


def test_no_class_a_value_can_have_answers_for_its_class_itself():
    """``x.__class__`` is ``type(x)`` unless x's class (or one it inherits from) defines
    ``__class__`` or its own ``__getattribute__``: none of the runtime's classes does (the
    Python types they build on keep the generic attribute lookup)."""
    import inspect
    import pkgutil
    import sensevm
    for info in pkgutil.walk_packages(sensevm.__path__, "sensevm."):
        if info.name.startswith(("sensevm.cli", "sensevm.stdlib")) or info.name.endswith(
                "__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if not cls.__module__.startswith("sensevm"):
                continue
            assert inspect.getattr_static(cls, "__class__") is vars(object)["__class__"], cls
            for klass in cls.__mro__:
                if klass.__module__.startswith("sensevm"):
                    assert "__getattribute__" not in vars(klass), klass


SHADOWED = """\
x = "module"
def g(xs):
    out = []
    for x in xs:
        for x in [x, x * 10]:
            out.push(x)
        out.push(x)
        if x > 2:
            for y in [x]:
                out.push(y)
        out.push(x)
    return out
i = 0
r = []
while i < 40:
    r = g([1, 2, 3])
    i = i + 1
print(r, x)
print(g([1, nope]))
"""


def test_a_loop_variable_read_after_it_was_bound_needs_no_test(tmp_path):
    """A block local bound by its block's own code (a for loop's variable) is read without
    testing whether it is bound; loops nested over the same name, a branch's block and the
    loop after it read what tier 1 reads."""
    one = _run_source(tmp_path, SHADOWED, "1")
    two = _run_source(tmp_path, SHADOWED, "2")
    assert one[:5] == two[:5]
    assert one[0].splitlines()[0] == "[1, 10, 1, 1, 2, 20, 2, 2, 3, 30, 3, 3, 3] module"
    from sensevm.runtime.tier2 import _Gen
    gen = _Gen(next(c for c in two[5].prepared if c.code.name == "g"))
    gen.analyse()
    assert re.search(r"\n *s\d = b\d+_0\n", gen.generate())


TURNS = """\
def f(n, x):
    total = 0
    i = 0
    while i < n:
        j = 0
        while j < 3:
            total = total + j * x
            j = j + 1
        if total > 400:
            return total
        i = i + 1
    for k in [1, 2, 3]:
        total = total - k
    k = 0
    while k < n:
        total = total + 1
        k = k + 1
    return total / (n - 7)
print(f(6, 2), f(6, 2.5), f(60, 3))
print(f(7, 1))
"""


def test_a_loop_turns_in_a_while_of_its_own(tmp_path):
    """Each loop header tier 2 dispatches to runs in a ``while True`` of its own, whose next
    turn is a ``continue`` that skips the dispatch's tests; leaving it (for another loop, an
    early return, a Float's general version, the error after) does what tier 1 does."""
    one = _run_source(tmp_path, TURNS, "1")
    two = _run_source(tmp_path, TURNS, "2")
    assert one[:5] == two[:5] and one[1] is not None
    assert one[0] == "-36.0 -45.0 405\n"
    from sensevm.runtime.tier2 import _Gen
    gen = _Gen(next(c for c in two[5].prepared if c.code.name == "f"))
    gen.analyse()
    source = gen.generate()
    assert source.count("while True:") >= 4         # the dispatch loop, and three loops'
    assert re.search(r"\n( *)L = \d+\n\1break\n", source)
    assert re.search(r"\n *continue\n", source)


ITEMS = """\
def walk(xs, limit):
    seen = []
    for x in xs:
        push(seen, x)
        if len(seen) < limit:
            push(xs, x + 100)
        if x == 3:
            xs.pop()
    n = 0
    for c in "ab c":
        n = n + 1
    return [seen, n]
def count(s):
    spaces = 0
    for c in s:
        if c == " ":
            spaces = spaces + 1
    return spaces
long = "x "
while len(long) < 70000:
    long = long + long
print(walk([1, 2, 3, 4, 5], 3), walk([], 2), walk([3], 9))
print(count("a b c"), count(long), count(""))
"""


def test_a_for_loop_reads_its_item_without_asking_the_length(tmp_path):
    """Tier 2's FOR_ITER reads ``items[i]`` and leaves the loop on IndexError, with no
    ``len()`` first: an Array the body grows or shrinks, an empty one, a short String (a copy)
    and a long one (read in place) end where tier 1's loops end. (An item loop's Int version
    asks the length only on entry, whether an item is left to test, and when its Python
    ``for`` has found none, for tier 1's last FOR_ITER of a reshaped Array.)"""
    one = _run_source(tmp_path, ITEMS, "1")
    two = _run_source(tmp_path, ITEMS, "2")
    assert one[:5] == two[:5] and one[1] is None
    assert one[0] == ("[[1, 2, 3, 4, 5, 101], 4] [[], 4] [[3], 4]\n"
                      "2 65536 0\n")
    from sensevm.runtime.tier2 import _Gen
    for name in ("walk", "count"):
        gen = _Gen(next(c for c in two[5].prepared if c.code.name == name))
        gen.analyse()
        source = gen.generate()
        assert re.search(r"try: s\d = s\d\.items\[s\d\.i\]\n *except IndexError:", source)
        for line in source.splitlines():
            if re.search(r"len\(s\d\.items\)", line):
                assert (re.match(r" *if .*not s\d\.origins and \(s\d\.i >= len", line)
                        or re.fullmatch(r" *s\d\.i = len\(s\d\.items\)", line)), line


LIFECYCLE_NAMES_ON_A_MODULE = """\
import ops
total = 0
i = 0
while i < 30:
    total = total + (i + ops.verify()) * 2 + ops.approve() + (i * ops.commit())
    i = i + 1
print(total, ops.calls[0])
"""


def test_lifecycle_calls_on_what_is_not_an_action_are_member_calls_on_both_tiers(tmp_path):
    """`x.verify()` / `.approve()` / `.commit()` on a module call its functions of those
    names: tier 2's branch for a receiver that is not a prepared action, with values below it
    on the stack that the call must leave as they were."""
    (tmp_path / "ops.sns").write_text(
        "calls = [0]\n"
        "def verify():\n    calls[0] = calls[0] + 1\n    return 1\n"
        "def approve():\n    calls[0] = calls[0] + 1\n    return 10\n"
        "def commit():\n    calls[0] = calls[0] + 1\n    return 3\n")
    one = _run_source(tmp_path, LIFECYCLE_NAMES_ON_A_MODULE, "1")
    two = _run_source(tmp_path, LIFECYCLE_NAMES_ON_A_MODULE, "2")
    assert one[1] is None and one[0] == f"{sum((i + 1) * 2 + 10 + i * 3 for i in range(30))} 90\n"
    assert two[:5] == one[:5]


def test_running_out_of_memory_in_tier_ones_int_fast_path_is_placed_at_the_operation(
        tmp_path, monkeypatch):
    """Tier 1 does Int arithmetic in its dispatch loop without writing the frame's ip back;
    running out of memory there is placed at the operation itself, not at the last
    instruction a handler ran (the call on line 3; found by review)."""
    from sensevm.runtime import vm as vm_module

    def out_of_memory(left, right):
        raise MemoryError()
    from sensevm.bytecode.opcodes import Op
    monkeypatch.setitem(vm_module._INT_OPS, int(Op.MUL), out_of_memory)
    out, error, *_ = _run_source(tmp_path, "def f(x, y):\n    z = [x]\n    w = len(z)\n"
                                           "    return x * y\nprint(f(3, 4))\n", "1")
    assert out == "" and error[:2] == ("SenseRuntimeError", "out of memory")
    assert (error[2].line, error[2].col) == (4, 14)
