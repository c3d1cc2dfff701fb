"""What a fuzzed .snb file may do, and the mutations that make them; shared by the hypothesis
properties (tests/test_snb_fuzz.py) and the atheris target (fuzz/snb_loader.py).

The oracle, ``check(data)``: loading and verifying any bytes ends in a Program that passed the
verifier, an ``SnbFormatError`` or a ``VerifyError``, each with a message, in bounded time; and
a file that does load and verify runs under a step budget to the end, to a Sense error, or to
the budget, never to another Python exception escaping the VM (an IndexError from an operand
the verifier let through, an AttributeError from a value of the wrong kind ...).

Seeds are valid files compiled from the test corpus and the examples (this module imports the
compiler; the VM path never imports this module).
"""

from __future__ import annotations

import glob
import io
import os
import random
import signal
import struct
import sys
import threading
import time
import zlib
from dataclasses import replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from sensevm.bytecode import snb  # noqa: E402
from sensevm.bytecode.decode import DecodeError, decode, encode              # noqa: E402
from sensevm.base.errors import SenseError, SnbFormatError, VerifyError  # noqa: E402
from sensevm.bytecode.opcodes import Op, Operand                             # noqa: E402
from sensevm.bytecode.program import CodeKind, write_uvarint                 # noqa: E402

# Corpus directories whose programs are not useful seeds: they do not compile, or they reach
# outside the process (model providers) when run.
_SKIP_DIRS = {"syntax_errors", "models"}

HEADER_SIZE = snb.HEADER_SIZE


# ----------------------------------------------------------------------------- seeds

def seed_paths(every: int = 1) -> list[str]:
    """Every ``every``-th corpus program (by sorted path), then every example."""
    corpus = sorted(p for p in glob.glob(os.path.join(ROOT, "tests", "programs", "*", "*.sns"))
                    if os.path.basename(os.path.dirname(p)) not in _SKIP_DIRS)
    return corpus[::every] + sorted(glob.glob(os.path.join(ROOT, "examples", "*.sns")))


_SEEDS: dict[int, list[tuple[str, bytes]]] = {}


def seeds(every: int = 25) -> list[tuple[str, bytes]]:
    """``(name, .snb bytes)`` of valid files compiled from corpus programs and examples."""
    if every not in _SEEDS:
        from sensec.driver import compile_file
        out = []
        for path in seed_paths(every):
            try:
                program = compile_file(path, defer_import_errors=True)
            except SenseError:
                continue                    # a corpus program that tests a compile error
            out.append((os.path.relpath(path, ROOT), snb.dump(program)))
        _SEEDS[every] = out
    return _SEEDS[every]


# ----------------------------------------------------------------------------- byte helpers

def uvarint(n: int) -> bytes:
    out = bytearray()
    write_uvarint(out, n)
    return bytes(out)


def with_crc(body: bytes) -> bytes:
    return body + struct.pack("<I", zlib.crc32(body))


def recrc(data: bytes) -> bytes:
    """``data`` with its checksum recomputed: the bytes get past the integrity check."""
    return with_crc(data[:-4]) if len(data) >= HEADER_SIZE + 4 else data


def sections(data: bytes) -> list[tuple[int, bytes]]:
    """``(id, payload)`` of each section, as far as ``data`` is well-formed."""
    out, pos, end = [], HEADER_SIZE, len(data) - 4
    while pos < end:
        sid = data[pos]
        size, shift, pos = 0, 0, pos + 1
        while True:
            if pos >= end or shift > 63:
                return out
            b = data[pos]
            pos += 1
            size |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        if pos + size > end:
            return out
        out.append((sid, data[pos:pos + size]))
        pos += size
    return out


def assemble(header: bytes, parts) -> bytes:
    """A file with a correct checksum from a header and ``(id, payload)`` sections."""
    body = bytearray(header)
    for sid, payload in parts:
        body.append(sid)
        body += uvarint(len(payload))
        body += payload
    return with_crc(bytes(body))


# ----------------------------------------------------------------------------- mutations

def mutate_bytes(data: bytes, rng: random.Random, n: int = 0) -> bytes:
    """A few random byte edits anywhere (bit flips, sets, cuts, inserts, deletes, self-splices)."""
    b = bytearray(data)
    for _ in range(n or rng.randint(1, 4)):
        if not b:
            break
        i = rng.randrange(len(b))
        op = rng.randrange(7)
        if op == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[i] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        elif op == 2:
            del b[i:]
        elif op == 3:
            b[i:i] = rng.randbytes(rng.randint(1, 8))
        elif op == 4:
            del b[i:i + rng.randint(1, 8)]
        elif op == 5:
            j = rng.randrange(len(b))
            b[i:i] = b[j:j + rng.randint(1, 24)]
        else:
            # A varint-shaped edit: a continuation byte where a last byte was, or a big number.
            b[i:i + 1] = uvarint(rng.choice((0, 127, 128, 2 ** 31, 2 ** 35, 2 ** 64, 2 ** 70)))
    return bytes(b)


