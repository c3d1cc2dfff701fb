"""Parse the expectation annotations embedded in Sense test programs.

This module has no third-party dependencies so that any test runner can
import it (``from expectations import parse_expectations`` with ``tests/`` on
``sys.path``, or ``from tests.expectations import ...`` from the repo root).

Annotation format (all annotations live in ``#`` comments; see
``tests/programs/README.md`` for the full description):

``# expect: TEXT``
    One line of standard output.  May end a code line (the line whose
    execution prints TEXT) or stand alone.  Lines are collected in file
    order and must match the program's stdout lines exactly and in order.
    TEXT is everything after ``# expect: `` (one space) up to the end of the
    line (line terminator removed, nothing else stripped).  An empty output
    line is written ``# expect:`` with nothing after it.

``# expect error: TEXT``
    At most one per file.  TEXT is exactly what the reference prints after
    ``SenseError: `` on stderr (e.g. ``[line 4] division by zero``).  Its
    presence means exit status 1; its absence means exit status 0.  The
    placeholder ``{DIR}`` stands for the absolute directory containing the
    program (used by module-not-found / circular-import messages); it is
    substituted by :func:`parse_expectations`.

``# expect class: NAME``
    The precise error class (spec 17.1), e.g. ``SenseTypeError``.

``# expect syntax error at: N``
    The program must fail to compile, with the error reported on line N.
    Such programs print nothing.  The ``# expect error:`` text is the
    reference's message, which a different parser need not reproduce.

``# flags: FLAG ...``
    Command-line flags the program is run with, whitespace-separated; at
    most one per file.  The only flag in use is ``--dry-run`` (``sense run
    --dry-run FILE``, spec 14); its ``# expect:`` lines then include the
    dry-run banner and summary exactly as printed.

``# deliberate: 21.N``
    The program pins a deliberate difference from the reference (spec 21);
    its expectations describe OUR implementation, not the reference.
    Every program under a ``deliberate/`` directory is deliberate too.
"""

from __future__ import annotations

import os
import re
from typing import List, NamedTuple, Optional, Tuple

__all__ = ["Expectation", "parse_expectations", "deliberate_refs",
           "ExpectationFormatError"]


class ExpectationFormatError(ValueError):
    """Raised for malformed or contradictory annotations."""


class Expectation(NamedTuple):
    stdout_lines: List[str]
    error_text: Optional[str]
    error_class: Optional[str]
    syntax_error_line: Optional[int]
    deliberate: bool
    flags: Tuple[str, ...] = ()

    @property
    def exit_status(self) -> int:
        return 1 if (self.error_text is not None
                     or self.syntax_error_line is not None) else 0


_OUT = re.compile(r"# expect:(?: (.*))?$")
_ERR = re.compile(r"# expect error: (.*)$")
_CLASS = re.compile(r"# expect class: (\S+)\s*$")
_SYNTAX = re.compile(r"# expect syntax error at: (\d+)\s*$")
_DELIB = re.compile(r"# deliberate: (.*)$")
_FLAGS = re.compile(r"# flags:(.*)$")


def _lines(path: str) -> List[str]:
    with open(path, "rb") as f:
        data = f.read().decode("utf-8")
    # Physical lines, terminators (\r\n, \r or \n) removed.
    return re.split(r"\r\n|\r|\n", data)


def parse_expectations(path: str) -> Expectation:
    """Return the :class:`Expectation` declared by the program at *path*."""
    stdout: List[str] = []
    error_text: Optional[str] = None
    error_class: Optional[str] = None
    syntax_line: Optional[int] = None
    deliberate = False
    flags: Optional[Tuple[str, ...]] = None

    for lineno, line in enumerate(_lines(path), 1):
        m = _OUT.search(line)
        if m:
            stdout.append(m.group(1) if m.group(1) is not None else "")
            continue
        m = _ERR.search(line)
        if m:
            if error_text is not None:
                raise ExpectationFormatError(
                    f"{path}:{lineno}: more than one '# expect error:'")
            error_text = m.group(1)
            continue
        m = _CLASS.search(line)
        if m:
            error_class = m.group(1)
            continue
        m = _SYNTAX.search(line)
        if m:
            syntax_line = int(m.group(1))
            continue
        if _DELIB.search(line):
            deliberate = True
            continue
        m = _FLAGS.search(line)
        if m:
            if flags is not None:
                raise ExpectationFormatError(
                    f"{path}:{lineno}: more than one '# flags:'")
            flags = tuple(m.group(1).split())
            if not flags or not m.group(1).startswith(" "):
                raise ExpectationFormatError(
                    f"{path}:{lineno}: malformed annotation: {line.strip()!r}")
            continue
        if "# expect" in line:
            raise ExpectationFormatError(
                f"{path}:{lineno}: malformed annotation: {line.strip()!r}")

    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)
    if "deliberate" in parts[:-1]:
        deliberate = True

    if error_text is not None and "{DIR}" in error_text:
        error_text = error_text.replace(
            "{DIR}", os.path.dirname(os.path.abspath(path)))

    if syntax_line is not None and stdout:
        raise ExpectationFormatError(
            f"{path}: a syntax-error program cannot expect output")
    if error_class is not None and error_text is None:
        raise ExpectationFormatError(
            f"{path}: '# expect class:' without '# expect error:'")

    return Expectation(stdout, error_text, error_class, syntax_line,
                       deliberate, flags or ())


def deliberate_refs(path: str) -> List[str]:
    """The spec items named by ``# deliberate: ...`` comments in *path*."""
    return [m.group(1).strip() for m in map(_DELIB.search, _lines(path)) if m]
