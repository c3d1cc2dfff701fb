"""The instruction set table: every row well-formed, and the fingerprint pinned to the format major."""

from __future__ import annotations

import pytest

from sensevm.bytecode import opcodes
from sensevm.bytecode import program
from sensevm.bytecode import snb
from sensevm.bytecode.opcodes import FINGERPRINT, FORMAT_MAJOR, F, Op, Operand, POPS, PUSHES

# One fingerprint per format major: the table as its minor 0 defined it. Changing any of those
# rows (number, name, operands, stack effect, flags, branch) would make old .snb files mean
# something else, so it must come with a new FORMAT_MAJOR and a new entry here (CPython's MAGIC
# rule). A minor may append rows (opcodes.TABLE_ENDS, FINGERPRINTS).
PINNED_FINGERPRINTS = {
    1: "8dbbfcccc99ab423",
    2: "7b9a2d8cba82a674",   # the action lifecycle and policy opcodes
    3: "42ca2b8425c0f0e9",   # tools: MAKE_TOOL, TOOL_CALL
    4: "7e70559d64c62883",   # agents: MAKE_AGENT
    5: "348da0f093235426",   # Python interop: IMPORT_PYTHON
}


def test_fingerprint_is_pinned_for_this_format_major():
    first = opcodes._fingerprint(opcodes.TABLE_ENDS[0])
    pinned = PINNED_FINGERPRINTS.get(FORMAT_MAJOR)
    assert pinned == first.hex(), (
        f"the rows of format {FORMAT_MAJOR}.0 changed (they hash to {first.hex()}, format major "
        f"{FORMAT_MAJOR} pins {pinned}): bump FORMAT_MAJOR and update the pinned fingerprint "
        f"in tests/test_opcodes.py (add {FORMAT_MAJOR + 1 if pinned else FORMAT_MAJOR}: "
        f"'{first.hex()}')")


def test_each_minor_only_appended_rows():
    """Every minor up to FORMAT_MINOR has its table end and fingerprint written down; its rows
    are the rows below its end, unchanged since (each later minor's rows are numbered above)."""
    assert sorted(opcodes.TABLE_ENDS) == sorted(opcodes.FINGERPRINTS) \
        == list(range(opcodes.FORMAT_MINOR + 1))
    ends = [opcodes.TABLE_ENDS[m] for m in sorted(opcodes.TABLE_ENDS)]
    assert ends == sorted(ends) and ends[-1] == max(Op) + 1
    for minor, end in opcodes.TABLE_ENDS.items():
        assert opcodes._fingerprint(end) == opcodes.FINGERPRINTS[minor], (
            f"the rows of format {FORMAT_MAJOR}.{minor} (opcodes below {end}) hash to "
            f"{opcodes._fingerprint(end).hex()}, not the fingerprint written for that minor: "
            "a minor may only append opcodes numbered above every older one")
    assert opcodes.FINGERPRINTS[opcodes.FORMAT_MINOR] == FINGERPRINT


def test_the_written_fingerprint_is_the_tables():
    """FINGERPRINT is written out in opcodes.py; it must be what the table hashes to now."""
    assert opcodes._fingerprint() == FINGERPRINT, (
        f"the opcode table hashes to {opcodes._fingerprint().hex()}: write that into "
        "sensevm/bytecode/opcodes.py (FINGERPRINT), and see test_fingerprint_is_pinned_for_this_format_major")


def test_the_stack_effect_formulas_compute_their_text():
    for text, fn in opcodes._FORMULAS.items():
        for a in range(4):
            for b in range(4):
                assert fn(a, b) == eval(text, {"a": a, "b": b}), text
    used = {x for op in Op for x in (op.pops, op.pushes) if isinstance(x, str)}
    assert used <= set(opcodes._FORMULAS)


def test_fingerprint_is_eight_bytes():
    assert isinstance(FINGERPRINT, bytes) and len(FINGERPRINT) == 8


def test_codes_are_unique_bytes():
    # An IntEnum silently turns a repeated value into an alias, so compare against __members__.
    assert len(Op.__members__) == len(list(Op)), "two opcodes share a number"
    assert all(0 <= op.value <= 0xFF for op in Op)
    assert len(opcodes.OPS) == len(Op) and len(opcodes.OPNAMES) == len(Op)


