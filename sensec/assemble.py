"""The assembler: symbolic instructions with Labels -> code bytes, max stack depth and position table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from sensevm.decode import encode
from sensevm.errors import Pos, NO_POS
from sensevm.opcodes import JUMPS, Op, Operand, POPS, PUSHES, TERMINATORS


class Label:
    """A jump destination; codegen never sees a byte offset."""

    __slots__ = ("name",)

    def __init__(self, name: str = ""):
        self.name = name

    def __repr__(self) -> str:
        return f"<Label {self.name} {id(self):x}>"


@dataclass(frozen=True, slots=True)
class Instr:
    op: Op
    args: tuple
    pos: Pos = NO_POS


# Instructions that name a label: the only ones encoded again once every label has its offset.
_HAS_TARGET = frozenset(op for op in Op if Operand.TARGET in op.operands)

# Per opcode, indexed by its value (a list index, where a dict key would hash the enum member
# in Python on every lookup): (jumps, terminates, pops, pushes) for _max_stack.
_EFFECT = [None] * 256
for _op in Op:
    _EFFECT[_op] = (_op in JUMPS, _op in TERMINATORS, POPS[_op], PUSHES[_op])
del _op


class AssemblyError(Exception):
    """A bug in codegen (an unplaced label, an inconsistent stack), never a user error."""


def _encode_unresolved(ins: Instr) -> bytes:
    """The instruction's bytes with 0 for every label (a TARGET has a fixed width)."""
    return encode(ins.op, [0 if isinstance(a, Label) else a for a in ins.args])


def assemble(items: list) -> tuple[bytes, int, tuple[tuple[int, int, int], ...]]:
    """Resolve labels, encode, and compute the max stack depth along every path.

    Returns ``(code, max_stack, positions)``. A TARGET operand has a fixed width, so one pass
    assigns every offset.
    """
    offsets: dict[Label, int] = {}
    instrs: list[tuple[int, Instr]] = []
    encoded: list[bytes] = []
    offset = 0
    for item in items:
        if isinstance(item, Label):
            if item in offsets:
                raise AssemblyError(f"label {item!r} placed twice")
            offsets[item] = offset
        else:
            data = _encode_unresolved(item)
            instrs.append((offset, item))
            encoded.append(data)
            offset += len(data)

    code = bytearray()
    positions = []
    for (off, ins), data in zip(instrs, encoded):
        positions.append((off, ins.pos.line, ins.pos.col))
        if ins.op not in _HAS_TARGET:   # no label operand: the first encoding is final
            code += data
            continue
        args = []
        for kind, a in zip(ins.op.operands, ins.args):
            if kind is Operand.TARGET:
                if a not in offsets:
                    raise AssemblyError(f"{ins.op.name} jumps to an unplaced label {a!r}")
                args.append(offsets[a])
            else:
                args.append(a)
        code += encode(ins.op, args)
    return bytes(code), _max_stack(instrs, offsets), tuple(positions)


def _max_stack(instrs, offsets) -> int:
    """Walk the control-flow graph with the opcode table's stack effects (as the verifier will)."""
    if not instrs:
        return 0
    index_at = {off: i for i, (off, _) in enumerate(instrs)}
    depth_at: list[Optional[int]] = [None] * len(instrs)
    work = [(0, 0)]
    best = 0
    while work:
        i, depth = work.pop()
        while i < len(instrs):
            if depth_at[i] is not None:
                if depth_at[i] != depth:
                    raise AssemblyError(f"inconsistent stack depth at instruction {i}")
                break
            depth_at[i] = depth
            off, ins = instrs[i]
            a = ins.args[0] if ins.args and not isinstance(ins.args[0], Label) else 0
            b = ins.args[1] if len(ins.args) > 1 and not isinstance(ins.args[1], Label) else 0
            jumps, terminates, pops_of, pushes_of = _EFFECT[ins.op]
            if jumps:
                target = next(x for k, x in zip(ins.op.operands, ins.args) if k is Operand.TARGET)
                pops, pushes = ins.op.branch
                branch_depth = depth - pops + pushes
                best = max(best, branch_depth)
                work.append((index_at[offsets[target]] if offsets[target] in index_at
                             else len(instrs), branch_depth))
            if terminates:
                break
            depth = depth - pops_of(a, b) + pushes_of(a, b)
            if depth < 0:
                raise AssemblyError(f"stack underflow at instruction {i} ({ins.op.name})")
            best = max(best, depth)
            i += 1
    return best
