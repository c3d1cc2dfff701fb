"""Inlined calls: tier 2 computes a small function's call in place when the callee is the
closure it guessed while compiling (tier2._Gen.inlined_call, sensevm/runtime/inlining.py).
Each program attacks what the inlined form takes for granted: the callee rebound to other
code, its captured variables changed to other types, labelled by a tool, or bound only further
out; the depth limit met at the inlined call; a store to a captured variable that another
closure reads. Tier 2 ("2", and "auto", which compiles at a hot loop's header with the frame's
bindings to guess from) must do exactly what tier 1 does."""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import assume, given, settings, strategies as st

from test_tiers import TOOL_AND_SEND, _run_source, _verified

TIERS = ("2", "auto")
# An inlined site: the callee tested to be a closure of the guessed code.
SITE = re.compile(r"^ *if s(\d+)\.__class__ is Closure and s\1\.code is _k\d+ and ", re.M)


def _sites(vm, name=None) -> int:
    """How many inlined call sites the tier-2 code of ``name`` (or of every code object) has,
    in its generator and its direct form."""
    count = 0
    for code in vm.prepared:
        if code.t2 and (name is None or code.code.name == name):
            count += len(SITE.findall(code.t2.source + (code.t2.direct_source or "")))
    return count


def _all_tiers(tmp_path, source):
    """The run on tier 1, and the tier-2 runs' VMs, after asserting they all did the same."""
    one = _run_source(tmp_path, source, "1")
    vms = {}
    for tier in TIERS:
        other = _run_source(tmp_path, source, tier)
        assert other[:5] == one[:5], tier
        vms[tier] = other[5]
    return one, vms


CLOSURES = """\
def make_counter(step):
    count = 0
    def next():
        count = count + step
        return count
    return next
def compose(f, g):
    def both(x):
        return f(g(x))
    return both
def run(n):
    adders = []
    for k in range(10):
        def add(x):
            return x + k
        push(adders, add)
    counter = make_counter(3)
    shifted = compose(adders[1], adders[2])
    total = 0
    i = 0
    while i < n:
        total = (total + counter() + shifted(i) + adders[i % 10](i)) % 1000003
        i = i + 1
    return total
print(run(300))
"""


def test_the_closures_benchmark_inlines_its_calls(tmp_path):
    """counter() (a store to its captured count), shifted(i) (both, and the two adds it calls,
    two levels deep) and adders[i % 10](i) (an Array of closures of one code) are done in
    place in run's loop once it is hot; both's direct form does its own two calls in place."""
    one, vms = _all_tiers(tmp_path, CLOSURES)
    total = 0
    for i in range(300):
        total = (total + 3 * (i + 1) + (i + 3) + (i + i % 10)) % 1000003
    assert one[1] is None and one[0] == f"{total}\n"
    assert _sites(vms["auto"], "run") >= 3
    source = next(c for c in vms["auto"].prepared if c.code.name == "run").t2.source
    assert "_c" in source and "'count' in" not in source    # (its read found it: no test)
    # add's scope is read once: not bound to a local first; next's twice (and stored to): bound
    assert re.search(r" and \(_c\d+ := s1\.scope\.vars\.get\('k', U\)\)\.__class__ is int:", source)
    assert re.search(r"\(_c(\d+) := s1\.scope\.vars\) and \(_c\d+ := _c\1\.get\('count', U\)\)",
                     source)
    assert re.search(r"\(_c(\d+) := s1\.scope\.vars\) and \(_c\d+ := _c\1\.get\('g', U\)\)", source)


REBOUND = """\
def make(k):
    def add(x):
        return x + k
    return add
def make_mul(k):
    def mul(x):
        return x * k
    return mul
def run(n, third, late):
    f = make(3)
    total = 0
    i = 0
    while i < n:
        if i == 100:
            f = make_mul(2)
        if i == 130:
            f = make(2.5)
        if i == 160:
            f = make(third)
        if i == 190:
            f = make(3)
        if i == late:
            f = make("s")
        total = total + f(i)
        i = i + 1
    return total
CALLS
"""


