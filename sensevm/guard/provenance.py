"""Provenance: where a value came from, carried on labelled values so the second look can ask.

An *origin* is a small tuple: ``("user",)`` for the user's own words, ``("literal",)`` for the
program's constants, ``("trusted", tool)`` and ``("untrusted", tool)`` for tool results,
``("model", name)`` for model output. A value is *influenced* when one of its origins is
untrusted (a model's output carries its context's origins, so it is influenced when its
prompt was).

Values keep their plain Python types (values.py) and only values that came from outside the
program are labelled, as subclasses of those types: ``LStr`` (labels per span of text, so
concatenation keeps exact provenance), ``LInt``, ``LFloat`` and ``LBool`` (a wrapper: Python's
bool cannot be subclassed). A plain value is clean. The VM's fast paths test exact types, so a
labelled value always takes the slow path, and the slow paths in values.py hand it here just
before they would have raised a type error: programs that never meet outside data pay nothing.
Arrays and Maps are never labelled themselves; their elements (a Map's keys and values) are,
and what their length and an element's place depend on is kept beside them (``SHAPES``).

Operations take the union of their inputs' origins; branching on a labelled condition labels
what the branch stores (the VM's ``pc`` labels, see vm.py ``_run_tainted``).
"""

from __future__ import annotations

EMPTY = frozenset()
USER = ("user",)

# Whether this process has made a labelled value yet. Until it has, no value anywhere holds a
# label, and the operations that would have to walk a whole Array to find one (its length,
# its inequality with another) need not.
live = False
LITERAL = ("literal",)


def trusted(tool: str) -> tuple:
    return ("trusted", tool)


def untrusted(tool: str) -> tuple:
    return ("untrusted", tool)


_SINGLE: dict = {}


def only(origin: tuple) -> frozenset:
    """The one-origin set, shared: a union of a set with itself costs nothing (``a is b``)."""
    s = _SINGLE.get(origin)
    if s is None:
        s = _SINGLE[origin] = frozenset((origin,))
    return s


def model(name: str) -> tuple:
    return ("model", name)


def union(a: frozenset, b: frozenset) -> frozenset:
    """``a | b``, without making a new set when one side already holds the other (the common
    case: a value summed over many calls of one tool)."""
    if a is b or not b:
        return a
    if not a:
        return b
    if b <= a:
        return a
    if a <= b:
        return b
    return a | b


def is_influenced(origins) -> bool:
    for o in origins:
        if o[0] == "untrusted":
            return True
    return False


def describe(origin: tuple) -> str:
    """An origin in words, for a reason shown to a person."""
    kind = origin[0]
    if kind == "user":
        return "you"
    if kind == "literal":
        return "the program's own text"
    source = _SOURCES.get(origin)
    if source is not None:
        return source
    if kind == "trusted":
        return f"the trusted tool {origin[1]}"
    if kind == "untrusted":
        return f"the tool {origin[1]}"
    return f"model {origin[1]}"


# The standard library's labels for what it reads from outside (docs/stdlib.md), in words.
_SOURCES = {("untrusted", "python"): "Python code", ("untrusted", "file"): "a file",
            ("untrusted", "web"): "the web", ("untrusted", "shell"): "a command's output",
            ("trusted", "env"): "the environment"}


def origin_text(origin: tuple) -> str:
    """An origin as a short token for the audit log: user, literal, trusted:T, untrusted:T."""
    if len(origin) == 1:
        return origin[0]
    return f"{origin[0]}:{origin[1]}"


# ----------------------------------------------------------------------------- labelled values

