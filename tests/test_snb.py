"""The .snb format: round trips, a binary.wast-style table of malformed files, and fuzzing of load()."""

from __future__ import annotations

import math
import sys
import struct
import zlib
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sensevm.bytecode import snb
from sensevm.bytecode.decode import encode
from sensevm.base.errors import SnbFormatError
from sensevm.bytecode.opcodes import FINGERPRINT, FORMAT_MAJOR, FORMAT_MINOR, Op
from sensevm.bytecode.program import CodeKind, CodeObject, ModuleEntry, Program, Source

from conftest import ROOT

sys.path.insert(0, ROOT)
from fuzz.snb_oracle import recrc, uvarint, with_crc  # noqa: E402  (the fuzzers' byte helpers)


def asm(*instructions) -> bytes:
    return b"".join(encode(op, args) for op, *args in instructions)


def sample_program() -> Program:
    main = asm((Op.LOAD_CONST, 0), (Op.STORE_NAME, 0), (Op.MAKE_FUNCTION, 1),
               (Op.STORE_NAME, 1), (Op.IMPORT, 0), (Op.POP,), (Op.LOAD_NIL,), (Op.RETURN,))
    f = asm((Op.LOAD_NAME, 2), (Op.CHECK_DECL, 2, 3), (Op.RETURN,))
    return Program(
        strings=("x", "f", "n", "Array<Int>"),
        constants=(None, True, False, 0, -1, 2 ** 100, -(2 ** 70), 1.5, -0.0, "héllo\n", "x"),
        codes=(
            CodeObject("<main>", CodeKind.MODULE, 0, max_stack=1, code=main,
                       positions=((0, 1, 1), (2, 1, 5), (4, 2, 1), (6, 3, 1), (8, 3, 1))),
            CodeObject("f", CodeKind.FUNCTION, 0, ("n", "m"), ("Array<Int>", None), "Int", 1, f,
                       ((0, 2, 5), (2, 2, 9), (5, 1, 3))),
            CodeObject("<util>", CodeKind.MODULE, 1, max_stack=0, code=asm((Op.LOAD_NIL,),
                                                                            (Op.RETURN,))),
        ),
        modules=(ModuleEntry("util", "util.sns", "/p/util.sns", 2),
                 ModuleEntry("gone", "gone.sns", "/p/gone.sns", -1)),
        sources=(Source("/p/main.sns", "x = nil\n"), Source("/p/util.sns", "")),
        entry=0,
        source_hash=bytes(range(32)),
    )


VALID = snb.dump(sample_program())
HEADER = VALID[:snb.HEADER_SIZE]


def patch(data: bytes, at: int, new: bytes) -> bytes:
    return data[:at] + new + data[at + len(new):]


def forge(*sections, header: bytes = HEADER) -> bytes:
    body = bytearray(header)
    for sid, payload in sections:
        body.append(sid)
        body += uvarint(len(payload))
        body += payload
    return with_crc(bytes(body))


# The smallest well-formed file: every section present and empty. Section k's payload starts
# at 56 + 2*k + (bytes of the sections before it); with these payloads: STRINGS at 58,
# CONSTANTS at 62, CODE at 65, MODULES at 69, MANIFEST at 72, DEBUG at 77, checksum at 78.
EMPTY = [(1, b"\x00\x00"), (2, b"\x00"), (3, b"\x00\x00"), (4, b"\x00"), (5, b"\x00\x00\x00"), (6, b"\x00")]


def forge_with(**changes) -> bytes:
    """EMPTY with some sections' payloads replaced, e.g. forge_with(CONSTANTS=b"...")."""
    sections = [(sid, changes.get(snb.Section(sid).name, payload)) for sid, payload in EMPTY]
    return forge(*sections)


def dump_sections(data: bytes):
    """(id, payload) of each section of a well-formed file."""
    out, pos, end = [], snb.HEADER_SIZE, len(data) - 4
    while pos < end:
        sid = data[pos]
        size, shift, pos = 0, 0, pos + 1
        while True:
            b = data[pos]
            pos += 1
            size |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        out.append((sid, data[pos:pos + size]))
        pos += size
    return out


SECTIONS = dump_sections(VALID)

# ----------------------------------------------------------------------------- round trips


def test_sample_round_trips():
    p = sample_program()
    assert snb.load(VALID) == p
    assert snb.dump(p) == VALID



