"""The natives of std.json, std.re, std.time and std.env (docs/stdlib.md).

Registered with the others (``stdlib_native.REGISTRY``); the kinds and capabilities are the
contract's rows in ``sensevm/bytecode/natives.py``. Every function is ``fn(vm, args)``;
errors are SenseRuntimeErrors (or SenseTypeErrors) naming the Sense function, which the
NATIVE handler places at the program's call into the library.

Provenance. ``json.parse`` gives every String, number and Bool it makes the origins of the
span of text it was read from (a string's span includes its quotes and escapes), so one
untrusted field of a document stays untrusted and a trusted one stays clean. ``std.re``
results are slices of the subject (``PV.slice_str``: the origins of exactly the characters
kept) with the pattern's origins added (the pattern chose them). ``env.args()`` are the user's
words (origin ``user``); ``env.get`` is ``trusted:env``.

``regex`` (the well-kept engine with a time limit) is imported at the first ``std.re`` call
only; ``json``, ``datetime`` likewise at their first use.
"""

from __future__ import annotations

import math
from bisect import bisect_right

from sensevm.base.errors import SenseRuntimeError, SenseTypeError
from sensevm.guard import provenance as PV


def _type_name(v) -> str:
    from sensevm.runtime.values import type_name
    return type_name(v)


def _string(fn: str, what: str, value) -> str:
    t = PV.plain(value)
    if type(t) is not str:
        raise SenseTypeError(f"{fn}() expects {what} (String), got {_type_name(value)}")
    return t


def _fits(text: str) -> str:
    """``text``, refused when longer than the run's --max-string."""
    from sensevm.runtime import values as V
    if len(text) > V.MAX_STRING:
        from sensevm.runtime.limits import string_limit
        raise string_limit(len(text), V.MAX_STRING)
    return text


def _budget_check() -> None:
    from sensevm.runtime import values as V
    budget = V.BUDGET
    if budget is not None and budget.expired and budget.deadline is not None:
        raise budget.exceeded()


# ----------------------------------------------------------------------------- std.json

class _Origins:
    """The origins of any span of a (labelled) text, by its spans' starts."""

    __slots__ = ("spans", "starts")

    def __init__(self, text):
        self.spans = PV.spans_of(text)
        self.starts = [s[0] for s in self.spans]

    def of(self, a: int, b: int) -> frozenset:
        spans = self.spans
        k = max(bisect_right(self.starts, a) - 1, 0)
        out = PV.EMPTY
        while k < len(spans) and spans[k][0] < b:
            if spans[k][1] > a:
                out = PV.union(out, spans[k][2])
            k += 1
        return out


_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
            "t": "\t"}
_WS = " \t\n\r"
_NUMBER_START = "-0123456789"


class _JsonError(Exception):
    def __init__(self, what: str, at: int):
        self.what, self.at = what, at


