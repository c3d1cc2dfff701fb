"""What the language server knows of one source text: its errors, declarations, scopes, name uses and folds, from the compiler's own parser and checks.

Everything here is plain data with 0-based lines and code-point columns (the server converts
them to the protocol's UTF-16 columns), and nothing here imports pygls: the analysis is the
same whether an editor, a test or a benchmark asks for it.

A half-typed file does not parse, yet an editor still wants names and an outline. So when the
parse fails, the lines the errors point at are replaced (keeping the indentation, and a block
header where the next line is deeper so that its body still parses) and the text is parsed
again, a few rounds at most; what that yields is marked ``repaired``. If no round parses, the
server keeps the index of the last text that did.
"""

from __future__ import annotations

import bisect
import os
import re

from sensevm.base.errors import CompileErrors, SenseError

from .. import nodes as n
from ..codegen import module_binding_name, module_relative_path
from ..nesting import on_deep_stack

REPAIR_ROUNDS = 3
_WORD = re.compile(r"\w+")
_STRING = re.compile(r'"""(?:[^"]|"(?!""))*(?:""")?|"(?:[^"\\\n]|\\.)*"?')


class Span:
    """A range of one file: 0-based start and end (exclusive), columns in code points."""

    __slots__ = ("line", "col", "end_line", "end_col")

    def __init__(self, line: int, col: int, end_line: int, end_col: int):
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col

    def contains(self, line: int, col: int) -> bool:
        # The end is inclusive here: a cursor just after a word is still on it.
        return (self.line, self.col) <= (line, col) <= (self.end_line, self.end_col)

    def __eq__(self, other):
        return isinstance(other, Span) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def key(self):
        return (self.line, self.col, self.end_line, self.end_col)

    def __repr__(self) -> str:
        return f"Span({self.line}:{self.col}-{self.end_line}:{self.end_col})"


class Diagnostic:
    """An error (or a warning) of the file at ``span``; ``kind`` is the error's class name."""

    __slots__ = ("span", "message", "kind", "severity")

    def __init__(self, span: Span, message: str, kind: str, severity: str = "error"):
        self.span, self.message, self.kind, self.severity = span, message, kind, severity

    def __repr__(self) -> str:
        return f"Diagnostic({self.span!r}, {self.message!r})"


class Scope:
    """A lexical scope (spec 5): the lines it covers, its parent, the names bound in it."""

    __slots__ = ("kind", "line", "end_line", "parent", "names", "children", "owner")

    def __init__(self, kind: str, line: int, end_line: int, parent=None, owner=None):
        self.kind, self.line, self.end_line, self.parent = kind, line, end_line, parent
        self.names: dict = {}
        self.children: list = []
        self.owner = owner          # the Symbol whose body this is (a function, agent ...)
        if parent is not None:
            parent.children.append(self)

    def lookup(self, name: str):
        scope = self
        while scope is not None:
            sym = scope.names.get(name)
            if sym is not None:
                return sym
            scope = scope.parent
        return None


class Symbol:
    """Something a name is bound to: a declaration, a variable, a parameter, an import.

    ``span`` is where its name is written, ``extent`` the whole declaration (for the outline
    and folds), ``refs`` every span that names it (the declaration's own included)."""

    __slots__ = ("name", "kind", "path", "span", "extent", "node", "scope", "type", "doc",
                 "refs", "children", "target", "body_scope")

    def __init__(self, name, kind, path, span, node=None, scope=None, extent=None):
        self.name, self.kind, self.path, self.span, self.node = name, kind, path, span, node
        self.scope = scope
        self.extent = extent or span
        self.type = None            # the type_of name when it is known (for members after '.')
        self.doc = None
        self.refs = [span]
        self.children: list = []    # nested declarations, for the outline
        self.target = None          # an import: the module path; from-import: (path, name)
        self.body_scope = None

    def __repr__(self) -> str:
        return f"Symbol({self.kind} {self.name} @{self.span!r})"


class Occurrence:
    """A word of the text the server can say something about: a use or declaration of a
    name, a member after '.', an import's module, a capability."""

    __slots__ = ("span", "what", "name", "symbol", "scope", "obj")

    def __init__(self, span, what, name, symbol=None, scope=None, obj=None):
        self.span, self.what, self.name, self.symbol = span, what, name, symbol
        self.scope = scope
        self.obj = obj              # a member: the expression before the '.'


