"""The abstract syntax tree: immutable slotted records, every node with the position of its key token.

Which token a node's ``pos`` names matters, because run-time errors report it (spec 17.1):
a call's ``(``, a member's name, an index's ``[``, a binary operator, a name's first letter.
Blocks are tuples of statements. Nothing here knows about bytecode.
"""

from __future__ import annotations

from typing import Optional

from sensevm.base.errors import Pos


class Node:
    """Base of all nodes. Subclasses are made by @node (below); the first field is ``pos``."""

    __slots__ = ()
    pos: Pos

    # Set by @node: every field's name, and those that may hold nodes (all but ``pos``).
    _fields: tuple = ()
    _child_fields: tuple = ()

    def children(self):
        """Every child node (through tuples too), in field order, as a list."""
        out = []
        for name in self._child_fields:
            value = getattr(self, name)
            if isinstance(value, Node):
                out.append(value)
            elif isinstance(value, tuple):
                for item in value:
                    if isinstance(item, Node):
                        out.append(item)
        return out


class FrozenNodeError(AttributeError):
    """Assignment to a field of a node (nodes are immutable)."""


def _init(cls, names: tuple, defaults: dict):
    """The constructor: one store per field through the slot's own setter (compiled, since
    the parser makes a node for nearly every token; ``object.__setattr__`` per field was slower)."""
    env, params = {}, []
    for i, name in enumerate(names):
        env[f"_s{i}"] = cls.__dict__[name].__set__
        if name in defaults:
            env[f"_d{i}"] = defaults[name]
            params.append(f"{name}=_d{i}")
        else:
            params.append(name)
    exec(f"def __init__(self, {', '.join(params)}):\n"
         + "".join(f"    _s{i}(self, {name})\n" for i, name in enumerate(names)) + "    pass\n",
         env)
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _node_eq(self, other):
    if other.__class__ is not self.__class__:
        return NotImplemented
    # As dataclasses compare: field tuples, so an identical NaN counts as equal.
    return tuple(getattr(self, f) for f in self._fields) == \
        tuple(getattr(other, f) for f in other._fields)


def _node_hash(self):
    return hash(tuple(getattr(self, f) for f in self._fields))


def _node_repr(self):
    inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
    return f"{type(self).__qualname__}({inner})"


def _node_setattr(self, name, value):
    raise FrozenNodeError(f"cannot assign to field {name!r}")


def _node_delattr(self, name):
    raise FrozenNodeError(f"cannot delete field {name!r}")


def node(cls):
    """Make ``cls`` a node class: its annotated names, in order, are its fields (a class
    attribute is the field's default); slots, a constructor taking them positionally or by
    keyword, equality and hashing by the fields, a ``Name(field=value, ...)`` repr, and no
    assignment after construction.

    What ``@dataclass(frozen=True, slots=True)`` made, built here because every ``sensec`` and
    every ``sensevm run FILE.sns`` defines these classes: the dataclass machinery (importing
    ``dataclasses`` and ``inspect``, then generating, compiling and re-creating each class)
    was half of their start-up.
    """
    names = tuple(cls.__dict__.get("__annotations__", {}))
    defaults = {name: cls.__dict__[name] for name in names if name in cls.__dict__}
    body = {k: v for k, v in cls.__dict__.items()
            if k not in defaults and k not in ("__dict__", "__weakref__")}
    body["__slots__"] = names
    new = type(cls)(cls.__name__, cls.__bases__, body)
    new.__qualname__ = cls.__qualname__
    new._fields = names
    new._child_fields = tuple(name for name in names if name != "pos")
    new.__match_args__ = names
    new.__init__ = _init(new, names, defaults)
    new.__eq__, new.__hash__, new.__repr__ = _node_eq, _node_hash, _node_repr
    new.__setattr__, new.__delattr__ = _node_setattr, _node_delattr
    return new


# ----------------------------------------------------------------------------- types and helpers

@node
class TypeRef(Node):
    """An annotation as written: ``Int``, ``Array<String>``, ``Answer<Int>``."""
    pos: Pos
    name: str
    args: tuple["TypeRef", ...] = ()

    @property
    def text(self) -> str:
        if not self.args:
            return self.name
        return f"{self.name}<{', '.join(a.text for a in self.args)}>"


@node
class Param(Node):
    pos: Pos
    name: str
    type: Optional[TypeRef] = None


@node
class Label(Node):
    """A labelled call argument ``name: value`` (only ``inference`` accepts them)."""
    pos: Pos
    name: str
    value: "Expr"


