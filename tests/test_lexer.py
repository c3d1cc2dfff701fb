"""Lexer and indentation filter: token kinds, positions, strings, numbers and every lexical error."""

from __future__ import annotations

import pytest

from sensec.lexer import KEYWORDS, Lexer, SourceText, normalize_newlines, unescape
from sensevm.base.errors import Pos, SenseSyntaxError


def toks(src):
    return Lexer().tokenize(src)


def kinds(src):
    return [t.type for t in toks(src)]


def values(src):
    return [(t.type, t.value) for t in toks(src)]


def positioned(src):
    return [(t.type, t.lineno, t.col) for t in toks(src)]


def lex_error(src) -> SenseSyntaxError:
    with pytest.raises(SenseSyntaxError) as info:
        Lexer(path="f.sns").tokenize(src)
    return info.value


# ----------------------------------------------------------------------------- kinds

def test_every_keyword_is_its_own_token():
    assert len(KEYWORDS) == 38
    for word in KEYWORDS:
        assert kinds(word) == [word.upper(), "NEWLINE"]
        assert toks(word)[0].value == word


def test_words_that_are_not_reserved():
    for word in ("fn", "elif", "let", "pass", "rollback", "print", "await", "self", "compensate"):
        assert kinds(word) == ["IDENT", "NEWLINE"]


@pytest.mark.parametrize("text, kind", [
    ("+", "PLUS"), ("-", "MINUS"), ("*", "STAR"), ("/", "SLASH"), ("%", "PERCENT"),
    ("==", "EQ"), ("!=", "NE"), ("<", "LT"), ("<=", "LE"), (">", "GT"), (">=", "GE"),
    ("=", "ASSIGN"), ("->", "ARROW"), ("(", "LPAREN"), (")", "RPAREN"), ("[", "LBRACKET"),
    ("]", "RBRACKET"), ("{", "LBRACE"), ("}", "RBRACE"), (",", "COMMA"), (":", "COLON"),
    (".", "DOT"),
])
def test_operators(text, kind):
    assert values(f"a {text} b")[1] == (kind, text)


def test_longest_operator_wins_and_no_double_operators():
    assert kinds("a->b==c<=d>=e!=f")[1:-1:2] == ["ARROW", "EQ", "LE", "GE", "NE"]
    assert kinds("a**b")[1:3] == ["STAR", "STAR"]
    assert kinds("a//b")[1:3] == ["SLASH", "SLASH"]
    assert kinds("x>>y")[1:3] == ["GT", "GT"]


def test_identifiers_unicode_and_underscore():
    assert values("\u00e9t\u00e9 _x x1 \u00aa x\u00b2 x\u0661") == [
        ("IDENT", "\u00e9t\u00e9"), ("IDENT", "_x"), ("IDENT", "x1"), ("IDENT", "\u00aa"),
        ("IDENT", "x\u00b2"), ("IDENT", "x\u0661"), ("NEWLINE", "")]


def test_comments_are_dropped_but_not_inside_strings():
    assert values('x # a comment "with a string"\ny = "# not a comment"') == [
        ("IDENT", "x"), ("NEWLINE", ""), ("IDENT", "y"), ("ASSIGN", "="),
        ("STRING", "# not a comment"), ("NEWLINE", "")]


# ----------------------------------------------------------------------------- numbers

def test_numbers():
    assert values("0 42 007 3.14 0.5 00.5") == [
        ("INT", 0), ("INT", 42), ("INT", 7), ("FLOAT", 3.14), ("FLOAT", 0.5), ("FLOAT", 0.5),
        ("NEWLINE", "")]
    assert isinstance(toks("3.0")[0].value, float)


def test_number_edge_shapes():
    assert kinds("1.") == ["INT", "DOT", "NEWLINE"]
    assert kinds(".5") == ["DOT", "INT", "NEWLINE"]
    assert values("1e3") == [("INT", 1), ("IDENT", "e3"), ("NEWLINE", "")]
    assert values("0x10") == [("INT", 0), ("IDENT", "x10"), ("NEWLINE", "")]
    assert values("1_000") == [("INT", 1), ("IDENT", "_000"), ("NEWLINE", "")]
    assert kinds("1..2") == ["INT", "DOT", "DOT", "INT", "NEWLINE"]


def test_unicode_decimal_digits_are_digits():
    assert values("\u0661\u0662 1.\u0662") == [("INT", 12), ("FLOAT", 1.2), ("NEWLINE", "")]


