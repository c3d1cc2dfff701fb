"""The parser's own LR driver gives exactly what ply.yacc's parseopt gives: same trees, same errors."""

from __future__ import annotations

import glob
import os

import pytest

from sensec import grammar
from sensec.grammar import Parser, _is_chain_rule
from sensevm.base.errors import Pos, SenseSyntaxError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = sorted(glob.glob(os.path.join(ROOT, "tests", "programs", "**", "*.sns"), recursive=True)
                 + glob.glob(os.path.join(ROOT, "examples", "*.sns")))


def _ply_drive(self, feed):
    """ply.yacc's own parseopt over the same tokens, served one by one through the lexer
    interface, with the statement-start and argument checks made as each token is served."""
    index = feed.begin

    def token():
        nonlocal index
        self._symstack = self._lr.symstack      # what the rule actions look back into
        i = index
        tok = feed.at(i)
        feed.current, feed.last = i, tok
        if tok is None:
            return None
        index = i + 1
        feed.lineno, feed.lexpos = tok.lineno, tok.lexpos
        before = feed.tokens[i - 1].type if i else "NEWLINE"
        if before in ("NEWLINE", "INDENT", "DEDENT"):
            feed.stmt_starts.append(i)
        elif before == "COLON" and self._lr.statestack[-1] in self._stmt_states:
            feed.stmt_starts.append(i)
        elif before == "COMMA":
            self._check_argument_start(i)
        return tok

    feed.token = token
    return self._lr.parse(lexer=feed, tracking=True)


def _ply_pos(self, p, n):
    """A position as PLY's tracking gives it (line and offset), the column from the line table."""
    sym = p.slice[n]
    line, offset = sym.lineno, sym.lexpos
    return Pos(line, offset - self._src.line_starts[line - 1] + 1)


def ply_parser(monkeypatch):
    ply = Parser().build()
    monkeypatch.setattr(ply, "_drive", _ply_drive.__get__(ply))
    monkeypatch.setattr(ply, "_pos", _ply_pos.__get__(ply))
    return ply


def outcome(parse, text):
    try:
        return ("ok", parse(text))
    except SenseSyntaxError as err:
        return ("error", err.message, err.pos)


def variants(text: str):
    """The text, and broken versions of it: cut short, and with a token's worth removed."""
    yield text
    n = len(text)
    for k in (1, 2, 3, 5):
        cut = n * k // 7
        yield text[:cut]
        yield text[:cut] + text[cut + 3:]


def test_corpus_is_there():
    assert len(SOURCES) > 100


@pytest.mark.parametrize("chunk", range(8))
def test_same_result_as_parseopt(chunk, monkeypatch):
    ours = Parser().build()
    ply = ply_parser(monkeypatch)
    compared = 0
    for path in SOURCES[chunk::8]:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for v in variants(text):
            assert outcome(ours.parse, v) == outcome(ply.parse, v), (path, v[-80:])
            compared += 1
    assert compared


@pytest.mark.parametrize("chunk", range(2))
def test_parse_all_errors_same_as_with_parseopt(chunk, monkeypatch):
    ours = Parser().build()
    ply = ply_parser(monkeypatch)
    for path in SOURCES[chunk::12]:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for v in list(variants(text))[::3]:
            mine = [(e.message, e.pos) for e in ours.parse_all_errors(v)]
            theirs = [(e.message, e.pos) for e in ply.parse_all_errors(v)]
            assert mine == theirs, path


def test_chain_rules_are_recognised_by_their_code():
    parser = Parser.shared()
    chained = {p.func for p, (_, _, action) in zip(parser._lr.productions, parser._rules)
               if action is None and p.func}
    assert {"p_unary_postfix", "p_postfix_primary", "p_stmt_simple"} <= chained

    def not_chain(self, p):
        "x : y"
        p[0] = p[2]

    def chain_with_docstring(self, p):
        """x : y
             | z"""
        p[0] = p[1]

    assert not _is_chain_rule(not_chain)
    assert _is_chain_rule(chain_with_docstring)
    assert not _is_chain_rule(grammar.Parser.p_expr_stmt)


def test_no_statement_inside_an_expression():
    """What lets the compile driver skip expressions when it looks for imports and declarations."""
    from sensec import nodes as N
    from sensec.driver import _walk
    for path in SOURCES[::3]:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        try:
            tree = Parser.shared().parse(text)
        except SenseSyntaxError:
            continue
        for node in _walk(tree):
            if isinstance(node, N.Expr):
                assert not any(isinstance(x, N.Stmt) for x in _walk(node)), path
        everything = [x for x in _walk(tree) if not isinstance(x, N.Expr)]
        pruned = _walk(tree, expressions=False)
        assert [x for x in everything if isinstance(x, N.Stmt)] == \
            [x for x in pruned if isinstance(x, N.Stmt)], path
