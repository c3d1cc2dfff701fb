"""Lifecycle invariants, checked by hypothesis against a small model of the spec's state machine.

Each example generates a Sense program: some action declarations (reversible or not, with or
without a capability and `requires approval`, with bodies and rollback blocks that may fail),
then a random sequence of prepare / verify / approve / commit / rollback calls, policy changes,
and calls made from inside a function whose caller denies the capability (spec 21.2). It runs
the program (plain or dry run) on both execution tiers and compares every line of output — body
runs, states, errors caught, and the final audit log with its line numbers — with what the model
predicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

CAPS = ("net.send", "fs.write")


@dataclass
class Decl:
    name: str
    reversible: bool
    cap: str | None
    approval: bool
    body_fails: bool
    rollback_fails: bool


@dataclass
class Inst:
    decl: Decl
    state: str = "prepared"
    approved: bool = False


decls_strategy = st.lists(
    st.builds(lambda rev, cap, appr, bf, rf: (rev, cap, appr, bf, rf),
              st.booleans(), st.sampled_from((None,) + CAPS), st.booleans(),
              st.booleans(), st.booleans()),
    min_size=1, max_size=3)

op_strategy = st.one_of(
    st.tuples(st.just("prepare"), st.integers(0, 2)),
    st.tuples(st.sampled_from(["verify", "approve", "commit", "rollback"]), st.integers(0, 5),
              st.sampled_from(["top", "chain"])),
    st.tuples(st.just("policy"), st.sampled_from(CAPS), st.sampled_from(["allow", "deny"])),
)


class Model:
    """The spec's rules (10.4-10.6, 11, 13, 14, 21.2, 21.6), written independently of the VM."""

    def __init__(self, dry_run: bool):
        self.dry_run = dry_run
        self.policy: dict[str, str] = {}
        self.out: list[str] = []
        self.audit: list[str] = []
        self.body_runs: dict[int, int] = {}

    def denied(self, cap, chain_cap):
        return cap is not None and (self.policy.get(cap) == "deny" or chain_cap == cap)

    def subject(self, d: Decl) -> str:
        return f"{'reversible' if d.reversible else 'irreversible'} action '{d.name}'"

    def call(self, j: int, inst: Inst, method: str, line: int, chain_cap) -> None:
        d, subj = inst.decl, self.subject(inst.decl)
        if method == "verify":
            if inst.state != "prepared":
                return self.out.append("E runtime")
            if self.denied(d.cap, chain_cap):
                inst.state = "denied"
                self.audit.append(f"[line {line}] {subj} -> denied (capability '{d.cap}' denied by policy)")
                return self.out.append("E policy")
            inst.state = "verified"
            self.audit.append(f"[line {line}] {subj} -> verified")
        elif method == "approve":
            if inst.state not in ("prepared", "verified"):
                return self.out.append("E runtime")
            inst.approved = True
        elif method == "commit":
            if inst.state != "verified":
                return self.out.append("E runtime")
            if self.denied(d.cap, chain_cap):
                inst.state = "denied"
                self.audit.append(f"{subj} -> denied (capability '{d.cap}' denied by policy)")
                return self.out.append("E policy")
            if d.approval and not inst.approved:
                self.audit.append(f"{subj} -> denied (requires approval)")
                return self.out.append("E approval")
            if self.dry_run:
                inst.state = "committed"
                self.audit.append(f"{subj} -> committed (dry run — body not executed)")
                return
            self.out.append(f"BODY {d.name} {j}")
            self.body_runs[j] = self.body_runs.get(j, 0) + 1
            if d.body_fails:
                inst.state = "failed"
                self.audit.append(f"{subj} -> failed (body of {d.name} failed)")
                return self.out.append("E runtime")
            inst.state = "committed"
            self.audit.append(f"{subj} -> committed")
        else:
            if not d.reversible or inst.state != "committed":
                return self.out.append("E runtime")
            if self.denied(d.cap, chain_cap):
                self.audit.append(f"[line {line}] {subj} -> denied (capability '{d.cap}' denied by policy (rollback))")
                return self.out.append("E policy")
            if self.dry_run:
                inst.state = "rolled_back"
                self.audit.append(f"[line {line}] {subj} -> rolled_back (dry run — rollback not executed)")
                return
            self.out.append(f"RB {d.name} {j}")
            if d.rollback_fails:
                self.audit.append(f"[line {line}] {subj} -> failed (rollback body failed: rollback of {d.name} failed)")
                return self.out.append("E runtime")
            inst.state = "rolled_back"
            self.audit.append(f"[line {line}] {subj} -> rolled_back")


