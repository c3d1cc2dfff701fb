"""Every program in examples/ prints exactly its NAME.out (recorded from the reference interpreter)."""

from __future__ import annotations

import glob
import os

import pytest

from conftest import ROOT, run_program

EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.sns")))


def test_there_are_examples():
    assert any(p.endswith("hello.sns") for p in EXAMPLES)


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_example_output(path):
    with open(path[:-4] + ".out", encoding="utf-8", newline="") as fh:
        expected = fh.read()
    outcome = run_program(path, dry_run=os.path.basename(path) == "dry_run.sns")
    assert outcome.error is None, outcome.error
    assert outcome.stdout == expected


@pytest.mark.parametrize("tree", ["examples", "stdlib"])
def test_examples_and_the_library_are_in_canonical_form(capsys, tree):
    """`sensec fmt --check examples/` and `stdlib/` (run by `make test` too): they are what fmt
    prints, so a reader copies the canonical layout."""
    from sensec.fmt import run
    assert run(os.path.join(ROOT, tree), check=True) == 0, capsys.readouterr().out