def mutate_sections(data: bytes, donor: bytes, rng: random.Random) -> bytes:
    """A section-level edit of a valid file, with sizes and checksum kept right.

    Splice a section from another valid program, swap two, duplicate, drop, insert a custom
    section, or edit bytes inside one payload (its size varint recomputed).
    """
    header, parts = data[:HEADER_SIZE], sections(data)
    other = sections(donor)
    if not parts or not other:
        return recrc(mutate_bytes(data, rng))
    op = rng.randrange(6)
    i = rng.randrange(len(parts))
    if op == 0:
        sid = parts[i][0]
        same = [p for p in other if p[0] == sid]
        parts[i] = same[0] if same and rng.random() < 0.8 else rng.choice(other)
    elif op == 1:
        j = rng.randrange(len(parts))
        parts[i], parts[j] = parts[j], parts[i]
    elif op == 2:
        parts.insert(rng.randrange(len(parts) + 1), parts[i])
    elif op == 3:
        del parts[i]
    elif op == 4:
        parts.insert(rng.randrange(len(parts) + 1), (0, rng.randbytes(rng.randint(0, 6))))
    else:
        sid, payload = parts[i]
        parts[i] = (sid, mutate_bytes(payload, rng))
    return assemble(header, parts)


def forge_header(data: bytes, rng: random.Random) -> bytes:
    """A header field changed, and the checksum recomputed so that the header is what is read."""
    b = bytearray(data)
    field = rng.randrange(5)
    if field == 0:
        b[8:10] = struct.pack("<H", rng.choice((0, 3, 5, 0xFFFF)))
    elif field == 1:
        b[10:12] = struct.pack("<H", rng.randrange(0x10000))          # any minor is read
    elif field == 2:
        b[12:16] = struct.pack("<I", 1 << rng.randrange(32))
    elif field == 3:
        b[16 + rng.randrange(8)] ^= 1 << rng.randrange(8)
    else:
        b[24:56] = rng.randbytes(32)                                   # only a hint: still loads
    return recrc(bytes(b))


# The instruction-level mutations: a well-formed container around bad bytecode or bad tables.

def _encode_all(instructions) -> bytes:
    return b"".join(encode(ins.op, ins.args) for ins in instructions)


def _limit(kind, program) -> int:
    return {Operand.CONST: len(program.constants), Operand.NAME: len(program.strings),
            Operand.TYPE: len(program.strings), Operand.CODE: len(program.codes),
            Operand.MODULE: len(program.modules), Operand.ACTION: len(program.actions),
            Operand.TOOL: len(program.tools), Operand.AGENT: len(program.agents)}.get(kind, 4)


_SAME_SHAPE: dict = {}
for _op in Op:
    _SAME_SHAPE.setdefault((_op.operands, _op.pops, _op.pushes, _op.branch), []).append(_op)


def _operand_value(kind, rng: random.Random, program, size: int, ins) -> int:
    limit = _limit(kind, program)
    if kind is Operand.TARGET:
        return rng.choice((ins.offset + 1, size, size + 5, 2 ** 32 - 1, rng.randrange(size + 1),
                           max(ins.offset - 1, 0)))
    return rng.choice((limit, limit + 1, 2 ** 34, rng.randrange(limit + 1), 0, 1,
                       max(limit - 1, 0)))


