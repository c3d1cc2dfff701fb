"""The one decoder: code bytes -> Instructions, shared by the verifier, the VM loader and the disassembler."""

from __future__ import annotations

from collections import namedtuple

from sensevm.bytecode.opcodes import OPS, Op, Operand
from sensevm.bytecode.program import write_uvarint

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing would slow every start
    from typing import Iterator


# offset: byte offset of the opcode; op: the Op; args: decoded operands, in the row's order;
# size: bytes, opcode included. (collections.namedtuple, not typing.NamedTuple: no typing import.)
class Instruction(namedtuple("Instruction", "offset op args size")):
    __slots__ = ()

    @property
    def next_offset(self) -> int:
        return self.offset + self.size


class DecodeError(Exception):
    """Bytes that are not an instruction stream; ``offset`` is where decoding failed."""

    def __init__(self, offset: int, message: str):
        super().__init__(message)
        self.offset = offset
        self.message = message


MAX_VARINT_BYTES = 5     # operands are < 2**35; more bytes than that is malformed


def decode(code: bytes) -> Iterator[Instruction]:
    pos, end = 0, len(code)
    while pos < end:
        ins = decode_at(code, pos)
        yield ins
        pos += ins.size


def decode_at(code: bytes, start: int) -> Instruction:
    """The instruction at offset ``start`` (DecodeError if the bytes there are not one)."""
    pos, end = start, len(code)
    op = OPS.get(code[pos])
    if op is None:
        raise DecodeError(start, f"unknown opcode 0x{code[pos]:02x}")
    pos += 1
    args = []
    for kind in op.operands:
        if kind is Operand.TARGET:
            if pos + 4 > end:
                raise DecodeError(start, f"{op.name}: truncated jump target")
            args.append(int.from_bytes(code[pos:pos + 4], "little"))
            pos += 4
        else:
            value, shift, count = 0, 0, 0
            while True:
                if pos >= end:
                    raise DecodeError(start, f"{op.name}: truncated operand")
                byte = code[pos]
                pos += 1
                count += 1
                if count > MAX_VARINT_BYTES:
                    raise DecodeError(start, f"{op.name}: operand varint too long")
                value |= (byte & 0x7F) << shift
                shift += 7
                if not byte & 0x80:
                    break
            args.append(value)
    return Instruction(start, op, tuple(args), pos - start)


def encode(op: Op, args) -> bytes:
    """The inverse of ``decode`` for one instruction (used by the assembler and tests)."""
    # _value_, not .value (an enum descriptor), and one-byte operands inline: the assembler
    # encodes every instruction of a program through here.
    out = bytearray((op._value_,))
    if len(args) != len(op.operands):
        raise ValueError(f"{op.name} takes {len(op.operands)} operand(s), got {len(args)}")
    for kind, value in zip(op.operands, args):
        if kind is Operand.TARGET:
            out += int(value).to_bytes(4, "little")
        elif 0 <= value < 0x80:
            out.append(value)
        else:
            write_uvarint(out, value)
    return bytes(out)
