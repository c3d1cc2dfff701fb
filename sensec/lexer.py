"""The Sense lexer: PLY token rules plus the indentation filter, every token with line and column.

Two layers, as in PLY's GardenSnake example but with real positions:

* the PLY rules below turn text into *raw* tokens, one ``NEWLINE`` per physical line break
  outside strings (spec 2.1-2.7);
* :mod:`sensec.indent` turns the raw stream into logical lines: it drops line breaks inside
  brackets and on blank lines, emits ``INDENT``/``DEDENT``, and recognises the two soft
  keywords ``rollback``/``compensate``.

``Lexer.token()`` returns the filtered stream, which is what ``ply.yacc`` consumes. Every token
carries ``lineno``, ``lexpos`` and ``col`` (1-based), and real tokens also ``end`` (the offset
just past their text), so the parser can quote the source text of a token in a message.
"""

from __future__ import annotations

import bisect
import re

from ply import lex
from ply.lex import LexToken

from sensevm.errors import Pos, SenseSyntaxError
from sensevm.keywords import KEYWORDS  # re-exported: the reserved words of spec 2.4
from sensec.indent import IndentFilter


# What the reference calls our operator tokens in ``(got KIND 'x')`` messages, where it differs.
# Our names follow the usual PLY/C conventions; the messages must read like the reference's.
DISPLAY_KIND = {
    "EQ": "EQEQ",
    "NE": "BANGEQ",
    "LE": "LTEQ",
    "GE": "GTEQ",
    "ASSIGN": "EQ",
    # Soft keywords are identifiers as far as the user is concerned.
    "ROLLBACK": "IDENT",
    "COMPENSATE": "IDENT",
}

# Tokens whose text is never quoted in a message (the reference shows '').
SYNTHETIC = frozenset({"NEWLINE", "INDENT", "DEDENT"})

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}
_ESCAPE_RE = re.compile(r"\\([\s\S])")
# Escapes are honoured while looking for the closing quote(s): '"a\"b"' is one string.
_PLAIN_BODY = re.compile(r'((?:[^"\\]|\\[\s\S])*)"')
_TRIPLE_BODY = re.compile(r'((?:[^\\]|\\[\s\S])*?)"""')

_BRACES_MSG = ("Sense uses indentation for blocks, not '{ }' \u2014 write ':' then an indented "
               "block instead")
_SPECIAL_CHAR_MSG = {
    "{": _BRACES_MSG,
    "}": _BRACES_MSG,
    ";": "semicolons aren't used in Sense \u2014 start a new line instead",
    "!": ("'!' is not an operator in Sense \u2014 use 'not' for negation and '!=' for "
          "not-equal"),
}


def normalize_newlines(source: str) -> str:
    """Text-mode reading: ``\\r\\n`` and a lone ``\\r`` are line breaks like ``\\n`` (spec 2.1)."""
    if "\r" in source:
        source = source.replace("\r\n", "\n").replace("\r", "\n")
    return source


def unescape(body: str) -> str:
    """Spec 2.7: the five named escapes, and any other ``\\x`` is just ``x``."""
    if "\\" not in body:
        return body
    return _ESCAPE_RE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


def _decimal_int(text: str) -> int:
    """``int(text)`` without CPython's 4300-digit guard: Sense Ints are unbounded."""
    if len(text) <= 4000:
        return int(text)
    value = 0
    for start in range(0, len(text), 4000):
        chunk = text[start:start + 4000]
        value = value * 10 ** len(chunk) + int(chunk)
    return value


class SourceText:
    """A normalised source text with its line table: offsets to positions, token text."""

    __slots__ = ("text", "path", "line_starts")

    def __init__(self, text: str, path: str = "<input>"):
        self.text = text
        self.path = path
        starts = [0]
        starts.extend(m.end() for m in re.finditer("\n", text))
        self.line_starts = starts

    def pos(self, offset: int) -> Pos:
        """The 1-based line and column of a character offset (``len(text)`` is the EOF)."""
        line = bisect.bisect_right(self.line_starts, offset)
        return Pos(line, offset - self.line_starts[line - 1] + 1)

    @property
    def eof_pos(self) -> Pos:
        return self.pos(len(self.text))

    @property
    def line_count(self) -> int:
        return len(self.line_starts)

    def lexeme(self, tok) -> str:
        """The source text of a token as a message quotes it ('' for layout tokens and EOF)."""
        if tok is None or tok.type in SYNTHETIC or getattr(tok, "end", None) is None:
            return ""
        return self.text[tok.lexpos:tok.end]


