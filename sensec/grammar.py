"""The Sense parser: a PLY LALR grammar (class style) from filtered tokens to the sensec.nodes AST.

Grammar rules live in ``p_`` docstrings, as PLY wants; binary operators take their precedence
from the ``precedence`` table (spec 3.2), everything else is layered by nonterminals.

Tables are built once per process, in memory: ``yacc.yacc(..., write_tables=False)`` and an
in-memory ``debuglog``, so neither ``parsetab.py`` nor ``parser.out`` is ever written. That same
``debuglog`` receives PLY's description of every LR state (its items) and of every conflict,
which is how :meth:`Parser.conflicts` counts them and how ``p_error`` words its messages.

Error messages. The reference is a recursive-descent parser whose messages say what the
innermost unfinished construct expected: ``expected ')' after the arguments (got INT '2')``.
An LR parser knows the same thing, spread over its stack: on an error, ``p_error`` asks, for every
terminal, whether the automaton could accept it here (after how many reductions, and which LR
item would shift it), then picks the message attached to that item in ``_EXPECTED`` — the one
needing the fewest reductions, i.e. the innermost construct, exactly as recursive descent would.
Where an expression could start, the reference says ``unexpected token KIND 'x'``, and so do we.
Before raising, the reductions leading to that item are run for real (on a copy of the stack):
they are the constructs the reference would have completed before noticing the bad token, and
their checks (``invalid assignment target``, the ``inference`` rule, argument order, ``requires``)
must win, as they do in the reference.

Known conflicts (all shift/reduce, all resolved as shift, which is what the reference does):

* ``ELSE`` after an ``if`` whose block is an inline ``if``: ``if a: if b: x`` then ``else:`` on
  the next line belongs to the inner ``if`` (the dangling else).
* ``ROLLBACK`` / ``COMPENSATE`` right after an action body: the line ``rollback: ...`` is that
  action's rollback block, not a typed declaration of a variable called ``rollback`` (which is
  what it is anywhere else).
"""

from __future__ import annotations

import bisect
import re
import threading
from collections import namedtuple

from ply import yacc

from sensec import nodes as N
from sensec.lexer import KEYWORDS, Lexer, display_kind
from sensevm.errors import Pos, SenseSyntaxError

# What Parser.conflicts() must report; a test pins it, so a grammar change that adds a
# conflict has to come here and explain itself: (token, resolution) for each one.
EXPECTED_CONFLICTS = (
    ("ELSE", "shift"),
    ("ROLLBACK", "shift"),
    ("COMPENSATE", "shift"),
)

_LAYOUT = frozenset({"NEWLINE", "INDENT", "DEDENT"})
_BLANK = re.compile(r"[^\n]")

MSG_NEEDS_DEF = "function declarations need 'def' -- e.g. 'def {name}(...) -> Type:'"
MSG_INVALID_TARGET = "invalid assignment target"
MSG_INFERENCE = ("'{name} = inference(...)' needs the 'model' keyword to name it -- use "
                 "'model {name} = inference(...)' instead")
MSG_ARG_ORDER = "positional arguments must come before labeled ('name: value') ones"
MSG_ONE_CAPABILITY = "an action can only 'require' one capability"
MSG_APPROVAL_TWICE = "'approval' listed twice in 'requires'"
MSG_NEEDS_ROLLBACK = ("reversible action '{name}' must declare a 'rollback' block -- use "
                      "'irreversible action' instead if this genuinely can't be undone")
# The reference's message for any other word (it has no immediate actions).
MSG_IMMEDIATE = "expected 'action' after 'irreversible' (got IDENT '{word}')"
MSG_NO_ROLLBACK = ("only a 'reversible action' may declare 'rollback' \u2014 an irreversible "
                   "action cannot be reliably undone")
MSG_COMPENSATE = ("'compensate' is now spelled 'rollback' -- rename this block's leading word "
                  "to 'rollback:'")


# ----------------------------------------------------------------------------- error wording

class _Expect(namedtuple("_Expect", "rank text got")):
    """A message for "the parser wanted X here"; ``got`` appends ``(got KIND 'x')``."""


UNEXPECTED = _Expect(-1, "unexpected token", False)

