"""``sensec fmt``: Sense source in its canonical form (spec 18.8), comments and blank lines kept."""

from __future__ import annotations

import bisect
import math
import os
import re
import sys
import threading
from decimal import Decimal
from typing import Optional

from sensevm.base.errors import Pos, SenseError, SenseSyntaxError

from . import nodes as n
from .lexer import Lexer, normalize_newlines

INDENT = "    "

# ----------------------------------------------------------------------------- literals

# Spec 2.7: these are the only escapes the lexer turns back into the character.
_PLAIN_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_PLAIN_RE = re.compile(r'[\\"\n\r\t]')
# Inside """...""" a bare quote and a raw newline are themselves; a raw '\r' is not, because
# reading the file normalises it to a line break (spec 2.1).
_TRIPLE_ESCAPES = {"\\": "\\\\", "\r": "\\r", "\t": "\\t"}
_TRIPLE_RE = re.compile(r"[\\\r\t]")

# The smallest literal that reads back as infinity: 1 followed by 309 zeros is above the
# largest finite double, and the lexer's float() rounds it up.
_INF_TEXT = "1" + "0" * 309 + ".0"


def format_string(value: str) -> str:
    """A literal the lexer reads back as ``value``.

    A string with a line break is written as ``\"\"\"...\"\"\"``, unless that form cannot hold it:
    the literal ends at the first ``\"\"\"``, and a final ``"`` would merge with the closing quotes.
    """
    if "\n" in value and '"""' not in value and not value.endswith('"'):
        return '"""' + _TRIPLE_RE.sub(lambda m: _TRIPLE_ESCAPES[m.group()], value) + '"""'
    return '"' + _PLAIN_RE.sub(lambda m: _PLAIN_ESCAPES[m.group()], value) + '"'


def format_float(value: float) -> str:
    """``digits.digits`` for ``value``: Sense floats have no exponent and no bare dot (spec 2.6).

    The digits are the exact decimal expansion of ``repr``, whose shortest round-trip form
    guarantees that the literal reads back as the same double, bit for bit.
    """
    if math.isnan(value):
        raise ValueError("NaN has no Sense literal")
    if math.copysign(1.0, value) < 0:
        return "-" + format_float(-value)
    if math.isinf(value):
        return _INF_TEXT
    text = format(Decimal(repr(value)), "f")
    return text if "." in text else text + ".0"


def format_int(value: int) -> str:
    """Decimal digits, beyond the 4300 that ``str(int)`` allows (Sense Ints are unbounded)."""
    if value < 0:
        return "-" + format_int(-value)
    if value.bit_length() <= 13000:
        return str(value)
    k = int(value.bit_length() * 0.30103) // 2
    high, low = divmod(value, 10 ** k)
    return format_int(high) + format_int(low).rjust(k, "0")


# ----------------------------------------------------------------------------- expressions

# Spec 3.2, lowest first.
PREC_ASSIGN, PREC_OR, PREC_AND, PREC_EQ, PREC_CMP, PREC_ADD, PREC_MUL = 1, 2, 3, 4, 5, 6, 7
PREC_UNARY, PREC_POSTFIX, PREC_ATOM = 8, 9, 10

BINARY_PREC = {
    "or": PREC_OR, "and": PREC_AND,
    "==": PREC_EQ, "!=": PREC_EQ,
    "<": PREC_CMP, "<=": PREC_CMP, ">": PREC_CMP, ">=": PREC_CMP,
    "in": PREC_CMP, "not in": PREC_CMP,
    "+": PREC_ADD, "-": PREC_ADD,
    "*": PREC_MUL, "/": PREC_MUL, "%": PREC_MUL,
}


def _negative(e: n.Expr) -> bool:
    # The parser never makes a negative literal (a '-' is always a Unary), but a constructed
    # tree may hold one; it prints as a unary minus and binds like one.
    if isinstance(e, n.IntLit):
        return e.value < 0
    if isinstance(e, n.FloatLit):
        return math.copysign(1.0, e.value) < 0
    return False