@node
class ModRef(Node):
    """What an import names: a string path (``"lib/util.sns"``) or a dotted name (``lib.util``)."""
    pos: Pos
    text: str
    is_string: bool


@node
class ImportName(Node):
    pos: Pos
    name: str
    alias: Optional[str] = None


@node
class Rule(Node):
    """One policy rule: ``allow web.search`` / ``deny payment.execute``."""
    pos: Pos
    effect: str          # "allow" | "deny"
    capability: str


# ----------------------------------------------------------------------------- expressions

class Expr(Node):
    __slots__ = ()


@node
class IntLit(Expr):
    pos: Pos
    value: int


@node
class FloatLit(Expr):
    pos: Pos
    value: float


@node
class StrLit(Expr):
    pos: Pos
    value: str


@node
class BoolLit(Expr):
    pos: Pos
    value: bool


@node
class NilLit(Expr):
    pos: Pos


@node
class Name(Expr):
    pos: Pos
    name: str


@node
class ArrayLit(Expr):
    pos: Pos            # the '['
    items: tuple[Expr, ...]


@node
class MapEntry(Node):
    """One ``key: value`` of a map literal (not a level of nesting: its key and value are)."""
    pos: Pos            # the key's first token
    key: "Expr"
    value: "Expr"


@node
class MapLit(Expr):
    """``{k: v, ...}`` (EXTENSIONS.md E1): entries in source order."""
    pos: Pos            # the '{'
    entries: tuple[MapEntry, ...]


@node
class Unary(Expr):
    pos: Pos            # the operator
    op: str             # "-" | "not"
    operand: Expr


@node
class Binary(Expr):
    pos: Pos            # the operator
    op: str             # + - * / % == != < <= > >= in, "not in"
    left: Expr
    right: Expr


@node
class Logical(Expr):
    pos: Pos            # the operator
    op: str             # "and" | "or"
    left: Expr
    right: Expr


@node
class Call(Expr):
    pos: Pos            # the '('
    callee: Expr
    args: tuple[Expr, ...]
    labels: tuple[Label, ...] = ()


@node
class NativeCall(Expr):
    """``native::name(args)``: a call of a standard-library native (stdlib files only)."""
    pos: Pos            # the word 'native'
    name: str
    args: tuple[Expr, ...]


@node
class Member(Expr):
    pos: Pos            # the member name after '.'
    obj: Expr
    name: str


@node
class Index(Expr):
    pos: Pos            # the '['
    obj: Expr
    index: Expr


@node
class Assign(Expr):
    """``target = value`` as an expression; target is a Name or an Index (checked by the parser)."""
    pos: Pos            # the '='
    target: Expr
    value: Expr


@node
class Slice(Expr):
    """``obj[lower:upper]``, either bound left out (None): a new String or Array."""
    pos: Pos            # the '['
    obj: Expr
    lower: Optional[Expr]
    upper: Optional[Expr]


@node
class CompoundAssign(Expr):
    """``target OP= value``, which is ``target = target OP value`` with the container and
    index of an Index target evaluated once; target is a Name or an Index (checked by the
    parser)."""
    pos: Pos            # the operator
    op: str             # + - * / %
    target: Expr
    value: Expr


@node
class FString(Expr):
    """``f"text {expr} text"``: ``parts`` are Strings of text and the expressions, in order;
    ``text`` is the literal as written (``sensec fmt`` prints it so)."""
    pos: Pos            # the 'f'
    text: str
    parts: tuple


# ----------------------------------------------------------------------------- statements

class Stmt(Node):
    __slots__ = ()


Block = tuple  # tuple[Stmt, ...]


@node
class ExprStmt(Stmt):
    pos: Pos
    expr: Expr


@node
class TypedDecl(Stmt):
    """``name: T = value`` (assignment rule, then one type check)."""
    pos: Pos
    name: str
    type: TypeRef
    value: Expr


@node
class LocalDecl(Stmt):
    """``local name (: T)? = value`` (always binds in the innermost scope)."""
    pos: Pos
    name: str
    type: Optional[TypeRef]
    value: Expr


@node
class If(Stmt):
    """``else if`` is an ``If`` as the only statement of ``orelse``."""
    pos: Pos
    cond: Expr
    body: Block
    orelse: Optional[Block] = None


@node
class While(Stmt):
    pos: Pos
    cond: Expr
    body: Block


