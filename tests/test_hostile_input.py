"""Hostile input to the toolchain (issue 20): every case ends in a positioned Sense error or in correct behaviour, in memory proportional to the input."""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc

import pytest

from conftest import ROOT, run_program
from sensec.driver import compile_source
from sensevm.errors import Pos, SenseSyntaxError
from sensevm.snb import dump
from sensevm.verify import load_verified


def sensec(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "sensec", *args], capture_output=True,
                          text=True, cwd=cwd or ROOT, env=dict(os.environ, NO_COLOR="1"))


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


# ----------------------------------------------------------------------------- Int literals

def test_the_int_literal_bound_fits_the_snb_format():
    from sensec.lexer import MAX_INT_DIGITS
    from sensevm.program import zigzag
    from sensevm.snb import MAX_INT_BYTES
    largest = 10 ** MAX_INT_DIGITS - 1
    assert (zigzag(largest).bit_length() + 6) // 7 <= MAX_INT_BYTES


@pytest.mark.parametrize("tier", ["1", "2"])
def test_an_int_literal_at_the_bound_compiles_exactly(tmp_path, tier):
    from sensec.lexer import MAX_INT_DIGITS
    digits = "9" * MAX_INT_DIGITS
    path = tmp_path / "big.sns"
    path.write_text(f"x = {digits}\nprint(x % 1000)\nprint(str(x) == \"{digits}\")\n"
                    "print(x)\nprint(x * x + 1)\n")
    out = run_program(str(path), tier=tier)
    assert out.error is None
    lines = out.stdout.split("\n")
    assert lines[:3] == ["999", "true", digits]
    assert lines[3] == str(int(digits) ** 2 + 1)       # 17,200 digits, printed at run time


def test_an_int_literal_over_the_bound_is_a_positioned_error():
    from sensec.lexer import MAX_INT_DIGITS
    with pytest.raises(SenseSyntaxError) as info:
        compile_source(f"y = 1\nx = {'1' * (MAX_INT_DIGITS + 1)}\n", "big.sns")
    err = info.value
    assert (err.path, err.pos, err.message) == (
        "big.sns", Pos(2, 5),
        f"integer literal too long ({MAX_INT_DIGITS + 1} digits; the limit is {MAX_INT_DIGITS})")


def test_sensec_check_reports_an_int_literal_over_the_bound(tmp_path):
    from sensec.lexer import MAX_INT_DIGITS
    path = tmp_path / "big.sns"
    path.write_text(f"x = {'7' * 20000}\nprint(\n")
    result = sensec("check", str(path))
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0] == (f"{path}:1:5: SenseSyntaxError: integer literal too long "
                        f"(20000 digits; the limit is {MAX_INT_DIGITS})")
    assert any("SenseSyntaxError: unexpected token" in line for line in lines[1:])   # goes on


def test_dis_lists_every_digit_of_a_long_int_constant(tmp_path):
    from sensevm.disasm import disassemble
    digits = "1234567890" * 600
    listing = disassemble(compile_source(f"x = {digits}\nprint(-x)\n", "big.sns"))
    assert f"LOAD_CONST               0 ({digits})" in listing
