"""The assembler: labels resolved to byte offsets, the max stack depth, and codegen bugs caught."""

from __future__ import annotations

import pytest

from sensec.assemble import AssemblyError, Instr, Label, assemble
from sensevm.bytecode.decode import decode, encode
from sensevm.base.errors import Pos
from sensevm.bytecode.opcodes import Op

P = Pos(3, 7)


def I(op, *args):
    return Instr(op, args, P)


def test_labels_become_the_offsets_of_the_next_instruction():
    top, done = Label("top"), Label("done")
    code, max_stack, positions = assemble([
        top, I(Op.LOAD_NAME, 300), I(Op.POP_JUMP_IF_FALSE, done),   # a two-byte varint operand
        I(Op.JUMP, top),
        done, I(Op.LOAD_NIL), I(Op.RETURN)])
    listing = [(ins.offset, ins.op, ins.args) for ins in decode(code)]
    assert listing == [(0, Op.LOAD_NAME, (300,)), (3, Op.POP_JUMP_IF_FALSE, (13,)),
                       (8, Op.JUMP, (0,)), (13, Op.LOAD_NIL, ()), (14, Op.RETURN, ())]
    assert code == b"".join(encode(op, args) for _, op, args in listing)
    assert positions == tuple((off, 3, 7) for off, _, _ in listing)
    assert max_stack == 1


def test_max_stack_follows_both_sides_of_a_branch():
    other, end = Label(), Label()
    _, max_stack, _ = assemble([
        I(Op.LOAD_TRUE), I(Op.JUMP_IF_TRUE_OR_POP, other),         # branch keeps the value
        I(Op.LOAD_CONST, 0), I(Op.LOAD_CONST, 0), I(Op.LOAD_CONST, 0), I(Op.BUILD_ARRAY, 3),
        other, I(Op.LOAD_CONST, 0), I(Op.LOAD_CONST, 0), I(Op.CALL, 1),
        I(Op.POP), I(Op.LOAD_NIL), I(Op.RETURN), end])
    assert max_stack == 3


def test_a_label_after_the_last_instruction_is_allowed():
    end = Label()
    code, max_stack, _ = assemble([I(Op.LOAD_NIL), I(Op.RETURN), end])
    assert len(code) == 2 and max_stack == 1


@pytest.mark.parametrize("items, message", [
    (lambda L: [I(Op.JUMP, L)], "JUMP jumps to an unplaced label"),
    (lambda L: [L, I(Op.LOAD_NIL), L, I(Op.RETURN)], "placed twice"),
    (lambda L: [I(Op.POP), I(Op.RETURN)], "stack underflow at instruction 0 (POP)"),
    (lambda L: [I(Op.LOAD_TRUE), I(Op.POP_JUMP_IF_TRUE, L), I(Op.LOAD_NIL), L, I(Op.RETURN)],
     "inconsistent stack depth at instruction 3"),
    (lambda L: [I(Op.LOAD_CONST), I(Op.RETURN)], "LOAD_CONST takes 1 operand(s), got 0"),
])
def test_codegen_bugs_are_assembly_errors(items, message):
    with pytest.raises(AssemblyError, match=message.replace("(", r"\(").replace(")", r"\)")):
        assemble(items(Label("L")))