class LStr(str):
    """A String with origins per span: ``spans`` is a tuple of (start, end, origins) covering
    the text in order, adjacent spans of equal origins merged; a span with no origins is clean
    (the program's own text). At least one span has origins (else the String is plain).

    A String built by ``+`` shares one growing list of spans with the String it extends
    (``_buf``, of which it sees the first ``_n``), so ``s = s + page + "-"`` in a loop adds
    its spans in amortised O(1) instead of copying every span each time; ``spans`` is made
    from the list when first read, and kept."""

    type_name = "String"
    # None unless grown by ``+`` (_grown): one attribute fewer to set on each String made
    # whole (a str subclass keeps its attributes in a dict of its own).
    _buf = None

    def __new__(cls, text: str, spans: tuple):
        if not live:
            _go_live()
        s = str.__new__(cls, text)
        s._spans = spans if type(spans) is tuple else tuple(spans)
        return s

    @property
    def spans(self) -> tuple:
        spans = self._spans
        if spans is None:
            spans = self._spans = _merged(self._buf, self._n)
        return spans

    def __reduce__(self):
        return (LStr, (str(self), self.spans))


def _grown(text: str, buf: list, n: int) -> LStr:
    s = str.__new__(LStr, text)
    s._spans = None
    s._buf = buf
    s._n = n
    return s


def _merged(buf: list, n: int) -> tuple:
    out = []
    for i in range(n):
        span = buf[i]
        if span[0] == span[1]:
            continue
        if out and out[-1][2] == span[2] and out[-1][1] == span[0]:
            out[-1] = (out[-1][0], span[1], span[2])
        else:
            out.append(span)
    return tuple(out)


class LInt(int):
    """An Int with origins. Python allows an int subclass no slots, and an instance dict per
    value was a third of the cost of labelling a tool's result; so each origin set has its own
    subclass of LInt (int_class) holding the set as a class attribute, and making a labelled
    Int is int.__new__ alone. Test with ``type(v) in INT_TYPES``, never ``is LInt``."""

    __slots__ = ()
    type_name = "Int"
    origins = EMPTY

    def __new__(cls, value: int, origins: frozenset):
        return int.__new__(int_class(origins), value)

    def __reduce__(self):
        return (LInt, (int(self), self.origins))


class LFloat(float):
    __slots__ = ("origins",)
    type_name = "Float"

    def __new__(cls, value: float, origins: frozenset):
        if not live:
            _go_live()
        x = float.__new__(cls, value)
        x.origins = origins
        return x

    def __reduce__(self):
        return (LFloat, (float(self), self.origins))


class LBool:
    """A Bool with origins (Python's bool cannot be subclassed)."""

    __slots__ = ("value", "origins")
    type_name = "Bool"

    def __init__(self, value: bool, origins: frozenset):
        if not live:
            _go_live()
        self.value = value
        self.origins = origins

    def __bool__(self):
        return self.value

    def __eq__(self, other):
        return self.value == (other.value if type(other) is LBool else other)

    def __hash__(self):
        return hash(self.value)

    def __reduce__(self):
        return (LBool, (self.value, self.origins))


# The labelled types: empty until the process makes its first labelled value (_go_live; none
# is made before: each is made by its class's constructor or through int_class, which go live
# first), then LStr, LInt, LFloat, LBool and one class per origin set an Int is labelled with.
# Empty, a test of a plain value's type stops at the set's first slot in every run; full, a set
# of types hashes their addresses, and str, int, bool and list landed on occupied slots in
# every run here, so each test (tier 2 makes one per loop item) probed past them.
LABELLED: set = set()
_KINDS = (LStr, LInt, LFloat, LBool)
INT_TYPES = {LInt}
_INT_CLASSES: dict = {}


def _go_live() -> None:
    global live
    live = True
    LABELLED.update(_KINDS)


def go_live() -> None:
    """Go live before a value exists that labels what it gives without being labelled itself
    (a Python object under the second look: interop.PyObject). Tier 2's quiet loops rely on
    it: while the process is not live, nothing their operations read can make a labelled
    value (tier2.QUIET_OPS)."""
    if not live:
        _go_live()


def int_class(origins: frozenset) -> type:
    """The LInt subclass whose values carry ``origins``."""
    cls = _INT_CLASSES.get(origins)
    if cls is None:
        if not live:
            _go_live()          # (every labelled Int is made through its class, made here)
        cls = type("LInt", (LInt,), {"__slots__": (), "origins": origins})
        _INT_CLASSES[origins] = cls
        INT_TYPES.add(cls)
        LABELLED.add(cls)
    return cls


