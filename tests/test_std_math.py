"""std.math through the real commands on both tiers (docs/stdlib.md)."""

from __future__ import annotations

import math

import pytest

from stdlib_helpers import TIERS, clean_failure, sense_run

tiers = pytest.mark.parametrize("tier", TIERS)


@tiers
def test_values(tmp_path, tier):
    source = ("import std.math\n"
              "print(math.floor(2.7), math.floor(-2.5), math.ceil(2.1), math.round(2.5), math.round(3.5))\n"
              "print(math.abs(-4), math.abs(2.5), math.min(3, 1.5), math.max(3, 7))\n"
              "print(math.sqrt(2.25), math.pow(2, 10), math.log(math.e), math.exp(0))\n"
              "print(math.pi, math.e, math.inf > 1000000000000000000000.0, -math.inf < 0)\n"
              "print(math.is_nan(math.inf - math.inf), math.is_nan(1.0), math.floor(7))\n"
              # hot enough for tier 2 to compile the loop that calls the library
              "t = 0\nfor i in range(300):\n    t = t + math.floor(i / 2)\nprint(t)\n")
    done = sense_run(tmp_path, source, tier=tier)
    assert done.returncode == 0, done.stderr
    expected = [
        f"{math.floor(2.7)} {math.floor(-2.5)} {math.ceil(2.1)} {round(2.5)} {round(3.5)}",
        "4 2.5 1.5 7",
        f"{math.sqrt(2.25)} {math.pow(2, 10)} {math.log(math.e)} {math.exp(0)}",
        f"{math.pi} {math.e} true true",
        "true false 7",
        str(sum(i // 2 for i in range(300))),
    ]
    assert done.stdout.splitlines() == expected


@tiers
@pytest.mark.parametrize("call,words", [
    ("math.sqrt(-1)", ["sqrt", "negative"]),
    ("math.log(0)", ["log", "not positive"]),
    ("math.log(-2.5)", ["log", "not positive"]),
    ("math.exp(100000)", ["exp", "too large"]),
    ("math.floor(math.inf)", ["floor", "not an Int"]),
])
def test_domain_errors_are_positioned(tmp_path, tier, call, words):
    done = sense_run(tmp_path, f'import std.math\nprint("a")\nx = {call}\n', tier=tier)
    clean_failure(done)
    assert "SenseRuntimeError" in done.stderr
    assert "main.sns:3:" in done.stderr, done.stderr
    for w in words:
        assert w in done.stderr
    assert done.stdout == "a\n"


@tiers
@pytest.mark.parametrize("fn", ["floor", "ceil", "round", "abs", "sqrt", "log", "exp", "is_nan"])
def test_wrong_types_name_the_function(tmp_path, tier, fn):
    done = sense_run(tmp_path, f'import std.math\nx = math.{fn}("3")\n', tier=tier)
    clean_failure(done)
    assert f"{fn}() expects a number" in done.stderr and "String" in done.stderr
    assert "main.sns:2:" in done.stderr


@pytest.mark.parametrize("fn", ["min", "max", "pow"])
def test_wrong_types_name_the_function_of_two_arguments(tmp_path, fn):
    done = sense_run(tmp_path, f'import std.math\nx = math.{fn}(1, true)\n')
    clean_failure(done)
    assert f"{fn}() expects a number" in done.stderr and "Bool" in done.stderr


def test_results_carry_their_arguments_origins(tmp_path, monkeypatch):
    import io
    from sensec.driver import compile_file
    from sensevm.bytecode.snb import dump
    from sensevm.bytecode.verify import load_verified
    from sensevm.guard import provenance as PV
    from sensevm.runtime.values import Scope
    from sensevm.runtime.vm import VM
    (tmp_path / "n.txt").write_text("6.25")
    (tmp_path / "main.sns").write_text(
        'import std.math\nfrom std.fs import read_text\nx = float(read_text("n.txt"))\n'
        "r = math.sqrt(x)\nf = math.floor(x)\nm = math.max(1, x)\nk = math.max(1, 2)\n"
        "a = math.abs(0 - x)\np = math.pow(x, 2)\n")
    monkeypatch.chdir(tmp_path)
    scopes = []

    def grab(self):
        scope = Scope(self.builtins, tag="module")
        scopes.append(scope)
        return self.run_unit(self.prepared, scope)
    monkeypatch.setattr(VM, "_run_main", grab)
    VM(load_verified(dump(compile_file(str(tmp_path / "main.sns")))), stdout=io.StringIO()).run()
    v = scopes[0].vars
    assert (v["r"], v["f"], v["m"], v["a"], v["p"]) == (2.5, 6, 6.25, 6.25, 6.25 ** 2)
    for name in ("r", "f", "m", "a", "p"):
        assert PV.untrusted("file") in PV.origins_of(v[name]), name
    assert not PV.origins_of(v["k"])
