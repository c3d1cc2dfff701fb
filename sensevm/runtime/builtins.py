"""The core builtin functions of spec section 9, bound in the outermost scope shared by all modules."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing would slow every start
    from typing import Any


from sensevm.base.errors import SenseError, SenseRuntimeError
from sensevm.guard import provenance as PV
from sensevm.guard.provenance import LABELLED
from sensevm.runtime import services
from sensevm.runtime import values as V
from sensevm.runtime.limits import FREE_DIGITS, array_limit
from sensevm.runtime.values import (Builtin, Scope, host_repr, sized_array, str_form, to_str,
                                    type_name)


def _error(message: str) -> SenseRuntimeError:
    # Errors raised by a builtin's own body carry no line (spec 9.1).
    return SenseRuntimeError(message, located=False)


def b_print(vm, args):
    vm.write(" ".join([to_str(a) for a in args]) + "\n")
    return None


def b_len(vm, args):
    x = args[0]
    if type(x) is list:
        if PV.live:
            # How many items an Array holds is as much the data's as the items are: range()
            # of a tool's count, or the lines of a page (tier 2 inlines only the other case).
            return PV.like(len(x), x)
        return len(x)
    if type(x) is str:
        return len(x)
    if type(x) is dict:
        # A Map's size is its keys' and values' as an Array's is its items'.
        return PV.like(len(x), x) if PV.live else len(x)
    if type(x) is PV.LStr:
        return PV.label(len(x), PV.origins_of(x))
    raise _error(f"len() not supported for type {type_name(x)}")


def b_range(vm, args):
    if not 1 <= len(args) <= 3:
        raise _error("range() expects 1 to 3 arguments")
    if any(type(a) in LABELLED for a in args):
        return PV.like(b_range(vm, [PV.plain(a) for a in args]), *args)
    for a in args:
        # Bool passes, as in the reference (its host treats True as 1).
        if not isinstance(a, int):
            raise _error(f"range() arguments must be Int, got {type_name(a)}")
    if len(args) == 3 and args[2] == 0:
        raise _error("range() step must not be zero")
    r = range(*args)
    try:
        n = len(r)
    except OverflowError:       # more than a C ssize_t: count them by hand
        n = -((r.start - r.stop) // r.step)
    if n > vm.max_array:
        raise array_limit(n, vm.max_array, located=False)
    return list(r)


def b_str(vm, args):
    return str_form(args[0])        # (an f-string's FORMAT_VALUE gives the same)


def b_int(vm, args):
    x = args[0]
    t = type(x)
    if t in LABELLED:
        try:
            return PV.label(b_int(vm, [PV.plain(x)]), PV.origins_of(x))
        except SenseError as err:                   # "cannot convert 'x@evil' to Int"
            raise err.quoting(PV.origins_of(x))
    try:
        if t is int:
            return x
        if t is str and len(x) > FREE_DIGITS:
            _check_digits(x)
        if t is bool or t is float or t is str:
            return int(x)
    except (ValueError, OverflowError):
        pass
    raise _error(f"cannot convert {host_repr(x)} to Int")


def _check_digits(text: str) -> None:
    """Refuse int() of a String of more digits than can be converted in the time given
    (conversions.check_conversion); a String that is not a number is left to fail as usual."""
    from sensevm.runtime.conversions import check_conversion
    body = text.strip()
    if body[:1] in ("+", "-"):
        body = body[1:]
    digits = len(body) - body.count("_")
    if digits > FREE_DIGITS and body.replace("_", "").isdecimal():
        check_conversion(digits, "int() of a String", V.BUDGET, to_text=False)


def b_float(vm, args):
    x = args[0]
    t = type(x)
    if t in LABELLED:
        try:
            return PV.label(b_float(vm, [PV.plain(x)]), PV.origins_of(x))
        except SenseError as err:                   # "cannot convert 'x@evil' to Float"
            raise err.quoting(PV.origins_of(x))
    try:
        if t is float:
            return x
        if t is int or t is bool or t is str:
            return float(x)
    except OverflowError:
        raise _error("Int too large to convert to Float") from None
    except ValueError:
        pass
    raise _error(f"cannot convert {host_repr(x)} to Float")


def b_type_of(vm, args):
    x = args[0]
    if type(x) in LABELLED:
        return PV.label(type_name(x), PV.origins_of(x))     # the value's, so its type's too
    return type_name(x)


def b_push(vm, args):
    arr, value = args
    if type(arr) is not list:
        raise _error("push() expects an Array as its first argument")
    if len(arr) >= vm.max_array:
        raise array_limit(len(arr) + 1, vm.max_array, located=False)
    arr.append(value)
    if PV.SHAPES:
        PV.pushed(arr)
    return arr


def b_assert(vm, args):
    if not 1 <= len(args) <= 2:
        raise _error("assert() expects 1 or 2 arguments")
    if not args[0]:
        if len(args) == 2:
            raise _error(to_str(args[1])).quoting(PV.deep_origins(args[1]))
        raise _error("assertion failed")
    return None


def b_user_request(vm, args):
    """The run's request as the user typed it (``sensevm run --request``), or nil."""
    return vm.request


def b_audit_log(vm, args):
    return sized_array(vm.audit.lines())


def b_await(vm, args):
    x = args[0]
    awaitable = getattr(x, "sense_await", None)
    if awaitable is None:
        raise SenseRuntimeError(f"await() expects an Agent or a Future, got {type_name(x)}")
    return awaitable(vm)


def _retired(message: str):
    def fn(vm, args):
        raise _error(message)
    return fn


CORE = [
    Builtin("print", b_print, pure=True),
    Builtin("len", b_len, 1, pure=True),
    Builtin("range", b_range, pure=True),
    Builtin("str", b_str, 1, pure=True),
    Builtin("int", b_int, 1, pure=True),
    Builtin("float", b_float, 1, pure=True),
    Builtin("type_of", b_type_of, 1, pure=True),
    Builtin("push", b_push, 2, pure=True),
    Builtin("assert", b_assert, pure=True),
    Builtin("audit_log", b_audit_log, 0, pure=True),
    Builtin("user_request", b_user_request, 0),
    Builtin("await", b_await, 1),
    Builtin("mock_model", _retired(
        'mock_model(...) has been replaced -- use inference("mock", ...) instead '
        '(e.g. inference("mock", "demo", response_template: "..."))')),
    Builtin("verify", _retired("verify(action) has been replaced -- use action.verify() instead")),
    Builtin("approve", _retired("approve(action) has been replaced -- use action.approve() instead")),
    Builtin("rollback", _retired("rollback(action) has been replaced -- use action.rollback() instead")),
]


def _session_open(vm, frame, args):
    # sessions.py is imported at the first session block: most programs never open one.
    from sensevm.runtime.sessions import b_session_open
    return b_session_open(vm, frame, args)


def _session_close(vm, frame, args):
    from sensevm.runtime.sessions import b_session_close
    return b_session_close(vm, frame, args)


# What the compiler emits for a session block (an '@' name no program can spell).
SESSIONS = [
    Builtin("@session_open", _session_open, 1, frames=True),
    Builtin("@session_close", _session_close, 0, frames=True),
]


def builtin_names() -> frozenset:
    """The name of every builtin a program starts with (a saved state may name only these)."""
    return frozenset(b.name for b in CORE + SESSIONS + services.PROVIDED)


def builtin_scope() -> Scope:
    """The outermost scope of a VM: the core builtins, and those the world installed."""
    scope = Scope(None, tag="builtins")
    for b in CORE + SESSIONS + services.PROVIDED:
        scope.vars[b.name] = b
    return scope
