"""Relabelling one input never yields a clean output that depends on it (issue 21): hypothesis
writes straight-line Sense programs over the operators and builtins, one of whose inputs comes
from an untrusted tool instead of a literal, and the label the VM gives every variable (asked
through a credential the second look checks) is compared with a taint oracle that takes the
union over every operation, on both tiers.

The oracle (``Sc``, ``Tx``, ``Ar`` below) follows each value's dependence on the tool's input:
an Int, Float, Bool or nil as a whole, a String per character, an Array per element plus
whether its length (and so where each element sits) depends. A result depends on the input
when anything the operation reads does: either operand; for an index, the character or
element and every one before it (after it, for a negative index: how long those are decides
which one is there) and the index; an enclosing branch or loop condition (a variable assigned
in an arm, the result of an `and`/`or` whose left side decided, a value returned under a
labelled `if`, each pass of a loop from a labelled item or test on). An operand never
evaluated (the right of a short-circuited `and`/`or`) is not read. Storing an Array under a
labelled branch labels its elements where they are, as the VM does (labels are invisible and
the Array is shared), so the oracle follows Array identity too.

Each variable gets one of three verdicts: *depends* (the VM must flag it), *clean* (made of
the program's own literals only: the VM must not flag it, literals vouch for themselves), or
*unchecked*: it depends only through one of the known gaps below, which the VM does not track;
each is pinned by a strict xfail test at the end.

Covered, with labelled and clean operands, as statements at the top level or in a function,
and as operands nested in parentheses: ``+ - * / %`` on Int and Float, unary ``-``, ``+`` of
Strings and of Arrays, ``== !=`` on any two values (Arrays element-wise, Bool against
numbers, nil), ``< <= > >=`` on numbers and on Strings, ``and``/``or`` (on values of any
kind), ``not``, indexing Strings and Arrays (literal, variable and negative indexes), Array
literals (nested), index assignment, ``len``, ``str``, ``int``/``float`` (of numbers, Bools
and numeric Strings), ``type_of``, ``range`` (one, two and three arguments), ``push``,
``if``/``else`` and a one-armed ``if`` (on values of every kind), ``for`` over Strings,
Arrays and ``range(n)``, ``while`` with a counter, a user function returning from inside an
``if``.

Left out: ``print`` (the sink reports instead); ``assert`` (its result is always nil; whether it
raises is an implicit flow the VM documents it does not track); ``await``, ``audit_log``,
``user_request`` and the agent, model, memory, session and MCP builtins (values of other kinds,
each with route tests of its own in test_provenance_routes.py); maps, methods, slices, ``in``,
``+=`` and f-strings (EXTENSIONS.md E1-E3, written after this oracle: their labels have
properties of their own in test_maps_provenance.py, test_string_method_spans.py and
test_slices_and_fstrings.py); a tool that returns nil (nil cannot carry a label: gap 1); an
`if` whose arms give an Array and something else, and `and`/`or` between an Array and
something else (which *type* a variable holds would depend on the input, and type_of of an
Array is never labelled).

Found by this test and fixed (provenance.py): the tool's empty String lost its label when
joined to anything, so `page + "abc"` from an empty page was the program's own "abc"; and a
character read by index had only its own span's origins, so `(page + "abc")[k]` -- one of the
program's letters, chosen by the page's length -- was clean, and a page could spell an address
out of the program's alphabet with no branch at all.

Found by this test's gap list and closed (vm.py ``_branch``, guard/joins.py ``JoinPoints.stores``
and ``emptiness_origins``): the arm not taken (``x = "a"`` then ``if labelled: x = "b"`` left
``x`` clean when the condition was false; so did a ``while`` whose labelled test failed at once),
and a branch on an Array (``if``, ``while``, ``and``/``or``, ``not``: whether it is empty
opened no pc label, even when its elements were labelled). Both are now checked by the oracle,
and their routes are tests below (``CLOSED``).

Found by this test's gap list and closed (provenance.py ``SHAPES``, guard/joins.py ``JoinPoints.changed``,
vm.py ``_label_changed``): an Array changed in place in an arm not taken (``push(a, v)``,
``a[i] = v``, a method, a function it is handed to), which left its length and other slots
clean; the values that could not carry a label (a tool's empty Array, its ``len``/``str``,
the number of passes over it, an Array's length apart from its elements: each container's
length now has labels of its own, kept beside it); and where an element sits:
``(tool_array + ["a", "b"])[1]`` is one of the program's own elements, chosen by how long
the tool made its array. An Array whose elements are labelled opens a label when branched on
even if its length is the program's (the VM reads both, as len() does): an
over-approximation, which the oracle follows.

Known gap (values the oracle leaves unchecked):

1. nil carries no label: ``x = nil`` under a labelled branch leaves a clean nil (the VM
   tests ``v is None`` everywhere; a labelled nil would be a value of its own kind).
"""

from __future__ import annotations

import os


import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_tiers import _run_source

TIERS = ("1", "2")

# Dependence on the untrusted input: clean, unchecked (only through a known gap), depends.
C, G, T = 0, 1, 2
VERDICT = {C: "clean", G: "unchecked", T: "depends"}


def gap(d: int) -> int:
    """A dependence through a route the VM does not track: unchecked, never required."""
    return min(d, G)


# ----------------------------------------------------------------------------- the oracle

class Sc:
    """An Int, Float, Bool or nil and its dependence."""

    __slots__ = ("kind", "v", "d")

    def __init__(self, kind, v, d=C):
        self.kind, self.v = kind, v
        # nil has no labelled form (label(None) is None): a dependence on it is a gap.
        self.d = gap(d) if kind == "Nil" else d


class Tx:
    """A String: the dependence of each character, and of the empty String as a whole."""

    __slots__ = ("text", "ds", "e")

    def __init__(self, text, ds=None, e=C):
        self.text = text
        self.ds = tuple(ds) if ds is not None else (C,) * len(text)
        self.e = e if not text else C


class Ar:
    """An Array (shared by reference, like the VM's): its elements, whether the position of
    each counted from the start (``start``) or from the end (``end``) depends, and whether
    its length does (``ld``)."""

    __slots__ = ("items", "start", "end", "ld")

    def __init__(self, items, start=None, end=None, ld=C):
        self.items = list(items)
        self.start = list(start) if start is not None else [C] * len(self.items)
        self.end = list(end) if end is not None else [C] * len(self.items)
        self.ld = ld


def kind(x) -> str:
    return x.kind if type(x) is Sc else "String" if type(x) is Tx else "Array"