def plain(v):
    """The unlabelled value (the same value for anything that is not labelled)."""
    t = type(v)
    if t is LStr:
        return str.__str__(v)
    if t in INT_TYPES:
        return int(v)
    if t is LFloat:
        return float(v)
    if t is LBool:
        return v.value
    return v


def origins_of(v) -> frozenset:
    """The origins of a value itself (an array's elements are not looked at)."""
    t = type(v)
    if t is LStr:
        spans = v.spans
        if len(spans) == 1:
            return spans[0][2]
        out = EMPTY
        for span in spans:
            out = union(out, span[2])
        return out
    if t in LABELLED:
        return v.origins
    return EMPTY


_PLAIN_TYPES = frozenset({str, int, float, bool, type(None)})


def deep_origins(v, _seen=None) -> frozenset:
    """The origins of a value and of everything its text can show: an Array's items, a Map's
    keys and values, and what a value of the VM's shows of its own (``sense_origins()``: an
    agent's pause reason, an answer's value, a Python object's untrusted text ...)."""
    t = type(v)
    if t is not list and t is not dict:
        if t in _PLAIN_TYPES:
            return EMPTY
        if t in LABELLED:
            return origins_of(v)
        own = getattr(v, "sense_origins", None)
        return own() if own is not None else EMPTY
    # A walk with a stack of its own: Arrays nest as deep as a program likes (thousands of
    # levels), far past Python's recursion limit; each Array or Map is visited once (cycles too).
    seen = _seen if _seen is not None else set()
    out = EMPTY
    todo = [v]
    while todo:
        items = todo.pop()
        if id(items) in seen:
            continue
        seen.add(id(items))
        if SHAPES:
            s = SHAPES.get(id(items))
            if s is not None:
                out = union(out, s.length)
        if type(items) is dict:
            for k in items:
                if type(k) not in _PLAIN_TYPES:
                    out = union(out, origins_of(k))
            items = items.values()
        elif _PLAIN_TYPES.issuperset(map(type, items)):
            continue        # (an Array of plain values, audit_log()'s lines: found in C)
        for x in items:
            tx = type(x)
            if tx in _PLAIN_TYPES:
                continue
            if tx is list or tx is dict:
                todo.append(x)
            elif tx in LABELLED:
                out = union(out, origins_of(x))
            else:
                own = getattr(x, "sense_origins", None)
                if own is not None:
                    out = union(out, own())
    return out


# ----------------------------------------------------------------------------- container shapes
# An Array or Map is never labelled itself (it is a plain list or dict: the VM's fast paths
# test exact types), yet how long it is can be the data's choice: a tool's empty list, the
# Array an arm not taken left alone, range() of a tool's count. Those lengths, and where the
# elements of an Array sit (after a tool's elements, an element's index is the tool's choice),
# are kept beside the container, in SHAPES, by id. An entry holds its container, so the id
# stays its own while the entry lives; entries whose container nothing else holds are dropped
# when the table has doubled in entries or in what they hold (so a program that labels Arrays
# in a loop keeps the table near the live ones). Only a labelled value makes an entry: `live`
# is set first.

class Shape:
    """What one container's length depends on (``length``) and, for an Array, where its
    elements sit: ``starts`` and ``ends`` are breakpoints ((index, origins), ...), by index
    increasing and origins growing, meaning that the position of every element at ``index``
    or after it, counted from the start (``starts``) or from the end (``ends``, 0 the last),
    depends on ``origins``. Every breakpoint's origins are within ``length``."""

    __slots__ = ("box", "length", "starts", "ends")

    def __init__(self, box, length: frozenset):
        self.box = box
        self.length = length
        self.starts = ()
        self.ends = ()


SHAPES: dict = {}
_prune_at = 1024
# What the entries hold, roughly (each container's length when its entry was made): a few
# large dead Arrays are dropped as soon as many small ones would be.
_weight = 0
_prune_weight = 1 << 16