class _Parser:
    """JSON (RFC 8259, as Python's json reads it less NaN and Infinity), iteratively, so a
    deep document cannot overflow the stack; every value with the origins of its span."""

    def __init__(self, text: str, labels):
        self.s = text
        self.labels = labels            # an _Origins, or None for a clean text

    def ws(self, i: int) -> int:
        s, n = self.s, len(self.s)
        while i < n and s[i] in _WS:
            i += 1
        return i

    def lab(self, v, a: int, b: int):
        if self.labels is None:
            return v
        return PV.label(v, self.labels.of(a, b))

    def string(self, i: int):
        """The String starting at the quote at ``i``, and the index after its end quote."""
        s, n = self.s, len(self.s)
        start = i
        i += 1
        parts = []
        run = i
        while True:
            if i >= n:
                raise _JsonError("unterminated string", start)
            c = s[i]
            if c == '"':
                parts.append(s[run:i])
                i += 1
                break
            if c == "\\":
                parts.append(s[run:i])
                if i + 1 >= n:
                    raise _JsonError("unterminated string", start)
                e = s[i + 1]
                if e == "u":
                    code = self.hex4(i)
                    i += 6
                    if 0xD800 <= code < 0xDC00 and s.startswith("\\u", i):
                        low = self.hex4(i)
                        if 0xDC00 <= low < 0xE000:
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                            i += 6
                    parts.append(chr(code))
                elif e in _ESCAPES:
                    parts.append(_ESCAPES[e])
                    i += 2
                else:
                    raise _JsonError("invalid escape", i)
                run = i
                continue
            if c < " ":
                raise _JsonError("invalid control character in string", i)
            i += 1
        return self.lab("".join(parts), start, i), i

    def hex4(self, i: int) -> int:
        digits = self.s[i + 2:i + 6]
        if len(digits) < 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
            raise _JsonError("invalid \\u escape", i + 1)
        return int(digits, 16)

    def number(self, i: int):
        s, n = self.s, len(self.s)
        start = i
        if s[i] == "-":
            i += 1
        if i < n and s[i] == "0":
            i += 1
        elif i < n and "1" <= s[i] <= "9":
            while i < n and "0" <= s[i] <= "9":
                i += 1
        else:
            raise _JsonError("expected a value", start)     # a lone '-' (as Python says)
        is_float = False
        if i < n and s[i] == ".":
            i += 1
            if not (i < n and "0" <= s[i] <= "9"):
                raise _JsonError("expected a digit after '.'", i - 1)
            while i < n and "0" <= s[i] <= "9":
                i += 1
            is_float = True
        if i < n and s[i] in "eE":
            e = i
            i += 1
            if i < n and s[i] in "+-":
                i += 1
            if not (i < n and "0" <= s[i] <= "9"):
                raise _JsonError("expected a digit in the exponent", e)
            while i < n and "0" <= s[i] <= "9":
                i += 1
            is_float = True
        token = s[start:i]
        if is_float:
            value = float(token)
            if math.isinf(value):
                raise _JsonError("number out of range", start)
        else:
            if i - start > 4300:
                raise _JsonError("number too long", start)
            value = int(token)
        return self.lab(value, start, i), i

    def value(self, i: int):
        """A scalar at ``i`` (or None, None when a container starts there)."""
        s = self.s
        if i >= len(s):
            raise _JsonError("expected a value", i)
        c = s[i]
        if c == '"':
            return self.string(i)
        if c in _NUMBER_START:
            return self.number(i)
        for word, v in (("true", True), ("false", False), ("null", None)):
            if s.startswith(word, i):
                return self.lab(v, i, i + len(word)), i + len(word)
        if c in "[{":
            return None, None
        raise _JsonError("expected a value", i)

    def parse(self):
        s = self.s
        n = len(s)
        # The open containers: [container, key awaiting its value (a Map's) or None].
        stack = []
        i = self.ws(0)
        result = None
        while True:
            # A value at i.
            if i < n and s[i] in "[{":
                container = [] if s[i] == "[" else {}
                i = self.ws(i + 1)
                closer = "]" if type(container) is list else "}"
                if i < n and s[i] == closer:
                    v = container
                    i += 1
                else:
                    if len(stack) % 64 == 63:
                        _budget_check()
                    stack.append([container, None])
                    if closer == "}":
                        i = self.key(stack[-1], i)
                    continue
            else:
                v, i = self.value(i)
            # v is complete: put it in its container, then close what ends here.
            while True:
                if not stack:
                    i = self.ws(i)
                    if i < n:
                        raise _JsonError("extra data after the value", i)
                    return v
                top = stack[-1]
                container = top[0]
                if type(container) is list:
                    container.append(v)
                else:
                    container[top[1]] = v
                i = self.ws(i)
                closer = "]" if type(container) is list else "}"
                if i < n and s[i] == ",":
                    i = self.ws(i + 1)
                    if closer == "}":
                        i = self.key(top, i)
                    break
                if i < n and s[i] == closer:
                    i += 1
                    stack.pop()
                    v = container
                    continue
                raise _JsonError(f"expected ',' or '{closer}'", i)

    def key(self, top, i: int) -> int:
        """Read ``"key":`` at ``i`` into ``top``; the index of its value."""
        s = self.s
        if i >= len(s) or s[i] != '"':
            raise _JsonError("expected a key in double quotes", i)
        k, i = self.string(i)
        top[1] = k
        i = self.ws(i)
        if i >= len(s) or s[i] != ":":
            raise _JsonError("expected ':'", i)
        return self.ws(i + 1)


