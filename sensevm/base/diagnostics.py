"""Renders an error once, for every command, and keeps every traceback from the user.

An error is ``FILE:LINE:COL: Class: message``, the source line, a caret; ``guarded`` is the
whole body of a console script (a bug in the tool is one line and exit 70).

Everything it shows may come from a file (a path, a name in a forged .snb, a string in the
program, a source line), so a character that could drive the terminal is shown as an escape.
"""

from __future__ import annotations

import os
import sys
TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing would slow every start
    from typing import Optional

from sensevm.base.errors import SenseError

# What could drive a terminal that shows a text: C0 controls, DEL, C1 controls (CSI among
# them), and the bidi embeddings, overrides and isolates, which reorder what follows them.
CONTROL = "[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"


def printable(text: str, keep: str = "") -> str:
    """``text`` with every CONTROL character but those in ``keep`` shown as an escape
    (``\\x1b``, ``\\u202e``)."""
    if text.isprintable():
        return text
    import re       # only for a text that needs it: start-up does without re
    return re.sub(CONTROL, lambda m: m.group() if m.group() in keep else escape(m.group()),
                  text)


def escape(ch: str) -> str:
    n = ord(ch)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def report_file_error(path: str, exc: Exception, stream) -> None:
    """``PATH: SnbFormatError: ...`` or ``PATH: VerifyError: ...`` for a file that cannot
    be loaded, escaped as render() escapes."""
    stream.write(f"{printable(path)}: {type(exc).__name__}: {printable(str(exc))}\n")


def use_color(stream) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def render(err: SenseError, source: Optional[str] = None, *, color: bool = False) -> str:
    bold, red, dim, green, reset = (("\x1b[1m", "\x1b[31m", "\x1b[2m", "\x1b[32m", "\x1b[0m")
                                    if color else ("", "", "", "", ""))
    path = printable(err.path or "<input>")
    message = printable(err.message, keep="\t\n")   # a message may have lines of its own
    pos = err.pos
    if pos is None or pos.line <= 0:
        return f"{bold}{path}{reset}: {red}{err.kind}{reset}: {message}\n"
    out = f"{bold}{path}:{pos.line}:{pos.col}{reset}: {red}{err.kind}{reset}: {message}\n"
    if source is not None:
        lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        if 1 <= pos.line <= len(lines):
            text = lines[pos.line - 1].expandtabs(1)
            out += f"{dim}{pos.line:>5} |{reset} {printable(text)}\n"
            caret_col = min(max(pos.col, 1), len(text) + 1)
            # Under the same character of the line as shown, escapes and all.
            out += f"      | {' ' * len(printable(text[:caret_col - 1]))}{green}^{reset}\n"
    return out


# A run of more frames of one function than this is summarised (deep recursion).
STACK_RUN = 6


def render_stack(frames, *, color: bool = False) -> str:
    """The Sense call stack under an uncaught error, outermost first and innermost last, as
    Python prints its traceback: ``  at FILE:LINE in NAME``. Nothing for an error in the
    program's top level alone (its position says it all). A run of frames of one function
    longer than STACK_RUN keeps its first and last three, the rest said in one line."""
    if len(frames) < 2:
        return ""
    dim, reset = ("\x1b[2m", "\x1b[0m") if color else ("", "")
    lines = [f"{dim}Sense call stack (innermost last):{reset}\n"]
    outermost_first = list(reversed(frames))
    i = 0
    while i < len(outermost_first):
        j = i
        while j < len(outermost_first) and outermost_first[j][2] == outermost_first[i][2]:
            j += 1
        run = outermost_first[i:j]
        if len(run) > STACK_RUN:
            shown = run[:3] + [None] + run[-3:]
        else:
            shown = run
        for frame in shown:
            if frame is None:
                lines.append(f"  ... {len(run) - 6:,} more frames of {run[0][2]}\n")
            else:
                path, line, name = frame
                lines.append(f"  at {printable(path or '<input>')}:{line} in {printable(name)}\n")
        i = j
    return "".join(lines)


def report(err: SenseError, sources: dict[str, str], stream=None) -> None:
    """Write the rendering of ``err`` (and of every error it bundles), and the call stack of
    an uncaught runtime error, to ``stream``."""
    stream = stream if stream is not None else sys.stderr
    color = use_color(stream)
    for e in getattr(err, "errors", None) or [err]:
        source = sources.get(e.path or "")
        if source is None and e.path:
            try:
                with open(e.path, encoding="utf-8", errors="replace") as fh:
                    source = sources[e.path] = fh.read()
            except OSError:
                pass
        stream.write(render(e, source, color=color))
        if e.note:
            stream.write(f"  note: {printable(e.note)}\n")
        stream.write(render_stack(e.frames, color=color))
    stream.flush()


def internal_error(prog: str, exc: BaseException) -> None:
    if os.environ.get("SENSE_DEBUG"):
        raise exc
    sys.stderr.write(f"{prog}: internal error: {type(exc).__name__}: {exc}\n"
                     f"(this is a bug in {prog}; set SENSE_DEBUG=1 to see where)\n")
    sys.exit(70)


def guarded(prog: str, main) -> None:
    """Run ``main()`` as a console script's whole body: no Python traceback ever reaches the
    user (Ctrl-C exits 130 saying so; an exception is a bug in ``prog``, exit 70)."""
    try:
        main()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except Exception as exc:  # a bug in prog itself: say so plainly, exit 70 (EX_SOFTWARE)
        internal_error(prog, exc)
