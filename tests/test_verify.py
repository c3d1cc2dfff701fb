"""The verifier: a valid program passes; each kind of bad bytecode or bad table is refused with its exact message."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sensevm.bytecode import snb
from sensevm.bytecode.decode import encode
from sensevm.base.errors import VerifyError
from sensevm.bytecode.opcodes import Op, Operand
from sensevm.bytecode.program import CodeKind, CodeObject, ModuleEntry, Program, Source
from sensevm.bytecode.verify import (VerifiedCode, VerifiedProgram, _CodeVerifier, _FastVerifier,
                                     annotation_ok, load_verified, verify)


def asm(*items) -> bytes:
    """Assemble ``(Op, *args)`` tuples; a str item defines a label, a str TARGET operand uses one."""
    labels, pos = {}, 0
    for item in items:
        if isinstance(item, str):
            labels[item] = pos
        else:
            op, *args = item
            pos += len(encode(op, [0 if isinstance(a, str) else a for a in args]))
    return b"".join(encode(item[0], [labels[a] if isinstance(a, str) else a for a in item[1:]])
                    for item in items if not isinstance(item, str))


STRINGS = ("x", "f", "n", "Int", "Array<Int>", "Array<", "m")
CONSTANTS = (42, "a test", None, 1.5)

FUNC = CodeObject("f", CodeKind.FUNCTION, 0, ("n",), ("Int",), "Int", 1,
                  asm((Op.LOAD_NAME, 2), (Op.RETURN,)), ((0, 4, 5),))
UTIL = CodeObject("<util>", CodeKind.MODULE, 1, max_stack=1, code=asm((Op.LOAD_NIL,), (Op.RETURN,)))


def program(*items, max_stack=4, code: bytes | None = None, **changes) -> Program:
    """The entry module (code 0) assembled from ``items``, plus a function (1) and a module (2)."""
    main = CodeObject("<main>", CodeKind.MODULE, 0, max_stack=max_stack,
                      code=asm(*items) if code is None else code)
    p = Program(strings=STRINGS, constants=CONSTANTS, codes=(main, FUNC, UTIL),
                modules=(ModuleEntry("util", "util.sns", "/p/util.sns", 2),
                         ModuleEntry("gone", "gone.sns", "/p/gone.sns", -1)),
                sources=(Source("/p/main.sns", "x = 42\n"), Source("/p/util.sns", "")),
                source_hash=bytes(32))
    return replace(p, **changes)


def rejects(p: Program) -> tuple:
    with pytest.raises(VerifyError) as info:
        verify(p)
    e = info.value
    return e.code_name, e.offset, e.opname, e.message


VALID = program(
    (Op.LOAD_CONST, 0), (Op.STORE_NAME, 0),                         # x = 42
    (Op.MAKE_FUNCTION, 1), (Op.STORE_NAME, 1),                      # def f
    (Op.IMPORT, 0), (Op.IMPORT_FROM, 6), (Op.STORE_LOCAL, 6),       # from util import m
    (Op.LOAD_NAME, 0), (Op.POP_JUMP_IF_FALSE, "else"),              # if x:
    (Op.PUSH_SCOPE,), (Op.LOAD_NAME, 1), (Op.LOAD_NAME, 0), (Op.CALL, 1),
    (Op.CHECK_DECL, 2, 4), (Op.STORE_LOCAL, 2), (Op.POP_SCOPE, 1),
    (Op.JUMP, "end"),
    "else",
    (Op.LOAD_NAME, 0), (Op.JUMP_IF_TRUE_OR_POP, "or"), (Op.LOAD_CONST, 3), "or", (Op.POP,),
    "end",
    (Op.TEST_BEGIN, 1, "handler"),                                  # test "a test":
    (Op.LOAD_NAME, 0), (Op.GET_ITER,),
    "loop", (Op.FOR_ITER, "done"), (Op.STORE_LOCAL, 2), (Op.JUMP, "loop"),
    "done", (Op.TEST_END,),
    "handler",
    (Op.LOAD_CONST, 0), (Op.LOAD_CONST, 3), (Op.BUILD_ARRAY, 2), (Op.POP,),
    (Op.LOAD_NIL,), (Op.RETURN,),
    max_stack=2,
)


# ----------------------------------------------------------------------------- acceptance

def test_valid_program_passes():
    v = verify(VALID)
    assert isinstance(v, VerifiedProgram)
    assert v.program is VALID
    assert len(v.codes) == 3 and all(isinstance(c, VerifiedCode) for c in v.codes)
    main = v.codes[0]
    assert main.code is VALID.codes[0]
    assert main.max_depth == 2
    assert [ins.offset for ins in main.instructions] == sorted(main.index_of)
    assert all(main.instructions[i].offset == off for off, i in main.index_of.items())
    assert main.instructions[0].op is Op.LOAD_CONST
    assert v.codes[1].max_depth == 1 and v.entry is main


def test_load_verified_round_trip():
    v = load_verified(snb.dump(VALID))
    assert v.program == VALID


def test_verified_program_cannot_be_made_by_hand():
    with pytest.raises(TypeError, match="verify"):
        VerifiedProgram(VALID, ())
    v = verify(VALID)
    with pytest.raises(AttributeError):
        v.program = VALID


def test_max_stack_may_be_generous():
    assert verify(replace(VALID, codes=(replace(VALID.codes[0], max_stack=100),) + VALID.codes[1:]))


def test_build_map_stack_effect():
    # Two entries: four values in, one Map out; an empty literal pushes one.
    p = program((Op.LOAD_CONST, 1), (Op.LOAD_CONST, 0), (Op.LOAD_CONST, 3), (Op.LOAD_NIL,),
                (Op.BUILD_MAP, 2), (Op.BUILD_MAP, 0), (Op.POP,), (Op.RETURN,), max_stack=4)
    assert verify(p).codes[0].max_depth == 4


def test_unreachable_code_is_not_flow_checked():
    assert verify(program((Op.LOAD_NIL,), (Op.RETURN,), (Op.POP,), (Op.POP,)))


def test_labeled_call_stack_effect():
    p = program((Op.LOAD_NAME, 1), (Op.LOAD_NIL,), (Op.LOAD_NAME, 0), (Op.LOAD_NIL,),
                (Op.CALL_LABELED, 1, 1), (Op.RETURN,))
    assert verify(p).codes[0].max_depth == 4
    p = program((Op.LOAD_NAME, 1), (Op.LOAD_NAME, 0), (Op.LOAD_NIL,),
                (Op.CALL_LABELED, 1, 1), (Op.RETURN,))
    assert rejects(p) == ("<main>", 5, "CALL_LABELED", "stack underflow (needs 4, depth 3)")


@pytest.mark.parametrize("text", ["Int", "Array<Int>", "Map<String, Int>", "A<B<C>, D<E>>",
                                  "Array <Int>", "Ünï_1"])
def test_annotations_accepted(text):
    assert annotation_ok(text)


@pytest.mark.parametrize("text", ["", " Int", "Int ", "Array<", "Array<>", "<Int>", "Int>",
                                  "A,B", "A B", "1A", "A<B>C", "A<B><C>", "A<B,>", "A.B",
                                  "A<" * 5000 + "B" + ">" * 5000 + ">"])
def test_annotations_refused(text):
    assert not annotation_ok(text)


def test_deep_annotation_does_not_recurse():
    from sensevm.bytecode.program import MAX_ANNOTATION_NESTING as deepest
    assert annotation_ok("A<" * deepest + "B" + ">" * deepest)
    # Deeper, the VM's recursive parser and checker would exhaust the host stack.
    assert not annotation_ok("A<" * (deepest + 1) + "B" + ">" * (deepest + 1))
    assert not annotation_ok("A<" * 5000 + "B" + ">" * 5000)


# ----------------------------------------------------------------------------- rejections

# An annotation no compiler makes: the VM's recursive parser and checker of it would exhaust
# the host stack (an internal error) had the verifier let it through.
DEEP = "Array<" * 5000 + "Int" + ">" * 5000

REJECTIONS = [
    # name, program, (code_name, offset, opname, message)
    ("jump into an instruction",
     program((Op.LOAD_CONST, 0), (Op.JUMP, 1)),
     ("<main>", 2, "JUMP", "jump target 1 is not the start of an instruction")),
    ("jump outside the code",
     program((Op.JUMP, 1000)),
     ("<main>", 0, "JUMP", "jump target 1000 is not the start of an instruction")),
    ("jump to the end",
     program((Op.LOAD_NIL,), (Op.RETURN,), (Op.JUMP, 7)),
     ("<main>", 2, "JUMP", "jump target 7 is not the start of an instruction")),
    ("stack underflow",
     program((Op.POP,), (Op.LOAD_NIL,), (Op.RETURN,)),
     ("<main>", 0, "POP", "stack underflow (needs 1, depth 0)")),
    ("return on an empty stack",
     program((Op.RETURN,)),
     ("<main>", 0, "RETURN", "stack underflow (needs 1, depth 0)")),
    ("branch underflow",
     program((Op.JUMP_IF_TRUE_OR_POP, 0)),
     ("<main>", 0, "JUMP_IF_TRUE_OR_POP", "stack underflow (needs 1, depth 0)")),
    ("stack deeper than max_stack",
     program((Op.LOAD_NIL,), (Op.LOAD_NIL,), (Op.ADD,), (Op.RETURN,), max_stack=1),
     ("<main>", 1, "LOAD_NIL", "stack depth 2 exceeds max_stack 1")),
    ("call underflow",
     program((Op.LOAD_NAME, 1), (Op.CALL, 1), (Op.RETURN,)),
     ("<main>", 2, "CALL", "stack underflow (needs 2, depth 1)")),
    ("inconsistent stack depth at a merge",
     program((Op.LOAD_TRUE,), (Op.POP_JUMP_IF_FALSE, "join"), (Op.LOAD_NIL,),
             "join", (Op.LOAD_NIL,), (Op.RETURN,)),
     ("<main>", 6, "LOAD_NIL", "inconsistent stack depth at offset 7: 1 on this path, 0 on another")),
    ("loop that grows the stack",
     program("top", (Op.LOAD_NIL,), (Op.JUMP, "top")),
     ("<main>", 1, "JUMP", "inconsistent stack depth at offset 0: 1 on this path, 0 on another")),
    ("inconsistent scope depth at a merge",
     program((Op.LOAD_TRUE,), (Op.POP_JUMP_IF_FALSE, "join"), (Op.PUSH_SCOPE,),
             "join", (Op.LOAD_NIL,), (Op.RETURN,)),
     ("<main>", 6, "PUSH_SCOPE",
      "inconsistent scope depth at offset 7: 1 on this path, 0 on another")),
    ("test handler reached with the test still running",
     program((Op.TEST_BEGIN, 1, "handler"), (Op.JUMP, "handler"), (Op.TEST_END,),
             "handler", (Op.LOAD_NIL,), (Op.RETURN,)),
     ("<main>", 6, "JUMP", "inconsistent scope depth at offset 12: 1 on this path, 0 on another")),
    # Try handlers (EXTENSIONS.md E4): the verifier proves the running handlers at every
    # instruction, so a forged table cannot send an error anywhere unproved.
    ("TRY_BEGIN target inside an instruction",
     program((Op.TRY_BEGIN, 1), (Op.LOAD_NIL,), (Op.RETURN,)),
     ("<main>", 0, "TRY_BEGIN", "jump target 1 is not the start of an instruction")),
    ("TRY_END without TRY_BEGIN",
     program((Op.TRY_END,), (Op.LOAD_NIL,), (Op.RETURN,)),
     ("<main>", 0, "TRY_END", "TRY_END without a running try handler")),
    ("TRY_END closing a test block",
     program((Op.TEST_BEGIN, 1, "h"), (Op.TRY_END,), (Op.TEST_END,), "h", (Op.LOAD_NIL,),
             (Op.RETURN,)),
     ("<main>", 6, "TRY_END", "TRY_END without a running try handler")),
    ("TEST_END closing a try block",
     program((Op.TEST_BEGIN, 1, "h"), (Op.TRY_BEGIN, "t"), (Op.TEST_END,), "t", (Op.POP,),
             "h", (Op.LOAD_NIL,), (Op.RETURN,)),
     ("<main>", 11, "TEST_END", "TEST_END without a running test")),
    ("popping below the handler's stack depth",
     program((Op.LOAD_NIL,), (Op.TRY_BEGIN, "h"), (Op.POP,), (Op.LOAD_NIL,), (Op.TRY_END,),
             (Op.RETURN,), "h", (Op.POP,), (Op.RETURN,)),
     ("<main>", 6, "POP", "pops below the stack depth 1 of the handler that resumes at "
                          "offset 10")),
    ("leaving the handler's scope",
     program((Op.PUSH_SCOPE,), (Op.TRY_BEGIN, "h"), (Op.POP_SCOPE, 1), (Op.TRY_END,),
             (Op.LOAD_NIL,), (Op.RETURN,), "h", (Op.RETURN,)),
     ("<main>", 6, "POP_SCOPE", "POP_SCOPE 1 leaves the scope of the handler that resumes at "
                                "offset 11")),
    ("a handler running on one path only",
     program((Op.LOAD_TRUE,), (Op.POP_JUMP_IF_FALSE, "join"), (Op.TRY_BEGIN, "h"),
             "join", (Op.LOAD_NIL,), (Op.RETURN,), "h", (Op.RETURN,)),
     ("<main>", 6, "TRY_BEGIN",
      "inconsistent running handlers at offset 11: [try -> 13] on this path, [] on another")),
    ("a handler's target entered with another stack depth",
     program((Op.TRY_BEGIN, "h"), (Op.TRY_END,), "h", (Op.LOAD_NIL,), (Op.RETURN,)),
     ("<main>", 5, "TRY_END", "inconsistent stack depth at offset 6: 0 on this path, 1 on "
                              "another")),
    ("a handler's target entered with the handler still running",
     program((Op.TRY_BEGIN, "h"), (Op.LOAD_NIL,), (Op.JUMP, "h"), "h", (Op.RETURN,)),
     ("<main>", 6, "JUMP",
      "inconsistent running handlers at offset 11: [try -> 11] on this path, [] on another")),
    ("EXCEPT_JUMP naming no error class",
     program((Op.TRY_BEGIN, "h"), (Op.LOAD_NIL,), (Op.TRY_END,), (Op.RETURN,),
             "h", (Op.EXCEPT_JUMP, 0, "x"), "x", (Op.RAISE,)),
     ("<main>", 8, "EXCEPT_JUMP", "'x' is not an error class a program can catch")),
    ("EXCEPT_JUMP naming the limits, which no program catches",
     program((Op.TRY_BEGIN, "h"), (Op.LOAD_NIL,), (Op.TRY_END,), (Op.RETURN,),
             "h", (Op.EXCEPT_JUMP, 7, "x"), "x", (Op.RAISE,),
             strings=STRINGS + ("SenseLimitError",)),
     ("<main>", 8, "EXCEPT_JUMP", "'SenseLimitError' is not an error class a program can "
                                  "catch")),
    ("constant index out of range",
     program((Op.LOAD_CONST, 4), (Op.RETURN,)),
     ("<main>", 0, "LOAD_CONST", "constant index 4 out of range (4 constants)")),
    ("name index out of range",
     program((Op.LOAD_NAME, 7), (Op.RETURN,)),
     ("<main>", 0, "LOAD_NAME", "name index 7 out of range (7 strings)")),
    ("type index out of range",
     program((Op.LOAD_NIL,), (Op.CHECK_DECL, 0, 99), (Op.RETURN,)),
     ("<main>", 1, "CHECK_DECL", "type index 99 out of range (7 strings)")),
    ("bad annotation",
     program((Op.LOAD_NIL,), (Op.CHECK_DECL, 0, 5), (Op.RETURN,)),
     ("<main>", 1, "CHECK_DECL", "malformed type annotation 'Array<'")),
    ("code index out of range",
     program((Op.MAKE_FUNCTION, 3), (Op.RETURN,)),
     ("<main>", 0, "MAKE_FUNCTION", "code index 3 out of range (3 code objects)")),
    ("closure of a module body",
     program((Op.MAKE_FUNCTION, 2), (Op.RETURN,)),
     ("<main>", 0, "MAKE_FUNCTION", "code 2 (<util>) is a module body, not a function")),
    ("module index out of range",
     program((Op.IMPORT, 2), (Op.RETURN,)),
     ("<main>", 0, "IMPORT", "module index 2 out of range (2 modules)")),
    ("test name not a string",
     program((Op.TEST_BEGIN, 0, "h"), (Op.TEST_END,), "h", (Op.LOAD_NIL,), (Op.RETURN,)),
     ("<main>", 0, "TEST_BEGIN", "test name constant 0 is not a string")),
    ("falls off the end",
     program((Op.LOAD_NIL,), (Op.POP,)),
     ("<main>", 1, "POP", "control falls off the end of the code")),
    ("conditional jump at the end",
     program((Op.LOAD_TRUE,), (Op.POP_JUMP_IF_TRUE, 0)),
     ("<main>", 1, "POP_JUMP_IF_TRUE", "control falls off the end of the code")),
    ("unknown opcode",
     program(code=asm((Op.LOAD_NIL,)) + b"\xee" + asm((Op.RETURN,))),
     ("<main>", 1, None, "unknown opcode 0xee")),
    ("truncated operand",
     program(code=asm((Op.LOAD_NIL,), (Op.RETURN,)) + b"\x01"),
     ("<main>", 2, "LOAD_CONST", "truncated operand")),
    ("truncated jump target",
     program(code=asm((Op.LOAD_NIL,), (Op.RETURN,)) + b"\x30\x00\x00"),
     ("<main>", 2, "JUMP", "truncated jump target")),
    ("operand varint too long",
     program(code=b"\x01\x80\x80\x80\x80\x80\x00"),
     ("<main>", 0, "LOAD_CONST", "operand varint too long")),
    ("empty code",
     program(code=b""),
     ("<main>", 0, None, "empty code")),
    ("POP_SCOPE below zero",
     program((Op.PUSH_SCOPE,), (Op.POP_SCOPE, 2), (Op.LOAD_NIL,), (Op.RETURN,)),
     ("<main>", 1, "POP_SCOPE", "POP_SCOPE 2 leaves more scopes than are open (scope depth 1)")),
    ("TEST_END without TEST_BEGIN",
     program((Op.PUSH_SCOPE,), (Op.TEST_END,), (Op.LOAD_NIL,), (Op.RETURN,)),
     ("<main>", 1, "TEST_END", "TEST_END without a running test")),
    ("TEST_ABANDON without TEST_BEGIN",
     program((Op.TEST_ABANDON,), (Op.LOAD_NIL,), (Op.RETURN,)),
     ("<main>", 0, "TEST_ABANDON", "TEST_ABANDON without a running test")),
    ("test scope popped by POP_SCOPE",
     program((Op.TEST_BEGIN, 1, "h"), (Op.POP_SCOPE, 1), (Op.TEST_END,),
             "h", (Op.LOAD_NIL,), (Op.RETURN,)),
     ("<main>", 6, "POP_SCOPE", "POP_SCOPE 1 leaves the scope of the handler that resumes at "
                                "offset 9")),
    ("earliest problem first",
     program((Op.LOAD_NAME, 99), (Op.LOAD_CONST, 99), (Op.RETURN,)),
     ("<main>", 0, "LOAD_NAME", "name index 99 out of range (7 strings)")),
    ("static problem before a later decode error",
     program(code=asm((Op.LOAD_CONST, 9)) + b"\xff"),
     ("<main>", 0, "LOAD_CONST", "constant index 9 out of range (4 constants)")),
    # What stack slots hold (found by tests/test_snb_fuzz.py: the VM raised AttributeError).
    ("FOR_ITER on a value that is no iterator",
     program((Op.LOAD_NIL,), "loop", (Op.FOR_ITER, "done"), (Op.POP,), (Op.JUMP, "loop"),
             "done", (Op.LOAD_NIL,), (Op.RETURN,)),
     ("<main>", 1, "FOR_ITER", "the top of the stack is not an iterator (made by GET_ITER)")),
    ("FOR_ITER on the item instead of the iterator",
     program((Op.LOAD_NAME, 0), (Op.GET_ITER,), (Op.FOR_ITER, "done"), (Op.FOR_ITER, "done"),
             "done", (Op.LOAD_NIL,), (Op.RETURN,)),
     ("<main>", 8, "FOR_ITER", "the top of the stack is not an iterator (made by GET_ITER)")),
    ("iterator stored as a value",
     program((Op.LOAD_NAME, 0), (Op.GET_ITER,), (Op.STORE_NAME, 0), (Op.LOAD_NIL,), (Op.RETURN,)),
     ("<main>", 3, "STORE_NAME", "uses the iterator in stack slot 0 as a value")),
    ("iterator duplicated",
     program((Op.LOAD_NAME, 0), (Op.GET_ITER,), (Op.DUP,), (Op.POP,), (Op.POP,),
             (Op.LOAD_NIL,), (Op.RETURN,)),
     ("<main>", 3, "DUP", "uses the iterator in stack slot 0 as a value")),
    ("iterator passed as an argument",
     program((Op.LOAD_NAME, 1), (Op.LOAD_NAME, 0), (Op.GET_ITER,), (Op.CALL, 1), (Op.RETURN,)),
     ("<main>", 5, "CALL", "uses the iterator in stack slot 1 as a value")),
    ("iterator returned",
     program((Op.LOAD_NAME, 0), (Op.GET_ITER,), (Op.RETURN,)),
     ("<main>", 3, "RETURN", "uses the iterator in stack slot 0 as a value")),
    ("iterator on one path, a value on another",
     program((Op.LOAD_NAME, 0), (Op.LOAD_TRUE,), (Op.POP_JUMP_IF_FALSE, "join"), (Op.GET_ITER,),
             "join", (Op.POP,), (Op.LOAD_NIL,), (Op.RETURN,)),
     ("<main>", 8, "GET_ITER",
      "inconsistent stack at offset 9: slot 0 holds an iterator on this path, a value on another")),
    ("module on one path, another value on another",
     program((Op.LOAD_TRUE,), (Op.POP_JUMP_IF_FALSE, "other"), (Op.IMPORT, 0), (Op.JUMP, "join"),
             "other", (Op.LOAD_NIL,), "join", (Op.IMPORT_FROM, 6), (Op.RETURN,)),
     ("<main>", 13, "LOAD_NIL", "inconsistent stack at offset 14: slot 0 holds any value "
                                "on this path, a module from IMPORT on another")),
    ("IMPORT_FROM on a value that is no module",
     program((Op.LOAD_NAME, 0), (Op.IMPORT_FROM, 6), (Op.RETURN,)),
     ("<main>", 2, "IMPORT_FROM", "the top of the stack is not a module (pushed by IMPORT or IMPORT_PYTHON)")),
    ("IMPORT_FROM after the module was stored and loaded again",
     program((Op.IMPORT, 0), (Op.STORE_LOCAL, 0), (Op.LOAD_NAME, 0), (Op.IMPORT_FROM, 6),
             (Op.RETURN,)),
     ("<main>", 6, "IMPORT_FROM", "the top of the stack is not a module (pushed by IMPORT or IMPORT_PYTHON)")),
    # Maps (format 5.2): BUILD_MAP pops a key and a value per entry.
    ("BUILD_MAP short of a value",
     program((Op.LOAD_CONST, 1), (Op.BUILD_MAP, 1), (Op.RETURN,)),
     ("<main>", 2, "BUILD_MAP", "stack underflow (needs 2, depth 1)")),
    ("BUILD_MAP of more entries than the stack holds",
     program((Op.LOAD_NIL,), (Op.LOAD_NIL,), (Op.BUILD_MAP, 1 << 30), (Op.RETURN,)),
     ("<main>", 2, "BUILD_MAP", f"stack underflow (needs {2 << 30}, depth 2)")),
    ("an iterator as a map key",
     program((Op.LOAD_NAME, 0), (Op.GET_ITER,), (Op.LOAD_NIL,), (Op.BUILD_MAP, 1),
             (Op.RETURN,)),
     ("<main>", 4, "BUILD_MAP", "uses the iterator in stack slot 0 as a value")),
    # The instruction a callback frame of the VM runs (frames.CALLBACK_OP) is no program's.
    ("the VM's own callback instruction",
     program(code=asm((Op.LOAD_NIL,)) + bytes([0xFF]) + asm((Op.RETURN,))),
     ("<main>", 1, None, "unknown opcode 0xff")),
    # The program's tables.
    ("entry not a module",
     replace(VALID, entry=1),
     ("<program>", 0, None, "entry code 1 (f) is not a module")),
    ("entry out of range",
     replace(VALID, entry=3),
     ("<program>", 0, None, "entry code index 3 out of range (3 code objects)")),
    ("module entry naming a function",
     replace(VALID, modules=(ModuleEntry("util", "util.sns", "/p/util.sns", 1),)),
     ("<program>", 0, None, "module 0 (util) has code 1 (f), which is not a module")),
    ("module entry out of range",
     replace(VALID, modules=(ModuleEntry("u", "u.sns", "/p/u.sns", -2),)),
     ("<program>", 0, None, "module 0 (u) has code index -2, out of range (3 code objects)")),
    ("constant of a foreign type",
     replace(VALID, constants=(42, [1])),
     ("<program>", 0, None, "constant 1 has unsupported type list")),
    # Found by tests/test_snb_fuzz.py: tier 2 made a file name of the code name (ValueError).
    ("NUL in a code name",
     replace(VALID, codes=VALID.codes[:2] + (replace(UTIL, name="<u\0>"),)),
     ("<program>", 0, None, "code 2 has a NUL character in its name")),
    ("NUL in a source path",
     replace(VALID, sources=(Source("/p/main.sns", ""), Source("/p/\0.sns", ""))),
     ("<program>", 0, None, "source 1 has a NUL character in its path")),
    ("NUL in a module path",
     replace(VALID, modules=(ModuleEntry("gone", "gone.sns", "/p/gone\0.sns", -1),)),
     ("<program>", 0, None, "module 0 has a NUL character in its path")),
    ("source index out of range",
     replace(VALID, codes=VALID.codes[:2] + (replace(UTIL, source=2),)),
     ("<util>", 0, None, "source index 2 out of range (2 sources)")),
    ("params and param_types differ",
     replace(VALID, codes=(VALID.codes[0], replace(FUNC, param_types=()), UTIL)),
     ("f", 0, None, "1 params but 0 param_types")),
    ("bad parameter annotation",
     replace(VALID, codes=(VALID.codes[0], replace(FUNC, param_types=("Int<",)), UTIL)),
     ("f", 0, None, "malformed type annotation 'Int<' for parameter 'n'")),
    ("bad return annotation",
     replace(VALID, codes=(VALID.codes[0], replace(FUNC, return_type="a b"), UTIL)),
     ("f", 0, None, "malformed return type annotation 'a b'")),
    ("param annotation nested too deep",
     replace(VALID, codes=(VALID.codes[0], replace(FUNC, param_types=(DEEP,)), UTIL)),
     ("f", 0, None, "type annotation for parameter 'n' nests type arguments more than 100 deep")),
    ("return annotation nested too deep",
     replace(VALID, codes=(VALID.codes[0], replace(FUNC, return_type=DEEP), UTIL)),
     ("f", 0, None, "return type annotation nests type arguments more than 100 deep")),
    ("declared type nested too deep",
     program((Op.LOAD_NIL,), (Op.CHECK_DECL, 0, 7), (Op.RETURN,), strings=STRINGS + (DEEP,)),
     ("<main>", 1, "CHECK_DECL", "type annotation nests type arguments more than 100 deep")),
    ("module name with a control character",
     replace(VALID, modules=(replace(VALID.modules[0], name="ut\x1bil"), VALID.modules[1])),
     ("<program>", 0, None, "module 0's name has a control character: 'ut\\x1bil'")),
    ("module path with a bidi override",
     replace(VALID, modules=(VALID.modules[0], replace(VALID.modules[1], rel="\u202egone.sns"))),
     ("<program>", 0, None, "module 1's path has a control character: '\\u202egone.sns'")),
    ("positions not increasing",
     replace(VALID, codes=(VALID.codes[0], replace(FUNC, positions=((2, 1, 1), (0, 1, 1))), UTIL)),
     ("f", 0, "LOAD_NAME", "position offsets not strictly increasing (0 after 2)")),
    ("position inside an instruction",
     replace(VALID, codes=(VALID.codes[0], replace(FUNC, positions=((0, 1, 1), (1, 1, 1))), UTIL)),
     ("f", 1, None, "position for offset 1 is not at the start of an instruction")),
]


@pytest.mark.parametrize("p, expected", [pytest.param(p, e, id=name) for name, p, e in REJECTIONS])
def test_rejected(p, expected):
    assert rejects(p) == expected


def test_a_source_path_may_hold_any_character():
    # A path is the user's file system's (and is shown escaped), not a name the compiler made.
    assert verify(replace(VALID, sources=(Source("/p/m\x1bain.sns", "x = 42\n"),
                                          VALID.sources[1])))


def test_error_text_names_code_offset_and_opcode():
    with pytest.raises(VerifyError) as info:
        verify(program((Op.POP,), (Op.RETURN,)))
    assert str(info.value) == "<main>+0 (POP): stack underflow (needs 1, depth 0)"


# ----------------------------------------------------------------------------- properties

def _same_decision(p: Program) -> None:
    """The fast pass accepts a code object exactly when the general verifier does, with the same
    result; what it refuses, the general verifier refuses (a header problem: with the same error)."""
    fast = _FastVerifier(p)
    for code in p.codes:
        try:
            general = _CodeVerifier(p, code).run()
        except VerifyError as e:
            general = e
        try:
            quick = fast.run(code)
        except VerifyError as e:
            assert isinstance(general, VerifyError) and str(e) == str(general)
            continue
        if isinstance(general, VerifyError):
            assert quick is None, f"fast pass accepted what the verifier refuses: {general}"
        else:
            assert quick is not None, "fast pass refused what the verifier accepts"
            assert (quick.instructions, quick.index_of, quick.max_depth) == \
                (general.instructions, general.index_of, general.max_depth)


def _verify_or_error(p: Program):
    _same_decision(p)
    try:
        v = verify(p)
    except VerifyError as e:
        assert e.message
        return None
    for vc in v.codes:
        assert vc.max_depth <= vc.code.max_stack
    return v


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=0, max_size=60), st.integers(0, 6))
def test_arbitrary_code_bytes(code, max_stack):
    _verify_or_error(program(code=code, max_stack=max_stack))


_OPS = list(Op)


@st.composite
def instruction_sequences(draw):
    """Instructions with small operands and jump targets on instruction starts (mostly)."""
    n = draw(st.integers(1, 14))
    rows = []
    for _ in range(n):
        op = draw(st.sampled_from(_OPS))
        args = []
        for kind in op.operands:
            if kind is Operand.TARGET:
                args.append(("label", draw(st.integers(0, n))))
            elif kind is Operand.COUNT:
                args.append(draw(st.integers(0, 3)))
            else:
                args.append(draw(st.integers(0, 8)))
        rows.append((op, args))
    sizes = [len(encode(op, [0 if isinstance(a, tuple) else a for a in args]))
             for op, args in rows]
    starts = [sum(sizes[:i]) for i in range(n + 1)]
    return b"".join(encode(op, [starts[a[1]] if isinstance(a, tuple) else a for a in args])
                    for op, args in rows)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instruction_sequences(), st.integers(0, 6))
def test_random_instruction_sequences(code, max_stack):
    _verify_or_error(program(code=code, max_stack=max_stack))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 5), st.integers(0, 5)), max_size=5),
       st.integers(-2, 4), st.integers(-2, 3))
def test_arbitrary_tables(positions, entry, module_code):
    p = replace(VALID, entry=entry,
                modules=(ModuleEntry("m", "m.sns", "/m.sns", module_code),),
                codes=VALID.codes[:2] + (replace(UTIL, positions=tuple(positions)),))
    _verify_or_error(p)


# ----------------------------------------------------------------------------- the fast pass

@pytest.mark.parametrize("p, expected", [pytest.param(p, e, id=name) for name, p, e in REJECTIONS])
def test_fast_pass_refuses_every_rejection(p, expected):
    """Each bad program is refused by the fast pass too (or by the header check both share)."""
    fast = _FastVerifier(p)
    try:
        results = [fast.run(code) for code in p.codes]
    except VerifyError:
        return
    if expected[0] == "<program>":
        return                          # a table problem: verify() finds it before any code
    assert None in results


_COMPILED = sorted(
    str(path) for root in ("examples", "tests/programs", "stdlib", "benchmarks/programs")
    for path in __import__("pathlib").Path(root).rglob("*.sns"))


def test_fast_pass_accepts_every_compiled_program():
    """Everything sensec writes is accepted without falling back, with the general result."""
    from sensec.driver import compile_file
    from sensevm.base.errors import SenseError
    checked = 0
    for path in _COMPILED:
        try:
            p = compile_file(path, defer_import_errors=True)
        except SenseError:
            continue                    # a program that tests a compile error
        fast = _FastVerifier(p)
        for code in p.codes:
            quick = fast.run(code)
            assert quick is not None, f"{path}: {code.name} refused by the fast pass"
            general = _CodeVerifier(p, code).run()
            assert (quick.instructions, quick.index_of, quick.max_depth) == \
                (general.instructions, general.index_of, general.max_depth), path
            checked += 1
    assert checked > 1000