def fmt_float(v: float) -> str:
    return f"{v:.1f}" if v == int(v) and abs(v) < 1e15 else repr(v)


def text(x) -> str:
    """What str() and print show (LANGUAGE.md 4.1)."""
    if type(x) is Tx:
        return x.text
    if type(x) is Ar:
        return "[" + ", ".join(text(i) for i in x.items) + "]"
    if x.kind == "Nil":
        return "nil"
    if x.kind == "Bool":
        return "true" if x.v else "false"
    if x.kind == "Float":
        return fmt_float(x.v)
    return str(x.v)


def truthy(x) -> bool:
    if type(x) is Tx:
        return x.text != ""
    if type(x) is Ar:
        return bool(x.items)
    return x.kind != "Nil" and bool(x.v)


def own(x) -> int:
    """The dependence of a value itself (an Array is never labelled itself)."""
    if type(x) is Sc:
        return x.d
    if type(x) is Tx:
        return max(x.ds) if x.text else x.e
    return C


def shown(x) -> int:
    """The dependence of everything a value's text shows (str(), len(), Arrays compared)."""
    if type(x) is not Ar:
        return own(x)
    return max([shown(i) for i in x.items] + [x.ld])


def cond(x) -> int:
    """What branching on ``x`` depends on: its own label, or for an Array, whether it is
    empty: its length. The VM reads that, as len() does, from its length's labels and its
    elements' (provenance.emptiness_origins): an Array whose elements are labelled opens a
    label even when its length is the program's (a deliberate over-approximation: it asks)."""
    if type(x) is not Ar:
        return own(x)
    return shown(x)


def relabel(x, d: int, seen=None):
    """``x`` with ``d`` added, as provenance.label does: a new value, except an Array, whose
    elements and length are relabelled where they are (every alias sees it)."""
    if d == C:
        return x
    if type(x) is Sc:
        return Sc(x.kind, x.v, max(x.d, d))
    if type(x) is Tx:
        return Tx(x.text, [max(c, d) for c in x.ds], max(x.e, d))
    seen = set() if seen is None else seen
    if id(x) not in seen:
        seen.add(id(x))
        x.items[:] = [relabel(i, d, seen) for i in x.items]
        x.ld = max(x.ld, d)
    return x


def stored(x, pc: int):
    """A value stored (or returned, or left by `and`/`or`) under a branch on ``pc``: labelled,
    and which value it is (for an Array, how long it is) was the branch's choice."""
    x = relabel(x, pc)
    if type(x) is Ar:
        x.ld = max(x.ld, pc)
    return x


def sink(x) -> int:
    """The dependence of ``"<<" + str(x) + ">>"``, what asks() hands the second look."""
    return shown(x)


def eq(a, b):
    """``a == b``: (value, dependence), the VM's equality (values.equal) with its labels."""
    if type(a) is Ar or type(b) is Ar:
        if a is b:
            return True, C          # the same Array is equal without a look at its contents
        lengths = max(x.ld for x in (a, b) if type(x) is Ar)
        if type(a) is Ar and type(b) is Ar and len(a.items) == len(b.items):
            d = C
            for x, y in zip(a.items, b.items):
                same, dd = eq(x, y)
                if not same:
                    return False, max(shown(a), shown(b), lengths)
                d = max(d, dd)
            return True, max(d, lengths)
        return False, max(shown(a), shown(b), lengths)
    d = max(own(a), own(b))
    ka, kb = kind(a), kind(b)
    if ka == "Bool" or kb == "Bool":
        return ka == kb and a.v == b.v, d          # Bool never equals a number (spec 21.4)
    if ka in NUMERIC and kb in NUMERIC:
        return a.v == b.v, d
    if ka == kb == "String":
        return a.text == b.text, d
    return ka == kb == "Nil", d


NUMERIC = ("Int", "Float")
LIMIT = 10 ** 6         # numbers stay small: no overflow, no exponent in any text


def number(v, d):
    """An arithmetic result, or None when it leaves the range the generator keeps to."""
    if type(v) is float and not (abs(v) <= LIMIT):
        return None
    if type(v) is int and abs(v) > LIMIT:
        return None
    return Sc("Float" if type(v) is float else "Int", v, d)


def concat(a: Tx, b: Tx) -> Tx:
    if not a.text and not b.text:
        return Tx("", (), max(a.e, b.e))
    if not a.text:
        # An empty String has no character to keep its label on: it labels what it joins.
        return Tx(b.text, [max(c, a.e) for c in b.ds])
    if not b.text:
        return Tx(a.text, [max(c, b.e) for c in a.ds])
    return Tx(a.text + b.text, a.ds + b.ds)


def char_at(s: Tx, i: int, d_index: int) -> Tx:
    """``s[i]``: the character's own dependence, and the dependence of where it is (every
    character before it, or after it for a negative index), and the index's."""
    j = i % len(s.text)
    before = s.ds[:j] if i >= 0 else s.ds[j + 1:]
    return Tx(s.text[j], [max(s.ds[j], max(before, default=C), d_index)])


def join_arrays(a: Ar, b: Ar) -> Ar:
    return Ar(a.items + b.items, a.start + [max(s, a.ld) for s in b.start],
              [max(e, b.ld) for e in a.end] + b.end, max(a.ld, b.ld))


# ----------------------------------------------------------------------------- the generator

WORD = "ab12 .-"        # no quote, colon, newline or '<': no clean text can vouch for a sink
KINDS = ("String", "Int", "Array", "Float", "Bool")


def literal_source(x) -> str:
    """Sense source for a literal model value (negative numbers in parentheses)."""
    if type(x) is Ar:
        return "[" + ", ".join(literal_source(i) for i in x.items) + "]"
    if type(x) is Tx:
        return '"' + x.text + '"'
    if x.kind in NUMERIC:
        s = repr(x.v)
        return f"({s})" if x.v < 0 or s.startswith("-") else s
    return text(x)


def scalars(kind_name: str):
    if kind_name == "Int":
        return st.integers(-3, 9).map(lambda v: Sc("Int", v))
    if kind_name == "Float":
        return st.integers(-20, 40).map(lambda k: Sc("Float", k / 8))
    if kind_name == "Bool":
        return st.booleans().map(lambda v: Sc("Bool", v))
    if kind_name == "Nil":
        return st.just(Sc("Nil", None))
    return st.text(alphabet=WORD, max_size=4).map(Tx)


