"""Tier 2's Int versions of blocks (tier2._Gen.region): a block entered from the dispatch loop
may run in a version that assumes the locals it reads hold Ints, tested once on entry
(``type(x) is int``); any other value (a Float, a Bool, a labelled Int from a tool, a String,
an unbound name found further out) runs the general version, so everything observable is
tier 1's: output, errors and their positions, labels reaching an action's second look."""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from test_tiers import _run_source

HEADER = """\
tool lab(k: Int) returns Int requires calc:
    return k
irreversible action send(to: String) requires mail.send:
    print("sent", to)
policy:
    allow calc
    allow mail.send
"""

TAIL = """\
def show(v):
    s = send(str(v))
    s.verify()
    print(v, s.second_look)
"""


# A loop's guard may begin with a quiet version's test (tier2.QUIET_TEST): whether it does is
# whether this process had made a labelled value when the code was made.
QUIETLY = r"(?:not LT and \(vm\.workers is None or not vm\.workers\.live\) and )?"


def both(tmp_path, source):
    one = _run_source(tmp_path, source, "1")
    two = _run_source(tmp_path, source, "2")
    assert one[:5] == two[:5]
    return one, two[5]


def source_of(vm, name):
    from sensevm.runtime.tier2 import _Gen
    prepared = next(p for p in vm.prepared if p.code.name == name)
    gen = _Gen(prepared)
    gen.analyse()
    return gen.generate()


LOOP = HEADER + TAIL + """\
def f(a, b):
    x = a
    y = b
    i = 0
    while i < 8:
        x = x + y * 2 - i
        if x % 3 == 1:
            y = y - 1
        else if x > 40:
            x = x % 17
        i = i + 1
    return x + y
show(f(A, B))
"""


@pytest.mark.parametrize("a, b", [
    ("3", "4"), ("lab(3)", "4"), ("3", "lab(4)"), ("3.5", "4"), ("3", "true"),
    ("10000000000000000000000000", "-4"), ('"s"', "4"), ("3", "0.25"),
])
def test_a_loop_of_int_arithmetic_has_one_guard_and_falls_back_alike(tmp_path, a, b):
    """The loop body's arithmetic on x, y and i is done without a type test of its own once
    the block's guard passed; a labelled, Float, Bool, huge or String operand gives tier 1's
    output, labels and error."""
    (out, error, *_), vm = both(tmp_path, LOOP.replace("A, B", f"{a}, {b}"))
    if a == "3" and b == "4":
        assert error is None and out.startswith("43 nil")
    if "lab" in a or "lab" in b:
        assert "came from the tool lab" in out
    source = source_of(vm, "f")
    assert re.search(r"if " + QUIETLY + r"l\d+\.__class__ is int and l\d+\.__class__ is int",
                     source)                                                    # a guard ...
    assert "s0 = s0 % 3\n" in source                         # ... and what it spares
    assert "if s0.__class__ is int: s0 = s0 % 3" in source       # the general version is kept


def test_a_loops_joins_are_part_of_its_turn(tmp_path):
    """The blocks an ``if`` in the loop's body joins again (``i = i + 1``) are emitted on each
    path into them (tier2._Gen.copied_joins): the dispatch loop finds only the entry and the
    loop's header, and a turn is guarded once, at its start."""
    _, vm = both(tmp_path, LOOP.replace("A, B", "3, 4"))
    from sensevm.runtime.tier2 import _Gen
    gen = _Gen(next(p for p in vm.prepared if p.code.name == "f"))
    gen.analyse()
    source = gen.generate()
    assert {int(j) for j in re.findall(r"\bL = (\d+)", source)} <= gen.entries
    assert len(re.findall(r"if " + QUIETLY + r"l\d+\.__class__ is int and", source)) == 1


HANDED_OVER = HEADER + TAIL + """\
def f(a):
    k = lab(a)
    x = 0
    i = 0
    while i < 50:
        x = x + i
        i = i + 1
    if k > 1:
        x = x + i * 1000
    return x
show(f(2))
show(f(0))
"""


