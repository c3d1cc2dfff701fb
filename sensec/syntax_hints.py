"""Syntax errors at their cause: unclosed brackets at the bracket, habits of other languages named.

The parser reports a syntax error where it noticed it: at the token it could not take. That is
the right place for most mistakes, and the wrong one for two kinds:

* a bracket that is never closed swallows the rest of the file (newlines inside brackets are
  joined), so the parser gives up far below it, or at the end of input. ``refine`` reports it
  at the bracket, ``'(' opened here is never closed``, and says where the parser gave up;
  a closer of the wrong kind (``(]``) names both brackets;
* a habit from another language (``elif``, ``**``, ``let x = 1``, ``x++``, ``===`` ...) makes
  the parser say what it expected, which does not tell a person what Sense writes instead.
  ``refine`` names the Sense spelling.

Only errors that are already syntax errors are reworded, so no program that compiles changes.
Names that are legal in Sense (``None``, ``True``, ``pass``, ``null`` ...) are hinted at when a
program uses them undefined, at run time (``sensevm.base.name_hints``).

The messages and the mistakes they are for are listed in docs/language.md ("Syntax errors");
tests/test_syntax_mistakes.py pins each one.
"""

from __future__ import annotations

from sensevm.base.errors import Pos, SenseSyntaxError
from sensevm.base.keywords import KEYWORDS

_OPENERS = {"LPAREN": "(", "LBRACKET": "[", "LBRACE": "{"}
_CLOSERS = {"RPAREN": "(", "RBRACKET": "[", "RBRACE": "{"}
_CLOSER_TEXT = {"RPAREN": ")", "RBRACKET": "]", "RBRACE": "}"}
_MATCHING = {"(": ")", "[": "]", "{": "}"}
_KEYWORD_TYPES = frozenset(word.upper() for word in KEYWORDS)
_LAYOUT = frozenset({"NEWLINE", "INDENT", "DEDENT"})

# Words other languages start a statement with, and what Sense writes instead.
_DECLARE_WORDS = frozenset({"let", "var", "const", "val", "mut", "auto", "dim", "my"})
_FUNCTION_WORDS = frozenset({"fn", "func", "function", "fun", "sub", "proc", "defn"})
_ELIF_WORDS = frozenset({"elif", "elsif", "elseif"})
_SWITCH_WORDS = frozenset({"switch", "match", "case", "select"})
_PRINT_WORDS = frozenset({"print", "println", "puts", "echo"})
_THEN_WORDS = frozenset({"then", "do", "begin"})


def _is_parser_message(message: str) -> bool:
    """Whether ``message`` is the parser's "what I expected" (the ones reworded here), not a
    statement check (assignment targets, ``requires``, ...) or a lexical error."""
    return message.startswith(("expected ", "unexpected token ", "Sense uses indentation"))


def _offset(src, pos: Pos) -> int:
    if pos.line < 1 or pos.line > len(src.line_starts):
        return len(src.text)
    return src.line_starts[pos.line - 1] + pos.col - 1


def _where(src, offset: int) -> str:
    at = src.pos(offset)
    return f"line {at.line}, column {at.col}"


def _adjacent(a, b) -> bool:
    return a is not None and b is not None and getattr(a, "end", None) == b.lexpos


class _Tokens:
    """The parser's token list, with the helpers the rules below use."""

    def __init__(self, tokens, src, since_line: int = 1):
        self.tokens = [t for t in tokens
                       if t.type not in ("FSTART", "FTEXT", "FOPEN", "FCLOSE", "FEND")
                       and t.lineno >= since_line]
        self.src = src

    def at(self, i):
        return self.tokens[i] if 0 <= i < len(self.tokens) else None

    def index_at(self, offset: int) -> int:
        """The token the parser refused at ``offset``: a real token starting there, else the
        first token at or after it (a NEWLINE, a DEDENT), else len (the end of input)."""
        fallback = None
        for i, tok in enumerate(self.tokens):
            if tok.lexpos == offset and tok.type not in _LAYOUT:
                return i
            if tok.lexpos > offset:
                break
            if tok.lexpos == offset and fallback is None:
                fallback = i
        if fallback is not None:
            return fallback
        for i, tok in enumerate(self.tokens):
            if tok.lexpos >= offset:
                return i
        return len(self.tokens)

    def line_start(self, i: int) -> int:
        """The index of the first token of the logical line holding token ``i``."""
        j = min(i, len(self.tokens))
        while j > 0 and self.tokens[j - 1].type not in _LAYOUT:
            j -= 1
        while j < len(self.tokens) and self.tokens[j].type in _LAYOUT:
            j += 1
        return j