def precedence(e: n.Expr) -> int:
    if isinstance(e, (n.Assign, n.CompoundAssign)):
        return PREC_ASSIGN
    if isinstance(e, (n.Binary, n.Logical)):
        return BINARY_PREC[e.op]
    if isinstance(e, n.Unary) or _negative(e):
        return PREC_UNARY
    if isinstance(e, (n.Call, n.Member, n.Index, n.Slice)):
        return PREC_POSTFIX
    return PREC_ATOM


def format_expr(e: n.Expr, min_prec: int = PREC_ASSIGN) -> str:
    """``e`` with the fewest parentheses that make it parse back to the same tree in a context
    whose operand must bind at least as tightly as ``min_prec``."""
    text = _expr(e)
    return f"({text})" if precedence(e) < min_prec else text


def _expr(e: n.Expr) -> str:
    if isinstance(e, (n.Binary, n.Logical)):
        p = BINARY_PREC[e.op]
        # Left-associative: an equal-precedence operand on the right needs its parentheses.
        return f"{format_expr(e.left, p)} {e.op} {format_expr(e.right, p + 1)}"
    if isinstance(e, n.Unary):
        operand = format_expr(e.operand, PREC_UNARY)
        if e.op == "not":
            return f"not {operand}"
        # '- -x' rather than '--x': both lex alike, the reference spells it with the space.
        return f"- {operand}" if operand.startswith("-") else f"-{operand}"
    if isinstance(e, n.Assign):
        # Right-associative: 'a = b = c' needs no parentheses on the right.
        return f"{format_expr(e.target, PREC_OR)} = {format_expr(e.value, PREC_ASSIGN)}"
    if isinstance(e, n.CompoundAssign):
        return f"{format_expr(e.target, PREC_OR)} {e.op}= {format_expr(e.value, PREC_ASSIGN)}"
    if isinstance(e, n.Call):
        args = [format_expr(a) for a in e.args]
        args += [f"{label.name}: {format_expr(label.value)}" for label in e.labels]
        return f"{format_expr(e.callee, PREC_POSTFIX)}({', '.join(args)})"
    if isinstance(e, n.NativeCall):
        return f"native::{e.name}({', '.join(format_expr(a) for a in e.args)})"
    if isinstance(e, n.Member):
        return f"{format_expr(e.obj, PREC_POSTFIX)}.{e.name}"
    if isinstance(e, n.Index):
        return f"{format_expr(e.obj, PREC_POSTFIX)}[{format_expr(e.index)}]"
    if isinstance(e, n.Slice):
        lower = "" if e.lower is None else format_expr(e.lower)
        upper = "" if e.upper is None else format_expr(e.upper)
        return f"{format_expr(e.obj, PREC_POSTFIX)}[{lower}:{upper}]"
    if isinstance(e, n.FString):
        # As written, inside too: its expressions are the author's text, and reprinting them
        # could need quotes the literal cannot hold.
        return e.text
    if isinstance(e, n.ArrayLit):
        items = [format_expr(item) for item in e.items]
        laid = _exploded(e.pos, items, "[", "]", trailing_comma=False)
        return laid if laid is not None else "[" + ", ".join(items) + "]"
    if isinstance(e, n.MapLit):
        items = [f"{format_expr(entry.key)}: {format_expr(entry.value)}" for entry in e.entries]
        laid = _exploded(e.pos, items, "{", "}", trailing_comma=True)
        return laid if laid is not None else "{" + ", ".join(items) + "}"
    if isinstance(e, n.Name):
        return e.name
    if isinstance(e, n.IntLit):
        return format_int(e.value)
    if isinstance(e, n.FloatLit):
        return format_float(e.value)
    if isinstance(e, n.StrLit):
        return format_string(e.value)
    if isinstance(e, n.BoolLit):
        return "true" if e.value else "false"
    if isinstance(e, n.NilLit):
        return "nil"
    raise TypeError(f"fmt: no printer for expression {type(e).__name__}")


def _params(params) -> str:
    return ", ".join(p.name if p.type is None else f"{p.name}: {p.type.text}" for p in params)


