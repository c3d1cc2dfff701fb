"""Static checks on the AST before codegen: where break/continue/return may stand, and what this version compiles.

Name resolution itself is dynamic in Sense (spec 5: an assignment updates the nearest binding
that exists *when it runs*, else creates one in the innermost scope), so the resolver checks
structure; the VM's scope chain resolves names.
"""

from __future__ import annotations

import re

from sensevm.base.diagnostics import CONTROL
from sensevm.base.errors import CATCHABLE, UNCATCHABLE, SenseSyntaxError

from . import nodes as n
from .nesting import LEVELS, MAX_NESTING, annotation_error


class Resolver(n.NodeVisitor):
    """Collects every static error of one module (``sensec check`` reports them all)."""

    def __init__(self, path: str):
        self.path = path
        self.errors: list[SenseSyntaxError] = []
        self.loops = 0            # loops enclosing the current statement within this body
        self.in_function = False
        self.session = None       # the protocol session enclosing it within this body
        self.level = -1           # nesting level of the node being checked (the module is 0)
        self.handling = 0         # except clauses enclosing it within this body (bare raise)
        self.final = False        # inside a finally block (loops restart from 0 there)
        # Whether the program binds the name `raise` (the reference allows it): then a bare
        # `raise` outside a handler is the old expression statement, not an error.
        self.raise_is_a_name = None     # (found out at the first bare raise outside one)
        self.module = None

    def error(self, message: str, pos) -> None:
        self.errors.append(SenseSyntaxError(message, pos, path=self.path))

    def visit(self, node: n.Node):
        # Levels counted as nesting.py has them. A node past the bound is not entered, so the
        # recursion stays within the deep stack the driver runs this on; the code generator,
        # which also descends into expressions, reports the first such node in source order.
        fn = self._visit_table.get(node.__class__)
        if fn is None:
            fn = (getattr(type(self), "visit_" + type(node).__name__, None)
                  or type(self).generic_visit)
            self._visit_table[node.__class__] = fn
        if not isinstance(node, LEVELS) and node.__class__ is not n.Module:
            fn(self, node)
            return
        level = self.level = self.level + 1
        if level <= MAX_NESTING:
            fn(self, node)
        self.level = level - 1

    def visit_Module(self, m: n.Module):
        self.module = m
        for stmt in m.body:
            self.visit(stmt)

    def generic_visit(self, node: n.Node):
        if isinstance(node, n.Expr) and _EXPRESSIONS_UNCHECKED:
            return      # nothing inside an expression is a statement: no check applies there
        super().generic_visit(node)

    def body(self, stmts, *, returns: bool = True) -> None:
        """A body of its own (function, action, rollback, tool, agent): break/continue never
        cross it (spec 21.3), and a session block around it does not enclose its statements."""
        saved = self.loops, self.in_function, self.session, self.handling, self.final
        self.loops, self.in_function, self.session = 0, returns, None
        self.handling, self.final = 0, False
        for stmt in stmts:
            self.visit(stmt)
        self.loops, self.in_function, self.session, self.handling, self.final = saved

    def visit_ModRef(self, ref: n.ModRef):
        # The path becomes the module's name and path in the .snb, which the verifier refuses
        # with a control character in them (they reach messages and listings).
        if not ref.text.isprintable() and re.search(CONTROL, ref.text):
            self.error("an import path cannot hold control characters", ref.pos)

    def visit_TypeRef(self, t: n.TypeRef):
        err = annotation_error(t, self.path)      # its arguments are not entered: no recursion
        if err is not None:
            self.errors.append(err)

    def annotations(self, params, returns=None) -> None:
        for p in params:
            if p.type is not None:
                self.visit(p.type)
        if returns is not None:
            self.visit(returns)

    def visit_FunctionDef(self, f: n.FunctionDef):
        self.annotations(f.params, f.returns)
        self.body(f.body)

    def visit_ActionDef(self, a: n.ActionDef):
        self.annotations(a.params)
        self.body(a.body + (a.rollback or ()))

    def visit_AgentDef(self, a: n.AgentDef):
        self.body(a.body)          # `return` ends the agent

    def visit_ToolDef(self, t: n.ToolDef):
        if t.capability == "approval":
            # Spec 21.5: a tool has no commit boundary at which approval could be checked.
            self.error("'requires approval' is not allowed on a tool — a tool has no commit to "
                       "check approval at; use an action", t.pos)
        self.annotations(t.params, t.returns)
        self.body(t.body)

    def visit_Session(self, s: n.Session):
        if s.handle is None:
            for stmt in s.body:
                self.visit(stmt)
            return
        # A protocol session ends only by finishing its block (or by an error, which aborts
        # it): no jump may leave it with its verdict undecided.
        saved = self.loops, self.session
        self.loops, self.session = 0, (s.name, s.handle)
        for stmt in s.body:
            self.visit(stmt)
        self.loops, self.session = saved

    def visit_While(self, w: n.While):
        self.visit(w.cond)
        self.loops += 1
        for stmt in w.body:
            self.visit(stmt)
        self.loops -= 1

    def visit_For(self, f: n.For):
        self.visit(f.iterable)
        self.loops += 1
        for stmt in f.body:
            self.visit(stmt)
        self.loops -= 1

    def visit_Break(self, b: n.Break):
        self.jump("break", b.pos, self.loops)

    def visit_Continue(self, c: n.Continue):
        self.jump("continue", c.pos, self.loops)

    def visit_Return(self, r: n.Return):
        self.jump("return", r.pos, self.in_function)
        if r.value is not None:
            self.visit(r.value)

    # ------------------------------------------------------------------ try / except / raise

    def visit_Try(self, t: n.Try):
        for stmt in t.body:
            self.visit(stmt)
        for k, clause in enumerate(t.handlers):
            if clause.cls is None:
                if k != len(t.handlers) - 1:
                    self.error("a bare 'except:' must be the last clause (it catches every "
                               "error, so the clauses after it could never run)", clause.pos)
            elif clause.cls in UNCATCHABLE:
                self.error(f"{clause.cls} cannot be caught: a resource limit always ends the "
                           f"run", clause.class_pos)
            elif clause.cls not in CATCHABLE:
                self.error(f"unknown error class '{clause.cls}' (one of: "
                           f"{', '.join(CATCHABLE)})", clause.class_pos)
            self.handling += 1
            for stmt in clause.body:
                self.visit(stmt)
            self.handling -= 1
        if t.final is not None:
            # No jump may leave a finally block: it would drop the error being raised through it.
            saved = self.loops, self.final
            self.loops, self.final = 0, True
            for stmt in t.final:
                self.visit(stmt)
            self.loops, self.final = saved

    def visit_Raise(self, r: n.Raise):
        if r.value is not None:
            self.visit(r.value)
        elif not self.handling and not self.binds_raise():
            self.error("a bare 'raise' re-raises the error being handled: it must be inside "
                       "an 'except' block", r.pos)

    def binds_raise(self) -> bool:
        if self.raise_is_a_name is None:
            self.raise_is_a_name = binds_raise(self.module)
        return self.raise_is_a_name

    def jump(self, word: str, pos, target) -> None:
        if self.final and (word == "return" or not target):
            self.error(f"'{word}' cannot leave a 'finally' block (it would drop the error "
                       f"that may be passing through it)", pos)
            return
        # A return always leaves a session of its own body; break/continue only when no loop
        # inside the session encloses them (loops restart from 0 at the session's block).
        if target and (word != "return" or self.session is None):
            return
        if self.session is not None:
            name, handle = self.session
            self.error(f"'{word}' cannot leave session '{name}' — a session ends with its "
                       f"block: {handle}.commit(hash), {handle}.abort() or the host's verdict",
                       pos)
        elif word == "return":
            self.error("'return' outside function", pos)
        else:
            self.error(f"'{word}' outside loop", pos)


