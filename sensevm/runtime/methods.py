"""The methods of Strings, Arrays and Maps (EXTENSIONS.md E1, E2), reached by member access.

``s.upper`` is a bound method: a ``Builtin`` named ``String.upper`` whose ``receiver`` is ``s``
(so it prints ``<builtin String.upper>``, ``type_of`` says ``Function`` and a saved agent keeps
it). Calling it checks the argument count, then runs the method on the receiver. A name that is
no method of the type is the reference's ``cannot access member 'x' on type T``.

Provenance (provenance.py): a method on labelled data gives labelled results. A String method
keeps each character's origins with it (``upper()`` of a page's text is the page's, span by
span; a piece that ``split()`` or ``trim()`` cuts out keeps the spans it was cut from; text put
in by ``replace()`` or ``join()`` carries its own and what it replaced); an answer about data
(``contains``, ``find``, ``has``, ``index_of``, ``min`` ...) carries the origins of what decided
it; an Array whose order was decided by labelled values (``sorted``) gives every element those
origins, as a Sense loop doing the same comparisons would (vm.py's pc labels).

The methods that take a function (``map``, ``filter``, ``reduce``, ``sorted(key)``) call it as
Sense code: each call goes through the VM's ordinary call path from a *callback frame* of its
own (``Callback``, run by the VM's CALLBACK instruction, frames.CALLBACK_OP), so the depth
limit, policy on the call chain, audit lineage, the step budget and ``ask_human``'s pause and
resume (and a saved agent: persist.py) are those of any call, and no Python recursion is made.
"""

from __future__ import annotations

try:        # the C type itself: importing functools would cost a program's first method call
    from _functools import partial
except ImportError:     # pragma: no cover - another Python
    from functools import partial

from sensevm.base.errors import SenseRecursionError, SenseRuntimeError, SenseTypeError
from sensevm.guard import provenance as PV
from sensevm.guard.provenance import LABELLED, LStr
from sensevm.runtime import values as V
from sensevm.runtime.builtins import b_float, b_int
from sensevm.runtime.frames import CALLBACK_OP, DIRECT_REACH, Deoptimize, Frame, PreparedCode
from sensevm.runtime.limits import array_limit, map_limit, string_limit
from sensevm.runtime.values import Builtin, Closure, type_name

_INT_TYPES = PV.INT_TYPES


def _error(message: str) -> SenseRuntimeError:
    return SenseRuntimeError(message)


def _is_str(x) -> bool:
    return type(x) is str or type(x) is LStr


def _is_int(x) -> bool:
    return type(x) is int or type(x) in _INT_TYPES


def _is_number(x) -> bool:
    t = type(x)
    return t is int or t is float or t in _INT_TYPES or t is PV.LFloat


def _text(s) -> str:
    return str.__str__(s) if type(s) is LStr else s


def _string_arg(method: str, x, what: str = "a String") -> None:
    if not _is_str(x):
        raise _error(f"{method}() expects {what}, got {type_name(x)}")


def _int_arg(method: str, x, what: str = "an Int") -> int:
    if not _is_int(x):
        raise _error(f"{method}() expects {what}, got {type_name(x)}")
    return int(x)


def _labelled(result, *sources):
    """``result`` with the origins of ``sources`` themselves (not what they hold)."""
    origins = PV.EMPTY
    for s in sources:
        if type(s) in LABELLED:
            origins = PV.union(origins, PV.origins_of(s))
    return PV.label(result, origins) if origins else result


def _deep(result, *sources):
    """``result`` with the origins of everything in ``sources`` (an Array's items ...)."""
    return PV.like(result, *sources) if PV.live else result


# ----------------------------------------------------------------------------- String spans
# A labelled String's spans are (start, end, origins) over its text. These build a result's
# text and spans together; PV.make_str drops the spans again when none has origins.

def _cut(s, start: int, end: int):
    """``s[start:end]`` with the spans it was cut from."""
    text = _text(s)[start:end]
    if type(s) is not LStr:
        return text
    spans = [(max(a, start) - start, min(b, end) - start, o) for a, b, o in s.spans
             if a < end and start < b]
    return PV.make_str(text, spans)


def _joined(pieces) -> str:
    """The concatenation of ``pieces`` (Strings, plain or labelled), spans kept."""
    texts = [_text(p) for p in pieces]
    text = "".join(texts)
    if not any(type(p) is LStr for p in pieces):
        return text
    spans, at = [], 0
    for piece, t in zip(pieces, texts):
        for a, b, o in PV.spans_of(piece):
            spans.append((a + at, b + at, o))
        at += len(t)
    return PV.make_str(text, spans)


def _with_origins(s, origins):
    """``s`` with ``origins`` added to every span (nothing when there are none)."""
    return PV.label(s, origins) if origins else s


