"""A body runs once: a commit or rollback re-entered from its own body, or raced from other threads,
meets the ordinary lifecycle error in state 'committing' / 'rolling_back' (issue 20, item 2)."""

from __future__ import annotations

import sys
import threading
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from test_tiers import _run_source

TIERS = ("1", "2")

SELF_COMMIT = '''irreversible action pay(to: String, amount: Int) requires payment.send:
    print("PAID " + str(amount) + " to " + to)
    if again:
        again = false
        m.commit()
again = true
m = pay("landlord@example.com", 1200)
m.verify()
m.commit()
'''


@pytest.mark.parametrize("tier", TIERS)
def test_a_body_that_commits_its_own_action_runs_once(tmp_path, tier):
    out, error, lines, *_ = _run_source(tmp_path, SELF_COMMIT, tier)
    assert out == "PAID 1200 to landlord@example.com\n"
    assert error[:2] == ("SenseRuntimeError", "action 'pay' must be verified before .commit() "
                                              "(current state: 'committing')")
    assert error[2].line == 5
    # The inner refusal failed the body: the action is failed, audited once as such.
    assert [line.split(" -> ")[1] for line in lines] == [
        "prepared", "verified", "failed (action 'pay' must be verified before "
                                ".commit() (current state: 'committing'))"]


@pytest.mark.parametrize("tier", TIERS)
def test_the_state_reads_committing_and_rolling_back_while_a_body_runs(tmp_path, tier):
    out, error, *_ = _run_source(tmp_path, '''reversible action put(k: Int) requires kv.write:
    print("in body:", m.state)
rollback:
    print("in rollback:", m.state)
m = put(1)
m.verify()
m.commit()
m.rollback()
print("after:", m.state)
''', tier)
    assert error is None
    assert out == "in body: committing\nin rollback: rolling_back\nafter: rolled_back\n"


@pytest.mark.parametrize("tier", TIERS)
def test_a_rollback_block_that_rolls_itself_back_runs_once(tmp_path, tier):
    out, error, lines, *_ = _run_source(tmp_path, '''reversible action put(k: Int) requires kv.write:
    print("PUT", k)
rollback:
    print("UNDO", k)
    if again:
        again = false
        m.rollback()
again = true
m = put(1)
m.verify()
m.commit()
test "re-entered":
    m.rollback()
print(m.state)
m.rollback()
print(m.state)
''', tier)
    assert error is None
    # The re-entry failed the first rollback (the action stays committed, spec 10.6), and a
    # later rollback runs the block once more.
    assert out == "PUT 1\nUNDO 1\ncommitted\nUNDO 1\nrolled_back\n"
    assert "rollback body failed: [line 7] cannot rollback action 'put' — its state is " \
           "'rolling_back', not 'committed'" in lines[3]


RACE = '''irreversible action pay(amount: Int) requires payment.send:
    print("PAID", amount)
    i = 0
    while i < 300:
        i = i + 1
    return amount
async tool racer(k: Int) returns String:
    while not go:
        k = k + 1
    WHAT
    return "won"
m = pay(5)
m.verify()
go = false
fs = []
for k in range(N):
    push(fs, racer(k))
go = true
won = 0
for f in fs:
    test "a racer":
        await(f)
        won = won + 1
print("won", won, m.state)
'''


