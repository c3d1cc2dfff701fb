"""The error hierarchy of the language and the toolchain; every error carries a position."""

from __future__ import annotations


class Pos:
    """A source position: 1-based line and column. Line 0 means "no location" (synthetic code).

    A value: compared and hashed by (line, col), never changed after construction. Written out
    by hand rather than as a dataclass because every ``sensevm`` start imports this module, and
    ``dataclasses`` (which imports ``inspect``) costs more than running a small program.
    """

    __slots__ = ("line", "col")
    __match_args__ = ("line", "col")

    def __init__(self, line: int, col: int):
        # The slots' own setters (bound below): the compiler makes one Pos per node.
        _set_line(self, line)
        _set_col(self, col)

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot assign to field '{name}'")

    __delattr__ = __setattr__

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return self.line == other.line and self.col == other.col
        return NotImplemented

    def __hash__(self):
        return hash((self.line, self.col))

    def __repr__(self) -> str:
        return f"Pos(line={self.line!r}, col={self.col!r})"

    def __str__(self) -> str:
        return f"{self.line}:{self.col}"

    def __reduce__(self):
        return (Pos, (self.line, self.col))


_set_line = Pos.line.__set__
_set_col = Pos.col.__set__

NO_POS = Pos(0, 0)


class SenseError(Exception):
    """Base of every language-level error.

    ``message`` is the bare text. ``located`` says whether the reference interpreter shows the
    error as ``[line L] message``: errors raised by a builtin's own body do not (spec 9.1), errors
    detected by the evaluator do. ``pos`` is where the error was detected, filled in by the
    boundary that knows it (lexer, parser, the VM's dispatch loop); it is used for our own
    ``FILE:LINE:COL`` rendering even when the reference would show no line.
    """

    kind = "SenseError"
    # The provenance of the values the message quotes (a page's text in an assert, a tool's
    # number in "cannot convert ..."): whatever shows the message to the program (audit_log())
    # gives it these labels, so that no label is washed off through an error.
    origins: frozenset = frozenset()

    # A line for the person at the terminal under the message (diagnostics.render), never part
    # of the message a program sees (e.message, a test's report): what this VM offers beyond
    # the reference, whose text the message keeps.
    note: str = ""

    # The Sense frames an uncaught error left, innermost first: (path, line, what ran there),
    # for the call stack printed under it (diagnostics.render_stack). Filled in as it unwinds.
    frames: tuple = ()

    def left(self, path, line: int, name: str) -> None:
        """Record that the error left a frame running ``name`` at ``path``:``line``."""
        if type(self.frames) is tuple:
            self.frames = list(self.frames)
        self.frames.append((path, line, name))

    def quoting(self, origins) -> "SenseError":
        """This error, its message now known to quote values of ``origins``."""
        if origins:
            self.origins = self.origins | origins
        return self

    def __init__(self, message: str, pos: Pos | None = None, *, located: bool = True,
                 path: str | None = None):
        super().__init__(message)
        self.message = message
        self.pos = pos
        self.located = located
        self.path = path

    def with_pos(self, pos: Pos, path: str | None = None) -> "SenseError":
        """Fill in the position (and file) if nobody nearer to the problem did."""
        if self.pos is None:
            self.pos = pos
        if self.path is None and path is not None:
            self.path = path
        return self

    @property
    def text(self) -> str:
        """The reference's rendering: ``[line L] message`` when located, else the message."""
        if self.located and self.pos is not None and self.pos.line > 0:
            return f"[line {self.pos.line}] {self.message}"
        return self.message

    def __str__(self) -> str:
        return self.text


class SenseSyntaxError(SenseError):
    kind = "SenseSyntaxError"


class SenseNameError(SenseError):
    kind = "SenseNameError"


class SenseTypeError(SenseError):
    kind = "SenseTypeError"


class SenseRuntimeError(SenseError):
    kind = "SenseRuntimeError"


class SenseImportError(SenseError):
    kind = "SenseImportError"


class SensePolicyError(SenseError):
    kind = "SensePolicyError"


class SenseApprovalError(SenseError):
    kind = "SenseApprovalError"


class SenseSessionError(SenseError):
    """A session verb refused: the wrong state, or a stale or foreign manifest hash."""

    kind = "SenseSessionError"


class SenseRecursionError(SenseRuntimeError):
    """Too many nested Sense calls; the reference prints it without a line."""

    kind = "SenseRuntimeError"

    def __init__(self, pos: Pos | None = None):
        super().__init__("maximum recursion depth exceeded", pos, located=False)


class SenseLimitError(SenseError):
    """A resource limit of the run was reached (docs/limits.md): steps, time, string or array
    size. It stops the program: test blocks do not catch it, and ``sensevm run`` exits with
    status 4 (``limits.LIMIT_EXIT``). ``limit`` names the limit: steps, timeout, string, array,
    workers, digits (an Int conversion refused without --timeout).
    The recursion limit keeps the reference's SenseRecursionError (exit 1, catchable)."""

    kind = "SenseLimitError"

    def __init__(self, message: str, limit: str, pos: Pos | None = None, *,
                 located: bool = True):
        super().__init__(message, pos, located=located)
        self.limit = limit


# The classes a program names in ``except CLASS:`` (EXTENSIONS.md E4), by name. A handler for a
# class catches its subclasses too (SenseError catches them all). SenseLimitError is not among
# them: a resource limit ends the run, and no handler or finally block runs on its way out.
CATCHABLE = {cls.kind: cls for cls in (
    SenseError, SenseSyntaxError, SenseNameError, SenseTypeError, SenseRuntimeError,
    SenseImportError, SensePolicyError, SenseApprovalError, SenseSessionError)}
UNCATCHABLE = frozenset({"SenseLimitError"})


class CompileErrors(SenseSyntaxError):
    """Several syntax errors found in one compile (``sensec check`` reports them all)."""

    def __init__(self, errors: list[SenseError]):
        first = errors[0]
        super().__init__(first.message, first.pos, path=first.path)
        self.errors = errors


# ---------------------------------------------------------------------------------------------
# Toolchain errors: about files and bytecode, not about Sense programs.

class SnbFormatError(Exception):
    """A malformed .snb file. ``offset`` is the byte offset where reading failed."""

    def __init__(self, offset: int, message: str):
        super().__init__(f"offset {offset}: {message}")
        self.offset = offset
        self.message = message


class VerifyError(Exception):
    """Bytecode that the verifier rejects: names the code object, byte offset and opcode."""

    def __init__(self, code_name: str, offset: int, opname: str | None, message: str):
        where = f"{code_name}+{offset}" + (f" ({opname})" if opname else "")
        super().__init__(f"{where}: {message}")
        self.code_name = code_name
        self.offset = offset
        self.opname = opname
        self.message = message