def test_stores_wait_for_the_scope_to_be_seen(tmp_path):
    """A function's generator keeps its loop's stores in Python locals (no scope write per
    store) and writes them to the scope where it is handed out: here the branch on the
    tool's labelled ``k`` gives the frame to tier 1, which goes on from the scope and must
    find x and i as the loop left them."""
    (out, error, *_), vm = both(tmp_path, HANDED_OVER)
    assert error is None
    assert out.splitlines()[0].startswith("51225 ") and "came from the tool lab" in out
    assert out.splitlines()[1].startswith("1225 ")
    from sensevm.runtime.tier2 import _Gen
    gen = _Gen(next(p for p in vm.prepared if p.code.name == "f"))
    gen.analyse()
    lines = gen.generate().splitlines()
    # Every write of a local's value to the scope is inside a hand-out's ``if dw:``.
    writes = [n for n, line in enumerate(lines) if re.search(r"v0\['[xi]'\] = l\d+$", line)]
    assert writes
    for n in writes:
        above = next(line for line in reversed(lines[:n]) if "v0[" not in line)
        assert above.strip() == "if dw:"
    assert not any(re.search(r"= v0\['[xi]'\] =", line) for line in lines)


HANDED_OVER_MANY = HEADER + TAIL + """\
def f(a, n):
    k = lab(a)
    x = 0
    y = 1
    z = 2
    i = 0
    while i < n:
        x = x + i
        y = y * 2 % 1000
        z = z + x % 7
        if i == 10:
            if k > 1:
                z = z + 100
        i = i + 1
    w = i * 3
    if k > 1:
        x = x + w * 1000 + y + z
    return [x, y, z, w]
show(f(2, 50))
show(f(0, 5))
"""


def test_many_deferred_stores_are_written_back_by_one_call(tmp_path):
    """With more cached names than INLINE_PUBLISH, each hand-out writes them back by one call
    (PUBLISH, defined after t2) in one line, not a line per name: tier 1 then finds them as
    the loop left them (the scope's w is not written while w is unbound)."""
    from sensevm.runtime.tier2 import INLINE_PUBLISH
    (out, error, *_), vm = both(tmp_path, HANDED_OVER_MANY)
    assert error is None
    lines = out.splitlines()
    assert lines[0].startswith("[152049, 624, 200, 150] ") and "came from the tool lab" in out
    assert lines[1].startswith("[10, 32, 15, 15] ")
    source = source_of(vm, "f")
    t2, _, publisher = source.partition("\ndef PUBLISH(v0, ")
    assert publisher, "f's generator should define PUBLISH"
    params = publisher.split(")", 1)[0].split(", ")
    assert len(params) == 6 > INLINE_PUBLISH            # k, x, y, z, w, i
    handouts = [line.strip() for line in t2.splitlines() if "dw:" in line]
    assert handouts and set(handouts) == {f"if dw: dw = PUBLISH(v0, {', '.join(params)})"}
    assert not re.search(r"v0\['[kxyzwi]'\] = l\d+", t2)
    # Each name once; a name that may be unbound there (w, any of them in a frame entered
    # at the loop's header) only when its local is not UNSET.
    for name in "kxyzwi":
        assert len(re.findall(rf"(?:if l\d+ is not UNSET: )?v0\['{name}'\] = l\d+\n",
                              publisher)) == 1
    assert re.search(r"if l\d+ is not UNSET: v0\['w'\] = l\d+\n", publisher)


LOOP_VARIABLES = """\
tool mark() returns String requires calc:
    return "x"
policy:
    allow calc
def walk(words, m):
    out = []
    for w in words:
        local n = len(w)
        for c in w:
            if c == m:
                push(out, w + str(n) + c)
        push(out, n)
    for k in range(3):
        push(out, k)
    return out
words = []
i = 0
while i < 40:
    push(words, ["ax", "bb", "xcx"][i % 3])
    i = i + 1
print(walk(words, "x").slice(0, 8), len(walk(words, "x")))
print(walk(words, mark()).slice(0, 8), len(walk(words, mark())))
"""


