"""The disassembler: an exact listing of a hand-assembled program, and undecodable code shown without a crash."""

from __future__ import annotations

import pytest

from sensevm.bytecode.decode import decode, encode
from sensevm.bytecode.disasm import disassemble, sense_repr
from sensevm.base.errors import VerifyError
from sensevm.bytecode.opcodes import Op
from sensevm.bytecode.program import CodeKind, CodeObject, ModuleEntry, Program, Source
from sensevm.bytecode.verify import verify


def asm(*items):
    """Assemble ``(Op, *args)`` tuples; a str item defines a label, a str TARGET operand uses one.

    Returns the code and the label offsets.
    """
    labels, pos = {}, 0
    for item in items:
        if isinstance(item, str):
            labels[item] = pos
        else:
            op, *args = item
            pos += len(encode(op, [0 if isinstance(a, str) else a for a in args]))
    code = b"".join(encode(item[0], [labels[a] if isinstance(a, str) else a for a in item[1:]])
                    for item in items if not isinstance(item, str))
    return code, labels


# x = 0
# def inc(n: Int) -> Int:
#     return n + 1
# from util import helper
# while x < 10:
#     x = x + 1.5
# test "inc works":
#     inc("a\n\"b\"")
MAIN, _ = asm(
    (Op.LOAD_CONST, 0), (Op.STORE_NAME, 0),
    (Op.MAKE_FUNCTION, 1), (Op.STORE_NAME, 1),
    (Op.IMPORT, 0), (Op.IMPORT_FROM, 2), (Op.STORE_NAME, 2),
    "loop", (Op.LOAD_NAME, 0), (Op.LOAD_CONST, 1), (Op.LT,), (Op.POP_JUMP_IF_FALSE, "end"),
    (Op.LOAD_NAME, 0), (Op.LOAD_CONST, 2), (Op.ADD,), (Op.STORE_NAME, 0), (Op.JUMP, "loop"),
    "end", (Op.TEST_BEGIN, 3, "after"), (Op.LOAD_NAME, 1), (Op.LOAD_CONST, 4), (Op.CALL, 1),
    (Op.POP,), (Op.TEST_END,),
    "after", (Op.LOAD_NIL,), (Op.RETURN,),
)
# (line, column) of each instruction above; line 0 is synthetic code (no location).
MAIN_LINES = [(1, 1), (1, 1), (2, 1), (2, 1), (4, 1), (4, 1), (4, 18),
              (5, 7), (5, 9), (5, 7), (5, 1), (6, 5), (6, 9), (6, 7), (6, 5), (5, 1),
              (7, 1), (8, 5), (8, 9), (8, 8), (8, 5), (7, 1), (0, 0), (0, 0)]
MAIN_POSITIONS = tuple((ins.offset, line, col)
                       for ins, (line, col) in zip(decode(MAIN), MAIN_LINES, strict=True))
INC, _ = asm((Op.LOAD_NAME, 3), (Op.LOAD_CONST, 5), (Op.ADD,), (Op.CHECK_DECL, 3, 4),
             (Op.RETURN,))

PROGRAM = Program(
    strings=("x", "inc", "helper", "n", "Int"),
    constants=(0, 10, 1.5, 'inc works', 'a\n"b"', 1),
    codes=(
        CodeObject("<util>", CodeKind.MODULE, 1, max_stack=1, code=asm((Op.LOAD_NIL,),
                                                                        (Op.RETURN,))[0]),
        CodeObject("inc", CodeKind.FUNCTION, 0, ("n",), ("Int",), "Int", 2, INC,
                   ((0, 3, 12), (4, 3, 12))),
        CodeObject("<main>", CodeKind.MODULE, 0, max_stack=2, code=MAIN, positions=MAIN_POSITIONS),
    ),
    modules=(ModuleEntry("util", "lib/util.sns", "/p/lib/util.sns", 0),),
    sources=(Source("main.sns", ""), Source("lib/util.sns", "")),
    entry=2,
)

