"""The standard library's natives: the Python functions behind ``native::name(...)``.

The registry (``REGISTRY``) maps each native's name to ``(kind, capability, function)``:

* kind: ``tool``, ``reversible`` (a reversible action), ``irreversible`` (an irreversible
  action) or ``pure``;
* capability: the exact capability the declaration that calls it must require (None for a
  pure native);
* function: ``fn(vm, args) -> value``, args the popped operands (labelled values included).

The kinds and capabilities are the contract in ``sensevm/bytecode/natives.py`` (which the
compiler and the verifier read too); this module adds the functions, and the world's
``install`` hands the registry to the runtime (``services.native``). The VM's NATIVE handler
runs a non-pure native only in the body of a declaration of the native's kind whose declared
capability equals the native's: a library module declares an ordinary ``tool`` or ``action``
with ``requires CAP`` whose body calls the native, so the effect happens only through that
declaration's checks (a tool's capability check at each call; an action's verify, approval and
commit, dry run and sessions). See docs/stdlib.md.

Errors are SenseRuntimeErrors naming the function or the path; the handler places them at the
program's call into the library.
"""

from __future__ import annotations

import errno
import math
import os

from sensevm.base.errors import SenseRuntimeError, SenseTypeError
from sensevm.base.files import atomic_write
from sensevm.bytecode import natives as spec
from sensevm.guard import provenance as PV
from sensevm.world import std_net

_FILE = PV.only(PV.untrusted("file"))


def _type_name(v) -> str:
    from sensevm.runtime.values import type_name
    return type_name(v)


# ----------------------------------------------------------------------------- std.math

def _number(fn: str, x):
    """The plain number ``x`` (Int or Float, labelled or not), or a type error naming ``fn``."""
    v = PV.plain(x)
    if type(v) is bool or not isinstance(v, (int, float)):
        raise SenseTypeError(f"{fn}() expects a number (Int or Float), got {_type_name(x)}")
    return v


def _unary(fn: str, compute):
    def native(vm, args):
        x = args[0]
        v = _number(fn, x)
        try:
            result = compute(v)
        except OverflowError:
            raise SenseRuntimeError(f"{fn}() result too large") from None
        except ValueError:
            raise SenseRuntimeError(f"{fn}() math domain error for {v!r}") from None
        return PV.like(result, x)
    return native


def _sqrt(v):
    if v < 0:
        raise SenseRuntimeError(f"sqrt() of a negative number ({v!r})")
    return math.sqrt(v)


def _log(v):
    if v <= 0:
        raise SenseRuntimeError(f"log() of a number that is not positive ({v!r})")
    return math.log(v)


def _to_int(fn: str, f):
    def compute(v):
        if isinstance(v, float) and (math.isinf(v) or math.isnan(v)):
            raise SenseRuntimeError(f"{fn}() of {v!r} is not an Int")
        return f(v)
    return compute


def n_math_number(vm, args):
    name = PV.plain(args[0])
    _number(name, args[1])
    return args[1]


def n_math_pow(vm, args):
    x, y = args
    a, b = _number("pow", x), _number("pow", y)
    try:
        result = math.pow(a, b)
    except OverflowError:
        raise SenseRuntimeError("pow() result too large") from None
    except (ValueError, ZeroDivisionError):
        raise SenseRuntimeError(f"pow() math domain error for {a!r} and {b!r}") from None
    return PV.like(result, x, y)


def _pick(fn: str, better):
    def native(vm, args):
        x, y = args
        a, b = _number(fn, x), _number(fn, y)
        chosen = x if better(a, b) else y
        # The result is one argument's value, carrying both arguments' origins (either one
        # decided which it is).
        return PV.like(PV.plain(chosen), x, y)
    return native


def n_math_is_nan(vm, args):
    x = args[0]
    v = _number("is_nan", x)
    return PV.like(isinstance(v, float) and math.isnan(v), x)


def n_math_inf(vm, args):
    return math.inf


# ----------------------------------------------------------------------------- std.fs

_REASONS = {FileNotFoundError: "no such file or directory", IsADirectoryError: "is a directory",
            NotADirectoryError: "not a directory", PermissionError: "permission denied",
            FileExistsError: "already exists"}


def _path(fn: str, value) -> str:
    p = PV.plain(value)
    if type(p) is not str:
        raise SenseTypeError(f"{fn}() expects a path (String), got {_type_name(value)}")
    if not p or "\x00" in p:
        raise SenseRuntimeError(f"{fn}(): not a valid path {p!r}")
    return p


def _text(fn: str, value) -> str:
    t = PV.plain(value)
    if type(t) is not str:
        raise SenseTypeError(f"{fn}() expects text (String), got {_type_name(value)}")
    return t


