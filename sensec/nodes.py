"""The abstract syntax tree: frozen dataclasses, every node with the position of its key token.

Which token a node's ``pos`` names matters, because run-time errors report it (spec 17.1):
a call's ``(``, a member's name, an index's ``[``, a binary operator, a name's first letter.
Blocks are tuples of statements. Nothing here knows about bytecode.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Optional

from sensevm.errors import Pos


class Node:
    """Base of all nodes. Subclasses are frozen slotted dataclasses whose first field is ``pos``."""

    __slots__ = ()
    pos: Pos

    # Names of the fields that may hold nodes (all but ``pos``), set by @node: asking
    # dataclasses.fields() on every call made tree walks the slowest part of a compile.
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


def node(cls):
    cls = dataclass(frozen=True, slots=True)(cls)
    cls._child_fields = tuple(f.name for f in fields(cls) if f.name != "pos")
    cls.__init__ = _fast_init(cls)
    return cls


def _fast_init(cls):
    """The dataclass's ``__init__`` (same signature), storing through the slots' own setters.

    A frozen dataclass stores each field with ``object.__setattr__``, a general attribute
    lookup per field; the parser makes a node for nearly every token, so this is faster.
    """
    params, stores, env = [], [], {}
    for i, f in enumerate(fields(cls)):
        if f.default is not MISSING:
            env[f"_d{i}"] = f.default
            params.append(f"{f.name}=_d{i}")
        elif f.default_factory is not MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: default_factory is not supported")
        else:
            params.append(f.name)
        env[f"_s{i}"] = getattr(cls, f.name).__set__
        stores.append(f"    _s{i}(self, {f.name})")
    source = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(stores or ["    pass"]) + "\n"
    exec(source, env)
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


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
class Unary(Expr):
    pos: Pos            # the operator
    op: str             # "-" | "not"
    operand: Expr


@node
class Binary(Expr):
    pos: Pos            # the operator
    op: str             # + - * / % == != < <= > >=
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