def test_a_callee_rebound_or_its_captures_changed_takes_the_call(tmp_path):
    """The callee becomes a closure of other code over a variable of the same name, then a
    closure of the same code over a Float, a negative Int and an Int again: every guard that
    fails takes the call as before, and what it returns is tier 1's."""
    one, vms = _all_tiers(tmp_path, REBOUND.replace("CALLS", "print(run(220, -4, -1))"))
    expected = (sum(i + 3 for i in range(100)) + sum(i * 2 for i in range(100, 130))
                + sum(i + 2.5 for i in range(130, 160)) + sum(i - 4 for i in range(160, 190))
                + sum(i + 3 for i in range(190, 220)))
    assert one[1] is None and one[0] == f"{expected}\n"
    assert _sites(vms["auto"], "run") >= 1


@pytest.mark.parametrize("calls", ["print(run(220, true, -1))", "print(run(220, 4, 200))"])
def test_a_capture_of_another_type_fails_in_the_callee_as_tier_one_does(tmp_path, calls):
    """A closure of the same code over a Bool, or a String: the call is made, and fails in
    the callee: tier 1's error, at add's line, with add's frame on its call stack."""
    one, vms = _all_tiers(tmp_path, REBOUND.replace("CALLS", calls))
    assert one[0] == "" and one[1] is not None and one[1][2].line == 3
    assert "add()" in repr(one[1][5])
    assert _sites(vms["auto"], "run") >= 1


RECOMPOSED = """\
def make_add(k):
    def add(x):
        return x + k
    return add
def make_mul(k):
    def mul(x):
        return x * k
    return mul
def compose(f, g):
    def both(x):
        return f(g(x))
    return both
def run(n):
    h = compose(make_add(1), make_add(2))
    total = 0
    i = 0
    while i < n:
        if i == 100:
            h = compose(make_add(1), make_mul(2))
        total = total + h(i)
        i = i + 1
    return total
print(run(150))
"""


def test_an_inner_callee_of_other_code_takes_the_call(tmp_path):
    """h(i) inlines both and the two adds it calls; then h is a closure of the same code whose
    g is a closure of other code over a variable of the same name: the inner guard fails and
    the call multiplies, as tier 1 does."""
    one, vms = _all_tiers(tmp_path, RECOMPOSED)
    expected = sum(i + 3 for i in range(100)) + sum(i * 2 + 1 for i in range(100, 150))
    assert one[1] is None and one[0] == f"{expected}\n"
    assert _sites(vms["auto"], "run") >= 1


CAPTURED_STORE = """\
def make():
    count = 0
    def bump(d):
        count = count + d
        return count
    def peek():
        return count
    return [bump, peek]
def run(n):
    fs = make()
    bump = fs[0]
    peek = fs[1]
    total = 0
    i = 0
    while i < n:
        total = total + bump(i) * 2 - peek()
        if i == 150:
            fs = make()
            bump = fs[0]
        i = i + 1
    return [total, peek()]
print(run(200))
"""


def test_a_store_to_a_captured_variable_is_seen_by_the_closure_beside_it(tmp_path):
    """bump's store to count (inlined: the guards found count, the store is the last thing
    it does) is read by peek (inlined too) in the same expression, and after bump is a new
    closure over a new count, peek reads the old one."""
    one, vms = _all_tiers(tmp_path, CAPTURED_STORE)
    first, second, total = 0, 0, 0      # the first closures' count, the new bump's
    for i in range(200):
        if i <= 150:
            first += i
            total += first * 2 - first
        else:
            second += i
            total += second * 2 - first
    assert one[1] is None and one[0] == f"[{total}, {first}]\n"
    assert _sites(vms["auto"], "run") >= 2


FURTHER_OUT = """\
k = 5
def make():
    def add(x):
        return x + k
    return add
def square(x):
    return x * x
def run(n):
    f = make()
    total = 0
    i = 0
    while i < n:
        total = total + f(i) + square(i)
        if i == 60:
            k = 7
        if i == 80:
            square = make()
        i = i + 1
    return total
print(run(100))
"""


