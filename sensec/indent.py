"""The indentation filter: raw physical-line tokens in, logical lines with INDENT/DEDENT out (spec 2.3).

The raw lexer emits one ``NEWLINE`` per line break outside strings. This filter

* drops line breaks inside ``( )`` and ``[ ]`` and on blank or comment-only lines, and ends
  every other logical line with exactly one ``NEWLINE``;
* keeps a stack of indentation widths starting at ``[0]``: a deeper first token pushes and emits
  ``INDENT``, a shallower one pops, one ``DEDENT`` per level, down to a width on the stack, else
  ``inconsistent indentation``;
* rejects a tab in the leading whitespace of any line that does not start inside brackets,
  blank lines included, as the reference does;
* at the end of input ends the last line (even inside brackets, so an unclosed ``(`` is
  reported against that ``NEWLINE``, as the reference does) and closes every open block;
* turns the identifier ``rollback`` / ``compensate`` into a ``ROLLBACK`` / ``COMPENSATE`` token
  when it starts a logical line and the next token is ``:``: the only place the grammar can
  attach a rollback block to the action before it. Elsewhere they stay identifiers.

Synthetic tokens get real positions, never offset 0: ``INDENT`` and ``DEDENT`` stand at the first
token of the line that changes the indentation (or at the end of input), the ``NEWLINE`` that
ends a line at its line break (or at the end of input when there is none).
"""

from __future__ import annotations

from ply.lex import LexToken

OPENERS = frozenset({"LPAREN", "LBRACKET"})
CLOSERS = frozenset({"RPAREN", "RBRACKET"})
SOFT_KEYWORDS = {"rollback": "ROLLBACK", "compensate": "COMPENSATE"}

TAB_MSG = "tabs are not allowed for indentation \u2014 use spaces"


def make_token(type_: str, lexpos: int, source) -> LexToken:
    """A synthetic layout token at ``lexpos`` (its text is empty)."""
    tok = LexToken()
    tok.type = type_
    tok.value = ""
    tok.lexpos = lexpos
    pos = source.pos(lexpos)
    tok.lineno = pos.line
    tok.col = pos.col
    tok.end = lexpos
    return tok


class IndentFilter:
    """Iterate over the filtered token stream.

    ``raw`` yields positioned PLY tokens, ``source`` is the :class:`sensec.lexer.SourceText`
    and ``error(message, pos)`` reports a problem: it raises, or records and returns, in which
    case the filter recovers as sensibly as it can and carries on.
    """

    def __init__(self, raw, source, error):
        self._raw = iter(raw)
        self._peeked = None
        self._source = source
        self._error = error

    def _next_raw(self):
        if self._peeked is not None:
            tok, self._peeked = self._peeked, None
            return tok
        return next(self._raw, None)

    def _peek_raw(self):
        if self._peeked is None:
            self._peeked = next(self._raw, None)
        return self._peeked

    def _check_leading_whitespace(self, offset: int) -> None:
        text = self._source.text
        i = offset
        while i < len(text) and text[i] in " \t":
            if text[i] == "\t":
                self._error(TAB_MSG, self._source.pos(i))
                return
            i += 1

    def __iter__(self):
        source = self._source
        stack = [0]
        depth = 0              # open brackets on the current logical line
        line_open = False      # has the current logical line produced a token yet?
        self._check_leading_whitespace(0)
        raw = self._raw
        while True:
            # _next_raw(), inlined: this loop runs once per token of every file compiled.
            tok = self._peeked
            if tok is None:
                tok = next(raw, None)
                if tok is None:
                    break
            else:
                self._peeked = None
            if tok.type == "NEWLINE":
                if depth:
                    continue
                self._check_leading_whitespace(tok.lexpos + 1)
                if line_open:
                    line_open = False
                    yield tok
                continue

            if not line_open:
                line_open = True
                width = tok.col - 1
                if width > stack[-1]:
                    stack.append(width)
                    yield make_token("INDENT", tok.lexpos, source)
                elif width < stack[-1]:
                    while width < stack[-1]:
                        stack.pop()
                        yield make_token("DEDENT", tok.lexpos, source)
                    if width != stack[-1]:
                        # Recovering: the line belongs to the enclosing block it fell inside.
                        self._error("inconsistent indentation", source.pos(tok.lexpos))
                if tok.type == "IDENT" and tok.value in SOFT_KEYWORDS:
                    after = self._peek_raw()
                    if after is not None and after.type == "COLON":
                        tok.type = SOFT_KEYWORDS[tok.value]

            if tok.type in OPENERS:
                depth += 1
            elif tok.type in CLOSERS and depth:
                depth -= 1
            yield tok

        eof = len(source.text)
        if line_open:
            yield make_token("NEWLINE", eof, source)
        for _ in stack[1:]:
            yield make_token("DEDENT", eof, source)