def mutate_program(data: bytes, rng: random.Random) -> bytes:
    """Load a valid file, change its bytecode or tables at the instruction level, dump it again.

    Bad operands (out-of-range indices, jumps into an instruction or past the end, wrong kinds
    of code objects), opcodes swapped for others (ACTION_* on values that are not actions,
    FOR_ITER on a value that is no iterator ...), instructions inserted or dropped (stack
    underflow and overflow, scopes, tests and try handlers unbalanced), the last instruction cut (control
    falling off the end), max_stack lowered, code kinds and manifest entries changed.
    """
    program = snb.load(data)
    codes = list(program.codes)
    ci = rng.randrange(len(codes))
    code = codes[ci]
    try:
        instrs = list(decode(code.code))
    except DecodeError:
        instrs = []
    op = rng.randrange(12)
    if instrs and op >= 10:
        # Changes the verifier cannot see, so that the run time gets tested: an opcode swapped
        # for one of the same shape (ADD for INDEX, ACTION_COMMIT for ACTION_VERIFY ...), an
        # operand swapped for another in range (another constant, name, action, function).
        k = rng.randrange(len(instrs))
        ins = instrs[k]
        same = _SAME_SHAPE.get((ins.op.operands, ins.op.pops, ins.op.pushes, ins.op.branch))
        if op == 10 and same:
            instrs[k] = ins._replace(op=rng.choice(same))
        elif ins.op.operands:
            j = rng.randrange(len(ins.op.operands))
            kind = ins.op.operands[j]
            limit = _limit(kind, program)
            if kind not in (Operand.TARGET, Operand.COUNT) and limit:
                args = list(ins.args)
                args[j] = rng.randrange(limit)
                instrs[k] = ins._replace(args=tuple(args))
        codes[ci] = replace(code, code=_encode_all(instrs))
    elif instrs and op <= 5:
        k = rng.randrange(len(instrs))
        ins = instrs[k]
        if op == 0 and ins.op.operands:
            j = rng.randrange(len(ins.op.operands))
            args = list(ins.args)
            args[j] = _operand_value(ins.op.operands[j], rng, program, len(code.code), ins)
            instrs[k] = ins._replace(args=tuple(args))
        elif op <= 2:
            new = rng.choice(list(Op))
            args = tuple(ins.args[i] if i < len(ins.args) else
                         _operand_value(kind, rng, program, len(code.code), ins)
                         for i, kind in enumerate(new.operands))
            instrs[k] = ins._replace(op=new, args=args)
        elif op == 3:
            new = rng.choice((Op.POP, Op.LOAD_NIL, Op.DUP, Op.ACTION_COMMIT, Op.ACTION_VERIFY,
                              Op.FOR_ITER, Op.GET_ITER, Op.RETURN, Op.PUSH_SCOPE, Op.TEST_END,
                              Op.POP_SCOPE, Op.CALL, Op.NOP, Op.TRY_BEGIN, Op.TRY_END,
                              Op.EXCEPT_JUMP, Op.RAISE))
            args = tuple(_operand_value(kind, rng, program, len(code.code), ins)
                         for kind in new.operands)
            instrs.insert(k, ins._replace(op=new, args=args))
        elif op == 4:
            del instrs[k]
        else:
            instrs = instrs[:-1] if len(instrs) > 1 else instrs
        new_code = _encode_all(instrs)
        # Keep the line table on instruction starts where it can, so that the code is reached.
        starts, pos = set(), 0
        for ins in instrs:
            starts.add(pos)
            pos += len(encode(ins.op, ins.args))
        positions = tuple(p for p in code.positions if p[0] in starts)
        codes[ci] = replace(code, code=new_code, positions=positions)
    elif op == 6:
        codes[ci] = replace(code, max_stack=rng.choice((0, max(code.max_stack - 1, 0),
                                                         code.max_stack + 1)))
    elif op == 7:
        codes[ci] = replace(code, kind=rng.choice(list(CodeKind)))
    elif op == 8:
        return snb.dump(_mutate_manifest(program, rng))
    else:
        raw = bytearray(code.code)
        if raw:
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        codes[ci] = replace(code, code=bytes(raw))
    return snb.dump(replace(program, codes=tuple(codes)))


def _mutate_manifest(program, rng: random.Random):
    n = len(program.codes)
    field = rng.randrange(5)
    if field == 0:
        return replace(program, entry=rng.randrange(n + 2))
    if field == 1 and program.modules:
        mods = list(program.modules)
        i = rng.randrange(len(mods))
        mods[i] = replace(mods[i], code=rng.randrange(-2, n + 1))
        return replace(program, modules=tuple(mods))
    if field == 2 and program.actions:
        acts = list(program.actions)
        i = rng.randrange(len(acts))
        acts[i] = replace(acts[i], body=rng.randrange(n + 1), rollback=rng.randrange(-1, n + 1),
                          reversible=rng.random() < 0.5)
        return replace(program, actions=tuple(acts))
    if field == 3 and program.tools:
        tools = list(program.tools)
        i = rng.randrange(len(tools))
        tools[i] = replace(tools[i], body=rng.randrange(n + 1))
        return replace(program, tools=tuple(tools))
    if program.agents:
        agents = list(program.agents)
        i = rng.randrange(len(agents))
        agents[i] = replace(agents[i], body=rng.randrange(n + 1))
        return replace(program, agents=tuple(agents))
    return replace(program, entry=rng.randrange(n + 2))


