"""Compares the disassembly of each tests/golden/*.sns with its reviewed listing (regenerate: make golden)."""

from __future__ import annotations

import os

import pytest

from golden_listing import listing, sources


def test_there_are_golden_listings():
    assert len(sources()) >= 5


@pytest.mark.parametrize("src", sources(), ids=os.path.basename)
def test_listing_matches(src):
    with open(src[:-4] + ".dis", encoding="utf-8") as fh:
        expected = fh.read()
    assert listing(src) == expected, "codegen changed: review, then `make golden`"