def test_ints_are_unbounded():
    # CPython refuses int() on more than 4300 digits; a Sense Int literal goes on to the
    # 8,600 a .snb constant can hold (test_hostile_input.py has the error past them).
    from sensec.lexer import MAX_INT_DIGITS
    assert toks("9" * MAX_INT_DIGITS)[0].value == 10 ** MAX_INT_DIGITS - 1


# ----------------------------------------------------------------------------- strings

@pytest.mark.parametrize("source, value", [
    (r'"plain"', "plain"),
    (r'"a\nb"', "a\nb"),
    (r'"tab\there"', "tab\there"),
    (r'"cr\r"', "cr\r"),
    (r'"q\"q"', 'q"q'),
    (r'"back\\slash"', "back\\slash"),
    (r'"a\qb"', "aqb"),
    (r'"\x41\u0041\0"', "x41u00410"),
    ('"raw\nnewline"', "raw\nnewline"),
    ('"back\\\nslash-newline"', "back\nslash-newline"),
    ('""', ""),
    ('""""""', ""),
    ('"""a"b"""', 'a"b'),
    ('"""a""b"""', 'a""b'),
    ('""""a"""', '"a'),
    ('"""a\\""""', 'a"'),
    ('"""multi\nline\n"""', "multi\nline\n"),
    ('"""esc\\tape"""', "esc\tape"),
    ('"# hash"', "# hash"),
])
def test_string_values(source, value):
    assert values(source) == [("STRING", value), ("NEWLINE", "")]


def test_triple_string_ends_at_first_triple_quote():
    # '"""a"""' then '"' opens a string that never ends
    assert lex_error('"""a""""').message.startswith("unterminated string literal -- ")
    assert values('"""a""""" x') == [("STRING", "a"), ("STRING", ""), ("IDENT", "x"),
                                      ("NEWLINE", "")]


def test_adjacent_strings_stay_separate_tokens():
    assert values('"a" "b"') == [("STRING", "a"), ("STRING", "b"), ("NEWLINE", "")]


def test_string_token_keeps_its_source_text():
    lx = Lexer()
    tokens = lx.tokenize('x = "a\\tb" """c\nd"""')
    assert [lx.source.lexeme(t) for t in tokens] == ["x", "=", '"a\\tb"', '"""c\nd"""', ""]


def test_unescape_helper():
    assert unescape(r"\n\t\r\"\\\z") == "\n\t\r\"\\z"
    assert unescape("no escapes") == "no escapes"


@pytest.mark.parametrize("quote", ['"', '"""'])
@pytest.mark.parametrize("shift", range(4))
def test_a_long_literal_is_unescaped_in_pieces_that_never_split_an_escape(quote, shift):
    from sensec.lexer import _UNESCAPE_CHUNK
    # Runs of backslashes on every side of the first piece's end.
    head = "a" * (_UNESCAPE_CHUNK - 2 - shift)
    body = head + "\\\\" * 2 + "\\n" + '\\"' + "b" * _UNESCAPE_CHUNK + "\\\\\\t"
    assert values(f"{quote}{body}{quote} x") == [
        ("STRING", head + "\\" * 2 + "\n" + '"' + "b" * _UNESCAPE_CHUNK + "\\\t"),
        ("IDENT", "x"), ("NEWLINE", "")]
    assert unescape(body, len(head), len(head) + 6) == "\\\\\n"


# ----------------------------------------------------------------------------- positions

def test_positions_are_one_based_lines_and_columns():
    assert positioned("x = foo(1, 2.5)") == [
        ("IDENT", 1, 1), ("ASSIGN", 1, 3), ("IDENT", 1, 5), ("LPAREN", 1, 8), ("INT", 1, 9),
        ("COMMA", 1, 10), ("FLOAT", 1, 12), ("RPAREN", 1, 15), ("NEWLINE", 1, 16)]


def test_position_after_a_multiline_string():
    assert positioned('x = """a\nbc""" + y') == [
        ("IDENT", 1, 1), ("ASSIGN", 1, 3), ("STRING", 1, 5), ("PLUS", 2, 7), ("IDENT", 2, 9),
        ("NEWLINE", 2, 10)]


def test_tab_counts_as_one_column_between_tokens():
    assert positioned("x\t= 1") == [("IDENT", 1, 1), ("ASSIGN", 1, 3), ("INT", 1, 5),
                                    ("NEWLINE", 1, 6)]