def build(decl_specs, ops, dry_run):
    """The Sense program for this example, and the model's prediction of its stdout."""
    lines: list[str] = []
    decls = []
    for i, (rev, cap, appr, bf, rf) in enumerate(decl_specs):
        d = Decl(f"act{i}", rev, cap, appr, bf, rf)
        decls.append(d)
        reqs = ", ".join(([cap] if cap else []) + (["approval"] if appr else []))
        head = f"{'reversible' if rev else 'irreversible'} action {d.name}(n: Int)"
        lines.append(head + (f" requires {reqs}:" if reqs else ":"))
        lines.append(f'    print("BODY {d.name}", n)')
        if bf:
            lines.append(f'    assert(false, "body of {d.name} failed")')
        if rev:
            lines.append("rollback:")
            lines.append(f'    print("RB {d.name}", n)')
            if rf:
                lines.append(f'    assert(false, "rollback of {d.name} failed")')
    model = Model(dry_run)
    insts: list[Inst] = []
    for k, op in enumerate(ops):
        if op[0] == "prepare":
            d = decls[op[1] % len(decls)]
            j = len(insts)
            lines.append(f"a{j} = {d.name}({j})")
            model.audit.append(f"[line {len(lines)}] {model.subject(d)} -> prepared")
            insts.append(Inst(d))
        elif op[0] == "policy":
            lines.append(f"policy: {op[2]} {op[1]}")
            model.policy[op[1]] = op[2]
        else:
            method, which, context = op
            if not insts:
                continue
            j = which % len(insts)
            inst = insts[j]
            chain_cap = None
            if context == "top":
                lines.append(f'test "{method} {k}":')
                lines.append(f"    a{j}.{method}()")
                line = len(lines)
            else:
                # Declared at top level, so lexically it sees only the module's policy; its
                # caller's deny must still reach it (spec 21.2).
                chain_cap = inst.decl.cap or CAPS[0]
                lines.append(f"def w{k}():")
                lines.append(f"    a{j}.{method}()")
                line = len(lines)
                lines.append(f"def c{k}():")
                lines.append(f"    policy: deny {chain_cap}")
                lines.append(f"    w{k}()")
                lines.append(f'test "{method} {k}":')
                lines.append(f"    c{k}()")
            before = len(model.out)
            model.call(j, inst, method, line, chain_cap)
            # Errors are caught by the test block; the program prints what kind happened.
            got_error = len(model.out) > before and model.out[-1].startswith("E ")
            if got_error:
                model.out.pop()
            lines.append(f'print("S", {j}, a{j}.state, a{j}.approved)')
            model.out.append(f"S {j} {inst.state} {'true' if inst.approved else 'false'}")
    lines.append("for entry in audit_log():")
    lines.append("    print(entry)")
    expected = list(model.out) + list(model.audit)
    if dry_run:
        summary = model.audit or ["(no actions were prepared)"]
        expected = ["DRY RUN — no actions will actually commit", ""] + expected + \
                   ["", "--- dry run summary ---"] + summary
    return "\n".join(lines) + "\n", expected, model


