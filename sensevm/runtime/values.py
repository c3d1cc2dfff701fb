"""Run-time values: scopes, functions, modules, iterators; printing, equality, arithmetic and type checks.

Sense values map onto Python values where the semantics agree, so the hot paths stay cheap:
Int is ``int``, Float ``float``, String ``str``, Bool ``bool``, nil ``None``, Array ``list`` and
Map ``dict`` (both shared by reference, as in the language; a dict keeps insertion order and an
update keeps a key's place, as EXTENSIONS.md E1 wants). Python's truthiness already matches
spec 4.2 for all of these (an empty Map is falsy). ``bool`` is a subclass of ``int`` in Python, so every type test here uses
``type(x) is ...`` rather than ``isinstance``.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing would slow every start
    from typing import Any, Callable, Optional

from sensevm.base.errors import SenseNameError, SenseRuntimeError, SenseTypeError
from sensevm.base.name_hints import undefined_variable_message
from sensevm.guard import provenance as _P
from sensevm.guard.provenance import LABELLED as _LT, LStr as _LStr
from sensevm.guard.secondlook import tool_member as _tool_member
from sensevm.runtime import services as _services
from sensevm.runtime.limits import (DEFAULT_MAX_ARRAY, DEFAULT_MAX_STRING, FREE_DIGITS, array_limit,
                                    map_limit, string_limit)

# The limits of the running VM (set by VM._loop; see sensevm/runtime/limits.py): kept here so that
# `+`, to_str(), the builtins and the host's readers check them without being handed the VM.
MAX_STRING = DEFAULT_MAX_STRING
MAX_ARRAY = DEFAULT_MAX_ARRAY
BUDGET = None           # the run's steps and time (limits.Budget), None when neither is limited


def int_bits(max_string: int) -> int:
    """An Int of at most this many bits has few enough digits to make its text at once
    (FREE_DIGITS), and that text fits in ``max_string``: str() and printing need not ask (see
    int_text). (Its bit_length() is the cheapest test of an Int's size there is.)"""
    return min(max_string - 1, FREE_DIGITS) * 3321928 // 1000000     # log2(10), rounded down


INT_BITS = int_bits(MAX_STRING)


def set_limits(max_string: int, max_array: int, budget=None) -> None:
    global MAX_STRING, MAX_ARRAY, BUDGET, INT_BITS
    MAX_STRING, MAX_ARRAY, BUDGET = max_string, max_array, budget
    INT_BITS = int_bits(max_string)


# The checks of every String and Array a builtin makes or the host brings in (a model's answer,
# a memory's contents, Python's results, a line of input): `+`, push() and range() make theirs
# before the value exists, and tier 2 inlines the same tests.

def sized_string(text: str) -> str:
    """``text``, if --max-string allows a String that long."""
    if len(text) > MAX_STRING:
        raise string_limit(len(text), MAX_STRING, located=False)
    return text


def sized_array(items: list) -> list:
    """``items``, if --max-array allows an Array that long."""
    if len(items) > MAX_ARRAY:
        raise array_limit(len(items), MAX_ARRAY, located=False)
    return items


def sized_map(items: dict) -> dict:
    """``items``, if --max-array allows a Map of that many entries."""
    if len(items) > MAX_ARRAY:
        raise map_limit(len(items), MAX_ARRAY, located=False)
    return items


def sized(value):
    """``value``, from outside the program (decoded JSON, a memory's record), if every String,
    Array and Map in it, at any depth, is within the size limits."""
    t = type(value)
    if t is str or t is _P.LStr:
        return sized_string(value)
    if t is list or t is dict:
        seen = set()
        todo = [value]
        while todo:
            x = todo.pop()
            tx = type(x)
            if tx is list:
                if id(x) not in seen:
                    seen.add(id(x))
                    todo.extend(sized_array(x))
            elif tx is dict:
                if id(x) not in seen:
                    seen.add(id(x))
                    todo.extend(sized_map(x))
                    todo.extend(x.values())
            elif tx is str or tx is _P.LStr:
                sized_string(x)
    return value


class Scope:
    """One lexical scope: its bindings, its parent, and (for the actions issue) its policy table."""

    __slots__ = ("vars", "parent", "policy", "tag")

    def __init__(self, parent: Optional["Scope"], tag: Optional[str] = None):
        self.vars: dict[str, Any] = {}
        self.parent = parent
        self.policy: Optional[dict[str, str]] = None
        self.tag = tag

    def find(self, name: str) -> Optional["Scope"]:
        """The nearest scope that binds ``name``, or None."""
        scope = self
        while scope is not None:
            if name in scope.vars:
                return scope
            scope = scope.parent
        return None


class Closure:
    """A ``def`` function: a code object closed over the scope it was declared in."""

    __slots__ = ("code", "scope", "name")

    def __init__(self, code, scope: Scope, name: str):
        self.code = code          # the vm's PreparedCode of its body
        self.scope = scope
        self.name = name


class Builtin:
    """A host function. ``arity`` is an exact argument count checked by the VM, or None."""

    __slots__ = ("name", "fn", "arity", "labels", "frames", "pure", "receiver")

    def __init__(self, name: str, fn: Callable, arity: Optional[int] = None, labels: bool = False,
                 frames: bool = False, pure: bool = False, receiver=None):
        self.name = name
        self.fn = fn
        self.arity = arity
        self.labels = labels
        # A builtin that moves frames (start, pause, resume ...) is called as
        # fn(vm, frame, args) and returns True when it switched the running frame.
        self.frames = frames
        # Pure: it sees only its arguments and the VM's output and audit log, never the running
        # frame or its callers (no policy check, no audit record, no lineage, no labels made),
        # so tier 2's direct forms may call it with no frame of their own on the chain.
        self.pure = pure
        # A method of a String, Array or Map (methods.py): the value it is bound to, whose
        # method ``name`` says it is (``String.upper``); None for every other builtin.
        self.receiver = receiver

    def sense_equal(self, other) -> bool:
        """The same builtin; or, as Python's bound methods compare, the same method of the same
        value (of equal Strings: a String has no identity a program could see)."""
        if self is other:
            return True
        mine, theirs = self.receiver, other.receiver
        if mine is None or theirs is None or self.name != other.name:
            return False
        return mine is theirs or (type(_P.plain(mine)) is str and _P.plain(mine) == _P.plain(theirs))


class ModuleValue:
    """An imported module: its top-level scope."""

    __slots__ = ("name", "path", "scope")

    def __init__(self, name: str, path: str, scope: Scope):
        self.name = name
        self.path = path
        self.scope = scope


class ArrayIterator:
    """Iterates the live array: pushing during a ``for`` extends the loop (spec 4.6).
    ``origins``: what the number of passes depends on (the Array's length, provenance.SHAPES),
    empty for the program's own."""

    __slots__ = ("items", "i", "origins")

    def __init__(self, items: list, origins=_P.EMPTY):
        self.items = items
        self.i = 0
        self.origins = origins


class StringIterator:
    """Iterates a long String's characters where they are, copying nothing: FOR_ITER reads
    ``items[i]`` as for an Array, ``items`` being the String itself or, for a labelled one,
    a view that gives each character its span's origins (provenance.Chars). ``text`` is the
    String, which is what a saved agent keeps."""

    __slots__ = ("items", "i", "text", "origins")

    def __init__(self, text: str):
        self.text = text
        if type(text) is str:
            self.items, self.origins = text, _P.EMPTY
        else:
            self.items, self.origins = _P.Chars(text), _P.origins_of(text)
        self.i = 0


# A String of at most this many characters is iterated over a list of them, which FOR_ITER
# reads faster than it indexes the String (13 ns a character less); a longer one in place, so
# that the copy is never more than a few megabytes (a list slot and, outside Latin-1, a String
# object per character), whatever the String.
COPIED_CHARS = 1 << 16


def unlabelled(values: list) -> list:
    """Arguments as a builtin takes them when it reads them as settings (a provider's name, a
    timeout, a skill's description): a labelled value is its type, without the labels (a
    String from a tool is a String, and ``receive(t)`` waits the seconds it says)."""
    return [_P.plain(v) for v in values]


def get_iter(obj):
    """GET_ITER, in both tiers: the iterator a ``for`` loop walks (over a Map: a snapshot of
    its keys, taken now, so the loop may change the map)."""
    t = type(obj)
    if t is list:
        return ArrayIterator(obj, _P.length_origins(obj)) if _P.SHAPES else ArrayIterator(obj)
    if t is dict:
        keys = _P.derive(list(obj), obj) if _P.SHAPES else list(obj)
        return ArrayIterator(keys, _P.length_origins(obj))
    if t is str:
        return ArrayIterator(list(obj)) if len(obj) <= COPIED_CHARS else StringIterator(obj)
    if t is _P.LStr:
        return StringIterator(obj)
    raise SenseRuntimeError(f"cannot iterate over value of type {type_name(obj)}")


# ----------------------------------------------------------------------------- types

def type_name(v: Any) -> str:
    t = type(v)
    if t is int:
        return "Int"
    if t is float:
        return "Float"
    if t is str:
        return "String"
    if t is bool:
        return "Bool"
    if v is None:
        return "Nil"
    if t is list:
        return "Array"
    if t is dict:
        return "Map"
    if t is Closure or t is Builtin:
        return "Function"
    if t is ModuleValue:
        return "Module"
    return getattr(v, "type_name", "Any")


def is_number(v: Any) -> bool:
    t = type(v)
    return t is int or t is float


# ----------------------------------------------------------------------------- printing

def format_float(v: float) -> str:
    if v != v or v in (float("inf"), float("-inf")):
        raise SenseRuntimeError(f"cannot format non-finite Float: {v!r}", located=False)
    if v == int(v) and abs(v) < 1e15:
        return f"{v:.1f}"
    return repr(v)


def host_repr(v, _seen=None) -> str:
    """Python's repr of the host value, which the reference shows in int()/float() errors
    (a container met again inside itself is ``[...]`` / ``{...}``, as Python shows it)."""
    t = type(v)
    if v is None:
        return "None"
    if t is bool:
        return "True" if v else "False"
    if t is list or t is dict:
        seen = _seen if _seen is not None else set()
        if id(v) in seen:
            return "[...]" if t is list else "{...}"
        seen.add(id(v))
        try:
            if t is list:
                return "[" + ", ".join(host_repr(x, seen) for x in v) + "]"
            return "{" + ", ".join(f"{host_repr(k, seen)}: {host_repr(x, seen)}"
                                   for k, x in v.items()) + "}"
        finally:
            seen.discard(id(v))
    if t in (int, float, str):
        return repr(v)
    if t in _LT:
        return host_repr(_P.plain(v))
    shown = getattr(v, "host_repr", None)      # a wrapped Python value: <python dict>
    if shown is not None:
        return shown()
    return to_str(v)


def to_str(v: Any, _seen: Optional[set] = None) -> str:
    """The printed form of a value (spec 4.1)."""
    t = type(v)
    if t is str:
        return v
    if t is int:
        if v.bit_length() <= INT_BITS:
            return str(v)
        return int_text(v)
    if t is bool:
        return "true" if v else "false"
    if v is None:
        return "nil"
    if t is float:
        return format_float(v)
    if t is list or t is dict:
        seen = _seen if _seen is not None else set()
        if id(v) in seen:
            # A container met again inside itself (EXTENSIONS.md E1: where the reference's
            # host stack overflowed): shown as Python shows it.
            return "[...]" if t is list else "{...}"
        seen.add(id(v))
        try:
            return _array_text(v, seen) if t is list else _map_text(v, seen)
        finally:
            seen.discard(id(v))
    if t is Closure:
        return f"<fn {v.name}>"
    if t is Builtin:
        return f"<builtin {v.name}>"
    if t is ModuleValue:
        return f"<module {v.name}>"
    if t in _LT:
        return to_str(_P.plain(v))
    return sized_string(str(v))


def _array_text(items: list, seen: set) -> str:
    """``[a, b, ...]``, refused when longer than MAX_STRING: its parts are kept only while
    they fit (so memory stays near the limit whatever the Array holds), and their lengths
    counted to the end, for the error to say how long it would have been. The run's clock
    (while it runs) is checked at every element: nothing else could stop a long walk."""
    parts = []
    size = 2 * len(items) if items else 2       # the brackets and the ", " between elements
    budget = BUDGET
    for x in items:
        part = to_str(x, seen)
        size += len(part)
        if size <= MAX_STRING:
            parts.append(part)
        elif parts:
            parts = []
        if budget is not None and budget.expired and budget.deadline is not None:
            raise budget.exceeded()
    if size > MAX_STRING:
        raise string_limit(size, MAX_STRING)
    return "[" + ", ".join(parts) + "]"


def _map_text(items: dict, seen: set) -> str:
    """``{k: v, ...}``, each key and value in its printed form (strings unquoted), within
    MAX_STRING as _array_text is."""
    parts = []
    size = 2 * len(items) if items else 2       # the braces and the ", " between entries
    budget = BUDGET
    for k, x in items.items():
        part = f"{to_str(k)}: {to_str(x, seen)}"
        size += len(part)
        if size <= MAX_STRING:
            parts.append(part)
        elif parts:
            parts = []
        if budget is not None and budget.expired and budget.deadline is not None:
            raise budget.exceeded()
    if size > MAX_STRING:
        raise string_limit(size, MAX_STRING)
    return "{" + ", ".join(parts) + "}"


def int_text(v: int) -> str:
    """The decimal text of an Int of more than INT_BITS bits: refused before it is made
    when it would be longer than MAX_STRING, or (conversions.check_conversion) take longer to
    make than the run has left."""
    # The fewest digits an Int of this many bits has (log10(2) rounded down, so never more).
    fewest = (v.bit_length() - 1) * 30102999566 // 100000000000 + 1
    if fewest > FREE_DIGITS:        # (a shorter one is made, then measured)
        if fewest + (v < 0) > MAX_STRING:
            raise string_limit(fewest + (v < 0), MAX_STRING, at_least=True)
        from sensevm.runtime.conversions import check_conversion
        check_conversion(fewest, "str() of an Int", BUDGET, to_text=True)
    return sized_string(str(v))


# ----------------------------------------------------------------------------- names (spec 5)
# LOAD_NAME and STORE_NAME in both tiers (the tier-1 loop inlines the same walk for speed).

def load_name(scope, name):
    """The nearest binding of ``name`` from ``scope`` outward."""
    while scope is not None:
        bindings = scope.vars
        if name in bindings:
            return bindings[name]
        scope = scope.parent
    raise SenseNameError(undefined_variable_message(name))


def store_outer(outer, name, value, innermost) -> None:
    """Update the nearest binding of ``name`` from ``outer`` outward, else bind it in
    ``innermost`` (tier 2 starts at ``outer`` when it knows no scope below can hold it)."""
    s = outer
    while s is not None:
        bindings = s.vars
        if name in bindings:
            bindings[name] = value
            return
        s = s.parent
    innermost.vars[name] = value


def store_name(scope, name, value) -> None:
    """Update the nearest existing binding, else bind in ``scope``."""
    store_outer(scope, name, value, scope)


# ----------------------------------------------------------------------------- indexing

def index_get(obj, index):
    """``obj[index]`` (INDEX, in both tiers)."""
    t = type(obj)
    if t is list or t is str:
        if type(index) is not int:
            if type(index) in _P.INT_TYPES:
                return _labelled_index(obj, index)
            raise SenseRuntimeError(f"index must be Int, got {type_name(index)}")
        if not -len(obj) <= index < len(obj):
            # (Out of bounds because of how long the data made it, when it did.)
            raise SenseRuntimeError(f"index {index} out of bounds").quoting(
                _P.length_origins(obj))
        if _P.SHAPES and t is list:
            # After a tool's elements, which element is at an index is the tool's choice.
            where = _P.position_origins(obj, index)
            if where:
                return _P.label(obj[index], where)
        return obj[index]
    if t is dict:
        return map_get(obj, index)
    if t in _LT or type(index) in _LT:
        return _labelled_index(obj, index)
    getter = getattr(obj, "sense_index", None)
    if getter is None:
        raise SenseRuntimeError(f"cannot index into type {type_name(obj)}")
    return getter(index)


def index_set(obj, index, value) -> None:
    """``obj[index] = value`` (STORE_INDEX, in both tiers)."""
    if type(obj) is list:
        if type(index) is not int:
            if type(index) in _P.INT_TYPES:
                # Where the value lands depends on the index: it carries the index's origins,
                # and so does every element it did not replace (which one is still there
                # says as much about the index as the new one does).
                try:
                    index_set(obj, int(index), _P.label(value, index.origins))
                except SenseRuntimeError as err:    # "array index 7 out of bounds"
                    raise err.quoting(index.origins)
                at = int(index) % len(obj)
                for j, x in enumerate(obj):
                    if j != at:
                        obj[j] = _P.label(x, index.origins)
                return
            raise SenseRuntimeError(f"array index must be Int, got {type_name(index)}")
        if not -len(obj) <= index < len(obj):
            raise SenseRuntimeError(f"array index {index} out of bounds").quoting(
                _P.length_origins(obj))
        if _P.SHAPES:
            # Which slot an index names, in an Array the data made long, is the data's: the
            # value lands there because of it, and every other element is still there because
            # of it (as through a labelled index).
            where = _P.position_origins(obj, index)
            if where:
                for j, x in enumerate(obj):
                    obj[j] = _P.label(x, where)
                value = _P.label(value, where)
        obj[index] = value
    elif type(obj) is dict:
        map_set(obj, index, value)
    else:
        setter = getattr(obj, "sense_store_index", None)
        if setter is None:
            raise SenseRuntimeError(f"cannot index-assign into type {type_name(obj)}")
        setter(index, value)


def _labelled_index(obj, index):
    """INDEX with a labelled operand: the element or character, with the index's origins."""
    pobj, pindex = _P.plain(obj), _P.plain(index)
    try:
        if type(pobj) is str and type(pindex) is int:
            item = _P.char_at(obj, pindex) if -len(pobj) <= pindex < len(pobj) else None
            if item is None:
                raise SenseRuntimeError(f"index {pindex} out of bounds")
        else:
            item = index_get(pobj, pindex)
    except SenseRuntimeError as err:                # the message shows the index
        raise err.quoting(_P.origins_of(index))
    return _P.label(item, _P.origins_of(index))


# ----------------------------------------------------------------------------- slices, `in`, f-strings
# (EXTENSIONS.md E3; SLICE, CONTAINS, FORMAT_VALUE and BUILD_STRING in both tiers)

def _slice_bound(bound):
    """A written bound as a plain Int and its origins (a labelled Int's), else the error."""
    t = type(bound)
    if t is int:
        return bound, _P.EMPTY
    if t in _P.INT_TYPES:
        return int(bound), bound.origins
    raise SenseRuntimeError(f"slice bounds must be Int, got {type_name(bound)}")


def slice_get(obj, lo, hi, written: int):
    """``obj[lo:hi]``, a new String or Array with Python's bounds (negative from the end,
    clamped, no step); ``written`` says which bounds the program wrote (1 lo, 2 hi), the others'
    slots are not read (a written ``nil`` is a non-Int bound). A labelled String keeps the
    labels of the characters kept; labelled bounds label the result (which elements it holds
    depends on them), as an index does."""
    t = type(obj)
    if written == 3 and type(lo) is int and type(hi) is int and (
            t is str or t is list and not _P.SHAPES):
        return obj[lo:hi]
    origins = _P.EMPTY
    if written & 1:
        lo, origins = _slice_bound(lo) if t is list or t is str or t is _LStr else (lo, origins)
    else:
        lo = None
    if written & 2:
        if t is list or t is str or t is _LStr:
            hi, more = _slice_bound(hi)
            origins = _P.union(origins, more)
    else:
        hi = None
    if t is list:
        part = _P.derive(obj[lo:hi], obj) if _P.SHAPES else obj[lo:hi]
    elif t is str:
        part = obj[lo:hi]
    elif t is _LStr:
        part = _P.slice_str(obj, lo, hi)
    else:
        getter = getattr(obj, "sense_slice", None)
        if getter is None:
            raise SenseRuntimeError(f"cannot slice type {type_name(obj)}")
        return getter(lo, hi)       # (the written bounds as they are, nil for one left out)
    return _P.label(part, origins) if origins else part


def contains(item, container):
    """``item in container``: an element of an Array (by ``==``, labels as equal() gives
    them), a substring of a String; a value type with ``sense_contains(item)`` answers for
    itself (how a Map says whether ``item`` is one of its keys)."""
    t = type(container)
    if t is list:
        # Of the comparisons that decided it, when labelled, and of how many there were.
        origins = _P.length_origins(container) or None if _P.SHAPES else None
        for x in container:
            same = equal(item, x)
            if type(same) is not bool:
                origins = same.origins if origins is None else _P.union(origins, same.origins)
            if same:
                return True if origins is None else _P.label(True, origins)
        return False if origins is None else _P.label(False, origins)
    if t is str or t is _LStr:
        ti = type(item)
        if ti is str and t is str:
            return item in container
        if ti is str or ti is _LStr:
            return _P.label(str.__contains__(str.__str__(container), str.__str__(item)),
                            _P.union(_P.origins_of(item), _P.origins_of(container)))
        raise SenseRuntimeError(f"'in' on a String needs a String on the left, got "
                                f"{type_name(item)}")
    if t is dict:
        return map_has(container, item)
    # Any other container type: its own hook. A labelled right-hand side is always a String,
    # Int, Float or Bool (provenance.py), never a container.
    hook = getattr(container, "sense_contains", None)
    if hook is not None:
        return hook(item)
    raise SenseRuntimeError(f"'in' needs an Array, String or Map on the right, got "
                            f"{type_name(container)}")


def str_form(x):
    """What ``str(x)`` gives (FORMAT_VALUE, and the builtin): labels kept, an Array's text
    with its elements' origins."""
    t = type(x)
    if t in _LT:
        return x if t is _LStr else _P.label(to_str(x), x.origins)
    if t is str or t is int or t is float or t is bool or x is None:
        return to_str(x)
    # An Array, an agent, an answer, a Python value ...: the text shows what they hold, and
    # keeps its origins (provenance.deep_origins).
    return _P.like(to_str(x), x)


def join_strings(parts: list) -> str:
    """BUILD_STRING: the str() forms of ``parts`` joined (an f-string's value), each part's
    labels where it stands, refused when longer than --max-string."""
    parts = [x if type(x) is str or type(x) is _LStr else str_form(x) for x in parts]
    size = 0
    labelled = False
    for x in parts:
        size += len(x)
        labelled = labelled or type(x) is _LStr
    if size > MAX_STRING:
        raise string_limit(size, MAX_STRING)
    text = "".join([str.__str__(x) for x in parts]) if labelled else "".join(parts)
    return _P.joined(parts, text) if labelled else text

# ----------------------------------------------------------------------------- maps (E1)
# A Map is a dict whose keys are Strings and Ints (never Bools: True would be the key 1). A
# labelled key is a str or int subclass with the same hash and equality, so it finds the plain
# key's entry and the plain key finds its; a dict keeps the key object first stored.

def key_error(key) -> SenseTypeError:
    return SenseTypeError(f"map keys must be String or Int, got {type_name(key)}")


def key_text(key) -> str:
    """A key as a message shows it: ``'name'`` or ``3`` (Python's repr, as a KeyError's)."""
    return repr(_P.plain(key))


def missing(key) -> SenseRuntimeError:
    """``key K not found``, quoting the key's origins."""
    return SenseRuntimeError(f"key {key_text(key)} not found").quoting(_P.origins_of(key))


def check_key(key) -> None:
    """Refuse a key that is neither a String nor an Int (a labelled one is either)."""
    t = type(key)
    if not (t is str or t is int or t is _LStr or t in _P.INT_TYPES):
        raise key_error(key)


_ABSENT = object()


def map_has(items: dict, key):
    """``m.has(k)`` and ``k in m``: whether ``k`` is one of the keys; labelled by the key's
    origins and by every labelled key the answer was decided against."""
    if not _P.live and (type(key) is str or type(key) is int):
        return key in items
    check_key(key)
    result = key in items
    if not _P.live:
        return result
    # (Which keys a Map holds is as much its size's doing: a tool's {} has none.)
    origins = _P.union(_P.origins_of(key), _P.length_origins(items))
    for k in items:
        if type(k) in _LT:
            origins = _P.union(origins, _P.origins_of(k))
    return _P.label(result, origins)


def map_get(items: dict, key):
    """``m[k]``: the value, or ``key K not found``. Read through a labelled key, the value
    carries the key's origins (which entry was read depends on it, as for an Array's index)."""
    t = type(key)
    if t is str or t is int:
        value = items.get(key, _ABSENT)
        if value is _ABSENT:
            raise missing(key).quoting(_P.length_origins(items))
        return value
    check_key(key)
    value = items.get(key, _ABSENT)
    if value is _ABSENT:
        raise missing(key).quoting(_P.length_origins(items))
    return _P.label(value, _P.origins_of(key))


def map_set(items: dict, key, value) -> None:
    """``m[k] = v``: insert at the end, or update in place. Through a labelled key the value
    stored carries the key's origins (where it lands depends on them)."""
    t = type(key)
    if not (t is str or t is int):
        check_key(key)
        value = _P.label(value, _P.origins_of(key))
    if len(items) >= MAX_ARRAY and key not in items:
        raise map_limit(len(items) + 1, MAX_ARRAY)
    items[key] = value


def build_map(flat: list) -> dict:
    """BUILD_MAP, in both tiers: ``flat`` is key, value, key, value ... in source order."""
    items: dict = {}
    for i in range(0, len(flat), 2):
        map_set(items, flat[i], flat[i + 1])
    return items


# ----------------------------------------------------------------------------- equality

def equal(a: Any, b: Any) -> bool:
    """``==``: Bool never equals a number, at any depth (spec 21.4); arrays element-wise, maps
    key by key (EXTENSIONS.md E1: the order is no part of it)."""
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        if ta is tb:
            return a == b
        if ta in _LT or tb in _LT:
            return _P.binary(equal, a, b)
        if _P.live and (ta is list or tb is list or ta is dict or tb is dict):
            return _P.like(False, a, b)     # as an Array or Map compared with anything else
        return False
    if ta is list:
        if a is b:
            return True
        if tb is list and len(a) == len(b):
            # How long each is decided that they could be equal: a tool's [] equals [].
            origins = _P.union(_P.length_origins(a), _P.length_origins(b)) or None \
                if _P.SHAPES else None
            for x, y in zip(a, b):
                same = equal(x, y)
                if type(same) is not bool:          # a labelled comparison decided it
                    origins = same.origins if origins is None else _P.union(origins,
                                                                            same.origins)
                if not same:
                    break
            else:
                return True if origins is None else _P.label(True, origins)
        # Unequal: the lengths or some items decided it, and any of them may be labelled.
        return _P.like(False, a, b) if _P.live else False
    if tb is list:
        return _P.like(False, a, b) if _P.live else False
    if (ta is int or ta is float) and (tb is int or tb is float):
        return a == b
    if ta is str and tb is str:
        return a == b
    if ta is dict:
        if a is b:
            return True
        if tb is dict and len(a) == len(b):
            # The same keys with equal values; the order of insertion is no part of it.
            origins = _P.union(_P.length_origins(a), _P.length_origins(b)) or None \
                if _P.SHAPES else None
            for key, x in a.items():
                y = b.get(key, _ABSENT)
                if y is _ABSENT:
                    break
                same = equal(x, y)
                if type(same) is not bool:
                    origins = same.origins if origins is None else _P.union(origins,
                                                                            same.origins)
                if not same:
                    break
            else:
                return True if origins is None else _P.label(True, origins)
        return _P.like(False, a, b) if _P.live else False
    if tb is dict:
        return _P.like(False, a, b) if _P.live else False
    if ta in _LT or tb in _LT:
        return _P.binary(equal, a, b)
    if a is None or b is None:
        return a is b
    if ta is tb and hasattr(a, "sense_equal"):
        return a.sense_equal(b)
    return a is b


def not_equal(a: Any, b: Any) -> bool:
    """``!=`` (labels kept: the negation of a labelled Bool is labelled)."""
    result = equal(a, b)
    if type(result) is bool:
        return not result
    return _P.negation(result)


# ----------------------------------------------------------------------------- arithmetic

def _numeric_error(op: str, a: Any, b: Any) -> SenseRuntimeError:
    return SenseRuntimeError(f"'{op}' requires numeric operands, got {type_name(a)} and {type_name(b)}")


def _overflow(exc: OverflowError) -> SenseRuntimeError:
    return SenseRuntimeError(f"numeric result out of range ({exc})")


def add(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if (ta is _LStr or tb is _LStr) and (ta is str or ta is _LStr) and (tb is str or tb is _LStr):
        # A labelled String: its text is made once, straight from both (no plain copy first),
        # and its spans grow in place (provenance.concat).
        if len(a) + len(b) > MAX_STRING:
            raise string_limit(len(a) + len(b), MAX_STRING)
        return _P.concat(a, b, str.__add__(a, b))
    if ta is str or tb is str:
        if ta is str and tb is str:
            if len(a) + len(b) > MAX_STRING:
                raise string_limit(len(a) + len(b), MAX_STRING)
            return a + b
        if ta in _LT or tb in _LT:
            return _P.add(a, b, add)
        raise SenseRuntimeError(
            f"'+' requires both operands to be String (got {type_name(a)} and {type_name(b)}); "
            "use str() to convert")
    if ta is list and tb is list:
        if len(a) + len(b) > MAX_ARRAY:
            raise array_limit(len(a) + len(b), MAX_ARRAY)
        return _P.joined_shape(a + b, a, b) if _P.SHAPES else a + b
    if (ta is int or ta is float) and (tb is int or tb is float):
        try:
            return a + b
        except OverflowError as exc:
            raise _overflow(exc) from None
    if ta in _LT or tb in _LT:
        return _P.add(a, b, add)
    raise _numeric_error("+", a, b)


def arith(op: str, a: Any, b: Any) -> Any:
    """``- * / %`` on numbers (Bool is not a number)."""
    ta, tb = type(a), type(b)
    if not ((ta is int or ta is float) and (tb is int or tb is float)):
        if ta in _LT or tb in _LT:
            return _P.binary(arith, a, b, op)
        raise _numeric_error(op, a, b)
    try:
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            if b == 0:
                raise SenseRuntimeError("division by zero")
            return a / b
        if b == 0:
            raise SenseRuntimeError("modulo by zero")
        return a % b
    except OverflowError as exc:
        raise _overflow(exc) from None


def compare(op: str, a: Any, b: Any) -> bool:
    ta, tb = type(a), type(b)
    if not (((ta is int or ta is float) and (tb is int or tb is float)) or (ta is str and tb is str)):
        if ta in _LT or tb in _LT:
            return _P.binary(compare, a, b, op)
        raise _numeric_error(op, a, b)
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    return a >= b


def negate(a: Any) -> Any:
    if type(a) is int or type(a) is float:
        return -a
    if type(a) in _LT:
        return _P.unary(negate, a)
    raise SenseRuntimeError(f"unary '-' requires a number, got {type_name(a)}")


# ----------------------------------------------------------------------------- annotations

_RUNTIME_TYPES = frozenset({"Model", "Agent", "Action", "Tool", "Memory", "Skill", "McpServer",
                            "Future", "Python"})
_TYPE_TOKEN = r"\s*([A-Za-z_][A-Za-z_0-9]*|<|>|,)"      # compiled on first use (re caches it)


def parse_annotation(text: str):
    """Parse ``Name`` / ``Name<T, ...>`` into (name, args); None if malformed."""
    import re       # (not at start-up: a program without annotations never needs it)
    tokens = []
    pos = 0
    while pos < len(text):
        m = re.compile(_TYPE_TOKEN).match(text, pos)
        if not m:
            if text[pos:].strip() == "":
                break
            return None
        tokens.append(m.group(1))
        pos = m.end()

    def parse(i):
        if i >= len(tokens) or not (tokens[i][0].isalpha() or tokens[i][0] == "_"):
            return None, i
        name = tokens[i]
        i += 1
        args = []
        if i < len(tokens) and tokens[i] == "<":
            i += 1
            while True:
                arg, i = parse(i)
                if arg is None:
                    return None, i
                args.append(arg)
                if i < len(tokens) and tokens[i] == ",":
                    i += 1
                    continue
                if i < len(tokens) and tokens[i] == ">":
                    i += 1
                    break
                return None, i
        return (name, tuple(args)), i

    result, end = parse(0)
    if result is None or end != len(tokens):
        return None
    return result


# The one Python type that alone satisfies an annotation, for the callers that test it before
# calling the checker (a plain Int argument or result then costs no call); None for the others.
_EXACT = {"Int": int, "Float": float, "String": str, "Bool": bool, "Nil": type(None)}


def exact_type(text: str):
    return _EXACT.get(text)


# The errors of the checks both tiers make at a call, a return and a typed declaration.

def decl_error(name, text, value) -> SenseTypeError:
    return SenseTypeError(f"cannot assign value of type {type_name(value)} to '{name}: {text}'")


def arity_error(name, count, args) -> SenseRuntimeError:
    return SenseRuntimeError(f"'{name}' expects {count} argument(s), got {len(args)}")


def param_error(param, name, text, value) -> SenseTypeError:
    return SenseTypeError(f"argument '{param}' of '{name}' expects {text}, got {type_name(value)}")


def return_error(name, text, value) -> SenseTypeError:
    return SenseTypeError(f"'{name}' declared to return {text}, got {type_name(value)}")


def make_checker(text: str) -> Callable[[Any], bool]:
    """A predicate for the annotation ``text`` (spec 4.7); unknown names accept anything."""
    parsed = parse_annotation(text)
    if parsed is None:
        return lambda v: True
    return _checker(parsed)


def _checker(parsed) -> Callable[[Any], bool]:
    name, args = parsed
    # Labelled values (provenance.py) are their types too; tested second, so a plain value
    # costs nothing more.
    if name == "Int":
        return lambda v: type(v) is int or type(v) in _P.INT_TYPES
    if name == "Float":
        return lambda v: (type(v) is float or type(v) is int or type(v) in _P.INT_TYPES
                          or type(v) is _P.LFloat)
    if name == "String":
        return lambda v: type(v) is str or type(v) is _P.LStr
    if name == "Bool":
        return lambda v: type(v) is bool or type(v) is _P.LBool
    if name == "Nil":
        return lambda v: v is None
    if name == "Array":
        if not args:
            return lambda v: type(v) is list
        inner = _checker(args[0])
        return lambda v: type(v) is list and all(inner(x) for x in v)
    if name == "Map":
        # Map<T>: every value matches T; Map<K, V>: every key matches K and every value V.
        if not args:
            return lambda v: type(v) is dict
        if len(args) == 1:
            inner = _checker(args[0])
            return lambda v: type(v) is dict and all(inner(x) for x in v.values())
        keys, values = _checker(args[0]), _checker(args[1])
        return lambda v: (type(v) is dict and all(keys(k) for k in v)
                          and all(values(x) for x in v.values()))
    if name == "Function":
        return lambda v: type(v) is Closure or type(v) is Builtin or getattr(v, "is_function", False)
    if name.lower() == "answer":
        if not args:
            return lambda v: type_name(v) == "Answer"
        inner = _checker(args[0])
        return lambda v: type_name(v) == "Answer" and inner(v.value)
    if name in _RUNTIME_TYPES:
        return lambda v: type_name(v) == name
    return lambda v: True


def check_arg(checker, value, param: str, fname: str, annotation: str) -> None:
    if not checker(value):
        raise SenseTypeError(f"argument '{param}' of '{fname}' expects {annotation}, got {type_name(value)}")


# ----------------------------------------------------------------------------- actions

LIFECYCLE_METHODS = ("verify", "approve", "commit", "rollback")


class ActionDefinition:
    """What an action declaration binds: calling it prepares an action (the body never runs)."""

    __slots__ = ("decl", "body", "rollback", "scope", "params", "param_checks", "kind",
                 "subject", "tags", "rollback_tags", "outbound", "name")
    type_name = "Action"

    def __init__(self, decl, body, rollback, scope: Scope):
        self.decl = decl
        self.name = decl.name
        self.body = body              # the vm's PreparedCode of the body
        self.rollback = rollback      # ... of the rollback block, or None
        self.scope = scope            # the declaration scope: the body's closure
        self.params = body.code.params
        self.param_checks = body.param_checks
        # Made once here, not per audit record: its kind, subject and bodies' lineage frames.
        self.kind = kind = decl.kind
        self.subject = f"{kind} action '{decl.name}'"
        self.tags = (f"{kind}:{decl.name}",)
        self.rollback_tags = self.tags + (f"rollback:{decl.name}",)
        # Whether the second look checks it at verify and commit (outbound.is_outbound).
        from sensevm.guard.outbound import is_outbound      # (a program without actions: never)
        self.outbound = is_outbound(decl.capability, decl.sends, self.params)

    def __str__(self) -> str:
        return f"<{self.decl.kind} action {self.decl.name}>"


class PreparedAction:
    """One prepared call of an action: bound arguments, a state, and whether it was approved."""

    __slots__ = ("definition", "args", "state", "approved", "body_scope", "session", "flag",
                 "cleared", "reason", "looked")
    type_name = "Action"

    def __init__(self, definition: ActionDefinition, args: list):
        self.definition = definition
        self.args = args
        self.state = "prepared"
        self.approved = False
        # The second look: the digest it flagged, the digest an approval after the flag
        # cleared, and the reason in words (secondlook.py); and its last evaluation with the
        # evidence it saw, kept when no argument can change, or False when no argument is
        # labelled or a container (SecondLook.evaluate).
        self.flag = None
        self.cleared = None
        self.reason = None
        self.looked = None
        self.body_scope: Optional[Scope] = None   # the scope the commit body ran in
        self.session = None      # the session handle to register with once its body has run

    @property
    def name(self) -> str:
        return self.definition.decl.name

    @property
    def reversible(self) -> bool:
        return self.definition.decl.reversible

    @property
    def kind(self) -> str:
        return self.definition.kind

    def __str__(self) -> str:
        return f"<action {self.name} ({self.kind}) state={self.state}>"

    def sense_member(self, vm, name: str):
        if name == "state":
            return self.state
        if name == "name":
            return self.name
        if name == "kind":
            return self.kind
        if name == "approved":
            return self.approved
        if name == "second_look":
            # The reason quotes the arguments it is about: it carries their origins.
            return _P.like(self.reason, self.args) if self.flag is not None else None
        if name in LIFECYCLE_METHODS:
            # The policy check of a method read now and called later uses the scope (and the
            # line) of this member expression, as the reference does.
            frame = vm.frame
            return BoundLifecycleMethod(self, name, frame.scope, frame.pos)
        raise SenseRuntimeError(f"action '{self.name}' has no member '{name}'")


class BoundLifecycleMethod:
    """``a.commit`` read without calling it: a Function that reaches the same VM handler."""

    __slots__ = ("action", "method", "scope", "pos")
    type_name = "Function"
    is_function = True

    def __init__(self, action: PreparedAction, method: str, scope: Scope, pos):
        self.action = action
        self.method = method
        self.scope = scope
        self.pos = pos

    def __str__(self) -> str:
        return f"<builtin {self.action.name}.{self.method}>"

    def sense_call(self, vm, frame, args) -> bool:
        if args:
            raise SenseRuntimeError(f"'{self.action.name}.{self.method}' expects 0 argument(s), "
                                    f"got {len(args)}")
        return vm.lifecycle(frame, self.action, self.method, self.scope, self.pos)


# ----------------------------------------------------------------------------- tools

class ToolDefinition:
    """What a tool declaration binds: calling it runs the body after the call-site checks."""

    __slots__ = ("decl", "body", "scope", "params", "param_checks", "return_check", "subject",
                 "tags", "name", "arity", "capability", "is_async", "outbound", "flag",
                 "cleared", "reason")
    type_name = "Tool"

    def __init__(self, decl, body, scope: Scope):
        self.decl = decl
        self.body = body                    # the vm's PreparedCode of the body
        self.scope = scope                  # the declaration scope
        self.params = body.code.params
        self.param_checks = body.param_checks
        self.return_check = body.return_check
        # What every call reads, read once here.
        self.name = decl.name
        self.arity = len(self.params)
        self.capability = decl.capability
        self.is_async = decl.is_async
        self.subject = f"tool '{decl.name}'"     # its audit records' subject, made once
        self.tags = (f"tool:{decl.name}",)      # its body's lineage frame
        # The second look checks each call of an outgoing tool before its body runs; a refused
        # call's digest, the one an approval after it cleared, and the reason (secondlook.py).
        from sensevm.guard.outbound import is_outbound
        self.outbound = is_outbound(decl.capability, False, self.params)
        self.flag = self.cleared = self.reason = None

    def __str__(self) -> str:
        return f"<tool {self.decl.name}>"

    def sense_member(self, vm, name: str):
        return _tool_member(self, vm, name)


class Future:
    """The result of calling an async tool: its body runs on a worker thread of its own."""

    __slots__ = ("tool", "thread", "value", "error", "call_pos", "path", "finished")
    type_name = "Future"

    def __init__(self, tool: ToolDefinition, call_pos, path):
        self.tool = tool
        self.thread = None
        self.value = None
        self.error = None
        self.call_pos = call_pos
        self.path = path
        self.finished = False

    def __str__(self) -> str:
        return f"<future tool '{self.tool.name}' ({'ready' if self.finished else 'pending'})>"

    def sense_member(self, vm, name: str):
        if name == "done":
            return self.finished
        raise SenseRuntimeError(f"future 'tool '{self.tool.name}'' has no member '{name}'")

    def member_names(self):
        return ["done"]

    def sense_await(self, vm):
        if self.thread is not None:
            self.thread.join()
        if self.error is not None:
            raise self.error
        check = self.tool.return_check
        if check is not None and not check[1](self.value):
            raise SenseTypeError(f"'{self.tool.name}' declared to return {check[0]}, "
                                 f"got {type_name(self.value)}", self.call_pos, path=self.path)
        return self.value


# ----------------------------------------------------------------------------- agents

class AgentValue:
    """An agent: its one persistent scope, status, mailbox and, while paused, its frames.

    A paused plain agent is a detached chain of VM frames (``top`` down to ``base``): resuming
    re-attaches it under the resumer. An async agent runs on a worker thread of its own.
    """

    __slots__ = ("decl", "body", "scope", "status", "pause_reason", "mailbox", "base", "top",
                 "frames", "cond", "resume_value", "error", "thread")
    type_name = "Agent"

    def __init__(self, decl, body, scope: Scope):
        import threading
        self.decl = decl
        self.body = body                  # the vm's PreparedCode of the body
        self.scope = scope                # the agent's own scope (its tag is the agent)
        self.status = "created"
        self.pause_reason = None
        self.mailbox: list = []
        self.base = None                  # the body's frame, while running or paused
        self.top = None                   # the innermost frame, while paused
        self.frames = 0                   # frames in the detached chain
        self.cond = threading.Condition()
        self.resume_value = None
        self.error = None
        self.thread = None

    @property
    def name(self) -> str:
        return self.decl.name

    def sense_origins(self) -> frozenset:
        """What its printed form shows of the data: the pause reason (a page's question)."""
        return _P.deep_origins(self.pause_reason)

    def __str__(self) -> str:
        reason = self.pause_reason
        if self.status == "paused" and reason is not None and reason != "":
            # A non-String reason is shown in host notation, as the reference shows it.
            shown = reason if type(reason) is str else host_repr(reason)
            return f"<agent {self.name} status=paused ({shown})>"
        return f"<agent {self.name} status={self.status}>"

    def sense_member(self, vm, name: str):
        # The four fixed members win over same-named variables of the agent's scope.
        if name == "status":
            return self.status
        if name == "name":
            return self.name
        if name == "pause_reason":
            return self.pause_reason
        if name == "doc":
            return self.decl.doc
        if name in self.scope.vars:
            return self.scope.vars[name]
        raise SenseRuntimeError(f"agent '{self.name}' has no member '{name}'")

    def member_names(self):
        return ["doc", "name", "pause_reason", "status"] + list(self.scope.vars)

    def sense_await(self, vm):
        return _services.await_agent(vm, self)


# ----------------------------------------------------------------------------- caught errors

class ErrorValue:
    """A caught error (EXTENSIONS.md E4), as ``except ... as e`` binds it: ``e.class``,
    ``e.message`` (without the ``[line L]`` prefix), ``e.line`` (Int or nil), ``e.file``.

    It holds the error itself, so that ``raise e`` raises it again as it was (its position
    kept). Its message quotes values (``cannot convert 'x' to Int``), so what it shows of the
    message carries the origins of what it quotes (``SenseError.origins``)."""

    __slots__ = ("error",)
    type_name = "Error"
    MEMBERS = ("class", "message", "line", "file")

    def __init__(self, error):
        self.error = error

    def sense_member(self, vm, name: str):
        err = self.error
        if name == "class":
            return err.kind
        if name == "message":
            return _P.label(err.message, err.origins)
        if name == "line":
            return err.pos.line if err.pos is not None and err.pos.line > 0 else None
        if name == "file":
            return err.path
        raise SenseRuntimeError(f"an Error has no member '{name}' (it has "
                                f"{', '.join(self.MEMBERS)})")

    def member_names(self):
        return list(self.MEMBERS)

    def sense_origins(self) -> frozenset:
        """What its printed form shows of the data: the values its message quotes."""
        return self.error.origins

    def __str__(self) -> str:
        err = self.error
        return f"{err.kind}: {str.__str__(err.message)}"


def raised_error(value):
    """The error ``raise value`` raises: an Error's own error again (position kept); a String
    as a SenseRuntimeError quoting it (its labels kept); anything else is a SenseTypeError."""
    t = type(value)
    if t is ErrorValue:
        return value.error
    if t is str or t is _LStr:
        return SenseRuntimeError(value).quoting(_P.origins_of(value))
    return SenseTypeError(f"raise needs an Error or a String, got {type_name(value)}")