def test_indent_and_dedent_positions():
    src = "if a:\n    b\n    if c:\n        d\ne\n"
    assert positioned(src) == [
        ("IF", 1, 1), ("IDENT", 1, 4), ("COLON", 1, 5), ("NEWLINE", 1, 6),
        ("INDENT", 2, 5), ("IDENT", 2, 5), ("NEWLINE", 2, 6),
        ("IF", 3, 5), ("IDENT", 3, 8), ("COLON", 3, 9), ("NEWLINE", 3, 10),
        ("INDENT", 4, 9), ("IDENT", 4, 9), ("NEWLINE", 4, 10),
        ("DEDENT", 5, 1), ("DEDENT", 5, 1), ("IDENT", 5, 1), ("NEWLINE", 5, 2)]


def test_dedents_at_end_of_input_stand_at_eof():
    assert positioned("if a:\n  if b:\n    c\n") == [
        ("IF", 1, 1), ("IDENT", 1, 4), ("COLON", 1, 5), ("NEWLINE", 1, 6),
        ("INDENT", 2, 3), ("IF", 2, 3), ("IDENT", 2, 6), ("COLON", 2, 7), ("NEWLINE", 2, 8),
        ("INDENT", 3, 5), ("IDENT", 3, 5), ("NEWLINE", 3, 6),
        ("DEDENT", 4, 1), ("DEDENT", 4, 1)]


def test_missing_final_newline_is_supplied_at_eof():
    assert positioned("if a:\n  b") == [
        ("IF", 1, 1), ("IDENT", 1, 4), ("COLON", 1, 5), ("NEWLINE", 1, 6),
        ("INDENT", 2, 3), ("IDENT", 2, 3), ("NEWLINE", 2, 4), ("DEDENT", 2, 4)]


def test_synthetic_tokens_never_sit_at_offset_zero():
    for tok in toks("a\nif b:\n  c\n  if d:\n      e\nf"):
        if tok.type in ("INDENT", "DEDENT", "NEWLINE"):
            assert tok.lexpos > 0


def test_dedent_stands_at_the_first_token_after_blank_lines():
    tokens = toks("if a:\n  b\n\n   \n# c\nd\n")
    dedent = [t for t in tokens if t.type == "DEDENT"][0]
    assert (dedent.lineno, dedent.col) == (6, 1)


# ----------------------------------------------------------------------------- layout

def test_blank_and_comment_lines_are_ignored():
    assert kinds("x\n\n   \n  # indented comment\n# c\ny\n") == [
        "IDENT", "NEWLINE", "IDENT", "NEWLINE"]


def test_comment_lines_do_not_change_indentation():
    assert kinds("if a:\n  b\n      # deeper\n# shallower\n  c\n") == [
        "IF", "IDENT", "COLON", "NEWLINE", "INDENT", "IDENT", "NEWLINE", "IDENT", "NEWLINE",
        "DEDENT"]


def test_newlines_and_indentation_inside_brackets_are_ignored():
    assert kinds("x = [1,\n        2,\n3]\nf(a,\n\n  b\n)\n") == [
        "IDENT", "ASSIGN", "LBRACKET", "INT", "COMMA", "INT", "COMMA", "INT", "RBRACKET",
        "NEWLINE", "IDENT", "LPAREN", "IDENT", "COMMA", "IDENT", "RPAREN", "NEWLINE"]


def test_newlines_and_indentation_inside_braces_are_ignored():
    # A map literal may span lines (EXTENSIONS.md E1), as an array literal may.
    assert kinds('m = {\n    "a": [1,\n  2],\n\t"b": {},\n}\nx\n') == [
        "IDENT", "ASSIGN", "LBRACE", "STRING", "COLON", "LBRACKET", "INT", "COMMA", "INT",
        "RBRACKET", "COMMA", "STRING", "COLON", "LBRACE", "RBRACE", "COMMA", "RBRACE", "NEWLINE",
        "IDENT", "NEWLINE"]


def test_a_brace_is_a_token_wherever_it_stands():
    # Whether it may stand there is the parser's question: a block written with braces gets
    # the reference's hint from it (tests/test_parser.py).
    assert kinds("if x {") == ["IF", "IDENT", "LBRACE", "NEWLINE"]
    assert kinds("x = 1\n}") == ["IDENT", "ASSIGN", "INT", "NEWLINE", "RBRACE", "NEWLINE"]


def test_unclosed_bracket_still_ends_the_line_at_eof():
    assert positioned("print(1\n") == [
        ("IDENT", 1, 1), ("LPAREN", 1, 6), ("INT", 1, 7), ("NEWLINE", 2, 1)]