def test_a_loop_variable_is_bound_without_first_being_unbound(tmp_path):
    """A for loop's block binds its variable first thing: tier 2 neither marks it unbound
    before binding it nor empties the block's cached scope when it is the block's only name
    (w's block, which also declares n, still resets n). A branch on the tool's labelled mark
    hands the frame to tier 1 inside both loops, which finds w, n and c bound."""
    (out, error, *_), vm = both(tmp_path, LOOP_VARIABLES)
    assert error is None
    assert out.splitlines() == ["[ax2x, 2, 2, xcx3x, xcx3x, 3, ax2x, 2] 83"] * 2
    lines = source_of(vm, "walk").splitlines()
    body = lines[lines.index("    try:"):]
    resets = [line.strip() for line in body if re.fullmatch(r" *b\d+_\d+ = U", line)]
    clears = [line for line in body if line.endswith(": bsc.vars.clear()")]
    # n's only (in each version of w's loop made: an item loop's and the general one): w, c
    # and k are bound where their blocks begin
    assert len(set(resets)) == 1 and len(resets) <= 2
    # w's block (it binds n too; again, once in each version); c's and k's bind one name
    assert len({line.strip() for line in clears}) == 1 and len(clears) <= 2


def diamonds(k):
    """A loop whose body is ``k`` ifs one after another: 2**k paths through one turn."""
    body = "".join(f"        if i % {j + 2} == 0:\n            x = x + {j}\n"
                   f"        else:\n            x = x - 1\n" for j in range(k))
    return HEADER + TAIL + (f"def f(n):\n    x = 0\n    i = 0\n    while i < n:\n{body}"
                            f"        i = i + 1\n    return x\nshow(f(40))\n")


def test_copied_joins_stay_linear_in_the_code(tmp_path):
    """However many paths run through a turn, no instruction is emitted more than MAX_COPIES
    times in a version: a join past that is a dispatch target again, so the generated code
    grows with the source, not with the paths (2**16 here), and still agrees with tier 1."""
    from sensevm.runtime.tier2 import _Gen
    sizes = {}
    for k in (8, 16):
        (out, error, *_), vm = both(tmp_path, diamonds(k))
        assert error is None
        gen = _Gen(next(p for p in vm.prepared if p.code.name == "f"))
        gen.analyse()
        sizes[k] = len(gen.generate().splitlines())
        assert len(gen.dispatch) > 2           # some joins went back to the dispatch loop
    assert sizes[16] < 2.5 * sizes[8]


UNBOUND = HEADER + TAIL + """\
x = 5
def g(n):
    i = 0
    while i < n:
        x = x + i
        i = i + 1
    return x
show(g(6))
show(x)
"""


TURNS = HEADER + TAIL + """\
def f(n):
    x = 0
    i = 0
    while i < n:
        if i == 3:
            x = CHANGE
        x = x + 1
        i = i + 1
    return x
show(f(6))
"""


@pytest.mark.parametrize("change", ["x > 1", "x - 1", "x / 2", '"s"', "nil", "lab(x)"])
def test_a_loops_int_version_tests_again_after_a_turn_that_may_have_changed_a_local(
        tmp_path, change):
    """The loop's Int version is a loop of its own, whose turns skip the guard while `x` and
    `i` stay Ints; the turn that stores anything else in `x` (a Bool, which Python would add
    to an Int, a Float, a String, nil, a labelled Int) goes back to the guard, whose failure
    runs the general version: tier 1's result, or its error at its position."""
    (out, error, *_), vm = both(tmp_path, TURNS.replace("CHANGE", change))
    f = source_of(vm, "f")
    assert re.search(r"if " + QUIETLY + r"l\d\.__class__ is int and l\d\.__class__ is int.*:\n"
                     r" +while True:", f)
    assert re.search(r"\n( +)if L != \d+: break\n", f)
    nexts = re.findall(r"\n +(continue|break)\n", f[f.index("while True:\n", f.index("is int")):])
    # the path through `x = CHANGE` tests again, unless the value is an Int (x - 1)
    assert ("break" in nexts) == (change != "x - 1") and "continue" in nexts