def _fail(verb: str, path: str, exc: OSError, source=None) -> SenseRuntimeError:
    reason = _REASONS.get(type(exc)) or (exc.strerror or str(exc)).lower()
    err = SenseRuntimeError(f"cannot {verb} '{path}': {reason}")
    return err.quoting(PV.origins_of(source)) if source is not None else err


def _read_bytes(verb: str, path: str, source):
    """The file's bytes, or None when there is no file at ``path``."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _fail(verb, path, exc, source) from None


def n_fs_read_text(vm, args):
    path = _path("read_text", args[0])
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise _fail("read", path, exc, args[0]) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SenseRuntimeError(f"cannot read '{path}': not UTF-8 text (byte "
                                f"0x{data[exc.start]:02x} at offset {exc.start})") from None
    return PV.label(text, _FILE)


def n_fs_list_dir(vm, args):
    path = _path("list_dir", args[0])
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        raise _fail("list", path, exc, args[0]) from None
    return [PV.label(name, _FILE) for name in names]


def n_fs_exists(vm, args):
    return os.path.exists(_path("exists", args[0]))


def _previous(data):
    """A file's earlier state as the rollback block keeps it: nil (there was no file) or its
    bytes, one character per byte (latin-1), so that any bytes come back exactly."""
    return None if data is None else data.decode("latin-1")


def _write(verb: str, path: str, data: bytes, source) -> None:
    try:
        atomic_write(path, data)
    except OSError as exc:
        raise _fail(verb, path, exc, source) from None


def n_fs_write_text(vm, args):
    path = _path("write_text", args[0])
    text = _text("write_text", args[1])
    before = _read_bytes("write", path, args[0])
    _write("write", path, text.encode("utf-8"), args[0])
    return _previous(before)


def n_fs_append_text(vm, args):
    path = _path("append_text", args[0])
    text = _text("append_text", args[1])
    before = _read_bytes("append to", path, args[0])
    _write("append to", path, (before or b"") + text.encode("utf-8"), args[0])
    return _previous(before)


def n_fs_restore(vm, args):
    path = _path("restore", args[0])
    previous = PV.plain(args[1])
    if previous is None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise _fail("remove", path, exc, args[0]) from None
        return None
    if type(previous) is not str:
        raise SenseTypeError(f"restore() expects the previous state, got {_type_name(previous)}")
    try:
        data = previous.encode("latin-1")
    except UnicodeEncodeError:
        raise SenseRuntimeError(f"cannot restore '{path}': not a previous state") from None
    _write("restore", path, data, args[0])
    return None


def n_fs_make_dir(vm, args):
    path = _path("make_dir", args[0])
    if os.path.isdir(path):
        return False
    try:
        os.mkdir(path)
    except OSError as exc:
        raise _fail("make directory", path, exc, args[0]) from None
    return True


def n_fs_unmake_dir(vm, args):
    path = _path("make_dir", args[0])
    if PV.plain(args[1]) is True:
        try:
            os.rmdir(path)      # only an empty directory: what was put in it since stays
        except OSError:
            pass
    return None


def n_fs_remove(vm, args):
    path = _path("remove", args[0])
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            os.rmdir(path)
        else:
            os.remove(path)
    except OSError as exc:
        if exc.errno == errno.ENOTEMPTY:
            raise SenseRuntimeError(f"cannot remove '{path}': directory not empty") from None
        raise _fail("remove", path, exc, args[0]) from None
    return None


_FUNCTIONS = {
    "math_number": n_math_number,
    "math_floor": _unary("floor", _to_int("floor", math.floor)),
    "math_ceil": _unary("ceil", _to_int("ceil", math.ceil)),
    "math_round": _unary("round", _to_int("round", round)),
    "math_sqrt": _unary("sqrt", _sqrt),
    "math_pow": n_math_pow,
    "math_log": _unary("log", _log),
    "math_exp": _unary("exp", math.exp),
    "math_min": _pick("min", lambda a, b: a <= b),
    "math_max": _pick("max", lambda a, b: a >= b),
    "math_is_nan": n_math_is_nan,
    "math_inf": n_math_inf,
    "fs_read_text": n_fs_read_text,
    "fs_list_dir": n_fs_list_dir,
    "fs_exists": n_fs_exists,
    "fs_write_text": n_fs_write_text,
    "fs_append_text": n_fs_append_text,
    "fs_restore": n_fs_restore,
    "fs_make_dir": n_fs_make_dir,
    "fs_unmake_dir": n_fs_unmake_dir,
    "fs_remove": n_fs_remove,
}
_FUNCTIONS.update(std_net.FUNCTIONS)     # std.http, std.email, std.shell

from sensevm.world.std_data import FUNCTIONS as _STD_DATA  # noqa: E402  std.json, re, time, env
_FUNCTIONS.update(_STD_DATA)

# name -> (kind, capability, function): the contract's rows with their functions.
REGISTRY = {name: (kind, cap, _FUNCTIONS[name]) for name, (kind, cap) in spec.SPECS.items()}
