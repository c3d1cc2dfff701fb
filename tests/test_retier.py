"""Tier 2 made again for a long-running loop: a loop whose Int version the first budget
declined (tier2.SPEC_LINES) counts its turns, and after tier2.HOT_TURNS of them its frame is
handed, at the loop's header, to the code made again with the larger budget (VM.retier).
Everything observable stays tier 1's (tests/test_tiers.py compares the tiers)."""

from __future__ import annotations

import re

import pytest

from test_tier2_ints import QUIETLY
from test_tiers import EXAMPLES, PROGRAMS, _id, _run_source, assert_same_on_both_tiers

LONG_LOOP = """\
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon"]
def run(n):
    lines = []
    line = ""
    i = 0
    while i < n:
        word = WORDS[i % 5] + str(i % 100)
        if len(line) + len(word) > 60:
            push(lines, line)
            line = word
        else if line == "":
            line = word
        else:
            line = line + " " + word
        i = i + 1
    return str(len(lines)) + " " + line
print(run(TURNS))
print(run(7.5))
"""


def _code(vm, name):
    return next(c for c in vm.prepared if c.code.name == name)


def _long_run(tmp_path, monkeypatch, source):
    """``source`` on both tiers with HOT_TURNS 100 and a first budget of 5 lines per test
    spared: what it printed (the same on both, and no error), and tier 2's ``run``."""
    from sensevm.runtime import tier2
    monkeypatch.setattr(tier2, "HOT_TURNS", 100)
    monkeypatch.setattr(tier2, "SPEC_LINES", 5)
    one = _run_source(tmp_path, source, "1")
    two = _run_source(tmp_path, source, "2")
    assert one[:5] == two[:5] and one[1] is None
    return one[0], _code(two[5], "run")


@pytest.mark.parametrize("turns", [40, 400])
def test_a_long_loop_goes_on_in_code_made_again_with_int_versions(tmp_path, monkeypatch,
                                                                    turns):
    """run's loop is too large for an Int version at the first budget (5 lines per test
    spared, here): it counts its turns, and past HOT_TURNS (100 here) the frame goes on from
    the loop's header in code made again with one, exactly once; a shorter run never pays
    for that. A Float bound afterwards still takes the general version, as in tier 1."""
    out, run = _long_run(tmp_path, monkeypatch, LONG_LOOP.replace("TURNS", str(turns)))
    assert out.splitlines()[1] == "0 alpha0 beta1 gamma2 delta3 epsilon4 alpha5 beta6 gamma7"
    guard = re.compile(r"if " + QUIETLY + r"l\d\.__class__ is int and l\d\.__class__ is int\b")
    if turns < 100:
        assert not run.hot and "_hot += 1" in run.t2.source
        assert not guard.search(run.t2.source)
    else:
        assert run.hot and "_hot" not in run.t2.source and guard.search(run.t2.source)


LONG_FOR = (LONG_LOOP.replace("    i = 0\n    while i < n:\n", "    i = 0\n    for z in range(n):\n")
            .replace("print(run(7.5))", "print(run(3))"))


@pytest.mark.parametrize("turns", [40, 400])
def test_a_long_for_loop_counts_its_turns_for_the_int_version(tmp_path, monkeypatch, turns):
    """(Found by review.) A ``for`` loop whose Int version the first budget declines still
    counts its turns (no item loop without the guards in its place: the version made again
    has both), and past HOT_TURNS goes on in code made again, its Python ``for`` over the
    items under the Int guard."""
    _, run = _long_run(tmp_path, monkeypatch, LONG_FOR.replace("TURNS", str(turns)))
    guard = re.compile(r"if " + QUIETLY + r"l\d\.__class__ is int and .*not s\d\.origins")
    if turns < 100:
        assert not run.hot and "_hot += 1" in run.t2.source
        assert "__setstate__" not in run.t2.source
    else:
        assert run.hot and guard.search(run.t2.source) and "__setstate__" in run.t2.source


def test_code_is_made_again_once(tmp_path, monkeypatch):
    """A second long call of the same function starts in the code made again: it is not made
    a third time (compiling it is paid once per code object)."""
    from sensevm.runtime import tier2
    monkeypatch.setattr(tier2, "HOT_TURNS", 50)
    monkeypatch.setattr(tier2, "SPEC_LINES", 5)
    made = []
    real = tier2.compile_code
    monkeypatch.setattr(tier2, "compile_code", lambda *a, **k: made.append(k.get("hot")) or
                        real(*a, **k))
    source = LONG_LOOP.replace("print(run(7.5))", "print(run(300))").replace("TURNS", "300")
    out, error, *_, vm = _run_source(tmp_path, source, "2")
    assert error is None and out.splitlines()[0] == out.splitlines()[1]
    assert made.count(True) == 1 and _code(vm, "run").hot


@pytest.fixture
def eager(monkeypatch):
    """Every loop of a generator is declined an Int version at first (SPEC_LINES 1) and taken
    to want one, and its code is made again at its second turn: the hand-over at a loop
    header, with whatever the frame holds there (block scopes, a method bound at a fused site,
    an iterator on the stack, deferred stores, a step budget), is met by every program below
    that loops."""
    from sensevm.runtime import tier2
    monkeypatch.setattr(tier2, "SPEC_LINES", 1)
    monkeypatch.setattr(tier2, "HOT_TURNS", 1)
    monkeypatch.setattr(tier2._Gen, "worth_when_hot", lambda self, start: not self.hot)


@pytest.mark.parametrize("path", PROGRAMS[::3] + EXAMPLES, ids=_id)
def test_programs_handed_over_at_every_loop_run_as_in_tier_one(path, eager):
    assert_same_on_both_tiers(path, dry_run=path.endswith("dry_run.sns"))


def test_the_hand_over_is_met(tmp_path, eager):
    """The comparison above would prove nothing if no program were ever handed over."""
    source = ("def f(n):\n    t = 0\n    i = 0\n    while i < n:\n        if i % 3 == 0:\n"
              "            t = t + i * 2\n        i = i + 1\n    return t\nprint(f(50))\n")
    one = _run_source(tmp_path, source, "1")
    two = _run_source(tmp_path, source, "2")
    assert one[:5] == two[:5] and one[0] == "816\n"
    assert _code(two[5], "f").hot