def _modref(ref: n.ModRef) -> str:
    return format_string(ref.text) if ref.is_string else ref.text


# ----------------------------------------------------------------------------- layout

# An Array or Map literal the source wrote over several lines keeps one item per line, with
# the comments beside and between its items where they were (Black's rule, without its width
# limit: the author chose the shape, and a one-line literal stays on one line). The file being
# printed lends the brackets' places and its comments here (_format_tree); an expression
# formatted on its own (format_expr) has none and prints on one line. The layout is the
# printing thread's own (the language server may format two files at once).
_here = threading.local()


class _Layout:
    """What the literals of one file being printed need: its brackets' places (_Bracket by
    opening position), its comments in source order and their offsets, the comments those
    literals place (``reserved``, which the statement printer leaves alone) and those they
    have placed already (``placed``: a nested literal's come first)."""

    __slots__ = ("brackets", "comments", "offsets", "reserved", "placed")

    def __init__(self, tree, brackets, comments):
        self.brackets = brackets
        self.comments = comments
        self.offsets = [c.offset for c in comments]
        self.reserved = _reserve(tree, brackets, comments)
        self.placed = set()

    def between(self, start, end) -> list:
        """The comments whose '#' is at an offset in [start, end)."""
        offsets = self.offsets
        return self.comments[bisect.bisect_left(offsets, start):bisect.bisect_left(offsets, end)]


def _layout() -> "Optional[_Layout]":
    return getattr(_here, "layout", None)
# The line break between an exploded literal's lines, until emit() indents them: never a "\n",
# which a string printed as """...""" holds as its own text.
_NL = "\x00"


class _Bracket:
    """Where a bracket's items lie: for each, the lines of its first and last token and the
    offset range from its opening separator to its closing one; and the closer's line."""

    __slots__ = ("items", "open_line", "close_line", "open_offset", "close_offset")

    def __init__(self, open_offset, open_line):
        self.items: list = []
        self.open_line = self.close_line = open_line
        self.open_offset = self.close_offset = open_offset

    def spread(self) -> bool:
        """Whether an item starts on a later line than the one before it ends (the first: than
        the opening bracket): the author's one-item-per-line layout, which fmt's own output
        is again (so fmt stays idempotent); a string printed over lines is not."""
        end = self.open_line
        for first, last, _start, _end in self.items:
            if first > end:
                return True
            end = last
        return False


def _bracket_places(tokens, src) -> dict:
    """Each opening bracket's ``(line, col)`` -> its _Bracket, from the token stream."""
    places = {}
    stack = []      # [bracket, start offset of the current item, its first token, its last]

    def item(b, first, last, start, end):
        # (The line where the last token ends: a """...""" string ends lines after it starts.)
        b.items.append((first.lineno, src.pos(last.end - 1).line, start, end))

    for tok in tokens:
        t = tok.type
        if t in ("LPAREN", "LBRACKET", "LBRACE"):
            if stack and stack[-1][2] is None:
                stack[-1][2] = tok
            if stack:
                stack[-1][3] = tok
            b = _Bracket(tok.lexpos, tok.lineno)
            places[(tok.lineno, tok.col)] = b
            stack.append([b, tok.end, None, None])
        elif t in ("RPAREN", "RBRACKET", "RBRACE") and stack:
            b, start, first, last = stack.pop()
            if first is not None:
                item(b, first, last, start, tok.lexpos)
            b.close_line, b.close_offset = tok.lineno, tok.lexpos
            if stack:
                stack[-1][3] = tok
        elif t == "COMMA" and stack:
            top = stack[-1]
            b, start, first, last = top
            if first is not None:
                item(b, first, last, start, tok.end)
            top[1], top[2], top[3] = tok.end, None, None
        elif stack and t not in _LAYOUT:
            if stack[-1][2] is None:
                stack[-1][2] = tok
            stack[-1][3] = tok
    return places


def _spread(brackets, pos: Pos, count: int):
    """The _Bracket of the literal at ``pos`` with ``count`` items if the source spread it
    over lines (so it prints one item per line), else None."""
    if brackets is None or not count:
        return None
    b = brackets.get((pos.line, pos.col))
    if b is None or len(b.items) != count or not b.spread():
        return None
    return b