def display_kind(tok) -> str:
    """The token kind as the reference names it in messages (``EOF`` at the end of input)."""
    if tok is None:
        return "EOF"
    return DISPLAY_KIND.get(tok.type, tok.type)


class Lexer:
    """PLY lexer for Sense, in class style (one ``ply.lex`` build per instance).

    ``error_func`` decides what happens to a lexical error: by default it is raised as a
    :class:`SenseSyntaxError`; a callable receives the error instead and lexing recovers
    (skips the character, ends the string at EOF, ...) so that ``sensec check`` can report
    several problems in one run.
    """

    keyword_map = {word: word.upper() for word in KEYWORDS}

    tokens = (
        "IDENT", "INT", "FLOAT", "STRING",
        "PLUS", "MINUS", "STAR", "SLASH", "PERCENT",
        "EQ", "NE", "LT", "LE", "GT", "GE", "ASSIGN", "ARROW",
        "LPAREN", "RPAREN", "LBRACKET", "RBRACKET", "COMMA", "COLON", "DOT",
        "NEWLINE", "INDENT", "DEDENT", "ROLLBACK", "COMPENSATE",
    ) + tuple(keyword_map.values())

    def __init__(self, path: str = "<input>", error_func=None):
        self.path = path
        self.error_func = error_func
        self.source = SourceText("", path)
        self._stream = iter(())
        # Built once per instance; optimize off, so PLY writes no lextab module.
        self.lexer = lex.lex(module=self, optimize=False, errorlog=lex.NullLogger())

    # ------------------------------------------------------------------ public interface

    def input(self, text: str) -> None:
        """Start lexing ``text`` (line endings are normalised first)."""
        self.source = SourceText(normalize_newlines(text), self.path)
        self.lexer.input(self.source.text)
        self.lexer.lineno = 1
        self._stream = iter(IndentFilter(self._raw_tokens(), self.source, self._error))

    def token(self):
        """The next filtered token, or None at the end (the interface ``ply.yacc`` expects)."""
        return next(self._stream, None)

    def __iter__(self):
        return self._stream

    def tokenize(self, text: str) -> list:
        """Every filtered token of ``text``; raises the first lexical error (unless recovering)."""
        self.input(text)
        return list(self._stream)

    def raw_tokens(self, text: str) -> list:
        """The unfiltered PLY tokens (one NEWLINE per physical line break); for tests and tools."""
        self.input(text)
        return list(self._raw_tokens())

    # ------------------------------------------------------------------ errors

    def _error(self, message: str, pos: Pos) -> None:
        err = SenseSyntaxError(message, pos, path=self.path)
        if self.error_func is None:
            raise err
        self.error_func(err)

    def _raw_tokens(self):
        """PLY's tokens, each given ``col``, ``end`` and a ``lineno`` from the line table.

        This is ``ply.lex.Lexer.token()`` run inline over PLY's own master regex and rule
        functions (so the token rules below stay the only definition of the tokens), with the
        positions added as each token is made: one Python call per token fewer, on the path
        every source file takes. It matches what ``token()`` returns token for token, errors
        included (a rule function that skips or moves ``lexpos`` does so on PLY's lexer).
        """
        lexer = self.lexer
        data = lexer.lexdata
        length = len(data)
        ignore = lexer.lexignore
        master = lexer.lexre
        errorf = lexer.lexerrorf
        starts = self.source.line_starts
        last_line = len(starts)
        line = 1
        pos = lexer.lexpos
        # A run of ignored characters is skipped in one regex call, not one loop turn each.
        skip = re.compile("[" + re.escape(ignore) + "]+").match if ignore else None
        while pos < length:
            if data[pos] in ignore:
                pos += 1
                if pos < length and data[pos] in ignore:     # a longer run (indentation)
                    pos = skip(data, pos).end()
                continue
            for regex, index in master:
                m = regex.match(data, pos)
                if not m:
                    continue
                func, type_ = index[m.lastindex]
                if not func:
                    pos = m.end()
                    if type_:
                        tok = LexToken()
                        tok.type, tok.value, tok.lexpos = type_, m.group(), m.start()
                    else:
                        tok = None           # an ignored pattern (comments)
                    break
                tok = LexToken()
                tok.value = m.group()
                tok.lineno = lexer.lineno
                tok.lexpos = pos
                tok.type = type_
                pos = m.end()
                tok.lexer = lexer
                lexer.lexmatch = m
                lexer.lexpos = pos
                tok = func(tok)
                pos = lexer.lexpos           # a rule may move it (strings, skipped characters)
                break
            else:
                if data[pos] in lexer.lexliterals:
                    raise AssertionError("the Sense lexer defines no literals")
                tok = LexToken()
                tok.value = data[pos:]
                tok.lineno = lexer.lineno
                tok.type = "error"
                tok.lexer = lexer
                tok.lexpos = pos
                lexer.lexpos = pos
                tok = errorf(tok)
                if pos == lexer.lexpos:
                    raise lex.LexError(f"Scanning error. Illegal character '{data[pos]}'",
                                       data[pos:])
                pos = lexer.lexpos
            if not tok:
                continue
            lexer.lexpos = pos
            tok.end = pos
            # Offsets only grow, so the line table is walked once rather than searched.
            lexpos = tok.lexpos
            while line < last_line and starts[line] <= lexpos:
                line += 1
            tok.lineno = line
            tok.col = lexpos - starts[line - 1] + 1
            yield tok
        lexer.lexpos = pos + 1           # as token() leaves it at the end

    # ------------------------------------------------------------------ token rules

    # Tabs are ordinary whitespace between tokens; in leading whitespace the indentation filter
    # rejects them (it alone knows whether a line starts inside brackets).
    t_ignore = " \t"
    t_ignore_COMMENT = r"\#[^\n]*"

    t_ARROW = r"->"
    t_EQ = r"=="
    t_NE = r"!="
    t_LE = r"<="
    t_GE = r">="
    t_PLUS = r"\+"
    t_MINUS = r"-"
    t_STAR = r"\*"
    t_SLASH = r"/"
    t_PERCENT = r"%"
    t_LT = r"<"
    t_GT = r">"
    t_ASSIGN = r"="
    t_LPAREN = r"\("
    t_RPAREN = r"\)"
    t_LBRACKET = r"\["
    t_RBRACKET = r"\]"
    t_COMMA = r","
    t_COLON = r":"
    t_DOT = r"\."

    # Function rules match in definition order: strings before anything, floats before ints.

    def t_NEWLINE(self, t):
        r"\n"
        t.value = ""
        return t

    def t_STRING(self, t):
        r'"'
        # The rule matches the opening quote only; the body is matched here, so that a literal
        # that never ends is told apart and reported where the file ends, as the reference does.
        text = t.lexer.lexdata
        if text.startswith('"""', t.lexpos):
            opener, body, what = 3, _TRIPLE_BODY, "unterminated triple-quoted string literal"
        else:
            opener, body, what = 1, _PLAIN_BODY, "unterminated string literal"
        m = body.match(text, t.lexpos + opener)
        if m is None:
            self._error(what, self.source.eof_pos)
            # Recovering: the literal swallows the rest of the file.
            t.lexer.lexpos = len(text)
            t.value = unescape(text[t.lexpos + opener:])
            return t
        t.lexer.lexpos = m.end()
        t.value = unescape(m.group(1))
        return t

    def t_FLOAT(self, t):
        r"\d+\.\d+"
        t.value = float(t.value)
        return t

    def t_INT(self, t):
        r"\d+"
        t.value = _decimal_int(t.value)
        return t

    def t_IDENT(self, t):
        r"[^\W\d]\w*"
        # \w is str.isalnum() plus '_', which is what the reference accepts after the first
        # character; the first one must be a letter or '_' (so not '²' or 'Ⅷ').
        first = t.value[0]
        if not (first.isalpha() or first == "_"):
            self._error(f"unexpected character {first!r}", self.source.pos(t.lexpos))
            t.lexer.lexpos = t.lexpos + 1
            return None
        t.type = self.keyword_map.get(t.value, "IDENT")
        return t

    def t_error(self, t):
        char = t.value[0]
        message = _SPECIAL_CHAR_MSG.get(char) or f"unexpected character {char!r}"
        self._error(message, self.source.pos(t.lexpos))
        t.lexer.skip(1)
