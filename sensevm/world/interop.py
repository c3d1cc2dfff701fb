"""Python interop (spec 18.7) behind the ``python.import`` capability; see docs/interop.md.

Imported only when an ``IMPORT_PYTHON`` instruction runs (or a saved agent holding a Python
value is resumed): a program that does not use interop never loads this module or importlib.

Values crossing the boundary:

* into Python (``to_python``): Int, Float, String, Bool and nil are the same objects; an Array
  becomes a new list and a Map a new dict (cycles kept; a Python dict coming back stays a
  wrapped ``Python`` value, as the reference has it); a wrapped Python value is unwrapped; any
  other Sense value
  (a function, an action, a tool ...) goes as an opaque ``SenseValue`` that prints as Sense
  prints it and comes back as the very same Sense value, but exposes nothing of the VM.
* back into Sense: **only** through ``from_python`` -- call results, member reads, index reads
  and ``from python ... import`` all pass through it, so that one place can label such values
  (the provenance work marks them untrusted).

A wrapped object is a ``PyObject`` (``type_of`` says ``Python``); a callable read as a member or
imported by name is a ``PyFunction`` (``type_of`` says ``Function``). Member names starting with
``_`` are refused (``__class__``, ``__globals__``, ``__builtins__``, ``_getframe`` ...): Sense sees
the public surface of a Python object only.
"""

from __future__ import annotations

from itertools import count

from sensevm.base.errors import SenseImportError, SensePolicyError, SenseRuntimeError
from sensevm.guard import policy as P
from sensevm.guard import provenance as PV
from sensevm.guard.audit import AuditRecord
from sensevm.runtime.values import sized_array, sized_string

CAPABILITY = "python.import"


# ----------------------------------------------------------------------------- wrappers

def _safe_str(obj) -> str:
    text = str(obj)
    return text if type(text) is str else str.__str__(text)


class PyObject:
    """A Python value Sense has no type for: a module, a dict, a tuple, an instance ...

    ``origin`` is how it was reached by name -- ``(module, (attr, ...))`` for a module and
    what is read from it by member access -- or None for a value a call or an index made; a
    paused agent holding it can be saved only with an origin (it is fetched again on resume).
    """

    __slots__ = ("value", "label", "origin", "look")
    type_name = "Python"
    is_python = True

    def __init__(self, value, label: str, origin=None, look=None):
        self.value = value
        self.label = label
        self.origin = origin
        self.look = look        # the run's second look: what this object gives is untrusted
        if look is not None:
            PV.go_live()        # (its index reads, text, errors are labelled: see go_live)

    def __str__(self) -> str:
        try:
            return _safe_str(self.value)
        except Exception:       # a broken __str__ must not break print()
            return f"<python {self.label}>"

    def host_repr(self) -> str:
        """How int()/float() errors show it (as the reference does)."""
        return f"<python {self.label}>"

    def sense_origins(self) -> frozenset:
        """Its text is Python's, made from whatever Python read: untrusted, as its values are."""
        return PV.only(ORIGIN) if self.look is not None else PV.EMPTY

    def sense_member(self, vm, name: str):
        return read_member(self, name)

    def sense_import_from(self, vm, name: str):
        return read_member(self, name)

    def member_names(self):
        try:
            return sorted(n for n in dir(self.value) if not n.startswith("_"))
        except Exception:
            return []

    def sense_index(self, index):
        key = to_python(index)
        try:
            item = self.value[key]
        except Exception as exc:
            raise _python_error(f"python error indexing: {_describe(exc)}", self.look) from None
        return from_python(item, look=self.look)

    def sense_store_index(self, index, value) -> None:
        key, item = to_python(index), to_python(value)
        try:
            self.value[key] = item
        except Exception as exc:
            raise _python_error(f"python error setting index: {_describe(exc)}",
                                self.look) from None

    def sense_equal(self, other) -> bool:
        if self.label != other.label:
            return False
        if self.value is other.value:
            return True
        try:
            return bool(self.value == other.value)
        except Exception as exc:
            raise _python_error(f"python error comparing: {_describe(exc)}", self.look) from None