def test_a_capture_bound_only_further_out_takes_the_call(tmp_path):
    """add reads k from the globals, two scopes out: the inlined form reads only the callee's
    own scope's dict, finds nothing, and the call finds k (and its new value) as tier 1 does;
    square, a top-level function, is inlined (in forced tier 2 too: its name is a global) and
    rebinding its name to another closure takes the call."""
    one, vms = _all_tiers(tmp_path, FURTHER_OUT)
    assert one[1] is None
    assert _sites(vms["2"], "run") >= 1 and _sites(vms["auto"], "run") >= 2


UNUSED = """\
def first(a, b):
    return a
def f(x):
    return first(x, missing)
def run(n):
    total = 0
    i = 0
    while i < n:
        total = total + f(i)
        i = i + 1
    return total
print(run(50))
"""


def test_a_read_nothing_uses_must_still_find_its_binding(tmp_path):
    """f passes ``missing`` to first, which never reads it: inlined, nothing would need its
    value, but the call reads it, and fails there as tier 1 does (the plan guards every
    argument of an inner call to be found)."""
    one, vms = _all_tiers(tmp_path, UNUSED)
    assert one[1] is not None and "missing" in one[1][1] and one[1][2].line == 4
    assert _sites(vms["2"], "run") >= 1


LABELLED = TOOL_AND_SEND + """\
def twice(x):
    return x * 2
def make(k):
    def add(x):
        return x + k
    return add
def run(n, j):
    f = make(1)
    total = 0
    i = 0
    while i < n:
        if i == n - 1:
            f = make(j)
        total = total + twice(i) + f(i)
        i = i + 1
    return total
got = run(100, 0)
print(got)
got = run(100, count(1))
s = send("team" + str(got) + "@example.com")
s.verify()
print(s.second_look != nil)
total = 0
i = 0
x = count(2)
while i < 50:
    total = total + twice(x)
    i = i + 1
s = send("team" + str(total) + "@example.com")
s.verify()
print(s.second_look != nil)
"""


def test_a_labelled_argument_or_capture_keeps_its_label(tmp_path):
    """A tool's Int, captured by the callee or passed to it, is no plain Int: the guards
    fail, the call labels what it returns, and the address built from it is flagged by the
    second look on every tier."""
    one, vms = _all_tiers(tmp_path, LABELLED)
    assert one[1] is None and one[0].splitlines()[1:] == ["true", "true"]
    assert _sites(vms["auto"]) >= 2


DEPTH = """\
def leaf(x):
    return x + 1
def pair(x):
    return leaf(leaf(x))
def down(n):
    if n == 0:
        return CALLED
    return down(n - 1) + 0
def run():
    i = 0
    total = 0
    while i < 60:
        total = total + down(DEEP)
        i = i + 1
    return total
print(run())
"""


@pytest.mark.parametrize("called", ["pair(n)", "leaf(n)"])
@pytest.mark.parametrize("deep", [5, 20])
@pytest.mark.parametrize("max_depth", [6, 7, 8, 9, 10, 21, 22, 23, 24, 25])
def test_the_depth_limit_is_met_at_the_same_call(tmp_path, called, deep, max_depth):
    """The inlined call at the bottom of a recursion (pair, and the two leaf calls it makes
    one level further down; or leaf alone) is refused, and made as a call, exactly where the
    depth limit would refuse it: the same output and error, at the same call, on both
    tiers."""
    from test_direct_forms import _run_with_depth
    source = DEPTH.replace("DEEP", str(deep)).replace("CALLED", called)
    seen = [_run_with_depth(tmp_path, source, tier, max_depth) for tier in ("1", "2", "auto")]
    assert seen[0][:2] == seen[1][:2] == seen[2][:2]
    if max_depth > deep + 4:
        assert seen[0][1] is None
    assert _sites(seen[1][2], "down") >= 1


FRAMED_DEPTH = """\
def leaf(x):
    return x + 1
def pair(x):
    return leaf(leaf(x))
def deep(n):
    def unused():
        return 0
    if n > 0:
        return deep(n - 1)
    total = 0
    i = 0
    while i < 40:
        total = total + CALLED
        i = i + 1
    return total
print(deep(DEEP))
"""