def _case(s, convert):
    """upper() / lower(): Python's case mapping, which may change a character into several
    (``ß`` into ``SS``: up to three), so the result can pass --max-string where the String did
    not; each span becomes the text its characters map to."""
    text = convert(_text(s))
    if len(text) > V.MAX_STRING:
        raise string_limit(len(text), V.MAX_STRING)
    if type(s) is not LStr:
        return text
    plain = _text(s)
    spans, at = [], 0
    for a, b, o in s.spans:
        n = len(convert(plain[a:b]))
        spans.append((at, at + n, o))
        at += n
    if at != len(text):         # (never, with Python's mappings: then every span's origins)
        return PV.label(text, PV.origins_of(s))
    return PV.make_str(text, spans)


def _pieces(s, found):
    """The labelled pieces of ``s`` at the (start, end) offsets ``found``."""
    if type(s) is not LStr:
        text = s
        return [text[a:b] for a, b in found]
    return [_cut(s, a, b) for a, b in found]


# ----------------------------------------------------------------------------- String methods

# (Each method takes its plain String first: the common case, without the span work.)

# (A String of at most a third of --max-string cannot map past it: Python's case mappings
# make at most three characters of one.)

def s_upper(s, vm, args):
    return s.upper() if type(s) is str and len(s) * 3 <= V.MAX_STRING else _case(s, str.upper)


def s_lower(s, vm, args):
    return s.lower() if type(s) is str and len(s) * 3 <= V.MAX_STRING else _case(s, str.lower)


def s_trim(s, vm, args):
    if type(s) is str:
        return s.strip()
    text = _text(s)
    start = len(text) - len(text.lstrip())
    return _cut(s, start, max(len(text.rstrip()), start))


def s_trim_start(s, vm, args):
    if type(s) is str:
        return s.lstrip()
    text = _text(s)
    return _cut(s, len(text) - len(text.lstrip()), len(text))


def s_trim_end(s, vm, args):
    if type(s) is str:
        return s.rstrip()
    return _cut(s, 0, len(_text(s).rstrip()))


def s_split(s, vm, args):
    if len(args) > 1:
        raise _error(f"'String.split' expects 0 or 1 argument(s), got {len(args)}")
    text = _text(s)
    if not args:
        # On runs of whitespace, as Python's split(): no empty pieces.
        if type(s) is not LStr:
            return V.sized_array(text.split())
        found, at = [], 0
        for piece in text.split():
            at = text.find(piece, at)
            found.append((at, at + len(piece)))
            at += len(piece)
        # How many pieces, and which is where, is the text's.
        return PV.derive(V.sized_array(_pieces(s, found)), also=PV.origins_of(s))
    sep = args[0]
    _string_arg("split", sep, "a String separator")
    sep_text = _text(sep)
    if not sep_text:
        raise _error("split() separator is empty")
    parts = text.split(sep_text)
    V.sized_array(parts)
    if type(s) is not LStr and type(sep) is not LStr:
        return parts
    found, at = [], 0
    for part in parts:
        found.append((at, at + len(part)))
        at += len(part) + len(sep_text)
    # Where the String was cut depends on the separator too; how many pieces, on both.
    return PV.derive([_with_origins(p, PV.origins_of(sep)) for p in _pieces(s, found)],
                     also=PV.union(PV.origins_of(s), PV.origins_of(sep)))


def s_lines(s, vm, args):
    text = _text(s)
    if type(s) is not LStr:
        return V.sized_array(text.splitlines())
    found, at = [], 0
    for line in text.splitlines(True):
        body = line.splitlines()[0] if line.splitlines() else ""
        found.append((at, at + len(body)))
        at += len(line)
    return PV.derive(V.sized_array(_pieces(s, found)), also=PV.origins_of(s))


def _test(method, s, args, test):
    sub = args[0]
    if type(sub) is str and type(s) is str:
        return test(s, sub)
    _string_arg(method, sub)
    result = test(_text(s), _text(sub))
    return _labelled(result, s, sub)


# The tests below answer two plain Strings themselves (_test's first case, without its call:
# these are the methods a hot loop calls most).

def s_starts_with(s, vm, args):
    sub = args[0]
    if type(sub) is str and type(s) is str:
        return s.startswith(sub)
    return _test("starts_with", s, args, str.startswith)


def s_ends_with(s, vm, args):
    sub = args[0]
    if type(sub) is str and type(s) is str:
        return s.endswith(sub)
    return _test("ends_with", s, args, str.endswith)


def s_contains(s, vm, args):
    sub = args[0]
    if type(sub) is str and type(s) is str:
        return sub in s
    return _test("contains", s, args, str.__contains__)


def s_find(s, vm, args):
    sub = args[0]
    if type(sub) is str and type(s) is str:
        return s.find(sub)      # a code-point index, or -1
    return _test("find", s, args, str.find)