def test_a_name_found_further_out_is_no_local_int(tmp_path):
    """`x` is the module's: the function's local for it stays unbound, its guard fails, and
    the general version updates the module's binding, as tier 1 does."""
    (out, error, *_), _ = both(tmp_path, UNBOUND)
    assert error is None and out.splitlines()[0].startswith("20 ")
    assert out.splitlines()[-1].startswith("20 ")


MODULO = HEADER + """\
def h(n, k):
    t = 0
    i = 0
    while i < n:
        t = t + i % k
        i = i + 1
    return t
print(h(5, 2))
print(h(5, 0))
"""


def test_an_error_in_an_int_version_is_placed_as_tier_one_places_it(tmp_path):
    (out, error, *_), _ = both(tmp_path, MODULO)
    assert out == "2\n"
    assert error[0] == "SenseRuntimeError" and error[1].endswith("modulo by zero")
    assert (error[2].line, error[2].col) == (12, 19)


# ----------------------------------------------------------------------------- properties

VALUES = st.sampled_from(["0", "1", "2", "-3", "7", "lab(2)", "lab(0)", "1.5", "-0.5", "true",
                          "false", '"a"', "99999999999999999999", "nil"])
OPS = st.sampled_from(["+", "-", "*", "%", "/"])
CMPS = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
NAMES = st.sampled_from(["x", "y", "z"])


@st.composite
def statements(draw):
    kind = draw(st.integers(0, 5))
    t, u, w = draw(NAMES), draw(NAMES), draw(NAMES)
    if kind == 0:
        return [f"{t} = {u} {draw(OPS)} {w}"]
    if kind == 1:
        return [f"{t} = {u} {draw(OPS)} {draw(st.integers(-3, 9))}"]
    if kind == 2:
        return [f"if {u} {draw(CMPS)} {w}:", f"    {t} = {t} + 1", "else:", f"    {t} = -{t}"]
    if kind == 3:
        return [f"if not ({u} {draw(CMPS)} {draw(st.integers(-2, 5))}):", f"    {t} = {u} % 5"]
    # a local that stops being an Int on some turn: a Bool (which Python would add), a String
    value = draw(st.sampled_from([f"{u} {draw(CMPS)} {w}", '"s"', "0.5", "nil"]))
    if kind == 4:
        return [f"{t} = {value}"]
    return [f"if i == {draw(st.integers(0, 4))}:", f"    {t} = {value}"]


@st.composite
def programs(draw):
    body = [line for _ in range(draw(st.integers(1, 5))) for line in draw(statements())]
    loop = "\n".join("        " + line for line in body)
    args = ", ".join(draw(VALUES) for _ in range(3))
    return HEADER + TAIL + f"""\
def f(x, y, z):
    i = 0
    while i < {draw(st.integers(0, 6))}:
{loop}
        i = i + 1
    return [x, y, z]
r = f({args})
print(r)
show(r[0])
"""


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(programs())
def test_int_versions_agree_with_tier_one(tmp_path, source):
    """Loops of arithmetic and branches on Ints, Floats, Bools, labelled Ints, huge Ints, Strings
    and nil: tier 2 (Int versions and all) prints, labels and fails exactly as tier 1."""
    both(tmp_path, source)


FUSED = HEADER + TAIL + """\
def p(a, b, n):
    t = 0
    i = 0
    while i < n:
        i = i + 1
        if i - b < a:
            t = t + 1
        if a * 3 == i:
            t = t - a
    return t + n / Z
show(p(A, B, 9))
"""


@pytest.mark.parametrize("a, b", [("2", "1"), ("-4", "11"), ("lab(2)", "1"), ("2", "1.5"),
                                  ("100000000000000000000", "3")])
