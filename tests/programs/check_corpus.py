#!/usr/bin/env python3
"""Validate the corpus annotations against the reference interpreter.

Usage:
    python3 tests/programs/check_corpus.py [--sense PATH] [-v] [--no-examples]
                                           [FILE_OR_DIR ...]

Runs every non-deliberate test program (``tests/programs/<topic>/*.sns``;
helper modules in sub-folders are not programs) through ``sense run`` and
checks that stdout lines, exit status and the error text printed after
``SenseError: `` agree exactly with the program's annotations (parsed by
``tests/expectations.py``).  A program's ``# flags: ...`` annotation (e.g.
``# flags: --dry-run``) is passed to ``sense run`` before the file name.  With no paths it also checks that every
``examples/NAME.sns`` prints exactly the bytes of ``examples/NAME.out`` and
exits 0 (run with the example's own ``# flags:``, if any).  Exits 1 if anything disagrees.

The reference defaults to $SENSE_REF, else /work/refvenv/bin/sense.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tests/

from expectations import parse_expectations  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples")
DEFAULT_SENSE = os.environ.get("SENSE_REF", "/work/refvenv/bin/sense")


def program_files(root: str = HERE) -> list:
    """Test programs: *.sns files directly inside tests/programs/<topic>/."""
    out = []
    for topic in sorted(os.listdir(root)):
        tdir = os.path.join(root, topic)
        if not os.path.isdir(tdir):
            continue
        for name in sorted(os.listdir(tdir)):
            p = os.path.join(tdir, name)
            if name.endswith(".sns") and os.path.isfile(p):
                out.append(p)
    return out


def check(path: str, sense: str, timeout: float = 60.0) -> list:
    """Return a list of problems (empty when the program agrees)."""
    exp = parse_expectations(path)
    # Run from the program's own directory: the reference resolves an
    # `import` executed inside a *function body* against the current working
    # directory instead of the importing file's directory (a reference bug;
    # spec 8 says relative to the importing file).  With cwd = the program's
    # directory both rules agree, so the annotations state the spec's result.
    # `# flags: --dry-run` -> `sense run --dry-run FILE`.
    proc = subprocess.run([sense, "run", *exp.flags, os.path.abspath(path)],
                          capture_output=True, timeout=timeout,
                          cwd=os.path.dirname(os.path.abspath(path)))
    stdout = proc.stdout.decode("utf-8")
    stderr = proc.stderr.decode("utf-8")
    problems = []

    lines = stdout.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    elif stdout:
        problems.append("stdout does not end with a newline")
    if lines != exp.stdout_lines:
        problems.append("stdout differs:\n" + _diff(exp.stdout_lines, lines))

    want_status = exp.exit_status
    if proc.returncode != want_status:
        problems.append(f"exit status {proc.returncode}, expected {want_status}")

    if "Traceback (most recent call last)" in stderr:
        problems.append("reference crashed with a host traceback "
                        "(belongs in deliberate/ if at all)")
    if exp.error_text is None:
        if stderr:
            problems.append(f"unexpected stderr: {stderr!r}")
    else:
        want = "SenseError: " + exp.error_text + "\n"
        if stderr != want:
            problems.append(f"stderr {stderr!r}, expected {want!r}")
    if exp.syntax_error_line is not None and exp.error_text is not None:
        tag = f"[line {exp.syntax_error_line}] "
        if not exp.error_text.startswith(tag):
            problems.append(f"syntax error line {exp.syntax_error_line} "
                            f"does not match error text {exp.error_text!r}")
        if stdout:
            problems.append("a syntax-error program printed output")
    return problems


def check_example(path: str, sense: str, timeout: float = 60.0) -> list:
    """Compare an example's stdout with its sibling .out file, byte for byte."""
    out_path = path[:-len(".sns")] + ".out"
    if not os.path.exists(out_path):
        return [f"missing {os.path.basename(out_path)}"]
    with open(out_path, "rb") as f:
        want = f.read()
    # An example may carry `# flags: ...` (examples/dry_run.sns is recorded
    # with `--dry-run`).
    flags = parse_expectations(path).flags
    proc = subprocess.run([sense, "run", *flags, os.path.abspath(path)],
                          capture_output=True, timeout=timeout,
                          cwd=os.path.dirname(os.path.abspath(path)))
    problems = []
    if proc.stdout != want:
        problems.append("stdout differs:\n" + _diff(
            want.decode("utf-8").split("\n"),
            proc.stdout.decode("utf-8").split("\n")))
    if proc.returncode != 0 or proc.stderr:
        problems.append(f"exit {proc.returncode}, stderr {proc.stderr!r}")
    return problems


def _diff(want, got) -> str:
    import difflib
    return "\n".join(difflib.unified_diff(want, got, "expected", "reference",
                                          lineterm="", n=2))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--sense", default=DEFAULT_SENSE)
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--no-examples", action="store_true",
                    help="do not check examples/*.sns against their .out files")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                    help="programs to run in parallel")
    args = ap.parse_args(argv)

    files = []
    if not args.paths:
        files = program_files()
    for p in args.paths:
        p = os.path.abspath(p)
        if os.path.isdir(p) and p == HERE:
            files += program_files(p)
        elif os.path.isdir(p):  # one topic directory
            files += [os.path.join(p, n) for n in sorted(os.listdir(p))
                      if n.endswith(".sns")
                      and os.path.isfile(os.path.join(p, n))]
        else:
            files.append(p)

    # Jobs: (label, callable returning a list of problems, or None to skip).
    jobs = []
    for f in files:
        rel = os.path.relpath(f, HERE)
        try:
            exp = parse_expectations(f)
        except ValueError as e:
            jobs.append((rel, None, [f"bad annotations: {e}"]))
            continue
        if exp.deliberate:
            jobs.append((rel, None, None))
            continue
        jobs.append((rel, (check, f), None))
    if not args.paths and not args.no_examples and os.path.isdir(EXAMPLES):
        for name in sorted(os.listdir(EXAMPLES)):
            if name.endswith(".sns"):
                if parse_expectations(os.path.join(EXAMPLES, name)).deliberate:
                    # Uses something the reference does not have (a scripted model, say).
                    jobs.append(("examples/" + name, None, None))
                    continue
                jobs.append(("examples/" + name,
                             (check_example, os.path.join(EXAMPLES, name)),
                             None))

    def run(job):
        label, call, preset = job
        if call is None:
            return preset
        fn, path = call
        try:
            return fn(path, args.sense)
        except subprocess.TimeoutExpired:
            return ["timed out"]

    failed = skipped = passed = 0
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for (label, call, preset), problems in zip(jobs, pool.map(run, jobs)):
            if call is None and preset is None:
                skipped += 1
                if args.verbose:
                    print(f"SKIP  {label} (deliberate)")
            elif problems:
                failed += 1
                print(f"FAIL  {label}")
                for p in problems:
                    print("      " + p.replace("\n", "\n      "))
            else:
                passed += 1
                if args.verbose:
                    print(f"ok    {label}")
    print(f"{passed} passed, {failed} failed, {skipped} deliberate skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