# The resolver may skip expressions only while it has no visit_ method for any of them; a check
# added for an expression turns the shortcut off.
_EXPRESSIONS_UNCHECKED = not any(
    hasattr(Resolver, "visit_" + c.__name__)
    for c in n._all_node_classes() if issubclass(c, n.Expr))


def binds_raise(module: n.Module) -> bool:
    """Whether anything in the program binds the name ``raise`` (as the reference allows: an
    assignment, a declaration, a parameter, a loop variable, an import)."""
    todo = [module]
    while todo:
        node = todo.pop()
        if isinstance(node, n.Assign) and isinstance(node.target, n.Name):
            if node.target.name == "raise":
                return True
        elif isinstance(node, (n.TypedDecl, n.LocalDecl, n.FunctionDef, n.ActionDef,
                               n.ToolDef, n.AgentDef, n.ModelDecl, n.MemoryDecl)):
            if node.name == "raise":
                return True
        elif isinstance(node, (n.Param,)) and node.name == "raise":
            return True
        elif isinstance(node, n.For) and node.var == "raise":
            return True
        elif isinstance(node, n.Import) and (node.alias == "raise" or (
                node.alias is None and node.module.text.rsplit(".", 1)[-1] == "raise")):
            return True
        elif isinstance(node, n.ImportName) and (node.alias or node.name) == "raise":
            return True
        todo.extend(node.children())
    return False


def check(module: n.Module, path: str) -> list[SenseSyntaxError]:
    resolver = Resolver(path)
    resolver.visit(module)
    return sorted(resolver.errors, key=lambda e: (e.pos.line, e.pos.col))
