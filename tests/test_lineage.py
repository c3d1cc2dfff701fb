"""Audit lineage (spec 21.7) as VM.lineage finds it: the call chain walked, and a chain found
clean remembered on its frame (Frame.clean) so that the records after it cost no walk."""

from __future__ import annotations

import pytest

from sensevm.runtime.frames import Frame
from sensevm.runtime.values import Scope
from sensevm.runtime.vm import _snapshot

from test_tiers import _run_source


def _vm(tmp_path):
    return _run_source(tmp_path, "print(1)\n", "1")[5]


def test_a_clean_chain_is_remembered_and_a_tagged_one_walked_each_time(tmp_path):
    vm = _vm(tmp_path)
    prepared, S = vm.prepared[vm.program.entry], Scope(None)
    base = Frame(prepared, S, None)
    top = Frame(prepared, S, base)
    assert not top.clean and vm.lineage(top) == () and top.clean
    # What no frame that has run ever gets (Frame.clean says why): tags below a clean frame.
    # The remembered answer stands; a new frame on the same chain walks it and sees them.
    base.tags = ("agent:w",)
    assert vm.lineage(top) == ()
    fresh = Frame(prepared, S, base, tags=("tool:t",))
    assert vm.lineage(fresh) == ("agent:w", "tool:t") and not fresh.clean
    base.tags = ("agent:v",)                    # a tagged chain is never remembered
    assert vm.lineage(fresh) == ("agent:v", "tool:t")
    assert vm.lineage(None) == ()


def test_a_snapshot_chain_and_its_origin_are_walked(tmp_path):
    """An async body's frame stands on a snapshot of its caller's chain (origin)."""
    vm = _vm(tmp_path)
    prepared, S = vm.prepared[vm.program.entry], Scope(None)
    caller = Frame(prepared, S, Frame(prepared, S, None,
                                                    tags=("irreversible:a",)))
    body = Frame(prepared, S, None, tags=("tool:t",))
    body.origin = _snapshot(caller)
    assert vm.lineage(body) == ("irreversible:a", "tool:t")
    plain = Frame(prepared, S, None)
    plain.origin = _snapshot(Frame(prepared, S, None))
    assert vm.lineage(plain) == () and plain.clean
    assert vm.lineage(plain.origin) == () and plain.origin.clean


EVERY_EVENT = """\
tool lookup(name: String) returns String requires contacts.read:
    return name

reversible action credit(delta: Int) requires ledger.write:
    return delta
rollback:
    print("undo", delta)

irreversible action send(to: String) requires email.send, approval:
    return 1

policy:
    allow contacts.read
    allow ledger.write
    allow email.send
    allow agent.run

tool wrap(k: Int) returns Int requires agent.run:
    c = credit(k)
    c.verify()
    c.commit()
    c.rollback()
    s = send(lookup("alice@example.com"))
    s.verify()
    s.approve()
    return s.commit()

print(wrap(3))
"""


@pytest.mark.parametrize("tier", ["1", "2"])
def test_every_lifecycle_record_carries_the_chain_it_was_made_in(tmp_path, tier):
    """Each event's record (written out where the event happens, not by one function) keeps
    the lineage of the call chain: here the tool the actions were driven from. (A tool
    body's text vouches for nothing, so the address the second look sees is flagged at
    verify and sent after the approval.)"""
    out, error, _, records, _, _ = _run_source(tmp_path, EVERY_EVENT, tier)
    assert error is None and out == "undo 3\n1\n"
    events = [(subject, event, lineage) for subject, event, _, _, lineage, _ in records
              if subject.startswith(("reversible", "irreversible", "tool 'lookup'"))]
    assert [e for _, e, _ in events] == [
        "prepared", "verified", "committing", "committed", "rolled_back",
        "called", "prepared", "verified", "second_look", "approved", "second_look",
        "committing", "committed"]
    assert {lineage for _, _, lineage in events} == {("tool:wrap",)}