def test_names_are_loaded_interned():
    """A loaded name is the interpreter's interned string, the one tier 2's generated literals
    are, so a scope's dict finds it by identity; text that is no name need not be."""
    name = "".join(["loaded_", "name"])     # made at run time: no literal interned it already
    p = replace(sample_program(), strings=(name, "not a name", "n", "Array<Int>"))
    loaded = snb.load(snb.dump(p))
    assert loaded == p
    assert loaded.strings[0] is sys.intern("".join(["loaded_", "name"]))
    assert loaded.strings[0] is not name

def test_header_layout():
    assert VALID[:8] == b"\x89SNB\r\n\x1a\n"
    assert struct.unpack_from("<HHI", VALID, 8) == (FORMAT_MAJOR, FORMAT_MINOR, 0)
    assert VALID[16:24] == FINGERPRINT
    assert VALID[24:56] == bytes(range(32))
    assert [sid for sid, _ in SECTIONS] == [1, 2, 3, 4, 5, 6]
    assert struct.unpack("<I", VALID[-4:])[0] == zlib.crc32(VALID[:-4])


def test_dump_is_deterministic():
    assert snb.dump(sample_program()) == snb.dump(sample_program()) == VALID


def test_empty_sections_load():
    empty = Program(source_hash=bytes(range(32)))
    assert snb.load(forge(*EMPTY)) == empty
    assert snb.dump(empty) == forge(*EMPTY)


def test_custom_sections_are_skipped_anywhere():
    for at in range(len(SECTIONS) + 1):
        sections = SECTIONS[:at] + [(0, b"anything at all \xff")] + SECTIONS[at:]
        assert snb.load(forge(*sections)) == sample_program()


def test_every_older_minor_is_read_with_its_own_fingerprint():
    """A file of minor m carries the fingerprint of the table m defined (opcodes.FINGERPRINTS):
    it still loads; the same file with the current fingerprint under an older minor whose table
    differs would not."""
    from sensevm.bytecode.opcodes import FINGERPRINTS
    for minor, fingerprint in FINGERPRINTS.items():
        data = recrc(patch(patch(VALID, 10, struct.pack("<H", minor)), 16, fingerprint))
        assert snb.load(data) == sample_program()
        if fingerprint != FINGERPRINT:
            with pytest.raises(SnbFormatError, match="different instruction set"):
                snb.load(recrc(patch(data, 16, FINGERPRINT)))


def test_an_older_minor_holding_a_newer_opcode_is_refused():
    """A file that says 5.1 (with 5.1's fingerprint) but holds BUILD_MAP, which 5.2 added, is
    not what its header says."""
    from sensec.driver import compile_source
    from sensevm.bytecode.opcodes import FINGERPRINTS, TABLE_ENDS
    data = snb.dump(compile_source("x = {1: 2}\n", "m.sns"))
    older = [m for m in TABLE_ENDS if TABLE_ENDS[m] <= Op.BUILD_MAP]
    assert older, "BUILD_MAP is in every minor's table"
    minor = max(older)
    forged = recrc(patch(patch(data, 10, struct.pack("<H", minor)), 16, FINGERPRINTS[minor]))
    with pytest.raises(SnbFormatError, match=f"format {FORMAT_MAJOR}.{minor} has no opcode "
                                             "BUILD_MAP"):
        snb.load(forged)
    assert snb.load(data).codes            # the same program under its own minor loads


def test_other_minor_is_read():
    data = recrc(patch(VALID, 10, struct.pack("<H", FORMAT_MINOR + 7)))
    assert snb.load(data) == sample_program()


def test_strings_outside_program_strings_do_not_leak_into_it():
    # Code names, paths, texts and string constants go to the second list of STRINGS.
    assert snb.load(VALID).strings == ("x", "f", "n", "Array<Int>")


def test_dump_refuses_what_load_would_refuse():
    with pytest.raises(ValueError, match="flags"):
        snb.dump(Program(flags=1))
    with pytest.raises(ValueError, match="32 bytes"):
        snb.dump(Program(source_hash=b"short"))
    with pytest.raises(TypeError, match="list"):
        snb.dump(Program(constants=([],)))
    with pytest.raises(ValueError, match="param_types"):
        snb.dump(Program(codes=(CodeObject("f", CodeKind.FUNCTION, 0, params=("a",)),)))
    with pytest.raises(ValueError, match="too large"):
        snb.dump(Program(constants=(1 << (7 * snb.MAX_INT_BYTES),)))


