"""The standard library's foundation: where `import std.X` reads, the native call syntax, and
the native bridge's guarantee against hand-made .snb files (docs/stdlib.md)."""

from __future__ import annotations

import os
import tomllib

import pytest

from conftest import ROOT
from stdlib_helpers import TIERS, clean_failure, run_file, sense_run


@pytest.mark.parametrize("tier", TIERS)
def test_std_is_not_shadowed_by_a_local_std_directory(tmp_path, tier):
    (tmp_path / "std").mkdir()
    (tmp_path / "std" / "math.sns").write_text("def floor(x):\n    return 999\n")
    (tmp_path / "std.sns").write_text("x = 1\n")
    done = sense_run(tmp_path, "import std.math\nfrom std.math import ceil\n"
                               "print(math.floor(2.5), ceil(2.5))\n", tier=tier)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "2 3\n"


def test_std_imports_are_allowed_outside_the_import_root(tmp_path):
    # The program's directory is the import root; the library lives elsewhere and still loads,
    # while a relative import out of the directory is still refused.
    sub = tmp_path / "prog"
    sub.mkdir()
    (tmp_path / "lib.sns").write_text("x = 1\n")
    assert sense_run(sub, "import std.math\nprint(math.pi > 3)\n").stdout == "true\n"
    refused = sense_run(sub, 'import "../lib.sns"\n')
    assert refused.returncode != 0 and "outside the program's directory" in refused.stderr


def test_an_unknown_std_module_is_a_positioned_compile_error(tmp_path):
    done = sense_run(tmp_path, 'print("before")\n\nimport std.nope\n')
    clean_failure(done)
    assert "main.sns:3:" in done.stderr
    assert "std.nope" in done.stderr and "std.fs" in done.stderr and "std.math" in done.stderr
    assert done.stdout == ""


def test_native_calls_are_refused_outside_the_library(tmp_path):
    done = sense_run(tmp_path, 'x = 1\ny = native::fs_remove("main.sns")\n')
    clean_failure(done)
    assert "main.sns:2:5" in done.stderr and "standard library" in done.stderr
    assert (tmp_path / "main.sns").exists()


def test_a_word_other_than_native_before_colons_is_a_syntax_error(tmp_path):
    # `::` is a token only right after `native`; anywhere else it is two colons, as the
    # reference reads them (and `a[1::2]` keeps the reference's error).
    done = sense_run(tmp_path, 'y = other::fs_remove("main.sns")\n')
    clean_failure(done)
    assert "main.sns:1:10: SenseSyntaxError:" in done.stderr and "COLON ':'" in done.stderr


def _stdlib_compile(source: str):
    """Compile ``source`` as if it were a file of the library (as a forger could): the
    compiler accepts native calls there, and the .snb is made without verification."""
    from sensec.driver import compile_source
    from sensevm.base.stdlib_dir import stdlib_dir
    from sensevm.bytecode.snb import dump
    return dump(compile_source(source, os.path.join(stdlib_dir(), "forged.sns")))


def test_unknown_native_names_are_refused_in_the_library():
    from sensevm.base.errors import CompileErrors
    with pytest.raises(CompileErrors) as info:
        _stdlib_compile("x = native::no_such_thing(1)\n")
    assert "no_such_thing" in str(info.value.errors[0])


def test_the_registry_has_a_function_for_each_native_of_the_contract():
    from sensevm.bytecode.natives import KINDS, SPECS
    from sensevm.world.stdlib_native import REGISTRY
    assert set(REGISTRY) == set(SPECS)
    for name, (kind, cap, fn) in REGISTRY.items():
        assert (kind, cap) == SPECS[name] and callable(fn) and kind in KINDS
        assert (cap is None) == (kind == "pure")


FORGED = {
    "top level": 'native::fs_write_text("victim.txt", "owned")\n',
    "plain function": 'def f(p):\n    native::fs_write_text(p, "owned")\nf("victim.txt")\n',
    "tool of another capability": (
        'tool t(p: String) returns String requires fs.read:\n'
        '    native::fs_write_text(p, "owned")\n    return "ok"\nprint(t("victim.txt"))\n'),
    "irreversible action": (
        'irreversible action w(p: String) requires fs.write:\n'
        '    native::fs_write_text(p, "owned")\n'
        'a = w("victim.txt")\na.verify()\na.commit()\n'),
    "reversible action of another capability": (
        'reversible action w(p: String) requires fs.read:\n'
        '    native::fs_write_text(p, "owned")\nrollback:\n    print("r")\n'
        'a = w("victim.txt")\na.verify()\na.commit()\n'),
    "tool native in an action": (
        'reversible action w(p: String) requires fs.read:\n'
        '    print(native::fs_read_text(p))\nrollback:\n    print("r")\n'
        'a = w("main.sns")\na.verify()\na.commit()\n'),
}

