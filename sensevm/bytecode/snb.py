"""The .snb file format: dump() a Program to bytes and load() it back, refusing malformed files with SnbFormatError.

Layout (little-endian)::

    offset  size  field
         0     8  magic b"\\x89SNB\\r\\n\\x1a\\n"
         8     2  format major      (another major is refused)
        10     2  format minor      (any minor of our major is read, an older one with the
                                    fingerprint of its own table: opcodes.FINGERPRINTS)
        12     4  flags             (no bits are defined yet: any set bit is refused)
        16     8  opcodes.FINGERPRINT (of the table the file's minor defines)
        24    32  SHA-256 of the main source (Program.source_hash)
        56     …  sections: id u8, size uvarint, payload
      […]-4    4  CRC32 (zlib.crc32) of every byte before it

Sections appear once each, in the order of ``Section`` (STRINGS, CONSTANTS, CODE, MODULES,
MANIFEST, DEBUG), so that every section can be read in one pass against the ones before it.
A CUSTOM section (id 0) may appear anywhere and is skipped. Every count, length and index is
an unsigned LEB128 varint; signed values are zigzag-encoded first.

STRINGS holds two lists, each ``count, then (byte length, UTF-8)``: first ``Program.strings``
(what NAME and TYPE operands index), then the further strings that only the file's own
tables use (code names, paths, source texts, string constants). Every "string index" in the
other sections indexes the two lists end to end.

``load`` reads the fixed header the way Lua's ``checkHeader`` does, one field and one message
at a time: the header says how to read the rest (another major may not even have the same
trailer), and a file from another build of the VM has a good checksum and deserves the precise
reason. Then the CRC, before any section, so that damage anywhere after the header reads as
corruption. The structural checks stay total even for a forged file with a correct CRC: every
read is bounded by its section, and every count is checked against the bytes left before
anything is allocated for it. The CRC is for accidents; hostile bytecode is the verifier's
business.
"""

from __future__ import annotations

import struct
import zlib
from sys import intern
from itertools import accumulate, chain

from sensevm.base.errors import SnbFormatError
from sensevm.bytecode.opcodes import (FINGERPRINT, FINGERPRINTS, FORMAT_MAJOR, FORMAT_MINOR,
                                      TABLE_ENDS, int_enum)

# The second look's roles, by their number in an action's role list (the manifest). New roles
# are appended: a file that uses none of them is byte for byte what it was.
SEND_ROLES = ("recipient", "amount", "link", "code", "content", "credential")
from sensevm.bytecode.program import (ActionDecl, AgentDecl, ToolDecl, CodeKind, CodeObject,
                                      ModuleEntry, Program, Source, encode_positions, unzigzag,
                                      write_uvarint, zigzag)

MAGIC = b"\x89SNB\r\n\x1a\n"
HEADER_SIZE = 56
TRAILER_SIZE = 4
KNOWN_FLAGS = 0          # no flag bits are defined in format 1.x


def is_snb(data: bytes) -> bool:
    """Does ``data`` start as a .snb file does (whatever follows)?"""
    return data.startswith(MAGIC)


# Ordinary varints (counts, lengths, indices) fit in 64 bits; more bytes than that is malformed.
MAX_VARINT_BYTES = 10
# Int constants are unbounded in Sense, but a literal that needs more than 4096 varint bytes
# (about 8600 decimal digits, twice what the host will even print) is not from a real program.
MAX_INT_BYTES = 4096

# Header fields: (offset, size) in the order they are read.
_MAGIC_AT, _VERSION_AT, _FLAGS_AT, _FINGERPRINT_AT, _HASH_AT = 0, 8, 12, 16, 24


@int_enum
class Section:
    CUSTOM = 0
    STRINGS = 1
    CONSTANTS = 2
    CODE = 3
    MODULES = 4
    MANIFEST = 5
    DEBUG = 6


_REQUIRED = tuple(s for s in Section if s is not Section.CUSTOM)


@int_enum
class Tag:
    """The tag byte in front of each constant."""
    NIL = 0
    FALSE = 1
    TRUE = 2
    INT = 3
    FLOAT = 4
    STR = 5


_DOUBLE = struct.Struct("<d")
# A string of at least this many bytes is written and read without an intermediate copy.
_OWN_PIECE = 1 << 16
_NAME_LENGTH = 64          # the longest string the loader interns when it is a name


# ============================================================================= dump

