"""Renders an error once, for every command: ``FILE:LINE:COL: Class: message``, the source line, a caret."""

from __future__ import annotations

import os
import sys
TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing would slow every start
    from typing import Optional

from .errors import SenseError


def use_color(stream) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def render(err: SenseError, source: Optional[str] = None, *, color: bool = False) -> str:
    bold, red, dim, green, reset = (("\x1b[1m", "\x1b[31m", "\x1b[2m", "\x1b[32m", "\x1b[0m")
                                    if color else ("", "", "", "", ""))
    path = err.path or "<input>"
    pos = err.pos
    if pos is None or pos.line <= 0:
        return f"{bold}{path}{reset}: {red}{err.kind}{reset}: {err.message}\n"
    out = f"{bold}{path}:{pos.line}:{pos.col}{reset}: {red}{err.kind}{reset}: {err.message}\n"
    if source is not None:
        lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        if 1 <= pos.line <= len(lines):
            text = lines[pos.line - 1].expandtabs(1)
            out += f"{dim}{pos.line:>5} |{reset} {text}\n"
            caret_col = min(max(pos.col, 1), len(text) + 1)
            out += f"      | {' ' * (caret_col - 1)}{green}^{reset}\n"
    return out


def report(err: SenseError, sources: dict[str, str], stream=None) -> None:
    """Write the rendering of ``err`` (and of every error it bundles) to ``stream``."""
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
    stream.flush()