def _formula_names(formula) -> set[str]:
    if isinstance(formula, int):
        return set()
    return set(compile(formula, "<effect>", "eval").co_names)


@pytest.mark.parametrize("op", list(Op), ids=lambda op: op.name)
def test_row_is_well_formed(op: Op):
    assert isinstance(op.operands, tuple)
    assert all(isinstance(k, Operand) for k in op.operands)
    # Stack formulas name at most operands a and b.
    assert len(op.operands) <= 2
    assert isinstance(op.flags, F)
    assert isinstance(op.doc, str) and op.doc.strip()

    has_target = Operand.TARGET in op.operands
    assert bool(op.flags & F.JUMP) == has_target, "JUMP flag iff a TARGET operand"
    assert (op.branch is not None) == bool(op.flags & F.JUMP), "branch effect iff JUMP"
    assert op.operands.count(Operand.TARGET) <= 1

    if op.branch is not None:
        assert isinstance(op.branch, tuple) and len(op.branch) == 2
        assert all(isinstance(n, int) and n >= 0 for n in op.branch)

    for formula in (op.pops, op.pushes):
        assert isinstance(formula, (int, str))
        names = _formula_names(formula)
        allowed = {"a", "b"}
        assert names <= allowed, f"{op.name}: formula {formula!r} names {names - allowed}"
        for name in names:
            index = "ab".index(name)
            assert index < len(op.operands), f"{op.name}: {name} is not an operand"
            # A stack effect may depend on a count, never on an index or a target.
            assert op.operands[index] is Operand.COUNT

    for args in [(0, 0), (1, 0), (3, 2), (2 ** 35 - 1, 7)]:
        args = args[:len(op.operands)]
        pops, pushes = POPS[op](*args), PUSHES[op](*args)
        assert isinstance(pops, int) and pops >= 0
        assert isinstance(pushes, int) and pushes >= 0


def test_terminators():
    assert opcodes.TERMINATORS == {op for op in Op if op.flags & F.TERMINATOR}
    assert {Op.JUMP, Op.RETURN} <= opcodes.TERMINATORS
    assert opcodes.JUMPS == {op for op in Op if Operand.TARGET in op.operands}


@pytest.mark.parametrize("module, name", [(opcodes, "Op"), (opcodes, "Operand"), (opcodes, "F"),
                                          (program, "CodeKind"), (snb, "Section"), (snb, "Tag")])
def test_the_usual_enum_machinery_makes_the_same_enum(module, name):
    """The instruction set's enums are made with CPython's quick decorator where it exists; the
    usual way (the fallback) must give the same members, values, order, rows and behaviour."""
    from enum import IntEnum, IntFlag
    quick = getattr(module, name)
    base = IntFlag if name == "F" else IntEnum
    usual = opcodes._int_enum_slowly(opcodes._PLAIN[name], base)
    assert issubclass(quick, base) and issubclass(usual, base)
    assert [(m.name, m.value) for m in usual] == [(m.name, m.value) for m in quick]
    for q in quick:
        u = usual[q.name]
        assert usual(q.value) is u and repr(u).replace(name, "X") == repr(q).replace(name, "X")
        assert str(u) == str(q) and u == q and hash(u) == hash(q)
        assert vars(quick)[q.name] is q and vars(usual)[u.name] is u     # plain attributes
        if name == "Op":
            assert (u.operands, u.pops, u.pushes, u.flags, u.branch, u.doc) == \
                (q.operands, q.pops, q.pushes, q.flags, q.branch, q.doc)
    if base is IntFlag:         # every combination, the empty one included
        for v in range(2 * max(quick)):
            assert repr(usual(v)) == repr(quick(v)) and str(usual(v)) == str(quick(v))


def test_members_survive_pickling():
    import pickle
    for enum_class in (Op, Operand, program.CodeKind, snb.Section, snb.Tag):
        for member in enum_class:
            assert pickle.loads(pickle.dumps(member)) is member