def test_deeper_line_gives_indent_for_the_parser_to_reject():
    assert kinds("x\n  y\n") == ["IDENT", "NEWLINE", "INDENT", "IDENT", "NEWLINE", "DEDENT"]


def test_crlf_and_cr_are_newlines():
    assert normalize_newlines("a\r\nb\rc\n") == "a\nb\nc\n"
    assert positioned("x\r\n  y\r") == positioned("x\n  y\n")
    assert values('"a\r\nb"') == [("STRING", "a\nb"), ("NEWLINE", "")]


def test_empty_and_blank_sources():
    assert toks("") == []
    assert toks("\n\n  \n# only a comment") == []


# ----------------------------------------------------------------------------- soft keywords

def test_rollback_at_line_start_before_colon():
    assert kinds("rollback:\n") == ["ROLLBACK", "COLON", "NEWLINE"]
    assert kinds("rollback :\n") == ["ROLLBACK", "COLON", "NEWLINE"]
    assert kinds("compensate: x\n") == ["COMPENSATE", "COLON", "IDENT", "NEWLINE"]
    assert kinds("if a:\n  rollback: Int = 1\n")[5] == "ROLLBACK"


@pytest.mark.parametrize("source, first", [
    ("try:\n", "TRY"), ("try: f()\n", "TRY"), ("try: x\n", "TRY"), ("try: 1\n", "TRY"),
    ("try: Int = 1\n", "IDENT"), ("try: Array<Int> = []\n", "IDENT"), ("try = 1\n", "IDENT"),
    ("try(1)\n", "IDENT"), ("except:\n", "EXCEPT"), ("except SenseError:\n", "EXCEPT"),
    ("except E as e:\n", "EXCEPT"), ("except: Int = 1\n", "IDENT"), ("except.x\n", "IDENT"),
    ("finally:\n", "FINALLY"), ("finally: Int = 1\n", "IDENT"), ("finally\n", "IDENT"),
    ("raise\n", "RAISE"), ("raise e\n", "RAISE"), ('raise "x"\n', "RAISE"),
    ("raise 1\n", "RAISE"), ("raise nil\n", "RAISE"), ("raise(e)\n", "IDENT"),
    ("raise -1\n", "IDENT"), ("raise = 1\n", "IDENT"), ("raise.x\n", "IDENT"),
    ("raise[0]\n", "IDENT"), ("raise + 1\n", "IDENT"), ("raise", "RAISE"), ("try:", "TRY"),
])
def test_error_handling_words_are_soft_keywords(source, first):
    assert kinds(source)[0] == first


def test_error_handling_words_are_names_mid_line():
    assert kinds("x = try\n")[2] == "IDENT"
    assert kinds("f(raise)\n")[2] == "IDENT"
    assert kinds("if a: try: x\n")[3] == "IDENT"


def test_rollback_elsewhere_is_an_identifier():
    assert kinds("rollback = 1")[0] == "IDENT"
    assert kinds("x = rollback:")[2] == "IDENT"
    assert kinds("f(1,\nrollback: 2)")[4] == "IDENT"
    assert kinds("rollback\n:")[0] == "IDENT"
    assert kinds("a.rollback()")[2] == "IDENT"


# ----------------------------------------------------------------------------- errors

UNTERMINATED = ("unterminated {}string literal -- the '{}' opened here is never closed "
                "(the file ends at line {}, column {})")