class _StringPool:
    """Program.strings at their own indices, then every other string the file needs, once each."""

    def __init__(self, strings: tuple[str, ...]):
        self.strings = list(strings)
        self.named = len(strings)
        self.index: dict[str, int] = {}
        for i, s in enumerate(strings):
            self.index.setdefault(s, i)

    def __call__(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"expected a str for the string table, got {type(s).__name__}")
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.strings)
            self.strings.append(s)
        return i

    def payload(self) -> list[bytes]:
        """The STRINGS section as pieces to be joined into the file: a long string's UTF-8 is
        a piece of its own, so it is copied once more (into the file), not twice (into a
        growing section and the section's bytes)."""
        pieces = []
        out = bytearray()
        for part in (self.strings[:self.named], self.strings[self.named:]):
            write_uvarint(out, len(part))
            for s in part:
                raw = s.encode("utf-8")
                write_uvarint(out, len(raw))
                if len(raw) < _OWN_PIECE:
                    out += raw
                else:
                    pieces.append(bytes(out))
                    pieces.append(raw)
                    out = bytearray()
        pieces.append(bytes(out))
        return pieces


def _dump_constants(program: Program, pool: _StringPool) -> bytes:
    out = bytearray()
    write_uvarint(out, len(program.constants))
    for c in program.constants:
        # bool before int: True is an int to Python but not to Sense.
        if c is None:
            out.append(Tag.NIL)
        elif isinstance(c, bool):
            out.append(Tag.TRUE if c else Tag.FALSE)
        elif isinstance(c, int):
            n = zigzag(int(c))
            if (n.bit_length() + 6) // 7 > MAX_INT_BYTES:
                raise ValueError(f"integer constant too large for .snb ({n.bit_length()} bits)")
            out.append(Tag.INT)
            write_uvarint(out, n)
        elif isinstance(c, float):
            out.append(Tag.FLOAT)
            out += _DOUBLE.pack(c)
        elif isinstance(c, str):
            out.append(Tag.STR)
            write_uvarint(out, pool(c))
        else:
            raise TypeError(f"cannot store a constant of type {type(c).__name__} in .snb")
    return bytes(out)


def _write_optional(out: bytearray, pool: _StringPool, s) -> None:
    write_uvarint(out, 0 if s is None else 1 + pool(s))


def _dump_code(program: Program, pool: _StringPool) -> bytes:
    out = bytearray()
    write_uvarint(out, program.entry)
    write_uvarint(out, len(program.codes))
    for code in program.codes:
        if len(code.params) != len(code.param_types):
            # The format stores one type per parameter; the verifier would refuse this anyway.
            raise ValueError(f"code {code.name!r}: {len(code.params)} params but "
                             f"{len(code.param_types)} param_types")
        write_uvarint(out, pool(code.name))
        out.append(CodeKind(code.kind))
        write_uvarint(out, code.source)
        write_uvarint(out, len(code.params))
        for p in code.params:
            write_uvarint(out, pool(p))
        for t in code.param_types:
            _write_optional(out, pool, t)
        _write_optional(out, pool, code.return_type)
        write_uvarint(out, code.max_stack)
        write_uvarint(out, len(code.code))
        out += code.code
        out += encode_positions(code.positions)
    return bytes(out)


def _dump_modules(program: Program, pool: _StringPool) -> bytes:
    out = bytearray()
    write_uvarint(out, len(program.modules))
    for m in program.modules:
        for s in (m.name, m.rel, m.path):
            write_uvarint(out, pool(s))
        write_uvarint(out, zigzag(m.code))
        _write_optional(out, pool, m.error)
        write_uvarint(out, m.error_line)
        write_uvarint(out, m.error_col)
    return bytes(out)


def _dump_manifest(program: Program, pool: _StringPool) -> bytes:
    # The declared actions: what a program can do to the world, readable without running it.
    out = bytearray()
    write_uvarint(out, len(program.actions))
    for a in program.actions:
        write_uvarint(out, pool(a.name))
        out.append((1 if a.reversible else 0) | (2 if a.approval else 0)
                   | (4 if a.immediate else 0) | (8 if a.sends else 0)
                   | (16 if a.roles else 0))
        _write_optional(out, pool, a.capability)
        write_uvarint(out, a.body)
        write_uvarint(out, zigzag(a.rollback))
        if a.roles:
            write_uvarint(out, len(a.roles))
            for param, role in a.roles:
                write_uvarint(out, pool(param))
                out.append(SEND_ROLES.index(role))
    write_uvarint(out, len(program.tools))
    for t in program.tools:
        write_uvarint(out, pool(t.name))
        out.append((1 if t.is_async else 0) | (2 if t.trusted else 0))
        _write_optional(out, pool, t.capability)
        _write_optional(out, pool, t.description)
        write_uvarint(out, t.body)
    write_uvarint(out, len(program.agents))
    for g in program.agents:
        write_uvarint(out, pool(g.name))
        out.append(1 if g.is_async else 0)
        _write_optional(out, pool, g.doc)
        write_uvarint(out, g.body)
    return bytes(out)