@pytest.mark.parametrize("z", ["2", "0"])
def test_int_operations_on_locals_are_one_line_and_keep_their_meaning(tmp_path, a, b, z):
    """In an Int version, an operation on Int locals and constants is one line with the loads
    of its operands and with the branch or the store that takes its result (no moves through
    stack slots); the results, the labels and the error after them (a division by zero) are
    tier 1's."""
    source = FUSED.replace("A, B", f"{a}, {b}").replace("Z", z)
    (out, error, *_), vm = both(tmp_path, source)
    assert (error is None) == (z != "0")
    if a == "2" and b == "1" and z == "2":
        assert out.startswith("4.5 nil")
    generated = source_of(vm, "p")
    assert re.search(r"if not \(l\d < l\d\):\n", generated)
    assert re.search(r"if not \(\(l\d - l\d\) < l\d\):\n", generated)
    assert re.search(r"if not \(\(l\d \* 3\) == l\d\):\n", generated)
    assert re.search(r"(l\d) = \1 \+ 1(; dw = 1)?\n", generated)     # (none: quiet)


INDEXED = """\
def walk(xs, far):
    total = 0
    i = 0
    while i < 60:
        k = i % 7 - 3
        total = total + xs[k]
        xs[-k - 1] = xs[k] + 1
        if i == 50:
            total = total + xs[far]
        i = i + 1
    return total
print(walk([1, 2, 3, 4, 5, 6, 7], FAR))
print(walk([1, 2, 3], 0))
"""


@pytest.mark.parametrize("far", ["0", "-7", "6", "7", "-8", "true", "2.0", '"a"'])
def test_array_indexing_out_of_bounds_is_tier_ones_error(tmp_path, far):
    """An Array read or written at an Int index is Python's own indexing; an index out of
    bounds (past either end, here on the second call) or of another type raises tier 1's
    error at tier 1's position."""
    (out, error, *_), vm = both(tmp_path, INDEXED.replace("FAR", far))
    assert error is not None
    source = source_of(vm, "walk")
    assert re.search(r"try: (s\d) = \1\[s\d\]\n", source)
    assert re.search(r"try: s\d\[s\d\] = s\d\n", source)


# ----------------------------------------------------------------------------- Int entries

FIB_DEF = """\
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)
"""

FIB = HEADER + TAIL + FIB_DEF + """\
show(fib(15))
show(fib(lab(9)))
show(fib(7.0))
"""


def test_a_recursive_function_calls_its_int_entry_and_adds_what_it_returns_as_ints(tmp_path):
    """fib's calls of itself pass Ints from its Int version: they go to ``direct_i``, which
    returns only Ints, so the sum of two is one Python addition there; a labelled Int and a
    Float still take ``direct``'s general version (and keep their labels)."""
    (out, error, *_), vm = both(tmp_path, FIB)
    assert error is None
    assert [line.split()[0] for line in out.splitlines()] == ["610", "34", "13.0"]
    fib = next(c for c in vm.prepared if c.code.name == "fib").t2
    entry, general = fib.direct_source.split("\ndef direct(")
    assert entry.startswith("def direct_i(") and "l0.__class__" not in entry
    assert re.search(r"\n +return (s\d) \+ s\d\n", entry)
    # (n - 1 is computed once, on a line of its own (the subtraction's position), before the
    # test of fib's leading return, which reads it as the call does: inlining.leading_return)
    bound = re.search(r"(_c\d+) = \(\n +l0 - 1\)\n +if \1 < 2 and D < M:\n +s0 = \1\n", general)
    assert bound and f"direct_i(vm, s0, pv, D + 1, M, {bound.group(1)})" in general
    assert "l0.__class__ is int" in general
    # what another callee gives is tested at the two calls of the Int versions only: the
    # general version takes nothing to be an Int
    assert entry.count("is not int:") == 2 == general.count("is not int:")


DOWN = """\
def down(n):
    if n == 0:
        return [1][5]
    return down(
        n - 1) + 1
print(down(2))
"""