def _reserve(tree, brackets, comments) -> set:
    """The comments inside the literals that print one item per line: those literals place
    them, and the statement printer, which may reach their line first (a block on its
    header's line takes the line's comments before its body prints), leaves them alone."""
    offsets = [c.offset for c in comments]
    reserved = set()
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, tuple):
            todo.extend(node)
            continue
        if not isinstance(node, n.Node):
            continue
        count = (len(node.items) if isinstance(node, n.ArrayLit)
                 else len(node.entries) if isinstance(node, n.MapLit) else 0)
        b = _spread(brackets, node.pos, count) if count else None
        if b is not None:
            lo = bisect.bisect_left(offsets, b.open_offset)
            hi = bisect.bisect_left(offsets, b.close_offset)
            reserved.update(id(c) for c in comments[lo:hi])
        todo.extend(getattr(node, name) for name in node._fields)
    return reserved


def _exploded(pos: Pos, items: list, opener: str, closer: str, trailing_comma: bool):
    """The literal at ``pos`` one item per line, if the source spread it over lines."""
    layout = _layout()
    b = _spread(layout.brackets, pos, len(items)) if layout is not None else None
    if b is None:
        return None
    placed = layout.placed
    before = [[] for _ in items]
    after = [[] for _ in items]
    tail = []

    def place(c, k):
        # A comment on the line where the item before ends (after its comma) is that item's.
        if k > 0 and c.line == b.items[k - 1][1]:
            after[k - 1].append(c.text)
        elif k < len(items) and c.line >= b.items[k][1]:
            after[k].append(c.text)
        elif k < len(items):
            before[k].append(c.text)
        else:
            tail.append(c.text)

    for k, (_first, _last, start, end) in enumerate(b.items):
        for c in layout.between(start, end):
            if id(c) not in placed:
                placed.add(id(c))
                place(c, k)
    for c in layout.between(b.items[-1][3], b.close_offset):
        if id(c) not in placed:
            placed.add(id(c))
            place(c, len(items))
    out = [opener]
    for k, text in enumerate(items):
        out.extend(INDENT + c for c in before[k])
        sep = "," if k < len(items) - 1 or trailing_comma else ""
        lines = (text + sep).split(_NL)
        lines[-1] += "".join("  " + c for c in after[k][:1])
        out.extend(INDENT + line for line in lines)
        out.extend(INDENT + c for c in after[k][1:])
    out.extend(INDENT + c for c in tail)
    out.append(closer)
    return _NL.join(out)


class _Line:
    """One logical line of the source: where it starts, the last physical line it covers."""

    __slots__ = ("line", "col", "end_line", "first", "second")

    def __init__(self, line, col, end_line, first, second):
        self.line, self.col, self.end_line = line, col, end_line
        self.first, self.second = first, second      # token types of its first two tokens


class _Comment:
    __slots__ = ("line", "col", "text", "offset")

    def __init__(self, line, col, text, offset=0):
        self.line, self.col, self.text, self.offset = line, col, text, offset


_LAYOUT = frozenset({"NEWLINE", "INDENT", "DEDENT"})
_COMMENT_RE = re.compile(r"#[^\n]*")


def _scan(text: str, path: str):
    """The logical lines and the comments of ``text``.

    The lexer drops comments, so they are found in the gaps between tokens, which hold nothing
    but whitespace and comments: a '#' inside a string is inside a token, never in a gap.
    """
    lexer = Lexer(path)
    tokens = lexer.tokenize(text)
    src = lexer.source
    real = [t for t in tokens if t.type not in _LAYOUT]
    comments = []
    prev_end = 0
    for tok in real + [None]:
        gap_end = len(text) if tok is None else tok.lexpos
        for m in _COMMENT_RE.finditer(text, prev_end, gap_end):
            pos = src.pos(m.start())
            comments.append(_Comment(pos.line, pos.col, m.group().rstrip(), m.start()))
        if tok is not None:
            prev_end = tok.end
    lines = []
    start = last = None
    second = None
    for tok in tokens:
        if tok.type == "NEWLINE":
            if start is not None:
                lines.append(_Line(start.lineno, start.col, src.pos(last.end - 1).line,
                                   start.type, second))
            start = None
        elif tok.type not in _LAYOUT:
            if start is None:
                start, second = tok, None
            elif second is None:
                second = tok.type
            last = tok
    return lines, comments, _bracket_places(real, src)