def s_replace(s, vm, args):
    old, new = args
    if type(s) is str and type(old) is str and type(new) is str and old and len(new) <= len(old):
        return s.replace(old, new)      # (plain, and it cannot grow: the general case's first)
    _string_arg("replace", old)
    _string_arg("replace", new)
    text, old_text, new_text = _text(s), _text(old), _text(new)
    if type(s) is not LStr and type(old) is not LStr and type(new) is not LStr:
        if len(new_text) > len(old_text) or not old_text:       # (only then can it grow)
            grows = (text.count(old_text) if old_text else len(text) + 1) * (
                len(new_text) - len(old_text))
            if len(text) + grows > V.MAX_STRING:
                raise string_limit(len(text) + grows, V.MAX_STRING)
        return text.replace(old_text, new_text)
    # Each replacement carries the origins of what it replaced (a page's 'e' put back as a
    # literal 'e' is still the page's) and of the pattern, as well as its own.
    pieces, at = [], 0
    if not old_text:
        for i in range(len(text)):
            pieces += [new, _cut(s, i, i + 1)]
        pieces.append(new)
        pieces = [_with_origins(p, PV.origins_of(old)) if p is new else p for p in pieces]
    else:
        while True:
            found = text.find(old_text, at)
            if found < 0:
                break
            pieces.append(_cut(s, at, found))
            replaced = PV.union(PV.origins_of(_cut(s, found, found + len(old_text))),
                                PV.origins_of(old))
            pieces.append(_with_origins(new, replaced))
            at = found + len(old_text)
        pieces.append(_cut(s, at, len(text)))
    size = sum(len(p) for p in pieces)
    if size > V.MAX_STRING:
        raise string_limit(size, V.MAX_STRING)
    return _joined(pieces)


def s_repeat(s, vm, args):
    n = max(_int_arg("repeat", args[0]), 0)
    if not s:
        n = min(n, 1)       # (nothing repeated is itself: a count past Python's range is not
        #                     given to s * n, which would raise OverflowError)
    size = len(s) * n
    if size > V.MAX_STRING:
        raise string_limit(size, V.MAX_STRING)
    text = s * n if type(s) is not LStr else _joined([s] * n)
    return _labelled(text, args[0])         # how long it is depends on the count


def _pad(method, s, args, before: bool):
    if not 1 <= len(args) <= 2:
        raise _error(f"'String.{method}' expects 1 or 2 argument(s), got {len(args)}")
    width = _int_arg(method, args[0], "an Int width")
    fill = args[1] if len(args) == 2 else " "
    _string_arg(method, fill, "a String fill")
    if len(fill) != 1:
        raise _error(f"{method}() needs a fill of exactly one character, got "
                     f"{V.key_text(fill)}")
    missing = width - len(s)
    if missing <= 0:
        return s
    if width > V.MAX_STRING:
        raise string_limit(width, V.MAX_STRING)
    if type(s) is str and type(fill) is str and type(args[0]) is int:
        return s.rjust(width, fill) if before else s.ljust(width, fill)
    # How much padding there is depends on the width: the padding carries its origins.
    padding = _with_origins(_joined([fill] * missing), PV.origins_of(args[0]))
    return _joined([padding, s] if before else [s, padding])


# A plain String, an Int width from 0 to --max-string and a plain one-character fill: what
# _pad pads with str.rjust / str.ljust after all its checks, done straight away.

def s_pad_start(s, vm, args):
    if (type(s) is str and len(args) == 2 and type(args[0]) is int and 0 <= args[0] <= V.MAX_STRING
            and type(args[1]) is str and len(args[1]) == 1):
        return s.rjust(args[0], args[1])
    return _pad("pad_start", s, args, True)


def s_pad_end(s, vm, args):
    if (type(s) is str and len(args) == 2 and type(args[0]) is int and 0 <= args[0] <= V.MAX_STRING
            and type(args[1]) is str and len(args[1]) == 1):
        return s.ljust(args[0], args[1])
    return _pad("pad_end", s, args, False)


def s_to_int(s, vm, args):
    return b_int(vm, [s])


def s_to_float(s, vm, args):
    return b_float(vm, [s])


# ----------------------------------------------------------------------------- ordering

def _sort_kind(x):
    """What an Array's values must all be to be ordered: numbers or Strings (never Bools)."""
    if _is_number(x):
        return "number"
    if _is_str(x):
        return "string"
    return None


def _check_comparable(values) -> None:
    """All numbers or all Strings, else ``cannot compare T and U`` (the first that is not
    like the first value, or the first two values when the first is neither)."""
    if len(values) < 2:
        return
    kind = _sort_kind(values[0])
    for x in values[1:]:
        if kind is None or _sort_kind(x) != kind:
            raise _error(f"cannot compare {type_name(values[0])} and {type_name(x)}")


def _decided_by(items: list, origins) -> list:
    """``items``, each given ``origins`` (what decided their order), when any are influenced."""
    if origins and PV.is_influenced(origins):
        return [PV.label(x, origins) for x in items]
    return items