@settings(max_examples=500, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(decls_strategy, st.lists(op_strategy, max_size=25), st.booleans())
def test_lifecycle_matches_the_model(tmp_path_factory, decl_specs, ops, dry_run):
    from conftest import run_program
    source, expected, model = build(decl_specs, ops, dry_run)
    path = tmp_path_factory.mktemp("life") / "p.sns"
    path.write_text(source)
    # Both execution tiers, each against the model (so also against each other).
    for tier in ("1", "2"):
        outcome = run_program(str(path), dry_run=dry_run, tier=tier)
        assert outcome.error is None, (tier, outcome.error, source)
        assert outcome.stdout.split("\n")[:-1] == expected, (tier, source)
    # The invariants, stated directly as well as through the output:
    assert all(n <= 1 for n in model.body_runs.values())       # a body runs at most once
    if dry_run:
        assert "BODY" not in outcome.stdout and "RB " not in outcome.stdout


def test_the_edges_the_handlers_read_are_the_transition_table():
    """Edges (what the hottest handlers read) give transition()'s answer from every state.
    Where they have no edge, transition() raises the ordinary error of the event's method when
    that method is illegal in the state (another thread moved the action first), and
    IllegalTransition (a VM bug) where it is legal."""
    from types import SimpleNamespace
    from sensevm.guard import lifecycle as L
    from sensevm.base.errors import SenseRuntimeError
    guards = {"verify": L.check_verify, "commit": lambda a: L.check_commit(a, confirmed=True),
              "rollback": L.check_rollback}
    events = {event for _, event in L.TRANSITIONS}
    for event in events:
        edges = L.Edges(event)
        for state in L.STATES:
            for reversible in (True, False):
                action = SimpleNamespace(state=state, name="a", reversible=reversible)
                if state in edges:
                    assert L.transition(action, event) == edges[state] == action.state
                    continue
                with pytest.raises(L.IllegalTransition, match=event):
                    edges[state]
                guard = guards.get(event.partition("_")[0])
                try:
                    if guard is not None:
                        guard(SimpleNamespace(state=state, name="a", reversible=reversible))
                except SenseRuntimeError as refusal:
                    with pytest.raises(SenseRuntimeError) as info:
                        L.transition(action, event)
                    assert info.value.message == refusal.message
                else:
                    with pytest.raises(L.IllegalTransition, match=event):
                        L.transition(action, event)
                assert action.state == state            # a refused move changes nothing
    for name, event in (("VERIFY_ALLOWED", "verify_allowed"), ("COMMIT_BEGIN", "commit_begin"),
                        ("COMMIT_SUCCEEDED", "commit_succeeded"),
                        ("ROLLBACK_BEGIN", "rollback_begin"),
                        ("ROLLBACK_SUCCEEDED", "rollback_succeeded")):
        assert getattr(L, name) == L.Edges(event) and getattr(L, name).event == event


def test_a_body_is_entered_only_through_a_begin_edge_taken_from_a_legal_state():
    """The only edges into the two running states are commit_begin and rollback_begin, from
    exactly the states commit and rollback are legal in; the only edges out of them are the
    body's own outcome."""
    from sensevm.guard import lifecycle as L
    into = {(state, event) for (state, event), new in L.TRANSITIONS.items() if new in L.RUNNING}
    assert into == {(L.VERIFIED, "commit_begin"), (L.QUEUED, "commit_begin"),
                    (L.COMMITTED, "rollback_begin")}
    out = {(state, event) for (state, event) in L.TRANSITIONS if state in L.RUNNING}
    assert out == {(L.COMMITTING, "commit_succeeded"), (L.COMMITTING, "commit_failed"),
                   (L.ROLLING_BACK, "rollback_succeeded"), (L.ROLLING_BACK, "rollback_failed")}


def test_the_guards_pass_exactly_in_their_from_states():
    from types import SimpleNamespace
    from sensevm.guard import lifecycle as L
    from sensevm.base.errors import SenseRuntimeError
    for guard, legal in ((L.check_verify, L.VERIFY_FROM), (L.check_approve, L.APPROVE_FROM),
                         (L.check_commit, L.COMMIT_FROM)):
        for state in L.STATES:
            action = SimpleNamespace(state=state, name="a")
            if state in legal:
                guard(action)
            else:
                with pytest.raises(SenseRuntimeError):
                    guard(action)


@pytest.mark.parametrize("n", [0, 1, 2047, 2048, 2049, 4097])
def test_a_long_dry_run_summary_is_every_audit_line_once_in_order(tmp_path, n):
    """The summary is written a few thousand lines at a time: across those boundaries it is
    still exactly the audit log, each line once and in order."""
    from conftest import run_program
    path = tmp_path / "long.sns"
    path.write_text("reversible action act(k: Int) requires x.y:\n    print(k)\n"
                    "rollback:\n    print(-k)\n"
                    f"for k in range({n}):\n"
                    "    if k % 3 == 0:\n        a = act(k)\n    else:\n        b = act(k)\n"
                    "for line in audit_log():\n    print(line)\n")
    outcome = run_program(str(path), dry_run=True)
    assert outcome.error is None
    body, summary = outcome.stdout.split("\n--- dry run summary ---\n")
    shown = body.split("\n")[2:-1]            # after the banner and its blank line
    assert len(shown) == n and len(set(shown)) == min(n, 2)     # two lines, interleaved
    assert summary == ("\n".join(shown) + "\n" if n else "(no actions were prepared)\n")