def n_json_parse(vm, args):
    source = args[0]
    text = _string("json.parse", "text", source)
    parser = _Parser(text, _Origins(source) if type(source) is PV.LStr else None)
    try:
        return parser.parse()
    except _JsonError as exc:
        line = text.count("\n", 0, exc.at) + 1
        column = exc.at - (text.rfind("\n", 0, exc.at) + 1) + 1
        end = " (the end of the text)" if exc.at >= len(text) else ""
        raise SenseRuntimeError(f"json.parse: {exc.what} at line {line}, column {column}{end}") \
            from None


def _jsonable(fn: str, v, seen: set):
    """``v`` as plain Python data for json.dumps, or an error naming what cannot be JSON."""
    t = type(v)
    if t is str or t is int or t is bool or v is None:
        return v
    if t is float:
        if math.isnan(v) or math.isinf(v):
            raise SenseRuntimeError(f"{fn}: {v!r} is not a JSON number")
        return v
    if t in PV.LABELLED:
        return _jsonable(fn, PV.plain(v), seen)
    if t is list or t is dict:
        if id(v) in seen:
            raise SenseRuntimeError(f"{fn}: a {_type_name(v)} that contains itself is not JSON")
        seen.add(id(v))
        if t is list:
            out = [_jsonable(fn, x, seen) for x in v]
        else:
            out = {PV.plain(k): _jsonable(fn, x, seen) for k, x in v.items()}
        seen.discard(id(v))
        return out
    raise SenseRuntimeError(f"{fn}: a value of type {_type_name(v)} is not JSON")


def _dump(fn: str, value, indent):
    import json
    try:
        data = _jsonable(fn, value, set())
    except RecursionError:
        raise SenseRuntimeError(f"{fn}: the value is nested too deeply") from None
    try:
        text = json.dumps(data, ensure_ascii=False, indent=indent, allow_nan=False)
    except RecursionError:
        raise SenseRuntimeError(f"{fn}: the value is nested too deeply") from None
    return PV.like(_fits(text), value)


def n_json_format(vm, args):
    return _dump("json.format", args[0], None)


def n_json_pretty(vm, args):
    return _dump("json.pretty", args[0], 2)


# ----------------------------------------------------------------------------- std.re

# The longest one regular-expression call may take (seconds), and less when the run's
# --timeout has less left.
RE_LIMIT = 1.0


def _regex_call(fn: str, pattern, subject, work):
    """``work(compiled, s, timeout)`` with the pattern compiled; a bad pattern, a timeout and
    a run's clock running out are each a clean error."""
    import regex
    p = _string(fn, "a pattern", pattern)
    s = _string(fn, "the text to search", subject)
    try:
        compiled = regex.compile(p)
    except regex.error as exc:
        where = f" at position {exc.pos}" if exc.pos is not None else ""
        err = SenseRuntimeError(f"{fn}: bad pattern {p!r}: {exc.msg}{where}")
        raise err.quoting(PV.origins_of(pattern)) from None
    from sensevm.runtime import values as V
    budget = V.BUDGET
    limit, by_clock = RE_LIMIT, False
    if budget is not None and budget.timeout is not None:
        left = budget.time_left()
        if left <= limit:
            limit, by_clock = max(left, 0.001), True
    try:
        return work(compiled, s, limit)
    except TimeoutError:
        if by_clock:
            raise budget.out_of_time(f"{fn}({p!r})") from None
        err = SenseRuntimeError(f"{fn}: pattern {p!r} timed out after {RE_LIMIT:g}s")
        raise err.quoting(PV.origins_of(pattern)) from None


def _with_pattern(v, pattern):
    return PV.label(v, PV.origins_of(pattern))


def n_re_matches(vm, args):
    p, s = args
    found = _regex_call("re.matches", p, s, lambda c, t, lim: c.fullmatch(t, timeout=lim))
    return PV.like(found is not None, p, s)


def n_re_find(vm, args):
    p, s = args
    m = _regex_call("re.find", p, s, lambda c, t, lim: c.search(t, timeout=lim))
    if m is None:
        return None
    return _with_pattern(PV.slice_str(s, m.start(), m.end()), p)


def n_re_find_all(vm, args):
    p, s = args
    spans = _regex_call("re.find_all", p, s,
                        lambda c, t, lim: [m.span() for m in c.finditer(t, timeout=lim)])
    return [_with_pattern(PV.slice_str(s, a, b), p) for a, b in spans]