def _sorted_by_keys(items: list, keys: list) -> list:
    _check_comparable(keys)
    order = sorted(range(len(items)), key=lambda i: PV.plain(keys[i]))
    result = [items[i] for i in order]
    return _decided_by(result, PV.deep_origins(keys) if PV.live else PV.EMPTY)


# ----------------------------------------------------------------------------- Array methods

def a_push(xs, vm, args):
    if len(xs) >= vm.max_array:
        raise array_limit(len(xs) + 1, vm.max_array)
    xs.append(args[0])
    if PV.SHAPES:
        PV.pushed(xs)
    return xs


def a_pop(xs, vm, args):
    if not xs:
        raise _error("pop from an empty array").quoting(PV.length_origins(xs))
    if PV.SHAPES:
        # Which element is last is as much the data's as where it sits.
        where = PV.position_origins(xs, -1)
        x = xs.pop()
        PV.reshaped(xs)
        return PV.label(x, where)
    return xs.pop()


def _position(method, i, size: int, insert: bool = False) -> int:
    """An index argument: an Int, negative from the end."""
    if not _is_int(i):
        raise _error(f"{method}() index must be Int, got {type_name(i)}")
    i = int(i)
    if insert:
        return i
    if not -size <= i < size:
        raise _error(f"index {i} out of bounds")
    return i


def a_insert(xs, vm, args):
    i, value = args
    at = _position("insert", i, len(xs), insert=True)
    if len(xs) >= vm.max_array:
        raise array_limit(len(xs) + 1, vm.max_array)
    xs.insert(at, _labelled(value, i))      # (out-of-range positions clamp, as Python's do)
    if PV.live:
        PV.reshaped(xs, PV.origins_of(i))   # what follows moved by one: where depends on i
    return None


def a_remove_at(xs, vm, args):
    i = args[0]
    try:
        at = _position("remove_at", i, len(xs))
    except SenseRuntimeError as err:
        raise err.quoting(PV.union(PV.origins_of(i), PV.length_origins(xs)))
    if PV.live:
        where = PV.union(PV.position_origins(xs, at), PV.origins_of(i))
        x = xs.pop(at)
        PV.reshaped(xs, PV.origins_of(i))
        return PV.label(x, where)
    return xs.pop(at)


def _index_of(xs, v) -> int:
    for i, x in enumerate(xs):
        if V.equal(x, v):
            return i
    return -1


def a_index_of(xs, vm, args):
    return _deep(_index_of(xs, args[0]), xs, args[0])


def a_contains(xs, vm, args):
    return _deep(_index_of(xs, args[0]) >= 0, xs, args[0])


def a_join(xs, vm, args):
    sep = args[0]
    _string_arg("join", sep, "a String separator")
    if type(sep) is str and not PV.live:
        try:
            text = sep.join(xs)     # (no labelled String exists yet: a str is a plain one)
        except TypeError:
            text = None
        if text is not None:
            if len(text) > V.MAX_STRING:
                raise string_limit(len(text), V.MAX_STRING)
            return text
    length = PV.length_origins(xs)
    if length:
        # How many pieces (and separators) there are is the data's: [].join(",") is "" for
        # a tool's empty list only because the tool made it empty.
        return PV.label(a_join(list(xs), vm, args), length)
    for i, x in enumerate(xs):
        if not _is_str(x):
            raise _error(f"join() needs Strings, element {i} is {type_name(x)}")
    size = sum(len(x) for x in xs) + len(sep) * max(len(xs) - 1, 0)
    if size > V.MAX_STRING:
        raise string_limit(size, V.MAX_STRING)
    if type(sep) is str and not PV.live:
        return sep.join(xs)         # (no labelled String exists yet: every item is a str)
    pieces = []
    for i, x in enumerate(xs):
        if i:
            pieces.append(sep)
        pieces.append(x)
    return _joined(pieces)


def a_reversed(xs, vm, args):
    return PV.reversed_shape(xs[::-1], xs) if PV.SHAPES else xs[::-1]


def a_copy(xs, vm, args):
    return PV.copy_shape(list(xs), xs) if PV.SHAPES else list(xs)


def a_sum(xs, vm, args):
    total = 0
    plain = True
    for i, x in enumerate(xs):
        t = type(x)
        if not (t is int or t is float):
            if not _is_number(x):
                raise _error(f"sum() needs numbers, element {i} is {type_name(x)}")
            plain = False
    if plain:
        try:
            total = sum(xs)
        except OverflowError as exc:
            raise _error(f"numeric result out of range ({exc})") from None
    else:
        for x in xs:
            total = V.add(total, x)
    # (How many terms there were: a tool's count of them.)
    return PV.label(total, PV.length_origins(xs)) if PV.SHAPES else total