# The verifier's static check switched off in the running process: only the NATIVE handler's
# run-time check stands between the forged file and the effect.
NO_STATIC_CHECK = ("from sensevm.bytecode import verify\n"
                   "verify._CodeVerifier.check_native = lambda self, ins, name: None\n")


@pytest.mark.parametrize("case", sorted(FORGED))
def test_a_forged_native_is_refused_by_the_verifier(tmp_path, case):
    (tmp_path / "forged.snb").write_bytes(_stdlib_compile(FORGED[case]))
    done = run_file(tmp_path, "forged.snb")
    clean_failure(done)
    assert "native" in done.stderr
    assert not (tmp_path / "victim.txt").exists()


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("case", sorted(FORGED))
def test_a_forged_native_is_refused_at_run_time(tmp_path, case, tier):
    (tmp_path / "forged.snb").write_bytes(_stdlib_compile(FORGED[case]))
    done = run_file(tmp_path, "forged.snb", "--audit-log", "audit.jsonl", tier=tier,
                    script=NO_STATIC_CHECK)
    clean_failure(done)
    assert "SensePolicyError" in done.stderr and "refused" in done.stderr, done.stderr
    assert not (tmp_path / "victim.txt").exists()
    assert "owned" not in done.stdout
    # The refusal is on the durable record, naming the native.
    import json
    records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [r for r in records if r.get("event") == "refused" and "native" in str(r)], records


@pytest.mark.parametrize("tier", TIERS)
def test_a_forged_native_in_a_matching_declaration_still_meets_its_checks(tmp_path, tier):
    # The right kind and capability: the effect happens only through the declaration, whose
    # capability a policy denies here, so nothing is written.
    source = ('policy:\n    deny fs.write\n'
              'reversible action w(p: String) requires fs.write:\n'
              '    native::fs_write_text(p, "owned")\nrollback:\n    print("r")\n'
              'a = w("victim.txt")\na.verify()\na.commit()\n')
    (tmp_path / "forged.snb").write_bytes(_stdlib_compile(source))
    done = run_file(tmp_path, "forged.snb", tier=tier)
    clean_failure(done)
    assert not (tmp_path / "victim.txt").exists()


def test_the_disassembler_names_the_native(tmp_path):
    import subprocess
    import sys
    from stdlib_helpers import env
    (tmp_path / "main.sns").write_text("import std.math\nprint(math.sqrt(4))\n")
    done = subprocess.run([sys.executable, "-m", "sensec", "dis", "main.sns"], cwd=tmp_path,
                          capture_output=True, text=True, env=env("1"), timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if "NATIVE" in line]
    assert any('("math_sqrt")' in line for line in lines), lines


@pytest.mark.parametrize("module", ["math", "fs"])
def test_fmt_round_trips_the_library(module):
    from sensec.fmt import format_source
    from sensevm.base.stdlib_dir import stdlib_dir
    path = os.path.join(stdlib_dir(), module + ".sns")
    text = open(path, encoding="utf-8").read()
    once = format_source(text, path)
    assert "native::" in once
    assert format_source(once, path) == once


def test_pyproject_lists_every_package_and_ships_the_library():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        config = tomllib.load(fh)["tool"]["setuptools"]
    found = set()
    for top in ("sensec", "sensevm"):
        for directory, _, files in os.walk(os.path.join(ROOT, top)):
            if "__init__.py" in files:
                found.add(os.path.relpath(directory, ROOT).replace(os.sep, "."))
    data_only = {"sensevm.stdlib", "sensevm.cli.console_static"}     # (files, no __init__.py)
    assert set(config["packages"]) == found | data_only
    assert config["package-data"]["sensevm.cli.console_static"] == ["*"]
    assert config["package-dir"]["sensevm.stdlib"] == "stdlib"
    assert "*.sns" in config["package-data"]["sensevm.stdlib"]


def test_the_library_is_found_beside_the_installed_package(tmp_path, monkeypatch):
    import shutil
    from sensevm.base import stdlib_dir as where
    fake = tmp_path / "site" / "sensevm"
    shutil.copytree(os.path.join(ROOT, "stdlib"), fake / "stdlib")
    monkeypatch.setattr(where, "_here", str(fake))
    monkeypatch.setattr(where, "_found", None)
    assert where.stdlib_dir() == os.path.realpath(fake / "stdlib")
    assert "fs" in where.modules() and "math" in where.modules()