EXPECTED = """\
Disassembly of <main> (module, main.sns, max stack 2):
  1       0 LOAD_CONST               0 (0)
          2 STORE_NAME               0 (x)

  2       4 MAKE_FUNCTION            1 (inc)
          6 STORE_NAME               1 (inc)

  4       8 IMPORT                   0 (lib/util.sns)
         10 IMPORT_FROM              2 (helper)
         12 STORE_NAME               2 (helper)

  5 >>   14 LOAD_NAME                0 (x)
         16 LOAD_CONST               1 (10)
         18 LT
         19 POP_JUMP_IF_FALSE       36 (to 36)

  6      24 LOAD_NAME                0 (x)
         26 LOAD_CONST               2 (1.5)
         28 ADD
         29 STORE_NAME               0 (x)

  5      31 JUMP                    14 (to 14)

  7 >>   36 TEST_BEGIN           3, 50 ("inc works", to 50)

  8      42 LOAD_NAME                1 (inc)
         44 LOAD_CONST               4 ("a\\n\\"b\\"")
         46 CALL                     1
         48 POP

  7      49 TEST_END
    >>   50 LOAD_NIL
         51 RETURN

Disassembly of <util> (module, lib/util.sns, max stack 1):
          0 LOAD_NIL
          1 RETURN

Disassembly of inc (function, main.sns, params (n: Int) -> Int, max stack 2):
  3       0 LOAD_NAME                3 (n)
          2 LOAD_CONST               5 (1)
          4 ADD
          5 CHECK_DECL            3, 4 (n, Int)
          8 RETURN
"""


def test_listing():
    assert disassemble(PROGRAM) == EXPECTED


def test_listing_of_a_verified_program_and_unverified_agree():
    assert disassemble(verify(PROGRAM)) == EXPECTED
    assert disassemble(PROGRAM, verified=False) == EXPECTED


def test_one_code_object():
    listing = disassemble(PROGRAM, code_index=1)
    assert listing == EXPECTED[EXPECTED.index("Disassembly of inc"):]
    with pytest.raises(ValueError, match="no code object 3"):
        disassemble(PROGRAM, code_index=3)


def test_jump_targets_are_marked():
    marked = [line.split(">>")[1].split()[0] for line in EXPECTED.splitlines() if ">>" in line]
    assert marked == ["14", "36", "50"]


def test_line_numbers_only_when_they_change():
    numbered = [line.split()[0] for line in EXPECTED.splitlines()
                if line[:3].strip().isdigit()]
    assert numbered == ["1", "2", "4", "5", "6", "5", "7", "8", "7", "3"]


def test_verified_listing_refuses_bad_code():
    bad = Program(codes=(CodeObject("m", CodeKind.MODULE, 0, code=b"\x05"),),
                  sources=(Source("m.sns", ""),))
    with pytest.raises(VerifyError):
        disassemble(bad)


def test_undecodable_code_is_marked_not_raised():
    code, _ = asm((Op.LOAD_CONST, 7), (Op.JUMP, 3))
    bad = Program(codes=(CodeObject("broken", CodeKind.MODULE, 4,
                                    code=code + b"\xfe\x00" + encode(Op.RETURN, ()),
                                    positions=((0, 1, 1),)),))
    assert disassemble(bad, verified=False) == """\
Disassembly of broken (module, <source 4 out of range>, max stack 0):
  1       0 LOAD_CONST               7 (<out of range>)
          2 JUMP                     3 (to 3)
    !!    7 <invalid>            unknown opcode 0xfe
"""


def test_truncated_operand_is_marked():
    bad = Program(codes=(CodeObject("cut", CodeKind.FUNCTION, 0, code=b"\x02\x30\x01"),),
                  sources=(Source("m.sns", ""),))
    assert disassemble(bad, verified=False).splitlines()[-2:] == [
        "          0 LOAD_NIL",
        "    !!    1 <invalid>            JUMP: truncated jump target",
    ]


@pytest.mark.parametrize("value, text", [
    (None, "nil"), (True, "true"), (False, "false"), (42, "42"), (-7, "-7"), (2 ** 70, str(2 ** 70)),
    (1.5, "1.5"), (-0.0, "-0.0"), (float("inf"), "inf"), (float("nan"), "nan"), (0.1 + 0.2, "0.30000000000000004"),
    ("", '""'), ("tab\there", '"tab\\there"'), ('q"\\', '"q\\"\\\\"'), ("\r\n", '"\\r\\n"'),
    ("bell\x07", '"bell\\x07"'), ("é✓", '"é✓"'),
])
def test_constant_display(value, text):
    assert sense_repr(value) == text