def _extreme(method, xs, pick):
    if not xs:
        raise _error(f"{method}() of an empty array").quoting(PV.length_origins(xs))
    _check_comparable(xs)
    best = xs[0]
    for x in xs[1:]:
        if pick(PV.plain(x), PV.plain(best)):
            best = x
    return _deep(best, xs)


def a_min(xs, vm, args):
    return _extreme("min", xs, lambda a, b: a < b)


def a_max(xs, vm, args):
    return _extreme("max", xs, lambda a, b: a > b)


def a_slice(xs, vm, args):
    if not 1 <= len(args) <= 2:
        raise _error(f"'Array.slice' expects 1 or 2 argument(s), got {len(args)}")
    for bound in args:
        if not _is_int(bound):
            raise _error(f"slice bounds must be Int, got {type_name(bound)}")
    start = int(args[0])
    end = int(args[1]) if len(args) == 2 else len(xs)
    part = xs[start:end]
    origins = PV.EMPTY
    for bound in args:
        origins = PV.union(origins, PV.origins_of(bound))
    part = [PV.label(x, origins) for x in part] if origins else part
    return PV.derive(part, xs, also=origins) if PV.live else part


def a_sorted(xs, vm, frame, args):
    if len(args) > 1:
        raise _error(f"'Array.sorted' expects 0 or 1 argument(s), got {len(args)}")
    if args:
        return start_callback(vm, frame, "sorted", args[0], xs, None)
    _check_comparable(xs)
    result = sorted(xs, key=PV.plain)
    if PV.live:
        result = PV.derive(_decided_by(result, PV.deep_origins(xs)), xs)
    frame.stack.append(result)
    return False


def a_map(xs, vm, frame, args):
    return start_callback(vm, frame, "map", args[0], xs, None)


def a_filter(xs, vm, frame, args):
    return start_callback(vm, frame, "filter", args[0], xs, None)


def a_reduce(xs, vm, frame, args):
    return start_callback(vm, frame, "reduce", args[0], xs, args[1])


# ----------------------------------------------------------------------------- Map methods

def m_keys(m, vm, args):
    return PV.derive(list(m), m) if PV.SHAPES else list(m)


def m_values(m, vm, args):
    return PV.derive(list(m.values()), m) if PV.SHAPES else list(m.values())


def m_items(m, vm, args):
    items = [[k, x] for k, x in m.items()]
    return PV.derive(items, m) if PV.SHAPES else items


def m_get(m, vm, args):
    if not 1 <= len(args) <= 2:
        raise _error(f"'Map.get' expects 1 or 2 argument(s), got {len(args)}")
    key = args[0]
    if (type(key) is str or type(key) is int) and not PV.SHAPES:
        return m.get(key, args[1] if len(args) == 2 else None)
    V.check_key(key)
    value = m.get(key, V._ABSENT)
    if value is V._ABSENT:
        # The default, because the key is not there: the Map's size's doing too.
        value = args[1] if len(args) == 2 else None
        return PV.label(_labelled(value, key), PV.length_origins(m))
    return _labelled(value, key)


def m_has(m, vm, args):
    return V.map_has(m, args[0])


def m_remove(m, vm, args):
    key = args[0]
    V.check_key(key)
    value = m.pop(key, V._ABSENT)
    if value is V._ABSENT:
        raise V.missing(key)
    return _labelled(value, key)


def m_copy(m, vm, args):
    return PV.derive(dict(m), m) if PV.SHAPES else dict(m)


def m_merged(m, vm, args):
    other = args[0]
    if type(other) is not dict:
        raise _error(f"merged() expects a Map, got {type_name(other)}")
    out = dict(m)
    out.update(other)       # a key of both keeps its place here and takes other's value
    if len(out) > vm.max_array:
        raise map_limit(len(out), vm.max_array)
    if not PV.SHAPES:
        return out
    chosen = PV.length_origins(other)
    if chosen:
        # Which of this Map's values other left standing was other's choice of keys.
        for k in m:
            if k not in other:
                out[k] = PV.label(out[k], chosen)
    return PV.derive(out, m, other)


# ----------------------------------------------------------------------------- the tables
# name -> (function, argument count or None when the function checks it, frames)

