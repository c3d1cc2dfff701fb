"""Light record classes: what the VM's data classes need from ``dataclasses``, without importing it.

``sensevm run`` imports the program tables, the verifier and the audit log on every start.
``@dataclass`` would cost several milliseconds there: ``import dataclasses`` pulls in
``inspect`` (and with it ``ast``, ``dis``, ``tokenize`` ...), and every decorated class
compiles its generated methods with ``exec``. ``@record`` gives the same class shape from
plain closures: fields are the annotated names in order, a class attribute is the field's
default, ``Factory(f)`` a default made by calling ``f``; the constructor takes them
positionally or by keyword; equality and hashing are by the fields (unless ``eq=False``); the
repr is ``Name(field=value, ...)``; a frozen record refuses assignment.

``dataclasses.fields``, ``replace`` and ``asdict`` still work on records (tests and tools use
them): ``__dataclass_fields__`` is built on first access, which is the only time
``dataclasses`` is imported.
"""

from __future__ import annotations

_MISSING = object()


class Factory:
    """A default computed per instance, like ``field(default_factory=...)``."""

    __slots__ = ("make",)

    def __init__(self, make):
        self.make = make


class FrozenError(AttributeError):
    """Assignment to a field of a frozen record."""


class _DataclassFields:
    """``__dataclass_fields__``, made (from a real dataclass twin) the first time it is read."""

    def __get__(self, obj, cls):
        import dataclasses
        specs = []
        for name in cls._record_fields:
            default = cls._record_defaults.get(name, _MISSING)
            if default is _MISSING:
                specs.append((name, object))
            elif isinstance(default, Factory):
                specs.append((name, object, dataclasses.field(default_factory=default.make)))
            else:
                specs.append((name, object, dataclasses.field(default=default)))
        fields = dataclasses.make_dataclass(cls.__name__, specs).__dataclass_fields__
        type.__setattr__(cls, "__dataclass_fields__", fields)
        return fields


def record(cls=None, *, frozen: bool = True, eq: bool = True):
    """Make ``cls`` a record class (see the module docstring); usable with or without arguments."""
    if cls is None:
        return lambda c: _make(c, frozen, eq)
    return _make(cls, frozen, eq)


def _make(cls, frozen: bool, eq: bool):
    names = tuple(cls.__dict__.get("__annotations__", {}))
    defaults = {n: cls.__dict__[n] for n in names if n in cls.__dict__}
    for n, value in defaults.items():
        if isinstance(value, Factory):
            delattr(cls, n)            # an instance always has its own value
    seen_default = False
    for n in names:
        if n in defaults:
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default argument {n!r} follows default argument")
    count = len(names)
    title = cls.__qualname__

    if "__init__" not in cls.__dict__:
        def __init__(self, *args, **kwargs):
            if len(args) > count:
                raise TypeError(f"{title}.__init__() takes {count + 1} positional arguments "
                                f"but {len(args) + 1} were given")
            values = dict(zip(names, args))
            for key, value in kwargs.items():
                if key not in defaults and key not in names:
                    raise TypeError(f"{title}.__init__() got an unexpected keyword argument {key!r}")
                if key in values:
                    raise TypeError(f"{title}.__init__() got multiple values for argument {key!r}")
                values[key] = value
            if len(values) < count:
                for n in names:
                    if n not in values:
                        default = defaults.get(n, _MISSING)
                        if default is _MISSING:
                            raise TypeError(f"{title}.__init__() missing 1 required positional "
                                            f"argument: {n!r}")
                        values[n] = default.make() if isinstance(default, Factory) else default
            self.__dict__.update(values)
        cls.__init__ = __init__

    def __repr__(self):
        inner = ", ".join(f"{n}={self.__dict__[n]!r}" for n in names)
        return f"{title}({inner})"
    cls.__repr__ = __repr__

    if eq:
        def __eq__(self, other):
            if other.__class__ is self.__class__:
                mine, theirs = self.__dict__, other.__dict__
                # As a tuple, like dataclasses: an identical NaN counts as equal.
                return tuple(mine[n] for n in names) == tuple(theirs[n] for n in names)
            return NotImplemented
        cls.__eq__ = __eq__
        if frozen:
            def __hash__(self):
                d = self.__dict__
                return hash(tuple(d[n] for n in names))
            cls.__hash__ = __hash__
        else:
            cls.__hash__ = None

    if frozen:
        def __setattr__(self, name, value):
            raise FrozenError(f"cannot assign to field {name!r}")

        def __delattr__(self, name):
            raise FrozenError(f"cannot delete field {name!r}")
        cls.__setattr__ = __setattr__
        cls.__delattr__ = __delattr__

    cls.__match_args__ = names
    cls._record_fields = names
    cls._record_defaults = defaults
    cls.__dataclass_fields__ = _DataclassFields()
    return cls
