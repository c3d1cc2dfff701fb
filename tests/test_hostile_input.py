"""Hostile input to the toolchain (issue 20): every case ends in a positioned Sense error or in correct behaviour, in memory proportional to the input."""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc

import pytest

from conftest import ROOT, run_program
from sensec.driver import compile_source
from sensevm.base.errors import Pos, SenseSyntaxError
from sensevm.bytecode.snb import dump
from sensevm.bytecode.verify import load_verified


def sensec(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "sensec", *args], capture_output=True,
                          text=True, cwd=cwd or ROOT, env=dict(os.environ, NO_COLOR="1"))


def sensevm(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "sensevm", *args], capture_output=True,
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
    from sensevm.bytecode.program import zigzag
    from sensevm.bytecode.snb import MAX_INT_BYTES
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
    # It goes on to the next problem: the '(' that is never closed, reported where it opens.
    assert any(f"{path}:2:6: SenseSyntaxError: '(' opened here is never closed" in line
               for line in lines[1:]), lines


def test_dis_lists_every_digit_of_a_long_int_constant(tmp_path):
    from sensevm.bytecode.disasm import disassemble
    digits = "1234567890" * 600
    listing = disassemble(compile_source(f"x = {digits}\nprint(-x)\n", "big.sns"))
    assert f"LOAD_CONST               0 ({digits})" in listing


# ----------------------------------------------------------------------------- nesting

def run_text(tmp_path, source: str, tier=None, name="deep.sns"):
    path = tmp_path / name
    path.write_text(source, encoding="utf-8")
    return run_program(str(path), tier=tier)


def nested_ifs(depth: int) -> str:
    # One space more per level keeps the file small (a level's statement is its level).
    return "".join(" " * i + "if true:\n" for i in range(depth)) + " " * depth + "print(1)\n"


SHAPES = {
    # name: (source, expected output), all far past what Python's default recursion limit
    # allowed the compiler (500 terms, 700 levels, 3,000 blocks were internal errors).
    "a 2,000-term sum": ("x = " + " + ".join(["1"] * 2000) + "\nprint(x)\n", "2000\n"),
    "arrays nested 2,000 deep": ("x = " + "[" * 2000 + "]" * 2000 + "\nprint(len(x))\n", "1\n"),
    "calls nested 2,000 deep": ("def f(a):\n    return a\nprint(" + "f(" * 2000 + "7"
                                + ")" * 2000 + ")\n", "7\n"),
    "a 2,000-fold minus": ("print(" + "-" * 2000 + "1)\n", "1\n"),
    "ifs nested 3,000 deep": (nested_ifs(3000), "1\n"),
    "a 2,000-branch else-if": ("x = 1999\nif x == 0:\n    print(0)\n"
                               + "".join(f"else if x == {i}:\n    print({i})\n"
                                         for i in range(1, 2000)) + "else:\n    print(-1)\n",
                               "1999\n"),
}


@pytest.mark.parametrize("tier", ["1", "2"])
@pytest.mark.parametrize("shape", SHAPES)
def test_deeply_nested_programs_compile_and_run(tmp_path, shape, tier):
    import sys
    source, expected = SHAPES[shape]
    limit = sys.getrecursionlimit()
    out = run_text(tmp_path, source, tier)
    assert (out.error, out.stdout) == (None, expected)
    assert sys.getrecursionlimit() == limit        # raised only while the compiler ran


def arrays(depth: int) -> str:
    """``x = [[...[1]...]]`` whose ``1`` is at level ``depth`` (the statement is level 1, the
    assignment 2, the outermost array 3)."""
    arrays = depth - 3
    return "x = " + "[" * arrays + "1" + "]" * arrays + "\n"


def test_nesting_at_the_bound_compiles():
    from sensec.nesting import MAX_NESTING
    compile_source(arrays(MAX_NESTING), "deep.sns")
    compile_source("print(" + "-" * (MAX_NESTING - 3) + "1)\n", "deep.sns")