def n_re_split(vm, args):
    p, s = args

    def work(c, t, lim):
        pieces, at = [], 0
        for m in c.finditer(t, timeout=lim):
            pieces.append((at, m.start()))
            for g in range(1, (c.groups or 0) + 1):
                pieces.append(m.span(g))
            at = m.end()
        pieces.append((at, len(t)))
        return pieces
    pieces = _regex_call("re.split", p, s, work)
    return [None if a < 0 else _with_pattern(PV.slice_str(s, a, b), p) for a, b in pieces]


def n_re_replace(vm, args):
    p, s, r = args
    template = _string("re.replace", "a replacement", r)
    r_origins = PV.origins_of(r)

    def work(c, t, lim):
        parts, at = [], 0
        for m in c.finditer(t, timeout=lim):
            parts.append(PV.slice_str(s, at, m.start()))
            try:
                put = m.expand(template)
            except (IndexError, ValueError) as exc:      # (regex.error is a ValueError)
                err = SenseRuntimeError(f"re.replace: bad replacement {template!r}: {exc}")
                raise err.quoting(r_origins) from None
            # What is put in comes from the replacement, and (through its group references)
            # from the matched text.
            parts.append(PV.label(put, PV.union(r_origins, PV.origins_of(
                PV.slice_str(s, m.start(), m.end())))) if put else put)
            at = m.end()
        parts.append(PV.slice_str(s, at, len(t)))
        return parts
    parts = _regex_call("re.replace", p, s, work)
    text = _fits("".join(str.__str__(x) for x in parts))
    return _with_pattern(PV.joined(parts, text), p)


# ----------------------------------------------------------------------------- std.time

def _seconds(fn: str, value) -> float:
    v = PV.plain(value)
    if type(v) is bool or not isinstance(v, (int, float)):
        raise SenseTypeError(f"{fn}() expects seconds (Int or Float), got {_type_name(value)}")
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        raise SenseRuntimeError(f"{fn}(): {v!r} is not a number of seconds")
    return v


def n_time_now(vm, args):
    import time
    return time.time()


def n_time_monotonic(vm, args):
    import time
    return time.monotonic()


def n_time_sleep(vm, args):
    import time
    s = _seconds("time.sleep", args[0])
    if s < 0:
        raise SenseRuntimeError(f"time.sleep(): negative duration ({s!r})")
    from sensevm.runtime import values as V
    budget = V.BUDGET
    if budget is not None and budget.timeout is not None:
        left = budget.time_left()
        if s > left:
            # The run's clock ends first: wait until it does, then end the run as it would.
            if left > 0:
                time.sleep(left)
            raise budget.out_of_time(f"sleep({s!r})")
    time.sleep(s)
    _budget_check()
    return None


def _utc(fn: str, value):
    from datetime import datetime, timezone
    t = _seconds(fn, value)
    try:
        return datetime.fromtimestamp(t, timezone.utc)
    except (OverflowError, OSError, ValueError):
        raise SenseRuntimeError(f"{fn}(): {t!r} is out of range") from None


def n_time_iso(vm, args):
    d = _utc("time.iso", args[0])
    text = d.strftime("%Y-%m-%dT%H:%M:%S")
    if d.microsecond:
        text += f".{d.microsecond:06d}".rstrip("0")
    return PV.like(text + "Z", args[0])


def n_time_today(vm, args):
    import time
    return _utc("time.today", time.time()).strftime("%Y-%m-%d")


# ----------------------------------------------------------------------------- std.env

def n_env_args(vm, args):
    return list(getattr(vm, "args", None) or ())


_ENV = PV.only(PV.trusted("env"))


def n_env_get(vm, args):
    import os
    name = _string("env.get", "a variable's name", args[0])
    if not name or "=" in name or "\x00" in name:
        raise SenseRuntimeError(f"env.get(): not a valid variable name {name!r}")
    value = os.environ.get(name)
    return None if value is None else PV.label(value, _ENV)


FUNCTIONS = {
    "json_parse": n_json_parse,
    "json_format": n_json_format,
    "json_pretty": n_json_pretty,
    "re_matches": n_re_matches,
    "re_find": n_re_find,
    "re_find_all": n_re_find_all,
    "re_replace": n_re_replace,
    "re_split": n_re_split,
    "time_now": n_time_now,
    "time_monotonic": n_time_monotonic,
    "time_sleep": n_time_sleep,
    "time_iso": n_time_iso,
    "time_today": n_time_today,
    "env_args": n_env_args,
    "env_get": n_env_get,
}