STRING_METHODS = {
    "upper": (s_upper, 0), "lower": (s_lower, 0), "trim": (s_trim, 0),
    "trim_start": (s_trim_start, 0), "trim_end": (s_trim_end, 0), "split": (s_split, None),
    "lines": (s_lines, 0), "starts_with": (s_starts_with, 1), "ends_with": (s_ends_with, 1),
    "contains": (s_contains, 1), "find": (s_find, 1), "replace": (s_replace, 2),
    "repeat": (s_repeat, 1), "pad_start": (s_pad_start, None), "pad_end": (s_pad_end, None),
    "to_int": (s_to_int, 0), "to_float": (s_to_float, 0),
}
ARRAY_METHODS = {
    "push": (a_push, 1), "pop": (a_pop, 0), "insert": (a_insert, 2),
    "remove_at": (a_remove_at, 1), "index_of": (a_index_of, 1), "contains": (a_contains, 1),
    "join": (a_join, 1), "sorted": (a_sorted, None), "reversed": (a_reversed, 0),
    "copy": (a_copy, 0), "map": (a_map, 1), "filter": (a_filter, 1), "reduce": (a_reduce, 2),
    "sum": (a_sum, 0), "min": (a_min, 0), "max": (a_max, 0), "slice": (a_slice, None),
}
MAP_METHODS = {
    "keys": (m_keys, 0), "values": (m_values, 0), "items": (m_items, 0), "get": (m_get, None),
    "has": (m_has, 1), "remove": (m_remove, 1), "copy": (m_copy, 0), "merged": (m_merged, 1),
}
# The methods that call Sense code: called as fn(vm, frame, args) (Builtin.frames).
FRAMES = frozenset({a_sorted, a_map, a_filter, a_reduce})

TABLES = {"String": STRING_METHODS, "Array": ARRAY_METHODS, "Map": MAP_METHODS}
# By the receiver's exact Python type, the methods that call no Sense code, each as (function,
# argument count or None, name): what tier 2 calls at a member call without binding it first.
PURE_BY_TYPE = {t: {name: (fn, arity, f"{kind}.{name}") for name, (fn, arity) in table.items()
                    if fn not in FRAMES}
                for t, kind, table in ((str, "String", STRING_METHODS), (list, "Array", ARRAY_METHODS),
                                       (dict, "Map", MAP_METHODS))}

# What tier 2 writes in place of a call of a method whose receiver is of the type its call site
# guessed, exactly (a plain String, an Array, a Map: see tier2._Gen.guessed_method): by that
# type, the method's name and the argument count, (the test its receiver and arguments must
# pass, or "", and the Python expression of the method's first case), with ``{r}`` for the
# receiver and ``{0}``, ``{1}`` for the arguments (``vm``, ``V``, ``PV`` and ``SHAPES`` are
# names of the generated code). Each is that method's own first case above, written as an
# expression (tests/test_string_method_fast_paths.py holds every one equal to its method); a
# call that fails the test calls the method.
INLINE_METHODS = {
    str: {
        ("upper", 0): ("len({r}) * 3 <= V.MAX_STRING", "{r}.upper()"),
        ("lower", 0): ("len({r}) * 3 <= V.MAX_STRING", "{r}.lower()"),
        ("trim", 0): ("", "{r}.strip()"),
        ("trim_start", 0): ("", "{r}.lstrip()"),
        ("trim_end", 0): ("", "{r}.rstrip()"),
        ("starts_with", 1): ("{0}.__class__ is str", "{r}.startswith({0})"),
        ("ends_with", 1): ("{0}.__class__ is str", "{r}.endswith({0})"),
        ("contains", 1): ("{0}.__class__ is str", "{0} in {r}"),
        ("find", 1): ("{0}.__class__ is str", "{r}.find({0})"),
        ("replace", 2): ("{0}.__class__ is str and {1}.__class__ is str and {0} "
                         "and len({1}) <= len({0})", "{r}.replace({0}, {1})"),
        ("pad_start", 2): ("{0}.__class__ is int and 0 <= {0} <= V.MAX_STRING "
                           "and {1}.__class__ is str and len({1}) == 1", "{r}.rjust({0}, {1})"),
        ("pad_end", 2): ("{0}.__class__ is int and 0 <= {0} <= V.MAX_STRING "
                         "and {1}.__class__ is str and len({1}) == 1", "{r}.ljust({0}, {1})"),
    },
    list: {
        # (append gives None: ``or`` then gives the Array, which push returns)
        ("push", 1): ("len({r}) < vm.max_array and not SHAPES", "{r}.append({0}) or {r}"),
        ("pop", 0): ("{r} and not SHAPES", "{r}.pop()"),
    },
    dict: {
        ("has", 1): ("not PV.live and ({0}.__class__ is str or {0}.__class__ is int)",
                     "{0} in {r}"),
        ("get", 1): ("({0}.__class__ is str or {0}.__class__ is int) and not SHAPES",
                     "{r}.get({0})"),
        ("get", 2): ("({0}.__class__ is str or {0}.__class__ is int) and not SHAPES",
                     "{r}.get({0}, {1})"),
    },
}


def _table(obj):
    t = type(obj)
    if t is str or t is LStr:
        return "String", STRING_METHODS
    if t is list:
        return "Array", ARRAY_METHODS
    if t is dict:
        return "Map", MAP_METHODS
    return None, None