def _dump_debug(program: Program, pool: _StringPool) -> bytes:
    out = bytearray()
    write_uvarint(out, len(program.sources))
    for src in program.sources:
        write_uvarint(out, pool(src.path))
        write_uvarint(out, pool(src.text))
    return bytes(out)


def dump(program: Program) -> bytes:
    """Serialise ``program``; the same Program always gives the same bytes."""
    if program.flags & ~KNOWN_FLAGS:
        raise ValueError(f"Program.flags has bits that format {FORMAT_MAJOR}.{FORMAT_MINOR} "
                         f"does not define: 0x{program.flags & ~KNOWN_FLAGS:x}")
    if len(program.source_hash) != 32:
        raise ValueError("Program.source_hash must be 32 bytes (a SHA-256 digest)")
    pool = _StringPool(program.strings)
    # STRINGS comes first in the file but is built last: the other sections add to the pool.
    payloads = [
        (Section.CONSTANTS, _dump_constants(program, pool)),
        (Section.CODE, _dump_code(program, pool)),
        (Section.MODULES, _dump_modules(program, pool)),
        (Section.MANIFEST, _dump_manifest(program, pool)),
        (Section.DEBUG, _dump_debug(program, pool)),
    ]
    payloads.insert(0, (Section.STRINGS, pool.payload()))

    # Joined once at the end, so the file is not also held in a growing bytearray.
    head = bytearray(MAGIC)
    head += struct.pack("<HHI", FORMAT_MAJOR, FORMAT_MINOR, program.flags)
    head += FINGERPRINT
    head += bytes(program.source_hash)
    pieces = []
    for sid, payload in payloads:
        parts = payload if isinstance(payload, list) else [payload]
        head.append(sid)
        write_uvarint(head, sum(map(len, parts)))
        pieces.append(bytes(head))
        pieces.extend(parts)
        head = bytearray()
    crc = 0
    for piece in pieces:
        crc = zlib.crc32(piece, crc)
    pieces.append(struct.pack("<I", crc))
    return b"".join(pieces)


# ============================================================================= load

class _Reader:
    """A cursor over ``data[pos:end]``; every read is bounded and fails with SnbFormatError."""

    def __init__(self, data: bytes, pos: int, end: int, where: str):
        self.data = data
        self.pos = pos
        self.end = end
        self.where = where          # "file" or "STRINGS section", for messages
        self.strings: list[str] = []

    @property
    def left(self) -> int:
        return self.end - self.pos

    def truncated(self, at: int, what: str) -> SnbFormatError:
        return SnbFormatError(at, f"truncated {self.where} (expected {what})")

    def u8(self, what: str) -> int:
        if self.pos >= self.end:
            raise self.truncated(self.pos, what)
        b = self.data[self.pos]
        self.pos += 1
        return b

    def raw(self, n: int, what: str) -> bytes:
        if n > self.left:
            raise self.truncated(self.pos, what)
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def view(self, n: int, what: str) -> memoryview:
        """``raw``, without copying the bytes."""
        if n > self.left:
            raise self.truncated(self.pos, what)
        b = memoryview(self.data)[self.pos:self.pos + n]
        self.pos += n
        return b

    def uvarint(self, what: str, max_bytes: int = MAX_VARINT_BYTES) -> int:
        start = self.pos
        data, pos, end = self.data, self.pos, self.end
        value = shift = 0
        for _ in range(max_bytes):
            if pos >= end:
                raise self.truncated(start, what)
            b = data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                self.pos = pos
                return value
        raise SnbFormatError(start, f"varint too long ({what}: more than {max_bytes} bytes)")

    def count(self, what: str) -> int:
        """A count of items that take at least one byte each, so it cannot exceed the bytes left."""
        start = self.pos
        n = self.uvarint(what)
        if n > self.left:
            raise SnbFormatError(start, f"{what} {n} exceeds the {self.left} bytes left "
                                        f"in the {self.where}")
        return n

    def length(self, what: str) -> int:
        """A byte length, which cannot exceed the bytes left."""
        start = self.pos
        n = self.uvarint(what)
        if n > self.left:
            raise SnbFormatError(start, f"{what} {n} overruns the {self.where} "
                                        f"({self.left} bytes left)")
        return n

    def string(self, what: str) -> str:
        start = self.pos
        i = self.uvarint(what)
        return self._string_at(start, i, what)

    def optional_string(self, what: str):
        start = self.pos
        i = self.uvarint(what)
        return None if i == 0 else self._string_at(start, i - 1, what)

    def _string_at(self, start: int, i: int, what: str) -> str:
        if i >= len(self.strings):
            raise SnbFormatError(start, f"string index {i} out of range for {what} "
                                        f"({len(self.strings)} strings)")
        return self.strings[i]