class Import:
    """An import of a Sense module: the path it resolves to, its binding, where it is written."""

    __slots__ = ("ref", "path", "binding", "span", "node", "std")

    def __init__(self, ref, path, binding, span, node, std):
        self.ref, self.path, self.binding, self.span, self.node = ref, path, binding, span, node
        self.std = std              # a std. module's dotted name, or None


class Analysis:
    """Everything known about one version of one file."""

    def __init__(self, path: str, text: str):
        self.path = path
        self.text = text
        self.lines = text.split("\n")
        self.tree = None
        self.repaired = False       # the tree is of a repaired text (see the module's doc)
        self.diagnostics: list = []
        self.module_scope = Scope("module", 0, max(len(self.lines) - 1, 0))
        self.symbols: list = []     # top-level declarations, for the outline
        self.all_symbols: list = []
        self.occurrences: list = []
        self._occ_lines: list = []
        self.imports: list = []
        self.capabilities: set = set()
        self.folds: list = []       # (start line, end line)

    def occurrence_at(self, line: int, col: int):
        i = bisect.bisect_left(self._occ_lines, line)
        best = None
        while i < len(self.occurrences) and self._occ_lines[i] == line:
            occ = self.occurrences[i]
            if occ.span.contains(line, col):
                best = occ           # the last that contains it: a member after its object
            i += 1
        return best

    def scope_at(self, line: int) -> Scope:
        scope = self.module_scope
        while True:
            for child in scope.children:
                if child.line <= line <= child.end_line:
                    scope = child
                    break
            else:
                return scope


# --------------------------------------------------------------------------------- positions

def _line_span(lines, line0: int, col0: int) -> Span:
    """The span of the token that starts at (line0, col0): a word, a string, else one
    character; at the end of a line (a missing token), empty there."""
    if line0 >= len(lines):
        line0 = len(lines) - 1
        col0 = len(lines[line0])
    text = lines[line0]
    if col0 >= len(text):
        return Span(line0, len(text), line0, len(text))
    m = _WORD.match(text, col0) or (_STRING.match(text, col0) if text[col0] == '"' else None)
    end = m.end() if m and m.end() > col0 else col0 + 1
    return Span(line0, col0, line0, end)


def error_span(lines, err: SenseError) -> Span:
    pos = err.pos
    if pos is None or pos.line <= 0:
        return Span(0, 0, 0, len(lines[0]) if lines else 0)
    return _line_span(lines, pos.line - 1, max(pos.col - 1, 0))


def _severity(err) -> str:
    # A check that only warns says so on the error it returns (severity = "warning").
    return getattr(err, "severity", "error") or "error"


def to_diagnostics(lines, errors) -> list:
    out = []
    for err in errors:
        for e in getattr(err, "errors", None) or [err]:
            out.append(Diagnostic(error_span(lines, e), e.message, e.kind, _severity(e)))
    return out


# --------------------------------------------------------------------------------- parsing

def _parse(text: str, path: str):
    from ..grammar import parse
    return parse(text, path)


def _repair(lines: list, errors) -> list:
    """The lines with every line an error points at replaced by a statement of the same
    indentation: a block header if the next non-blank line is deeper, else ``nil``."""
    out = list(lines)
    bad = sorted({e.pos.line - 1 for e in errors if e.pos is not None and e.pos.line > 0})
    for line0 in bad:
        if line0 >= len(out):
            line0 = len(out) - 1
        if line0 < 0:
            continue
        text = out[line0]
        indent = len(text) - len(text.lstrip(" "))
        if not text.strip():
            # An error at a blank line (the end of the file, a missing block): what is wrong
            # is the last statement before it.
            j = line0 - 1
            while j >= 0 and not out[j].strip():
                j -= 1
            if j < 0:
                continue
            line0, text = j, out[j]
            indent = len(text) - len(text.lstrip(" "))
        nxt = line0 + 1
        while nxt < len(out) and not out[nxt].strip():
            nxt += 1
        deeper = nxt < len(out) and len(out[nxt]) - len(out[nxt].lstrip(" ")) > indent
        out[line0] = " " * indent + ("if true:" if deeper else "nil")
    return out


