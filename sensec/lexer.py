"""The Sense lexer: PLY token rules, and one scan that turns text into logical lines (spec 2.1-2.7).

The PLY rules below define the tokens; ``ply.lex`` builds its master regex from them. The scan
(``Lexer._scan``) runs that regex over the text and, in the same loop, does what Python calls
the layout of a program, the job of PLY's GardenSnake "indentation filter":

* a line break inside ``( )``, ``[ ]`` or ``{ }`` or on a blank or comment-only line is dropped; every
  other logical line ends with exactly one ``NEWLINE``;
* a stack of indentation widths starts at ``[0]``: a deeper first token pushes and emits
  ``INDENT``, a shallower one pops, one ``DEDENT`` per level, down to a width on the stack, else
  ``inconsistent indentation``;
* a tab in the leading whitespace of a line that does not start inside brackets, blank lines
  included, is refused, as the reference does (between tokens a tab is ordinary whitespace);
* at the end of input the last line is ended (even inside brackets, so an unclosed ``(`` is
  reported against that ``NEWLINE``, as the reference does) and every open block closed;
* the identifier ``rollback`` / ``compensate`` becomes a ``ROLLBACK`` / ``COMPENSATE`` token
  when it starts a logical line and the next token is ``:``: the only place the grammar can
  attach a rollback block to the action before it. Elsewhere they stay identifiers.
* ``try``, ``except``, ``finally`` and ``raise`` are soft keywords the same way (EXTENSIONS.md
  E4): a keyword only where it starts a logical line followed by what its form needs, and never
  where the reference would have read a statement (``soft_keyword_type`` decides, from at most
  the two tokens after the word on its line).

One loop rather than PLY's ``token()`` feeding a filter, because this runs for every token of
every file compiled: two generators and a rule-function call per token cost more than the rest
of lexing. ``tests/test_lexer_inline.py`` holds the scan to exactly what ``ply.lex``'s own
``token()`` and a plain filter written from the rules above produce, errors included.

Every token carries ``lineno``, ``lexpos`` and ``col`` (1-based) and ``end`` (the offset just
past its text), so the parser can quote the source text of a token in a message. Layout
tokens have empty text and real positions, never offset 0: ``INDENT`` and ``DEDENT`` stand at
the first token of the line that changes the indentation (or at the end of input), the
``NEWLINE`` that ends a line at its line break (or at the end of input when there is none).
"""

from __future__ import annotations

import bisect
import re

from ply import lex

from sensevm.base.errors import Pos, SenseSyntaxError
from sensevm.base.keywords import KEYWORDS  # re-exported: the reserved words of spec 2.4


# What the reference calls our operator tokens in ``(got KIND 'x')`` messages, where it differs.
# Our names follow the usual PLY/C conventions; the messages must read like the reference's.
DISPLAY_KIND = {
    "EQ": "EQEQ",
    "NE": "BANGEQ",
    "LE": "LTEQ",
    "GE": "GTEQ",
    "ASSIGN": "EQ",
    "FSTART": "FSTRING",
    "FOPEN": "LBRACE",
    "FCLOSE": "RBRACE",
    "FEND": "FSTRING_END",
    # Soft keywords are identifiers as far as the user is concerned.
    "ROLLBACK": "IDENT",
    "COMPENSATE": "IDENT",
}

# After ``raise`` at the start of a line, the tokens that begin the value it raises and cannot
# continue an expression whose first operand is a name called ``raise`` (``raise (x)`` stays a
# call, ``raise -1`` a subtraction, ``raise = 1`` an assignment).
_RAISE_OPERAND = frozenset({"IDENT", "STRING", "INT", "FLOAT", "TRUE", "FALSE", "NIL"})
# After ``try:`` / ``except:`` / ``finally:``, a name followed by one of these is the reference's
# typed declaration (``try: Int = 1``, ``try: Array<Int> = []``), so the word stays a name.
_DECLARES = frozenset({"ASSIGN", "LT"})