def mutate(data: bytes, donor: bytes, rng: random.Random) -> bytes:
    """One mutation of any kind, most of them with the checksum kept right."""
    kind = rng.randrange(8)
    if len(data) < HEADER_SIZE + 8:
        return mutate_bytes(data, rng)
    if kind == 0:
        return mutate_bytes(data, rng)                     # checksum now (almost always) wrong
    if kind == 1:
        return recrc(mutate_bytes(data[:-4], rng) + bytes(4))
    if kind == 2:
        return with_crc(data[:rng.randrange(HEADER_SIZE, len(data) - 3)])
    if kind == 3:
        return forge_header(data, rng)
    if kind in (4, 5):
        return mutate_sections(data, donor, rng)
    return mutate_program(data, rng)


# ----------------------------------------------------------------------------- the oracle

class OutOfSteps(BaseException):
    """The step budget ran out (a BaseException, so that no handler of the VM catches it)."""


LOAD_SECONDS = 5.0      # loading and verifying one file: far longer than any real one takes


def load_and_verify(data: bytes):
    """The loader's and verifier's contract: a VerifiedProgram, SnbFormatError or VerifyError."""
    from sensevm.bytecode.verify import load_verified
    start = time.monotonic()
    try:
        verified = load_verified(data)
    except SnbFormatError as e:
        assert e.message and 0 <= e.offset <= len(data), e
        return None
    except VerifyError as e:
        assert e.message and e.code_name, e
        return None
    finally:
        elapsed = time.monotonic() - start
        assert elapsed < LOAD_SECONDS, f"loading and verifying took {elapsed:.1f}s"
    return verified


def run_bounded(verified, *, steps: int = 20_000, seconds: float | None = 3.0, tier: str = "1"):
    """Run a verified program with a step budget; return "ok", "sense error" or "budget".

    Steps are lines of Python executed in the VM's own modules (and in tier 2's generated
    code), counted by a trace function, which raises OutOfSteps when they run out; a timer is
    the backstop for a wait no line counts (an agent waiting for a message nobody sends). Any
    exception other than a SenseError, or an "internal error" a worker thread turned into
    one, is a bug in the VM or the verifier and propagates.
    """
    from sensevm.runtime.vm import VM
    from sensevm.world import install
    install()                   # the world's builtins too: agents, models, memory, MCP
    pkg = os.path.join(ROOT, "sensevm")
    left = [steps]

    def local(frame, event, arg):
        if event == "line":
            left[0] -= 1
            if left[0] < 0:
                raise OutOfSteps()
        return local

    def tracer(frame, event, arg):
        f = frame.f_code.co_filename
        if f.startswith(pkg) or f.startswith("<"):
            return local(frame, event, arg)
        return None

    def alarm(signum, frame):
        raise OutOfSteps()

    # The timer needs the main thread (signals); ``seconds=None`` leaves SIGALRM alone.
    main_thread = threading.current_thread() is threading.main_thread() and bool(seconds)
    old_handler = signal.signal(signal.SIGALRM, alarm) if main_thread else None
    out = io.StringIO()
    memory_dir = os.environ.get("SENSE_MEMORY_DIR")
    os.environ["SENSE_MEMORY_DIR"] = _scratch_dir()
    result = "ok"
    try:
        vm = VM(verified, stdout=out, stdin=io.StringIO(""), max_array=10_000, tier=tier)
        if main_thread:
            signal.setitimer(signal.ITIMER_REAL, seconds)
        threading.settrace(tracer)
        sys.settrace(tracer)
        try:
            vm.run()
        finally:
            sys.settrace(None)
            threading.settrace(None)
            if main_thread:
                signal.setitimer(signal.ITIMER_REAL, 0)
    except OutOfSteps:
        result = "budget"
    except SenseError as err:
        message = getattr(err, "message", "")
        if "internal error" in message and "OutOfSteps" not in message:
            raise AssertionError(f"a worker thread hit a host exception: {message}") from err
        result = "budget" if "OutOfSteps" in message else "sense error"
    finally:
        if main_thread:
            signal.signal(signal.SIGALRM, old_handler)
        if memory_dir is None:
            os.environ.pop("SENSE_MEMORY_DIR", None)
        else:
            os.environ["SENSE_MEMORY_DIR"] = memory_dir
    return result


_SCRATCH: list[str] = []


def _scratch_dir() -> str:
    if not _SCRATCH:
        import tempfile
        _SCRATCH.append(tempfile.mkdtemp(prefix="snb-fuzz-"))
    return _SCRATCH[0]


def check(data: bytes, *, run: bool = True, tier: str = "1", steps: int = 20_000,
          seconds: float | None = 3.0) -> str:
    """The whole contract for one input; returns what happened (for statistics)."""
    verified = load_and_verify(data)
    if verified is None:
        return "rejected"
    if not run:
        return "verified"
    return run_bounded(verified, steps=steps, seconds=seconds, tier=tier)