def test_largest_int_round_trips():
    for n in (1 << (7 * snb.MAX_INT_BYTES - 2), -(1 << (7 * snb.MAX_INT_BYTES - 2))):
        assert snb.load(snb.dump(Program(constants=(n,)))).constants == (n,)


def test_bool_is_not_int_and_int_is_not_float():
    consts = snb.load(snb.dump(Program(constants=(True, 1, 1.0, False, 0, 0.0, -0.0)))).constants
    assert [type(c) for c in consts] == [bool, int, float, bool, int, float, float]
    assert math.copysign(1.0, consts[-1]) == -1.0


# ----------------------------------------------------------------------------- malformed files

def _with_big_varint(data: bytes, at: int, old_len: int, value: int) -> bytes:
    return data[:at] + uvarint(value) + data[at + old_len:]


_TOTAL = len(VALID)
# STRINGS' size varint is at 57; 2**40 takes 6 bytes.
_OVERSIZE = recrc(_with_big_varint(VALID, 57, len(uvarint(len(SECTIONS[0][1]))), 2 ** 40))

MALFORMED = [
    # name, data, offset, message
    ("empty", b"", 0, "truncated header"),
    ("bad magic", b"\x7fELF" + VALID[4:], 0, "not a .snb file (bad magic)"),
    ("text-mode damage", VALID[:4] + b"\n" + VALID[6:], 0, "not a .snb file (bad magic)"),
    ("bad magic, short", b"PK", 0, "not a .snb file (bad magic)"),
    ("cut in magic", VALID[:5], 0, "truncated header"),
    ("cut before version", VALID[:8], 8, "truncated header"),
    ("cut in version", VALID[:11], 8, "truncated header"),
    ("cut before flags", VALID[:12], 12, "truncated header"),
    ("cut in flags", VALID[:14], 12, "truncated header"),
    ("cut in fingerprint", VALID[:20], 16, "truncated header"),
    ("cut in source hash", VALID[:55], 24, "truncated header"),
    ("no checksum", VALID[:56], 56, "truncated file (no room for the checksum)"),
    ("cut checksum", VALID[:59], 56, "truncated file (no room for the checksum)"),
    ("wrong major", patch(VALID, 8, struct.pack("<H", FORMAT_MAJOR + 1)), 8,
     f"unsupported format version {FORMAT_MAJOR + 1}.{FORMAT_MINOR} "
     f"(this VM reads {FORMAT_MAJOR}.x)"),
    ("major zero", patch(VALID[:12], 8, b"\x00\x00\x03\x00"), 8,
     f"unsupported format version 0.3 (this VM reads {FORMAT_MAJOR}.x)"),
    ("corrupted byte", patch(VALID, 100, bytes([VALID[100] ^ 0x20])), _TOTAL - 4,
     "checksum mismatch (file is corrupted)"),
    # The header is read before the checksum: its messages do not depend on a good CRC.
    ("unknown flags, old CRC", patch(VALID, 12, b"\x01"), 12, "unknown flag bits 0x1"),
    ("wrong fingerprint, old CRC", patch(VALID, 16, b"\xff" * 8), 16,
     "bytecode was built for a different instruction set "
     f"(fingerprint ffffffffffffffff != {FINGERPRINT.hex()})"),
    ("wrong major, recomputed CRC", recrc(patch(VALID, 8, b"\x09\x00")), 8,
     f"unsupported format version 9.{FORMAT_MINOR} (this VM reads {FORMAT_MAJOR}.x)"),
    ("corrupted source hash", patch(VALID, 30, b"\x00\x00"), _TOTAL - 4,
     "checksum mismatch (file is corrupted)"),
    ("cut in a section", VALID[:80], 76, "checksum mismatch (file is corrupted)"),
    ("bad checksum", VALID[:-1] + bytes([VALID[-1] ^ 1]), _TOTAL - 4,
     "checksum mismatch (file is corrupted)"),
    # Forged: the checksum is right, the structure is not.
    ("unknown flags", recrc(patch(VALID, 12, struct.pack("<I", 0x10))), 12,
     "unknown flag bits 0x10"),
    ("all flags", recrc(patch(VALID, 12, b"\xff\xff\xff\xff")), 12,
     "unknown flag bits 0xffffffff"),
    ("wrong fingerprint", recrc(patch(VALID, 16, bytes(8))), 16,
     "bytecode was built for a different instruction set "
     f"(fingerprint 0000000000000000 != {FINGERPRINT.hex()})"),
    ("no sections", with_crc(HEADER), 56, "missing STRINGS section"),
    ("section out of order", forge(*SECTIONS[:4], SECTIONS[1]), 56 + sum(
        2 + len(uvarint(len(p))) - 1 + len(p) for _, p in SECTIONS[:4]),
     "CONSTANTS section out of order (after MODULES)"),
    ("sections swapped", forge(SECTIONS[1], SECTIONS[0], *SECTIONS[2:]), 56,
     "missing STRINGS section (found CONSTANTS)"),
    ("duplicate section", forge(*EMPTY[:2], EMPTY[1], *EMPTY[2:]), 62 + 1,
     "duplicate CONSTANTS section"),
    ("duplicate last section", forge(*EMPTY, EMPTY[5]), 78, "duplicate DEBUG section"),
    ("missing section", forge(*EMPTY[:3], *EMPTY[4:]), 67, "missing MODULES section (found MANIFEST)"),
    ("missing last section", forge(*EMPTY[:5]), 75, "missing DEBUG section"),
    ("unknown section id", forge(*EMPTY[:2], (9, b""), *EMPTY[2:]), 63, "unknown section id 9"),
    ("oversize section", _OVERSIZE, 57, f"STRINGS section size {2 ** 40} overruns the file "
                                         f"({len(_OVERSIZE) - 4 - 57 - 6} bytes left before the checksum)"),
    ("section size cut", with_crc(HEADER + b"\x01"), 57,
     "truncated file (expected STRINGS section size)"),
    ("section size varint too long", with_crc(HEADER + b"\x01" + b"\x80" * 11), 57,
     "varint too long (STRINGS section size: more than 10 bytes)"),
    ("huge string count", forge_with(STRINGS=uvarint(2 ** 32) + b"\x00"), 58,
     "string count 4294967296 exceeds the 1 bytes left in the STRINGS section"),
    ("huge string length", forge_with(STRINGS=b"\x01" + uvarint(2 ** 62) + b"\x00"), 59,
     f"string length {2 ** 62} overruns the STRINGS section (1 bytes left)"),
    ("invalid UTF-8", forge_with(STRINGS=b"\x01\x03a\xffb\x00"), 61,
     "invalid UTF-8 in string 0 (invalid start byte)"),
    ("UTF-8 surrogate", forge_with(STRINGS=b"\x00\x02\x01x\x03\xed\xa0\x80"), 63,
     "invalid UTF-8 in string 1 (invalid continuation byte)"),
    ("strings trailing bytes", forge_with(STRINGS=b"\x00\x00\x00"), 60,
     "trailing bytes inside the STRINGS section (1 unread)"),
    ("string index out of range", forge_with(CONSTANTS=b"\x01\x05\x07"), 64,
     "string index 7 out of range for string constant (0 strings)"),
    ("unknown constant tag", forge_with(CONSTANTS=b"\x02\x00\x09"), 64, "unknown constant tag 9"),
    ("truncated float", forge_with(CONSTANTS=b"\x01\x04\x00\x00\x00"), 64,
     "truncated CONSTANTS section (expected 8-byte float constant)"),
    ("huge constant count", forge_with(CONSTANTS=uvarint(2 ** 63)), 62,
     f"constant count {2 ** 63} exceeds the 0 bytes left in the CONSTANTS section"),
    ("int constant too long", forge_with(CONSTANTS=b"\x01\x03" + b"\x80" * 5000 + b"\x00"), 65,
     f"varint too long (integer constant: more than {snb.MAX_INT_BYTES} bytes)"),
    ("int constant cut", forge_with(CONSTANTS=b"\x01\x03\x80\x80"), 64,
     "truncated CONSTANTS section (expected integer constant)"),
    ("unknown code kind", forge_with(STRINGS=b"\x01\x01f\x00", CODE=b"\x00\x01\x00\x07"), 70,
     "unknown code kind 7"),
    ("code name out of range", forge_with(CODE=b"\x00\x01\x00\x00"), 67,
     "string index 0 out of range for code name (0 strings)"),
    ("huge code length", forge_with(STRINGS=b"\x01\x01f\x00",
                                    CODE=b"\x00\x01\x00\x01\x00\x00\x00\x00" + uvarint(2 ** 50)),
     75, f"code length {2 ** 50} overruns the CODE section (0 bytes left)"),
    ("parameter type out of range",
     forge_with(STRINGS=b"\x01\x01f\x00", CODE=b"\x00\x01\x00\x01\x00\x01\x00\x05"), 74,
     "string index 4 out of range for parameter type (1 strings)"),
    ("code section cut short", forge_with(STRINGS=b"\x01\x01f\x00", CODE=b"\x00\x01\x00\x01"), 71,
     "truncated CODE section (expected source index)"),
    ("module name out of range", forge_with(MODULES=b"\x01\x00"), 70,
     "string index 0 out of range for module name (0 strings)"),
    ("manifest count overruns", forge_with(MANIFEST=b"\x01"), 72,
     "action count 1 exceeds the 0 bytes left in the MANIFEST section"),
    ("manifest action name out of range", forge_with(MANIFEST=b"\x01\x00\x00\x00\x00\x00"), 73,
     "string index 0 out of range for action name (0 strings)"),
    ("debug trailing bytes", forge_with(DEBUG=b"\x00\xff"), 78,
     "trailing bytes inside the DEBUG section (1 unread)"),
    ("huge source count", forge_with(DEBUG=uvarint(2 ** 32)), 77,
     "source count 4294967296 exceeds the 0 bytes left in the DEBUG section"),
]