def bound(obj, name: str) -> Builtin:
    """``obj.name`` for a String, Array or Map: the method bound to ``obj``."""
    kind, table = _table(obj)
    entry = table.get(name) if table is not None else None
    if entry is None:
        raise SenseRuntimeError(f"cannot access member '{name}' on type {type_name(obj)}")
    return make_bound(kind, name, obj, entry)


def make_bound(kind: str, name: str, obj, entry=None) -> Builtin:
    """Method ``name`` of ``obj`` (a value of type ``kind``) as a Function. One that calls no
    Sense code is a pure builtin (tier 2 calls it in place); the others move frames."""
    fn, arity = entry if entry is not None else TABLES[kind][name]
    frames = fn in FRAMES
    return Builtin(f"{kind}.{name}", partial(fn, obj), arity, frames=frames, pure=not frames,
                   receiver=obj)


def names(obj) -> list:
    """The method names of a String, Array or Map (the REPL completes them); [] otherwise."""
    _, table = _table(obj)
    return sorted(table) if table is not None else []


# ----------------------------------------------------------------------------- callbacks

KINDS = ("map", "filter", "reduce", "sorted")


class Callback:
    """The state of one ``map`` / ``filter`` / ``reduce`` / ``sorted(key)`` call, kept on its
    callback frame's stack (slot 0) between the calls it makes.

    ``i`` is the index of the next item to hand to ``fn``; while a call is out, its item is
    ``items[i - 1]`` and its result will be pushed above this on the frame's stack. ``out`` is
    the Array being made (map, filter), the accumulator (reduce) or the keys so far (sorted).
    The items are the live Array, as a ``for`` loop walks it."""

    __slots__ = ("kind", "fn", "items", "i", "out", "decided")

    def __init__(self, kind: str, fn, items: list, out):
        self.kind = kind
        self.fn = fn
        self.items = items
        self.i = 0
        self.out = out
        self.decided = PV.EMPTY     # filter: the labels of the answers that kept or dropped

    def take(self, result, frame) -> None:
        kind = self.kind
        if kind == "map" or kind == "sorted":
            self.out.append(result)
        elif kind == "reduce":
            self.out = result
        else:
            labelled = type(result) in LABELLED and PV.is_influenced(PV.origins_of(result))
            if labelled:
                # Kept or dropped because of labelled data: how long the result is, too.
                self.decided = PV.union(self.decided, PV.origins_of(result))
            if result:
                x = self.items[self.i - 1]
                if labelled:
                    x = PV.label(x, PV.origins_of(result))     # kept because of labelled data
                self.out.append(x)

    def finish(self):
        if self.kind == "sorted":
            result = _sorted_by_keys(self.items[:len(self.out)], self.out)
        else:
            result = self.out
        if PV.live:
            # As many results (calls, for reduce) as the items: the items' length's.
            length = PV.union(PV.length_origins(self.items), self.decided)
            if self.kind == "reduce":
                return PV.label(result, length)
            PV.derive(result, also=length)
        return result


# The code every callback frame runs: one instruction, the VM's own (never in a program).
CALLBACK_INSTRS = [(CALLBACK_OP, None, None)]


class CallbackCode:
    """What a callback frame's PreparedCode says of its code (a code object's fields that
    the VM reads)."""

    __slots__ = ("name", "params", "kind")

    def __init__(self, name: str):
        self.name = name
        self.params = ()
        self.kind = None


CALLBACK_CODES = {kind: CallbackCode(f"Array.{kind}") for kind in KINDS}


def callback_prepared(kind: str, pos, path) -> PreparedCode:
    """The prepared code of a callback frame: positioned at the method call, so that an error
    of a call it makes (arity, "not callable", the depth limit) is reported there."""
    prepared = PreparedCode(CALLBACK_CODES[kind], CALLBACK_INSTRS, [pos], path, (), None)
    prepared.t2 = False             # tier 2 never takes it: the dispatch loop runs it
    return prepared


def is_callback(prepared) -> bool:
    return type(prepared.code) is CallbackCode


def start_callback(vm, frame, kind: str, fn, items: list, initial) -> bool:
    """Begin ``items.KIND(fn)`` for ``frame``: push the callback frame and run its first step;
    True when frames moved (always: the frame returns into ``frame`` when done)."""
    out = initial if kind == "reduce" else []
    driver = Callback(kind, fn, items, out)
    if vm.depth >= vm.max_depth:
        raise SenseRecursionError()
    vm.depth += 1
    new = Frame(callback_prepared(kind, frame.pos, frame.prepared.path), frame.scope, frame)
    new.stack.append(driver)
    vm.frame = new
    return True


