"""Fuzzing the loader and the verifier with files made from valid ones (issue 9).

Seeds are .snb files compiled from corpus programs and examples. Each property mutates them
(bit flips, truncations, sections spliced from another program, reordered, duplicated or
dropped, forged headers, bytecode and tables edited at the instruction level), most of the time
with the checksum recomputed so that the bytes reach the structural checks and the verifier,
and holds the result to fuzz/snb_oracle.py's contract: an SnbFormatError or a VerifyError with a
message, in bounded time; and a file that loads and verifies runs under a step budget to the
end, to a Sense error or to the budget, never to another Python exception.

The normal suite runs a short budget; `make fuzz` (FUZZ_EXAMPLES) runs the same properties for
longer, over more seeds. fuzz/snb_loader.py is the same contract as an atheris target.
"""

from __future__ import annotations

import io
import os
import random
import struct
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from conftest import ROOT

sys.path.insert(0, ROOT)
from fuzz import snb_oracle as O          # noqa: E402

from sensevm.bytecode import snb  # noqa: E402
from sensevm.bytecode.decode import encode         # noqa: E402
from sensevm.base.errors import SenseRuntimeError, SnbFormatError, VerifyError   # noqa: E402
from sensevm.bytecode.opcodes import FINGERPRINT, Op   # noqa: E402
from sensevm.bytecode.program import CodeKind, CodeObject, Program, Source   # noqa: E402
from sensevm.bytecode.verify import load_verified, verify   # noqa: E402

FUZZ = int(os.environ.get("FUZZ_EXAMPLES", "0"))
SEEDS = O.seeds(5 if FUZZ else 25)
SMALL = sorted(SEEDS, key=lambda s: len(s[1]))[:3]
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                      HealthCheck.data_too_large])

seed_index = st.integers(0, len(SEEDS) - 1)
rng_seed = st.integers(0, 2 ** 32 - 1)
tiers = st.sampled_from(["1", "2"])


def test_the_seeds_are_valid():
    assert len(SEEDS) >= 30
    for name, data in SEEDS:
        assert O.check(data, run=False) == "verified", name


# ----------------------------------------------------------------------------- byte level

@pytest.mark.parametrize("name, data", SMALL, ids=[n for n, _ in SMALL])
def test_every_truncation_is_a_format_error(name, data):
    for n in range(len(data)):
        with pytest.raises(SnbFormatError):
            snb.load(data[:n])
    # ... and with a checksum that fits the shorter body: the structure must still notice.
    for n in range(snb.HEADER_SIZE, len(data) - 4):
        with pytest.raises(SnbFormatError):
            snb.load(O.with_crc(data[:n]))


@settings(max_examples=FUZZ or 150, **SETTINGS)
@given(seed_index, st.integers(0, 2 ** 20), st.integers(0, 7))
def test_every_bit_flip_is_caught(i, at, bit):
    # CRC32 detects every one-bit error, and the header fields are checked before it: a flipped
    # bit anywhere is an SnbFormatError, whatever the field.
    data = bytearray(SEEDS[i][1])
    data[at % len(data)] ^= 1 << bit
    with pytest.raises(SnbFormatError):
        snb.load(bytes(data))


@settings(max_examples=FUZZ or 150, **SETTINGS)
@given(seed_index, rng_seed, st.booleans())
def test_byte_mutations(i, seed, fix_crc):
    rng = random.Random(seed)
    data = SEEDS[i][1]
    mutated = O.mutate_bytes(data[:-4] if fix_crc else data, rng)
    O.check(O.recrc(mutated + bytes(4)) if fix_crc else mutated, tier=rng.choice("12"))


# ----------------------------------------------------------------------------- sections

@settings(max_examples=FUZZ or 150, **SETTINGS)
@given(seed_index, seed_index, rng_seed, tiers)
def test_spliced_reordered_duplicated_sections(i, j, seed, tier):
    mutated = O.mutate_sections(SEEDS[i][1], SEEDS[j][1], random.Random(seed))
    O.check(mutated, tier=tier)


