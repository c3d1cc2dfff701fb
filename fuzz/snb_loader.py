"""A coverage-guided fuzz target for the .snb loader and verifier (atheris / libFuzzer).

Each input is a whole .snb file, held to fuzz/snb_oracle.py's contract: loading and verifying
ends in a VerifiedProgram, an SnbFormatError or a VerifyError; a file that verifies runs under
a step budget to the end, a Sense error or the budget. Anything else (another exception, an
assertion of the oracle) is a crash, and libFuzzer saves the input as ``crash-*``.

A byte-level mutation almost never keeps the CRC32 right, so the custom mutator recomputes the
checksum most of the time (the bytes then reach the structural checks and the verifier), and
more than half of the time uses the oracle's structured mutations (sections spliced from another seed,
forged headers, bytecode edited at the instruction level). The seeds are valid files compiled
from the test corpus and the examples, written to a temporary corpus directory unless
directories are given.

    python fuzz/snb_loader.py -runs=20000 -max_total_time=60      # atheris, if installed
    python fuzz/snb_loader.py --plain -runs=2000                   # the plain-Python driver
    python fuzz/snb_loader.py crash-1234abcd                       # replay one input

Without atheris (``pip install -e '.[fuzz]'``), the same target runs under a plain-Python
driver: random seeds, the same mutations, no coverage feedback; it honours ``-runs=``,
``-max_total_time=`` and ``-seed=``, saves a failing input as ``crash-<sha1>`` in the current
directory and exits 1.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

try:
    if "--plain" in sys.argv:
        raise ImportError("--plain")
    import atheris
except ImportError:
    atheris = None

if atheris is not None and __name__ == "__main__":
    # Coverage feedback from the code under test (imported here first, instrumented).
    with atheris.instrument_imports(include=["sensevm"]):
        import sensevm.bytecode.snb                  # noqa: F401
        import sensevm.bytecode.verify               # noqa: F401
        import sensevm.bytecode.decode               # noqa: F401
        import sensevm.runtime.vm                   # noqa: F401

from fuzz import snb_oracle as O            # noqa: E402
from sensevm.base.errors import SnbFormatError   # noqa: E402

RUN = os.environ.get("SNB_FUZZ_RUN", "1") != "0"     # run what verifies (0: load and verify only)
STEPS = int(os.environ.get("SNB_FUZZ_STEPS", "5000"))
SEED_EVERY = int(os.environ.get("SNB_FUZZ_SEED_EVERY", "25"))


# True only inside atheris.Fuzz(): libFuzzer's own mutator and its SIGALRM are live.
_UNDER_LIBFUZZER = False


def TestOneInput(data: bytes) -> None:
    # No timer under libFuzzer (it owns SIGALRM for -timeout); the step budget bounds the run.
    O.check(bytes(data), run=RUN, steps=STEPS, seconds=None if _UNDER_LIBFUZZER else 3.0)


_DONORS: list[bytes] = []


def donors() -> list[bytes]:
    if not _DONORS:
        _DONORS.extend(data for _, data in O.seeds(SEED_EVERY))
    return _DONORS


def mutate(data: bytes, max_size: int, seed: int) -> bytes:
    """The custom mutator: structured half of the time, libFuzzer's bytes + a fixed CRC else."""
    rng = random.Random(seed)
    out = None
    if rng.random() < 0.6:
        try:
            out = O.mutate(data, rng.choice(donors()), rng)
        except SnbFormatError:
            # mutate_program needs a file that loads: edit the instructions of a seed instead.
            out = O.mutate_program(rng.choice(donors()), rng)
    if out is None:
        if _UNDER_LIBFUZZER:
            out = atheris.Mutate(data, max(max_size, len(data)))
        else:
            out = O.mutate_bytes(data, rng)
        if rng.random() < 0.8:
            out = O.recrc(out)
    return out[:max_size] if max_size and len(out) > max_size else out


# ----------------------------------------------------------------------------- drivers

def _flag(args, name: str, default: int) -> int:
    for a in args:
        if a.startswith(f"-{name}="):
            return int(a.split("=", 1)[1])
    return default


def plain_driver(args: list[str], test=TestOneInput) -> int:
    """Run ``test`` on mutated seeds without atheris; 0 when nothing failed, else 1."""
    files = [a for a in args if not a.startswith("-") and os.path.isfile(a)]
    if files:                                   # replay, as libFuzzer does with file arguments
        for f in files:
            with open(f, "rb") as fh:
                test(fh.read())
            print(f"replayed {f}: ok")
        return 0
    runs = _flag(args, "runs", 1000)
    seconds = _flag(args, "max_total_time", 0)
    rng = random.Random(_flag(args, "seed", int(time.time())))
    corpus = list(donors())
    start, n = time.monotonic(), 0
    while (runs < 0 or n < runs) and not (seconds and time.monotonic() - start > seconds):
        data = rng.choice(corpus)
        for _ in range(rng.randint(1, 3)):
            data = mutate(data, 1 << 20, rng.getrandbits(32))
        n += 1
        try:
            test(data)
        except BaseException:
            name = "crash-" + hashlib.sha1(data).hexdigest()
            with open(name, "wb") as fh:
                fh.write(data)
            print(f"plain driver: input {n} failed; saved as {name}", file=sys.stderr)
            raise
    print(f"plain driver: Done {n} runs in {time.monotonic() - start:.1f} s (no atheris: "
          f"random mutations, no coverage feedback)")
    return 0


def main(argv: list[str]) -> int:
    args = [a for a in argv[1:] if a != "--plain"]
    if atheris is None:
        try:
            return plain_driver(args)
        except BaseException as exc:
            print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
    if not any(os.path.isdir(a) or os.path.isfile(a) for a in args if not a.startswith("-")):
        import tempfile
        corpus = tempfile.mkdtemp(prefix="snb-corpus-")
        for i, data in enumerate(donors()):
            with open(os.path.join(corpus, f"seed-{i:03d}.snb"), "wb") as fh:
                fh.write(data)
        args.append(corpus)
    global _UNDER_LIBFUZZER
    _UNDER_LIBFUZZER = True
    atheris.Setup([argv[0], *args], TestOneInput, custom_mutator=mutate)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