LEAF = st.sampled_from(("Int", "Float", "Bool", "String", "Nil")).flatmap(scalars)
ARRAYS = st.lists(st.one_of(LEAF, st.lists(LEAF, max_size=2).map(Ar)), max_size=4).map(Ar)
INPUTS = {"Int": scalars("Int"), "Float": scalars("Float"), "Bool": scalars("Bool"),
          "String": scalars("String"), "Array": ARRAYS}


class Program:
    """A generated program: its source, and the oracle's verdict for every variable."""

    def __init__(self, source, verdicts):
        self.source, self.verdicts = source, verdicts

    def __repr__(self):
        marks = "".join(f"\n#   {n}: {VERDICT[d]}" for n, d in self.verdicts.items())
        return f"Program(\n{self.source}# oracle:{marks}\n)"


class Gen:
    """Draws statements against the oracle's state: the variables bound, their model values.
    Each operation is drawn against the values bound now (so that it is type-correct and
    cannot raise) and returned as source plus a thunk that computes its model value when the
    code runs, under the pc label ``pc`` of the arm it is in."""

    def __init__(self, draw):
        self.draw = draw
        self.env = {}           # name -> model value
        self.order = []         # names in the order they were bound
        self.count = 0
        self.lines = []         # (source line, indent)
        self.depth = 0          # inside an operand (an operation in parentheses)
        self.favourites = {}

    def fresh(self, prefix="v"):
        self.count += 1
        return f"{prefix}{self.count}"

    def bind(self, name, value):
        if name not in self.env:
            self.order.append(name)
        self.env[name] = value

    def choose(self, key, options):
        """One of ``options``: mostly the program's favourite for ``key`` (drawn the first
        time), so that each program dwells on a few operations -- a label dropped by one of
        them shows in a few dozen examples, not thousands."""
        if key not in self.favourites:
            self.favourites[key] = self.draw(st.sampled_from(options))
        if self.draw(st.integers(0, 3)):
            return self.favourites[key]
        return self.draw(st.sampled_from(options))

    def getter(self, name):
        return lambda pc=C: self.env[name]

    # ---- operands

    def atom(self, ok, kinds=("Int", "Float", "Bool", "String", "Nil"), literals=None):
        """An operand satisfying ``ok``: a bound variable holding something of the input's
        (first: hypothesis draws the first choice most, and shrinks to it) or nothing of it,
        an operation in parentheses, or a literal. Returns (source, getter), or None; the
        value is read when the code runs."""
        if self.depth:
            ok = (lambda ok: lambda v: type(v) is not Ar and ok(v))(ok)
        choice = self.draw(st.integers(0, 3))
        if choice == 2 and self.depth < 2:
            found = self.nested(ok)
            if found is not None:
                return found
        elif choice < 2:
            found = self.var(ok, tainted=choice == 0)
            if found is not None:
                return found
        if literals is None:
            literals = [s for k in kinds for s in _SAMPLES[k] if ok(s)]
        if not literals:
            return None
        lit = self.draw(st.sampled_from(literals))
        return literal_source(lit), lambda pc=C: lit

    def nested(self, ok):
        """An operation as an operand, in parentheses: ``(a + b)[i]``, ``len(str(x)) * 2``.
        Only on values other than Arrays, so that computing it now to see what it gives
        changes nothing (an Array may be relabelled where it is)."""
        self.depth += 1
        try:
            source, thunk = self.op("scalar")
        finally:
            self.depth -= 1
        if not ok(thunk(C)):
            return None
        return f"({source})", lambda pc=C: thunk(pc)

    def var(self, ok, tainted=None):
        """A bound variable satisfying ``ok`` (Arrays have no literal atoms): one that holds
        something of the input's, or (``tainted=False``) one that holds nothing of it, if
        there is one -- else a labelled value would rarely meet a clean one, where a label
        has to be carried across."""
        if self.depth:
            ok = (lambda ok: lambda v: type(v) is not Ar and ok(v))(ok)
        names = [n for n in self.order if ok(self.env[n])]
        if tainted is None:
            tainted = not self.draw(st.booleans())
        names = [n for n in names if touched(self.env[n]) == tainted] or names
        if not names:
            return None
        name = names[self.draw(st.integers(0, len(names) - 1))]
        return name, self.getter(name)

    # ---- operations: each returns (source, thunk(pc) -> value), or None if not possible

    def op(self, want=None):
        """One operation on earlier values. ``want``: "Array" or "scalar" -- both arms of an
        `if` (and both sides of `and`/`or`) are Arrays or neither, so that which *type* a
        variable holds never depends on the input (type_of of an Array is never labelled)."""
        families = [f for f in OPS if want is None or f[1] in (want, "any")]
        for _ in range(8):
            fn = self.choose(("op", want), families)[2]
            made = fn(self, want)
            if made is not None:
                return made
        # Nothing bound fits (everything is empty, say): a literal Array, or a comparison.
        return (Gen.array_literal if want == "Array" else Gen.compare)(self, want)

    def arith(self, want):
        op = self.choose("arith", ["+", "-", "*", "/", "%"])
        a = self.atom(is_number, NUMERIC)
        b = self.atom((lambda v: is_number(v) and v.v != 0) if op in "/%" else is_number,
                      NUMERIC)

        def thunk(pc):
            x, y = a[1](pc), b[1](pc)
            return number(_ARITH[op](x.v, y.v), max(x.d, y.d))
        if thunk(C) is None:            # out of the generator's range
            return None
        return f"{a[0]} {op} {b[0]}", thunk

    def negate(self, want):
        a = self.atom(is_number, NUMERIC)
        return f"-{a[0]}", lambda pc: (lambda x: Sc(x.kind, -x.v, x.d))(a[1](pc))

    def concat_text(self, want):
        short = lambda v: type(v) is Tx and len(v.text) <= 20
        a, b = self.atom(short, ("String",)), self.atom(short, ("String",))
        return f"{a[0]} + {b[0]}", lambda pc: concat(a[1](pc), b[1](pc))

    def concat_arrays(self, want):
        small = lambda v: type(v) is Ar and len(v.items) <= 5
        a, b = self.var(small), self.var(small)
        if a is None:
            return None
        return f"{a[0]} + {b[0]}", lambda pc: join_arrays(a[1](pc), b[1](pc))

    def array_literal(self, want):
        parts = []
        for _ in range(self.draw(st.integers(0, 3))):
            if self.draw(st.integers(0, 4)):
                part = self.atom(lambda v: type(v) is not Ar)
            else:
                part = self.var(lambda v: type(v) is Ar and len(v.items) <= 4)
            if part is not None:
                parts.append(part)
        return ("[" + ", ".join(p[0] for p in parts) + "]",
                lambda pc: Ar([p[1](pc) for p in parts]))

    def compare(self, want):
        op = self.choose("compare", ["==", "!=", "<", "<=", ">", ">="])
        if op in ("==", "!="):
            a, b = self.atom(anything), self.atom(anything)

            def thunk(pc):
                same, d = eq(a[1](pc), b[1](pc))
                return Sc("Bool", same == (op == "=="), d)
            return f"{a[0]} {op} {b[0]}", thunk
        if self.draw(st.booleans()):
            a, b = self.atom(is_number, NUMERIC), self.atom(is_number, NUMERIC)
            key = lambda x: x.v
        else:
            a, b = self.atom(is_text, ("String",)), self.atom(is_text, ("String",))
            key = lambda x: x.text
        def ordered(pc):
            x, y = a[1](pc), b[1](pc)
            return Sc("Bool", _ORDER[op](key(x), key(y)), max(own(x), own(y)))
        return f"{a[0]} {op} {b[0]}", ordered

    def logic(self, want):
        op = self.choose("logic", ["and", "or"])
        if want == "Array" or (want is None and self.draw(st.integers(0, 3)) == 0):
            a, b = self.var(is_array), self.var(is_array)
            if a is None:
                return None
        else:
            a, b = self.atom(not_array), self.atom(not_array)

        def thunk(pc):
            left = a[1](pc)
            decided = truthy(left) == (op == "or")
            # The right side runs only when the left did not decide; either way what is left
            # on the stack is the left side's choice.
            return stored(left if decided else b[1](pc), cond(left))
        return f"{a[0]} {op} {b[0]}", thunk

    def negation(self, want):
        a = self.atom(anything)
        return f"not {a[0]}", lambda pc: (lambda x: Sc("Bool", not truthy(x), cond(x)))(
            a[1](pc))

    def call(self, want):
        """A builtin of one argument: len, str, int, float, type_of."""
        fn = self.choose("call", ["len", "str", "int", "float", "type_of"])
        ok = {"len": lambda v: type(v) in (Tx, Ar),
              "int": lambda v: convert("int", v) is not None,
              "float": lambda v: convert("float", v) is not None}.get(fn, anything)
        a = self.atom(ok)
        if a is None:
            return None

        def thunk(pc):
            # A value handed to a call under a pc label is labelled (an Array where it is).
            x = relabel(a[1](pc), pc)
            if fn == "len":
                return Sc("Int", len(x.text), own(x)) if type(x) is Tx else \
                    Sc("Int", len(x.items), shown(x))
            if fn == "str":
                return x if type(x) is Tx else as_text(x)
            if fn == "type_of":
                return Tx(kind(x), [own(x)] * len(kind(x)))
            return Sc("Int" if fn == "int" else "Float", convert(fn, x), own(x))
        return f"{fn}({a[0]})", thunk

    def ranged(self, want):
        is_int = lambda v: type(v) is Sc and v.kind == "Int"
        args = [self.atom(is_int, ("Int",)) for _ in range(self.draw(st.integers(1, 3)))]
        bounds = [a[1]().v for a in args]
        if len(bounds) == 3 and bounds[2] == 0 or len(range(*bounds)) > 6:
            return None

        def thunk(pc):
            xs = [relabel(a[1](pc), pc) for a in args]
            d = max(x.d for x in xs)
            return Ar([Sc("Int", v, d) for v in range(*[x.v for x in xs])], ld=d)
        return "range(" + ", ".join(a[0] for a in args) + ")", thunk

    def index(self, want):
        """``s[i]`` or ``a[i]``, with i a literal or an Int variable in range."""
        def fits(x, i):
            n = len(x.text) if type(x) is Tx else len(x.items)
            if not -n <= i < n:
                return False
            element = "Array" if type(x) is Ar and type(x.items[i]) is Ar else "scalar"
            return want is None or element == want

        def usable(x):
            n = len(x.text) if type(x) is Tx else len(x.items) if type(x) is Ar else 0
            return any(fits(x, i) for i in range(-n, n))
        # Half the time the String or Array read is a join, where text or elements of the
        # input come before (or after) the program's own: where a label can be lost to a
        # position.
        seq = (self.atom(usable, ("String",)) if self.draw(st.booleans()) else None) or \
            self.joined(usable, want) or self.var(usable)
        if seq is None:
            return None
        x = seq[1]()
        n = len(x.text) if type(x) is Tx else len(x.items)
        idx = self.atom(lambda v: type(v) is Sc and v.kind == "Int" and fits(x, v.v), ("Int",),
                        [Sc("Int", i) for i in range(-n, n) if fits(x, i)])

        def thunk(pc):
            s, i = seq[1](pc), idx[1](pc)
            if type(s) is Tx:
                return char_at(s, i.v, i.d)
            where = s.start[i.v] if i.v >= 0 else s.end[i.v]
            # The element, labelled with the index and with where it sits.
            return relabel(relabel(s.items[i.v], i.d), where)
        return f"{seq[0]}[{idx[0]}]", thunk

    def joined(self, usable, want):
        """``(a + b)`` of two Strings or (not inside an operand) two Arrays, one of them
        holding something of the input's if one can."""
        has_arrays = not self.depth and any(type(v) is Ar for v in self.env.values())
        arrays = has_arrays and (want == "Array" or self.draw(st.integers(0, 2)) == 2)
        if want == "Array" and not arrays:
            return None
        ok = is_array if arrays else is_text
        first = None
        if not self.draw(st.booleans()):
            first = self.var(ok if arrays else not_array, tainted=True)
            if first is not None and not arrays and type(first[1]()) is not Tx:
                # The text of whatever holds the input: str(x) + "...".
                first = (lambda name, get: (f"str({name})", lambda pc=C: as_text(
                    relabel(get(pc), pc))))(*first)
        second = (self.var if arrays else self.atom)(ok)
        if first is None:
            first = (self.var if arrays else self.atom)(ok)
        if first is None or second is None:
            return None
        a, b = (first, second) if self.draw(st.booleans()) else (second, first)
        join = join_arrays if arrays else concat
        if not usable(join(a[1](), b[1]())):
            return None
        return f"({a[0]} + {b[0]})", lambda pc=C: join(a[1](pc), b[1](pc))

    def pick(self, want):
        """pick(c, a, b): a user function that returns from inside an `if`."""
        c = self.atom(anything)
        if want == "Array" or (want is None and self.draw(st.integers(0, 3)) == 0):
            a, b = self.var(is_array), self.var(is_array)
            if a is None:
                return None
        else:
            a, b = self.atom(not_array), self.atom(not_array)

        def thunk(pc):
            # The arguments are handed over under pc; the callee then branches on c.
            c_, a_, b_ = (relabel(g(pc), pc) for g in (c[1], a[1], b[1]))
            return stored(a_ if truthy(c_) else b_, cond(c_))
        return f"pick({c[0]}, {a[0]}, {b[0]})", thunk

    # ---- statements

    def emit(self, line, indent=0):
        self.lines.append((line, indent))

    def assign(self):
        name = self.fresh()
        source, thunk = self.op()
        self.emit(f"{name} = {source}")
        self.bind(name, thunk(C))

    def branch(self):
        """``x = ...`` then ``if c: x = ...`` with or without ``else: x = ...``."""
        name = self.fresh()
        first, thunk = self.op()
        value = thunk(C)
        want = "Array" if type(value) is Ar else "scalar"
        c = self.atom(anything)
        then_src, then = self.op(want)
        two = self.draw(st.booleans())
        if two:
            else_src, other = self.op(want)
        self.emit(f"{name} = {first}")
        self.emit(f"if {c[0]}:")
        self.emit(f"{name} = {then_src}", 1)
        if two:
            self.emit("else:")
            self.emit(f"{name} = {else_src}", 1)
        self.bind(name, value)
        condition = c[1]()
        d = cond(condition)
        if truthy(condition):
            self.env[name] = stored(then(d), d)
        elif two:
            self.env[name] = stored(other(d), d)
        else:
            # The arm not taken: the VM labels what either arm may assign at the branch.
            self.env[name] = relabel(value, d)

    def loop(self):
        """``acc = 0`` or ``""``, then ``for e in X: acc = acc + ...`` over a String, an
        Array or range(n)."""
        source = self.choose("loop", ["text", "array", "range"])
        if source == "range":
            n = self.atom(lambda v: type(v) is Sc and v.kind == "Int" and v.v <= 6, ("Int",))
            over = f"range({n[0]})"
            get = lambda: Ar([Sc("Int", i, n[1]().d) for i in range(n[1]().v)], ld=n[1]().d)
        else:
            seq = self.var((lambda v: type(v) is Tx and len(v.text) <= 8) if source == "text"
                           else (lambda v: type(v) is Ar and len(v.items) <= 8))
            if seq is None:
                return self.assign()
            over, get = seq
        acc, e = self.fresh(), self.fresh("e")
        items = get()
        elements = [Tx(ch) for ch in items.text] if type(items) is Tx else items.items
        start = Sc("Int", 0) if self.draw(st.booleans()) else Tx("")
        body_src, body = self.loop_body(acc, e, start, elements)
        self.emit(f"{acc} = {literal_source(start)}")
        self.emit(f"for {e} in {over}:")
        self.emit(f"{acc} = {body_src}", 1)
        self.bind(acc, start)
        items = get()
        pc = C
        for k in range(len(items.text) if type(items) is Tx else len(items.items)):
            if type(items) is Tx:
                item, where = Tx(items.text[k], [items.ds[k]]), C
            else:
                item, where = items.items[k], items.start[k]
            # A labelled item (not an Array: it is never labelled itself) labels the rest of
            # the loop, from the store of the loop variable on.
            pc = max(pc, cond(item) if type(item) is not Ar else C, where)
            item = stored(item, pc)
            self.env[acc] = stored(body(self.env[acc], item, pc), pc)
        length = own(items) if type(items) is Tx else items.ld
        self.env[acc] = relabel(self.env[acc], length)          # how many passes

    def loop_body(self, acc, e, start, elements):
        """What a pass adds to the accumulator: 1, the element itself, or the text of the
        element or of another variable (valid for every element)."""
        if type(start) is Sc:
            if elements and all(is_small(x) for x in elements) and self.draw(st.booleans()):
                return f"{acc} + {e}", lambda a, x, pc: number(a.v + x.v, max(a.d, x.d))
            return f"{acc} + 1", lambda a, x, pc: Sc("Int", a.v + 1, a.d)
        if elements and all(type(x) is Tx for x in elements) and self.draw(st.booleans()):
            return f"{acc} + {e}", lambda a, x, pc: concat(a, x)
        other = self.var(lambda v: len(text(v)) <= 12) if self.draw(st.booleans()) else None
        if other is None:
            return f"{acc} + str({e})", lambda a, x, pc: concat(a, as_text(x))
        # str(other) is a call under the loop's label: its argument is labelled.
        return f"{acc} + str({other[0]})", lambda a, x, pc: concat(
            a, as_text(relabel(other[1](), pc)))

    def counting(self):
        """``acc = 0``, ``w = 0``, ``while w < n: acc = acc + step; w = w + 1``."""
        bound = self.atom(lambda v: is_number(v) and v.v <= 5, NUMERIC)
        step = self.atom(is_small, NUMERIC)
        acc, w = self.fresh(), self.fresh("w")
        self.emit(f"{acc} = 0")
        self.emit(f"{w} = 0")
        self.emit(f"while {w} < {bound[0]}:")
        self.emit(f"{acc} = {acc} + {step[0]}", 1)
        self.emit(f"{w} = {w} + 1", 1)
        self.bind(acc, Sc("Int", 0))
        self.bind(w, Sc("Int", 0))
        pc = C
        while True:
            i, n = self.env[w], bound[1]()
            pc = max(pc, i.d, n.d)      # the label of a loop's test lasts until it exits
            if not i.v < n.v:
                break
            s = step[1]()
            self.env[acc] = stored(number(self.env[acc].v + s.v, max(self.env[acc].d, s.d)), pc)
            self.env[w] = stored(Sc("Int", i.v + 1, i.d), pc)
        # The exit (or, if the body never ran, the whole loop) is an arm not taken: the VM
        # labels what the body may assign at each labelled test.
        self.env[acc] = relabel(self.env[acc], pc)
        self.env[w] = relabel(self.env[w], pc)

    def mutate(self):
        """``push(a, x)`` or ``a[i] = x`` on a bound Array."""
        target = self.var(lambda v: type(v) is Ar and len(v.items) <= 8)
        if target is None:
            return self.assign()
        name, get = target
        arr = get()
        x = self.atom(not_array)
        n = len(arr.items)
        if not n or self.draw(st.booleans()):
            self.emit(f"push({name}, {x[0]})")
            arr.items.append(x[1]())
            arr.start.append(arr.ld)        # it lands after however many there were
            arr.end.append(C)
            return
        idx = self.atom(lambda v: type(v) is Sc and v.kind == "Int" and -n <= v.v < n,
                        ("Int",), [Sc("Int", i) for i in range(-n, n)])
        self.emit(f"{name}[{idx[0]}] = {x[0]}")
        i = idx[1]()
        arr.items[i.v] = relabel(x[1](), i.d)
        for j in range(n):
            if j != i.v % n:
                # Where it did not land depends on the index too (values.index_set).
                arr.items[j] = relabel(arr.items[j], i.d)


    def changing_branch(self):
        """``if c: push(a, x)`` or ``if c: a[i] = x``, with or without an ``else`` that
        changes another Array (or the same one) so: what an arm changes in place."""
        arms = []
        for _ in range(2 if self.draw(st.booleans()) else 1):
            target = self.var(lambda v: type(v) is Ar and len(v.items) <= 8)
            if target is None:
                return self.assign()
            x = self.atom(not_array)
            n = len(target[1]().items)
            idx = None
            if n and self.draw(st.booleans()):
                idx = self.atom(lambda v: type(v) is Sc and v.kind == "Int" and -n <= v.v < n,
                                ("Int",), [Sc("Int", i) for i in range(-n, n)])
            arms.append((target, x, idx))
        c = self.atom(anything)
        self.emit(f"if {c[0]}:")
        for k, ((name, _), x, idx) in enumerate(arms):
            if k:
                self.emit("else:")
            if idx is None:
                self.emit(f"push({name}, {x[0]})", 1)
            else:
                self.emit(f"{name}[{idx[0]}] = {x[0]}", 1)
        condition = c[1]()
        d = cond(condition)
        # The VM labels what either arm may change, where it is, when the branch opens.
        for (_, get), _, _ in arms:
            relabel(get(), d)
        if truthy(condition):
            arm = arms[0]
        elif len(arms) == 2:
            arm = arms[1]
        else:
            return
        (_, get), x, idx = arm
        arr, value = get(), stored(x[1](d), d)
        if idx is None:
            arr.items.append(value)
            arr.start.append(arr.ld)
            arr.end.append(C)
            return
        n, i = len(arr.items), idx[1](d)
        arr.items[i.v] = relabel(value, i.d)
        for j in range(n):
            if j != i.v % n:
                arr.items[j] = relabel(arr.items[j], i.d)