@pytest.mark.parametrize("called", ["pair(i)", "leaf(i)"])
@pytest.mark.parametrize("max_depth", [8, 9, 10, 11, 12, 13])
def test_the_depth_limit_is_met_at_the_same_call_in_a_generator(tmp_path, called, max_depth):
    """deep declares a function, so it runs as frames (its generator), and at the bottom of
    its recursion its loop calls pair, inlined with the leaf calls pair makes (or leaf
    alone): refused, and made as calls, exactly where the depth limit refuses them."""
    from test_direct_forms import _run_with_depth
    source = FRAMED_DEPTH.replace("DEEP", "7").replace("CALLED", called)
    seen = [_run_with_depth(tmp_path, source, tier, max_depth) for tier in ("1", "2")]
    assert seen[0][:2] == seen[1][:2]
    assert _sites(seen[1][2], "deep") >= 1


def test_running_out_of_memory_in_an_inlined_body_is_the_callees_error(tmp_path):
    """An inlined operation that runs out of memory raises what the direct forms would have:
    tier 1's "out of memory" at the operation's line in the innermost callee, with each
    callee's frame on the error's call stack, innermost first (tier2.inline_error, given the
    levels the plan recorded for that line)."""
    from sensevm.runtime.tier2 import inline_error
    one, vms = _all_tiers(tmp_path, CLOSURES)
    vm = vms["auto"]
    run = next(c for c in vm.prepared if c.code.name == "run")
    names = re.findall(r"raise inline_error\(exc, (_k\d+)\)", run.t2.source)
    levels = [run.t2.fn.__globals__[name] for name in names]
    nested = [lv for lv in levels if len(lv) == 2]
    assert nested, "shifted(i): add inlined inside both"
    err = inline_error(MemoryError(), nested[0])
    assert err.message == "out of memory" and err.pos.line == 15     # add's `x + k`
    assert [frame[2] for frame in err.frames] == ["add()", "both()"]
    assert [frame[1] for frame in err.frames] == [15, 9]


MANY = """\
def first(a, b, c, d, e, f, g, h):
    return a
def second(a, b, c, d, e, f, g):
    return b
def run():
    return first(1, 2, 3, 4, 5, 6, 7, 8)
def both():
    return first(1, 2, 3, 4, 5, 6, 7, 8) + second(1, 2, 3, 4, 5, 6, 7)
print(run(), both())
"""


def test_a_call_of_eight_arguments_is_made_as_a_call(tmp_path):
    """(Found by review.) A generator knows its calls' depth and bound only where it can call
    a direct form (fewer than DIRECT_ARITIES arguments): a call of eight is not inlined, and
    run, whose only call it is, runs (it raised NameError on _dd); seven are inlined."""
    one, vms = _all_tiers(tmp_path, MANY)
    assert one[1] is None and one[0] == "1 3\n"
    assert _sites(vms["2"], "run") == 0 and _sites(vms["2"], "both") == 1


# -- random bodies against tier 1

_LEAVES = ["x", "k", "m", "1", "-2", "0"]
_OPS = ["+", "-", "*", "<", "=="]


@st.composite
def _expression(draw, depth=2):
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from(_LEAVES))
    left = draw(_expression(depth - 1))
    right = draw(_expression(depth - 1))
    return f"({left} {draw(st.sampled_from(_OPS))} {right})"


class _Degree:
    """An expression's degree in the captured m, found by evaluating it over these."""

    def __init__(self, d):
        self.d = d

    def __add__(self, other):
        return _Degree(max(self.d, getattr(other, "d", 0)))

    __radd__ = __sub__ = __rsub__ = __add__

    def __mul__(self, other):
        return _Degree(self.d + getattr(other, "d", 0))

    __rmul__ = __mul__

    def __lt__(self, other):
        return _Degree(0)

    __gt__ = __eq__ = __lt__
    __hash__ = None