@pytest.mark.parametrize("levels", [1, 100_000])
def test_nesting_past_the_bound_is_a_positioned_error(levels):
    from sensec.nesting import MAX_NESTING
    with pytest.raises(SenseSyntaxError) as info:
        compile_source("y = 1\n" + arrays(MAX_NESTING + levels), "deep.sns")
    err = info.value
    # At the first node past the bound: the array (or the 1) at level MAX_NESTING + 1.
    assert (err.path, err.pos, err.message) == (
        "deep.sns", Pos(2, 5 + MAX_NESTING - 2),
        f"too deeply nested (more than {MAX_NESTING} levels of blocks and expressions)")


def test_a_long_sum_past_the_bound_is_a_positioned_error():
    from sensec.nesting import MAX_NESTING
    # The sum nests to the left: its first term is its deepest node.
    with pytest.raises(SenseSyntaxError) as info:
        compile_source("x = " + " + ".join(["1"] * 100_000) + "\n", "sum.sns")
    assert info.value.pos.line == 1 and "more than" in info.value.message
    with pytest.raises(SenseSyntaxError) as info:
        compile_source("x = " + " + ".join(["1"] * (MAX_NESTING - 1)) + "\n", "sum.sns")
    assert info.value.pos == Pos(1, 5)
    compile_source("x = " + " + ".join(["1"] * (MAX_NESTING - 2)) + "\n", "sum.sns")


def test_blocks_nested_past_the_bound_are_a_positioned_error():
    from sensec.nesting import MAX_NESTING
    # Level k's `if` is line k; its condition is level k + 1.
    with pytest.raises(SenseSyntaxError) as info:
        compile_source(nested_ifs(MAX_NESTING + 50), "ifs.sns")
    assert info.value.pos == Pos(MAX_NESTING, MAX_NESTING - 1 + 4)


def test_sensec_and_sensevm_refuse_deep_nesting_with_a_clean_error(tmp_path):
    from sensec.nesting import MAX_NESTING
    path = tmp_path / "deep.sns"
    path.write_text(arrays(MAX_NESTING + 10_000))
    expected = (f"{path}:1:{5 + MAX_NESTING - 2}: SenseSyntaxError: too deeply nested (more "
                f"than {MAX_NESTING} levels of blocks and expressions)")
    for command in (sensec("build", str(path)), sensec("check", str(path)),
                    sensec("fmt", str(path)), sensevm("run", str(path))):
        assert command.returncode == 1, command.stderr
        assert command.stderr.splitlines()[0] == expected


def test_sensevm_runs_a_long_sum_and_deep_arrays(tmp_path):
    path = tmp_path / "sum.sns"
    path.write_text("x = " + " + ".join(["1"] * 500) + "\nprint(x)\n")
    result = sensevm("run", str(path))
    assert (result.returncode, result.stdout, result.stderr) == (0, "500\n", "")
    # Printing arrays nested 700 deep runs out of host stack: the language's error, exit 1.
    path.write_text("x = " + "[" * 700 + "]" * 700 + "\nprint(len(x))\nprint(x)\n")
    result = sensevm("run", str(path))
    assert (result.returncode, result.stdout) == (1, "1\n")
    assert result.stderr.startswith(f"{path}:3:6: SenseRuntimeError: maximum recursion depth "
                                    "exceeded\n")


def test_fmt_formats_deep_nesting_and_refuses_it_past_the_bound():
    from sensec.fmt import format_source
    from sensec.nesting import MAX_NESTING
    source = "x = " + "[" * 3000 + "]" * 3000 + "\n" + "print(" + "-" * 3000 + "1)\n"
    assert format_source(source) == source.replace("-", "- ").replace("- 1", "-1")
    assert format_source(nested_ifs(3000)).endswith(" " * 4 * 3000 + "print(1)\n")
    with pytest.raises(SenseSyntaxError) as info:
        format_source("y = 1\n" + arrays(MAX_NESTING + 1), "deep.sns")
    assert info.value.pos == Pos(2, 5 + MAX_NESTING - 2)


@pytest.mark.parametrize("tier", ["1", "2"])
def test_deeply_nested_values_end_in_a_sense_error_at_run_time(tmp_path, tier):
    # Printing, str() and comparing values nested this deep recurse in the host: the VM turns
    # a host RecursionError into the language's (as the reference reports them).
    deep = "[" * 700 + "1" + "]" * 700
    out = run_text(tmp_path, f"a = {deep}\nb = {deep}\nprint(a == b)\nprint(len(str(a)))\n",
                   tier)
    assert out.stdout == "true\n"
    assert out.error.kind == "SenseRuntimeError"
    assert out.error.message == "maximum recursion depth exceeded"
    assert out.error.pos == Pos(4, 14)