@pytest.mark.parametrize("data, offset, message",
                         [pytest.param(d, o, m, id=name) for name, d, o, m in MALFORMED])
def test_malformed(data, offset, message):
    with pytest.raises(SnbFormatError) as info:
        snb.load(data)
    assert (info.value.offset, info.value.message) == (offset, message)
    assert str(info.value) == f"offset {offset}: {message}"


def test_forged_tables_still_load_as_structure():
    # Out-of-range code and source indices are the verifier's business, not the loader's.
    data = forge_with(CODE=b"\x07\x00", MODULES=b"\x00")
    assert snb.load(data).entry == 7


# ----------------------------------------------------------------------------- properties

names = st.text(max_size=8)
annotations = st.one_of(st.none(), st.sampled_from(["Int", "Array<String>", "Map<A, B<C>>"]))
floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.0])
constants = st.one_of(st.none(), st.booleans(), st.integers(),
                      st.integers(min_value=-(2 ** 300), max_value=2 ** 300), floats, names)


@st.composite
def positions(draw):
    offsets = sorted(set(draw(st.lists(st.integers(0, 500), max_size=6))))
    return tuple((off, draw(st.integers(0, 10 ** 6)), draw(st.integers(0, 300))) for off in offsets)


@st.composite
def code_objects(draw):
    params = tuple(draw(st.lists(names, max_size=3)))
    return CodeObject(
        name=draw(names),
        kind=draw(st.sampled_from(CodeKind)),
        source=draw(st.integers(0, 2 ** 40)),
        params=params,
        param_types=tuple(draw(annotations) for _ in params),
        return_type=draw(annotations),
        max_stack=draw(st.integers(0, 2 ** 20)),
        code=draw(st.binary(max_size=40)),
        positions=draw(positions()),
    )