def test_an_argument_computed_in_the_call_keeps_both_positions(tmp_path):
    """A direct form reads an argument made of Int locals and constants in the call itself
    (no slot stored and read again), on a line of its own: an error from the callee is placed
    at the call, as tier 1 places it (here the call starts a line before its argument), and
    the argument's subtraction keeps its own position."""
    from sensevm.bytecode.opcodes import Op
    (out, error, *_), vm = both(tmp_path, DOWN)
    assert out == "" and error[0] == "SenseRuntimeError" and error[2].line == 3
    # every caller of the failing call is placed at line 4, where the call starts
    assert [line for (_, line, _) in error[5]].count(4) == 2
    down = next(c for c in vm.prepared if c.code.name == "down")
    source = down.t2.direct_source
    assert re.search(r"direct_i\(vm, s0, pv, D \+ 1, M,\n +l0 - 1\)", source)
    linemap = down.direct.__globals__["LINEMAP"]
    lines = source.splitlines()
    ops = {down.instrs[linemap[k + 1] - 1][0] for k, line in enumerate(lines)
           if re.fullmatch(r" +l0 - 1\)", line)}
    calls = {down.instrs[linemap[k + 1] - 1][0] for k, line in enumerate(lines)
             if re.search(r"= direct_i\(vm, s0, pv, D \+ 1, M,$", line)}
    assert ops == {Op.SUB} and calls == {Op.CALL}


REBOUND = HEADER + TAIL + FIB_DEF + """\
show(fib(12))
real = fib
def fib(n):
    return WRAPPED
show(real(12))
"""


@pytest.mark.parametrize("wrapped", ["real(n) * 1.5", 'str(real(n))', "real(n) + 1",
                                     "real(n) > 2", "nil", "[real(n)]", "real(n) / 0",
                                     "lab(real(n))"])
def test_a_call_taken_to_give_an_int_that_gives_something_else_goes_on_in_tier_one(
        tmp_path, wrapped):
    """`fib` rebound to a wrapper: the original's calls of `fib` call the wrapper, whose result
    (a Float, a String, an Int, a Bool, nil, an Array, an error, a labelled Int from a tool)
    is checked before it is taken to be an Int; anything else carries on in tier 1, exactly
    as tier 1 would (Python's + would add Bools and concatenate Arrays)."""
    (out, error, *_), vm = both(tmp_path, REBOUND.replace("WRAPPED", wrapped))
    assert out.splitlines()[0].startswith("144 ")


MIXED = HEADER + TAIL + """\
def g(n):
    if n < 0:
        return NEGATIVE
    if n < 2:
        return n
    return g(n - 1) + g(n - 3)
show(g(12))
"""


@pytest.mark.parametrize("negative", ["0", "-n", "0.5", '"neg"', "nil", "true"])
def test_an_int_entry_that_may_return_other_values_is_not_taken_to_return_ints(
        tmp_path, negative):
    """g can return what its negative case returns: its Int entry is still used for the calls
    with Int arguments, but unless that is an Int what they give is tested as in the general
    version (a Float flows on, a String, nil or a Bool fails where tier 1 fails)."""
    (out, error, *_), vm = both(tmp_path, MIXED.replace("NEGATIVE", negative))
    g = next(c for c in vm.prepared if c.code.name == "g").t2
    entry = g.direct_source.split("\ndef direct(")[0]
    assert entry.startswith("def direct_i(")
    typed = negative in ("0", "-n")       # an Int, and an Int operation on one
    assert ("s0.__class__ is int is s1.__class__" not in entry) == typed


@st.composite
def recursions(draw):
    base = draw(VALUES)
    d1, d2 = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    k_next = draw(st.sampled_from(["k", "k + 1", "k * 2", "k - n", "k % 3", "lab(k)"]))
    combine = draw(OPS)
    other = draw(st.sampled_from(["", "", 'r = 0\n', "def r(n, k):\n    return n * 1.5\n",
                                  "def r(n, k):\n    return k\n",
                                  "def r(n, k):\n    return n > k\n",
                                  "def r(n, k):\n    return [n]\n"]))
    return HEADER + TAIL + f"""\
def r(n, k):
    if n <= {draw(st.integers(-1, 2))}:
        return {base}
    if n == {draw(st.integers(0, 9))}:
        return k
    return r(n - {d1}, {k_next}) {combine} r(n - {d2}, k)
first = r
print(r({draw(st.integers(0, 9))}, {draw(VALUES)}))
{other}print(first({draw(st.integers(0, 9))}, {draw(st.integers(-3, 3))}))
"""


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(recursions())
def test_int_entries_agree_with_tier_one(tmp_path, source):
    """Recursive functions of Ints and everything else, rebound or not halfway: tier 2 (the Int
    entry, the Ints it is taken to return and the checks of what else was called) prints,
    labels and fails exactly as tier 1."""
    both(tmp_path, source)


