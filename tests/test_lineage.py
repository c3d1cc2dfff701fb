"""Audit lineage (spec 21.7) as VM.lineage finds it: the call chain walked, and a chain found
clean remembered on its frame (Frame.clean) so that the records after it cost no walk."""

from __future__ import annotations

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