def touched(x) -> bool:
    """Whether any part of a value depends on the input (a String's characters, an Array's
    elements or length)."""
    if type(x) is Sc:
        return x.d != C
    if type(x) is Tx:
        return x.e != C or any(x.ds)
    return x.ld != C or any(touched(i) for i in x.items)


def anything(v) -> bool:
    return True


def is_number(v) -> bool:
    return type(v) is Sc and v.kind in NUMERIC


def is_small(v) -> bool:
    """A number that a loop may add up to six times and stay in range."""
    return is_number(v) and abs(v.v) <= 1000


def is_text(v) -> bool:
    return type(v) is Tx


def is_array(v) -> bool:
    return type(v) is Ar


def not_array(v) -> bool:
    return type(v) is not Ar


def as_text(x) -> Tx:
    """str(x): a String is itself; anything else's text has the dependence of what it shows."""
    if type(x) is Tx:
        return x
    s = text(x)
    return Tx(s, [shown(x)] * len(s))


def convert(fn, x):
    """int(x) / float(x) as the VM computes them (Python's own), or None where they raise."""
    if type(x) is Ar or type(x) is Sc and x.kind == "Nil":
        return None
    v = x.text if type(x) is Tx else x.v
    try:
        r = int(v) if fn == "int" else float(v)
    except (ValueError, OverflowError):
        return None
    return r if abs(r) <= LIMIT else None