# ----------------------------------------------------------------------------- annotations

def annotation(depth: int) -> str:
    return "Array<" * depth + "Int" + ">" * depth


@pytest.mark.parametrize("tier", ["1", "2"])
def test_annotations_nested_to_the_bound_are_checked_at_run_time(tmp_path, tier):
    from sensevm.bytecode.program import MAX_ANNOTATION_NESTING as deepest
    t = annotation(deepest)
    good, bad = "[" * deepest + "1" + "]" * deepest, "[" * deepest + '"s"' + "]" * deepest
    out = run_text(tmp_path, f"def f(x: {t}) -> {t}:\n    return x\ny: {t} = f({good})\n"
                             f"print(len(y))\nprint(f({bad}))\n", tier)
    assert out.stdout == "1\n"
    assert (out.error.kind, out.error.pos, out.error.message) == (
        "SenseTypeError", Pos(5, 8), f"argument 'x' of 'f' expects {t}, got Array")


@pytest.mark.parametrize("source, at", [
    ("def f(x: {t}):\n    return x\n", Pos(2, 10)),
    ("def f() -> {t}:\n    return 1\n", Pos(2, 12)),
    ("y: {t} = []\n", Pos(2, 4)),
    ("def g():\n    local y: {t} = []\n", Pos(3, 14)),
    ("tool t(x: {t}) returns String requires a.b:\n    return \"\"\n", Pos(2, 11)),
    ("tool t() returns {t} requires a.b:\n    return []\n", Pos(2, 18)),
    ("reversible action a(x: {t}) requires a.b:\n    print(x)\nrollback:\n    print(x)\n",
     Pos(2, 24)),
], ids=["parameter", "return", "declaration", "local", "tool parameter", "tool result",
        "action parameter"])
def test_an_annotation_nested_past_the_bound_is_a_positioned_error(source, at):
    from sensec.fmt import format_source
    from sensevm.bytecode.program import MAX_ANNOTATION_NESTING as deepest
    text = "x = 1\n" + source.format(t=annotation(deepest + 1))
    message = f"type annotation nested too deeply (more than {deepest} levels of type arguments)"
    for compile_it in (compile_source, format_source):
        with pytest.raises(SenseSyntaxError) as info:
            compile_it(text, "ann.sns")
        assert (info.value.pos, info.value.message) == (at, message)
    compile_source("x = 1\n" + source.format(t=annotation(deepest)), "ann.sns")


def test_a_forged_deep_annotation_is_refused_before_anything_runs(tmp_path):
    from dataclasses import replace
    program = compile_source("def f(x: Int) -> Int:\n    return x\nprint(f(1))\n", "ann.sns")
    forged = replace(program, codes=tuple(
        replace(c, param_types=(annotation(5000),)) if c.name == "f" else c
        for c in program.codes))
    path = tmp_path / "ann.snb"
    path.write_bytes(dump(forged))
    result = sensevm("run", str(path))
    assert (result.returncode, result.stdout, result.stderr) == (
        1, "", f"{path}: VerifyError: f+0: type annotation for parameter 'x' nests type "
               "arguments more than 100 deep\n")


# ----------------------------------------------------------------------------- control characters

FORGEABLE = '''\
tool look(word: String) returns String requires dict.read "define a word":
    return word
irreversible action send(to: String) requires email.send:
    print(to)
agent helper:
    print(look("x"))
print(send)
'''

# What could drive a terminal: an escape sequence, BEL, DEL, a C1 CSI, bidi override, isolate.
CONTROLS = ["\x1b[2J", "\x07", "\x7f", "\x9b31m", "\u202e", "\u2066"]


def raw_controls(text: str) -> list:
    import re
    from sensevm.base.diagnostics import CONTROL
    return [c for c in re.findall(CONTROL, text) if c not in "\n"]


def _code(program, name):
    return next(i for i, c in enumerate(program.codes) if c.name == name)