# LR item (``lhs -> seen . next``, or ``lhs -> seen .`` for any next symbol) -> what to say when
# the token that would be shifted through that item is missing. Earlier rows win ties.
_EXPECTED_ROWS = (
    ("primary -> .", UNEXPECTED),
    ("unary -> .", UNEXPECTED),
    # expressions
    ("postfix -> postfix LPAREN args . RPAREN", "expected ')' after the arguments"),
    ("args -> args . COMMA", "expected ')' after the arguments"),
    ("primary -> LPAREN expr . RPAREN", "expected ')' after the expression"),
    ("primary -> LBRACKET items . RBRACKET", "expected ']' after the array elements"),
    ("items -> items . COMMA", "expected ']' after the array elements"),
    ("postfix -> postfix LBRACKET expr . RBRACKET", "expected ']' after the index"),
    ("postfix -> postfix DOT . IDENT", "expected a property name after '.'"),
    # blocks and statement ends
    ("block -> . COLON", "expected ':' to start a block"),
    ("block -> COLON NEWLINE . INDENT", "expected an indented block"),
    ("stmt -> simple_stmt . NEWLINE", "expected a new line after this statement"),
    ("policy_rule -> effect cap . NEWLINE", "expected a new line after this statement"),
    # types and parameters
    ("type -> . IDENT", "expected a type name"),
    ("type -> IDENT LT type_list . GT", "expected '>' to close the generic type"),
    ("param -> . IDENT", "expected a parameter name"),
    ("param_list -> LPAREN params . RPAREN", "expected ')' after the parameters"),
    ("params -> params . COMMA", "expected ')' after the parameters"),
    # declarations
    ("func_def -> DEF . IDENT", "expected a function name after 'def'"),
    ("func_def -> DEF IDENT . param_list", "expected '(' after the function name"),
    ("action_head -> action_kind . ACTION", "expected 'action' after '{prev}'"),
    ("action_head -> action_kind ACTION . IDENT", "expected an action name"),
    ("action_head -> action_kind ACTION IDENT . param_list",
     "expected '(' after the action name"),
    ("action_head -> action_kind ACTION IDENT param_list REQUIRES . req_list",
     ("expected a capability name or 'approval' after 'requires'", False)),
    ("req_list -> req_list COMMA . req",
     ("expected a capability name or 'approval' after 'requires'", False)),
    ("action_cap -> action_cap DOT . capword", "expected a name after '.'"),
    ("cap -> cap DOT . capword", "expected a name after '.'"),
    ("tool_intro -> ASYNC . TOOL", ("expected 'agent' or 'tool' after 'async'", False)),
    ("agent_intro -> ASYNC . AGENT", ("expected 'agent' or 'tool' after 'async'", False)),
    ("tool_head -> tool_intro . IDENT", "expected a tool name"),
    ("tool_head -> tool_intro IDENT . param_list", "expected '(' after the tool name"),
    ("tool_requires -> REQUIRES . cap", "expected a capability name"),
    ("agent_def -> agent_intro . IDENT", "expected an agent name after 'agent'"),
    ("policy_stmt -> POLICY . COLON", "expected ':' after 'policy'"),
    ("policy_stmt -> POLICY COLON NEWLINE . INDENT",
     "expected an indented block of policy rules"),
    ("effect -> .", ("expected 'allow' or 'deny' in a policy rule", False)),
    ("policy_rule -> effect . cap", "expected a capability name"),
    ("session_stmt -> SESSION . IDENT", "expected a session name after 'session'"),
    ("test_stmt -> TEST . STRING", "expected a description string after 'test'"),
    ("memory_decl -> MEMORY . IDENT", "expected a memory name after 'memory'"),
    ("memory_decl -> PERSISTENT . MEMORY", "expected 'memory' after 'persistent'"),
    ("memory_decl -> PERSISTENT MEMORY . IDENT", "expected a memory name after 'memory'"),
    ("memory_decl -> MEMORY IDENT COLON . STRING",
     "expected a string after ':' in a memory declaration"),
    ("memory_decl -> PERSISTENT MEMORY IDENT COLON . STRING",
     "expected a string after ':' in a memory declaration"),
    ("model_decl -> MODEL . IDENT", "expected a name after 'model'"),
    ("model_decl -> MODEL IDENT . ASSIGN", "expected '=' in a model declaration"),
    ("set_stmt -> SET . IDENT", "expected a configuration name after 'set'"),
    ("set_stmt -> SET IDENT . ASSIGN", "expected '=' in a set statement"),
    ("import_stmt -> IMPORT . modref",
     "expected a module path (a string, or a bare dotted name like pkg.mod) after 'import'"),
    ("from_stmt -> FROM . modref",
     "expected a module path (a string, or a bare dotted name like pkg.mod) after 'import'"),
    ("import_stmt -> IMPORT PYTHON . modref",
     "expected a Python module name (a string, or a bare dotted name like os.path) after "
     "'import python'"),
    ("from_stmt -> FROM PYTHON . modref",
     "expected a Python module name (a string, or a bare dotted name like os.path) after "
     "'import python'"),
    ("alias -> AS . IDENT", "expected an alias name after 'as'"),
    ("from_stmt -> FROM modref . IMPORT",
     "expected 'import' after the module in a 'from' statement"),
    ("from_stmt -> FROM PYTHON modref . IMPORT",
     "expected 'import' after the module in a 'from' statement"),
    ("from_stmt -> FROM modref IMPORT . import_names", "expected a name to import"),
    ("from_stmt -> FROM PYTHON modref IMPORT . import_names", "expected a name to import"),
    ("import_names -> import_names COMMA . import_name", "expected a name to import"),
    ("local_decl -> LOCAL . IDENT", "expected a name after 'local'"),
    ("local_decl -> LOCAL IDENT . ASSIGN", "expected '=' in a local declaration"),
    ("local_decl -> LOCAL IDENT COLON type . ASSIGN", "expected '=' in a local declaration"),
    ("typed_decl -> IDENT COLON type . ASSIGN", "expected '=' after the type annotation"),
    ("typed_decl -> soft_keyword COLON type . ASSIGN",
     "expected '=' after the type annotation"),
    ("for_stmt -> FOR . IDENT", "expected a loop variable name after 'for'"),
    ("for_stmt -> FOR IDENT . IN", "expected 'in' after the loop variable"),
)


def _expected_table():
    table = {}
    for rank, (pattern, what) in enumerate(_EXPECTED_ROWS):
        if isinstance(what, _Expect):
            table[pattern] = what
        else:
            text, got = what if isinstance(what, tuple) else (what, True)
            table[pattern] = _Expect(rank, text, got)
    return table


_EXPECTED = _expected_table()

# In ``import a.`` the reference never takes the '.' into the module name, so it complains about
# the '.' itself: with the dot shifted, step back and report the dot as the unexpected token.
_RETREAT = frozenset({"dotted -> dotted DOT . IDENT"})


# ----------------------------------------------------------------------------- PLY plumbing

class _TableLog:
    """PLY's ``debuglog``, kept in memory: LR items per state and every conflict."""

    def __init__(self):
        self.items: dict[int, list] = {}
        self.sr_conflicts: list = []     # (state, token, "shift" | "reduce")
        self.rr_conflicts: list = []     # (state, token, chosen rule text)
        self._state = None

    def info(self, msg, *args, **kwargs):
        if msg == "state %d":
            self._state = args[0]
            self.items[self._state] = []
        elif msg == "    (%d) %s":
            self.items[self._state].append(args[1])
        elif msg.startswith("  ! shift/reduce conflict for %s resolved as "):
            self.sr_conflicts.append((self._state, args[0], msg.rsplit(" ", 1)[1]))
        elif msg.startswith("  ! reduce/reduce conflict for %s"):
            self.rr_conflicts.append((self._state, args[0], str(args[2])))

    debug = warning = error = critical = info


class _BuildLog:
    """PLY's ``errorlog``: grammar warnings and errors are collected, never printed."""

    def __init__(self):
        self.messages: list[str] = []

    def _record(self, msg, *args, **kwargs):
        self.messages.append(msg % args if args else msg)

    debug = info = warning = error = critical = _record