def shape_of(c):
    """The Shape of container ``c``, or None (the program's own length)."""
    return SHAPES.get(id(c)) if SHAPES else None


def length_origins(c) -> frozenset:
    """What container ``c``'s length depends on (not its items: deep_origins adds those)."""
    if not SHAPES:
        return EMPTY
    s = SHAPES.get(id(c))
    return EMPTY if s is None else s.length


def _shape_for(c) -> Shape:
    global _prune_at, _weight, _prune_weight
    s = SHAPES.get(id(c))
    if s is None:
        if len(SHAPES) >= _prune_at or _weight >= _prune_weight:
            _prune()
            _prune_at = max(1024, 2 * len(SHAPES))
            _weight = sum(1 + len(e.box) for e in SHAPES.values())
            _prune_weight = max(1 << 16, 2 * _weight)
        if not live:
            _go_live()
        s = SHAPES[id(c)] = Shape(c, EMPTY)
        _weight += 1 + len(c)
    return s


def _prune() -> None:
    """Drop the entries whose container only the table holds (its reference, and the one
    getrefcount's argument makes); again while that frees more (an Array the table held
    inside another it dropped). A cycle of dead containers stays until the run ends."""
    from sys import getrefcount
    for _ in range(8):
        dropped = False
        for key, s in list(SHAPES.items()):
            if getrefcount(s.box) <= 2:
                del SHAPES[key]
                dropped = True
        if not dropped:
            break


def add_length(c, origins: frozenset) -> None:
    """Container ``c``'s length (so every element's place in it) depends on ``origins`` too."""
    if origins:
        s = _shape_for(c)
        s.length = union(s.length, origins)


def derive(result, *sources, also: frozenset = EMPTY):
    """``result``, a container made from ``sources`` (containers): its length depends on
    theirs, and on ``also``; where its elements sit, on all of that (no finer)."""
    origins = also
    if SHAPES:
        for src in sources:
            s = SHAPES.get(id(src))
            if s is not None:
                origins = union(origins, s.length)
    if origins:
        s = _shape_for(result)
        s.length = union(s.length, origins)
        s.starts = s.ends = ((0, s.length),)
    return result


def restore_shape(c, length: frozenset, starts: tuple, ends: tuple) -> None:
    """Give container ``c`` this shape (one a saved state kept, or a copy's)."""
    if length:
        s = _shape_for(c)
        s.length, s.starts, s.ends = length, starts, ends


def copy_shape(result: list, source: list) -> list:
    """``result``, an element-for-element copy of Array ``source``, with its shape."""
    s = SHAPES.get(id(source)) if SHAPES else None
    if s is not None:
        restore_shape(result, s.length, s.starts, s.ends)
    return result


def reversed_shape(result: list, source: list) -> list:
    """``result``, Array ``source`` reversed, with its shape (starts and ends swap)."""
    s = SHAPES.get(id(source)) if SHAPES else None
    if s is not None:
        restore_shape(result, s.length, s.ends, s.starts)
    return result


def _shifted(points: tuple, by: int, origins: frozenset) -> list:
    return [(k + by, union(o, origins)) for k, o in points]


def _points(points: list) -> tuple:
    """Breakpoints in order, the ones that add nothing dropped."""
    out = []
    for k, o in points:
        if not o or out and o <= out[-1][1]:
            continue
        if out and out[-1][0] == k:
            out[-1] = (k, union(out[-1][1], o))
        else:
            out.append((k, o))
    return tuple(out)


def joined_shape(result: list, a: list, b: list) -> list:
    """The shape of ``result = a + b``: its length is both lengths'; the elements of ``b``
    sit after however many ``a`` has, those of ``a`` before however many ``b`` has."""
    sa, sb = SHAPES.get(id(a)), SHAPES.get(id(b))
    la = sa.length if sa is not None else EMPTY
    lb = sb.length if sb is not None else EMPTY
    if not la and not lb:
        return result
    n, m = len(a), len(b)
    starts = list(sa.starts if sa is not None else ())
    if m:
        starts.append((n, la))
        starts.extend(_shifted(sb.starts if sb is not None else (), n, la))
    ends = list(sb.ends if sb is not None else ())
    if n:
        ends.append((m, lb))
        ends.extend(_shifted(sa.ends if sa is not None else (), m, lb))
    s = _shape_for(result)
    s.length = union(la, lb)
    s.starts, s.ends = _points(starts), _points(ends)
    return result