BOUND = """\
def walk(n):
    word = "ab"
    s = ""
    i = 0
    while i < n:
        s = s + "-"
        pair = [word, s]
        i = i + 1
    return [s, word]
print(walk(3))
word = "the module's"
s = "."
print(walk(3), word, s)
"""


def test_a_version_takes_locals_bound_before_its_loop_to_be_bound(tmp_path):
    """walk's loop version tests once on entry that ``word`` and ``s`` (no Ints) are bound in
    the function's scope, and reads and writes them with no test of their own (``s`` is
    written each turn); once the module binds both, walk's stores update the module's (as in
    tier 1): the test fails and the general version runs, with tier 1's result."""
    (out, error, *_), vm = both(tmp_path, BOUND)
    assert error is None and out.splitlines() == ["[---, ab]", "[---, ab] ab ---"]
    source = source_of(vm, "walk")
    guard = re.search(r"if " + QUIETLY + r"l\d\.__class__ is int and (.*):\n", source)
    assert guard, source
    bound = re.findall(r"(l\d) is not U", guard.group(1))
    assert len(bound) == 2
    for local in bound:
        assert re.search(rf"\n +s\d = {local}\n", source)         # a read with no test
    # ... and s's store, a String, with none either (a bound binding is never removed)
    assert any(re.search(rf"\n +{local} = s\d(; dw = 1)?\n", source) for local in bound)


def test_a_short_return_goes_under_the_if_so_the_comparison_jumps_short(tmp_path):
    """``if n < 2: return n`` in an Int version: the return goes under the ``if`` and the
    recursive case after it, not the other way round. Python 3.11 specialises a comparison
    only when the jump that takes it is short (no EXTENDED_ARG), and a jump over the recursive
    case (its calls and their deoptimizations) is not: no comparison of fib's direct form is
    followed by an EXTENDED_ARG (the Int version's is followed by its jump)."""
    import dis
    (out, error, *_), vm = both(tmp_path, FIB)
    assert error is None
    code = next(c for c in vm.prepared if c.code.name == "fib")
    assert re.search(r"\n( +)if \(l0 < 2\):\n\1    return l0\n", code.t2.direct_source)
    for name in ("direct_i", "direct"):
        ops = [ins.opname for ins in dis.get_instructions(code.direct.__globals__[name])]
        after = [ops[k + 1] for k, op in enumerate(ops) if op == "COMPARE_OP"]
        assert after and "EXTENDED_ARG" not in after, (name, after)
        assert after.count("POP_JUMP_FORWARD_IF_FALSE") >= 1


UNLABELLED_EQUALITY = """\
import math
from sensevm.guard import provenance as P
from sensevm.runtime import values as V
values = [0, 1, -1, 2 ** 70, 1.0, 0.0, -0.0, math.nan, math.inf, True, False, None, "",
          " ", "a", "True", "1", "None", [], [" "], [1, "a"], [[]], {}, {"a": 1}, {" ": " "},
          V.Scope(None), V.ArrayIterator([1])]
for x in values:
    for s in ["", " ", "a", "True", "1", "None"]:
        assert V.equal(x, s) is (x == s) and V.equal(s, x) is (s == x), (x, s)
        assert V.not_equal(x, s) is (x != s), (x, s)
    assert V.equal(x, None) is (x is None) and V.not_equal(x, None) is (x is not None), x
assert not P.live and not P.LABELLED
"""


def test_equality_with_a_string_or_nil_is_pythons_while_nothing_is_labelled():
    """Tier 2 compares a value with a String literal by Python's ``==``, and with nil by
    ``is``, without testing the value's class while the process has made no labelled value
    (LT empty): values.equal gives the same for every kind of value then (a process of its
    own, which has labelled nothing)."""
    import subprocess
    import sys
    from conftest import ROOT
    proc = subprocess.run([sys.executable, "-c", UNLABELLED_EQUALITY],
                          env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
