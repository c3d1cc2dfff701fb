"""The action state machine: one transition table, the only place an action's state changes.

States (spec 10.4): prepared, verified, committed, denied, failed, rolled_back, and two this VM
adds (docs/lifecycle.md): ``committing`` while a commit body runs and ``rolling_back`` while a
rollback block runs. A body is entered only by the edge into one of those two (``commit_begin``,
``rollback_begin``), taken once and atomically, so a second ``.commit()`` or ``.rollback()`` of
the same action, from inside its own body or from another thread, meets the ordinary lifecycle
error instead of running the body again.

The table maps (state, event) to the next state (``Edges`` reads one event's edges for the
hottest handlers). Every handler first runs the ``check_*`` guard of its method, which raises the
language-level error (E-VSTATE, E-COMMIT, ...) for every illegal (state, method) pair; ``move``
then takes the edge as one compare-and-set, and raises that same error when another thread moved
the action first. An event the table does not list from a state the guard allows is a bug in the
caller (IllegalTransition), never a user error.
"""

from __future__ import annotations

from _thread import RLock

from sensevm.base.errors import SenseRuntimeError

PREPARED, VERIFIED, COMMITTED = "prepared", "verified", "committed"
DENIED, FAILED, ROLLED_BACK = "denied", "failed", "rolled_back"
# While a body runs: entered before it starts, left when it returns or fails.
COMMITTING, ROLLING_BACK = "committing", "rolling_back"
# Inside a protocol session (sessions.py) an irreversible commit waits in the queue.
QUEUED, DROPPED = "queued", "dropped"
STATES = (PREPARED, VERIFIED, COMMITTING, COMMITTED, DENIED, FAILED, ROLLING_BACK, ROLLED_BACK,
          QUEUED, DROPPED)
TERMINAL = frozenset({DENIED, FAILED, ROLLED_BACK, DROPPED})
# The states in which a body is running (a saved agent may be paused inside one).
RUNNING = frozenset({COMMITTING, ROLLING_BACK})

# (state, event) -> next state
TRANSITIONS: dict[tuple[str, str], str] = {
    (PREPARED, "verify_allowed"): VERIFIED,
    (PREPARED, "verify_denied"): DENIED,
    (VERIFIED, "commit_denied"): DENIED,
    # A commit refused for a missing approval is not terminal (spec 21.6): approve, then commit.
    (VERIFIED, "commit_unapproved"): VERIFIED,
    (VERIFIED, "commit_dry_run"): COMMITTED,
    (VERIFIED, "commit_begin"): COMMITTING,
    (COMMITTING, "commit_succeeded"): COMMITTED,
    (COMMITTING, "commit_failed"): FAILED,
    (COMMITTED, "rollback_dry_run"): ROLLED_BACK,
    (COMMITTED, "rollback_begin"): ROLLING_BACK,
    (ROLLING_BACK, "rollback_succeeded"): ROLLED_BACK,
    # A denied or failing rollback leaves the action committed, so it may be tried again.
    (COMMITTED, "rollback_denied"): COMMITTED,
    (ROLLING_BACK, "rollback_failed"): COMMITTED,
    # The session queue: enqueued at .commit(), fired at the confirm, dropped by an abort.
    (VERIFIED, "commit_queued"): QUEUED,
    (QUEUED, "commit_denied"): DENIED,
    (QUEUED, "commit_unapproved"): QUEUED,
    (QUEUED, "commit_dry_run"): COMMITTED,
    (QUEUED, "commit_begin"): COMMITTING,
    (QUEUED, "dropped"): DROPPED,
}


class IllegalTransition(Exception):
    """A handler asked for a transition the table does not have: a VM bug, never a user error."""


# ----------------------------------------------------------------------------- moving atomically
#
# Until a second thread runs Sense code there is nobody to race with, and the hot handlers move
# an action with one unlocked statement (``action.state = EDGES[action.state]``). ``threaded``
# turns True, for good, before the first such thread starts (an async tool or agent, a console
# request); from then on every edge out of a state another thread could also leave is taken
# under MOVING, together with its audit record (the VM holds MOVING around both), so the audit
# log lists an action's events in the order it moved. The edges out of ``committing`` and
# ``rolling_back`` need no lock: only the thread that entered the state takes them, and no
# other edge leaves it.

threaded = False
MOVING = RLock()


def threads_start() -> None:
    """Called before a thread that runs Sense code is started."""
    global threaded
    threaded = True


def move(action, edges: "Edges") -> str:
    """Take ``edges``' edge from the action's state as one compare-and-set; return the new
    state. When the state has no such edge (another thread moved the action after the caller's
    guard passed), raise the guard's ordinary error for the state the action is in now."""
    with MOVING:
        new = edges.get(action.state)
        if new is not None:
            action.state = new
            return new
    _refuse(action, edges.event)
    raise IllegalTransition(f"{edges.event} from state {action.state!r} ({action.name})")


def transition(action, event: str) -> str:
    """Move ``action`` along the table for ``event``; return the new state."""
    return move(action, EDGES[event])


def _refuse(action, event: str) -> None:
    """Raise the error the method behind ``event`` gives in the action's state, if it gives one."""
    method = event.partition("_")[0]
    if method == "verify":
        check_verify(action)
    elif method == "commit":
        check_commit(action, confirmed=True)
    elif method == "rollback":
        check_rollback(action)


class Edges(dict):
    """One event's edges of the table, state -> next state. The handlers that run once per
    lifecycle step write ``action.state = EDGES[action.state]`` when no other thread runs Sense
    code (``move(action, EDGES)`` when one may): transition() without a call, read from the same
    table; a state the event has no edge from raises IllegalTransition."""

    __slots__ = ("event",)

    def __init__(self, event: str):
        super().__init__((state, new) for (state, ev), new in TRANSITIONS.items() if ev == event)
        self.event = event

    def __missing__(self, state):
        raise IllegalTransition(f"{self.event} from state {state!r}")


EDGES = {event: Edges(event) for event in {ev for _, ev in TRANSITIONS}}
VERIFY_ALLOWED = EDGES["verify_allowed"]
COMMIT_BEGIN = EDGES["commit_begin"]
COMMIT_SUCCEEDED = EDGES["commit_succeeded"]
ROLLBACK_BEGIN = EDGES["rollback_begin"]
ROLLBACK_SUCCEEDED = EDGES["rollback_succeeded"]


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