def pushed(items: list) -> None:
    """``items`` has just grown by one element at its end (``push``): that element sits
    after however many there were; every other one is one further from the end."""
    s = SHAPES.get(id(items))
    if s is None or not s.length:
        return
    s.starts = _points(list(s.starts) + [(len(items) - 1, s.length)])
    s.ends = tuple((k + 1, o) for k, o in s.ends)


def reshaped(items: list, also: frozenset = EMPTY) -> None:
    """``items`` was changed in place some other way (insert, remove, pop, sort): every
    element may sit anywhere its length (and ``also``: what decided an order) allows."""
    s = SHAPES.get(id(items)) if SHAPES else None
    origins = union(s.length if s is not None else EMPTY, also)
    if origins:
        s = _shape_for(items)
        s.length = origins
        s.starts = s.ends = ((0, origins),)


def position_origins(items: list, i: int) -> frozenset:
    """What decides which element is at index ``i`` (already checked; negative from the end)
    of Array ``items``, beyond the element's own labels."""
    s = SHAPES.get(id(items))
    if s is None:
        return EMPTY
    points, k = (s.starts, i) if i >= 0 else (s.ends, -i - 1)
    found = EMPTY
    for at, o in points:
        if at > k:
            break
        found = o
    return found


def spans_of(s: str) -> tuple:
    if type(s) is LStr:
        return s.spans
    return ((0, len(s), EMPTY),) if s else ()


def make_str(text: str, spans) -> str:
    """``text`` with ``spans`` (adjacent spans with equal origins merged); plain when clean."""
    merged = []
    for start, end, origins in spans:
        if end <= start and text:
            continue
        if merged and merged[-1][2] == origins:
            merged[-1] = (merged[-1][0], end, origins)
        else:
            merged.append((start, end, origins))
    if not any(span[2] for span in merged):
        return text
    return LStr(text, tuple(merged))


def label(v, origins: frozenset):
    """``v`` with ``origins`` added (to every span of a string; to the elements of an array,
    which are changed in place: labels are invisible to the program)."""
    if not origins:
        return v
    t = type(v)
    if t is str:
        return LStr(v, ((0, len(v), origins),))
    if t is LStr:
        return LStr(str.__str__(v), tuple((a, b, union(o, origins)) for a, b, o in v.spans))
    if t is int:
        return int.__new__(int_class(origins), v)
    if t is bool:
        return LBool(v, origins)
    if t is float:
        return LFloat(v, origins)
    if t in INT_TYPES:
        return int.__new__(int_class(union(v.origins, origins)), int(v))
    if t is LFloat:
        return LFloat(float(v), union(v.origins, origins))
    if t is LBool:
        return LBool(v.value, union(v.origins, origins))
    if t is list or t is dict:
        _label_items(v, origins, set())
    return v


def _label_items(items, origins, seen) -> None:
    """Label an Array's items or a Map's keys and values in place, nested containers too
    (without recursion, so a deep nest labels like a flat one; each container once)."""
    todo = [items]
    while todo:
        items = todo.pop()
        if id(items) in seen:
            continue
        seen.add(id(items))
        # Which container a variable holds under a branch, or how long a tool made it, is
        # as much the label's as its items are (an empty one has no item to carry it).
        add_length(items, origins)
        if type(items) is list:
            for i, x in enumerate(items):
                if type(x) is list or type(x) is dict:
                    todo.append(x)
                else:
                    items[i] = label(x, origins)
            continue
        # A Map: rebuilt in its own order, each key labelled (a key's label is kept only by a
        # new key object, so the entries are put back in order).
        entries = list(items.items())
        items.clear()
        for k, x in entries:
            if type(x) is list or type(x) is dict:
                todo.append(x)
            else:
                x = label(x, origins)
            items[label(k, origins)] = x


