"""The second look's check timed on its own: microseconds a check, at verify and at commit.

``python -m benchmarks.check_time [--turns N] [--runs R] [--root DIR ...] [NAME ...]`` runs each
agent program (by default ``provenance_fresh``, whose every verify makes a new verdict,
``provenance_content``, whose every verify reads a new page's text and finds nothing to vouch
for, and ``provenance_pass``, whose verdict is made once and reused) R times at N turns, each
run in a fresh process, with a timer around the whole check of one stage: the evaluation
(``SecondLook.evaluate``, which verify and commit call) and, when it found something,
``VM.second_look`` (the digest, the audit record and its detail, the question). It prints, for
each stage, the median over the runs of the mean time a check took, and the fastest run, less
the timer's own cost (a wrapper as these are around a function that does nothing, timed in the
same process, once for each timed call). A
stage with no check (commit does not look again at what verify found nothing in) shows "-".

The harness's rows time whole processes, in which a turn is two tool calls, a lifecycle and
the loop as well as the two checks; the issue's target for the check itself ("a passing
second look under 10 µs a check") needs the check alone. Given several ``--root`` checkouts
(a ``git worktree`` of an older commit, say), the runs alternate between them, so that each
is timed under the same load; each root's ``sensevm`` and ``sensec`` are the ones imported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROGRAMS = ("provenance_fresh", "provenance_content", "provenance_pass")
STAGES = ("verify", "commit")


def _child(path: str) -> None:
    """Run the built program at ``path`` once, timing every check; print the result as JSON:
    {stage: [checks, seconds, timed calls]}, and the timer's own seconds a call."""
    import io
    import time

    from sensevm.bytecode.verify import load_verified
    from sensevm.runtime import vm as V

    with open(path, "rb") as fh:
        program = load_verified(fh.read())
    clock = time.perf_counter
    spent: dict = {}

    def count(stage, took, checks=1):
        # [checks, seconds, timed calls] of the stage (a check may take two timed calls)
        entry = spent.get(stage)
        if entry is None:
            entry = spent[stage] = [0, 0.0, 0]
        entry[0] += checks
        entry[1] += took
        entry[2] += 1

    if hasattr(V.VM, "second_look_at"):
        # (Before 2026-12: one method made the whole check of a stage.)
        look = V.VM.second_look_at

        def timed(self, f, action, stage, line):
            start = clock()
            try:
                return look(self, f, action, stage, line)
            finally:
                count(stage, clock() - start)

        V.VM.second_look_at = timed
    else:
        # The check is the evaluation, made by verify and commit themselves, and, when it
        # found something, VM.second_look (the record and the question): both timed, counted
        # as one check of the stage. An action is evaluated at commit only if verify's
        # verdict is kept on it (``looked``): that tells the stage without a wrapper around
        # the handlers (whose calls would allocate, and move the collector's work).
        from sensevm.guard.secondlook import SecondLook
        evaluate, found = SecondLook.evaluate, V.VM.second_look

        def timed_evaluate(self, action):
            stage = "commit" if action.looked else "verify"
            start = clock()
            try:
                return evaluate(self, action)
            finally:
                count(stage, clock() - start)

        def timed_found(self, f, action, stage, line, evaluation):
            start = clock()
            try:
                return found(self, f, action, stage, line, evaluation)
            finally:
                count(stage, clock() - start, 0)

        SecondLook.evaluate = timed_evaluate
        V.VM.second_look = timed_found
    vm = V.VM(program, stdout=io.StringIO(), tier="auto", stdin=io.StringIO(""))
    vm.run()
    # The timer's own cost: a wrapper as these are, around a function that does nothing, as
    # many times.
    calls = sum(entry[2] for entry in spent.values())
    nothing = _nothing

    def timer(stage):
        start = clock()
        try:
            return nothing(None, None, None, stage, None)
        finally:
            count(stage, clock() - start)

    for _ in range(calls):
        timer("(timer)")
    own = spent.pop("(timer)")[1] / calls if calls else 0.0
    print(json.dumps({"stages": spent, "timer": own}))


def _nothing(self, f, action, stage, line):
    return None


def build(name: str, turns: int, root: str, python: str, tmp: str) -> str:
    """The program ``name`` at ``turns`` turns, built with ``root``'s compiler."""
    from benchmarks.catalog import written
    source = written(name, "sns", turns, tmp)
    built = os.path.join(tmp, f"{name}-{abs(hash(root))}.snb")
    subprocess.run([python, "-m", "sensec", "build", source, "-o", built], cwd=root,
                   env=dict(os.environ, PYTHONPATH=root), check=True,
                   stdout=subprocess.DEVNULL)
    return built


def run_once(built: str, root: str, python: str) -> dict:
    out = subprocess.run([python, os.path.abspath(__file__), "--child", built], cwd=root,
                         env=dict(os.environ, PYTHONPATH=root), check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.check_time",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*",
                        help=f"agent programs (default: {', '.join(PROGRAMS)})")
    parser.add_argument("--turns", type=int, default=20_000, help="turns a run (default 20,000)")
    parser.add_argument("--runs", type=int, default=9, help="runs per program and root")
    parser.add_argument("--root", action="append", help="a checkout to measure (repeatable; "
                        "default this one)")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child)
        return
    if args.turns < 1 or args.runs < 1:
        parser.error("--turns and --runs must be at least 1")
    roots = [os.path.abspath(r) for r in (args.root or [ROOT])]
    for root in roots:
        if not os.path.isdir(os.path.join(root, "sensevm")):
            parser.error(f"--root {root}: no sensevm package there")
    print(f"µs a check, {args.turns} turns a run, {args.runs} runs per root (median / fastest "
          "run), less the timer's own cost")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.names or PROGRAMS:
            built = {root: build(name, args.turns, root, args.python, tmp) for root in roots}
            results: dict = {root: {stage: [] for stage in STAGES} for root in roots}
            timers: dict = {root: [] for root in roots}
            for _ in range(args.runs):
                for root in roots:             # (alternating: each root under the same load)
                    got = run_once(built[root], root, args.python)
                    timers[root].append(got["timer"])
                    for stage in STAGES:
                        checks, seconds, calls = got["stages"].get(stage, (0, 0.0, 0))
                        if checks:
                            results[root][stage].append(
                                (seconds - got["timer"] * calls) / checks * 1e6)
            for root in roots:
                cells = []
                for stage in STAGES:
                    times = results[root][stage]
                    cells.append(f"{stage} {statistics.median(times):6.2f} / {min(times):6.2f}"
                                 if times else f"{stage}      -")
                timer = statistics.median(timers[root]) * 1e6
                print(f"{name:<18} {root}: " + "   ".join(cells)
                      + f"   (timer {timer:.2f} µs a call)", flush=True)


if __name__ == "__main__":
    main()