def _brackets(toks: _Tokens):
    """The first wrong closer (as (opener, closer) or (None, closer)), and the openers left
    open at the end of input, in order."""
    stack = []
    wrong = None
    for tok in toks.tokens:
        if tok.type in _OPENERS:
            stack.append(tok)
        elif tok.type in _CLOSERS:
            if not stack:
                if wrong is None:
                    wrong = (None, tok)
                continue
            opener = stack.pop()
            if _OPENERS[opener.type] != _CLOSERS[tok.type] and wrong is None:
                wrong = (opener, tok)
    return wrong, stack


def _bracket_error(err, toks: _Tokens, k: int, offset: int):
    src = toks.src
    wrong, unclosed = _brackets(toks)
    if wrong is not None and wrong[0] is not None and wrong[1].lexpos <= offset:
        opener, closer = wrong
        text = _CLOSER_TEXT[closer.type]
        want = _MATCHING[_OPENERS[opener.type]]
        return (f"'{text}' does not match '{_OPENERS[opener.type]}' opened at "
                f"{_where(src, opener.lexpos)} -- close that one with '{want}' first",
                src.pos(closer.lexpos))
    if wrong is not None and wrong[0] is None and wrong[1].lexpos == offset \
            and wrong[1].type != "RBRACE":
        text = _CLOSER_TEXT[wrong[1].type]
        return (f"'{text}' closes nothing -- no '{_CLOSERS[wrong[1].type]}' is open here",
                None)
    before = [o for o in unclosed if o.lexpos < offset]
    if not before:
        return None
    opener = before[-1]
    if offset >= len(src.text.rstrip()):
        note = f"the file ends at {_where(src, len(src.text))}, still inside it"
    else:
        note = f"the parser gave up at {_where(src, offset)}: {err.message}"
    return (f"'{_OPENERS[opener.type]}' opened here is never closed ({note})",
            src.pos(opener.lexpos))