def like(result, *sources):
    """``result`` labelled with the union of the (deep) origins of ``sources``."""
    origins = EMPTY
    for s in sources:
        origins = union(origins, deep_origins(s))
    return label(result, origins)


# ----------------------------------------------------------------------------- operations
# values.py calls these only when an operand is labelled; each computes on the plain values
# with the plain operation (so errors and results are exactly the unlabelled ones) and labels
# the result.

def concat(a: str, b: str, text: str | None = None) -> str:
    """``a + b`` (``text``, when the caller has made it) with the spans of both.

    When ``a`` is the newest String on its span list, ``b``'s spans are added to that list in
    place (one atomic ``extend``: if another thread extended it first, this one copies), so a
    String grown by ``+`` in a loop costs O(1) per step in spans."""
    if type(a) is not LStr and type(b) is not LStr:
        return str.__str__(a) + str.__str__(b) if text is None else text
    n = len(a)
    if text is None:
        text = str.__str__(a) + str.__str__(b)
    if not n or not b:
        # An empty String has no text to keep its label on (make_str's rule: every String
        # grown below has spans of positive length, a labelled one among them), so an empty
        # labelled one labels the whole of what it is joined to: `page + "abc"` from an empty
        # page is not the program's own "abc" (the page chose to be empty).
        if not text:
            return make_str(text, list(spans_of(a)) + list(spans_of(b)))
        return label(b, origins_of(a)) if not n else label(a, origins_of(b))
    if type(b) is LStr:
        more = [(s + n, e + n, o) for s, e, o in b.spans]
    else:
        more = [(n, n + len(b), EMPTY)] if b else []
    if type(a) is LStr:
        buf = a._buf
        if buf is not None and len(buf) == a._n:
            buf.extend(more)
            if buf[a._n] is more[0]:              # this call owns what it added
                return _grown(text, buf, a._n + len(more))
        buf = list(a.spans)
    else:
        buf = [(0, n, EMPTY)] if n else []
    start = len(buf)
    buf.extend(more)
    return _grown(text, buf, start + len(more))


_new_int = int.__new__


def add(a, b, plain_add):
    ta, tb = type(a), type(b)
    if ta in INT_TYPES:
        # The common case (a total of tool results), without label()'s dispatch: the class
        # of an operand already carries the origins.
        if tb is int or tb is ta:
            return _new_int(ta, int.__add__(a, b))
        if tb in INT_TYPES:
            return _new_int(int_class(union(a.origins, b.origins)), int.__add__(a, b))
    elif ta is int and tb in INT_TYPES:
        return _new_int(tb, int.__add__(a, b))
    pa, pb = plain(a), plain(b)
    result = plain_add(pa, pb)
    if type(result) is str:
        return concat(a, b, result)
    return label(result, union(origins_of(a), origins_of(b)))


def binary(fn, a, b, *rest):
    """A numeric or comparison operation on plain operands, labelled with both origins."""
    return label(fn(*rest, plain(a), plain(b)), union(origins_of(a), origins_of(b)))


def unary(fn, a):
    return label(fn(plain(a)), origins_of(a))


def negation(v):
    """``not v`` for a labelled value: a Bool with its origins."""
    return label(not plain(v), origins_of(v))


CONTAINERS = frozenset({list, dict})


def emptiness_origins(v) -> frozenset:
    """What the truth of an Array or Map (is it empty?) reads: its length's origins and its
    items', as len() does (builtins.b_len), once any value is labelled; a branch or ``not``
    on it carries them (on an empty one too: a tool's [] is empty by the tool's choice)."""
    if not live:
        return EMPTY
    if not v:
        return length_origins(v)
    return deep_origins(v)


def container_negation(v):
    """``not v`` for an Array or Map: a Bool labelled by what its emptiness reads."""
    return label(not v, emptiness_origins(v))


def decides_branch(v) -> bool:
    """Whether a branch on an Array or Map must go to tier 1 to open a pc label (tier 2
    asks)."""
    return live and is_influenced(emptiness_origins(v))