class PyFunction:
    """A Python callable read by name: a Sense Function (positional arguments only)."""

    __slots__ = ("fn", "name", "origin", "look")
    type_name = "Function"
    is_function = True
    is_python = True
    is_builtin = True       # a labelled call is refused the way a builtin refuses it
    labels = False

    def __init__(self, fn, member: str, origin=None, look=None):
        self.fn = fn
        self.name = f"<python>.{member}"
        self.origin = origin
        self.look = look

    def __str__(self) -> str:
        return f"<builtin {self.name}>"

    def sense_call(self, vm, frame, args) -> bool:
        py_args = [to_python(a) for a in args]
        try:
            result = self.fn(*py_args)
        except (Exception, SystemExit) as exc:
            # SystemExit too: Python code must not end the run behind the VM's back (the audit
            # sink, session log and saved agents are closed by the run, not by the host).
            raise _python_error(f"python error calling {_callable_name(self.fn)}: "
                                f"{_describe(exc)}", self.look if self.look is not None
                                else vm.look) from None
        frame.stack.append(from_python(result, look=self.look if self.look is not None
                                       else vm.look))
        return False


class SenseValue:
    """A Sense value with no Python counterpart, handed to Python code: opaque, printable.

    It holds a number, not the value: the value stays in ``_HANDED`` until the wrapper is
    dropped, so Python code given one (a library that sets attributes on what it is passed,
    say) finds nothing of the VM on it -- no action whose ``approved`` it could set. This is
    not a wall against Python code that means harm: ``python.import`` is the whole host
    (docs/interop.md), and such code can reach any object of the process."""

    __slots__ = ("_token",)

    def __init__(self, value):
        token = next(_TOKENS)
        _HANDED[token] = value
        object.__setattr__(self, "_token", token)

    def __setattr__(self, name, value):
        raise AttributeError("a Sense value seen from Python cannot be changed")

    __delattr__ = __setattr__

    def __del__(self):
        _HANDED.pop(self._token, None)

    def __str__(self) -> str:
        from sensevm.runtime.values import to_str
        return to_str(_HANDED[self._token])

    __repr__ = __str__


_TOKENS = count(1)          # next() on a count is atomic: threads share it
_HANDED: dict = {}          # SenseValue token -> the Sense value it stands for


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _python_error(message: str, look) -> SenseRuntimeError:
    """An error whose message quotes Python's own text (an exception's message, which may show
    whatever the Python code read): as untrusted as Python's values are."""
    err = SenseRuntimeError(message)
    return err.quoting(PV.only(ORIGIN)) if look is not None else err


def _callable_name(fn) -> str:
    try:
        name = getattr(fn, "__name__", "python callable")
        return name if type(name) is str else "python callable"
    except Exception:
        return "python callable"


# ----------------------------------------------------------------------------- conversions

ORIGIN = PV.untrusted("python")     # what Python code returns is outside content


def from_python(value, *, member=None, origin=None, look=None):
    """THE way a Python value enters Sense: every call result, member read, index read and
    imported name passes here (provenance hooks in here).

    Ints, Floats, Strings, Bools and None become the Sense values (subclasses such as an
    IntEnum member become the plain value); lists become new Arrays, element by element
    (cycles kept); anything else is wrapped. A callable read by name (``member``) becomes a
    Function; a callable returned by a call or an index stays a wrapped ``Python`` value, as
    in the reference.

    With the second look on (``look``), the data is labelled untrusted: Python code may have
    read it from anywhere (docs/second_look.md)."""
    t = type(value)
    if value is None or t is int or t is float or t is str or t is bool:
        if t is str:
            sized_string(value)
        return value if look is None or value is None else _untrusted(value, look)
    if member is not None and callable(value):
        return PyFunction(value, member, origin, look)
    out = _convert(value, origin, None, look)
    return out if look is None else _untrusted(out, look)


def _untrusted(value, look):
    if type(value) in (PyObject, PyFunction):
        return value
    look.live = True
    return PV.label(value, PV.only(ORIGIN))