_ARITH = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
          "/": lambda a, b: a / b, "%": lambda a, b: a % b}
_ORDER = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
          ">=": lambda a, b: a >= b}
# The literals an operation may use, by kind.
_SAMPLES = {"Int": [Sc("Int", v) for v in range(-3, 10)],
            "Float": [Sc("Float", k / 8) for k in range(-20, 41)],
            "Bool": [Sc("Bool", True), Sc("Bool", False)], "Nil": [Sc("Nil", None)],
            "String": [Tx(w) for w in ("ab", "12", "a", "b", "1", " 2 ", "-3", "1.5", "2.", ".5",
                                       "1_0", "a.b", "")]}

# (what it can give: "scalar", "Array" or "any", how it is drawn)
# Reads of characters and elements first (hypothesis draws the first choice most): where
# labelled and clean text or elements meet, a label can be lost to a position.
OPS = [("index", "any", Gen.index), ("concat_text", "scalar", Gen.concat_text),
       ("call", "scalar", Gen.call), ("logic", "any", Gen.logic), ("pick", "any", Gen.pick),
       ("compare", "scalar", Gen.compare), ("arith", "scalar", Gen.arith),
       ("concat_arrays", "Array", Gen.concat_arrays), ("array_literal", "Array",
                                                       Gen.array_literal),
       ("not", "scalar", Gen.negation), ("negate", "scalar", Gen.negate),
       ("range", "Array", Gen.ranged)]
