"""Hostile input to the toolchain (issue 20): every case ends in a positioned Sense error or in correct behaviour, in memory proportional to the input."""

from __future__ import annotations

import tracemalloc

import pytest

from sensec.driver import compile_source
from sensevm.snb import dump
from sensevm.verify import load_verified


def build_peak(source: str):
    """The peak memory (bytes, by tracemalloc) of compiling ``source``, writing its .snb and
    loading and verifying that back, as ``sensec build`` does; and the program loaded."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        program = compile_source(source, "<big>")
        data = dump(program)
        del program
        loaded = load_verified(data).program
        return tracemalloc.get_traced_memory()[1] - base, loaded
    finally:
        tracemalloc.stop()


# ----------------------------------------------------------------------------- large literals

@pytest.mark.parametrize("unit", ["abcdefgh" * 8 + "\\n", "x" * 64, '\\"' * 32],
                         ids=["text with escapes", "plain text", "escaped quotes"])
def test_a_long_string_literal_compiles_in_memory_proportional_to_it(unit):
    # A 2 MB literal peaked at 150 times its size (the regex that found its closing quote kept
    # backtracking state per character); the .snb holds the source and the string, so the
    # build holds both, their UTF-8 and the file: about 6 times.
    count = 2_000_000 // len(unit)
    source = 'x = "' + unit * count + '"\nprint(len(x))\n'
    peak, loaded = build_peak(source)
    assert peak < 8 * len(source)
    value = unit.replace("\\n", "\n").replace('\\"', '"') * count
    assert value in loaded.constants and loaded.sources[0].text == source