# Tokens whose text is never quoted in a message (the reference shows '').
SYNTHETIC = frozenset({"NEWLINE", "INDENT", "DEDENT"})

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}
_ESCAPE_RE = re.compile(r"\\([\s\S])")
# Escapes are honoured while looking for the closing quote(s): '"a\"b"' is one string. Every
# repetition is possessive: the engine then keeps no backtracking state per character, which
# for a literal of a few megabytes (as ``(?:[^"\\]|\\.)*"``) took gigabytes.
_PLAIN_END = re.compile(r'[^"\\]*+(?:\\[\s\S][^"\\]*+)*+"')
_TRIPLE_END = re.compile(r'[^"\\]*+(?:(?:\\[\s\S]|"(?!""))[^"\\]*+)*+"""')
# A long literal is unescaped this many characters at a time: re.sub keeps a piece per escape
# until it joins them, which for a literal of escapes was many times the literal's size.
_UNESCAPE_CHUNK = 1 << 16

# '{' and '}' are tokens (a map literal, EXTENSIONS.md E1): a brace that opens or closes a
# block is refused by the parser with this message (grammar.p_error).
BRACES_MSG = ("Sense uses indentation for blocks, not '{ }' \u2014 write ':' then an indented "
              "block instead")
_SPECIAL_CHAR_MSG = {
    ";": "semicolons aren't used in Sense \u2014 start a new line instead",
    "!": ("'!' is not an operator in Sense \u2014 use 'not' for negation and '!=' for "
          "not-equal"),
}

TAB_MSG = "tabs are not allowed for indentation \u2014 use spaces"
SOFT_KEYWORDS = {"rollback": "ROLLBACK", "compensate": "COMPENSATE", "try": "TRY",
                 "except": "EXCEPT", "finally": "FINALLY", "raise": "RAISE"}


def soft_keyword_type(word: str, following: list):
    """The token type of a soft keyword ``word`` that starts a logical line, from the types of
    the tokens after it on that line (``following``, ending in None at the line's end): the
    keyword's type, ``"IDENT"``, or None while the tokens seen so far do not decide it."""
    kind = SOFT_KEYWORDS[word]
    first = following[0]
    if word == "raise":
        # A bare `raise` (None) re-raises; the resolver decides whether it may.
        return kind if first is None or first in _RAISE_OPERAND else "IDENT"
    if word == "except" and first == "IDENT":
        return kind                 # `except SenseError:` is no statement of the reference
    if first != "COLON":
        return "IDENT"
    if kind in ("ROLLBACK", "COMPENSATE"):
        return kind
    if len(following) < 2:
        return None
    if following[1] != "IDENT":
        return kind                 # `try:` then a new line, or an inline statement
    if len(following) < 3:
        return None
    return "IDENT" if following[2] in _DECLARES else kind
_LEADING_WS = re.compile(r"[ \t]*")


def _unclosed_brace(quote: str, text: str, body_end: int) -> str:
    line_end = text.find("\n", body_end)
    rest = text[body_end + 1:] if line_end < 0 else text[body_end + 1:line_end]
    if len(quote) == 1 and "}" in rest:
        # The f-string ended at a quote, and its brace closes after it: most likely a string
        # in the f-string's own quotes inside the braces.
        return ("unclosed '{' in an f-string -- an expression in an f\"...\" string cannot "
                "hold a \"...\" string (use f\"\"\"...\"\"\" around it)")
    return "unclosed '{' in an f-string -- write '{{' for a brace"


# Characters other languages use that Sense spells differently: what to write instead.
# Keyed by the text at the bad character (the longest key that matches wins).
_HABIT_CHAR_MSG = {
    "&&": "unexpected character '&' -- '&&' is not an operator in Sense; write 'and'",
    "||": "unexpected character '|' -- '||' is not an operator in Sense; write 'or'",
    "&": "unexpected character '&' -- Sense has no bitwise operators; for logic write 'and'",
    "|": "unexpected character '|' -- Sense has no bitwise operators; for logic write 'or'",
    "?": ("unexpected character '?' -- Sense has no '?:' or '?.' operators; use an 'if' "
          "statement (or compare with nil)"),
    "'": "unexpected character \"'\" -- strings are written in double quotes: \"...\"",
    "`": "unexpected character '`' -- strings are written in double quotes: \"...\"",
}


