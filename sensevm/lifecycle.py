"""The action state machine: one transition table, the only place an action's state changes.

States (spec 10.4): prepared, verified, committed, denied, failed, rolled_back. The table maps
(state, event) to the next state (``Edges`` reads one event's edges for the hottest handlers);
an event the table does not list from a state is a bug in the caller, because every handler
first runs the ``check_*`` guard of its method, which raises the
language-level error (E-VSTATE, E-COMMIT, ...) for every illegal (state, method) pair.
"""

from __future__ import annotations

from .errors import SenseRuntimeError

PREPARED, VERIFIED, COMMITTED = "prepared", "verified", "committed"
DENIED, FAILED, ROLLED_BACK = "denied", "failed", "rolled_back"
# Inside a protocol session (sessions.py) an irreversible commit waits in the queue.
QUEUED, DROPPED = "queued", "dropped"
STATES = (PREPARED, VERIFIED, COMMITTED, DENIED, FAILED, ROLLED_BACK, QUEUED, DROPPED)
TERMINAL = frozenset({DENIED, FAILED, ROLLED_BACK, DROPPED})

# (state, event) -> next state
TRANSITIONS: dict[tuple[str, str], str] = {
    (PREPARED, "verify_allowed"): VERIFIED,
    (PREPARED, "verify_denied"): DENIED,
    (VERIFIED, "commit_denied"): DENIED,
    # A commit refused for a missing approval is not terminal (spec 21.6): approve, then commit.
    (VERIFIED, "commit_unapproved"): VERIFIED,
    (VERIFIED, "commit_dry_run"): COMMITTED,
    (VERIFIED, "commit_succeeded"): COMMITTED,
    (VERIFIED, "commit_failed"): FAILED,
    (COMMITTED, "rollback_dry_run"): ROLLED_BACK,
    (COMMITTED, "rollback_succeeded"): ROLLED_BACK,
    # A denied or failing rollback leaves the action committed, so it may be tried again.
    (COMMITTED, "rollback_denied"): COMMITTED,
    (COMMITTED, "rollback_failed"): COMMITTED,
    # The session queue: enqueued at .commit(), fired at the confirm, dropped by an abort.
    (VERIFIED, "commit_queued"): QUEUED,
    (QUEUED, "commit_denied"): DENIED,
    (QUEUED, "commit_succeeded"): COMMITTED,
    (QUEUED, "commit_failed"): FAILED,
    (QUEUED, "dropped"): DROPPED,
}


class IllegalTransition(Exception):
    """A handler asked for a transition the table does not have: a VM bug, never a user error."""


def transition(action, event: str) -> str:
    """Move ``action`` along the table; return the new state."""
    new = TRANSITIONS.get((action.state, event))
    if new is None:
        raise IllegalTransition(f"{event} from state {action.state!r} ({action.name})")
    action.state = new
    return new


class Edges(dict):
    """One event's edges of the table, state -> next state. The handlers that run once per
    lifecycle step write ``action.state = EDGES[action.state]``: transition() without a call,
    read from the same table; a state the event has no edge from raises IllegalTransition."""

    __slots__ = ("event",)

    def __init__(self, event: str):
        super().__init__((state, new) for (state, ev), new in TRANSITIONS.items() if ev == event)
        self.event = event

    def __missing__(self, state):
        raise IllegalTransition(f"{self.event} from state {state!r}")


VERIFY_ALLOWED = Edges("verify_allowed")
COMMIT_SUCCEEDED = Edges("commit_succeeded")
ROLLBACK_SUCCEEDED = Edges("rollback_succeeded")


# ----------------------------------------------------------------------------- guards (spec 10.4)
#
# The states verify, approve and commit are legal in. A handler may test ``action.state in
# VERIFY_FROM`` itself and call the guard only when it fails (a legal step then makes no call):
# the guard's test is the same set.

VERIFY_FROM = frozenset({PREPARED})
APPROVE_FROM = frozenset({PREPARED, VERIFIED})
COMMIT_FROM = frozenset({VERIFIED})         # and QUEUED, at a session's confirm


def check_verify(action) -> None:
    if action.state not in VERIFY_FROM:
        raise SenseRuntimeError(f"cannot verify action '{action.name}' — its state is "
                                f"'{action.state}', not 'prepared'")


def check_approve(action) -> None:
    if action.state not in APPROVE_FROM:
        raise SenseRuntimeError(f"cannot approve action '{action.name}' — its state is "
                                f"'{action.state}', not 'prepared'/'verified'")


def check_commit(action, confirmed: bool = False) -> None:
    # Only a session's confirm fires a queued action.
    if action.state not in COMMIT_FROM and not (confirmed and action.state == QUEUED):
        raise SenseRuntimeError(f"action '{action.name}' must be verified before .commit() "
                                f"(current state: '{action.state}')", located=False)


def check_rollback(action) -> None:
    # E-IRREV is checked before the state, so it wins for irreversible actions in every state.
    if not action.reversible:
        raise SenseRuntimeError(f"cannot rollback '{action.name}' — only a reversible action "
                                "can be rolled back")
    if action.state != COMMITTED:
        raise SenseRuntimeError(f"cannot rollback action '{action.name}' — its state is "
                                f"'{action.state}', not 'committed'")