@pytest.fixture
def busy_switching():
    """Threads switch every few microseconds, so that racing calls interleave."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


@pytest.mark.parametrize("tier", TIERS)
def test_async_tools_racing_to_commit_one_action_run_its_body_once(tmp_path, tier,
                                                                    busy_switching):
    for _ in range(5):
        out, error, lines, _, tests, _ = _run_source(
            tmp_path, RACE.replace("WHAT", "m.commit()").replace("N", "8"), tier)
        assert error is None
        assert out == "PAID 5\nwon 1 committed\n"
        assert [line.split(" -> ")[1] for line in lines
                if "action 'pay'" in line] == ["prepared", "verified",
                                               "committed (via tool:racer)"]
        losers = [t for t in tests if not t[1]]
        assert len(losers) == 7 and all("must be verified before .commit() (current state: '"
                                        in t[2] for t in losers)


@pytest.mark.parametrize("tier", TIERS)
def test_async_tools_racing_to_verify_then_commit_run_the_body_once(tmp_path, tier,
                                                                     busy_switching):
    """A verify that read 'prepared' before another thread committed cannot put the action
    back to 'verified' (a lost update would let a third commit run the body again)."""
    program = RACE.replace("m.verify()\n", "").replace(
        "WHAT", "test \"v\":\n        m.verify()\n    m.commit()").replace("N", "8")
    for _ in range(5):
        out, error, lines, *_ = _run_source(tmp_path, program, tier)
        assert error is None
        assert out == "PAID 5\nwon 1 committed\n"
        events = [line.split(" -> ")[1] for line in lines if "action 'pay'" in line]
        assert events == ["prepared", "verified (via tool:racer)", "committed (via tool:racer)"]


def test_move_is_a_compare_and_set_under_threads(busy_switching):
    """Many threads taking commit_begin from 'verified' at once: exactly one wins, the others
    get the ordinary E-COMMIT error for the state the winner left."""
    from sensevm.guard import lifecycle as L
    from sensevm.base.errors import SenseRuntimeError
    L.threads_start()
    for _ in range(50):
        action = SimpleNamespace(state=L.VERIFIED, name="pay", reversible=False)
        outcomes = []
        gate = threading.Barrier(6)

        def claim():
            gate.wait()
            try:
                outcomes.append(L.move(action, L.COMMIT_BEGIN))
            except SenseRuntimeError as err:
                outcomes.append(err.message)
        threads = [threading.Thread(target=claim) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert outcomes.count(L.COMMITTING) == 1
        assert sorted(set(outcomes) - {L.COMMITTING}) == [
            "action 'pay' must be verified before .commit() (current state: 'committing')"]


CALLS = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["verify", "approve", "commit",
                                                               "rollback"])),
                 min_size=1, max_size=6)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(threads=st.lists(CALLS, min_size=2, max_size=4), reversible=st.booleans())
def test_no_interleaving_of_lifecycle_calls_from_threads_runs_a_body_twice(
        tmp_path, busy_switching, threads, reversible):
    """Several async tools each make a sequence of lifecycle calls on two shared actions (each
    call in a test block, so a refusal is recorded and the tool goes on): every body and
    rollback block runs at most once, and the audit log's outcomes match what ran."""
    kind = "reversible" if reversible else "irreversible"
    decl = (f"{kind} action act(k: Int) requires x.y:\n    print(\"BODY\", k)\n"
            + ("rollback:\n    print(\"UNDO\", k)\n" if reversible else ""))
    tools = []
    for t, calls in enumerate(threads):
        body = "".join(f"    test \"{t}-{i}\":\n        acts[{j % 2}].{method}()\n"
                       for i, (j, method) in enumerate(calls))
        tools.append(f"async tool worker{t}() returns Int:\n    local n = 0\n"
                     f"    while not go:\n        n = n + 1\n{body}    return {t}\n")
    main = ("acts = [act(0), act(1)]\ngo = false\nfs = []\n"
            + "".join(f"push(fs, worker{t}())\n" for t in range(len(threads)))
            + "go = true\nfor f in fs:\n    await(f)\nfor a in acts:\n    print(\"END\", a.state)\n")
    out, error, lines, *_ = _run_source(tmp_path, decl + "".join(tools) + main, "1")
    assert error is None, error
    printed = out.splitlines()
    for k in (0, 1):
        assert printed.count(f"BODY {k}") <= 1
        assert printed.count(f"UNDO {k}") <= printed.count(f"BODY {k}")
    outcomes = [line.split(" -> ")[1].split(" (via")[0] for line in lines if "action 'act'" in line]
    committed, rolled = outcomes.count("committed"), outcomes.count("rolled_back")
    assert committed == sum(line.startswith("BODY") for line in printed)
    assert rolled == sum(line.startswith("UNDO") for line in printed)
    ends = [line.split()[1] for line in printed if line.startswith("END")]
    for k, end in enumerate(ends):
        ran, undone = f"BODY {k}" in printed, f"UNDO {k}" in printed
        assert end == ("rolled_back" if undone else "committed" if ran else end)
        assert end not in ("committing", "rolling_back")


MADE = '''irreversible action send(to: String, body: String) requires email.send:
    return len(body)
policy:
    allow email.send
a = send("a@example.com", "hi")
b = send("b@example.com", "hello")
b.verify()
n = b.commit()
'''


@pytest.mark.parametrize("tier", TIERS)
def test_what_prepare_and_commit_make_has_every_field_their_classes_set(tmp_path, tier):
    """prepare and commit make a PreparedAction and the body's Scope without calling __init__
    (a frame less in every lifecycle): each field must still be set, as __init__ sets it."""
    import io
    from test_tiers import _verified
    from sensevm.runtime.values import PreparedAction, Scope
    from sensevm.runtime.vm import VM
    path = tmp_path / "made.sns"
    path.write_text(MADE)
    vm = VM(_verified(str(path)), stdout=io.StringIO(), tier=tier, stdin=io.StringIO(""))
    module = Scope(vm.builtins, tag="module")
    vm.run_unit(vm.prepared, module)
    a, b = module.vars["a"], module.vars["b"]
    fresh = PreparedAction(a.definition, a.args)
    assert {slot: getattr(a, slot) for slot in PreparedAction.__slots__} == \
        {slot: getattr(fresh, slot) for slot in PreparedAction.__slots__}
    assert b.state == "committed" and module.vars["n"] == 5
    body, model = b.body_scope, Scope(b.definition.scope)
    assert {slot: getattr(body, slot) for slot in Scope.__slots__ if slot != "vars"} == \
        {slot: getattr(model, slot) for slot in Scope.__slots__ if slot != "vars"}
    assert body.vars == {"to": "b@example.com", "body": "hello"}