def _convert(value, origin, memo, look=None):
    t = type(value)
    if value is None or t is int or t is float or t is bool:
        return value
    if t is str:
        return sized_string(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return sized_string(str.__str__(value))
    if isinstance(value, list):
        sized_array(value)          # before a copy is made
        return _copy_list(value, memo, lambda item, m: _convert(item, None, m, look))
    if t is SenseValue:
        return _HANDED[value._token]
    return PyObject(value, t.__name__, origin, look)


def _copy_list(items: list, memo, convert) -> list:
    """A new list of ``convert(item, memo)``, across the boundary either way; ``memo`` keeps a
    list that contains itself (or another list twice) the same shape on the other side."""
    if memo is None:
        memo = {}
    done = memo.get(id(items))
    if done is not None:
        return done
    out: list = []
    memo[id(items)] = out
    for item in list(items):
        out.append(convert(item, memo))
    return out


def _copy_map(items: dict, memo) -> dict:
    """A Map as a new dict (plain keys), the same shape on the other side as _copy_list."""
    if memo is None:
        memo = {}
    done = memo.get(id(items))
    if done is not None:
        return done
    out: dict = {}
    memo[id(items)] = out
    for key, item in list(items.items()):
        out[PV.plain(key)] = to_python(item, memo)
    return out


def to_python(value, memo=None):
    """A Sense value as Python code receives it (a call's arguments, an index, a stored item)."""
    t = type(value)
    if value is None or t is int or t is float or t is str or t is bool:
        return value
    if t in PV.LABELLED:
        return PV.plain(value)
    if t is list:
        return _copy_list(value, memo, to_python)
    if t is dict:
        return _copy_map(value, memo)
    if t is PyObject:
        return value.value
    if t is PyFunction:
        return value.fn
    return SenseValue(value)


# ----------------------------------------------------------------------------- members

def read_member(obj: PyObject, name: str):
    if name.startswith("_"):
        raise SenseRuntimeError(
            f"python member '{name}' of {obj.label} is not accessible from Sense "
            "(names starting with '_' are refused)")
    try:
        attr = getattr(obj.value, name)
    except AttributeError:
        raise SenseRuntimeError(f"{obj.label} has no attribute '{name}'") from None
    except Exception as exc:
        raise _python_error(f"python error reading {name}: {_describe(exc)}",
                            obj.look) from None
    origin = None if obj.origin is None else (obj.origin[0], obj.origin[1] + (name,))
    return from_python(attr, member=name, origin=origin, look=obj.look)


# ----------------------------------------------------------------------------- import

def import_module(vm, frame, name: str) -> PyObject:
    """IMPORT_PYTHON: the capability check (audited host-side), then importlib."""
    line = frame.pos.line
    why = P.host_refusal(CAPABILITY, frame.scope, frame, vm.dry_run, vm.dry_run_allow)
    if why is not None:
        how = {P.DENY: f"capability '{CAPABILITY}' denied by policy",
               P.DRY_RUN: f"a dry run without --dry-run-allow {CAPABILITY}"}.get(
                   why, f"capability '{CAPABILITY}' not allowed by any policy")
        _record(vm, frame, name, "denied", line, how)
        if why == P.DENY:       # the deciding rule, where it is and the call chain
            raise P.denial(f"python module {name!r}", CAPABILITY, frame.scope, frame)
        raise SensePolicyError(f"python module {name!r} {P.refusal_text(CAPABILITY, why)}")
    module = load(name, vm.look)
    _record(vm, frame, name, "imported", line)
    return module


def load(name: str, look=None) -> PyObject:
    """The module ``name``, wrapped (no capability check: import_module made it)."""
    import importlib
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise SenseImportError(f"python module not found: {name!r} ({exc})") from None
    except (TypeError, ValueError) as exc:      # a relative or empty name
        raise SenseImportError(f"python module not found: {name!r} ({exc})") from None
    except (Exception, SystemExit) as exc:      # the module's own code failed
        raise SenseImportError(f"python error importing {name!r}: {_describe(exc)}") from None
    return PyObject(module, f"module '{name}'", (name, ()), look)


def _record(vm, frame, name: str, event: str, line: int, detail=None) -> None:
    # Host-side only (like approvals, spec 21.9): audit_log() and dry-run summaries keep the
    # reference's lines; the durable --audit-log trail has every import and every refusal.
    vm.audit.append(AuditRecord.make(f"python module '{name}'", name, "python", event, detail,
                                     line, vm.lineage(frame), True))


# ----------------------------------------------------------------------------- saving agents

def saved_form(v) -> dict | None:
    """How a paused agent's state records a Python value, or None if it cannot be saved."""
    if v.origin is None:
        return None
    module, attrs = v.origin
    return {"type": "python", "module": module, "attrs": list(attrs),
            "function": type(v) is PyFunction}


def restore(raw: dict, look=None):
    """Fetch a saved Python value again by the names it was reached by (on resume)."""
    obj = load(raw["module"], look)
    for attr in raw["attrs"]:
        if type(obj) is not PyObject:
            break
        obj = read_member(obj, attr)
    if type(obj) is not (PyFunction if raw["function"] else PyObject):
        path = ".".join([raw["module"]] + list(raw["attrs"]))
        raise SenseRuntimeError(f"cannot restore Python value {path}: it is no longer what "
                                "the agent was saved with", located=False)
    return obj