def _degree(expr: str, nested: bool) -> int:
    """How the stored m grows with each call: m (and x, which in f(f(x)) is the m the inner
    call stored) of degree 1, the rest 0. A degree past 1 squares m at every call, and 90
    calls of ``m = (m * m)`` make an Int no machine can hold: the run would never end."""
    value = eval(expr, {}, {"m": _Degree(1), "x": _Degree(1 if nested else 0), "k": _Degree(0)})
    return getattr(value, "d", 0)


@settings(max_examples=60, deadline=None)
@given(expr=_expression(), store=st.booleans(), nested=st.booleans(),
       k=st.sampled_from(["3", "-1", "2.5", "true", '"s"']),
       later=st.sampled_from(["3", "0.5", "false", "nil"]),
       arg=st.sampled_from(["i", "i - 40", "true", "1.5"]))
def test_random_bodies_match_tier_one(tmp_path_factory, expr, store, nested, k, later, arg):
    """Random bodies of parameters, captured variables and constants under + - * < ==, that
    may store to a captured variable and may be called through another inlined closure; the
    captured values and the argument of every type; the capture changed part-way: every tier
    prints the same, or fails alike at the same place."""
    assume(not store or _degree(expr, nested) <= 1)
    tmp_path = tmp_path_factory.mktemp("inline")
    body = f"        m = {expr}\n        return m" if store else f"        return {expr}"
    outer = ("    def g(x):\n        return f(f(x))\n    return g\n" if nested
             else "    return f\n")
    source = (f"def make(k, m):\n    def f(x):\n{body}\n{outer}"
              f"def run(n):\n    h = make({k}, 2)\n    out = []\n    i = 0\n"
              f"    while i < n:\n        if i == 70:\n            h = make({later}, 1)\n"
              f"        push(out, h({arg}))\n        i = i + 1\n    return out\n"
              f"print(run(90))\n")
    _all_tiers(tmp_path, source)


@pytest.mark.parametrize("max_steps", [3_000, 4_321, 6_000])
def test_a_step_budget_counts_every_call_as_tier_one_does(tmp_path, max_steps):
    """Under a step budget every call is a step, so no call is inlined: the budget runs out
    at the same instruction on both tiers (and the program that fits prints the same)."""
    from test_limits import run_vm
    source = CLOSURES.replace("run(300)", "run(120)")
    seen = [run_vm(source, tmp_path, tier, max_steps=max_steps) for tier in ("1", "2")]
    assert seen[0][:2] == seen[1][:2]
    assert _sites(seen[1][2]) == 0


# -- an inlined call's result taken to be an Int

UNTYPED = """\
def make(k):
    def add(x):
        return x + k
    return add
def halve(x):
    return x / 2
def run(n, late):
    f = make(1)
    total = 0
    i = 0
    while i < n:
        if i == late:
            f = halve
        total = total + f(i)
        i = i + 1
    return total
print(run(200, 100))
print(run(200, -1))
print(run(200, 150))
"""


def _compiles(monkeypatch) -> list:
    """The names of the code objects tier 2 compiles from now on, in order."""
    from sensevm.runtime import tier2
    made = []
    real = tier2.compile_code

    def counted(prepared, *args, **kw):
        made.append(prepared.code.name)
        return real(prepared, *args, **kw)
    monkeypatch.setattr(tier2, "compile_code", counted)
    return made


def test_a_call_that_returns_no_int_where_one_was_taken_hands_the_frame_on(tmp_path,
                                                                            monkeypatch):
    """run's loop takes f(i), inlined, to return an Int (so total + f(i) and the store need no
    test); at i == 100 f is halve, whose call returns a Float: the frame goes on in tier 1 just
    after the call, and run's code is made again once, taking nothing so (every later Float
    would hand the frame on again otherwise): tier 1's output, and the last code has no such
    hand-over."""
    made = _compiles(monkeypatch)
    one, vms = _all_tiers(tmp_path, UNTYPED)
    first = sum(i + 1 for i in range(100)) + sum(i / 2 for i in range(100, 200))
    assert one[1] is None and one[0].splitlines()[0] == str(first)
    # (auto: run is compiled at its loop's header, where f's closure is there to guess from;
    # forced tier 2 compiles it at its first call, guessing from the globals only)
    run = next(c for c in vms["auto"].prepared if c.code.name == "run")
    assert run.typed is False and "untyped(PREP)" not in run.t2.source
    assert made.count("run") == 1 + 2        # tier 2: made once; auto: made, then once again