STATEMENTS = ("assign", "assign", "branch", "loop", "counting", "mutate",    # assign: twice
              "changing_branch")

HEAD = """tool t_in() returns {kind} requires web.fetch:
    return {value}
irreversible action rotate(password: String) requires vault.write:
    nil
def asks(v):
    local s = rotate("<<" + str(v) + ">>")
    s.verify()
    return s.second_look != nil
def pick(c, a, b):
    if c:
        return a
    return b
"""


def from_tool(x):
    """A tool's result: labelled through, and every Array in it as long as the tool chose."""
    x = relabel(x, T)
    stack = [x]
    while stack:
        y = stack.pop()
        if type(y) is Ar:
            y.ld = T
            stack.extend(y.items)
    return x


@st.composite
def programs(draw):
    """A program: its inputs, up to 25 statements, then every variable's second look."""
    gen = Gen(draw)
    # The inputs: literals of the program, but for one (the relabelled one), the tool's.
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=3))
    tainted = draw(st.integers(0, len(kinds) - 1))
    for k, kind_name in enumerate(kinds):
        value = draw(INPUTS[kind_name])
        if k == tainted:
            head = HEAD.format(kind=kind_name, value=literal_source(value))
            gen.emit(f"in{k} = t_in()")
            value = from_tool(value)
        else:
            gen.emit(f"in{k} = {literal_source(value)}")
        gen.bind(f"in{k}", value)
    for statement in draw(st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=25)):
        getattr(gen, statement)()
    inside = draw(st.booleans())        # module globals, or a function's locals
    pad = "    " if inside else ""
    body = ["def main():"] if inside else []
    body += [pad + "    " * indent + line for line, indent in gen.lines]
    body += [f'{pad}print("{name}", asks({name}))' for name in gen.order]
    body += ["main()"] if inside else []
    verdicts = {name: sink(gen.env[name]) for name in gen.order}
    return Program(head + "\n".join(body) + "\n", verdicts)


