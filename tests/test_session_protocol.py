"""The session commit protocol's core: state machine, manifest hash, flush and abort, WAL order, crashes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from conftest import ROOT
from sensevm.base.errors import SenseRuntimeError, SenseSessionError
from sensevm.guard.session import Session, canonical
from sensevm.guard.wal import SessionLog, recover, scan

PROGRAM = "ab" * 32


class World:
    """What the effects did, in order; the session's fire/undo functions act on it."""

    def __init__(self):
        self.events: list = []
        self.policy = "p1"
        self.fail: set = set()

    def fire(self, entry):
        if entry.action in self.fail:
            raise SenseRuntimeError(f"{entry.action} failed", located=False)
        self.events.append(("fired", entry.n, entry.action))

    def undo(self, entry):
        self.events.append(("undone", entry.n, entry.action))


def session(world, log=None, name="weekly", sid=None):
    return Session(name, PROGRAM, lambda: world.policy, log, session_id=sid)


def test_deferred_actions_fire_only_at_confirm_once_in_order():
    w = World()
    s = session(w)
    s.witness("archive", [2025], w.undo)
    s.enqueue("send_report", ["boss"], "email.send", w.fire)
    s.enqueue("empty_trash", [], "fs.delete", w.fire)
    assert w.events == []
    m = s.manifest()
    assert m.entries == ["#2 send_report(\"boss\") requires email.send",
                         "#3 empty_trash() requires fs.delete"]
    assert m.summary.startswith("2 irreversible actions will run: send_report, empty_trash; "
                                "1 reversible already ran; 0 immediate already ran — sha256:")
    s.confirm(m.hash, "terminal")
    assert w.events == [("fired", 2, "send_report"), ("fired", 3, "empty_trash")]
    assert s.state == "committed" and s.counters == {"commit": 1, "perCall": 0, "residue": 0}
    with pytest.raises(SenseSessionError, match="is committed: cannot commit"):
        s.confirm(m.hash, "terminal")


def test_abort_drops_the_queue_and_undoes_newest_first_immediates_stand():
    w = World()
    s = session(w)
    s.witness("a1", [1], w.undo)
    s.immediate("charge", [5])
    s.enqueue("send", [], "email.send", w.fire)
    s.witness("a2", [2], w.undo)
    s.abort()
    assert w.events == [("undone", 4, "a2"), ("undone", 1, "a1")]
    assert s.counters == {"commit": 0, "perCall": 1, "residue": 0}
    assert [e.outcome for e in s.entries] == ["rolled back", "fired", "dropped", "rolled back"]
    with pytest.raises(SenseSessionError, match="is aborted: cannot commit"):
        s.confirm(s.current_hash(), "terminal")
    with pytest.raises(SenseSessionError, match="is aborted: cannot queue 'send'"):
        s.enqueue("send", [], None, w.fire)


@pytest.mark.parametrize("change", ["enqueue", "witness", "immediate", "policy"])
def test_anything_new_after_the_manifest_makes_its_hash_stale(change):
    w = World()
    s = session(w)
    s.enqueue("send", ["a"], "email.send", w.fire)
    shown = s.manifest()
    if change == "enqueue":
        s.enqueue("send", ["b"], "email.send", w.fire)
    elif change == "witness":
        s.witness("archive", [], w.undo)
    elif change == "immediate":
        s.immediate("charge", [1])
    else:
        w.policy = "p2"
    with pytest.raises(SenseSessionError, match="does not match"):
        s.confirm(shown.hash, "terminal")
    assert [e for e in w.events if e[0] == "fired"] == []
    fresh = s.manifest()
    assert fresh.hash != shown.hash
    s.confirm(fresh.hash, "terminal")
    assert ("fired", 1, "send") in w.events


def test_a_hash_from_another_session_with_the_same_content_is_refused():
    w = World()
    a, b = session(w), session(w)
    for s in (a, b):
        s.enqueue("send", ["x"], "email.send", w.fire)
    assert a.manifest().entries == b.manifest().entries     # what a person sees is the same
    with pytest.raises(SenseSessionError):
        b.confirm(a.current_hash(), "terminal")
    assert w.events == []


def test_a_failed_fire_is_residue_and_only_its_dependents_are_blocked():
    w = World()
    w.fail = {"charge"}
    s = session(w)
    s.enqueue("charge", [10], "payment.send", w.fire)
    s.enqueue("receipt", [], "email.send", w.fire, after=[1])
    s.enqueue("notify", [], "sms.send", w.fire)
    s.confirm(s.manifest().hash, "flag")
    assert [e.outcome for e in s.entries] == ["failed: charge failed",
                                              "blocked: #1 did not run", "fired"]
    assert w.events == [("fired", 3, "notify")]
    assert s.counters["residue"] == 2
    assert s.manifest is not None and s.state == "incomplete"
    report = s.flush_report()
    assert "2 of 3 queued actions did not run" in report and "fired: #3 notify" in report


