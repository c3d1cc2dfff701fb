"""``sensevm repl``: an interactive Sense session in a terminal, a script runner through a pipe."""

from __future__ import annotations

import os
import re
import sys
from typing import Callable, Optional

BANNER = "Sense (sensevm) \u2014 interactive REPL (':help' for help, 'exit' to quit)"
PROMPT = "sense> "
# As wide as PROMPT, so the lines of a block stay aligned with the first one.
CONTINUATION = "...    "
EXIT_WORDS = ("exit", "quit", "exit()", "quit()")
INDENT = "    "
# After a line starting with one of these the block's next line is one level shallower.
_DEDENT_AFTER = re.compile(r"\s*(return|break|continue|raise)\b")

HELP = """\
Type Sense statements; they run in one session that keeps its names, actions,
policy and audit log from one input to the next. A line ending in ':' (or an
open '(', '[' or triple-quoted string) starts a multi-line input: keep typing
indented lines and finish the block with an empty line.

  :dis NAME   show the bytecode of the function, action or tool bound to NAME
  :audit      show the audit log so far
  :policy     show the policy rules in force at top level
  :help       show this help
  exit()      leave the REPL (so do 'exit', 'quit', 'quit()' and Ctrl-D on an empty line)

Keys: Tab completes keywords, names and (after 'NAME.') members, or indents at the
start of a line; Up/Down recall earlier inputs (kept across sessions); Ctrl-C
cancels the input being typed, or interrupts a running one.
"""

_IDENT = r"[^\W\d]\w*"
_MEMBER_BEFORE_CURSOR = re.compile(r"(" + _IDENT + r")\s*\.\s*(\w*)$")
_WORD_BEFORE_CURSOR = re.compile(_IDENT + r"$|$")
META_COMMANDS = (":dis", ":audit", ":policy", ":help")


# ------------------------------------------------------------------------ the shared core


class _Runner:
    """What both modes share: the session, the meta-commands, and how results are shown."""

    def __init__(self, stdout, stderr, *, errors_to_stderr: bool, color: bool,
                 dry_run: bool = False, echo: bool = False):
        from sensevm.cli.interactive import Interactive
        self.stdout = stdout
        self.stderr = stderr
        self.errors_to_stderr = errors_to_stderr
        self.color = color
        self.session = Interactive(stdout=stdout, path="<repl>", dry_run=dry_run)
        self.session.echo = echo
        self.failures = 0

    # Output ------------------------------------------------------------------------------

    def out(self, text: str) -> None:
        if text and not text.endswith("\n"):
            text += "\n"
        self.stdout.write(text)
        self.stdout.flush()

    def problem(self, text: str) -> None:
        """A failed input: shown where errors go in this mode, and counted."""
        self.failures += 1
        if text and not text.endswith("\n"):
            text += "\n"
        if self.errors_to_stderr:
            # Program output written before the error must come out before it.
            self.stdout.flush()
            self.stderr.write(text)
            self.stderr.flush()
        else:
            self.out(text)

    # Inputs ------------------------------------------------------------------------------

    def run_source(self, text: str, first_line: Optional[int] = None) -> None:
        if not text.endswith("\n"):
            text += "\n"
        try:
            err = self.session.execute(text, first_line)
        except KeyboardInterrupt:
            self.problem("KeyboardInterrupt")
            return
        except BrokenPipeError:
            raise                 # nobody reads the output any more: the session ends (main)
        except Exception as exc:  # a bug in the toolchain must not end the session
            if os.environ.get("SENSE_DEBUG"):
                raise
            self.problem(f"internal error: {type(exc).__name__}: {exc}\n"
                         "(this is a bug in sensevm; set SENSE_DEBUG=1 to see where)")
            return
        if err is not None:
            self.problem(self._render(err))
            return
        from sensevm.base.errors import SenseError
        from sensevm.cli.interactive import NOTHING, echo_text
        value = self.session.echoed
        if value is not None and value is not NOTHING:
            try:
                self.out(echo_text(value))
            except SenseError as exc:       # e.g. a non-finite Float, which has no text
                self.problem(self._render(exc))

    def _render(self, err) -> str:
        if self.color:
            try:
                return self.session.render_error(err, color=True)
            except TypeError:   # a render_error without colour support
                pass
        return self.session.render_error(err)

    def meta(self, line: str) -> None:
        """Run a ':command' line."""
        command, _, rest = line.strip().partition(" ")
        arg = rest.strip()
        if command == ":help":
            self.out(HELP)
        elif command == ":dis":
            self._dis(arg)
        elif command == ":audit":
            lines = self.session.audit_lines()
            self.out("\n".join(lines) if lines else "(the audit log is empty)")
        elif command == ":policy":
            rules = self.session.policy_rules()
            if rules:
                self.out("\n".join(f"{effect} {cap}" for cap, effect in sorted(rules.items())))
            else:
                self.out("(no policy rules in force: every capability is allowed)")
        else:
            self.problem(f"unknown command '{command}' \u2014 the commands are "
                         f"{', '.join(META_COMMANDS)} (':help' explains them)")

    def _dis(self, name: str) -> None:
        if not name or not re.fullmatch(_IDENT, name):
            self.problem("usage: :dis NAME  (NAME: a function, action or tool in scope)")
            return
        try:
            listing = self.session.disassemble(name)
        except KeyError:
            self.problem(f"':dis': no name '{name}' is defined")
        except TypeError as exc:
            self.problem(f"':dis': {exc}" if str(exc) else
                         f"':dis': '{name}' is not a function, action or tool")
        else:
            self.out(listing)