def _bad_char_message(char: str, after: str = "") -> str:
    """The message for the character ``char`` that starts no token (``after``: the next one)."""
    special = _SPECIAL_CHAR_MSG.get(char)
    if special:
        return special
    habit = _HABIT_CHAR_MSG.get(char + after) or _HABIT_CHAR_MSG.get(char)
    if habit:
        return habit
    return f"unexpected character {char!r}"


def _bad_char_length(char: str, after: str) -> int:
    """How many characters one bad-character error covers: ``&&`` and ``||`` are one mistake."""
    return 2 if char + after in ("&&", "||") else 1


def _unterminated(what: str, opener: str, source) -> str:
    """An unterminated literal, reported at its opening quote: where the file ends too."""
    end = source.eof_pos
    return (f"{what} -- the {opener} opened here is never closed "
            f"(the file ends at line {end.line}, column {end.col})")


def normalize_newlines(source: str) -> str:
    """Text-mode reading: ``\\r\\n`` and a lone ``\\r`` are line breaks like ``\\n`` (spec 2.1)."""
    if "\r" in source:
        source = source.replace("\r\n", "\n").replace("\r", "\n")
    return source


def _escaped(m) -> str:
    return _ESCAPES.get(m.group(1), m.group(1))


def unescape(body: str, start: int = 0, end: int | None = None) -> str:
    """Spec 2.7: the five named escapes, and any other ``\\x`` is just ``x``; of
    ``body[start:end]`` (without copying that slice first when it is long)."""
    end = len(body) if end is None else end
    if end - start <= _UNESCAPE_CHUNK:
        text = body[start:end] if start or end != len(body) else body
        return _ESCAPE_RE.sub(_escaped, text) if "\\" in text else text
    if body.find("\\", start, end) < 0:
        return body[start:end]
    parts = []
    while start < end:
        stop = min(start + _UNESCAPE_CHUNK, end)
        if stop < end and _ends_escaping(body, start, stop):
            stop += 1           # never split a backslash from the character it escapes
        parts.append(_ESCAPE_RE.sub(_escaped, body[start:stop]))
        start = stop
    return "".join(parts)