def test_every_section_swap_and_duplicate_is_refused():
    name, data = SMALL[0]
    header, parts = data[:snb.HEADER_SIZE], O.sections(data)
    for a in range(len(parts)):
        with pytest.raises(SnbFormatError, match="duplicate|out of order"):
            snb.load(O.assemble(header, parts[:a + 1] + [parts[a]] + parts[a + 1:]))
        with pytest.raises(SnbFormatError, match="missing"):
            snb.load(O.assemble(header, parts[:a] + parts[a + 1:]))
        for b in range(a + 1, len(parts)):
            swapped = list(parts)
            swapped[a], swapped[b] = swapped[b], swapped[a]
            with pytest.raises(SnbFormatError, match="missing|out of order"):
                snb.load(O.assemble(header, swapped))


@settings(max_examples=FUZZ or 60, **SETTINGS)
@given(seed_index, seed_index, st.integers(1, 5))
def test_one_section_from_another_program(i, j, k):
    # The same section (strings, constants, code, modules or manifest) of another valid program:
    # indices now point anywhere. Loading may succeed; verifying must then catch the mismatch.
    parts, other = O.sections(SEEDS[i][1]), O.sections(SEEDS[j][1])
    parts[k] = other[k]
    O.check(O.assemble(SEEDS[i][1][:snb.HEADER_SIZE], parts), tier="1")


# ----------------------------------------------------------------------------- headers

@settings(max_examples=FUZZ or 60, **SETTINGS)
@given(seed_index, rng_seed)
def test_forged_headers(i, seed):
    data = SEEDS[i][1]
    forged = O.forge_header(data, random.Random(seed))
    if forged[8:10] == data[8:10] and forged[12:24] == data[12:24]:
        # Only the minor version or the source hash changed: still the same program.
        assert snb.load(forged).codes == snb.load(data).codes
        return
    with pytest.raises(SnbFormatError) as info:
        snb.load(forged)
    assert info.value.offset in (8, 12, 16)


# ----------------------------------------------------------------------------- instructions

@settings(max_examples=FUZZ or 200, **SETTINGS)
@given(seed_index, rng_seed, tiers, st.integers(1, 3))
def test_instruction_level_mutations(i, seed, tier, rounds):
    rng = random.Random(seed)
    data = SEEDS[i][1]
    for _ in range(rounds):
        data = O.mutate_program(data, rng)
        if O.load_and_verify(data) is None:
            return
    O.check(data, tier=tier)


@settings(max_examples=FUZZ or 150, **SETTINGS)
@given(seed_index, seed_index, rng_seed, tiers, st.integers(1, 3))
def test_stacked_mutations_of_every_kind(i, j, seed, tier, rounds):
    rng = random.Random(seed)
    data = SEEDS[i][1]
    for _ in range(rounds):
        try:
            data = O.mutate(data, SEEDS[j][1], rng)
        except SnbFormatError:
            return          # mutate_program needs a file that loads
    O.check(data, tier=tier)


# ----------------------------------------------------------------------------- what a user sees

@settings(max_examples=FUZZ or 25, **SETTINGS)
@given(seed_index, seed_index, rng_seed)
def test_a_refused_file_is_one_line_naming_it(tmp_path_factory, i, j, seed):
    from sensevm.cli.running import run_file
    rng = random.Random(seed)
    data = O.mutate(SEEDS[i][1], SEEDS[j][1], rng)
    if O.load_and_verify(data) is not None:
        return
    path = str(tmp_path_factory.mktemp("bad") / "bad.snb")
    with open(path, "wb") as fh:
        fh.write(data)
    out, err = io.StringIO(), io.StringIO()
    assert run_file(path, stdout=out, stderr=err) == 1
    assert out.getvalue() == ""
    line = err.getvalue()
    assert line.startswith(f"{path}: SnbFormatError: offset ") or \
        line.startswith(f"{path}: VerifyError: "), line
    assert line.count("\n") == 1 and "Traceback" not in line