def _rename_code(program, name, new):
    from dataclasses import replace
    i = _code(program, name)
    return replace(program, codes=program.codes[:i] + (replace(program.codes[i], name=new),)
                   + program.codes[i + 1:])


def _forge(where: str, bad: str):
    from dataclasses import replace
    p = compile_source(FORGEABLE, "forge.sns")
    if where == "code name":
        return _rename_code(p, "look", "look" + bad), f"code {_code(p, 'look')}'s name"
    if where == "parameter":
        i = _code(p, "look")
        code = replace(p.codes[i], params=("wo" + bad + "rd",))
        return (replace(p, codes=p.codes[:i] + (code,) + p.codes[i + 1:]),
                f"code {i}'s parameter 0")
    if where == "name operand":
        i = p.strings.index("print")
        return (replace(p, strings=p.strings[:i] + ("pr" + bad + "int",) + p.strings[i + 1:]),
                f"name {i}")
    table = {"action": "actions", "tool": "tools", "agent": "agents"}[where]
    entries = getattr(p, table)
    return (replace(p, **{table: (replace(entries[0], name=entries[0].name + bad),)}),
            f"{where} 0's name")


@pytest.mark.parametrize("bad", CONTROLS, ids=repr)
@pytest.mark.parametrize("where", ["code name", "parameter", "name operand", "action", "tool",
                                   "agent"])
def test_the_verifier_refuses_a_name_with_a_control_character(where, bad):
    from sensevm.base.errors import VerifyError
    forged, what = _forge(where, bad)
    with pytest.raises(VerifyError) as info:
        load_verified(dump(forged))
    err = info.value
    assert (err.code_name, err.offset, err.opname) == ("<program>", 0, None)
    assert err.message.startswith(f"{what} has a control character: ")
    assert not raw_controls(str(err))


def test_an_import_path_with_a_control_character_is_a_positioned_error():
    with pytest.raises(SenseSyntaxError) as info:
        compile_source('x = 1\nimport "lib\x1b[2J.sns"\n', "imp.sns")
    assert (info.value.pos, info.value.message) == (
        Pos(2, 8), "an import path cannot hold control characters")


def test_nothing_from_a_forged_file_reaches_the_terminal_raw(tmp_path):
    forged, _ = _forge("code name", "\x1b]0;owned\x07\x1b[2J")
    path = tmp_path / "forged.snb"
    path.write_bytes(dump(forged))
    run = sensevm("run", str(path))
    assert run.returncode == 1 and "VerifyError" in run.stderr
    listing = sensec("dis", str(path))
    assert listing.returncode == 1 and "VerifyError" in listing.stderr
    assert "Disassembly of look\\x1b]0;owned\\x07\\x1b[2J (tool_body" in listing.stdout
    unverified = sensec("dis", "--no-verify", str(path))
    assert unverified.returncode == 0
    for text in (run.stdout, run.stderr, listing.stdout, listing.stderr, unverified.stdout):
        assert not raw_controls(text)


def test_errors_show_paths_messages_and_source_lines_escaped(tmp_path):
    # A path, a source line and a message built from a String constant, all from the file:
    # the renderer escapes them, and the caret stays under its character.
    from dataclasses import replace
    source = 'x = "\x1b[2J"\nassert(false, x + "\u202e!")\n'
    p = compile_source(source, "evil\x1b[31m.sns")
    p = replace(p, sources=(replace(p.sources[0], path="evil\x1b[31m.sns"),))
    path = tmp_path / "evil.snb"
    path.write_bytes(dump(p))
    run = sensevm("run", str(path))
    assert run.returncode == 1
    assert not raw_controls(run.stderr)
    assert run.stderr.splitlines() == [
        "evil\\x1b[31m.sns:2:7: SenseRuntimeError: \\x1b[2J\\u202e!",
        '    2 | assert(false, x + "\\u202e!")',
        "      |       ^"]


def test_the_caret_stays_under_its_character_after_escapes():
    from sensevm.base.diagnostics import render
    from sensevm.base.errors import SenseRuntimeError
    err = SenseRuntimeError("division by zero", Pos(1, 12), path="p.sns")
    assert render(err, 'x = "\x1b[2J" + 1 / 0\n').splitlines()[1:] == [
        '    1 | x = "\\x1b[2J" + 1 / 0',
        "      |               ^"]