def _ends_escaping(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` ends in a backslash that escapes ``text[end]``: an odd run
    of backslashes (pairs escape each other)."""
    i = end
    while i > start and text[i - 1] == "\\":
        i -= 1
    return (end - i) % 2 == 1


# The most digits an Int literal may have: every literal up to this size fits the .snb
# format's Int constants (snb.MAX_INT_BYTES varint bytes; tests hold the two together), and
# converting a longer one would take time quadratic in its length. Larger Ints can still be
# computed at run time.
MAX_INT_DIGITS = 8600


def _int_too_long(digits: int) -> str:
    return f"integer literal too long ({digits} digits; the limit is {MAX_INT_DIGITS})"


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


class Token:
    """A token: what PLY's ``LexToken`` holds (type, value, lineno, lexpos, and the ``lexer``
    ply.yacc sets on a token it reports), plus col and end."""

    __slots__ = ("type", "value", "lineno", "lexpos", "col", "end", "lexer")

    def __repr__(self) -> str:
        return f"Token({self.type},{self.value!r},{self.lineno}:{self.col})"


def _layout_token(type_: str, lexpos: int, lineno: int, col: int) -> Token:
    tok = Token()
    tok.type, tok.value, tok.lexpos, tok.lineno, tok.col, tok.end = type_, "", lexpos, lineno, col, lexpos
    return tok


def display_kind(tok) -> str:
    """The token kind as the reference names it in messages (``EOF`` at the end of input)."""
    if tok is None:
        return "EOF"
    return DISPLAY_KIND.get(tok.type, tok.type)


# The tokens an FSTRING becomes for the parser (expand_fstrings): the literal's start (its
# source text as the value), each piece of text, each expression between FOPEN and FCLOSE (the
# braces), and its end.
FSTRING_PARTS = ("FSTART", "FTEXT", "FOPEN", "FCLOSE", "FEND")


class FExpr:
    """An expression in an f-string's braces: its tokens, and the offsets of its ``{`` and
    just past its ``}``."""

    __slots__ = ("tokens", "start", "end")

    def __init__(self, tokens: tuple, start: int, end: int):
        self.tokens, self.start, self.end = tokens, start, end

    def _key(self):
        return (self.start, self.end, tuple(
            (t.type, t.value, t.lexpos, t.lineno, t.col, t.end) for t in self.tokens))

    def __eq__(self, other):
        return type(other) is FExpr and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self) -> str:
        return f"FExpr({self.start}:{self.end}, {len(self.tokens)} tokens)"


class FString:
    """An FSTRING token's value: the literal as written, its quotes, and its parts in order
    (a String of text, or an FExpr)."""

    __slots__ = ("text", "quote", "parts")

    def __init__(self, text: str, quote: str, parts: tuple):
        self.text, self.quote, self.parts = text, quote, parts

    def __eq__(self, other):
        return type(other) is FString and (self.text, self.parts) == (other.text, other.parts)

    def __hash__(self):
        return hash(self.text)

    def __repr__(self) -> str:
        return f"FString({self.text!r})"


def expand_fstrings(tokens, source: "SourceText"):
    """``tokens`` with each FSTRING token replaced by the tokens the grammar reads it as
    (FSTRING_PARTS, and each expression's own tokens), all positioned where they stand."""
    for tok in tokens:
        if tok.type != "FSTRING":
            yield tok
            continue
        value = tok.value
        yield _part_token("FSTART", value.text, tok.lexpos, tok.lexpos + 2, source)
        for part in value.parts:
            if type(part) is str:
                yield _part_token("FTEXT", part, tok.lexpos, tok.lexpos, source)
                continue
            yield _part_token("FOPEN", "{", part.start, part.start + 1, source)
            yield from expand_fstrings(part.tokens, source)
            yield _part_token("FCLOSE", "}", part.end - 1, part.end, source)
        yield _part_token("FEND", "", tok.end - 1, tok.end, source)


def _part_token(type_, value, lexpos: int, end: int, source: "SourceText") -> "Token":
    tok = Token()
    tok.type, tok.value, tok.lexpos, tok.end = type_, value, lexpos, end
    at = source.pos(lexpos)
    tok.lineno, tok.col = at.line, at.col
    return tok


class Lexer:
    """PLY lexer for Sense, in class style (one ``ply.lex`` build per instance).

    ``error_func`` decides what happens to a lexical error: by default it is raised as a
    :class:`SenseSyntaxError`; a callable receives the error instead and lexing recovers
    (skips the character, ends the string at EOF, ...) so that ``sensec check`` can report
    several problems in one run.
    """

    keyword_map = {word: word.upper() for word in KEYWORDS}

    tokens = (
        "IDENT", "INT", "FLOAT", "STRING", "FSTRING",
        "PLUS", "MINUS", "STAR", "SLASH", "PERCENT",
        "PLUSEQ", "MINUSEQ", "STAREQ", "SLASHEQ", "PERCENTEQ",
        "EQ", "NE", "LT", "LE", "GT", "GE", "ASSIGN", "ARROW",
        "LPAREN", "RPAREN", "LBRACKET", "RBRACKET", "LBRACE", "RBRACE", "COMMA", "COLON", "DOT",
        "COLONCOLON",
        "NEWLINE", "INDENT", "DEDENT", "ROLLBACK", "COMPENSATE",
        "TRY", "EXCEPT", "FINALLY", "RAISE",
    ) + tuple(keyword_map.values()) + FSTRING_PARTS

    def __init__(self, path: str = "<input>", error_func=None):
        self.path = path
        self.error_func = error_func
        self.source = SourceText("", path)
        self.saw_fstring = False
        self._stream = iter(())
        # Built once per instance; optimize off, so PLY writes no lextab module.
        self.lexer = lex.lex(module=self, optimize=False, errorlog=lex.NullLogger())
        self._prepare_scan()

    # ------------------------------------------------------------------ public interface

    def input(self, text: str) -> None:
        """Start lexing ``text`` (line endings are normalised first)."""
        self.source = SourceText(normalize_newlines(text), self.path)
        self.saw_fstring = False        # (set by _fstring_at: the parser then expands them)
        self.lexer.input(self.source.text)        # for ply.lex's own token(), which tests use
        self.lexer.lineno = 1
        self._stream = self._scan(layout=True)

    def token(self):
        """The next token, or None at the end (the interface ``ply.yacc`` expects)."""
        return next(self._stream, None)

    def __iter__(self):
        return self._stream

    def tokenize(self, text: str) -> list:
        """Every token of ``text``; raises the first lexical error (unless recovering)."""
        self.input(text)
        return list(self._stream)

    def raw_tokens(self, text: str) -> list:
        """The tokens without layout: one NEWLINE per physical line break, no INDENT/DEDENT, no
        soft keywords, no tab check (what ``ply.lex``'s token() returns, with positions)."""
        self.input(text)
        return list(self._scan(layout=False))

    # ------------------------------------------------------------------ errors

    def _error(self, message: str, pos: Pos, original: tuple | None = None) -> None:
        err = SenseSyntaxError(message, pos, path=self.path)
        if original is not None or message.startswith("unexpected character ") \
                and " -- " in message:
            # A message reworded to name the cause keeps the plain one the reference gives
            # (``original``), which tests compare with the reference's wording.
            text, at = original or (message.split(" -- ")[0], pos)
            err.original = SenseSyntaxError(text, at, path=self.path)
        if self.error_func is None:
            raise err
        self.error_func(err)

    # ------------------------------------------------------------------ the scan

    # What the scan does with each group of PLY's master regex, by frequency.
    _PLAIN, _IDENT, _NEWLINE, _INT, _OPEN, _CLOSE, _STRING, _FLOAT, _SKIP, _FSTRING = range(10)
    _RULE_KIND = {"t_NEWLINE": _NEWLINE, "t_STRING": _STRING, "t_FLOAT": _FLOAT, "t_INT": _INT,
                  "t_IDENT": _IDENT, "t_FSTRING": _FSTRING}

    def _prepare_scan(self) -> None:
        """The scanner regex (PLY's master regex after a possessive run of blanks, so one match
        is one token) and, per group of it, the token type and what the scan does with it."""
        masters = self.lexer.lexre
        if len(masters) != 1:       # PLY splits a master regex past 100 groups
            raise AssertionError("the Sense lexer's rules no longer fit one master regex")
        master, index = masters[0]
        self._scanner = re.compile(r"[ \t]*+(?:" + master.pattern + ")", master.flags)
        self._types = [None] * len(index)
        self._kinds = [None] * len(index)
        for group, entry in enumerate(index):
            if entry is None:
                continue
            func, type_ = entry
            self._types[group] = type_
            if func is not None:
                self._kinds[group] = self._RULE_KIND[func.__name__]
            elif type_ is None:
                self._kinds[group] = self._SKIP                     # comments
            elif type_ in ("LPAREN", "LBRACKET", "LBRACE"):
                self._kinds[group] = self._OPEN
            elif type_ in ("RPAREN", "RBRACKET", "RBRACE"):
                self._kinds[group] = self._CLOSE
            else:
                self._kinds[group] = self._PLAIN

    def _scan(self, layout: bool):
        """Yield the tokens of ``self.source``: with ``layout``, logical lines (module doc);
        without, the raw tokens."""
        source = self.source
        data = source.text
        length = len(data)
        error = self._error
        keywords = self.keyword_map
        types, kinds = self._types, self._kinds
        pattern = self._scanner
        PLAIN, IDENT, NEWLINE, INT, OPEN, CLOSE, STRING = (
            self._PLAIN, self._IDENT, self._NEWLINE, self._INT, self._OPEN, self._CLOSE,
            self._STRING)
        check_tabs = layout and "\t" in data
        line, line_start = 1, 0
        stack = [0]                 # indentation widths
        depth = 0                   # open brackets on the current logical line
        line_open = not layout      # has the current logical line produced a token yet?
        held = None                 # a line's first token while it may be a soft keyword,
        held_types = None           # ... the tokens after it that decide, and their types
        if check_tabs:
            self._check_leading_whitespace(0)
        pos = 0                     # where the last match ended
        match = pattern.scanner(data).match
        while True:
            m = match()
            if m is None:
                pos = _LEADING_WS.match(data, pos).end()
                if pos >= length:
                    break
                after = data[pos + 1:pos + 2]
                error(_bad_char_message(data[pos], after), source.pos(pos))
                pos += _bad_char_length(data[pos], after)
                match = pattern.scanner(data, pos).match
                continue
            group = m.lastindex
            start, pos = m.span(group)
            kind = kinds[group]
            tok = Token()
            tok.lexpos = start
            tok.lineno = line
            tok.col = start - line_start + 1
            if kind == PLAIN:
                tok.type = types[group]
                tok.value = data[start:pos]
            elif kind == IDENT:
                value = tok.value = data[start:pos]
                first = value[0]
                if not (first.isalpha() or first == "_"):
                    # \w after the first character is what the reference accepts; the first
                    # must be a letter or '_' (so not '²' or 'Ⅷ'), and the rest is lexed again.
                    error(f"unexpected character {first!r}", source.pos(start))
                    pos = start + 1
                    match = pattern.scanner(data, pos).match
                    continue
                tok.type = keywords.get(value, "IDENT")
            elif kind == NEWLINE:
                tok.type = "NEWLINE"
                tok.value = ""
                tok.end = pos
                line += 1
                line_start = pos
                if held is not None:
                    held_types.append(None)
                    held[0].type = soft_keyword_type(held[0].value, held_types)
                    yield from held
                    held = None
                if layout:
                    if depth:
                        continue
                    if check_tabs:
                        self._check_leading_whitespace(pos)
                    if not line_open:
                        continue
                    line_open = False
                yield tok
                continue
            elif kind == INT:
                tok.type = "INT"
                if pos - start > MAX_INT_DIGITS:
                    error(_int_too_long(pos - start), source.pos(start))
                    tok.value = 0       # recovering: lexing goes on after the literal
                else:
                    tok.value = _decimal_int(data[start:pos])
            elif kind == OPEN:
                tok.type = types[group]
                tok.value = data[start:pos]
                depth += 1
            elif kind == CLOSE:
                tok.type = types[group]
                tok.value = data[start:pos]
                if depth:
                    depth -= 1
            elif kind == STRING:
                tok.type = "STRING"
                tok.value, pos = self._string_at(start)
                newlines = data.count("\n", start, pos)
                if newlines:
                    line += newlines
                    line_start = data.rindex("\n", start, pos) + 1
                match = pattern.scanner(data, pos).match
            elif kind == self._FLOAT:
                tok.type = "FLOAT"
                tok.value = float(data[start:pos])
            elif kind == self._FSTRING:
                tok.type = "FSTRING"
                tok.value, pos = self._fstring_at(start)
                newlines = data.count("\n", start, pos)
                if newlines:
                    line += newlines
                    line_start = data.rindex("\n", start, pos) + 1
                match = pattern.scanner(data, pos).match
            else:                   # a comment
                continue
            tok.end = pos
            if held is not None:
                held_types.append(tok.type)
                decided = soft_keyword_type(held[0].value, held_types)
                if decided is None:
                    held.append(tok)
                    continue
                held[0].type = decided
                yield from held
                held = None
            if not line_open:
                line_open = True
                width = tok.col - 1         # (a string may have moved line_start on)
                if width > stack[-1]:
                    stack.append(width)
                    yield _layout_token("INDENT", start, tok.lineno, tok.col)
                elif width < stack[-1]:
                    while width < stack[-1]:
                        stack.pop()
                        yield _layout_token("DEDENT", start, tok.lineno, tok.col)
                    if width != stack[-1]:
                        # Recovering: the line belongs to the enclosing block it fell inside.
                        error("inconsistent indentation", source.pos(start))
                if tok.type == "IDENT" and tok.value in SOFT_KEYWORDS:
                    # Yielded once the tokens after it show what it is.
                    held, held_types = [tok], []
                    continue
            yield tok
        if held is not None:
            held_types.append(None)
            held[0].type = soft_keyword_type(held[0].value, held_types)
            yield from held
        if layout:
            eof = source.pos(length)
            if line_open:
                yield _layout_token("NEWLINE", length, eof.line, eof.col)
            for _ in stack[1:]:
                yield _layout_token("DEDENT", length, eof.line, eof.col)

    def _check_leading_whitespace(self, offset: int) -> None:
        """A tab in the blanks that start the line at ``offset`` is an error."""
        tab = self.source.text.find("\t", offset, _LEADING_WS.match(self.source.text, offset).end())
        if tab >= 0:
            self._error(TAB_MSG, self.source.pos(tab))

    def _string_at(self, start: int) -> tuple[str, int]:
        """The value of the string literal whose opening quote is at ``start``, and the offset
        just past it. The closing quote is looked for here, not in the rule's regex, so that a
        literal that never ends is told apart and reported where the file ends, as the
        reference does; recovering, it swallows the rest of the file."""
        text = self.source.text
        if text.startswith('"""', start):
            quotes, body, what = 3, _TRIPLE_END, "unterminated triple-quoted string literal"
        else:
            quotes, body, what = 1, _PLAIN_END, "unterminated string literal"
        begin = start + quotes
        m = body.match(text, begin)
        if m is None:
            self._error(_unterminated(what, "'" + text[start:begin] + "'", self.source),
                        self.source.pos(start), (what, self.source.eof_pos))
            return unescape(text, begin), len(text)
        return unescape(text, begin, m.end() - quotes), m.end()

    def _fstring_at(self, start: int) -> tuple["FString", int]:
        """The value of the f-string whose ``f`` is at ``start`` (its text, and the tokens of
        each expression in braces, positioned where they stand), and the offset just past it.
        Its end is found as a string literal's is: an expression holds no quote of its kind."""
        text = self.source.text
        self.saw_fstring = True
        quote = '"""' if text.startswith('"""', start + 1) else '"'
        begin = start + 1 + len(quote)
        m = (_TRIPLE_END if len(quote) == 3 else _PLAIN_END).match(text, begin)
        if m is None:
            what = ("unterminated triple-quoted string literal" if len(quote) == 3
                    else "unterminated string literal")
            self._error(_unterminated(what, f"'f{quote}'", self.source),
                        self.source.pos(start), (what, self.source.eof_pos))
            body_end = end = len(text)
        else:
            end = m.end()
            body_end = end - len(quote)
        parts, literal = [], []
        i = begin
        while i < body_end:
            c = text[i]
            if c == "\\" and i + 1 < body_end:
                literal.append(_ESCAPES.get(text[i + 1], text[i + 1]))
                i += 2
            elif c in "{}" and text.startswith(c, i + 1) and i + 1 < body_end:
                literal.append(c)           # '{{' and '}}' are the braces themselves
                i += 2
            elif c == "{":
                if literal:
                    parts.append("".join(literal))
                    literal = []
                expr, i = self._fstring_expression(i, body_end, quote)
                if expr is not None:
                    parts.append(expr)
            elif c == "}":
                self._error("single '}' in an f-string -- write '}}' for a brace",
                            self.source.pos(i))
                literal.append(c)
                i += 1
            else:
                literal.append(c)
                i += 1
        if literal:
            parts.append("".join(literal))
        return FString(text[start:end], quote, tuple(parts)), end

    def _fstring_expression(self, brace: int, body_end: int, quote: str):
        """The expression of an f-string from its ``{`` at ``brace`` to the ``}`` closing it:
        (FExpr or None after an error, offset past the ``}``). Its tokens are lexed here, by
        the rules of the rest of the file, as inside brackets (line breaks are spaces)."""
        source, text = self.source, self.source.text
        kinds, types, keywords = self._kinds, self._types, self.keyword_map
        pattern = self._scanner
        tokens = []
        pos = brace + 1
        depth = 0           # map literals' braces open inside the expression
        while True:
            m = pattern.match(text, pos, body_end)
            if m is None:
                pos = _LEADING_WS.match(text, pos, body_end).end()
                if pos >= body_end:
                    self._error(_unclosed_brace(quote, text, body_end), source.pos(brace))
                    return None, body_end
                if text[pos] == "}":
                    break
                after = text[pos + 1:min(pos + 2, body_end)]
                self._error(_bad_char_message(text[pos], after), source.pos(pos))
                pos += _bad_char_length(text[pos], after)
                continue
            group = m.lastindex
            start, pos = m.span(group)
            kind = kinds[group]
            if kind == self._NEWLINE:
                continue
            if kind == self._SKIP:
                self._error("a comment cannot stand inside an f-string's braces",
                            source.pos(start))
                continue
            if (kind == self._STRING or kind == self._FSTRING) and (
                    len(quote) == 1 or text.startswith('"""', pos - 1)):
                self._error(f"an f-string's expression cannot hold a string in its own "
                            f"quotes ({quote})", source.pos(start))
                return None, body_end
            tok = Token()
            tok.lexpos = start
            at = source.pos(start)
            tok.lineno, tok.col = at.line, at.col
            tok.type = types[group]
            if tok.type == "RBRACE":
                if not depth:           # the '}' that closes the expression
                    pos = start
                    break
                depth -= 1
            elif tok.type == "LBRACE":
                depth += 1
            if kind == self._IDENT:
                value = text[start:pos]
                if not (value[0].isalpha() or value[0] == "_"):
                    self._error(f"unexpected character {value[0]!r}", at)
                    pos = start + 1
                    continue
                tok.value = value
                tok.type = keywords.get(value, "IDENT")
            elif kind == self._INT:
                if pos - start > MAX_INT_DIGITS:
                    self._error(_int_too_long(pos - start), at)
                    tok.value = 0
                else:
                    tok.value = _decimal_int(text[start:pos])
            elif kind == self._FLOAT:
                tok.value = float(text[start:pos])
            elif kind == self._STRING or kind == self._FSTRING:
                tok.value, pos = (self._string_at(start) if kind == self._STRING
                                  else self._fstring_at(start))
                if pos > body_end:
                    self._error("unclosed '{' in an f-string -- write '{{' for a brace",
                                source.pos(brace))
                    return None, body_end
            else:
                tok.value = text[start:pos]
            tok.end = pos
            tokens.append(tok)
        if not tokens:
            self._error("empty expression in an f-string's braces -- write '{{}}' for braces",
                        source.pos(brace))
            return None, pos + 1
        return FExpr(tuple(tokens), brace, pos + 1), pos + 1

    # ------------------------------------------------------------------ token rules

    # Tabs are ordinary whitespace between tokens; in leading whitespace the scan's layout
    # rejects them (it alone knows whether a line starts inside brackets).
    t_ignore = " \t"
    t_ignore_COMMENT = r"\#[^\n]*"

    t_ARROW = r"->"
    t_PLUSEQ = r"\+="
    t_MINUSEQ = r"-="
    t_STAREQ = r"\*="
    t_SLASHEQ = r"/="
    t_PERCENTEQ = r"%="
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
    t_LBRACE = r"\{"
    t_RBRACE = r"\}"
    t_COMMA = r","
    t_COLON = r":"
    # native::name(args), the standard library's alone (docs/stdlib.md): only right after the
    # word `native`, so that `a[1::2]` and `f(a:: 1)` stay the reference's two COLONs.
    t_COLONCOLON = r"(?<=\bnative)::"
    t_DOT = r"\."

    # Function rules match in definition order: strings before anything, floats before ints.

    def t_NEWLINE(self, t):
        r"\n"
        t.value = ""
        return t

    def t_FSTRING(self, t):
        r'f"'
        t.value, t.lexer.lexpos = self._fstring_at(t.lexpos)
        return t

    def t_STRING(self, t):
        r'"'
        t.value, t.lexer.lexpos = self._string_at(t.lexpos)
        return t

    def t_FLOAT(self, t):
        r"\d+\.\d+"
        t.value = float(t.value)
        return t

    def t_INT(self, t):
        r"\d+"
        if len(t.value) > MAX_INT_DIGITS:
            self._error(_int_too_long(len(t.value)), self.source.pos(t.lexpos))
            t.value = 0
        else:
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
        self._error(_bad_char_message(t.value[0], t.value[1:2]), self.source.pos(t.lexpos))
        t.lexer.skip(_bad_char_length(t.value[0], t.value[1:2]))