@pytest.mark.parametrize("at, byte, message", [
    (12, 0x40, "offset 12: unknown flag bits 0x40"),
    # Found by the fuzzing: a .snb file whose magic was damaged was compiled as source instead
    # ("SenseSyntaxError: source is not valid UTF-8", after importing the compiler).
    (1, ord("X"), "offset 0: not a .snb file (bad magic)"),
    (0, ord("#"), "offset 0: not a .snb file (bad magic)"),
])
def test_a_forged_file_through_the_command_line(tmp_path, at, byte, message):
    # The command's own path: exit status 1, one line naming the file, no compiler imported.
    name, data = SMALL[0]
    forged = bytearray(data)
    forged[at] = byte                              # checksum recomputed: only this is wrong
    path = tmp_path / "forged.snb"
    path.write_bytes(O.recrc(bytes(forged)))
    script = ("import sys\nfrom sensevm.cli.launch import entry\nsys.argv[0] = 'sensevm'\n"
              "import atexit\natexit.register(lambda: sys.stderr.write(\n"
              "    'compiler imported\\n' if 'ply' in sys.modules or 'sensec' in sys.modules"
              " else ''))\nentry()\n")
    proc = subprocess.run([sys.executable, "-c", script, "run", str(path)], capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=ROOT), cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == f"{path}: SnbFormatError: {message}\n"
    dis = subprocess.run([sys.executable, "-m", "sensec", "dis", str(path)], capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=ROOT), cwd=tmp_path)
    assert (dis.returncode, dis.stdout, dis.stderr) == (1, "", proc.stderr)


# ----------------------------------------------------------------------------- what the fuzzing found

def _program(main: bytes, max_stack: int = 8, **tables) -> Program:
    return Program(codes=(CodeObject("<main>", CodeKind.MODULE, 0, max_stack=max_stack,
                                     code=main),),
                   sources=(Source("/p/main.sns", ""),), **tables)


def asm(*instructions) -> bytes:
    return b"".join(encode(op, args) for op, *args in instructions)


def test_a_label_that_is_no_string_is_a_sense_error():
    # CALL_LABELED with a label the compiler would have made a String: the VM raised TypeError.
    for label in ((Op.LOAD_CONST, 0), (Op.LOAD_NIL,), (Op.BUILD_ARRAY, 0)):
        program = _program(asm((Op.LOAD_NAME, 0), label, (Op.LOAD_NIL,),
                               (Op.CALL_LABELED, 0, 1), (Op.RETURN,)),
                           strings=("print",), constants=(7,))
        from sensevm.runtime.vm import VM
        with pytest.raises(SenseRuntimeError, match="label must be a String"):
            VM(verify(program), stdout=io.StringIO(), tier="1").run()


def test_iterator_and_module_misuse_is_refused_before_running():
    # FOR_ITER on a value that is no iterator and IMPORT_FROM on one that is no module made the
    # VM raise AttributeError; the verifier now refuses both (table in test_verify.py).
    for_iter = _program(asm((Op.LOAD_CONST, 0), (Op.FOR_ITER, 8), (Op.RETURN,), (Op.LOAD_NIL,),
                            (Op.RETURN,)), constants=("abc",))
    with pytest.raises(VerifyError, match="not an iterator"):
        load_verified(snb.dump(for_iter))
    import_from = _program(asm((Op.LOAD_CONST, 0), (Op.IMPORT_FROM, 0), (Op.RETURN,)),
                           strings=("x",), constants=(True,))
    with pytest.raises(VerifyError, match="not a module"):
        load_verified(snb.dump(import_from))


def test_a_nul_in_a_code_name_is_refused():
    # Tier 2 made the code name part of a file name for compile(): ValueError.
    program = _program(asm((Op.LOAD_NIL,), (Op.RETURN,)))
    program = Program(codes=(CodeObject("<ma\0in>", CodeKind.MODULE, 0, max_stack=1,
                                        code=program.codes[0].code),), sources=program.sources)
    with pytest.raises(VerifyError, match="NUL"):
        load_verified(snb.dump(program))


def test_the_oracle_reports_host_exceptions(monkeypatch):
    # The contract is not vacuous: anything but the loader's two errors, and any host exception
    # escaping the VM, fails the property.
    data = dict(SEEDS)[os.path.join("examples", "hello.sns")]
    monkeypatch.setattr(snb, "load", lambda d: [][0])
    with pytest.raises(IndexError):
        O.check(data)
    monkeypatch.undo()
    assert O.check(data) == "ok"
    from sensevm.runtime.vm import VM
    monkeypatch.setattr(VM, "op_RETURN", lambda self, f, a, b: {}["x"])
    with pytest.raises(KeyError):
        O.check(data, tier="1")
    monkeypatch.undo()
    spin = _program(asm((Op.JUMP, 0)))
    assert O.run_bounded(verify(spin), tier="1") == "budget"


