"""Instructions per step under callgrind: ours against CPython's twin, start-up and compiling cancelled.

``python -m benchmarks.callgrind [--root DIR] [--scale K] [NAME ...]`` runs each program at two
sizes, S and 2S, under ``valgrind --tool=callgrind`` (the instructions executed, the same to the
instruction from run to run for the same binary, inputs and environment: ``PYTHONHASHSEED=0``,
fresh ``.pyc`` files), and prints compute = count(2S) - count(S) for ours and for the CPython
twin, and their ratio. Whatever a run does once (start-up, imports, building and verifying the
``.snb``, compiling tier 2, making code again for a long-running loop) is in both counts and
cancels; what is left is the instructions of S more steps of the program's own work.

The sizes: the S of each row below times ``--scale``. A loop that runs past tier2.HOT_TURNS
(10,000 turns) has its code made again once; the loop rows' S is above that at the default
scale, so both runs make it and it cancels (below it, the larger run alone would pay for it).
``strings``' outer loop turns once a line, about one for seven steps: its S makes over 10,000
lines (at 40,000, the larger run alone made its code again, some 110M instructions).
``fib`` has no loop (its calls of itself are direct); the agent rows run at the sizes where
their one loop stays below HOT_TURNS in both runs, in its general version. At ``--scale 6``
(S=12,000) both runs make that loop again at turn 10,000 and the difference is turns of the
code a full-size run (30,000 or 60,000 turns) spends most of its turns in: there the second
look is a larger part of a turn, as tier 2 shortens the loop around it and not the look.

``--root`` measures another checkout (a ``git worktree`` of an older commit, say) with this
one's Python: the runs start in that directory, whose ``sensevm`` is the one imported. It
needs valgrind (on every machine of this project's kind).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

from benchmarks.catalog import PROGRAMS_DIR, written

HERE = os.path.dirname(PROGRAMS_DIR)
ROOT = os.path.dirname(HERE)
# S for each row (the table's "S / 2S" column).
STEPS = {
    "fib": 20, "loops": 160_000, "arrays": 48_000, "strings": 100_000, "closures": 80_000,
    "maps": 20_000, "callbacks": 48_000, "string_methods": 40_000,
    "lifecycle": 2_000, "provenance_pass": 2_000, "provenance_flag": 2_000,
    "provenance_literal": 2_000, "provenance_fresh": 2_000, "provenance_content": 2_000,
    "tool_calls": 4_000,
}
# Rows whose S cannot be scaled: fib's work doubles with each step of n, so its 2S is n + 1.
NEXT = {"fib": lambda n: n + 1}


def instructions(cmd: list, cwd: str, env: dict) -> int:
    """The instructions callgrind counts for the whole run of ``cmd``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd],
                       cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        with open(out, encoding="utf-8") as fh:
            match = re.search(r"^(?:summary|totals): (\d+)", fh.read(), re.MULTILINE)
    if match is None:
        raise SystemExit(f"no instruction count in callgrind's output for {cmd}")
    return int(match.group(1))


def measure(name: str, root: str, scale: int, python: str) -> tuple:
    """(ours, CPython's or None): compute in instructions, count(2S) - count(S)."""
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=root)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    small = STEPS[name] * (1 if name in NEXT else scale)
    sizes = (small, NEXT.get(name, lambda n: 2 * n)(small))
    counts, twin = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            sns = written(name, "sns", n, tmp)
            snb = sns[:-4] + ".snb"
            subprocess.run([python, "-m", "sensec", "build", sns, "-o", snb], cwd=root, env=env,
                           check=True)
            counts.append(instructions([python, "-m", "sensevm", "run", snb], root, env))
            if os.path.exists(os.path.join(PROGRAMS_DIR, f"{name}.py")):
                twin.append(instructions([python, written(name, "py", n, tmp)], root, env))
    return counts[1] - counts[0], (twin[1] - twin[0] if twin else None), sizes


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.callgrind",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"rows (default: all): {', '.join(STEPS)}")
    parser.add_argument("--root", default=ROOT, help="the checkout to measure")
    parser.add_argument("--scale", type=int, default=1, help="S times this (not fib's)")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in STEPS]
    if unknown:
        parser.error(f"no such row: {', '.join(unknown)} (rows: {', '.join(STEPS)})")
    subprocess.run([args.python, "-m", "compileall", "-q", "sensevm", "sensec"], cwd=args.root,
                   check=True, stdout=subprocess.DEVNULL)
    print(f"{'row':<20} {'S / 2S':>17} {'ours':>10} {'CPython':>10} {'ratio':>7}")
    for name in args.names or list(STEPS):
        ours, cpython, sizes = measure(name, args.root, args.scale, args.python)
        ratio = f"{ours / cpython:6.2f}x" if cpython else "      -"
        theirs = f"{cpython / 1e6:9.1f}M" if cpython else "         -"
        print(f"{name:<20} {sizes[0]:>8} / {sizes[1]:<7} {ours / 1e6:9.1f}M {theirs} {ratio}",
              flush=True)


if __name__ == "__main__":
    main()