@pytest.mark.parametrize("other", ["x > 3", "str(x)", "[x]"])
def test_a_result_python_would_add_but_sense_would_not_fails_as_tier_one_does(tmp_path, other):
    """The call's result, taken to be an Int, is a Bool (which Python would add to an Int), a
    String or an Array: tier 1's error at the addition, on every tier."""
    one, vms = _all_tiers(tmp_path, UNTYPED.replace("x / 2", other))
    assert one[0] == "" and one[1] is not None and one[1][2].line == 14


def test_an_int_result_taken_in_an_int_version_spares_the_tests_after_it(tmp_path):
    """While f(i) returns Ints, total + f(i) is one Python addition: the Int version knows
    total (a local, guarded) and the call's result, and keeps what it knows of the slots
    below the call across it."""
    source = UNTYPED.replace("print(run(200, 100))\n", "").replace("print(run(200, 150))\n", "")
    one, vms = _all_tiers(tmp_path, source)
    text = next(c for c in vms["auto"].prepared if c.code.name == "run").t2.source
    assert "untyped(PREP)" in text and re.search(r"\n +s0 = s0 \+ s1\n", text)


DIRECT_UNTYPED = """\
def step(x):
    return x * 3
def other(x):
    return x / 2
def acc(n):
    total = 0
    i = 0
    while i < n:
        total = total + step(i)
        i = i + 1
    return total
def main():
    t = 0
    j = 0
    while j < 40:
        other(j)
        j = j + 1
    j = 0
    while j < 60:
        if j == 40:
            step = other
        t = t + acc(10)
        j = j + 1
    return t
print(main())
"""


@pytest.mark.parametrize("other", ["x > 3", "true"])
def test_a_direct_forms_call_that_returns_a_bool_fails_as_tier_one_does(tmp_path, other):
    one, vms = _all_tiers(tmp_path, DIRECT_UNTYPED.replace("x / 2", other))
    assert one[0] == "" and one[1] is not None and one[1][2].line == 9


def test_a_direct_form_whose_int_result_was_not_becomes_a_frame_after_the_call(tmp_path):
    """acc's direct form inlines step(i) and takes it to return an Int; rebound to other, the
    call returns a Float: the activation becomes a frame stopped just after the call, tier 1
    goes on with the Float, and acc's direct form is made again without taking it. (main
    calls other first, so that it has a direct form when acc first calls it: a callee with
    none would make acc's activation a frame before the call, not after it.)"""
    one, vms = _all_tiers(tmp_path, DIRECT_UNTYPED)
    expected = 40 * sum(i * 3 for i in range(10)) + 20 * sum(i / 2 for i in range(10))
    assert one[1] is None and one[0] == f"{expected}\n"
    vm = vms["2"]
    acc = next(c for c in vm.prepared if c.code.name == "acc")
    assert acc.typed is False and vm.deopts >= 1
    assert acc.t2.direct_source is not None and "untyped(PREP)" not in acc.t2.direct_source


# -- a recursion's leading return (inlining.leading_return)

FIB = """\
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)
print(fib(N))
"""


def _calls(n: int) -> tuple:
    """fib(n)'s calls: all of them, and those past its base case (n >= 2)."""
    if n < 2:
        return 1, 0
    a, b = _calls(n - 1), _calls(n - 2)
    return 1 + a[0] + b[0], 1 + a[1] + b[1]


def _direct_source(vm, name) -> str:
    return "".join(code.t2.direct_source or "" for code in vm.prepared
                   if code.t2 and code.code.name == name)