def _habit(err, toks: _Tokens, k: int):
    """A hint for a habit from another language at token ``k`` (the one the parser refused)."""
    src = toks.src
    tok = toks.at(k)
    prev, prev2, nxt = toks.at(k - 1), toks.at(k - 2), toks.at(k + 1)
    s = toks.line_start(k)
    first, second = toks.at(s), toks.at(s + 1)
    ttype = tok.type if tok is not None else "$end"

    def here(t):
        return src.pos(t.lexpos)

    # Operators: two tokens with nothing between them.
    if ttype == "STAR" and prev is not None and prev.type == "STAR" and _adjacent(prev, tok):
        return ("Sense has no '**' (power) operator -- multiply (x * x), or multiply in a "
                "loop for a larger power", here(prev))
    if ttype == "SLASH" and nxt is not None and nxt.type in ("SLASH", "STAR") \
            and _adjacent(tok, nxt) and s == k:
        return "Sense comments start with '#', not '//' or '/*'", here(tok)
    if ttype in ("SLASH", "STAR") and prev is not None and prev.type == "SLASH" \
            and _adjacent(prev, tok):
        if toks.line_start(k - 1) == k - 1:
            return "Sense comments start with '#', not '//' or '/*'", here(prev)
        if ttype == "SLASH":
            return ("Sense has no '//' (integer division) operator -- '/' divides (7 / 2 is "
                    "3.5), and int(a / b) drops the fraction (rounding toward zero)",
                    here(prev))
    if ttype == "ASSIGN" and prev is not None and _adjacent(prev, tok):
        if prev.type == "EQ":
            return "Sense has no '===' -- '==' compares (it never converts types)", here(prev)
        if prev.type == "NE":
            return "Sense has no '!==' -- '!=' compares (it never converts types)", here(prev)
        if prev.type == "COLON":
            return ("Sense has no ':=' -- assignment is already an expression: write '='",
                    here(prev))
    if ttype == "GT" and prev is not None and prev.type == "ASSIGN" and _adjacent(prev, tok):
        return ("Sense has no '=>' -- declare a function with 'def NAME(params):' (a return "
                "type is written '-> Type')", here(prev))
    for op, sign in (("PLUS", "+"), ("MINUS", "-")):
        pair = None
        if prev is not None and prev2 is not None and prev.type == prev2.type == op \
                and _adjacent(prev2, prev):
            pair = prev2
        elif ttype == op and prev is not None and prev.type == op and _adjacent(prev, tok):
            pair = prev
        elif ttype == op and nxt is not None and nxt.type == op and _adjacent(tok, nxt) \
                and op == "PLUS":
            pair = tok
        if pair is not None:
            return (f"Sense has no '{sign}{sign}' -- write 'x {sign}= 1'", here(pair))
    if ttype == "DOT" and prev is not None and prev.type == "DOT" and _adjacent(prev, tok):
        return ("Sense has no '..' range -- write range(a, b) (from a up to, not including, "
                "b)", here(prev))
    if ttype == "RBRACKET" and prev is not None and prev.type == "COMMA":
        return ("an array literal cannot end with a comma -- remove the ',' before ']'",
                here(prev))
    if ttype == "RPAREN" and prev is not None and prev.type == "COMMA":
        return ("a call's arguments cannot end with a comma -- remove the ',' before ')'",
                here(prev))

    # Words at the start of a statement.
    if first is not None and first.type == "IDENT" and s < k:
        word = first.value
        if word in _ELIF_WORDS:
            return f"Sense has no '{word}' -- write 'else if CONDITION:'", here(first)
        if word in _DECLARE_WORDS and second is not None and second.type == "IDENT" \
                and k == s + 1:
            return (f"Sense declares no variables with '{word}' -- write '{second.value} = "
                    f"...' (or 'local {second.value} = ...' for a new local)", here(first))
        if word in _FUNCTION_WORDS and second is not None and second.type in ("IDENT", "LPAREN"):
            name = second.value if second.type == "IDENT" else "NAME"
            return (f"Sense declares functions with 'def' -- write 'def {name}(...):'",
                    here(first))
        if word in _SWITCH_WORDS and k == s + 1:
            return (f"Sense has no '{word}' statement -- write 'if ... else if ...'",
                    here(first))
        if word == "class" and k == s + 1:
            return ("Sense has no classes -- use maps ({\"key\": value}) and functions",
                    here(first))
        if word in ("catch", "rescue") and k == s + 1:
            return (f"Sense spells '{word}' as 'except' -- 'try:' ... 'except SenseError as "
                    f"e:'", here(first))
        if word in ("throw", "raise") and k == s + 1:
            return "Sense spells 'throw' as 'raise' -- 'raise \"message\"'", here(first)
        if word in _PRINT_WORDS and k == s + 1 and ttype in ("STRING", "INT", "FLOAT", "IDENT"):
            return (f"'{word}' is a function in Sense -- call it with parentheses: "
                    f"{word}(...)", here(tok))
    if tok is not None and tok.type == "IDENT":
        if tok.value in ("catch", "rescue") and k == s:
            return (f"Sense spells '{tok.value}' as 'except' -- 'try:' ... 'except SenseError "
                    f"as e:'", here(tok))
        if tok.value == "lambda":
            return ("Sense has no 'lambda' -- define a function with 'def' and pass its name",
                    here(tok))
        if nxt is not None and nxt.type == "IDENT" and prev is not None \
                and prev.type == "IDENT" and prev.value == "lambda":
            return ("Sense has no 'lambda' -- define a function with 'def' and pass its name",
                    here(prev))
        if tok.value == "is":
            return ("Sense has no 'is' -- compare with '==' (and 'is not' with '!=')",
                    here(tok))
        if tok.value in _THEN_WORDS and first is not None \
                and first.type in ("IF", "WHILE", "FOR", "ELSE"):
            return (f"Sense needs no '{tok.value}' -- end the line with ':' and indent the "
                    f"block", here(tok))
        if prev is not None and prev.type == "IDENT" and prev.value == "lambda":
            return ("Sense has no 'lambda' -- define a function with 'def' and pass its name",
                    here(prev))
    if tok is not None and tok.type == "IF" and k > s:
        return ("Sense has no conditional expression ('a if c else b') -- use an 'if' "
                "statement that assigns in both branches", here(tok))
    if tok is not None and tok.type == "ASSIGN" and first is not None and first.type == "DEF":
        return "Sense has no default parameter values -- every parameter is passed", here(tok)
    if first is not None and first.type in _KEYWORD_TYPES and ttype == "ASSIGN" \
            and k == s + 1:
        return (f"'{first.value}' is a reserved word in Sense and cannot be a name -- choose "
                f"another name", here(first))

    # Blocks.
    if err.message.startswith("expected an indented block"):
        return (f"{err.message} -- a block needs at least one statement (write 'nil' for a "
                f"block that does nothing)", None)
    if err.message.startswith("expected ':' to start a block") and first is not None \
            and first.type in ("IF", "WHILE", "FOR", "DEF", "ELSE"):
        word = src.text[first.lexpos:first.end]
        return (f"expected ':' at the end of the '{word}' line{err.message[29:]}", None)
    return None


def refine(err: SenseSyntaxError, tokens, src, since_line: int = 1) -> SenseSyntaxError:
    """``err`` (raised by the parser over ``tokens`` of ``src``) reported at its cause.

    ``since_line``: where the parse that found it began (``parse_all_errors`` starts again
    after an error); nothing before that line is its cause."""
    if err.pos is None or not _is_parser_message(err.message):
        return err
    try:
        toks = _Tokens(tokens, src, since_line)
        offset = _offset(src, err.pos)
        k = toks.index_at(offset)
        found = _bracket_error(err, toks, k, offset) or _habit(err, toks, k)
    except (IndexError, AttributeError, TypeError):       # never worse than no hint
        return err
    if found is None:
        return err
    message, pos = found
    better = SenseSyntaxError(message, pos or err.pos, path=err.path)
    better.original = err
    return better
