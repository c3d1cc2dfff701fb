"""Runs every program under tests/programs and checks its stdout and error against its `# expect` lines."""

from __future__ import annotations

import glob
import os

import pytest

from conftest import TESTS, run_program
from expectations import parse_expectations

PROGRAMS = sorted(glob.glob(os.path.join(TESTS, "programs", "*", "*.sns")))


def _id(path: str) -> str:
    return os.path.relpath(path, os.path.join(TESTS, "programs"))


def test_corpus_is_not_empty():
    assert len(PROGRAMS) >= 100


@pytest.mark.parametrize("path", PROGRAMS, ids=_id)
def test_program(path):
    expected = parse_expectations(path)
    outcome = run_program(path, dry_run="--dry-run" in expected.flags)
    if expected.syntax_error_line is not None:
        from sensevm.base.errors import SenseSyntaxError
        assert isinstance(outcome.error, SenseSyntaxError), outcome.error
        assert outcome.stdout == ""
        errors = getattr(outcome.error, "errors", [outcome.error])
        assert errors[0].pos.line == expected.syntax_error_line, errors[0]
        return
    assert outcome.stdout.split("\n")[:-1] == expected.stdout_lines
    if expected.error_text is None:
        assert outcome.error is None, f"unexpected error: {outcome.error!r} {outcome.error}"
    else:
        assert outcome.error is not None, "expected an error, the program succeeded"
        assert outcome.error.text == expected.error_text
        if expected.error_class:
            assert outcome.error.kind == expected.error_class