@pytest.mark.parametrize("args, count", [("0, 10 ** 30", 10 ** 30), ("10 ** 30, 0, -3", 10 ** 30 // 3 + 1),
                                         ("-(10 ** 19), 10 ** 19, 2", 10 ** 19)])
def test_range_with_more_elements_than_a_c_ssize_t(run, args, count):
    # Found by test_one_section_from_another_program under make fuzz: a constant from another
    # program reached range() and len() of the range raised OverflowError.
    literal = {"10 ** 30": str(10 ** 30), "10 ** 19": str(10 ** 19)}
    for k, v in literal.items():
        args = args.replace(k, v)
    from sensevm.base.errors import SenseLimitError
    from sensevm.runtime.limits import DEFAULT_MAX_ARRAY
    out = run(f"print(range({args}))\n")
    assert isinstance(out.error, SenseLimitError) and out.error.message == \
        (f"array size limit exceeded (an Array of {count} elements; the limit is "
         f"{DEFAULT_MAX_ARRAY})")


def _run_for_at_most(tmp_path, source: str, seconds: float = 60):
    """``sensevm run`` in a subprocess, so that a regression hangs nothing but that process."""
    path = tmp_path / "main.sns"
    path.write_text(source, encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "sensevm", "run", str(path)], capture_output=True,
                          text=True, timeout=seconds, env=dict(os.environ, PYTHONPATH=ROOT,
                                                               NO_COLOR="1"))


@pytest.mark.parametrize("timeout", ["t * t * t * t * t * t",     # 1e36 s
                                     "t * t * t * t * t * t * t * t * t * t * t * t * t * t"])
def test_receive_with_a_timeout_longer_than_the_host_can_wait(tmp_path, timeout):
    # Found while writing the oracle: receive(1e36) raised OverflowError inside the worker,
    # which surfaced as "internal error in async agent". Such a wait has no limit.
    proc = _run_for_at_most(tmp_path, "async agent a:\n"
                                      "    t = 1000000.0\n"
                                      f"    print(receive({timeout}))\n"
                                      "start(a)\n"
                                      "send(a, \"hello\")\n"
                                      "await(a)\n")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "hello\n", "")


def test_receive_with_a_nan_timeout_is_a_sense_error(tmp_path):
    # A NaN timeout made Condition.wait_for spin for ever.
    proc = _run_for_at_most(tmp_path, "async agent a:\n"
                                      "    t = 1000000.0\n"
                                      + "    t = t * t\n" * 6 +            # inf
                                      "    print(receive(t - t))\n"
                                      "start(a)\n"
                                      "await(a)\n", seconds=30)
    assert proc.returncode == 1
    assert "receive()'s timeout must be a number, got NaN" in proc.stderr


# ----------------------------------------------------------------------------- the atheris target

TARGET = os.path.join(ROOT, "fuzz", "snb_loader.py")


def _has_atheris() -> bool:
    import importlib.util
    return importlib.util.find_spec("atheris") is not None


@pytest.mark.skipif(not _has_atheris(), reason="atheris is not installed (pip install -e '.[fuzz]'); "
                                                "the plain-Python driver is tested below")
def test_atheris_target_runs_for_a_few_seconds(tmp_path):
    proc = subprocess.run([sys.executable, TARGET, "-runs=2000", "-max_total_time=5", "-seed=1"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Done " in proc.stderr and not list(tmp_path.glob("crash-*"))


def test_plain_driver_runs_the_target(tmp_path):
    proc = subprocess.run([sys.executable, TARGET, "--plain", "-runs=300", "-max_total_time=5",
                           "-seed=1"], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("plain driver: Done ") and not list(tmp_path.glob("crash-*"))


def test_plain_driver_saves_a_failing_input(tmp_path, monkeypatch):
    from fuzz import snb_loader
    monkeypatch.chdir(tmp_path)

    def planted(data):
        if O.load_and_verify(data) is None:
            raise RuntimeError("planted")
    with pytest.raises(RuntimeError, match="planted"):
        snb_loader.plain_driver(["-runs=500", "-seed=3"], test=planted)
    crashes = list(tmp_path.glob("crash-*"))
    assert len(crashes) == 1 and O.load_and_verify(crashes[0].read_bytes()) is None
    # ... and replays it, as libFuzzer would.
    with pytest.raises(RuntimeError, match="planted"):
        snb_loader.plain_driver([str(crashes[0])], test=planted)