@pytest.mark.parametrize("source, message, pos", [
    ("x = 1;", "semicolons aren't used in Sense \u2014 start a new line instead", (1, 6)),
    ("x = !a", "'!' is not an operator in Sense \u2014 use 'not' for negation and '!=' for "
     "not-equal", (1, 5)),
    ("a\nb @ c", "unexpected character '@'", (2, 3)),
    ("a $", "unexpected character '$'", (1, 3)),
    ("a `", "unexpected character '`' -- strings are written in double quotes: \"...\"",
     (1, 3)),
    ("a \\\n", "unexpected character '\\\\'", (1, 3)),
    ("a '", 'unexpected character "\'" -- strings are written in double quotes: "..."',
     (1, 3)),
    ("a && b", "unexpected character '&' -- '&&' is not an operator in Sense; write 'and'",
     (1, 3)),
    ("a || b", "unexpected character '|' -- '||' is not an operator in Sense; write 'or'",
     (1, 3)),
    ("x = 1\u00a0+ 2", "unexpected character '\\xa0'", (1, 6)),
    ("x\f", "unexpected character '\\x0c'", (1, 2)),
    ("\u2167 = 1", "unexpected character '\u2167'", (1, 1)),
    ("\u00b2", "unexpected character '\u00b2'", (1, 1)),
    ("e\u0301 = 1", "unexpected character '\u0301'", (1, 2)),
    # An unterminated string is reported at its opening quote, with where the file ends.
    ('x = "abc\n', UNTERMINATED.format("", '"', 2, 1), (1, 5)),
    ('x = "abc\n\n\ny = 2', UNTERMINATED.format("", '"', 4, 6), (1, 5)),
    ('x = "a\\"\n', UNTERMINATED.format("", '"', 2, 1), (1, 5)),
    ('x = "a\\', UNTERMINATED.format("", '"', 1, 8), (1, 5)),
    ('x = """abc\n\n', UNTERMINATED.format("triple-quoted ", '"""', 3, 1), (1, 5)),
    ('x = """abc""\n', UNTERMINATED.format("triple-quoted ", '"""', 2, 1), (1, 5)),
    ('x = """a\\"""\ny', UNTERMINATED.format("triple-quoted ", '"""', 2, 2), (1, 5)),
    ('x = f"a{b}\n', UNTERMINATED.format("", 'f"', 2, 1), (1, 5)),
    ("\tx = 1", "tabs are not allowed for indentation \u2014 use spaces", (1, 1)),
    ("if 1:\n \tx = 1", "tabs are not allowed for indentation \u2014 use spaces", (2, 2)),
    ("x = 1\n\t\ny", "tabs are not allowed for indentation \u2014 use spaces", (2, 1)),
    ("x = 1\n  \t# c\n", "tabs are not allowed for indentation \u2014 use spaces", (2, 3)),
    ("x = 1\n\t", "tabs are not allowed for indentation \u2014 use spaces", (2, 1)),
    ("if 1:\n    x = 1\n  y = 2\n", "inconsistent indentation", (3, 3)),
    ("if 1:\n  if 2:\n      x\n    y\n", "inconsistent indentation", (4, 5)),
])
def test_lexical_errors(source, message, pos):
    err = lex_error(source)
    assert err.message == message
    assert err.pos == Pos(*pos)
    assert err.path == "f.sns"
    assert err.text == f"[line {pos[0]}] {message}"


def test_tabs_are_fine_inside_brackets_strings_and_after_code():
    assert kinds("x = (1 +\n\t2)\n") == ["IDENT", "ASSIGN", "LPAREN", "INT", "PLUS", "INT",
                                         "RPAREN", "NEWLINE"]
    assert values('x = """a\n\tb"""')[2] == ("STRING", "a\n\tb")
    assert kinds("x = 1 \t\ny") == ["IDENT", "ASSIGN", "INT", "NEWLINE", "IDENT", "NEWLINE"]


def test_first_error_in_source_order_wins():
    assert lex_error("x = 1\n\ty = @\n").message.startswith("tabs")
    assert lex_error("if 1:\n    a\n  b @\n").message == "inconsistent indentation"


def test_recovering_lexer_reports_every_error():
    seen = []
    tokens = Lexer(error_func=seen.append).tokenize('a @ b ; c\n\td $\nx = "open\n')
    assert [(e.message[:12], e.pos.line) for e in seen] == [
        ("unexpected c", 1), ("semicolons a", 1), ("tabs are not", 2), ("unexpected c", 2),
        ("unterminated", 3)]
    assert [t.type for t in tokens][:4] == ["IDENT", "IDENT", "IDENT", "NEWLINE"]
    assert tokens[-2].type == "STRING" and tokens[-2].value == "open\n"


def test_raw_tokens_keep_every_physical_newline():
    raw = Lexer().raw_tokens("a\n\n(b\n)\n")
    assert [t.type for t in raw] == ["IDENT", "NEWLINE", "NEWLINE", "LPAREN", "IDENT",
                                     "NEWLINE", "RPAREN", "NEWLINE"]


def test_source_text_positions():
    src = SourceText("ab\ncd\n")
    assert src.pos(0) == Pos(1, 1)
    assert src.pos(3) == Pos(2, 1)
    assert src.eof_pos == Pos(3, 1)
    assert src.line_count == 3


def test_a_lexer_instance_is_reusable():
    lx = Lexer()
    assert [t.type for t in lx.tokenize("a")] == ["IDENT", "NEWLINE"]
    with pytest.raises(SenseSyntaxError):
        lx.tokenize("@")
    assert [t.type for t in lx.tokenize("b\n")] == ["IDENT", "NEWLINE"]