class _Printer:
    """Walks the tree in source order, consuming the logical lines as their statements print.

    A statement that starts the next logical line takes it, with the comments inside it (the
    first one stays on the line, any others go on lines of their own just below) and the
    own-line comments before it (at the statement's indentation). Statements of an inline
    block (``if x: y``) start no line of their own. At the end of a block, the own-line
    comments indented at least as deep as the block's statements stay in the block; the rest
    belong to an enclosing one.
    """

    def __init__(self, lines, comments):
        self.lines = lines
        self.li = 0
        self.comments = comments
        self.ci = 0
        self.out: list[str] = []
        self.last_line: Optional[int] = None      # last source line of what was printed

    # ------------------------------------------------------------------ layout

    def _unclaimed(self) -> Optional[_Comment]:
        """The next comment no exploded literal has printed already, or None."""
        comments = self.comments
        layout = _layout()
        reserved = layout.reserved if layout is not None else ()
        while self.ci < len(comments):
            c = comments[self.ci]
            if id(c) not in reserved:
                return c
            self.ci += 1
        return None

    def _next_start(self) -> float:
        return self.lines[self.li].line if self.li < len(self.lines) else math.inf

    def _blank_before(self, line: int) -> None:
        if self.last_line is not None and line > self.last_line + 1:
            self.out.append("")

    def _own_line_comment(self, indent: int) -> None:
        c = self._unclaimed()
        self.ci += 1
        self._blank_before(c.line)
        self.out.append(INDENT * indent + c.text)
        self.last_line = c.line

    def _comments_before(self, line: int, indent: int) -> None:
        while (c := self._unclaimed()) is not None and c.line < line:
            self._own_line_comment(indent)

    def _take(self, line: _Line, indent: int, *, blank: bool = True, merge=None) -> list:
        """Consume ``line``: print the comments before it, return those inside it.

        With ``merge`` (a list), the comments before it are appended there instead: the line is
        being joined to one already printed.
        """
        self.li += 1
        inside = []
        if merge is not None:
            while (c := self._unclaimed()) is not None and c.line < line.line:
                merge.append(c.text)
                self.ci += 1
        else:
            self._comments_before(line.line, indent)
            if blank:
                self._blank_before(line.line)
        while (c := self._unclaimed()) is not None and c.line <= line.end_line:
            inside.append(c.text)
            self.ci += 1
        self.last_line = max(line.end_line, self.last_line or 0)
        return inside

    def _starts(self, pos: Pos) -> Optional[_Line]:
        if self.li < len(self.lines):
            line = self.lines[self.li]
            if (line.line, line.col) == (pos.line, pos.col):
                return line
        return None

    def open(self, pos: Pos, indent: int, merge=None) -> list:
        """The comments of the statement at ``pos`` if it starts a logical line, else none."""
        line = self._starts(pos)
        if line is None:
            return merge if merge is not None else []
        inside = self._take(line, indent, merge=merge)
        return (merge + inside) if merge is not None else inside

    def clause(self, kind: str, indent: int) -> tuple[list, Optional[_Line]]:
        """Take the ``else``, ``rollback``, ``except`` or ``finally`` line being printed (no
        blank line before it)."""
        if self.li < len(self.lines) and self.lines[self.li].first == kind:
            line = self.lines[self.li]
            return self._take(line, indent, blank=False), line
        return [], None

    def emit(self, indent: int, text: str, comments=(), more: Optional[int] = None) -> None:
        """Print a line with the first of ``comments`` after it; the others follow on lines of
        their own, at indentation ``more`` (the body's, after a block header)."""
        if comments:
            text = f"{text}  {comments[0]}"
        # An exploded literal's lines, each at the statement's indentation (only while literals
        # explode: a source holding the character itself explodes none, see _format_tree).
        if _NL in text and _layout() is not None:
            first, *rest = text.split(_NL)
            self.out.append(INDENT * indent + first)
            self.out.extend(INDENT * indent + line for line in rest)
        else:
            self.out.append(INDENT * indent + text)
        pad = INDENT * (indent if more is None else more)
        self.out.extend(pad + c for c in comments[1:])

    def block(self, stmts, indent: int, header_col: int) -> None:
        # The block's own indentation in the source: its first statement's column, or, for a
        # block on its header's line, anything deeper than the header.
        first = stmts[0].pos if stmts else None
        col = first.col if first is not None and self._starts(first) else header_col + 1
        for s in stmts:
            self.stmt(s, indent)
        self._block_end(indent, col)

    def _block_end(self, indent: int, col: int) -> None:
        """Print the comments after a block that are indented at least as far as the block."""
        nxt = self._next_start()
        while (c := self._unclaimed()) is not None and c.line < nxt and c.col >= col:
            self._own_line_comment(indent)

    def finish(self) -> str:
        while self._unclaimed() is not None:
            self._own_line_comment(0)
        return "\n".join(self.out) + "\n" if self.out else ""

    # ------------------------------------------------------------------ statements

    def stmt(self, s: n.Stmt, indent: int) -> None:
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            raise TypeError(f"fmt: no printer for statement {type(s).__name__}")
        method(s, indent)

    def simple(self, s: n.Stmt, indent: int, text: str) -> None:
        self.emit(indent, text, self.open(s.pos, indent))

    def compound(self, s: n.Stmt, indent: int, header: str, body) -> None:
        self.emit(indent, header + ":", self.open(s.pos, indent), indent + 1)
        self.block(body, indent + 1, s.pos.col)

    def stmt_ExprStmt(self, s, indent):
        self.simple(s, indent, format_expr(s.expr))

    def stmt_TypedDecl(self, s, indent):
        self.simple(s, indent, f"{s.name}: {s.type.text} = {format_expr(s.value)}")

    def stmt_LocalDecl(self, s, indent):
        typ = f": {s.type.text}" if s.type is not None else ""
        self.simple(s, indent, f"local {s.name}{typ} = {format_expr(s.value)}")

    def stmt_Return(self, s, indent):
        self.simple(s, indent, "return" if s.value is None else f"return {format_expr(s.value)}")

    def stmt_Break(self, s, indent):
        self.simple(s, indent, "break")

    def stmt_Continue(self, s, indent):
        self.simple(s, indent, "continue")

    def stmt_MemoryDecl(self, s, indent):
        text = ("persistent memory " if s.persistent else "memory ") + s.name
        if s.hint is not None:
            text += f": {format_string(s.hint)}"
        self.simple(s, indent, text)

    def stmt_ModelDecl(self, s, indent):
        self.simple(s, indent, f"model {s.name} = {format_expr(s.value)}")

    def stmt_SetStmt(self, s, indent):
        self.simple(s, indent, f"set {s.name} = {format_expr(s.value)}")

    def stmt_Import(self, s, indent):
        text = "import python " if s.python else "import "
        text += _modref(s.module)
        if s.alias is not None:
            text += f" as {s.alias}"
        self.simple(s, indent, text)

    def stmt_FromImport(self, s, indent):
        names = ", ".join(i.name if i.alias is None else f"{i.name} as {i.alias}"
                          for i in s.names)
        python = "python " if s.python else ""
        self.simple(s, indent, f"from {python}{_modref(s.module)} import {names}")

    def stmt_If(self, s, indent):
        self.compound(s, indent, f"if {format_expr(s.cond)}", s.body)
        orelse = s.orelse
        while orelse:
            comments, line = self.clause("ELSE", indent)
            header_col = line.col if line is not None else s.pos.col
            # 'else if' and 'else:' + a block holding one 'if' are the same tree; keep the
            # spelling the source chose.
            chained = (len(orelse) == 1 and isinstance(orelse[0], n.If)
                       and (line is None or line.second == "IF"))
            if not chained:
                self.emit(indent, "else:", comments, indent + 1)
                self.block(orelse, indent + 1, header_col)
                return
            inner = orelse[0]
            self.emit(indent, f"else if {format_expr(inner.cond)}:", comments, indent + 1)
            self.block(inner.body, indent + 1, header_col)
            orelse = inner.orelse

    def stmt_While(self, s, indent):
        self.compound(s, indent, f"while {format_expr(s.cond)}", s.body)

    def stmt_For(self, s, indent):
        self.compound(s, indent, f"for {s.var} in {format_expr(s.iterable)}", s.body)

    def stmt_FunctionDef(self, s, indent):
        returns = f" -> {s.returns.text}" if s.returns is not None else ""
        self.compound(s, indent, f"def {s.name}({_params(s.params)}){returns}", s.body)

    def stmt_ActionDef(self, s, indent):
        header = f"{s.kind} action {s.name}({_params(s.params)})"
        if s.sends:     # the second look's clause: dropping it would drop the checks
            roles = ", ".join(f"{role}: {param}" for param, role in s.roles)
            header += f" sends({roles})" if roles else " sends"
        reqs = ([s.capability] if s.capability else []) + (["approval"] if s.approval else [])
        if reqs:
            header += " requires " + ", ".join(reqs)
        self.compound(s, indent, header, s.body)
        if s.rollback is not None:
            comments, line = self.clause("ROLLBACK", indent)
            self.emit(indent, "rollback:", comments, indent + 1)
            self.block(s.rollback, indent + 1, line.col if line is not None else s.pos.col)

    def stmt_ToolDef(self, s, indent):
        header = (("trusted " if s.trusted else "") + ("async tool " if s.is_async else "tool ")
                  + f"{s.name}({_params(s.params)})")
        if s.returns is not None:
            header += f" returns {s.returns.text}"
        if s.capability is not None:
            header += f" requires {s.capability}"
        if s.description is not None:
            header += " " + format_string(s.description)
        self.compound(s, indent, header, s.body)

    def stmt_AgentDef(self, s, indent):
        self.compound(s, indent, ("async agent " if s.is_async else "agent ") + s.name, s.body)

    def stmt_Session(self, s, indent):
        head = f"session {s.name}" + (f" as {s.handle}" if s.handle else "")
        self.compound(s, indent, head, s.body)

    def stmt_Test(self, s, indent):
        self.compound(s, indent, f"test {format_string(s.name)}", s.body)

    def stmt_Try(self, s, indent):
        self.compound(s, indent, "try", s.body)
        for clause in s.handlers:
            comments, line = self.clause("EXCEPT", indent)
            head = "except"
            if clause.cls is not None:
                head += f" {clause.cls}" + (f" as {clause.name}" if clause.name else "")
            self.emit(indent, head + ":", comments, indent + 1)
            self.block(clause.body, indent + 1, line.col if line is not None else clause.pos.col)
        if s.final is not None:
            comments, line = self.clause("FINALLY", indent)
            self.emit(indent, "finally:", comments, indent + 1)
            self.block(s.final, indent + 1, line.col if line is not None else s.pos.col)

    def stmt_Raise(self, s, indent):
        self.simple(s, indent, "raise" if s.value is None else f"raise {format_expr(s.value)}")

    def stmt_Policy(self, s, indent):
        if len(s.rules) == 1:
            rule = s.rules[0]
            # A one-rule block collapses onto the 'policy:' line, and its comments with it.
            comments = self.open(rule.pos, indent, merge=self.open(s.pos, indent))
            self.emit(indent, f"policy: {rule.effect} {rule.capability}", comments)
            return
        self.emit(indent, "policy:", self.open(s.pos, indent), indent + 1)
        col = s.rules[0].pos.col
        for rule in s.rules:
            comments = self.open(rule.pos, indent + 1)
            self.emit(indent + 1, f"{rule.effect} {rule.capability}", comments)
        self._block_end(indent + 1, col)


