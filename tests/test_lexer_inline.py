"""The lexer's one-loop scan gives exactly what ply.lex's own token() and a plain layout filter
give: the same tokens, positions and errors, on every test program and example and on noisy
variants of them, collecting errors or raising the first."""

from __future__ import annotations

import glob
import os
import random

import pytest

from sensec.lexer import SOFT_KEYWORDS, TAB_MSG, Lexer, soft_keyword_type
from sensevm.base.errors import SenseSyntaxError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = sorted(glob.glob(os.path.join(ROOT, "tests", "programs", "**", "*.sns"), recursive=True)
                 + glob.glob(os.path.join(ROOT, "examples", "*.sns")))
NOISE = ['"', '"""', "!", "{", "}", "\t", "\u00b2", "1.", "\\", "#", "\n  ", "  \t ", ";", "9" * 30,
         "(", ")", "rollback:", "\n\t", "\u2167x", "@", "\n"]


class _Synthetic:
    def __init__(self, type_, lexpos, source):
        pos = source.pos(lexpos)
        self.type, self.value, self.lexpos, self.lineno, self.col, self.end = (
            type_, "", lexpos, pos.line, pos.col, lexpos)


def _ply_tokens(lexer):
    """Raw tokens as ply.lex's own token() makes them, given positions from the line table."""
    ply = lexer.lexer
    starts = lexer.source.line_starts
    while True:
        tok = ply.token()
        if tok is None:
            return
        tok.end = ply.lexpos
        line = 1
        while line < len(starts) and starts[line] <= tok.lexpos:
            line += 1
        tok.lineno, tok.col = line, tok.lexpos - starts[line - 1] + 1
        yield tok


def _layout(lexer, raw):
    """The layout rules of sensec.lexer's module doc, applied to raw tokens one at a time."""
    source, error = lexer.source, lexer._error
    text = source.text
    raw = iter(raw)
    peeked = []

    def next_raw():
        return peeked.pop() if peeked else next(raw, None)

    def check_leading_whitespace(i):
        while i < len(text) and text[i] in " \t":
            if text[i] == "\t":
                error(TAB_MSG, source.pos(i))
                return
            i += 1

    stack, depth, line_open = [0], 0, False
    check_leading_whitespace(0)
    while (tok := next_raw()) is not None:
        if tok.type == "NEWLINE":
            if depth:
                continue
            check_leading_whitespace(tok.lexpos + 1)
            if line_open:
                line_open = False
                yield tok
            continue
        if not line_open:
            line_open = True
            width = tok.col - 1
            if width > stack[-1]:
                stack.append(width)
                yield _Synthetic("INDENT", tok.lexpos, source)
            elif width < stack[-1]:
                while width < stack[-1]:
                    stack.pop()
                    yield _Synthetic("DEDENT", tok.lexpos, source)
                if width != stack[-1]:
                    error("inconsistent indentation", source.pos(tok.lexpos))
            if tok.type == "IDENT" and tok.value in SOFT_KEYWORDS:
                # Look at the tokens after it on its line (at most three: the decision needs
                # no more), then serve them again in order.
                ahead = []
                while len(ahead) < 3:
                    nxt = next_raw()
                    ahead.append(nxt)
                    if nxt is None or nxt.type == "NEWLINE":
                        break
                following = [None if t is None or t.type == "NEWLINE" else t.type for t in ahead]
                decided = None
                for n in range(1, len(following) + 1):
                    decided = soft_keyword_type(tok.value, following[:n])
                    if decided is not None:
                        break
                tok.type = decided
                peeked.extend(reversed(ahead))
        if tok.type in ("LPAREN", "LBRACKET", "LBRACE"):
            depth += 1
        elif tok.type in ("RPAREN", "RBRACKET", "RBRACE") and depth:
            depth -= 1
        yield tok
    eof = len(text)
    if line_open:
        yield _Synthetic("NEWLINE", eof, source)
    for _ in stack[1:]:
        yield _Synthetic("DEDENT", eof, source)


def lex(text, *, model=False, layout=True, collect=True):
    lexer = Lexer()
    errors = []
    lexer.error_func = errors.append if collect else None
    try:
        if not model:
            tokens = lexer.tokenize(text) if layout else lexer.raw_tokens(text)
        else:
            lexer.input(text)
            tokens = list(_layout(lexer, _ply_tokens(lexer)) if layout else _ply_tokens(lexer))
    except SenseSyntaxError as err:
        return "raised", err.message, err.pos
    return ([(t.type, t.value, t.lexpos, t.lineno, t.col, t.end) for t in tokens],
            [(e.message, e.pos) for e in errors])


@pytest.mark.parametrize("chunk", range(4))
def test_same_tokens_as_ply_and_the_layout_rules(chunk):
    rnd = random.Random(chunk)
    for path in SOURCES[chunk::4]:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        variants = [text]
        for _ in range(4):
            i = rnd.randrange(len(text) + 1)
            variants.append(text[:i] + rnd.choice(NOISE) + text[i:])
        for v in variants:
            for layout in (True, False):
                for collect in (True, False):
                    assert lex(v, layout=layout, collect=collect) == \
                        lex(v, model=True, layout=layout, collect=collect), path


@pytest.mark.parametrize("text", [
    "rollback:\n", "rollback :\n", "rollback\n:\n", "x = 1\nrollback # c\n: y\n",
    "rollback @ :\n", "  rollback:\n", "(rollback:\n)\n", "compensate", "f(\n\trollback:\n)\n",
    'x = "a\nb" + 1\n  y\n', '"""\n\n"""\n    z\n', '"open\n  more\n', "a\n\t\tb\n  c\n",
    "\t\n \t# c\nx\n", "if a:\n    b\n  c\n", "x = \u00b2y\n", "\u2167 = 1\n", "a\\b\n",
    "x = [1,\n\t2]\n", "", "\n\n", "   ", "a\n   ", "  \t", "9" * 5000 + "\n", "1.5.2\n",
])
def test_same_tokens_on_layout_corners(text):
    for layout in (True, False):
        for collect in (True, False):
            assert lex(text, layout=layout, collect=collect) == \
                lex(text, model=True, layout=layout, collect=collect)
