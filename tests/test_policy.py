"""Capability decisions (sensevm/guard/policy.py) against the rules written plainly: the first table on
a scope's lexical chain that mentions a capability decides it, and a capability is allowed in a
frame when neither the running scope nor the scope of any frame on the call chain (callers, or
the snapshot standing for them on a worker thread) decides deny."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sensevm.guard.policy import ALLOW, DENY, allowed, granted, lexical_decision
from sensevm.runtime.values import Scope

CAPS = ("net.send", "fs.write", "python.import")


class _Frame:
    """What the policy walk reads of a frame."""

    def __init__(self, scope, caller=None, origin=None):
        self.scope, self.caller, self.origin = scope, caller, origin


def _rule(scope, cap):
    while scope is not None:
        if scope.policy and cap in scope.policy:
            return scope.policy[cap]
        scope = scope.parent
    return None


def _chain(frame):
    while frame is not None:
        yield frame
        frame = frame.caller or frame.origin


@st.composite
def worlds(draw):
    """A tree of scopes with tables, and a chain of frames running in some of them."""
    tables = st.one_of(st.none(), st.dictionaries(st.sampled_from(CAPS),
                                                  st.sampled_from((ALLOW, DENY)), max_size=3))
    scopes = [Scope(None)]
    for _ in range(draw(st.integers(0, 8))):
        scopes.append(Scope(draw(st.sampled_from(scopes))))
    for s in scopes:
        s.policy = draw(tables)
    frame = None
    for _ in range(draw(st.integers(1, 5))):
        if frame is not None and draw(st.booleans()):
            frame = _Frame(draw(st.sampled_from(scopes)), origin=frame)    # a worker's body
        else:
            frame = _Frame(draw(st.sampled_from(scopes)), caller=frame)
    scope = frame.scope if draw(st.booleans()) else draw(st.sampled_from(scopes))
    return scope, frame


@settings(max_examples=400, deadline=None)
@given(worlds(), st.sampled_from(CAPS))
def test_decisions_follow_the_written_rules(world, cap):
    scope, frame = world
    assert lexical_decision(scope, cap) == _rule(scope, cap)
    rules = [_rule(scope, cap)] + [_rule(f.scope, cap) for f in _chain(frame)]
    assert allowed(cap, scope, frame) == (DENY not in rules)
    expected = DENY if DENY in rules else (None if ALLOW in rules else "unmentioned")
    assert granted(cap, scope, frame) == expected


def test_a_nearer_allow_shadows_an_outer_deny_but_not_a_callers_deny():
    outer = Scope(None)
    outer.policy = {"net.send": DENY}
    inner = Scope(outer)
    inner.policy = {"net.send": ALLOW}
    assert allowed("net.send", inner, _Frame(inner))
    assert not allowed("net.send", outer, _Frame(outer))
    caller = _Frame(outer)
    assert not allowed("net.send", inner, _Frame(inner, caller=caller))
    assert not allowed("net.send", inner, _Frame(inner, origin=caller))