programs = st.builds(
    Program,
    strings=st.lists(names, max_size=6).map(tuple),
    constants=st.lists(constants, max_size=8).map(tuple),
    codes=st.lists(code_objects(), max_size=3).map(tuple),
    modules=st.lists(st.builds(ModuleEntry, names, names, names, st.integers(-3, 2 ** 33)),
                     max_size=3).map(tuple),
    sources=st.lists(st.builds(Source, names, st.text(max_size=40)), max_size=2).map(tuple),
    entry=st.integers(0, 2 ** 32),
    source_hash=st.binary(min_size=32, max_size=32),
)


def canonical(p: Program) -> Program:
    """Make == exact for constants: NaN equal to itself, -0.0 != 0.0, 1 != 1.0 != True."""
    def key(c):
        return (type(c).__name__, struct.pack("<d", c) if isinstance(c, float) else c)
    return replace(p, constants=tuple(key(c) for c in p.constants))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs)
def test_round_trip(p):
    data = snb.dump(p)
    back = snb.load(data)
    assert canonical(back) == canonical(p)
    if not any(isinstance(c, float) and math.isnan(c) for c in p.constants):
        assert back == p
    assert snb.dump(back) == data


def _load_or_format_error(data: bytes):
    try:
        return snb.load(data)
    except SnbFormatError as e:
        assert 0 <= e.offset <= len(data)
        assert e.message
        return None


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes(data):
    _load_or_format_error(data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_body_after_a_valid_header(body):
    _load_or_format_error(with_crc(HEADER + body))


mutations = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10 ** 6), st.integers(0, 7)),
    st.tuples(st.just("set"), st.integers(0, 10 ** 6), st.integers(0, 255)),
    st.tuples(st.just("cut"), st.integers(0, 10 ** 6)),
    st.tuples(st.just("insert"), st.integers(0, 10 ** 6), st.binary(min_size=1, max_size=12)),
    st.tuples(st.just("delete"), st.integers(0, 10 ** 6), st.integers(1, 12)),
    st.tuples(st.just("splice"), st.integers(0, 10 ** 6), st.integers(0, 10 ** 6),
              st.integers(1, 30)),
)


