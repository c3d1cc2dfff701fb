"""The lexer's inline token loop gives exactly what ply.lex's token() gives, errors included."""

from __future__ import annotations

import glob
import os
import random

import pytest

from sensec.lexer import Lexer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = sorted(glob.glob(os.path.join(ROOT, "tests", "programs", "**", "*.sns"), recursive=True)
                 + glob.glob(os.path.join(ROOT, "examples", "*.sns")))
NOISE = ['"', '"""', "!", "{", "\t", "\u00b2", "1.", "\\", "#", "\n  ", "  \t ", ";", "9" * 30]


def _token_loop(self):
    """The previous _raw_tokens: PLY's own token(), then the positions."""
    lexer = self.lexer
    starts = self.source.line_starts
    line = 1
    while True:
        tok = lexer.token()
        if tok is None:
            return
        tok.end = lexer.lexpos
        while line < len(starts) and starts[line] <= tok.lexpos:
            line += 1
        tok.lineno = line
        tok.col = tok.lexpos - starts[line - 1] + 1
        yield tok


def lex(text, monkeypatch=None):
    lexer = Lexer()
    errors = []
    lexer.error_func = errors.append
    if monkeypatch is not None:
        monkeypatch.setattr(lexer, "_raw_tokens", _token_loop.__get__(lexer))
    tokens = lexer.tokenize(text)
    return ([(t.type, t.value, t.lexpos, t.lineno, t.col, t.end, hasattr(t, "lexer"))
             for t in tokens], [(e.message, e.pos) for e in errors])


@pytest.mark.parametrize("chunk", range(4))
def test_same_tokens_as_ply_token(chunk, monkeypatch):
    rnd = random.Random(chunk)
    for path in SOURCES[chunk::4]:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        variants = [text]
        for _ in range(3):
            i = rnd.randrange(len(text) + 1)
            variants.append(text[:i] + rnd.choice(NOISE) + text[i:])
        for v in variants:
            with monkeypatch.context() as m:
                expected = lex(v, m)
            assert lex(v) == expected, path