@node
class For(Stmt):
    pos: Pos
    var: str
    iterable: Expr
    body: Block


@node
class Return(Stmt):
    pos: Pos
    value: Optional[Expr] = None


@node
class Break(Stmt):
    pos: Pos


@node
class Continue(Stmt):
    pos: Pos


@node
class FunctionDef(Stmt):
    pos: Pos            # the 'def'
    name: str
    params: tuple[Param, ...]
    returns: Optional[TypeRef]
    body: Block


@node
class ActionDef(Stmt):
    pos: Pos            # 'reversible' / 'irreversible'
    kind: str           # "reversible" | "irreversible" | "irreversible immediate"
    name: str
    params: tuple[Param, ...]
    capability: Optional[str]
    approval: bool
    body: Block
    rollback: Optional[Block] = None
    rollback_pos: Optional[Pos] = None   # where 'rollback' stands, or the first token after the body
    sends: bool = False                  # a `sends` clause: it sends data out (the second look)
    roles: tuple = ()                    # (param, role) overrides from `sends(role: param, ...)`


@node
class ToolDef(Stmt):
    pos: Pos            # 'tool' (or 'async')
    name: str
    params: tuple[Param, ...]
    returns: Optional[TypeRef]
    capability: Optional[str]
    description: Optional[str]
    body: Block
    is_async: bool = False
    trusted: bool = False                # `trusted tool`: its results are records, not content


@node
class AgentDef(Stmt):
    pos: Pos
    name: str
    body: Block
    is_async: bool = False


@node
class Policy(Stmt):
    pos: Pos
    rules: tuple[Rule, ...]


@node
class Session(Stmt):
    """``session NAME:`` (a scope), or ``session NAME as HANDLE:`` (the commit protocol)."""
    pos: Pos
    name: str
    body: Block
    handle: Optional[str] = None


@node
class Test(Stmt):
    pos: Pos
    name: str
    body: Block


@node
class ExceptClause(Node):
    """``except [CLASS [as NAME]]:``; ``pos`` is the ``except``, ``class_pos`` the class name."""
    pos: Pos
    cls: Optional[str]
    name: Optional[str]
    body: Block
    class_pos: Optional[Pos] = None


@node
class Try(Stmt):
    """``try:`` with its ``except`` clauses in order, and a ``finally`` block or None."""
    pos: Pos
    body: Block
    handlers: tuple[ExceptClause, ...]
    final: Optional[Block] = None
    final_pos: Optional[Pos] = None


@node
class Raise(Stmt):
    """``raise VALUE``, or a bare ``raise`` (value None): the error being handled, again."""
    pos: Pos
    value: Optional[Expr] = None


@node
class MemoryDecl(Stmt):
    pos: Pos
    name: str
    hint: Optional[str]
    persistent: bool = False


@node
class ModelDecl(Stmt):
    pos: Pos
    name: str
    value: Expr


@node
class SetStmt(Stmt):
    """``set NAME = value`` (``set delegation = model``)."""
    pos: Pos
    name: str
    value: Expr


@node
class Import(Stmt):
    pos: Pos
    module: ModRef
    alias: Optional[str] = None
    python: bool = False


@node
class FromImport(Stmt):
    pos: Pos
    module: ModRef
    names: tuple[ImportName, ...]
    python: bool = False


@node
class Module(Node):
    """A whole source file."""
    pos: Pos
    body: Block


class NodeVisitor:
    """Dispatch ``visit_<ClassName>``; a subclass naming a node class that does not exist is a bug."""

    _visit_table: dict = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        known = {c.__name__ for c in _all_node_classes()}
        for attr in vars(cls):
            if attr.startswith("visit_") and attr[6:] not in known:
                raise TypeError(f"{cls.__name__}.{attr} names no node class")
        cls._visit_table = {}    # node class -> the function that visits it, filled on use

    def visit(self, n: Node):
        # visit_<ClassName> found once per node class, not by building its name on every visit.
        fn = self._visit_table.get(n.__class__)
        if fn is None:
            fn = getattr(type(self), "visit_" + type(n).__name__, None) or type(self).generic_visit
            self._visit_table[n.__class__] = fn
        return fn(self, n)

    def generic_visit(self, n: Node):
        for child in n.children():
            self.visit(child)


def _all_node_classes():
    out, todo = [], [Node]
    while todo:
        c = todo.pop()
        for sub in c.__subclasses__():
            out.append(sub)
            todo.append(sub)
    return out