class _TokenFeed:
    """Filtered tokens served to ``ply.yacc`` through the lexer interface.

    ``tokens`` is a list, or an iterator that is drawn from only as far as the parse gets (when
    parse_all_errors re-lexes a file's tail, lexing stops where the next error is). The feed
    remembers the last token served, which is the parser's lookahead ("the first token after an
    action body" when that action is reduced), and which tokens start a statement.
    """

    def __init__(self, tokens, parser: "Parser", begin: int = 0):
        if isinstance(tokens, list):
            self.tokens, self._more = tokens, None
        else:
            self.tokens, self._more = [], iter(tokens)
        self.index = begin          # of the next token to serve
        self.current = begin        # of the lookahead; the index just past the end at EOF
        self.last = None
        self.lineno = 1
        self.lexpos = 0
        self.stmt_starts: list[int] = []
        self._parser = parser

    def at(self, i: int):
        """Token ``i``, or None past the end."""
        while i >= len(self.tokens) and self._more is not None:
            tok = next(self._more, None)
            if tok is None:
                self._more = None
            else:
                self.tokens.append(tok)
        return self.tokens[i] if i < len(self.tokens) else None

    def token(self):
        i = self.index
        tok = self.at(i)
        self.current = i
        self.last = tok
        if tok is None:
            return None
        self.index = i + 1
        self.lineno = tok.lineno
        self.lexpos = tok.lexpos
        before = self.tokens[i - 1].type if i else "NEWLINE"
        if before in _LAYOUT:
            self.stmt_starts.append(i)
        elif before == "COLON" and self._parser._at_statement_start():
            self.stmt_starts.append(i)
        elif before == "COMMA":
            self._parser._check_argument_start(i)
        return tok


_ActionHead = namedtuple("_ActionHead", "pos kind name params capability approval")
_ToolHead = namedtuple("_ToolHead", "pos is_async name params returns capability description")


# ----------------------------------------------------------------------------- the parser