def test_a_recursions_calls_at_its_base_case_are_no_python_call(tmp_path):
    """fib's Int direct form tests its leading ``if n < 2: return n`` at each call of itself
    and takes n there: only the calls that go on past it are made, so fib(16) makes 1,595
    Python calls of its direct forms, not 3,192, and prints what tier 1 prints."""
    import sys
    source = FIB.replace("N", "16")
    one = _run_source(tmp_path, source, "1")
    made = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_name in ("direct", "direct_i"):
            made.append(frame.f_code.co_name)
    sys.setprofile(profile)
    try:
        two = _run_source(tmp_path, source, "2")
    finally:
        sys.setprofile(None)
    assert two[:5] == one[:5] and one[0] == "987\n"
    total, past = _calls(16)
    assert (total, past) == (3193, 1596)
    # (fib(16) itself, called from the module, runs as a frame: its two calls enter by
    # ``direct``, every call after them by ``direct_i``)
    assert made.count("direct") == 2 and len(made) == past - 1


LEADING = """\
def down(n):
    if n < 1:
        return n
    return down(n - 1) + 1
print(down(DEEP))
"""


@pytest.mark.parametrize("max_depth", [3, 4, 5, 6, 7, 30, 31, 32, 33, 48, 49, 50, 51, 52])
def test_a_leading_return_is_taken_in_place_only_within_the_depth_limit(tmp_path, max_depth):
    """The call at the bottom of the recursion is taken in place only where the call itself
    would have been made directly: at the depth limit it is made, and fails (or is made with
    a frame) exactly as on tier 1."""
    from test_direct_forms import _run_with_depth
    for deep in (2, 30, 47):
        source = LEADING.replace("DEEP", str(deep))
        seen = [_run_with_depth(tmp_path, source, tier, max_depth) for tier in ("1", "2", "auto")]
        assert seen[0][:2] == seen[1][:2] == seen[2][:2], deep
        assert (seen[0][1] is None) == (deep + 2 <= max_depth), deep
        assert " and D < M:" in _direct_source(seen[1][2], "down")


_SIDES = ["a", "b", "0", "2", "-3"]


@settings(max_examples=60, deadline=None)
@given(left=st.sampled_from(_SIDES), right=st.sampled_from(_SIDES),
       compare=st.sampled_from(["<", "<=", ">", ">=", "==", "!="]),
       result=st.sampled_from(_SIDES + ["7", "-1"]), block=st.booleans(),
       args=st.sampled_from(["9, 2", "6, -4", "0, 0", "-2, 5", "5, 2.5", "2.5, 1", "7, true"]))
def test_random_leading_returns_match_tier_one(tmp_path_factory, left, right, compare, result,
                                               block, args):
    """A function of two parameters that starts ``if A <cmp> B: return R`` (a block-local
    binding in the if's block, or none), called with Ints and with other values: every tier
    prints the same, or fails alike at the same place."""
    tmp_path = tmp_path_factory.mktemp("leading")
    inside = "        local t = 1\n" if block else ""
    source = (f"def f(a, b):\n    if {left} {compare} {right}:\n{inside}        return {result}\n"
              f"    if a <= 0:\n        return b\n"
              f"    return f(a - 1, b + 0) + f(a - 2, b + 1)\n"
              f"print(f({args}))\n")
    _all_tiers(tmp_path, source)


ORDERED = """\
def f(a, b):
    if b > a:
        return a
    return f(a - 1, b * 2) + 1
print(f(9, 1))
"""


def test_a_leading_returns_arguments_are_computed_in_order_before_its_test(tmp_path):
    """The call's arguments are computed as the call would compute them, every one and in
    order, each on a line of its own (its operation's position, should it run out of
    memory), before the test reads any: b * 2 is computed even where only a's test decides,
    and a - 1 before it though the test reads b first (found by review)."""
    one, vms = _all_tiers(tmp_path, ORDERED)
    assert one[0] == "9\n"
    source = _direct_source(vms["2"], "f")
    site = re.search(r"\n( +)(_c\d+) = \(\n +l\d - 1\)\n\1(_c\d+) = \(\n +l\d \* 2\)\n"
                     r"\1if \3 > \2 and D < M:\n +s0 = \2\n", source)
    assert site, source