# ----------------------------------------------------------------------------- entry points

def format_source(source: str, path: str = "<input>") -> str:
    """The canonical form of ``source``; raises SenseSyntaxError if it does not parse, or
    nests deeper than the compiler allows (nesting.py)."""
    from .grammar import parse
    from .nesting import nesting_error, on_deep_stack
    text = normalize_newlines(source)
    tree = parse(text, path)
    err = nesting_error(tree, path)
    if err is not None:
        raise err
    # The printer and shape() recurse once per level (and shape's tuple() of a generator
    # through C as well): within the bound, on a stack that holds it.
    return on_deep_stack(_format_tree, text, tree, path)


def _format_tree(text: str, tree, path: str) -> str:
    from .grammar import parse
    lines, comments, brackets = _scan(text, path)
    printer = _Printer(lines, comments)
    try:
        _here.layout = _Layout(tree, brackets, comments) if _NL not in text else None
        try:
            printer.block(tree.body, 0, 0)
            result = printer.finish()
        finally:
            _here.layout = None
        # Never hand back a program that means something else: the output must parse to the
        # same tree (positions aside), and every source line must have found its statement (or
        # the comments went astray). A failure here is a formatter bug, not the user's.
        try:
            same = printer.li == len(lines) and shape(parse(result, path)) == shape(tree)
        except SenseSyntaxError:
            same = False
    except RecursionError:
        raise SenseError("expressions nested too deeply to format", path=path) from None
    if not same:
        raise AssertionError(f"fmt: the formatted text of {path} parses to a different program")
    return result