def run_flags(tmp_path, source, tier):
    """Which variables the second look asks about, by name."""
    out, error, *_ = _run_source(tmp_path, source, tier)
    assert error is None, f"the program raised {error}"
    return {name: flag == "true" for name, flag in (line.split(" ") for line in out.splitlines())}


def mismatches(program, flags):
    return [f"{name}: the oracle says {VERDICT[d]}, the VM "
            f"{'flagged' if flags[name] else 'did not flag'} it"
            for name, d in program.verdicts.items() if d != G and flags[name] != (d == T)]


# Tier 2 compiles each program to Python first, six times the cost of a run on tier 1.
# The normal suite walks the same programs every run (derandomized: a route the search has not
# met yet must not fail a build at random); `make fuzz` (FUZZ_EXAMPLES) searches anew, longer.
_FUZZ = int(os.environ.get("FUZZ_EXAMPLES", "0"))
EXAMPLES = {"1": _FUZZ or 300, "2": _FUZZ // 5 or 60}


@pytest.mark.parametrize("tier", TIERS)
def test_no_clean_output_depends_on_the_relabelled_input(tmp_path, tier):
    @settings(max_examples=EXAMPLES[tier], deadline=None, derandomize=not _FUZZ)
    @given(program=programs())
    def check(program):
        wrong = mismatches(program, run_flags(tmp_path, program.source, tier))
        assert not wrong, "\n".join(wrong)
    check()


# ----------------------------------------------------------------------------- pinned programs

SINKS = '''tool page() returns String requires web.fetch:
    return "mallory@evil.example"
tool empty_page() returns String requires web.fetch:
    return ""
tool count() returns Int requires web.fetch:
    return 41
tool items() returns Array requires web.fetch:
    return [7]
tool no_items() returns Array requires web.fetch:
    return []
irreversible action send(to: String) requires email.send:
    print("SENT " + to)
irreversible action rotate(password: String) requires vault.write:
    nil
def asks(v):
    local s = rotate("<<" + str(v) + ">>")
    s.verify()
    return s.second_look != nil
def sends(to):
    local s = send(to)
    s.verify()
    return s.second_look != nil
'''
ALPHABET = "abcdefghijklmnopqrstuvwxyz@."


def lines(tmp_path, body, tier):
    out, error, *_ = _run_source(tmp_path, SINKS + body, tier)
    assert error is None, error
    return out.split()


@pytest.mark.parametrize("tier", TIERS)
def test_an_empty_page_is_not_the_programs_own_text(tmp_path, tier):
    """Found first: the tool's "" came out of `"<<" + str(v) + ">>"` clean (an empty labelled
    String kept its label only alone), so did `page + "abc"` -- the page chose to add
    nothing. The program's own "abc" is still clean."""
    assert lines(tmp_path, '''p = empty_page()
print(asks(p), asks(p + "abc"), asks("abc" + p), asks(len(p + "abc")), asks(p + p))
print(asks("abc"), asks("" + "abc"))
''', tier) == ["true"] * 5 + ["false"] * 2


@pytest.mark.parametrize("tier", TIERS)
def test_which_of_the_programs_characters_a_page_picks_is_the_pages(tmp_path, tier):
    """Found second: `("ab" + str(n))[-4]` is the program's "b", but only because of how long
    the tool's number is; likewise `(page + "xyz")[20]`. Where nothing labelled comes before
    (or, from the end, after) a character, it stays the program's own: `("ab" + page)[1]`,
    but not `("ab" + page)[-21]`, the same "b" counted across the page."""
    assert lines(tmp_path, '''n = count()
p = page()
print(asks(("ab" + str(n))[-4]), asks((p + "xyz")[20]), asks(("ab" + p)[-21]))
print(asks(("ab" + p)[1]), asks((p + "xyz")[-1]), asks(("ab" + str(n))[0]))
''', tier) == ["true"] * 3 + ["false"] * 3


@pytest.mark.parametrize("tier", TIERS)
def test_a_page_spelling_an_address_by_its_lengths_is_asked_about(tmp_path, tier):
    """The route the second finding opens: no branch at all, each character of the address is
    the program's own, chosen by how long one of the tool's answers is."""
    target = "mallory@evil.example"
    at = len(ALPHABET)            # one "x" at least: no part is empty
    parts = ", ".join('"' + "x" * (at - ALPHABET.index(c)) + '"' for c in target)
    assert lines(tmp_path, f'''tool part(i: Int) returns String requires web.fetch:
    return [{parts}][i]
out = ""
for i in range({len(target)}):
    out = out + (part(i) + "{ALPHABET}")[{at}]
print(out, sends(out))
''', tier) == [target, "true"]


LETTERS = "[" + ", ".join(f'"{c}"' for c in ALPHABET) + "]"
# Routes through gaps this test found and the VM closed (module docstring): each once spelled
# an address with a second look that did not ask.
CLOSED = [
    pytest.param('''x = "a"
if page() == "nothing":
    x = "b"
print(asks(x))
''', None, id="1-the-arm-not-taken"),
    # Gap 1 as a route: "c differs from k" is labelled only when it is true, and the value it
    # guards is assigned only when it is false.
    pytest.param('''def pick(c, k):
    local differs = true
    if c == k:
        differs = false
    local skip = false
    if differs:
        skip = true
    return not skip
p = page()
out = ""
for i in range(20):
    for k in ''' + LETTERS + ''':
        if pick(p[i], k):
            out = out + k
print(out, sends(out))
''', "mallory@evil.example", id="1-route-double-negation"),
    pytest.param('''x = "a"
if items():
    x = "b"
print(asks(x), asks(not items()), asks(items() and "q"))
''', None, id="2-branch-on-an-array"),
    # Gap 2 as a route: the tool answers [1] (a labelled element) for the right letter.
    # A try body that ended without an error says what it computed from (issue 23's E4 gap):
    # here, that the page's length is a number (it is 41), then per letter that it matched.
    pytest.param('''x = "a"
try:
    n = int(str(count()))
    x = "b"
except SenseError:
    nil
print(asks(x))
''', None, id="E4-the-path-without-an-error"),
    pytest.param('''p = page()
out = ""
for i in range(20):
    for k in ''' + LETTERS + ''':
        ok = false
        try:
            assert(p[i] != k)
        except SenseError:
            ok = true
        if ok:
            out = out + k
print(out, sends(out))
''', "mallory@evil.example", id="E4-route-an-assert-per-letter"),
    pytest.param('''tool hit(i: Int, k: String) returns Array requires web.fetch:
    if "mallory@evil.example"[i] == k:
        return [1]
    return []
out = ""
for i in range(20):
    for k in ''' + LETTERS + ''':
        if hit(i, k):
            out = out + k
print(out, sends(out))
''', "mallory@evil.example", id="2-route-an-array-per-letter"),
    # Gaps 1, 3 and 4 of stop 24, closed with container shapes (provenance.SHAPES) and what
    # a region may change in place (guard/joins.py JoinPoints.changed).
    pytest.param('''xs = ["a"]
ys = ["a", "b"]
zs = []
def add_to(a, v):
    a.push(v)
if page() == "nothing":
    push(xs, "b")
    ys[0] = "c"
    add_to(zs, 1)
print(asks(len(xs)), asks(ys[1]), asks(len(zs)))
''', None, id="A1-an-array-changed-in-an-arm-not-taken"),
    pytest.param('''x = "a"
def rebind():
    x = "b"
def deeper():
    rebind()
if page() == "nothing":
    deeper()
print(asks(x))
''', None, id="A1-a-function-an-arm-calls-assigns-an-outer-variable"),
    pytest.param('''g = []
def mine():
    return g
def outer():
    return mine()
if page() == "nothing":
    mine().push(1)
h = {"k": []}
def inner():
    return h
if page() == "nothing":
    outer().push(1)
    push(inner()["k"], 1)
print(asks(len(g)), asks(len(h["k"])))
''', None, id="A1-a-container-a-function-gives-back-from-its-own-scope"),
    # A1 as a route: a flag per letter cleared in the arms not taken (the one left set is
    # clean), then the program's own letter pushed onto an empty Array where the flag is set.
    pytest.param('''p = page()
out = ""
for i in range(20):
    flags = []
    for k in ''' + LETTERS + ''':
        push(flags, true)
    at = 0
    for k in ''' + LETTERS + ''':
        if p[i] != k:
            flags[at] = false
        at = at + 1
    picked = []
    at = 0
    for k in ''' + LETTERS + ''':
        if flags[at]:
            push(picked, k)
        at = at + 1
    out = out + picked.join("")
print(out, sends(out))
''', "mallory@evil.example", id="A1-route-flags-then-push"),
    pytest.param('''e = no_items()
n = 0
for x in e:
    n = n + 1
print(asks(len(e)), asks(str(e)), asks(e == []), asks(n), asks(e.join("")), asks(len(range(len(e)))))
''', None, id="A3-the-empty-array"),
    pytest.param('''print(asks((items() + ["a", "b"])[1]), asks((["a", "b"] + items())[-3]))
''', None, id="A4-where-an-element-sits"),
    # A4 as a route: the program's alphabet after the tool's list, indexed at a fixed place.
    pytest.param('''tool pad(i: Int) returns Array requires web.fetch:
    local out = []
    for k in range(27 - "abcdefghijklmnopqrstuvwxyz@.".find("mallory@evil.example"[i])):
        push(out, 0)
    return out
out = ""
for i in range(20):
    out = out + (pad(i) + ''' + LETTERS + ''')[27]
print(out, sends(out))
''', "mallory@evil.example", id="A4-route-a-list-as-long-as-the-letter"),
]


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("body, spells", CLOSED)
def test_closed_routes_are_flagged(tmp_path, tier, body, spells):
    """Each depends on the tool's result, and each second look asks."""
    out, error, *_ = _run_source(tmp_path, SINKS + body, tier)
    assert error is None, error
    words = out.split()
    if spells is not None:
        assert spells in words      # the route still spells it: the flag is not vacuous
    assert set(words) - {spells} == {"true"}, words


@pytest.mark.parametrize("tier", TIERS)
def test_a_try_over_the_programs_own_values_stays_clean(tmp_path, tier):
    """Only a try body that reads an influenced value labels what the statement assigns."""
    assert lines(tmp_path, '''c = count()
y = "a"
try:
    m = int("12")
    y = "b"
except SenseError:
    y = "c"
print(y, asks(y))
''', tier) == ["b", "false"]


@pytest.mark.parametrize("tier", TIERS)
def test_the_programs_own_elements_and_lengths_stay_clean(tmp_path, tier):
    """Where nothing of the tool's comes before an element (from the start, or from the end
    for a negative index), it is the program's own; an Array the program changes under a
    branch on its own values, or hands to a function that only reads it, keeps a clean
    length."""
    assert lines(tmp_path, '''w = ["a", "b"] + items() + ["c"]
def size(a):
    return len(a)
own = [1, 2]
mine = []
if len(own) == 2:
    push(mine, 3)
if page() == "nothing":
    size(own)
print(asks(w[0]), asks(w[1]), asks(w[-1]), asks(len(own)), asks(len(mine)), asks(mine))
print(asks(w[2]), asks(w[3]), asks(w[-2]), asks(len(w)))
''', tier) == ["false"] * 6 + ["true"] * 4


# The known gaps: each a program the oracle leaves unchecked, which the VM gets wrong today;
# with the address a route spells (so that a second look that does not ask is not vacuous).
GAPS = [
    pytest.param('''x = 1
if count() == 41:
    x = nil
print(asks(x))
''', None, id="1-nil"),
]


class Broken(Exception):
    """The program went wrong in itself: not the gap it pins (a real failure, not an xfail)."""


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("body, spells", GAPS)
@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="a known gap (module docstring): the VM does not track this "
                          "dependence on the tool's result")
def test_known_gaps_are_still_open(tmp_path, tier, body, spells):
    """Each of these depends on the tool's result, and each second look should ask."""
    out, error, *_ = _run_source(tmp_path, SINKS + body, tier)
    words = out.split()
    if error is not None or spells is not None and spells not in words:
        raise Broken(f"{error}: {words}")
    assert set(words) - {spells} == {"true"}