def mutate(data: bytes, ops) -> bytes:
    b = bytearray(data)
    for op, *args in ops:
        if not b:
            break
        i = args[0] % len(b)
        if op == "flip":
            b[i] ^= 1 << args[1]
        elif op == "set":
            b[i] = args[1]
        elif op == "cut":
            del b[i:]
        elif op == "insert":
            b[i:i] = args[1]
        elif op == "delete":
            del b[i:i + args[1]]
        elif op == "splice":
            j = args[1] % len(b)
            b[i:i] = b[j:j + args[2]]
    return bytes(b)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutations, min_size=1, max_size=4), st.booleans())
def test_mutated_valid_dump(ops, fix_crc):
    # Mutate the body only when recomputing the CRC, so that the structure is what gets tested.
    data = recrc(mutate(VALID[:-4], ops) + b"\0\0\0\0") if fix_crc else mutate(VALID, ops)
    _load_or_format_error(data)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs, st.lists(mutations, min_size=1, max_size=3))
def test_mutated_random_dump(p, ops):
    data = snb.dump(p)
    _load_or_format_error(with_crc(mutate(data[:-4], ops)))


# ----------------------------------------------------------------------------- position tables

def _plain_position_table(entries) -> bytes:
    """The table format written out entry by entry: count, then per entry the offset delta,
    the zigzag line delta and the column, each an unsigned varint."""
    def zz(n):
        return 2 * n if n >= 0 else -2 * n - 1
    out = uvarint(len(entries))
    prev_off = prev_line = 0
    for off, line, col in entries:
        out += uvarint(off - prev_off) + uvarint(zz(line - prev_line)) + uvarint(col)
        prev_off, prev_line = off, line
    return out


@st.composite
def position_tables(draw):
    """Tables of small steps (each entry three one-byte varints) with, at one entry, an offset
    step, line step or column at or just past a one-byte limit, or not."""
    n = draw(st.integers(0, 30))
    steps = [draw(st.integers(0 if i == 0 else 1, 4)) for i in range(n)]
    line_steps = [draw(st.integers(-3, 3)) for _ in range(n)]
    cols = [draw(st.integers(1, 40)) for _ in range(n)]
    if n:
        at = draw(st.integers(0, n - 1))
        which, value = draw(st.sampled_from([
            (None, None), (steps, 0x7f), (steps, 0x80), (line_steps, -64), (line_steps, -65),
            (line_steps, 63), (line_steps, 64), (cols, 0), (cols, 0x7f), (cols, 0x80)]))
        if which is not None:
            which[at] = value
    out, off, line = [], 0, 10 ** 4
    for step, line_step, col in zip(steps, line_steps, cols):
        off, line = off + step, line + line_step
        out.append((off, line, col))
    return tuple(out)


@settings(max_examples=300, deadline=None)
@given(position_tables())
def test_position_tables_encode_as_written_out_and_load_back(table):
    from sensevm.bytecode.program import encode_positions
    assert encode_positions(table) == _plain_position_table(table)
    code = CodeObject("<main>", CodeKind.MODULE, 0, max_stack=0, code=b"", positions=table)
    p = Program(strings=(), constants=(), codes=(code,), sources=(Source("m.sns", ""),))
    assert snb.load(snb.dump(p)).codes[0].positions == table