def shape(node):
    """A node as nested tuples without positions: two trees with equal shapes are one program."""
    if isinstance(node, n.Node):
        return (type(node).__name__,) + tuple(
            shape(getattr(node, name)) for name in node._fields
            if name not in ("pos", "rollback_pos", "class_pos", "final_pos"))
    if isinstance(node, tuple):
        return tuple(shape(item) for item in node)
    if isinstance(node, float):
        # 0.0 == -0.0 and nan != nan: compare the bits.
        return ("float", node.hex())
    return node


def sns_files(path: str) -> list[str]:
    """``path`` itself if it is a file, else every ``.sns`` file under it, sorted."""
    if os.path.isdir(path):
        found = []
        for root, dirs, files in os.walk(path):
            found.extend(os.path.join(root, f) for f in files if f.endswith(".sns"))
        return sorted(found)
    if os.path.exists(path):
        return [path]
    raise SenseError(f"no such file or directory: {path}", path=path)


def run(path: str, *, write: bool = False, check: bool = False, stdout=None, stderr=None) -> int:
    """The ``sensec fmt`` command; returns the exit status.

    Without flags the canonical text is printed; ``check`` (which wins over ``write``) lists
    the files that would change; ``write`` rewrites them and lists them. A file that does not
    parse is reported and left alone, and the status is 1.
    """
    from sensevm.base.diagnostics import report
    from sensevm.base.files import atomic_write, read_bytes
    from .driver import read_source
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    try:
        files = sns_files(path)
    except SenseError as err:
        report(err, {}, stderr)
        return 1
    status = 0
    changed_any = False
    for file in files:
        try:
            source = read_source(file)
            formatted = format_source(source, file)
            # Byte for byte: a BOM or CRLF line ends are changes the canonical form makes.
            changed = read_bytes(file) != formatted.encode("utf-8")
        except SenseError as err:
            report(err, {}, stderr)
            status = 1
            continue
        if check or write:
            if not changed:
                continue
            changed_any = True
            if not check:
                try:
                    atomic_write(file, formatted.encode("utf-8"))
                except OSError as exc:
                    stderr.write(f"sensec: cannot write {file}: {exc.strerror}\n")
                    status = 1
                    continue
            stdout.write(file + "\n")
        else:
            if len(files) > 1:
                stdout.write(f"# ----- {file} -----\n")
            stdout.write(formatted)
    stdout.flush()
    if check and changed_any:
        status = 1
    return status
