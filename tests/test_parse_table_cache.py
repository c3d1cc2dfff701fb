"""The parse-table cache: loaded tables equal generated ones; a changed grammar or a bad file is never used."""

from __future__ import annotations

import marshal
import os

import pytest

from sensec import grammar
from sensec.grammar import Parser


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(grammar, "_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def yacc_calls(monkeypatch):
    calls = []
    real = grammar.yacc.yacc

    def counting(*args, **kwargs):
        calls.append(kwargs.get("module"))
        return real(*args, **kwargs)

    monkeypatch.setattr(grammar.yacc, "yacc", counting)
    return calls


def test_second_build_loads_what_the_first_generated(cache_dir, yacc_calls):
    first = Parser().build()
    assert len(yacc_calls) == 1
    assert len(list(cache_dir.iterdir())) == 1
    second = Parser().build()
    assert len(yacc_calls) == 1                      # loaded, not generated
    assert second._lr.action == first._lr.action
    assert second._lr.goto == first._lr.goto
    assert second._items == first._items
    assert [str(p) for p in second._lr.productions] == [str(p) for p in first._lr.productions]
    assert [p.callable.__name__ if p.callable else None for p in second._lr.productions] == \
        [p.callable.__name__ if p.callable else None for p in first._lr.productions]
    assert second._tables.sr_conflicts == first._tables.sr_conflicts
    assert second._first == {k: frozenset(v) for k, v in first._first.items()}
    source = "def f(a: Int) -> Int:\n    return a + 1\nprint(f(2))\n"
    assert grammar.Parser.parse(second, source) == grammar.Parser.parse(first, source)
    for bad in ("x = (1\n", "def f(:\n", "f(a: 1, 2)\n", "import a.\n"):
        with pytest.raises(grammar.SenseSyntaxError) as one:
            first.parse(bad)
        with pytest.raises(grammar.SenseSyntaxError) as two:
            second.parse(bad)
        assert (one.value.message, one.value.pos) == (two.value.message, two.value.pos)


def test_tables_match_a_fresh_generation(cache_dir):
    Parser().build()
    loaded = Parser().build()
    fresh = loaded._generate_tables()
    assert fresh["action"] == loaded._lr.action and fresh["items"] == loaded._items


class _ChangedGrammar(Parser):
    """One rule changed: an expression statement may also end with a comma."""

    def p_expr_stmt(self, p):
        """expr_stmt : expr
                     | expr COMMA"""
        super().p_expr_stmt(p)


def test_a_changed_grammar_never_uses_the_old_tables(cache_dir, yacc_calls):
    Parser().build()
    assert _ChangedGrammar()._grammar_key() != Parser()._grammar_key()
    changed = _ChangedGrammar().build()
    assert len(yacc_calls) == 2                      # generated for the new grammar
    # ... and stored in place of the old grammar's tables, which can never be read again
    assert [p.name for p in cache_dir.iterdir()] == \
        [os.path.basename(grammar._table_cache_path(_ChangedGrammar()._grammar_key()))]
    assert changed.parse("x = 1,\n").body
    with pytest.raises(grammar.SenseSyntaxError):
        Parser().build().parse("x = 1,\n")


def test_precedence_and_tokens_are_part_of_the_key():
    class Reordered(Parser):
        precedence = tuple(reversed(Parser.precedence))
    assert Reordered()._grammar_key() != Parser()._grammar_key()


def test_a_file_with_another_key_is_ignored_and_replaced(cache_dir, yacc_calls):
    parser = Parser()
    key = parser._grammar_key()
    path = grammar._table_cache_path(key)
    good = Parser()._generate_tables()
    yacc_calls.clear()
    wrong = dict(good, action={})
    with open(path, "wb") as fh:
        fh.write(marshal.dumps(("0" * 64, wrong)))
    built = parser.build()
    assert len(yacc_calls) == 1
    assert built._lr.action == good["action"]
    with open(path, "rb") as fh:
        assert marshal.loads(fh.read())[0] == key


@pytest.mark.parametrize("content", [b"", b"garbage", marshal.dumps((None, None)),
                                     marshal.dumps(("k", {"action": {}}))])
def test_an_unreadable_file_is_regenerated(cache_dir, yacc_calls, content):
    parser = Parser()
    path = grammar._table_cache_path(parser._grammar_key())
    with open(path, "wb") as fh:
        fh.write(content)
    assert parser.build().parse("x = 1\n").body
    assert len(yacc_calls) == 1


def test_an_unwritable_cache_directory_still_parses(tmp_path, monkeypatch, yacc_calls):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr(grammar, "_CACHE_DIR", os.path.join(str(blocker), "sub"))
    assert Parser().build().parse("x = 1\n").body
    assert Parser().build().parse("y = 2\n").body
    assert len(yacc_calls) == 2


# ----------------------------------------------------------------------------- gc_paused

def test_gc_paused_restores_the_collector_even_after_an_error():
    import gc

    from sensec.driver import gc_paused
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()            # the inner block leaves the outer pause alone
    assert gc.isenabled()
    with pytest.raises(ValueError):
        with gc_paused():
            raise ValueError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()            # it was off before: it stays off
    finally:
        gc.enable()


def test_compile_source_leaves_the_collector_on():
    import gc

    from sensec.driver import compile_source
    compile_source("def f(a):\n    return a + 1\nprint(f(1))\n")
    assert gc.isenabled()
