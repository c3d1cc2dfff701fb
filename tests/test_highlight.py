"""The Sense Pygments lexer: token types, no Error tokens on the corpus, the plugin entry point."""

from __future__ import annotations

import glob
import os

import pytest
from pygments.token import (Comment, Error, Keyword, Name, Number, Operator, Punctuation, String,
                            Token)

from sensevm.cli.highlight import KEYWORDS, SenseLexer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tokens(text: str):
    """(type, text) pairs, whitespace left out: what each word was taken for."""
    return [(t, v) for t, v in SenseLexer().get_tokens(text)
            if v.strip() and t not in Token.Text.Whitespace]


def kind(text: str, word: str):
    found = [t for t, v in tokens(text) if v == word]
    assert found, f"{word!r} not among the tokens of {text!r}"
    return found[0]


SAMPLE = '''\
# a comment
def double(x: Int) -> Int:
    return x * 2
reversible action set_bio(user: String) requires profile.write, approval:
    old = "none"
rollback:
    print("restoring " + old)
tool search(q) returns String requires web.search "search the web":
    return """multi "quoted"
line"""
async agent worker:
    pause("why\\n")
policy:
    allow web.search
    deny test.run
policy: deny email.send
import python "os" as os_mod
from lib.util import helper
session s:
    a = set_bio("x")
    a.approve()
    print(1.5, 42, -3 % 2 != 1 and not false or nil, true)
'''


def test_keywords_and_constants():
    assert kind(SAMPLE, "def") in Keyword
    assert kind(SAMPLE, "return") in Keyword
    assert kind(SAMPLE, "policy") in Keyword
    assert kind(SAMPLE, "reversible") in Keyword
    assert kind(SAMPLE, "async") in Keyword
    assert kind(SAMPLE, "true") in Keyword.Constant
    assert kind(SAMPLE, "nil") in Keyword.Constant
    assert kind(SAMPLE, "and") in Operator.Word
    assert kind(SAMPLE, "not") in Operator.Word
    assert kind(SAMPLE, "Int") in Keyword.Type


def test_every_reserved_word_is_a_keyword():
    for word in KEYWORDS:
        (t, v), = tokens(word)
        assert v == word and (t in Keyword or t in Operator.Word), (word, t)
    assert len(KEYWORDS) == 38


def test_declaration_names():
    assert kind(SAMPLE, "double") is Name.Function
    assert kind(SAMPLE, "set_bio") is Name.Function
    assert kind(SAMPLE, "search") is Name.Function
    assert kind(SAMPLE, "worker") is Name.Class


def test_capability_paths_after_requires_allow_deny():
    assert kind(SAMPLE, "profile.write") is Name.Namespace
    assert kind(SAMPLE, "approval") in Keyword
    # Reserved words are legal capability segments.
    assert kind(SAMPLE, "test.run") is Name.Namespace
    assert kind(SAMPLE, "email.send") is Name.Namespace
    assert [v for t, v in tokens(SAMPLE) if t is Name.Namespace].count("web.search") == 2
    # The description after a tool's capability is still a string.
    assert (String.Double, "search the web") in tokens(SAMPLE)


def test_rollback_is_a_keyword_only_where_it_opens_a_block():
    assert kind(SAMPLE, "rollback") in Keyword
    assert kind("rollback(a)\n", "rollback") is Name.Builtin
    assert kind("x = a.rollback()\n", "rollback") is Name.Attribute
    assert kind("rollback_count = 1\n", "rollback_count") is Name


def test_builtins_and_members():
    assert kind(SAMPLE, "print") is Name.Builtin
    assert kind(SAMPLE, "pause") is Name.Builtin
    assert kind(SAMPLE, "approve") is Name.Attribute
    assert kind("printer(1)\n", "printer") is Name


def test_strings_numbers_comments_operators():
    toks = tokens(SAMPLE)
    assert (Comment.Single, "# a comment") in toks
    assert (String.Escape, "\\n") in toks
    assert (String.Double, '"""') in toks
    text = "".join(v for t, v in toks if t in String)
    assert 'multi "quoted"\nline' in text
    assert (Number.Float, "1.5") in toks
    assert (Number.Integer, "42") in toks
    assert (Operator, "->") in toks and (Operator, "!=") in toks and (Operator, "%") in toks
    assert (Punctuation, ":") in toks
    assert (Name.Namespace, "lib.util") in toks
    assert (Name, "helper") in toks                  # a name 'from ... import' binds
    assert (Keyword.Namespace, "python") in toks


def test_no_error_tokens_in_the_sample():
    assert not [v for t, v in tokens(SAMPLE) if t in Error]


def test_lexically_invalid_characters_are_errors():
    assert (Error, "@") in tokens("x = @\n")
    assert (Error, ";") in tokens("x = 1;\n")


def _corpus():
    files = sorted(glob.glob(os.path.join(ROOT, "tests", "programs", "*", "*.sns"))
                   + glob.glob(os.path.join(ROOT, "examples", "*.sns")))
    assert files, "no .sns programs found"
    return files


def test_no_error_tokens_in_any_program_that_parses():
    from sensec.driver import parse_source
    from sensevm.base.errors import SenseError
    lexer = SenseLexer(stripnl=False)
    checked = 0
    for path in _corpus():
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
        try:
            parse_source(source, path)
        except SenseError:
            continue
        toks = list(lexer.get_tokens(source))
        assert "".join(v for _, v in toks).rstrip("\n") == source.rstrip("\n"), path
        errors = [v for t, v in toks if t in Error]
        assert not errors, f"{os.path.relpath(path, ROOT)}: Error tokens {errors[:5]}"
        checked += 1
    assert checked > 100


def test_registered_as_a_pygments_plugin():
    from importlib.metadata import entry_points
    if not any(ep.name == "sense" for ep in entry_points(group="pygments.lexers")):
        pytest.skip("the package is not installed in this environment (pip install -e .), "
                    "so its pygments.lexers entry point is not registered")
    from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
    assert isinstance(get_lexer_by_name("sense"), SenseLexer)
    assert isinstance(get_lexer_for_filename("hello.sns"), SenseLexer)


def test_map_literals_and_methods():
    # EXTENSIONS.md E1/E2: braces are punctuation, Map a type, a method an attribute.
    toks = tokens('m: Map<Int> = {"a": 1, 2: [3]}\nprint(m.keys(), "x".upper())\n')
    assert (Punctuation, "{") in toks and (Punctuation, "}") in toks
    assert (Keyword.Type, "Map") in toks
    assert (Name.Attribute, "keys") in toks and (Name.Attribute, "upper") in toks
    assert not [v for t, v in toks if t in Error]


def test_a_native_call_of_the_library_is_highlighted_as_one():
    """`native::name(...)` (only the standard library writes it: docs/stdlib.md)."""
    from pygments.token import Keyword, Name, Operator
    toks = [(t, v) for t, v in SenseLexer().get_tokens("x = native::fs_read_text(p)\n")
            if v.strip()]
    assert toks[2:5] == [(Keyword.Pseudo, "native"), (Operator, "::"),
                         (Name.Builtin, "fs_read_text")]
    # Every file of the library highlights without an error token.
    import glob
    from pygments.token import Error
    from conftest import ROOT
    for path in glob.glob(os.path.join(ROOT, "stdlib", "*.sns")):
        with open(path, encoding="utf-8") as fh:
            assert not [v for t, v in SenseLexer().get_tokens(fh.read()) if t in Error], path
