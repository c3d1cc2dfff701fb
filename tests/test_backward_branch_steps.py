"""A backward conditional jump is a step (docs/limits.md): with a step limit, a loop made of one
(which the compiler never emits, but a hand-made .snb may hold) ends in the limit error on
both tiers, not an internal error."""

from __future__ import annotations

import dataclasses
import io

import pytest

from sensec.driver import compile_source
from sensevm.base.errors import SenseLimitError
from sensevm.bytecode.decode import encode
from sensevm.bytecode.opcodes import Op
from sensevm.bytecode.snb import dump
from sensevm.bytecode.verify import load_verified
from sensevm.runtime.vm import VM


def spinning_program():
    """The entry code starts with ``0: LOAD_FALSE; POP_JUMP_IF_FALSE 0``: forever."""
    program = compile_source('print("never")\n', "spin.sns")
    entry = program.entry
    code = program.codes[entry]
    prefix = encode(Op.LOAD_FALSE, ()) + encode(Op.POP_JUMP_IF_FALSE, (0,))
    shifted = tuple((off + len(prefix), line, col) for off, line, col in code.positions)
    codes = list(program.codes)
    codes[entry] = dataclasses.replace(code, code=prefix + code.code,
                                       positions=((0, 1, 1),) + shifted,
                                       max_stack=max(code.max_stack, 1))
    return dataclasses.replace(program, codes=tuple(codes))


@pytest.mark.parametrize("tier", ["1", "2"])
def test_a_backward_conditional_jump_counts_as_a_step(tier):
    verified = load_verified(dump(spinning_program()))
    out = io.StringIO()
    with pytest.raises(SenseLimitError, match="step limit exceeded"):
        VM(verified, stdout=out, tier=tier, max_steps=1_000).run()
    assert out.getvalue() == ""
