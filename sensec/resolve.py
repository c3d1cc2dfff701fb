"""Static checks on the AST before codegen: where break/continue/return may stand, and what this version compiles.

Name resolution itself is dynamic in Sense (spec 5: an assignment updates the nearest binding
that exists *when it runs*, else creates one in the innermost scope), so the resolver checks
structure; the VM's scope chain resolves names.
"""

from __future__ import annotations

from sensevm.errors import SenseSyntaxError

from . import nodes as n

# Statements of later issues (actions, tools, agents, models, memory, Python interop): the front
# end parses them so that programs using them get a precise message instead of a parse error.
_NOT_YET = {
    n.MemoryDecl: "memory declarations",
    n.ModelDecl: "models",
    n.SetStmt: "'set' statements",
}


class Resolver(n.NodeVisitor):
    """Collects every static error of one module (``sensec check`` reports them all)."""

    def __init__(self, path: str):
        self.path = path
        self.errors: list[SenseSyntaxError] = []
        self.loops = 0            # loops enclosing the current statement within this body
        self.in_function = False

    def error(self, message: str, pos) -> None:
        self.errors.append(SenseSyntaxError(message, pos, path=self.path))

    def visit_Module(self, m: n.Module):
        for stmt in m.body:
            self.visit(stmt)

    def generic_visit(self, node: n.Node):
        if isinstance(node, n.Expr) and _EXPRESSIONS_UNCHECKED:
            return      # nothing inside an expression is a statement: no check applies there
        feature = _NOT_YET.get(type(node))
        if feature is not None:
            self.error(f"{feature} are not supported by this version of sensec yet", node.pos)
            return
        super().generic_visit(node)

    def visit_FunctionDef(self, f: n.FunctionDef):
        saved = self.loops, self.in_function
        # break/continue never cross a function body (spec 21.3).
        self.loops, self.in_function = 0, True
        for stmt in f.body:
            self.visit(stmt)
        self.loops, self.in_function = saved

    def visit_ActionDef(self, a: n.ActionDef):
        # An action body and its rollback block are bodies of their own, like a function's.
        saved = self.loops, self.in_function
        self.loops, self.in_function = 0, True
        for stmt in a.body + (a.rollback or ()):
            self.visit(stmt)
        self.loops, self.in_function = saved

    def visit_AgentDef(self, a: n.AgentDef):
        # `return` ends the agent; break/continue never leave its body.
        saved = self.loops, self.in_function
        self.loops, self.in_function = 0, True
        for stmt in a.body:
            self.visit(stmt)
        self.loops, self.in_function = saved

    def visit_ToolDef(self, t: n.ToolDef):
        if t.capability == "approval":
            # Spec 21.5: a tool has no commit boundary at which approval could be checked.
            self.error("'requires approval' is not allowed on a tool — a tool has no commit to "
                       "check approval at; use an action", t.pos)
        saved = self.loops, self.in_function
        self.loops, self.in_function = 0, True
        for stmt in t.body:
            self.visit(stmt)
        self.loops, self.in_function = saved

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
        if not self.loops:
            self.error("'break' outside loop", b.pos)

    def visit_Continue(self, c: n.Continue):
        if not self.loops:
            self.error("'continue' outside loop", c.pos)

    def visit_Return(self, r: n.Return):
        if not self.in_function:
            self.error("'return' outside function", r.pos)
        if r.value is not None:
            self.visit(r.value)

    def visit_Import(self, i: n.Import):
        if i.python:
            self.error("Python interop is not supported by this version of sensec yet", i.pos)

    def visit_FromImport(self, i: n.FromImport):
        if i.python:
            self.error("Python interop is not supported by this version of sensec yet", i.pos)


# The resolver may skip expressions only while it has no visit_ method for any of them (and
# none of them is in _NOT_YET); a check added for an expression turns the shortcut off.
_EXPRESSIONS_UNCHECKED = not any(
    hasattr(Resolver, "visit_" + c.__name__) or c in _NOT_YET
    for c in n._all_node_classes() if issubclass(c, n.Expr))


def check(module: n.Module, path: str) -> list[SenseSyntaxError]:
    resolver = Resolver(path)
    resolver.visit(module)
    return sorted(resolver.errors, key=lambda e: (e.pos.line, e.pos.col))