def _check_header(data: bytes) -> None:
    """Magic, version, flags, fingerprint, then the checksum: the first failure is reported."""
    n = len(data)
    if data[:8] != MAGIC[:min(n, 8)]:
        raise SnbFormatError(_MAGIC_AT, "not a .snb file (bad magic)")
    for field_at, field_end in ((_MAGIC_AT, _VERSION_AT), (_VERSION_AT, _FLAGS_AT)):
        if n < field_end:
            raise SnbFormatError(field_at, "truncated header")
    major, minor = struct.unpack_from("<HH", data, _VERSION_AT)
    if major != FORMAT_MAJOR:
        raise SnbFormatError(_VERSION_AT, f"unsupported format version {major}.{minor} "
                                          f"(this VM reads {FORMAT_MAJOR}.x)")
    if n < _FINGERPRINT_AT:
        raise SnbFormatError(_FLAGS_AT, "truncated header")
    flags, = struct.unpack_from("<I", data, _FLAGS_AT)
    if flags & ~KNOWN_FLAGS:
        raise SnbFormatError(_FLAGS_AT, f"unknown flag bits 0x{flags & ~KNOWN_FLAGS:x}")
    if n < _HASH_AT:
        raise SnbFormatError(_FINGERPRINT_AT, "truncated header")
    fingerprint = data[_FINGERPRINT_AT:_HASH_AT]
    # An older minor's table is a prefix of ours, and its files carry that table's fingerprint.
    expected = FINGERPRINTS.get(minor, FINGERPRINT)
    if fingerprint != expected:
        raise SnbFormatError(_FINGERPRINT_AT,
                             "bytecode was built for a different instruction set "
                             f"(fingerprint {fingerprint.hex()} != {expected.hex()})")
    if n < HEADER_SIZE:
        raise SnbFormatError(_HASH_AT, "truncated header")
    if n < HEADER_SIZE + TRAILER_SIZE:
        raise SnbFormatError(HEADER_SIZE, "truncated file (no room for the checksum)")
    body_end = n - TRAILER_SIZE
    stored, = struct.unpack_from("<I", data, body_end)
    if zlib.crc32(memoryview(data)[:body_end]) != stored:      # (a slice would copy the file)
        raise SnbFormatError(body_end, "checksum mismatch (file is corrupted)")


def _load_strings(r: _Reader, out: dict) -> None:
    pool: list[str] = []
    named = None
    for part in ("string count", "extra string count"):
        for _ in range(r.count(part)):
            n = r.length("string length")
            at = r.pos
            try:
                if n <= _NAME_LENGTH:
                    s = r.raw(n, "string bytes").decode("utf-8")
                    # A name is interned as the generated code's literals are, so that a
                    # scope's dict finds it by identity rather than comparing the text.
                    pool.append(intern(s) if s.isidentifier() else s)
                elif n < _OWN_PIECE:
                    pool.append(r.raw(n, "string bytes").decode("utf-8"))
                else:
                    pool.append(str(r.view(n, "string bytes"), "utf-8"))
            except UnicodeDecodeError as e:
                raise SnbFormatError(at + e.start,
                                     f"invalid UTF-8 in string {len(pool)} ({e.reason})") from None
        if named is None:
            named = len(pool)
    r.strings[:] = pool
    out["strings"] = tuple(pool[:named])