def is_meta(text: str) -> bool:
    return text.lstrip().startswith(":")


def is_exit(text: str) -> bool:
    return text.strip() in EXIT_WORDS


def _needs_more(text: str) -> bool:
    from sensevm.cli.interactive import needs_more
    return needs_more(text)


# ------------------------------------------------------------------------ piped mode


def run_piped(stdin, stdout, stderr, *, dry_run: bool = False) -> int:
    """Read ``stdin`` to the end, running each complete input as a terminal session would.

    Inputs are grouped exactly as typed ones: a complete line runs at once, a block runs when
    an empty line (or the end of input) closes it. No banner, prompts or colour; program
    output goes to ``stdout``, errors to ``stderr``. ``exit``/``quit`` stop early.
    Returns 0 if every input succeeded, 1 if any failed (an error, or a bad ':' command).
    """
    runner = _Runner(stdout, stderr, errors_to_stderr=True, color=False, dry_run=dry_run)
    pending = ""
    lineno = 0                  # of the line just read: errors name the lines of the input
    first = 1                   # ... and the line the pending input started on
    while True:
        # readline rather than iteration: a program calling ask_human() reads the same stream,
        # and must get the next line, not one already buffered by us.
        line = stdin.readline()
        if not line:
            break
        line = line.rstrip("\r\n")
        lineno += 1
        if not pending:
            first = lineno
            if not line.strip():
                continue
            if is_exit(line):
                break
            if is_meta(line):
                runner.meta(line)
                continue
        pending += line + "\n"
        if not _needs_more(pending):
            runner.run_source(pending, first)
            pending = ""
    if pending.strip():
        runner.run_source(pending, first)
    stdout.flush()
    return 1 if runner.failures else 0


# ------------------------------------------------------------------------ terminal mode


def history_path() -> str:
    """``$XDG_DATA_HOME/sense/repl_history``, else ``~/.local/share/sense/repl_history``."""
    base = os.environ.get("XDG_DATA_HOME", "")
    # The XDG spec says relative values are invalid and must be ignored.
    if not base or not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "sense", "repl_history")