def parse_for_index(text: str, path: str):
    """(tree or None, syntax errors, repaired): the errors are those of ``text`` itself."""
    from ..grammar import parse_all_errors
    try:
        return _parse(text, path), [], False
    except SenseError:
        pass
    errors = list(parse_all_errors(text, path))
    lines = text.split("\n")
    round_errors = errors
    for _ in range(REPAIR_ROUNDS):
        if not round_errors:
            break
        lines = _repair(lines, round_errors)
        try:
            return _parse("\n".join(lines), path), errors, True
        except CompileErrors as err:
            round_errors = err.errors
        except SenseError as err:
            round_errors = [err]
    return None, errors, False


# --------------------------------------------------------------------------------- indexing

def _docstring(body) -> str | None:
    if body and isinstance(body[0], n.ExprStmt) and isinstance(body[0].expr, n.StrLit):
        return body[0].expr.value
    return None


_BLOCK_NODES = (n.FunctionDef, n.ActionDef, n.ToolDef, n.AgentDef, n.If, n.While, n.For,
                n.Session, n.Test, n.Policy)


class _Indexer:
    def __init__(self, analysis: Analysis, root_dir: str):
        self.a = analysis
        self.lines = analysis.lines
        self.path = analysis.path
        self.dir = root_dir
        self.uses: list = []        # (name, span, scope) resolved after the walk
        self.outline_stack: list = []

    # ---- positions
    def span_of_word(self, word: str, line0: int, col0: int) -> Span:
        """Where ``word`` is first written at or after (line0, col0), a few lines at most."""
        pat = re.compile(r"(?<!\w)" + re.escape(word) + r"(?!\w)")
        for ln in range(line0, min(line0 + 4, len(self.lines))):
            m = pat.search(self.lines[ln], col0 if ln == line0 else 0)
            if m:
                return Span(ln, m.start(), ln, m.end())
        return Span(line0, col0, line0, col0 + len(word))

    def at(self, pos) -> tuple:
        return max(pos.line - 1, 0), max(pos.col - 1, 0)

    def name_span(self, node, name: str) -> Span:
        return self.span_of_word(name, *self.at(node.pos))

    def end_line(self, node, next_line: int) -> int:
        """The last line of ``node``: before the next statement (``next_line``), not counting
        blank and comment lines, and at least the deepest line of a node inside it."""
        start = node.pos.line - 1
        last = start
        stack = [node]
        while stack:
            x = stack.pop()
            if x.pos.line - 1 > last:
                last = x.pos.line - 1
            stack.extend(x.children())
        end = max(last, min(next_line - 1, len(self.lines) - 1))
        while end > last and (not self.lines[end].strip()
                              or self.lines[end].lstrip().startswith("#")):
            end -= 1
        return end

    # ---- bindings
    def declare(self, name, kind, span, node, scope, extent=None) -> Symbol:
        sym = Symbol(name, kind, self.path, span, node, scope, extent)
        scope.names[name] = sym
        self.a.all_symbols.append(sym)
        self.a.occurrences.append(Occurrence(span, "decl", name, sym, scope))
        return sym

    def assign(self, name, span, node, scope, value=None) -> Symbol:
        sym = scope.lookup(name)
        if sym is None or sym.kind == "builtin":
            sym = self.declare(name, "variable", span, node, scope)
            sym.type = self.type_of(value, scope)
        else:
            sym.refs.append(span)
            self.a.occurrences.append(Occurrence(span, "name", name, sym, scope))
            if sym.kind == "variable" and sym.type != self.type_of(value, scope):
                sym.type = None
        return sym

    def type_of(self, e, scope):
        if e is None:
            return None
        simple = {n.IntLit: "Int", n.FloatLit: "Float", n.StrLit: "String", n.BoolLit: "Bool",
                  n.NilLit: "Nil", n.ArrayLit: "Array"}.get(type(e))
        if simple:
            return simple
        if isinstance(e, n.Call) and isinstance(e.callee, n.Name):
            sym = scope.lookup(e.callee.name)
            if sym is not None:
                return {"action": "Action", "tool": None, "function": None}.get(sym.kind)
            from sensevm.base.builtins import BY_NAME
            b = BY_NAME.get(e.callee.name)
            if b is not None:
                return b.returns.split("<")[0] if b.returns != "Any" else None
        if isinstance(e, n.Name):
            sym = scope.lookup(e.name)
            if sym is not None:
                return sym.type
        return None

    # ---- statements
    def block(self, body, scope, end: int):
        for i, s in enumerate(body):
            nxt = body[i + 1].pos.line - 1 if i + 1 < len(body) else end + 1
            self.stmt(s, scope, nxt)

    def new_scope(self, kind, node, end, parent, owner=None) -> Scope:
        return Scope(kind, node.pos.line - 1, end, parent, owner)

    def outline(self, sym: Symbol):
        (self.outline_stack[-1].children if self.outline_stack else self.a.symbols).append(sym)

    def fold(self, start: int, end: int):
        if end > start:
            self.a.folds.append((start, end))

    def params(self, params, scope):
        for p in params:
            self.declare(p.name, "parameter", Span(*self.at(p.pos), p.pos.line - 1,
                                                    p.pos.col - 1 + len(p.name)), p, scope)

    def declaration(self, s, kind, scope, end, params=(), body=()):
        start = s.pos.line - 1
        extent = Span(start, s.pos.col - 1, end, len(self.lines[end]) if end < len(self.lines) else 0)
        sym = self.declare(s.name, kind, self.name_span(s, s.name), s, scope, extent)
        sym.doc = _docstring(body)
        self.outline(sym)
        self.fold(start, end)
        inner = self.new_scope(kind, s, end, scope, sym)
        sym.body_scope = inner
        self.params(params, inner)
        self.outline_stack.append(sym)
        return sym, inner

    def stmt(self, s, scope: Scope, next_line: int):
        end = self.end_line(s, next_line) if isinstance(s, _BLOCK_NODES) else s.pos.line - 1
        if isinstance(s, n.ExprStmt):
            self.expr(s.expr, scope)
        elif isinstance(s, (n.TypedDecl, n.LocalDecl)):
            self.expr(s.value, scope)
            span = self.name_span(s, s.name)
            if isinstance(s, n.LocalDecl):
                sym = self.declare(s.name, "variable", span, s, scope)
                sym.type = self.type_of(s.value, scope)
            else:
                self.assign(s.name, span, s, scope, s.value)
        elif isinstance(s, n.FunctionDef):
            sym, inner = self.declaration(s, "function", scope, end, s.params, s.body)
            self.block(s.body, inner, end)
            self.outline_stack.pop()
        elif isinstance(s, n.ActionDef):
            sym, inner = self.declaration(s, "action", scope, end, s.params, s.body)
            if s.capability:
                self.capability(s.capability, s.pos, scope)
            if s.rollback is not None and s.rollback_pos is not None:
                rb = s.rollback_pos.line - 1
                self.block(s.body, inner, rb - 1)
                rscope = Scope("rollback", rb, end, inner, sym)
                self.fold(rb, end)
                self.block(s.rollback, rscope, end)
            else:
                self.block(s.body, inner, end)
            self.outline_stack.pop()
        elif isinstance(s, n.ToolDef):
            sym, inner = self.declaration(s, "tool", scope, end, s.params, s.body)
            if s.capability:
                self.capability(s.capability, s.pos, scope)
            self.block(s.body, inner, end)
            self.outline_stack.pop()
        elif isinstance(s, n.AgentDef):
            sym, inner = self.declaration(s, "agent", scope, end, (), s.body)
            sym.type = "Agent"
            self.block(s.body, inner, end)
            self.outline_stack.pop()
        elif isinstance(s, n.Test):
            start = s.pos.line - 1
            line = self.lines[start]
            q = line.find('"', s.pos.col - 1 + len("test"))
            m = _STRING.match(line, q) if q >= 0 else None
            span = (Span(start, m.start(), start, m.end()) if m
                    else Span(start, s.pos.col - 1, start, s.pos.col - 1 + len("test")))
            sym = Symbol(s.name, "test", self.path, span, s, scope,
                         Span(start, s.pos.col - 1, end, len(self.lines[end])))
            self.outline(sym)
            self.fold(start, end)
            self.block(s.body, self.new_scope("test", s, end, scope, sym), end)
        elif isinstance(s, n.Policy):
            start = s.pos.line - 1
            span = Span(start, s.pos.col - 1, start, s.pos.col - 1 + len("policy"))
            sym = Symbol("policy", "policy", self.path, span, s, scope,
                         Span(start, s.pos.col - 1, end, len(self.lines[end])))
            sym.doc = ", ".join(f"{r.effect} {r.capability}" for r in s.rules)
            self.outline(sym)
            self.fold(start, end)
            for r in s.rules:
                self.capability(r.capability, r.pos, scope, skip=len(r.effect))
        elif isinstance(s, n.Session):
            inner = self.new_scope("session", s, end, scope)
            self.fold(s.pos.line - 1, end)
            if s.handle:
                line0, col0 = self.at(s.pos)
                span = self.span_of_word(s.handle, line0, col0 + len("session ") + len(s.name))
                self.declare(s.handle, "session", span, s, inner)
            self.block(s.body, inner, end)
        elif isinstance(s, n.If):
            self.expr(s.cond, scope)
            body_end = end
            if s.orelse:
                body_end = max(s.pos.line - 1, s.orelse[0].pos.line - 2)
                if isinstance(s.orelse[0], n.If) and s.orelse[0].pos.line - 1 > s.pos.line - 1:
                    body_end = s.orelse[0].pos.line - 2
            self.fold(s.pos.line - 1, body_end)
            self.block(s.body, self.new_scope("if", s, body_end, scope), body_end)
            if s.orelse:
                first = s.orelse[0]
                else_scope = Scope("else", body_end + 1, end, scope)
                if isinstance(first, n.If) and len(s.orelse) == 1:
                    self.stmt(first, scope, next_line)
                else:
                    self.fold(body_end + 1, end)
                    self.block(s.orelse, else_scope, end)
        elif isinstance(s, n.While):
            self.expr(s.cond, scope)
            self.fold(s.pos.line - 1, end)
            self.block(s.body, self.new_scope("while", s, end, scope), end)
        elif isinstance(s, n.For):
            self.expr(s.iterable, scope)
            self.fold(s.pos.line - 1, end)
            inner = self.new_scope("for", s, end, scope)
            line0, col0 = self.at(s.pos)
            self.declare(s.var, "variable", self.span_of_word(s.var, line0, col0 + 3), s, inner)
            self.block(s.body, inner, end)
        elif isinstance(s, n.Return):
            if s.value is not None:
                self.expr(s.value, scope)
        elif isinstance(s, n.MemoryDecl):
            sym = self.declare(s.name, "memory", self.name_span(s, s.name), s, scope)
            sym.type = "PersistentMemory" if s.persistent else "Memory"
            sym.doc = s.hint
        elif isinstance(s, n.ModelDecl):
            self.expr(s.value, scope)
            sym = self.declare(s.name, "model", self.name_span(s, s.name), s, scope)
            sym.type = "Model"
        elif isinstance(s, n.SetStmt):
            self.expr(s.value, scope)
        elif isinstance(s, (n.Import, n.FromImport)):
            self.import_(s, scope)
        else:
            # A statement this index does not know yet (the grammar grows): its names are
            # still used and its blocks still indexed, in the same scope.
            for child in s.children():
                if isinstance(child, n.Stmt):
                    self.stmt(child, scope, next_line)
                elif isinstance(child, n.Expr):
                    self.expr(child, scope)

    def capability(self, cap: str, pos, scope, skip: int = 0):
        line0, col0 = self.at(pos)
        span = self.span_of_word(cap, line0, col0 + skip) if "." not in cap else None
        if span is None:
            text = self.lines[line0] if line0 < len(self.lines) else ""
            i = text.find(cap, col0 + skip)
            span = Span(line0, i, line0, i + len(cap)) if i >= 0 else Span(line0, col0, line0, col0)
        self.a.capabilities.add(cap)
        self.a.occurrences.append(Occurrence(span, "capability", cap, None, scope))

    def import_(self, s, scope):
        ref = s.module
        line0, col0 = self.at(ref.pos)
        ref_len = len(ref.text) + (2 if ref.is_string else 0)
        ref_span = Span(line0, col0, line0, col0 + ref_len)
        if s.python:
            target = None
            std = None
        else:
            from sensevm.base.builtins import STD_MODULES
            std = ref.text if not ref.is_string and ref.text in STD_MODULES else None
            target = None if std else os.path.normpath(
                os.path.join(self.dir, module_relative_path(ref)))
        imp = Import(ref, target, module_binding_name(ref), ref_span, s, std)
        if not s.python:
            self.a.imports.append(imp)
        self.a.occurrences.append(Occurrence(ref_span, "module", ref.text, None, scope, imp))
        if isinstance(s, n.Import):
            if s.alias:
                span = self.span_of_word(s.alias, line0, col0 + ref_len)
            elif ref.is_string:
                span = ref_span
            else:
                last = ref.text.rsplit(".", 1)[-1]
                span = Span(line0, col0 + len(ref.text) - len(last), line0, col0 + len(ref.text))
            sym = self.declare(s.alias or imp.binding, "module", span, s, scope)
            sym.target = imp
            sym.type = "Module"
            if span == ref_span:
                self.a.occurrences.pop()        # the module occurrence already names it
                self.a.occurrences.append(Occurrence(span, "decl", sym.name, sym, scope, imp))
        else:
            for item in s.names:
                iline, icol = self.at(item.pos)
                span = Span(iline, icol, iline, icol + len(item.name))
                if item.alias:
                    alias_span = self.span_of_word(item.alias, iline, icol + len(item.name))
                    self.a.occurrences.append(
                        Occurrence(span, "member", item.name, None, scope, imp))
                    span = alias_span
                sym = self.declare(item.alias or item.name, "imported", span, s, scope)
                sym.target = (imp, item.name)
                if not item.alias:
                    self.a.occurrences[-1].obj = imp

    # ---- expressions
    def expr(self, e, scope):
        stack = [e]
        while stack:
            e = stack.pop()
            if e is None:
                continue
            cls = e.__class__
            if cls is n.Name:
                line0, col0 = self.at(e.pos)
                self.uses.append((e.name, Span(line0, col0, line0, col0 + len(e.name)), scope))
            elif cls is n.Assign and e.target.__class__ is n.Name:
                # The value first: `x = x + 1` reads the x that exists before it is bound.
                self.expr(e.value, scope)
                t = e.target
                line0, col0 = self.at(t.pos)
                self.assign(t.name, Span(line0, col0, line0, col0 + len(t.name)), e, scope,
                            e.value)
            elif cls is n.Member:
                line0, col0 = self.at(e.pos)
                span = Span(line0, col0, line0, col0 + len(e.name))
                self.a.occurrences.append(Occurrence(span, "member", e.name, None, scope, e.obj))
                stack.append(e.obj)
            else:
                kids = e.children()
                kids.reverse()
                stack.extend(kids)

    def resolve_uses(self):
        for name, span, scope in self.uses:
            sym = scope.lookup(name)
            if sym is not None:
                sym.refs.append(span)
            self.a.occurrences.append(Occurrence(span, "name", name, sym, scope))