def _load_constants(r: _Reader, out: dict) -> None:
    consts = []
    for _ in range(r.count("constant count")):
        at = r.pos
        tag = r.u8("constant tag")
        if tag == Tag.NIL:
            consts.append(None)
        elif tag == Tag.FALSE:
            consts.append(False)
        elif tag == Tag.TRUE:
            consts.append(True)
        elif tag == Tag.INT:
            consts.append(unzigzag(r.uvarint("integer constant", MAX_INT_BYTES)))
        elif tag == Tag.FLOAT:
            consts.append(_DOUBLE.unpack(r.raw(8, "8-byte float constant"))[0])
        elif tag == Tag.STR:
            consts.append(r.string("string constant"))
        else:
            raise SnbFormatError(at, f"unknown constant tag {tag}")
    out["constants"] = tuple(consts)


_UNZIGZAG_BYTE = tuple(unzigzag(z) for z in range(0x80))


def _load_positions(r: _Reader) -> tuple:
    """A position table (see encode_positions)."""
    count = r.count("position count")
    if not count:
        return ()
    off = r.uvarint("position offset delta")
    line = unzigzag(r.uvarint("position line delta"))
    col = r.uvarint("position column")
    rest = 3 * (count - 1)
    table = r.data[r.pos:min(r.pos + rest, r.end)]
    if len(table) == rest and table.isascii():
        # Every other entry three one-byte varints (no byte has its high bit set, so each
        # varint ends where it starts): the usual table, decoded a column at a time, since it
        # has an entry per instruction of the program.
        r.pos += rest
        return tuple(zip(accumulate(table[0::3], initial=off),
                         accumulate(map(_UNZIGZAG_BYTE.__getitem__, table[1::3]), initial=line),
                         chain((col,), table[2::3])))
    entries = [(off, line, col)]
    for _ in range(count - 1):
        off += r.uvarint("position offset delta")
        line += unzigzag(r.uvarint("position line delta"))
        entries.append((off, line, r.uvarint("position column")))
    return tuple(entries)


def _load_code(r: _Reader, out: dict) -> None:
    out["entry"] = r.uvarint("entry code index")
    codes = []
    for _ in range(r.count("code object count")):
        name = r.string("code name")
        at = r.pos
        kind = r.u8("code kind")
        if kind not in CodeKind._value2member_map_:
            raise SnbFormatError(at, f"unknown code kind {kind}")
        source = r.uvarint("source index")
        params = tuple(r.string("parameter name") for _ in range(r.count("parameter count")))
        param_types = tuple(r.optional_string("parameter type") for _ in params)
        return_type = r.optional_string("return type")
        max_stack = r.uvarint("max_stack")
        code = r.raw(r.length("code length"), "code bytes")
        positions = _load_positions(r)
        codes.append(CodeObject(name, CodeKind(kind), source, params, param_types, return_type,
                                max_stack, code, positions))
    out["codes"] = tuple(codes)


def _load_modules(r: _Reader, out: dict) -> None:
    modules = []
    for _ in range(r.count("module count")):
        name = r.string("module name")
        rel = r.string("module relative path")
        path = r.string("module path")
        code = unzigzag(r.uvarint("module code index"))
        error = r.optional_string("module compile error")
        line = r.uvarint("module error line")
        col = r.uvarint("module error column")
        modules.append(ModuleEntry(name, rel, path, code, error, line, col))
    out["modules"] = tuple(modules)


def _load_manifest(r: _Reader, out: dict) -> None:
    actions = []
    for _ in range(r.count("action count")):
        name = r.string("action name")
        at = r.pos
        bits = r.u8("action flags")
        if bits & ~31:
            raise SnbFormatError(at, f"unknown action flag bits 0x{bits & ~31:x}")
        if bits & 5 == 5:
            raise SnbFormatError(at, "an action cannot be both reversible and immediate")
        if bits & 16 and not bits & 8:
            raise SnbFormatError(at, "an action has second-look roles but no 'sends' flag")
        capability = r.optional_string("action capability")
        body = r.uvarint("action body code index")
        rollback = unzigzag(r.uvarint("action rollback code index"))
        roles = []
        if bits & 16:
            for _ in range(r.count("action role count")):
                param = r.string("action role parameter")
                at = r.pos
                role = r.u8("action role")
                if role >= len(SEND_ROLES):
                    raise SnbFormatError(at, f"unknown second-look role {role}")
                roles.append((param, SEND_ROLES[role]))
            if not roles:
                raise SnbFormatError(at, "an action's role list is empty")
        actions.append(ActionDecl(name, bool(bits & 1), capability, bool(bits & 2), body, rollback,
                                  immediate=bool(bits & 4), sends=bool(bits & 8),
                                  roles=tuple(roles)))
    out["actions"] = tuple(actions)
    tools = []
    for _ in range(r.count("tool count")):
        name = r.string("tool name")
        at = r.pos
        bits = r.u8("tool flags")
        if bits & ~3:
            raise SnbFormatError(at, f"unknown tool flag bits 0x{bits & ~3:x}")
        capability = r.optional_string("tool capability")
        description = r.optional_string("tool description")
        body = r.uvarint("tool body code index")
        tools.append(ToolDecl(name, capability, description, bool(bits & 1), body,
                              trusted=bool(bits & 2)))
    out["tools"] = tuple(tools)
    agents = []
    for _ in range(r.count("agent count")):
        name = r.string("agent name")
        at = r.pos
        bits = r.u8("agent flags")
        if bits & ~1:
            raise SnbFormatError(at, f"unknown agent flag bits 0x{bits & ~1:x}")
        doc = r.optional_string("agent doc")
        body = r.uvarint("agent body code index")
        agents.append(AgentDecl(name, bool(bits & 1), doc, body))
    out["agents"] = tuple(agents)


