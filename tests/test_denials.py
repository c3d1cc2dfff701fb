"""The VM skips its capability walks until a run holds a deny rule (policy.Denials): every way a
deny rule reaches a table must be noticed first, or a denied action or tool would run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ROOT
from test_policy import CAPS, worlds
from test_tiers import _run_source

from sensevm.guard.policy import DENY, Denials, allowed

TIERS = ("1", "2")


@settings(max_examples=400, deadline=None)
@given(worlds(), st.sampled_from(CAPS))
def test_with_no_deny_rule_anywhere_every_capability_is_allowed(world, cap):
    """The fact the skip rests on; and Denials.note sees a deny rule in any table."""
    scope, frame = world
    tables, seen = [], set()
    for s in [scope] + [f.scope for f in _frames(frame)]:
        while s is not None and id(s) not in seen:
            seen.add(id(s))
            tables.append(s.policy)
            s = s.parent
    denials = Denials()
    for table in tables:
        denials.note(table)
    assert denials.seen == any(t and DENY in t.values() for t in tables)
    if not denials.seen:
        assert allowed(cap, scope, frame)


def _frames(frame):
    while frame is not None:
        yield frame
        frame = frame.caller or frame.origin


HOT = '''reversible action credit(k: Int) requires ledger.write:
    print("credit", k)
rollback:
    print("undo", k)
tool score(k: Int) returns Int requires calc.score:
    return k * 2
def go(n):
    total = 0
    i = 0
    while i < n:
        c = credit(i)
        c.verify()
        c.commit()
        total = total + score(i)
        i = i + 1
    return total
print(go(40))
'''


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("cap,what", [("calc.score", "tool 'score'"),
                                      ("ledger.write", "action 'credit'")])
def test_a_deny_made_after_hot_allowed_checks_takes_effect_at_the_next_check(tmp_path, tier,
                                                                             cap, what):
    stdout, error = _run_source(tmp_path, HOT + f"policy: deny {cap}\nprint(go(1))\n", tier)[:2]
    assert stdout.count("credit") == 40 + (cap == "calc.score")
    assert stdout.splitlines()[40] == str(sum(2 * k for k in range(40)))
    assert error[0] == "SensePolicyError"
    assert f"{what} requires capability '{cap}', which is denied by policy" in error[1]


@pytest.mark.parametrize("tier", TIERS)
def test_a_callers_deny_reaches_the_loop_it_calls(tmp_path, tier):
    source = HOT + ("def guarded():\n    policy: deny ledger.write\n    return go(1)\n"
                    "print(go(1))\nprint(guarded())\n")
    stdout, error = _run_source(tmp_path, source, tier)[:2]
    assert error[0] == "SensePolicyError"
    assert stdout.endswith("credit 0\n0\n")


@pytest.mark.parametrize("tier", TIERS)
def test_a_rollback_is_checked_once_a_deny_exists(tmp_path, tier):
    source = HOT + ("c = credit(7)\nc.verify()\nc.commit()\n"
                    "policy: deny ledger.write\nc.rollback()\n")
    stdout, error, lines = _run_source(tmp_path, source, tier)[:3]
    assert "credit 7\n" in stdout and "undo" not in stdout
    assert error[0] == "SensePolicyError"
    assert "denied" in lines[-1] and "(rollback)" in lines[-1]


def test_workers_share_the_runs_denials(tmp_path):
    """An async tool's body runs on a worker copy of the VM: one deny rule, wherever it is
    made, turns the checks on for both."""
    vm = _run_source(tmp_path, 'print(1)\n', "1")[5]
    worker = vm.worker()
    assert worker.denials is vm.denials and not vm.denials.seen
    worker.op_POLICY_DENY(vm_frame(vm), "x.y", None)
    assert vm.denials.seen


def vm_frame(vm):
    from sensevm.runtime.values import Scope

    from types import SimpleNamespace
    from sensevm.base.errors import Pos

    class F:      # what a rule handler reads of its frame: the scope, and where the rule is
        scope = Scope(vm.builtins)
        prepared = SimpleNamespace(path="p.sns")
        pos = Pos(1, 1)
    return F()


AGENT = '''irreversible action refund(amount: Int) requires billing.refund:
    print("refunding", amount)
agent clerk:
    "handles one refund"
    policy: deny billing.refund
    answer = ask_human("go?")
    r = refund(120)
    r.verify()
    print("state", r.state)
start(clerk)
print("main done:", clerk)
'''


def test_a_resumed_agents_deny_rule_still_holds_in_a_new_process(tmp_path):
    """The resuming process made no deny rule itself: the one restored with the agent's scope
    must turn the checks on."""
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")

    def sensevm(*args):
        return subprocess.run([sys.executable, "-m", "sensevm", *args], cwd=tmp_path,
                              capture_output=True, text=True, env=env)
    (tmp_path / "clerk.sns").write_text(AGENT, encoding="utf-8")
    first = sensevm("run", "clerk.sns", "--state-dir", "state")
    assert first.returncode == 0, first.stderr
    second = sensevm("resume", "state", "clerk", "yes")
    assert second.returncode == 1 and "state verified" not in second.stdout
    # The rule's place is not saved: the resuming process finds it in the program.
    assert "SensePolicyError: action 'refund' requires capability 'billing.refund', which is " \
           "denied by 'deny billing.refund' at clerk.sns:5, in agent clerk" in second.stderr