def make_history(path: Optional[str] = None):
    """A FileHistory at ``path`` (made if need be), or an in-memory one if it cannot be written."""
    from prompt_toolkit.history import FileHistory, InMemoryHistory

    class _TolerantFileHistory(FileHistory):
        # A history file that becomes unwritable mid-session (disk full, permissions changed)
        # loses the entry; the session itself goes on.
        def store_string(self, string: str) -> None:
            try:
                super().store_string(string)        # appends the entry (mode "ab")
                fd = os.open(self.filename, os.O_RDONLY)
                try:
                    os.fsync(fd)                    # ... durably, like every other append
                finally:
                    os.close(fd)
            except OSError:
                pass

    path = path or history_path()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError:
        return InMemoryHistory()
    return _TolerantFileHistory(path)


def _in_string_or_comment(line: str) -> bool:
    """Does ``line`` (the text before the cursor) end inside a string or a comment?"""
    quote = False
    i = 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == '"':
                quote = False
        elif c == '"':
            quote = True
        elif c == "#":
            return True
        i += 1
    return quote


def make_completer(session, keywords=None):
    """Completion of keywords, names in scope, members after ``NAME.``, and ':' commands."""
    from prompt_toolkit.completion import Completer, Completion
    from sensevm.cli.highlight import KEYWORDS

    words = tuple(keywords if keywords is not None else KEYWORDS)

    class SenseCompleter(Completer):
        def get_completions(self, document, complete_event):
            line = document.current_line_before_cursor
            if document.cursor_position_row == 0 and line.lstrip().startswith(":"):
                yield from self._meta(line.lstrip())
                return
            if _in_string_or_comment(line):
                return
            member = _MEMBER_BEFORE_CURSOR.search(line)
            if member:
                obj, prefix = member.groups()
                for name in session.members(obj):
                    if name.startswith(prefix):
                        yield Completion(name, -len(prefix))
                return
            prefix = _WORD_BEFORE_CURSOR.search(line).group()
            if not prefix and not complete_event.completion_requested:
                return
            seen = set()
            for name in list(words) + list(session.names()):
                if name.startswith(prefix) and name not in seen:
                    seen.add(name)
                    meta = "keyword" if name in words else None
                    yield Completion(name, -len(prefix), display_meta=meta)

        def _meta(self, line):
            command, space, arg = line.partition(" ")
            if not space:
                for c in META_COMMANDS:
                    if c.startswith(command):
                        yield Completion(c, -len(command))
            elif command == ":dis" and re.fullmatch(r"\w*", arg):
                for name in session.names():
                    if name.startswith(arg):
                        yield Completion(name, -len(arg))

    return SenseCompleter()


def next_indent(line: str) -> str:
    """The indentation the next line of a block starts with after ``line``: one level deeper
    after a ':', one shallower after return/break/continue/raise, else the same."""
    indent = line[:len(line) - len(line.lstrip())]
    code = line
    for i in range(len(line)):
        if line[i] == "#" and not _in_string_or_comment(line[:i]):
            code = line[:i]                 # a comment after the ':' is not the line's end
            break
    if code.rstrip().endswith(":"):
        return indent + INDENT
    if _DEDENT_AFTER.match(line):
        return indent[:max(len(indent) - len(INDENT), 0)]
    return indent


def _key_bindings(needs_more: Callable[[str], bool]):
    from prompt_toolkit.filters import Condition
    from prompt_toolkit.key_binding import KeyBindings

    kb = KeyBindings()

    @kb.add("enter")
    def _enter(event):
        buf = event.current_buffer
        state = buf.complete_state
        if state is not None and state.current_completion is not None:
            # The highlighted completion is already in the text: Enter just closes the menu.
            buf.complete_state = None
            return
        text = buf.text
        if is_exit(text):
            # Leave without recording 'exit' in the history, where Up would find it first.
            event.app.exit(result=text)
            return
        # needs_more sees the lines typed so far, each ended by its newline.
        if is_meta(text) or not needs_more(text + "\n"):
            stripped = text.rstrip()
            if stripped != text:
                # An auto-indented line left empty closed the block: no trailing blanks in
                # the input (or the history).
                buf.text = stripped
            buf.validate_and_handle()
        else:
            buf.insert_text("\n" + next_indent(buf.document.current_line_before_cursor))

    @Condition
    def _in_indent():
        from prompt_toolkit.application import get_app
        before = get_app().current_buffer.document.current_line_before_cursor
        return before != "" and before.isspace()

    @kb.add("backspace", filter=_in_indent)
    def _dedent(event):
        # Backspace in the indentation goes back one level, as it went forward.
        before = event.current_buffer.document.current_line_before_cursor
        event.current_buffer.delete_before_cursor((len(before) - 1) % len(INDENT) + 1)

    @Condition
    def _at_indent():
        from prompt_toolkit.application import get_app
        before = get_app().current_buffer.document.current_line_before_cursor
        return before == "" or before.isspace()

    @kb.add("tab", filter=_at_indent)
    def _indent(event):
        event.current_buffer.insert_text("    ")

    return kb


