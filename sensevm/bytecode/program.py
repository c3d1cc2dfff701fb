"""The in-memory program: CodeObject, Program, module and source tables, and the line table codec."""

from __future__ import annotations

from sensevm.base.errors import Pos, NO_POS
from sensevm.base.record import record
from sensevm.bytecode.opcodes import int_enum


# How deeply an annotation's type arguments may nest (``Int`` is 0, ``Array<Int>`` 1): the VM
# parses and checks annotations recursively, so the verifier refuses deeper ones, and the
# compiler never makes them (docs/limits.md).
MAX_ANNOTATION_NESTING = 100


@int_enum
class CodeKind:
    MODULE = 0      # a file's top level
    FUNCTION = 1    # a def
    ACTION_BODY = 2 # an action's body: entered only by ACTION_COMMIT
    ROLLBACK = 3    # a reversible action's rollback block: entered only by ACTION_ROLLBACK
    TOOL_BODY = 4   # a tool's body: entered only by a tool call, after its capability check
    AGENT_BODY = 5  # an agent's body: entered only by start()


@record
class CodeObject:
    """One compiled body. ``positions`` holds ``(offset, line, col)`` for every instruction start."""

    name: str
    kind: CodeKind
    source: int                                  # index into Program.sources
    params: tuple[str, ...] = ()
    param_types: tuple[str | None, ...] = ()  # annotation text per parameter, or None
    return_type: str | None = None
    max_stack: int = 0
    code: bytes = b""
    positions: tuple[tuple[int, int, int], ...] = ()

    def position_at(self, offset: int) -> Pos:
        """The source position of the instruction starting at (or covering) ``offset``."""
        from bisect import bisect_right      # here: only an error or a trace looks a position up
        i = bisect_right(self.positions, (offset, float("inf"), float("inf"))) - 1
        if i < 0:
            return NO_POS
        _, line, col = self.positions[i]
        return Pos(line, col)


@record
class Source:
    """A source file the program was compiled from (kept for error carets)."""
    path: str
    text: str


@record
class ModuleEntry:
    """A module that an ``import`` names, resolved at compile time.

    ``code`` is -1 when the file did not exist (or did not compile): the import then fails
    with ``module not found`` (or the compile error) when, and only if, it runs.
    """
    name: str        # binding name: the file name without extension
    rel: str         # the path as the import wrote it, resolved to a relative file path
    path: str        # absolute path
    code: int = -1
    # A module that exists but does not compile: as in the reference, the error surfaces when
    # the import runs (``sensevm run``); ``sensec build`` refuses such a program instead.
    error: str | None = None
    error_line: int = 0
    error_col: int = 0


@record
class ActionDecl:
    """A declared action, as the manifest records it (parameters live on the body's code object)."""
    name: str
    reversible: bool
    capability: str | None    # the one capability it requires, if any
    approval: bool               # `requires approval`
    body: int                    # code index, kind ACTION_BODY
    rollback: int = -1           # code index, kind ROLLBACK; -1 for an irreversible action
    immediate: bool = False      # `irreversible immediate`: fires inside a session, not queued
    sends: bool = False          # declared `sends`: outgoing whatever its capability (second look)
    roles: tuple = ()            # (param, role) second-look role overrides

    @property
    def kind(self) -> str:
        if self.reversible:
            return "reversible"
        return "irreversible immediate" if self.immediate else "irreversible"


@record
class ToolDecl:
    """A declared tool, as the manifest records it (parameters live on the body's code object)."""
    name: str
    capability: str | None
    description: str | None
    is_async: bool
    body: int                    # code index, kind TOOL_BODY
    trusted: bool = False        # `trusted tool`: results vouch as records (second look)


@record
class AgentDecl:
    """A declared agent, as the manifest records it."""
    name: str
    is_async: bool
    doc: str | None
    body: int                    # code index, kind AGENT_BODY


@record
class Program:
    strings: tuple[str, ...] = ()
    constants: tuple = ()                # None, bool, int, float or str
    codes: tuple[CodeObject, ...] = ()
    modules: tuple[ModuleEntry, ...] = ()
    sources: tuple[Source, ...] = ()
    actions: tuple[ActionDecl, ...] = ()  # the manifest: declared actions ...
    tools: tuple[ToolDecl, ...] = ()      # ... declared tools ...
    agents: tuple[AgentDecl, ...] = ()    # ... and declared agents
    entry: int = 0                       # index of the main module's code object
    source_hash: bytes = bytes(32)       # SHA-256 of the main source file
    flags: int = 0


# ----------------------------------------------------------------------------- varints and line tables

def write_uvarint(out: bytearray, n: int) -> None:
    if n < 0:
        raise ValueError("negative value for an unsigned varint")
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def zigzag(n: int) -> int:
    return n * 2 if n >= 0 else -n * 2 - 1


def unzigzag(n: int) -> int:
    return n >> 1 if not n & 1 else -((n + 1) >> 1)


def encode_positions(positions) -> bytes:
    """Delta-encode ``(offset, line, col)`` triples: offset delta, zigzag line delta, column."""
    out = bytearray()
    write_uvarint(out, len(positions))
    prev_off, prev_line = 0, 0
    for off, line, col in positions:
        delta, zline = off - prev_off, zigzag(line - prev_line)
        if 0 <= delta < 0x80 and zline < 0x80 and 0 <= col < 0x80:
            out.append(delta)       # the usual case, three one-byte varints, inline
            out.append(zline)
            out.append(col)
        else:
            write_uvarint(out, delta)
            write_uvarint(out, zline)
            write_uvarint(out, col)
        prev_off, prev_line = off, line
    return bytes(out)