def analyse(text: str, path: str, *, parsed=None) -> Analysis:
    """The analysis of ``text`` (the file at ``path``): syntax errors, then (when it parses)
    the resolver's errors, and the index. Imports are not followed here (see workspace.py)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    a = Analysis(path, text)
    tree, syntax, repaired = parsed if parsed is not None else parse_for_index(text, path)
    a.tree, a.repaired = tree, repaired
    errors = list(syntax)
    if tree is not None and not syntax:
        from ..resolve import check
        errors.extend(check(tree, path))
    a.diagnostics = to_diagnostics(a.lines, errors)
    if tree is not None and not syntax and not repaired:
        # The warnings of `sensec check`, from the same function.
        from ..driver import tree_warnings
        a.diagnostics.extend(
            Diagnostic(_line_span(a.lines, pos.line - 1, max(pos.col - 1, 0)), text, "warning",
                       "warning")
            for pos, text in tree_warnings(tree) if 0 < pos.line <= len(a.lines))
    if tree is not None:
        ix = _Indexer(a, os.path.dirname(os.path.abspath(path)))
        ix.block(tree.body, a.module_scope, a.module_scope.end_line)
        ix.resolve_uses()
    a.occurrences.sort(key=lambda o: (o.span.line, o.span.col))
    a._occ_lines = [o.span.line for o in a.occurrences]
    a.folds.sort()
    return a


def analyse_deep(text: str, path: str) -> Analysis:
    """``analyse`` on the compiler's deep stack (its passes recurse once per nesting level)."""
    return on_deep_stack(analyse, text, path)