def run_terminal(stdout, *, dry_run: bool = False, history=None, color: Optional[bool] = None,
                 input=None, output=None) -> int:
    """The prompt_toolkit session; returns 0 when the user leaves."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
    from prompt_toolkit.lexers import PygmentsLexer
    from prompt_toolkit.styles import Style
    from sensevm.base.diagnostics import use_color
    from sensevm.cli.highlight import SenseLexer

    if color is None:
        color = use_color(stdout)
    runner = _Runner(stdout, stdout, errors_to_stderr=False, color=color, dry_run=dry_run,
                     echo=True)
    style = Style.from_dict({"prompt": "ansigreen bold", "continuation": "ansibrightblack"})
    prompt_session = PromptSession(
        message=[("class:prompt", PROMPT)],
        prompt_continuation=lambda width, line_number, soft_wrap: [
            ("class:continuation", CONTINUATION)],
        multiline=True,
        key_bindings=_key_bindings(_needs_more),
        history=history if history is not None else make_history(),
        lexer=PygmentsLexer(SenseLexer),
        completer=make_completer(runner.session),
        complete_while_typing=False,
        auto_suggest=AutoSuggestFromHistory(),
        style=style,
        input=input,
        output=output,
    )
    runner.out(BANNER)
    while True:
        try:
            text = prompt_session.prompt()
        except KeyboardInterrupt:
            continue            # Ctrl-C drops the input being typed
        except EOFError:
            break               # Ctrl-D on an empty line
        if not text.strip():
            continue
        if is_exit(text):
            break
        if is_meta(text):
            runner.meta(text)
            continue
        runner.run_source(text)
    return 0


# ------------------------------------------------------------------------ entry points


def run_repl(stdin=None, stdout=None, *, interactive: bool, stderr=None,
             dry_run: bool = False, history=None) -> int:
    """Run the REPL and return its exit status.

    ``interactive``: a prompt_toolkit session (input and output come from the current
    prompt_toolkit app session, normally the terminal; ``stdin`` is not used), always
    status 0. Otherwise piped mode: ``stdin`` is read to the end, no prompts or colour,
    errors go to ``stderr``, status 0 if every input succeeded and 1 if any failed.
    """
    stdout = stdout if stdout is not None else sys.stdout
    if interactive:
        return run_terminal(stdout, dry_run=dry_run, history=history)
    return run_piped(stdin if stdin is not None else sys.stdin, stdout,
                     stderr if stderr is not None else sys.stderr, dry_run=dry_run)


def main(*, dry_run: bool = False) -> int:
    """``sensevm repl``: interactive when both stdin and stdout are terminals, piped otherwise."""
    # With either end redirected there is nobody to show prompts and colour to (and
    # prompt_toolkit would write its escape codes into the file).
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    try:
        return run_repl(sys.stdin, sys.stdout, interactive=interactive, stderr=sys.stderr,
                        dry_run=dry_run)
    except BrokenPipeError:
        # `sensevm repl < inputs | head`: the reader has gone. End quietly, as `sensevm run`
        # does (launch.py): no message, the flush at exit silenced, status 1.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
