"""Hand-made bytecode cannot reach an action body except through ACTION_COMMIT / ACTION_ROLLBACK.

Each test compiles a real program, then forges the Program the way an attacker editing a .snb
would (a closure over the body, a module entry or the entry point aimed at it, a rollback block
on an irreversible action, a body claimed twice or by nobody), writes it with dump(), and checks
that loading refuses it before anything runs, naming the offending code and offset.
"""

from __future__ import annotations

import dataclasses

import pytest

from sensec.driver import compile_source
from sensevm.bytecode.decode import encode
from sensevm.base.errors import VerifyError
from sensevm.bytecode.opcodes import Op
from sensevm.bytecode.program import CodeKind, ModuleEntry
from sensevm.bytecode.snb import dump
from sensevm.bytecode.verify import load_verified

SOURCE = '''irreversible action wire(amount: Int) requires bank.transfer:
    print("wired", amount)
reversible action hold(n: Int):
    print("held", n)
rollback:
    print("released", n)
policy: deny bank.transfer
print("start")
'''


def base():
    program = compile_source(SOURCE, "forged.sns")
    load_verified(dump(program))                      # the honest program is fine
    wire = next(a for a in program.actions if a.name == "wire")
    hold = next(a for a in program.actions if a.name == "hold")
    return program, wire, hold


def with_code(program, index, **changes):
    codes = list(program.codes)
    codes[index] = dataclasses.replace(codes[index], **changes)
    return dataclasses.replace(program, codes=tuple(codes))


def prepend(program, index, instructions):
    """Put instructions at the start of code ``index`` (a straight-line prefix, then the old code)."""
    code = program.codes[index]
    prefix = b"".join(encode(op, args) for op, args in instructions)
    shifted = tuple((off + len(prefix), line, col) for off, line, col in code.positions)
    return with_code(program, index, code=prefix + code.code,
                     positions=((0, 1, 1),) + shifted, max_stack=code.max_stack + 2)


def refused(program) -> VerifyError:
    with pytest.raises(VerifyError) as info:
        load_verified(dump(program))
    return info.value


def test_a_closure_over_an_action_body_is_refused():
    program, wire, _ = base()
    forged = prepend(program, program.entry, [(Op.MAKE_FUNCTION, (wire.body,)),
                                              (Op.CALL, (0,)), (Op.POP, ())])
    err = refused(forged)
    assert (err.code_name, err.offset, err.opname) == ("<module>", 0, "MAKE_FUNCTION")
    assert "is an action body, not a function" in err.message


def test_a_closure_over_a_rollback_block_is_refused():
    program, _, hold = base()
    forged = prepend(program, program.entry, [(Op.MAKE_FUNCTION, (hold.rollback,)),
                                              (Op.CALL, (0,)), (Op.POP, ())])
    err = refused(forged)
    assert err.offset == 0 and "is a rollback block, not a function" in err.message


def test_a_body_relabelled_as_a_function_is_refused():
    program, wire, _ = base()
    forged = with_code(program, wire.body, kind=CodeKind.FUNCTION)
    err = refused(forged)
    assert "has body code" in err.message and "which is a function" in err.message


def test_the_entry_point_cannot_be_an_action_body():
    program, wire, _ = base()
    err = refused(dataclasses.replace(program, entry=wire.body))
    assert "is not a module" in err.message


def test_a_module_entry_cannot_run_an_action_body():
    program, wire, _ = base()
    forged = dataclasses.replace(program, modules=program.modules + (
        ModuleEntry("evil", "evil.sns", "/evil.sns", wire.body),))
    err = refused(forged)
    assert "which is not a module" in err.message


def test_an_irreversible_action_cannot_gain_a_rollback_block():
    program, wire, hold = base()
    actions = tuple(dataclasses.replace(a, rollback=hold.rollback) if a is wire else
                    dataclasses.replace(a, reversible=False) if a is hold else a
                    for a in program.actions)
    err = refused(dataclasses.replace(program, actions=actions))
    assert "irreversible but has a rollback block" in err.message


def test_a_body_claimed_by_two_actions_is_refused():
    program, wire, hold = base()
    actions = tuple(dataclasses.replace(a, body=wire.body) if a is hold else a
                    for a in program.actions)
    err = refused(dataclasses.replace(program, actions=actions))
    assert "is claimed by actions" in err.message


def test_a_body_no_action_declares_is_refused():
    program, wire, _ = base()
    actions = tuple(a for a in program.actions if a is not wire)
    # Keep the MAKE_ACTION indices valid by dropping the declaration's use as well.
    err = refused(dataclasses.replace(program, actions=actions))
    assert "no action declares" in err.message or "out of range" in err.message


def test_removing_the_capability_requirement_is_visible_in_the_manifest():
    # The manifest is what a reviewer reads; the verifier cannot know intent, but the
    # disassembler shows it, and the program still runs its checks from the manifest.
    program, wire, _ = base()
    from sensevm.bytecode.disasm import disassemble
    assert "irreversible action wire" in disassemble(program)


def test_honest_lifecycle_still_checks_policy_at_run_time(tmp_path):
    import io
    from sensevm.runtime.vm import VM
    from sensevm.base.errors import SensePolicyError
    program = compile_source(SOURCE + "w = wire(5)\nw.verify()\n", "p.sns")
    out = io.StringIO()
    with pytest.raises(SensePolicyError):
        VM(load_verified(dump(program)), stdout=out).run()
    assert "wired" not in out.getvalue()


TOOL_SOURCE = '''tool transfer(amount: Int) returns String requires bank.transfer:
    return "sent " + str(amount)
policy: deny bank.transfer
print("start")
'''


def test_a_closure_over_a_tool_body_is_refused():
    # A tool body entered as a plain function would skip the call-site capability check.
    program = compile_source(TOOL_SOURCE, "tool.sns")
    load_verified(dump(program))
    body = program.tools[0].body
    forged = prepend(program, program.entry, [(Op.MAKE_FUNCTION, (body,)),
                                              (Op.CALL, (0,)), (Op.POP, ())])
    err = refused(forged)
    assert err.offset == 0 and err.opname == "MAKE_FUNCTION"
    assert "is a tool body, not a function" in err.message


def test_a_tool_body_no_tool_declares_is_refused():
    program = compile_source(TOOL_SOURCE, "tool.sns")
    err = refused(dataclasses.replace(program, tools=()))
    assert "tool body that no tool declares" in err.message or "out of range" in err.message


def test_the_tool_capability_is_checked_at_every_call(tmp_path):
    import io
    from sensevm.base.errors import SensePolicyError
    from sensevm.runtime.vm import VM
    program = compile_source(TOOL_SOURCE + "print(transfer(5))\n", "t.sns")
    out = io.StringIO()
    vm = VM(load_verified(dump(program)), stdout=out)
    with pytest.raises(SensePolicyError):
        vm.run()
    assert "sent" not in out.getvalue()
    assert vm.audit.lines() == ["[line 5] tool 'transfer' -> denied (capability 'bank.transfer' "
                                "denied by policy)"]
