"""The assembler: symbolic instructions with Labels -> code bytes, max stack depth and position table."""

from __future__ import annotations

from collections import namedtuple
from typing import Optional

from sensevm.bytecode.opcodes import EFFECTS, SHAPES, Operand, POPS, PUSHES
from sensevm.bytecode.program import write_uvarint


class Label:
    """A jump destination; codegen never sees a byte offset."""

    __slots__ = ("name",)

    def __init__(self, name: str = ""):
        self.name = name

    def __repr__(self) -> str:
        return f"<Label {self.name} {id(self):x}>"


class Instr(namedtuple("Instr", "op args pos")):
    """One symbolic instruction: an Op, its operands (a Label where the row has a TARGET), and
    the source position it is reported at."""

    __slots__ = ()


# Instr(op, args, pos) without the Python-level __new__ namedtuple gives it: codegen makes one
# per instruction of the program.
make_instr = tuple.__new__


class AssemblyError(Exception):
    """A bug in codegen (an unplaced label, an inconsistent stack), never a user error."""


def assemble(items: list) -> tuple[bytes, int, tuple[tuple[int, int, int], ...]]:
    """Resolve labels, encode, and compute the max stack depth along every path.

    ``items`` are Instrs and Labels (a Label marks the next instruction). Returns
    ``(code, max_stack, positions)``. A TARGET operand has a fixed width, so one pass assigns
    every offset; the jumps' four bytes are filled in once every label is placed.
    """
    placed: dict[Label, int] = {}   # label -> index of the instruction it marks
    instrs: list[Instr] = []
    starts: list[int] = []          # byte offset of each instruction
    positions = []
    fixups = []                     # (where the TARGET's 4 bytes go, its label, the Op)
    code = bytearray()
    append = code.append
    for item in items:
        if item.__class__ is Label:
            if item in placed:
                raise AssemblyError(f"label {item!r} placed twice")
            placed[item] = len(instrs)
            continue
        op, args, pos = item
        off = len(code)
        starts.append(off)
        instrs.append(item)
        positions.append((off, pos.line, pos.col))
        shape = SHAPES[op]
        if shape == 0 and not args:
            append(op)
            continue
        if shape == 1 and len(args) == 1 and 0 <= args[0] < 0x80:
            append(op)
            append(args[0])
            continue
        kinds = op.operands
        if len(args) != len(kinds):
            raise AssemblyError(f"{op.name} takes {len(kinds)} operand(s), got {len(args)}")
        append(op)
        for kind, value in zip(kinds, args):
            if kind is Operand.TARGET:
                fixups.append((len(code), value, op))
                code += b"\0\0\0\0"
            elif 0 <= value < 0x80:
                append(value)
            else:
                write_uvarint(code, value)
    starts.append(len(code))        # where a label after the last instruction stands
    for at, label, op in fixups:
        index = placed.get(label)
        if index is None:
            raise AssemblyError(f"{op.name} jumps to an unplaced label {label!r}")
        code[at:at + 4] = starts[index].to_bytes(4, "little")
    return bytes(code), _max_stack(instrs, placed), tuple(positions)


def _max_stack(instrs: list, placed: dict) -> int:
    """Walk the control-flow graph with the opcode table's stack effects (as the verifier will),
    following fall-through chains and queueing only branch targets."""
    n = len(instrs)
    if not n:
        return 0
    depth_at: list[Optional[int]] = [None] * n
    work = [(0, 0)]
    best = 0
    while work:
        i, depth = work.pop()
        while i < n:
            seen = depth_at[i]
            if seen is not None:
                if seen != depth:
                    raise AssemblyError(f"inconsistent stack depth at instruction {i}")
                break
            depth_at[i] = depth
            op, args, _ = instrs[i]
            pops, pushes, b_pops, b_pushes, terminates, target = EFFECTS[op]
            if pops is None:
                a = args[0] if args else 0
                b = args[1] if len(args) > 1 else 0
                pops, pushes = POPS[op](a, b), PUSHES[op](a, b)
            if b_pops is not None:
                branch_depth = depth - b_pops + b_pushes
                if branch_depth > best:
                    best = branch_depth
                # A label placed after the last instruction marks index n: nothing runs there.
                work.append((placed[args[target]], branch_depth))
            if terminates:
                break
            depth = depth - pops + pushes
            if depth < 0:
                raise AssemblyError(f"stack underflow at instruction {i} ({op.name})")
            if depth > best:
                best = depth
            i += 1
    return best