class Parser:
    """LALR(1) parser for Sense; ``parse`` returns a :class:`sensec.nodes.Module`.

    Building the tables takes a noticeable fraction of a second, so the module-level functions
    use one shared instance (:meth:`shared`), built on first use. An instance is not reentrant;
    ``parse`` and ``parse_all_errors`` serialise on a lock.
    """

    tokens = Lexer.tokens
    start = "program"

    # Binary operators only, lowest first (spec 3.2 levels 2-7). Prefix operators and postfix
    # forms are separate nonterminals; assignment (level 1) is the ``expr`` rule itself. If a
    # level moves here, the spec's precedence section and the precedence tests move with it.
    precedence = (
        ("left", "OR"),
        ("left", "AND"),
        ("left", "EQ", "NE"),
        ("left", "LT", "LE", "GT", "GE"),
        ("left", "PLUS", "MINUS"),
        ("left", "STAR", "SLASH", "PERCENT"),
    )

    def __init__(self):
        self._lock = threading.RLock()
        self._lr = None
        self._tables: _TableLog | None = None
        self._build_log: _BuildLog | None = None
        self._lexer: Lexer | None = None
        self._src = None
        self._feed: _TokenFeed | None = None
        self._collect: list | None = None

    # ------------------------------------------------------------------ building

    def build(self) -> "Parser":
        """Build the LALR tables (once per instance), in memory only."""
        with self._lock:
            if self._lr is None:
                tables, build_log = _TableLog(), _BuildLog()
                # No table module is ever written, and the name given cannot exist, so PLY can
                # never pick up a stale one either.
                lr = yacc.yacc(module=self, start=self.start, debug=False, write_tables=False,
                               tabmodule="_sensec_tables_are_never_written",
                               debuglog=tables, errorlog=build_log)
                self._index_tables(lr, tables)
                self._tables, self._build_log = tables, build_log
                self._lexer = Lexer()
                self._lr = lr
        return self

    def _index_tables(self, lr, tables: _TableLog) -> None:
        """Pre-compute what p_error consults: items by state, FIRST sets, statement states."""
        terminals = set(self.tokens)
        prods = [p for p in lr.productions if p.name != "S'"]
        nullable: set[str] = set()
        first: dict[str, set] = {p.name: set() for p in prods}
        changed = True
        while changed:
            changed = False
            for p in prods:
                seq_first, seq_nullable = self._seq_first(p.prod, terminals, first, nullable)
                if not seq_first <= first[p.name]:
                    first[p.name] |= seq_first
                    changed = True
                if seq_nullable and p.name not in nullable:
                    nullable.add(p.name)
                    changed = True
        self._first, self._nullable, self._terminals_set = first, nullable, terminals

        self._items = {}
        for state, items in tables.items.items():
            rows = []
            for item in items:
                seen = item.prod[:item.lr_index]
                rest = item.prod[item.lr_index + 1:]
                head = " ".join((item.name, "->") + seen + (".",))
                rows.append((head, rest, item.lr_index > 0 or item.name == "S'"))
            self._items[state] = rows
        # States in which a statement may begin: the only ones where 'def' can be shifted.
        self._stmt_states = frozenset(s for s, acts in lr.action.items() if "DEF" in acts)
        self._terminal_list = sorted(terminals) + ["$end"]

    @staticmethod
    def _seq_first(symbols, terminals, first, nullable):
        out = set()
        for sym in symbols:
            if sym in terminals:
                out.add(sym)
                return out, False
            out |= first.get(sym, set())
            if sym not in nullable:
                return out, False
        return out, True

    @classmethod
    def shared(cls) -> "Parser":
        """The process-wide parser, built on first use."""
        global _SHARED
        with _SHARED_LOCK:
            if _SHARED is None:
                _SHARED = cls().build()
            return _SHARED

    @classmethod
    def conflicts(cls) -> tuple[int, int]:
        """(shift/reduce, reduce/reduce) conflicts found while building the shared tables."""
        tables = cls.shared()._tables
        return len(tables.sr_conflicts), len(tables.rr_conflicts)

    @classmethod
    def conflict_details(cls) -> list[tuple[str, str]]:
        """Each shift/reduce conflict as (token, resolution); compare EXPECTED_CONFLICTS."""
        return [(tok, how) for _, tok, how in cls.shared()._tables.sr_conflicts]

    @classmethod
    def build_messages(cls) -> list[str]:
        """Whatever PLY said while building the grammar (unused rules, tokens ...)."""
        return list(cls.shared()._build_log.messages)

    # ------------------------------------------------------------------ entry points

    def parse(self, source: str, path: str = "<input>") -> N.Module:
        """Parse a whole file; raise the first lexical or syntax error as SenseSyntaxError."""
        with self._lock:
            self.build()
            lexer = self._lexer
            lexer.path, lexer.error_func = path, None
            tokens = lexer.tokenize(source)      # lexical errors come first, as in the reference
            return self._parse_tokens(tokens, lexer.source, None)

    def parse_all_errors(self, source: str, path: str = "<input>",
                         limit: int = 200) -> list[SenseSyntaxError]:
        """Every syntax error found, in source order, without duplicates (for ``sensec check``).

        Lexical errors are recovered from in the lexer. After a syntax error the parse starts
        again at the next line that can begin a top-level statement (column 1, outside strings).
        If the first lexing pass saw that line as the start of a logical line, its tokens are
        reused; otherwise (an unclosed bracket swallowed it) the text is lexed again with
        everything before that line blanked out, which keeps every position exact. So each
        top-level statement contributes its first syntax error, and the statement checks
        (assignment targets, ``requires``, rollback blocks ...) all theirs. A syntax error in a
        top-level statement that has a lexical error is dropped as a likely consequence of it.
        """
        with self._lock:
            self.build()
            lexer = self._lexer
            lexer.path = path
            lex_errors: list[SenseSyntaxError] = []
            found: list[SenseSyntaxError] = []
            try:
                lexer.error_func = [].append
                restarts = self._restart_lines(lexer.raw_tokens(source))
                lexer.error_func = lex_errors.append
                tokens = lexer.tokenize(source)
                src = lexer.source
                lexer.error_func = [].append         # lexical errors come from that pass only
                line_start_token = {
                    tok.lineno: i for i, tok in enumerate(tokens)
                    if tok.col == 1 and (i == 0 or tokens[i - 1].type in ("NEWLINE", "DEDENT"))}
                line, begin = 1, 0
                while len(found) < limit:
                    try:
                        if begin is not None:
                            self._parse_tokens(tokens, src, found, begin)
                        else:
                            offset = src.line_starts[line - 1]
                            blanked = _BLANK.sub(" ", src.text[:offset]) + src.text[offset:]
                            lexer.input(blanked)
                            self._parse_tokens(lexer, lexer.source, found)
                        break
                    except SenseSyntaxError as err:
                        found.append(err)
                        k = bisect.bisect_right(restarts, max(err.pos.line, line))
                        if k == len(restarts):
                            break
                        line = restarts[k]
                        begin = line_start_token.get(line)
            finally:
                lexer.error_func = None

            def chunk(err):
                return bisect.bisect_right(restarts, err.pos.line)

            poisoned = {chunk(e) for e in lex_errors}
            found = [e for e in found if chunk(e) not in poisoned]
            seen, out = set(), []
            for err in sorted(lex_errors + found, key=lambda e: (e.pos.line, e.pos.col)):
                key = (err.message, err.pos.line, err.pos.col)
                if key not in seen:
                    seen.add(key)
                    out.append(err)
            return out

    def _restart_lines(self, raw_tokens) -> list[int]:
        """Lines where parse_all_errors may start again: a statement's first token in column 1."""
        starters = set(self._lr.action[0]) - {"$end"}
        lines = []
        for i, tok in enumerate(raw_tokens):
            if tok.col != 1 or tok.type not in starters:
                continue
            if tok.type == "IDENT" and tok.value in ("rollback", "compensate") \
                    and i + 1 < len(raw_tokens) and raw_tokens[i + 1].type == "COLON":
                continue
            lines.append(tok.lineno)
        return lines

    def _parse_tokens(self, tokens, src, collect, begin=0):
        self._src, self._collect = src, collect
        self._feed = _TokenFeed(tokens, self, begin)
        try:
            return self._lr.parse(lexer=self._feed, tracking=True)
        finally:
            self._feed = None

    # ------------------------------------------------------------------ positions and errors

    def _pos(self, p, n) -> Pos:
        """Position of the first token of ``p[n]`` (PLY's tracking gives nonterminals one)."""
        line = p.lineno(n)
        return Pos(line, p.lexpos(n) - self._src.line_starts[line - 1] + 1)

    def _tok_pos(self, tok) -> Pos:
        return self._src.eof_pos if tok is None else self._src.pos(tok.lexpos)

    def _got_pos(self, tok) -> Pos:
        """Where an unexpected token is reported: its start, but a string that spans lines is
        reported at its closing quote, on the line where it ends, as the reference does."""
        pos = self._tok_pos(tok)
        if tok is not None and tok.type == "STRING":
            end = self._src.pos(tok.end - 1)
            if end.line != pos.line:
                return end
        return pos

    def _got(self, tok) -> str:
        return f"{display_kind(tok)} {self._src.lexeme(tok)!r}"

    def _make_error(self, message: str, pos: Pos, *, in_statement: bool = True):
        """The error to report; a broken ``NAME(...):`` statement is reported as a missing def."""
        if in_statement:
            needs_def = self._missing_def()
            if needs_def is not None:
                return needs_def
        return SenseSyntaxError(message, pos, path=self._src.path)

    def _check_failed(self, message: str, pos: Pos, *, in_statement: bool = True) -> None:
        """A statement-level check failed: raise, or record and go on (``parse_all_errors``)."""
        err = self._make_error(message, pos, in_statement=in_statement)
        if self._collect is None:
            raise err
        self._collect.append(err)

    def _missing_def(self):
        """``NAME(...)`` then ``:`` or ``returns`` opening the statement being parsed.

        The reference looks for this shape before parsing such a statement, so whatever else is
        wrong inside it, this is the error it reports.
        """
        feed = self._feed
        if feed is None or not feed.stmt_starts:
            return None
        cur = feed.current
        k = bisect.bisect_right(feed.stmt_starts, cur) - 1
        if k < 0:
            return None
        s = feed.stmt_starts[k]
        first, second = feed.at(s), feed.at(s + 1)
        if s >= cur or second is None or first.type != "IDENT" or second.type != "LPAREN":
            return None
        depth, i = 0, s + 1
        while (tok := feed.at(i)) is not None and tok.type not in _LAYOUT:
            if tok.type in ("LPAREN", "LBRACKET"):
                depth += 1
            elif tok.type in ("RPAREN", "RBRACKET"):
                depth -= 1
                if depth == 0:
                    after = feed.at(i + 1)
                    if after is not None and after.type in ("COLON", "RETURNS"):
                        return SenseSyntaxError(MSG_NEEDS_DEF.format(name=first.value),
                                                self._tok_pos(first), path=self._src.path)
                    return None
            i += 1
        return None

    def _at_statement_start(self) -> bool:
        return self._lr.statestack[-1] in self._stmt_states

    def _check_argument_start(self, i: int) -> None:
        """After a labelled argument, the next one must be labelled too.

        The reference decides this from the argument's first two tokens, before parsing it, so
        ``f(a: 1, )`` and ``f(a: 1, 2 3)`` both fail here; an LR parser would only know at the
        end of the argument, hence the check in the token feed.
        """
        syms = self._lr.symstack
        if len(syms) < 2 or syms[-1].type != "COMMA" or syms[-2].type != "args" \
                or not syms[-2].value[1]:
            return
        feed = self._feed
        tok, after = feed.at(i), feed.at(i + 1)
        if tok.type == "IDENT" and after is not None and after.type == "COLON":
            return
        self._check_failed(MSG_ARG_ORDER, self._tok_pos(tok))

    # ------------------------------------------------------------------ p_error

    def p_error(self, tok):
        lr = self._lr
        states, syms = list(lr.statestack), list(lr.symstack)
        if any(rest and f"{head} {rest[0]}" in _RETREAT
               for head, rest, _ in self._items[states[-1]]):
            tok = syms.pop()
            states.pop()
        expect, term = self._choose_message(states)
        if term is not None:
            self._run_pending_reductions(states, syms, term)
        got = self._got(tok)
        if expect is UNEXPECTED:
            message = f"unexpected token {got}"
        else:
            message = expect.text.format(prev=getattr(syms[-1], "value", ""))
            if expect.got:
                message = f"{message} (got {got})"
        raise self._make_error(message, self._got_pos(tok))

    def _simulate(self, states, term):
        """Feed ``term`` to a copy of the automaton: (reductions, shifting state) or None."""
        action, goto, prods = self._lr.action, self._lr.goto, self._lr.productions
        stack = list(states)
        for n in range(10_000):
            act = action[stack[-1]].get(term)
            if act is None:
                return None
            if act >= 0:
                return n, stack[-1]
            prod = prods[-act]
            if prod.len:
                del stack[-prod.len:]
            nxt = goto[stack[-1]].get(prod.name)
            if nxt is None:
                return None
            stack.append(nxt)
        return None

    def _expectations(self, state, term):
        """Messages attached to the items of ``state`` that would shift ``term``."""
        rows = self._items[state]
        direct = []
        for head, rest, _ in rows:
            if rest and rest[0] == term:
                what = _EXPECTED.get(f"{head} {term}") or _EXPECTED.get(head)
                if what:
                    direct.append(what)
        if direct:
            return direct
        # Otherwise a kernel item expecting a nonterminal that can begin with ``term``.
        via = []
        for head, rest, kernel in rows:
            if kernel and rest and rest[0] not in self._terminals_set:
                first, _ = self._seq_first(rest, self._terminals_set, self._first, self._nullable)
                if term in first:
                    what = _EXPECTED.get(f"{head} {rest[0]}") or _EXPECTED.get(head)
                    if what:
                        via.append(what)
        return via

    def _choose_message(self, states):
        """The innermost expectation: fewest reductions first; an expression start wins ties."""
        by_depth: dict[int, list] = {}
        for term in self._terminal_list:
            found = self._simulate(states, term)
            if found is None:
                continue
            depth, state = found
            for what in self._expectations(state, term):
                by_depth.setdefault(depth, []).append((what, term))
        for depth in sorted(by_depth):
            choices = by_depth[depth]
            for what, term in choices:
                if what is UNEXPECTED:
                    return what, term
            return min(choices, key=lambda c: c[0].rank)
        return UNEXPECTED, None

    def _run_pending_reductions(self, states, syms, term):
        """Run, on copies of the stacks, the reductions ``term`` would trigger (see module doc)."""
        lr = self._lr
        states, syms = list(states), list(syms)
        for _ in range(10_000):
            act = lr.action[states[-1]].get(term)
            if act is None or act >= 0:
                return
            prod = lr.productions[-act]
            sym = yacc.YaccSymbol()
            sym.type, sym.value = prod.name, None
            if prod.len:
                targ = syms[-prod.len - 1:]
                targ[0] = sym
                sym.lineno, sym.lexpos = targ[1].lineno, targ[1].lexpos
                del syms[-prod.len:]
                del states[-prod.len:]
            else:
                targ = [sym]
                sym.lineno, sym.lexpos = self._feed.lineno, self._feed.lexpos
            production = yacc.YaccProduction(targ, syms)
            production.lexer, production.parser = self._feed, lr
            prod.callable(production)
            syms.append(sym)
            states.append(lr.goto[states[-1]][prod.name])

    # ================================================================== grammar: statements

    def p_program(self, p):
        """program : stmt_list
                   | empty"""
        p[0] = N.Module(Pos(1, 1), tuple(p[1] or ()))

    def p_empty(self, p):
        "empty :"
        p[0] = None

    def p_stmt_list_first(self, p):
        "stmt_list : stmt"
        p[0] = [p[1]]

    def p_stmt_list_more(self, p):
        "stmt_list : stmt_list stmt"
        p[1].append(p[2])
        p[0] = p[1]

    def p_stmt_simple(self, p):
        "stmt : simple_stmt NEWLINE"
        p[0] = p[1]

    def p_stmt_compound(self, p):
        "stmt : compound_stmt"
        p[0] = p[1]

    def p_simple_stmt(self, p):
        """simple_stmt : expr_stmt
                       | typed_decl
                       | local_decl
                       | return_stmt
                       | break_stmt
                       | continue_stmt
                       | memory_decl
                       | model_decl
                       | set_stmt
                       | import_stmt
                       | from_stmt"""
        p[0] = p[1]

    def p_compound_stmt(self, p):
        """compound_stmt : if_stmt
                         | while_stmt
                         | for_stmt
                         | func_def
                         | action_def
                         | tool_def
                         | agent_def
                         | policy_stmt
                         | session_stmt
                         | test_stmt"""
        p[0] = p[1]

    def p_block_indented(self, p):
        "block : COLON NEWLINE INDENT stmt_list DEDENT"
        p[0] = tuple(p[4])

    def p_block_inline(self, p):
        "block : COLON stmt"
        p[0] = (p[2],)

    # ------------------------------------------------------------------ simple statements

    def p_expr_stmt(self, p):
        "expr_stmt : expr"
        p[0] = N.ExprStmt(self._pos(p, 1), p[1])

    def p_typed_decl(self, p):
        """typed_decl : IDENT COLON type ASSIGN expr
                      | soft_keyword COLON type ASSIGN expr"""
        p[0] = N.TypedDecl(self._pos(p, 1), p[1], p[3], p[5])

    def p_soft_keyword(self, p):
        """soft_keyword : ROLLBACK
                        | COMPENSATE"""
        p[0] = p[1]

    def p_local_decl(self, p):
        """local_decl : LOCAL IDENT ASSIGN expr
                      | LOCAL IDENT COLON type ASSIGN expr"""
        if len(p) == 5:
            p[0] = N.LocalDecl(self._pos(p, 1), p[2], None, p[4])
        else:
            p[0] = N.LocalDecl(self._pos(p, 1), p[2], p[4], p[6])

    def p_return_stmt(self, p):
        """return_stmt : RETURN
                       | RETURN expr"""
        p[0] = N.Return(self._pos(p, 1), p[2] if len(p) == 3 else None)

    def p_break_stmt(self, p):
        "break_stmt : BREAK"
        p[0] = N.Break(self._pos(p, 1))

    def p_continue_stmt(self, p):
        "continue_stmt : CONTINUE"
        p[0] = N.Continue(self._pos(p, 1))

    def p_memory_decl(self, p):
        """memory_decl : MEMORY IDENT
                       | MEMORY IDENT COLON STRING
                       | PERSISTENT MEMORY IDENT
                       | PERSISTENT MEMORY IDENT COLON STRING"""
        persistent = p.slice[1].type == "PERSISTENT"
        name_at = 3 if persistent else 2
        hint = p[name_at + 2] if len(p) > name_at + 1 else None
        p[0] = N.MemoryDecl(self._pos(p, 1), p[name_at], hint, persistent)

    def p_model_decl(self, p):
        "model_decl : MODEL IDENT ASSIGN expr"
        p[0] = N.ModelDecl(self._pos(p, 1), p[2], p[4])

    def p_set_stmt(self, p):
        "set_stmt : SET IDENT ASSIGN expr"
        p[0] = N.SetStmt(self._pos(p, 1), p[2], p[4])

    def p_import_stmt(self, p):
        """import_stmt : IMPORT modref
                       | IMPORT modref alias
                       | IMPORT PYTHON modref
                       | IMPORT PYTHON modref alias"""
        python = p.slice[2].type == "PYTHON"
        at = 3 if python else 2
        alias = p[at + 1] if len(p) > at + 1 else None
        p[0] = N.Import(self._pos(p, 1), p[at], alias, python)

    def p_alias(self, p):
        "alias : AS IDENT"
        p[0] = p[2]

    def p_modref_string(self, p):
        "modref : STRING"
        p[0] = N.ModRef(self._pos(p, 1), p[1], True)

    def p_modref_dotted(self, p):
        "modref : dotted"
        p[0] = N.ModRef(self._pos(p, 1), p[1], False)

    def p_dotted(self, p):
        """dotted : IDENT
                  | dotted DOT IDENT"""
        p[0] = p[1] if len(p) == 2 else f"{p[1]}.{p[3]}"

    def p_from_stmt(self, p):
        """from_stmt : FROM modref IMPORT import_names
                     | FROM PYTHON modref IMPORT import_names"""
        python = len(p) == 6
        p[0] = N.FromImport(self._pos(p, 1), p[3 if python else 2], tuple(p[len(p) - 1]),
                            python)

    def p_import_names(self, p):
        """import_names : import_name
                        | import_names COMMA import_name"""
        if len(p) == 2:
            p[0] = [p[1]]
        else:
            p[1].append(p[3])
            p[0] = p[1]

    def p_import_name(self, p):
        """import_name : IDENT
                       | IDENT alias"""
        p[0] = N.ImportName(self._pos(p, 1), p[1], p[2] if len(p) == 3 else None)

    # ------------------------------------------------------------------ compound statements

    def p_if_stmt(self, p):
        """if_stmt : IF expr block
                   | IF expr block ELSE block"""
        p[0] = N.If(self._pos(p, 1), p[2], p[3], p[5] if len(p) == 6 else None)

    def p_if_stmt_else_if(self, p):
        "if_stmt : IF expr block ELSE if_stmt"
        p[0] = N.If(self._pos(p, 1), p[2], p[3], (p[5],))

    def p_while_stmt(self, p):
        "while_stmt : WHILE expr block"
        p[0] = N.While(self._pos(p, 1), p[2], p[3])

    def p_for_stmt(self, p):
        "for_stmt : FOR IDENT IN expr block"
        p[0] = N.For(self._pos(p, 1), p[2], p[4], p[5])

    def p_func_def(self, p):
        """func_def : DEF IDENT param_list block
                    | DEF IDENT param_list ARROW type block"""
        if len(p) == 5:
            p[0] = N.FunctionDef(self._pos(p, 1), p[2], p[3], None, p[4])
        else:
            p[0] = N.FunctionDef(self._pos(p, 1), p[2], p[3], p[5], p[6])

    def p_param_list(self, p):
        """param_list : LPAREN RPAREN
                      | LPAREN params RPAREN"""
        p[0] = tuple(p[2]) if len(p) == 4 else ()

    def p_params(self, p):
        """params : param
                  | params COMMA param"""
        if len(p) == 2:
            p[0] = [p[1]]
        else:
            p[1].append(p[3])
            p[0] = p[1]

    def p_param(self, p):
        """param : IDENT
                 | IDENT COLON type"""
        p[0] = N.Param(self._pos(p, 1), p[1], p[3] if len(p) == 4 else None)

    def p_type(self, p):
        """type : IDENT
                | IDENT LT type_list GT"""
        p[0] = N.TypeRef(self._pos(p, 1), p[1], tuple(p[3]) if len(p) == 5 else ())

    def p_type_list(self, p):
        """type_list : type
                     | type_list COMMA type"""
        if len(p) == 2:
            p[0] = [p[1]]
        else:
            p[1].append(p[3])
            p[0] = p[1]

    # ------------------------------------------------------------------ actions

    def p_action_def(self, p):
        "action_def : action_head block"
        head = p[1]
        after = self._tok_pos(self._feed.last)    # the lookahead: first token after the body
        if head.kind == "reversible":
            self._check_failed(MSG_NEEDS_ROLLBACK.format(name=head.name), after,
                               in_statement=False)
        p[0] = self._action(head, p[2], None, after)

    def p_action_def_rollback(self, p):
        "action_def : action_head block rollback_kw block"
        p[0] = self._action(p[1], p[2], p[4], p[3])

    def p_action_def_compensate(self, p):
        "action_def : action_head block compensate_kw block"
        p[0] = self._action(p[1], p[2], None, p[3])

    def p_rollback_kw(self, p):
        "rollback_kw : ROLLBACK"
        # Reduced as soon as 'rollback' is shifted, like the reference's check, before the
        # block; p[-2] is the action head below the body (PLY's embedded-action look-back).
        pos = self._pos(p, 1)
        if p[-2].kind != "reversible":
            self._check_failed(MSG_NO_ROLLBACK, pos, in_statement=False)
        p[0] = pos

    def p_compensate_kw(self, p):
        "compensate_kw : COMPENSATE"
        pos = self._pos(p, 1)
        self._check_failed(MSG_COMPENSATE, pos, in_statement=False)
        p[0] = pos

    @staticmethod
    def _action(head, body, rollback, rollback_pos):
        return N.ActionDef(head.pos, head.kind, head.name, head.params, head.capability,
                           head.approval, body, rollback, rollback_pos)

    def p_action_head(self, p):
        """action_head : action_kind ACTION IDENT param_list
                       | action_kind ACTION IDENT param_list REQUIRES req_list"""
        capability, approval = p[6] if len(p) == 7 else (None, False)
        p[0] = _ActionHead(self._pos(p, 1), p[1], p[3], p[4], capability, approval)

    def p_action_kind(self, p):
        """action_kind : REVERSIBLE
                       | IRREVERSIBLE
                       | IRREVERSIBLE IDENT"""
        if len(p) == 3:
            # `immediate` stays an ordinary name everywhere else.
            if p[2] != "immediate":
                self._check_failed(MSG_IMMEDIATE.format(word=p[2]), self._pos(p, 2))
            p[0] = "irreversible immediate"
        else:
            p[0] = p[1]

    def p_req_list_first(self, p):
        "req_list : req"
        kind, value = p[1]
        p[0] = (value, False) if kind == "cap" else (None, True)

    def p_req_list_more(self, p):
        "req_list : req_list COMMA req"
        capability, approval = p[1]
        kind, value = p[3]
        if kind == "cap":
            if capability is not None:
                self._check_failed(MSG_ONE_CAPABILITY, self._pos(p, 3))
            else:
                capability = value
        elif approval:
            self._check_failed(MSG_APPROVAL_TWICE, self._pos(p, 3))
        approval = approval or kind == "approval"
        p[0] = (capability, approval)

    def p_req(self, p):
        """req : APPROVAL
               | action_cap"""
        p[0] = ("approval", None) if p.slice[1].type == "APPROVAL" else ("cap", p[1])

    def p_action_cap(self, p):
        """action_cap : action_capword
                      | action_cap DOT capword"""
        p[0] = p[1] if len(p) == 2 else f"{p[1]}.{p[3]}"

    def p_cap(self, p):
        """cap : capword
               | cap DOT capword"""
        p[0] = p[1] if len(p) == 2 else f"{p[1]}.{p[3]}"

    def p_capword(self, p):
        """capword : action_capword
                   | APPROVAL"""
        p[0] = p[1]

    # Any word can be a segment of a capability path (spec 2.4), but an action's requirement
    # list cannot start with 'approval' as a path: there it is the approval flag.
    def p_action_capword(self, p):
        p[0] = p[1]

    p_action_capword.__doc__ = "action_capword : IDENT\n" + "".join(
        f"| {word.upper()}\n" for word in KEYWORDS if word != "approval")

    # ------------------------------------------------------------------ tools and agents

    def p_tool_def(self, p):
        "tool_def : tool_head block"
        h = p[1]
        p[0] = N.ToolDef(h.pos, h.name, h.params, h.returns, h.capability, h.description,
                         p[2], h.is_async)

    def p_tool_head(self, p):
        "tool_head : tool_intro IDENT param_list tool_returns tool_requires tool_desc"
        pos, is_async = p[1]
        p[0] = _ToolHead(pos, is_async, p[2], p[3], p[4], p[5], p[6])

    def p_tool_intro(self, p):
        """tool_intro : TOOL
                      | ASYNC TOOL"""
        p[0] = (self._pos(p, 1), len(p) == 3)

    def p_tool_returns(self, p):
        """tool_returns : empty
                        | RETURNS type"""
        p[0] = p[2] if len(p) == 3 else None

    def p_tool_requires(self, p):
        """tool_requires : empty
                         | REQUIRES cap"""
        p[0] = p[2] if len(p) == 3 else None

    def p_tool_desc(self, p):
        """tool_desc : empty
                     | STRING"""
        p[0] = p[1]

    def p_agent_def(self, p):
        "agent_def : agent_intro IDENT block"
        pos, is_async = p[1]
        p[0] = N.AgentDef(pos, p[2], p[3], is_async)

    def p_agent_intro(self, p):
        """agent_intro : AGENT
                       | ASYNC AGENT"""
        p[0] = (self._pos(p, 1), len(p) == 3)

    # ------------------------------------------------------------------ policy, session, test

    def p_policy_stmt_inline(self, p):
        "policy_stmt : POLICY COLON policy_rule"
        p[0] = N.Policy(self._pos(p, 1), (p[3],))

    def p_policy_stmt_block(self, p):
        "policy_stmt : POLICY COLON NEWLINE INDENT policy_rules DEDENT"
        p[0] = N.Policy(self._pos(p, 1), tuple(p[5]))

    def p_policy_rules(self, p):
        """policy_rules : policy_rule
                        | policy_rules policy_rule"""
        if len(p) == 2:
            p[0] = [p[1]]
        else:
            p[1].append(p[2])
            p[0] = p[1]

    def p_policy_rule(self, p):
        "policy_rule : effect cap NEWLINE"
        p[0] = N.Rule(self._pos(p, 1), p[1], p[2])

    def p_effect(self, p):
        """effect : ALLOW
                  | DENY"""
        p[0] = p[1]

    def p_session_stmt(self, p):
        """session_stmt : SESSION IDENT block
                        | SESSION IDENT AS IDENT block"""
        if len(p) == 4:
            p[0] = N.Session(self._pos(p, 1), p[2], p[3])
        else:
            p[0] = N.Session(self._pos(p, 1), p[2], p[5], p[4])

    def p_test_stmt(self, p):
        "test_stmt : TEST STRING block"
        p[0] = N.Test(self._pos(p, 1), p[2], p[3])

    # ================================================================== grammar: expressions

    def p_expr(self, p):
        "expr : binexpr"
        p[0] = p[1]

    def p_expr_assign(self, p):
        "expr : binexpr ASSIGN expr"
        # Right-associative by construction. Both checks run once the right-hand side is
        # complete, as in the reference ('1 = , 2' is an unexpected ',', '1 = 2 3' an invalid
        # target), innermost assignment first.
        target, pos, value = p[1], self._pos(p, 2), p[3]
        if not isinstance(target, (N.Name, N.Index)):
            self._check_failed(MSG_INVALID_TARGET, pos)
        elif (isinstance(target, N.Name) and isinstance(value, N.Call)
                and isinstance(value.callee, N.Name) and value.callee.name == "inference"):
            self._check_failed(MSG_INFERENCE.format(name=target.name), pos)
        p[0] = N.Assign(pos, target, value)

    def p_binexpr(self, p):
        """binexpr : binexpr OR binexpr
                   | binexpr AND binexpr
                   | binexpr EQ binexpr
                   | binexpr NE binexpr
                   | binexpr LT binexpr
                   | binexpr LE binexpr
                   | binexpr GT binexpr
                   | binexpr GE binexpr
                   | binexpr PLUS binexpr
                   | binexpr MINUS binexpr
                   | binexpr STAR binexpr
                   | binexpr SLASH binexpr
                   | binexpr PERCENT binexpr"""
        op = p[2]
        cls = N.Logical if op in ("and", "or") else N.Binary
        p[0] = cls(self._pos(p, 2), op, p[1], p[3])

    def p_binexpr_unary(self, p):
        "binexpr : unary"
        p[0] = p[1]

    def p_unary(self, p):
        """unary : MINUS unary
                 | NOT unary"""
        p[0] = N.Unary(self._pos(p, 1), p[1], p[2])

    def p_unary_postfix(self, p):
        "unary : postfix"
        p[0] = p[1]

    def p_postfix_primary(self, p):
        "postfix : primary"
        p[0] = p[1]

    def p_postfix_call(self, p):
        """postfix : postfix LPAREN RPAREN
                   | postfix LPAREN args RPAREN"""
        if len(p) == 4:
            p[0] = N.Call(self._pos(p, 2), p[1], ())
        else:
            positional, labels = p[3]
            p[0] = N.Call(self._pos(p, 2), p[1], tuple(positional), tuple(labels))

    def p_postfix_member(self, p):
        "postfix : postfix DOT IDENT"
        p[0] = N.Member(self._pos(p, 3), p[1], p[3])

    def p_postfix_index(self, p):
        "postfix : postfix LBRACKET expr RBRACKET"
        p[0] = N.Index(self._pos(p, 2), p[1], p[3])

    def p_args_first(self, p):
        "args : arg"
        p[0] = ([], [])
        self._add_arg(p[0], p[1])

    def p_args_more(self, p):
        "args : args COMMA arg"
        self._add_arg(p[1], p[3])
        p[0] = p[1]

    @staticmethod
    def _add_arg(args, arg):
        # A positional argument after a label was already refused by _check_argument_start.
        (args[1] if isinstance(arg, N.Label) else args[0]).append(arg)

    def p_arg(self, p):
        "arg : expr"
        p[0] = p[1]

    def p_arg_label(self, p):
        "arg : IDENT COLON expr"
        p[0] = N.Label(self._pos(p, 1), p[1], p[3])

    def p_primary_int(self, p):
        "primary : INT"
        p[0] = N.IntLit(self._pos(p, 1), p[1])

    def p_primary_float(self, p):
        "primary : FLOAT"
        p[0] = N.FloatLit(self._pos(p, 1), p[1])

    def p_primary_string(self, p):
        "primary : STRING"
        p[0] = N.StrLit(self._pos(p, 1), p[1])

    def p_primary_bool(self, p):
        """primary : TRUE
                   | FALSE"""
        p[0] = N.BoolLit(self._pos(p, 1), p.slice[1].type == "TRUE")

    def p_primary_nil(self, p):
        "primary : NIL"
        p[0] = N.NilLit(self._pos(p, 1))

    def p_primary_name(self, p):
        "primary : IDENT"
        p[0] = N.Name(self._pos(p, 1), p[1])

    def p_primary_group(self, p):
        "primary : LPAREN expr RPAREN"
        p[0] = p[2]

    def p_primary_array(self, p):
        """primary : LBRACKET RBRACKET
                   | LBRACKET items RBRACKET"""
        p[0] = N.ArrayLit(self._pos(p, 1), tuple(p[2]) if len(p) == 4 else ())

    def p_items(self, p):
        """items : expr
                 | items COMMA expr"""
        if len(p) == 2:
            p[0] = [p[1]]
        else:
            p[1].append(p[3])
            p[0] = p[1]


_SHARED: Parser | None = None
_SHARED_LOCK = threading.Lock()


def parse(source: str, path: str = "<input>") -> N.Module:
    """Parse Sense source text into a Module, or raise the first SenseSyntaxError."""
    return Parser.shared().parse(source, path)


def parse_all_errors(source: str, path: str = "<input>") -> list[SenseSyntaxError]:
    """All syntax errors of a source text (empty when it parses), for ``sensec check``."""
    return Parser.shared().parse_all_errors(source, path)