def test_the_wal_order_of_a_committed_session(tmp_path):
    w = World()
    with SessionLog(str(tmp_path / "s.wal"), fsync=False) as log:
        s = session(w, log)
        s.witness("archive", [1], w.undo)
        s.enqueue("send", ["a"], "email.send", w.fire)
        s.enqueue("send", ["b"], "email.send", w.fire)
        s.confirm(s.manifest().hash, "flag")
    kinds = [r["rec"] for r in scan(str(tmp_path / "s.wal")).records]
    assert kinds == ["header", "witnessed", "queued", "queued", "approved", "attempt", "flushed",
                     "attempt", "flushed", "discharge", "complete"]
    (v,) = recover(str(tmp_path / "s.wal"), fsync=False)
    assert v.verdict == "committed" and v.clean and v.fired == ["#2 send(\"a\")", "#3 send(\"b\")"]


def test_canonical_arguments_have_no_floats():
    assert canonical([1, 2.5, "x", None, True, [0.1]], str) == [
        1, {"float": "0x1.4000000000000p+1", "text": "2.5"}, "x", None, True,
        [{"float": (0.1).hex(), "text": "0.1"}]]


# ----------------------------------------------------------------------------- the property

ops = st.lists(st.sampled_from(["witness", "enqueue", "immediate", "manifest", "confirm",
                                "confirm_stale", "abort", "policy"]), max_size=25)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_only_what_the_confirmed_manifest_listed_ever_fires(sequence):
    w = World()
    s = session(w)
    shown = None
    confirmed: list = []
    aborted = False
    for op in sequence:
        fired_before = [e for e in w.events if e[0] == "fired"]
        try:
            if op == "witness":
                s.witness("w", [len(s.entries)], w.undo)
            elif op == "enqueue":
                s.enqueue("d", [len(s.entries)], "cap.x", w.fire)
            elif op == "immediate":
                s.immediate("i", [])
            elif op == "manifest":
                shown = s.manifest()
            elif op == "confirm":
                if shown is None:
                    continue
                fresh = s.current_hash() == shown.hash and s.state in ("open", "enumerated")
                s.confirm(shown.hash, "test")
                assert fresh                   # a stale hash never gets this far
                confirmed = [d["n"] for d in shown.body["deferred"]]
            elif op == "confirm_stale":
                s.confirm("sha256:" + "0" * 64, "test")
                raise AssertionError("a made-up hash was accepted")
            elif op == "abort":
                s.abort()
                aborted = True
            else:
                w.policy += "'"
        except SenseSessionError:
            assert [e for e in w.events if e[0] == "fired"] == fired_before
    fired = [n for kind, n, _ in w.events if kind == "fired"]
    assert fired == confirmed                  # exactly the listed entries, in order, once
    if aborted:
        assert s.state == "aborted" and not confirmed


# ----------------------------------------------------------------------------- crashes

CRASHER = """
import sys
from sensevm.guard.session import Session
from sensevm.guard.wal import SessionLog
log = SessionLog(sys.argv[1])
s = Session("weekly", "00" * 32, lambda: "p", log, session_id="s1")
s.witness("archive", [1], lambda e: None)
s.enqueue("send", ["a"], "email.send", lambda e: print("FIRED", e.n, flush=True))
s.enqueue("send", ["b"], "email.send", lambda e: print("FIRED", e.n, flush=True))
m = s.manifest()
if sys.argv[2] == "abort":
    s.abort()
else:
    s.confirm(m.hash, "flag")
"""


@pytest.mark.parametrize("verb, point, verdict, fired, owed, unknown, clean", [
    ("commit", "after-queued:3", "rolled back", [], [], [], False),      # rollback owed
    ("commit", "before-approved", "rolled back", [], [], [], False),
    ("commit", "after-approved", "committed", [], ["#2 send(\"a\")", "#3 send(\"b\")"], [], False),
    ("commit", "after-attempt:2", "committed", [], ["#3 send(\"b\")"], ["#2 send(\"a\")"], False),
    ("commit", "after-flushed:2", "committed", ["#2 send(\"a\")"], ["#3 send(\"b\")"], [], False),
    ("commit", "before-discharge", "committed", ["#2 send(\"a\")", "#3 send(\"b\")"], [], [], True),
    ("abort", "after-rollback:1", "rolled back", [], [], [], True),
    ("abort", "before-aborted", "rolled back", [], [], [], True),
])
def test_killed_at_each_window_then_recovered_twice(tmp_path, verb, point, verdict, fired, owed,
                                                    unknown, clean):
    path = str(tmp_path / "s.wal")
    env = dict(os.environ, PYTHONPATH=ROOT, SENSE_CRASH_AT=point)
    proc = subprocess.run([sys.executable, "-c", CRASHER, path, verb], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 137, proc.stderr
    printed = [int(line.split()[1]) for line in proc.stdout.splitlines()]
    (v,) = recover(path, fsync=False)
    assert (v.verdict, v.fired, v.owed, v.unknown, v.clean) == (verdict, fired, owed, unknown,
                                                                  clean)
    # What the log says fired did fire; an "unknown" one may or may not have.
    did = [f'#{n} send("{"ab"[n - 2]}")' for n in printed]
    assert set(fired) <= set(did) <= set(fired + unknown)
    before = open(path, "rb").read()
    assert [x.as_json() for x in recover(path, fsync=False)] == [v.as_json()]
    assert open(path, "rb").read() == before
