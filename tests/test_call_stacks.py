"""Sense call stacks (issue 25): an uncaught runtime error prints, under its positioned
message, the Sense frames that led to it, innermost last (`  at FILE:LINE in NAME`), across
modules, tools, action bodies, rollbacks, agents and method callbacks; the same on every tier
(tier 2's frameless direct forms record the frames they stand for); deep recursion
summarised; stdout and the exit code unchanged."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from conftest import ROOT

TIERS = ("1", "2", "auto")


def run(tmp_path, source: str, tier: str, files=None):
    for name, text in (files or {}).items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (tmp_path / "main.sns").write_text(source, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=ROOT, SENSE_TIER=tier, NO_COLOR="1")
    env.pop("SENSE_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "sensevm", "run", "main.sns"], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=120)


def stack(stderr: str) -> list:
    lines = stderr.splitlines()
    if "Sense call stack (innermost last):" not in lines:
        return []
    return lines[lines.index("Sense call stack (innermost last):") + 1:]


@pytest.mark.parametrize("tier", TIERS)
def test_through_functions_tools_and_action_bodies(tmp_path, tier):
    done = run(tmp_path, '''tool t(x: Int) returns Int requires web.fetch:
    return 10 / x
irreversible action act(n: Int) requires pay.send:
    print(t(n))
def inner(n):
    local a = act(n)
    a.verify()
    a.commit()
def outer(n):
    inner(n)
print("before")
outer(0)
''', tier)
    assert done.returncode == 1 and done.stdout == "before\n"
    assert done.stderr.startswith("main.sns:2:15: SenseRuntimeError: division by zero\n")
    assert stack(done.stderr) == ["  at main.sns:12 in <module>", "  at main.sns:10 in outer()",
                                  "  at main.sns:8 in inner()", "  at main.sns:4 in action act",
                                  "  at main.sns:2 in tool t"]


@pytest.mark.parametrize("tier", TIERS)
def test_across_modules_and_method_callbacks(tmp_path, tier):
    done = run(tmp_path, '''import "lib/util.sns" as util
def twice(x):
    return util.check(x) * 2
print([1, 2].map(twice))
print([1, 5].map(twice))
''', tier, {"lib/util.sns": "def check(x):\n    if x > 3:\n        return x.nope\n    return x\n"})
    assert done.stdout == "[2, 4]\n"
    util = str(tmp_path / "lib" / "util.sns")
    assert stack(done.stderr) == ["  at main.sns:5 in <module>", "  at main.sns:3 in twice()",
                                  f"  at {util}:3 in check()"]


@pytest.mark.parametrize("tier", TIERS)
def test_a_rollback_and_an_agent(tmp_path, tier):
    done = run(tmp_path, '''reversible action setbio(b: String) requires profile.write:
    print("set", b)
rollback:
    print("undo", b.nope)
a = setbio("hi")
a.verify()
a.commit()
a.rollback()
''', tier)
    assert stack(done.stderr) == ["  at main.sns:8 in <module>",
                                  "  at main.sns:4 in rollback of setbio"]
    done = run(tmp_path, '''agent helper:
    def work():
        return 1 / 0
    print(work())
def go():
    start(helper)
go()
''', tier)
    assert stack(done.stderr) == ["  at main.sns:7 in <module>", "  at main.sns:6 in go()",
                                  "  at main.sns:4 in agent helper", "  at main.sns:3 in work()"]


@pytest.mark.parametrize("tier", TIERS)
def test_deep_recursion_is_summarised(tmp_path, tier):
    done = run(tmp_path, '''def down(n):
    if n == 0:
        return 1 / n
    return down(n - 1)
down(5000)
''', tier)
    assert stack(done.stderr) == (
        ["  at main.sns:5 in <module>"] + ["  at main.sns:4 in down()"] * 3
        + ["  ... 4,995 more frames of down()"] + ["  at main.sns:4 in down()"] * 2
        + ["  at main.sns:3 in down()"])


def test_an_error_in_the_top_level_or_a_caught_one_prints_no_stack(tmp_path):
    done = run(tmp_path, 'print(1)\nx = 1 / 0\n', "1")
    assert done.returncode == 1 and stack(done.stderr) == []
    assert "call stack" not in done.stderr
    done = run(tmp_path, '''def f():
    return 1 / 0
try:
    f()
except SenseError as e:
    print("caught", e.message)
''', "1")
    assert done.returncode == 0 and done.stdout == "caught division by zero\n"
    assert done.stderr == ""


@settings(max_examples=15, deadline=None)
@given(st.lists(st.sampled_from(["plain", "tool", "action"]), min_size=1, max_size=5),
       st.sampled_from(TIERS))
def test_every_chain_of_calls_is_the_stack_on_every_tier(tmp_path_factory, chain, tier):
    """A chain of functions, tools and action bodies, each calling the next, the last one
    failing: the stack lists each of them, outermost first, at the line of its call."""
    tmp_path = tmp_path_factory.mktemp("chain")
    lines, expected = [], []
    callee = None
    for k in reversed(range(len(chain))):
        name = f"f{k}"
        body = f"{callee}(n)" if callee else "1 / n"
        if chain[k] == "plain":
            lines += [f"def {name}(n):", f"    return {body}"]
            call, label = f"{name}(n)", f"{name}()"
        elif chain[k] == "tool":
            lines += [f"tool {name}(n: Int) returns Any requires t.c{k}:", f"    return {body}"]
            call, label = f"{name}(n)", f"tool {name}"
        else:
            lines += [f"irreversible action {name}(n: Int) requires a.c{k}:", f"    print({body})",
                      f"def run_{name}(n):", f"    local a = {name}(n)", "    a.verify()",
                      "    return a.commit()"]
            call, label = f"run_{name}(n)", None
        expected.insert(0, (label, name))
        callee = call[:call.index("(")]
    source = "\n".join(lines) + f"\n{callee}(0)\n"
    done = run(tmp_path, source, tier)
    got = stack(done.stderr)
    assert got[0] == f"  at main.sns:{len(lines) + 1} in <module>"
    names = [g.rsplit(" in ", 1)[1] for g in got[1:]]
    want = []
    for label, name in expected:
        want += [f"run_{name}()", f"action {name}"] if label is None else [label]
    assert names == want
