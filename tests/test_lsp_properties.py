"""The language server never fails on a half-typed file: every request, on any prefix of any example program, at any position, answers with a well-formed result.

In-process, through the same functions the server's handlers call (tests/test_lsp.py does the
same over stdio for the line prefixes of one example), so that hypothesis can try many texts
quickly; each answer is also put through pygls's converter, as the server sends it.
"""

from __future__ import annotations

import glob
import os

import pytest

pytest.importorskip("pygls", reason="pygls is not installed (pip install -e '.[test]')")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from lsprotocol import types as t  # noqa: E402
from pygls.protocol import default_converter  # noqa: E402

from sensec.lsp import features as F  # noqa: E402
from sensec.lsp.workspace import Workspace  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.sns"))
               + glob.glob(os.path.join(ROOT, "examples", "lib", "*.sns"))
               + glob.glob(os.path.join(ROOT, "tests", "programs", "*", "*.sns")))
CONVERTER = default_converter()


def _text(path):
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _ordered(r: t.Range, lines):
    assert (r.start.line, r.start.character) <= (r.end.line, r.end.character), r
    assert 0 <= r.start.line and r.end.line < max(len(lines), 1) + 1, r


def _inside(inner: t.Range, outer: t.Range):
    assert (outer.start.line, outer.start.character) <= (inner.start.line, inner.start.character)
    assert (inner.end.line, inner.end.character) <= (outer.end.line, outer.end.character)


@st.composite
def half_typed(draw):
    """(path, prefix of its text, positions): the end of the prefix and anywhere in it."""
    path = draw(st.sampled_from(FILES))
    text = _text(path)
    prefix = text[:draw(st.integers(0, len(text)))]
    lines = prefix.split("\n")
    positions = [(len(lines) - 1, len(lines[-1]))]
    for _ in range(3):
        line = draw(st.integers(0, len(lines) - 1))
        positions.append((line, draw(st.integers(0, len(lines[line]) + 1))))
    return path, prefix, positions


def _answer_all(path, prefix, positions):
    ws = Workspace()
    # The file's own path: its imports resolve beside it, as in the editor.
    ws.set_text(path, prefix)
    lines = prefix.split("\n")
    diags = ws.check(path)
    a = ws.cached(path)
    for d in diags:
        r = F.to_range(a.lines, d.span)
        _ordered(r, lines)
        assert d.message and d.severity in ("error", "warning")
    for line, col in positions:
        results = [F.hover(ws, path, line, col), F.definition(ws, path, line, col),
                   F.references(ws, path, line, col, True),
                   F.completion(ws, path, prefix, line, col)]
        for r in results:
            CONVERTER.unstructure(r)
        hover = results[0]
        if hover is not None:
            assert hover.contents.value
    symbols = F.document_symbols(ws, path)
    stack = list(symbols)
    while stack:
        s = stack.pop()
        _ordered(s.range, lines)
        _inside(s.selection_range, s.range)
        stack.extend(s.children or ())
    folds = F.folding_ranges(ws, path)
    for f in folds:
        assert f.start_line < f.end_line
    for r in (symbols, folds, F.formatting(prefix, path)):
        CONVERTER.unstructure(r)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(half_typed())
def test_every_request_answers_on_any_prefix_of_any_example(case):
    _answer_all(*case)


@pytest.mark.parametrize("path", FILES[:40], ids=lambda p: os.path.relpath(p, ROOT))
def test_every_request_answers_on_each_whole_example(path):
    text = _text(path)
    lines = text.split("\n")
    _answer_all(path, text, [(i, j) for i, ln in enumerate(lines) for j in range(0, len(ln), 3)])


def test_the_diagnostics_of_every_corpus_program_are_sensec_checks():
    """The analysis reports exactly the errors `sensec check` reports, with their messages,
    on every program of the corpus and every example (a module's errors aside: the workspace
    reports those at the import that reaches them, tests/test_lsp.py)."""
    import glob
    from conftest import ROOT
    from sensec.driver import check_file
    from sensec.lsp.index import analyse
    paths = sorted(glob.glob(os.path.join(ROOT, "tests", "programs", "*", "*.sns"))
                   + glob.glob(os.path.join(ROOT, "examples", "*.sns")))
    assert len(paths) > 500
    differ = []
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        expected = [e.message for e in check_file(path)
                    if not (e.path and os.path.abspath(e.path) != os.path.abspath(path))]
        got = [d.message for d in analyse(text, path).diagnostics if d.severity == "error"]
        if sorted(got) != sorted(expected):
            differ.append((os.path.relpath(path, ROOT), got, expected))
    assert differ == []