def char_at(s: str, i: int):
    """The one-character String at index ``i`` (already checked), with the origins of its
    span and of every span before it (after it, for a negative index): how long those are
    decides which character is there, so ``(page + "abc")[k]`` is the page's choice of the
    program's letters, not the program's own."""
    ch = str.__str__(s)[i]
    at = i + len(s) if i < 0 else i
    origins = EMPTY
    for start, end, o in spans_of(s):
        if i >= 0 and start > at:
            break
        if i >= 0 or end > at:
            origins = union(origins, o)
    return LStr(ch, ((0, 1, origins),)) if origins else ch


def slice_str(s: str, start, stop) -> str:
    """``s[start:stop]`` (Python's bounds: None, negative, clamped) keeping the origins of
    exactly the characters it keeps: each span cut to the slice and moved to its start."""
    text = str.__str__(s)
    i, j, _ = slice(start, stop).indices(len(text))
    if j <= i:
        return ""               # no character kept: nothing to carry a label
    kept = []
    for a, b, origins in spans_of(s):
        lo, hi = max(a, i), min(b, j)
        if lo < hi:
            kept.append((lo - i, hi - i, origins))
    return make_str(text[i:j], kept)


def joined(parts: list, text: str) -> str:
    """``text``, which is ``parts`` (Strings) joined, with the spans of every part (an
    f-string's result: the labels of each value it interpolates, where that value stands)."""
    spans, at = [], 0
    for part in parts:
        for a, b, origins in spans_of(part):
            spans.append((a + at, b + at, origins))
        at += len(part)
    return make_str(text, spans)


class Chars:
    """The characters of a labelled String, read by index (``for c in s``, values.StringIterator),
    each with its span's origins, without copying the String: reading them in order walks its
    spans once."""

    __slots__ = ("text", "spans", "k")

    def __init__(self, s: str):
        self.text = str.__str__(s)
        self.spans = spans_of(s)
        self.k = 0              # the span of the character read last

    def __len__(self) -> int:
        return len(self.text)

    def __getitem__(self, i: int):
        spans = self.spans
        k = self.k
        start, end, origins = spans[k]
        if not start <= i < end:
            k = k if i >= end else 0
            while not spans[k][0] <= i < spans[k][1]:
                k += 1
            self.k = k
            origins = spans[k][2]
        ch = self.text[i]
        return LStr(ch, ((0, 1, origins),)) if origins else ch


def clean_spans(v) -> list:
    """The pieces of a value's text whose origins are all trusted to vouch (user, literal,
    uninfluenced trusted), as (origin, text) pairs."""
    t = type(v)
    if t is LStr:               # (the common case first: a scalar, no walk)
        out = []
        _add_clean_spans(v, out)
        return out
    if t is not list and t is not dict:
        return [(LITERAL, v)] if t is str else []
    out = []
    stack = [v]
    seen = set()
    while stack:
        x = stack.pop()
        t = type(x)
        if t is list:
            if id(x) not in seen:
                seen.add(id(x))
                stack.extend(x)
        elif t is dict:
            if id(x) not in seen:
                seen.add(id(x))
                stack.extend(x)
                stack.extend(x.values())
        elif t is str:
            out.append((LITERAL, x))
        elif t is LStr:
            _add_clean_spans(x, out)
    return out


def _add_clean_spans(s: LStr, out: list) -> None:
    """Append the clean spans of a labelled String to ``out`` (its text made only if any)."""
    text = None
    for start, end, origins in s.spans:
        if not is_influenced(origins):
            if text is None:
                text = str.__str__(s)
            out.append((_best(origins), text[start:end]))


def _best(origins) -> tuple:
    """The origin that vouches for a clean span, by precedence: user, literal, trusted."""
    if not origins:
        return LITERAL
    if len(origins) == 1:
        for origin in origins:
            return origin
    ranked = sorted(origins, key=lambda o: ({"user": 0, "literal": 1, "trusted": 2}
                                            .get(o[0], 3), o))
    return ranked[0]