def _direct_run(vm, f, driver, code, arity, d, bound) -> bool:
    """step's calls of a function with a direct form, with no step budget to count: the same
    calls and results as its loop, with the position and the accumulator kept in locals and
    written back to the driver wherever anything can read them (a labelled answer's take, a
    deoptimization; an error leaves the method). The items are walked by a list iterator set
    to the position, which reads the live Array as step's loop does (an item pushed meanwhile
    is met). Stops where the function has no direct form (step's loop then goes on from
    there); True when a call deoptimized and left a frame to run (step's answer), else
    False."""
    items, fn, kind = driver.items, driver.fn, driver.kind
    i = driver.i
    acc = driver.out
    x = None
    walk = iter(items)
    walk.__setstate__(i)
    try:
        if kind == "reduce":
            for x in walk:
                direct = code.dx[2]
                if direct is None:
                    break
                i += 1
                acc = direct(vm, fn, d, bound, acc, x)
        elif kind == "filter":
            keep = acc.append
            for x in walk:
                direct = code.dx[1]
                if direct is None:
                    break
                i += 1
                value = direct(vm, fn, d, bound, x)
                if value is True:
                    keep(items[i - 1])      # (the item now there, as take reads it)
                elif value is not False:
                    driver.i = i
                    driver.take(value, f)   # a labelled answer, or not a Bool
        else:                               # map, sorted: on the Array being made
            append = acc.append
            for x in walk:
                direct = code.dx[1]
                if direct is None:
                    break
                i += 1
                append(direct(vm, fn, d, bound, x))
    except Deoptimize as stop:
        driver.i = i
        if kind == "reduce":
            driver.out = acc
        if stop.top is not None:
            # The callee's activations are frames now (see vm.call_t2).
            stop.top.caller = f
            vm.depth = stop.depth
            return True
        if vm.call_frame(f, fn, [acc, x] if kind == "reduce" else [x]):
            return True
        driver.take(f.stack.pop(), f)
        return False
    driver.i = i
    if kind == "reduce":
        driver.out = acc
    return False


def step(vm, f) -> bool:
    """The CALLBACK instruction: take the result of the call that returned (if one did), then
    make the next call, or return the method's result to the caller. Always True: the frame
    either called (a frame was pushed) or returned."""
    stack = f.stack
    driver = stack[0]
    if len(stack) == 2:
        driver.take(stack.pop(), f)
    budget = vm.budget
    # Under a pc label every call is a frame of its own, which the label covers (the frame's
    # labels do not change while it calls: each call returns before the next).
    tiered = vm.tier != "1" and not f.pc
    f.ip = 0            # every call returns here: to this instruction, with its result pushed
    items = driver.items
    fn = driver.fn
    code = fn.code if type(fn) is Closure else None
    direct_calls = tiered and code is not None
    # Callback.args and Callback.take, written out for the calls of a direct form below: map's
    # and sorted's results go on the Array being made (always the same one), reduce's
    # becomes the accumulator, and filter's keeps the item on a plain true (take otherwise).
    kind = driver.kind
    reduce = kind == "reduce"
    arity = 2 if reduce else 1
    append = driver.out.append if kind == "map" or kind == "sorted" else None
    keep = driver.out.append if kind == "filter" else None
    # The depth and bound of a direct call (frames.DIRECT_BOUND): this frame's depth holds
    # while it calls, each call having returned before the next.
    d = vm.depth + 1
    bound = d + DIRECT_REACH if d < vm.direct_cap else vm.max_depth
    if direct_calls and budget is None and _direct_run(vm, f, driver, code, arity, d, bound):
        return True
    while driver.i < len(items):
        x = items[driver.i]
        driver.i += 1
        if budget is not None:      # a call: a step, as CALL's is
            vm.count_step()
        # A function with a direct form is called here, as vm.call_t2 would call it (its
        # result not pushed on this frame's stack only to be popped again); dx is read afresh
        # for every call: the first makes the direct form.
        direct = code.dx[arity] if direct_calls else None
        if direct is not None:
            try:
                if reduce:
                    value = direct(vm, fn, d, bound, driver.out, x)
                else:
                    value = direct(vm, fn, d, bound, x)
            except Deoptimize as stop:
                if stop.top is not None:
                    # The callee's activations are frames now (see vm.call_t2).
                    stop.top.caller = f
                    vm.depth = stop.depth
                    return True
                pushed = vm.call_frame(f, fn, [driver.out, x] if reduce else [x])
            else:
                if append is not None:
                    append(value)
                elif reduce:
                    driver.out = value
                elif value is True:
                    keep(items[driver.i - 1])   # (the item now there, as take reads it)
                elif value is not False:
                    driver.take(value, f)       # a labelled answer, or not a Bool
                continue
        elif tiered:
            pushed = vm.call_t2(f, fn, [driver.out, x] if reduce else [x])
        else:
            pushed = vm._call(f, fn, [driver.out, x] if reduce else [x])
        if pushed:
            return True
        driver.take(stack.pop(), f)
    result = driver.finish()
    if f.pc:
        result = PV.label(result, f.pc[-1][1])     # made under a labelled branch
    caller = f.caller
    vm.frame = caller
    vm.depth -= 1
    caller.stack.append(result)
    return True
