"""Runs the corpus and the examples through the reference interpreter and through sensevm; stdout and exit code must agree."""

from __future__ import annotations

import glob
import os
import subprocess

import pytest

from conftest import ROOT, TESTS, reference_binary, run_program
from expectations import parse_expectations

REF = reference_binary()
pytestmark = pytest.mark.skipif(
    REF is None, reason="reference interpreter sense-lang==0.20.0 not installed (make ref, or set SENSE_REF)")

PROGRAMS = sorted(
    p for p in glob.glob(os.path.join(TESTS, "programs", "*", "*.sns"))
    if not parse_expectations(p).deliberate)
# An example marked `# deliberate:` uses what the reference does not have (a scripted model).
EXAMPLES = sorted(p for p in glob.glob(os.path.join(ROOT, "examples", "*.sns"))
                  if not parse_expectations(p).deliberate)


def _flags(path: str) -> tuple:
    return tuple(parse_expectations(path).flags) if "/tests/" in path else (
        ("--dry-run",) if os.path.basename(path) == "dry_run.sns" else ())


def _reference(path: str):
    proc = subprocess.run([REF, "run", *_flags(path), os.path.basename(path)],
                          cwd=os.path.dirname(path),
                          capture_output=True, text=True, timeout=60)
    return proc.stdout, proc.returncode, proc.stderr


@pytest.mark.parametrize("path", PROGRAMS + EXAMPLES, ids=lambda p: os.path.relpath(p, ROOT))
def test_same_stdout_and_exit_code(path):
    ref_out, ref_code, ref_err = _reference(path)
    ours = run_program(path, dry_run="--dry-run" in _flags(path))
    assert ours.stdout == ref_out
    assert ours.exit_code == ref_code
    if ref_code and ours.error is not None and ref_err.startswith("SenseError: "):
        # The reference's error text is ours too, [line N] included (spec 17.1), except for
        # syntax errors, whose wording comes from a different kind of parser.
        from sensevm.base.errors import SenseSyntaxError
        if not isinstance(ours.error, SenseSyntaxError):
            assert ours.error.text == ref_err[len("SenseError: "):].rstrip("\n")