def _load_debug(r: _Reader, out: dict) -> None:
    out["sources"] = tuple(Source(r.string("source path"), r.string("source text"))
                           for _ in range(r.count("source count")))


_LOADERS = {
    Section.STRINGS: _load_strings,
    Section.CONSTANTS: _load_constants,
    Section.CODE: _load_code,
    Section.MODULES: _load_modules,
    Section.MANIFEST: _load_manifest,
    Section.DEBUG: _load_debug,
}


def load(data: bytes) -> Program:
    """Parse a .snb file. Every malformed input raises SnbFormatError(offset, message)."""
    data = bytes(data)
    _check_header(data)
    body_end = len(data) - TRAILER_SIZE
    top = _Reader(data, HEADER_SIZE, body_end, "file")
    fields: dict = {"source_hash": data[_HASH_AT:HEADER_SIZE], "flags": 0}
    strings: list[str] = []
    expected = 0                       # index into _REQUIRED of the next section to read
    while top.pos < body_end:
        at = top.pos
        sid = top.u8("section id")
        if sid != Section.CUSTOM:
            if sid not in Section._value2member_map_:
                raise SnbFormatError(at, f"unknown section id {sid}")
            section = Section(sid)
            if expected < len(_REQUIRED) and section > _REQUIRED[expected]:
                raise SnbFormatError(at, f"missing {_REQUIRED[expected].name} section "
                                         f"(found {section.name})")
            if expected > 0 and section < _REQUIRED[expected - 1]:
                raise SnbFormatError(at, f"{section.name} section out of order "
                                         f"(after {_REQUIRED[expected - 1].name})")
            if expected > 0 and section == _REQUIRED[expected - 1]:
                raise SnbFormatError(at, f"duplicate {section.name} section")
        name = Section(sid).name
        size_at = top.pos
        size = top.uvarint(f"{name} section size")
        if size > top.left:
            raise SnbFormatError(size_at, f"{name} section size {size} overruns the file "
                                          f"({top.left} bytes left before the checksum)")
        start = top.pos
        top.pos += size
        if sid == Section.CUSTOM:
            continue
        r = _Reader(data, start, start + size, f"{name} section")
        r.strings = strings
        _LOADERS[Section(sid)](r, fields)
        if r.pos != r.end:
            raise SnbFormatError(r.pos, f"trailing bytes inside the {name} section "
                                        f"({r.left} unread)")
        expected += 1
    if expected < len(_REQUIRED):
        raise SnbFormatError(body_end, f"missing {_REQUIRED[expected].name} section")
    minor = struct.unpack_from("<H", data, _VERSION_AT + 2)[0]
    if minor < FORMAT_MINOR:
        _check_minor_opcodes(fields["codes"], minor)
    return Program(**fields)


def _check_minor_opcodes(codes, minor: int) -> None:
    """A file of an older minor uses only the opcodes that minor defined (opcodes.TABLE_ENDS):
    one that claims 5.1 but holds a 5.2 instruction is not what its header says. Bytes that do
    not decode are left to the verifier, which names the problem."""
    from sensevm.bytecode.decode import DecodeError, decode
    end = TABLE_ENDS[minor]
    for index, code in enumerate(codes):
        try:
            for ins in decode(code.code):
                if ins.op >= end:
                    raise SnbFormatError(_VERSION_AT, f"format {FORMAT_MAJOR}.{minor} has no "
                                                      f"opcode {ins.op.name} (code {index}, "
                                                      f"offset {ins.offset})")
        except DecodeError:
            continue
