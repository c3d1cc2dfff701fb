"""Protocol sessions in the VM: the handle value, the block's open and close, and routed commits.

``session NAME as s:`` compiles to a call of ``@session_open`` at the block's start and of
``@session_close`` at its end (resolve.py keeps every jump from leaving the block). While the
block runs, ``VM.commit`` hands each commit to ``route_commit`` here: a reversible one runs now
and is registered with its rollback, an irreversible one is queued (state ``queued``, nothing
runs), an ``irreversible immediate`` one runs after its own approval. The queue fires at the
confirm, each entry through ``VM.commit`` again (policy re-checked; the confirm stands for a
declared approval), and an abort replays the rollbacks through ``VM.rollback``: no body is ever
reached by another path. An error that leaves the block aborts the session (``VM._unwind``).

The protocol itself (state machine, manifest hash, write-ahead log) is ``session.py``.
"""

from __future__ import annotations

import os

from sensevm.base.errors import SenseApprovalError, SenseError, SenseSessionError
from sensevm.guard import lifecycle as L
from sensevm.guard.provenance import plain
from sensevm.runtime.values import Builtin, to_str, type_name

# session.py (and the WAL under it) load when a program opens its first session: the run path
# of every other program stays light.


class SessionHandle:
    """What ``as s`` binds: the session, the block scope it belongs to and the frame running it."""

    __slots__ = ("session", "scope", "frame", "pos", "queued", "begun", "acting")
    type_name = "Session"

    def __init__(self, session, scope, frame, pos):
        self.session = session
        self.scope = scope
        self.frame = frame
        self.pos = pos
        self.queued: dict = {}          # entry number -> its PreparedAction
        self.begun: dict = {}           # id of an action whose body runs -> its entry number
        # The frame whose call is confirming or aborting the session: the queue fires and the
        # rollbacks run with it as their caller, so its policy (and its callers') is on the
        # chain, as for a direct .commit() or .rollback() written there.
        self.acting = None

    def __str__(self) -> str:
        return f"<session {self.session.name} state={self.session.state}>"

    def sense_member(self, vm, name: str):
        s = self.session
        if name == "state":
            return s.state
        if name == "name":
            return s.name
        if name in ("manifest", "commit", "abort"):
            return Builtin(f"{s.name}.{name}", _VERBS[name](self), 0 if name != "commit" else 1,
                           frames=True)
        raise SenseSessionError(f"session '{s.name}' has no member '{name}'")

    def member_names(self):
        return ["abort", "commit", "manifest", "name", "state"]


def _manifest_verb(handle):
    def manifest(vm, frame, args):
        frame.stack.append(show_manifest(vm, frame, handle))
        return False
    return manifest


def _commit_verb(handle):
    def commit(vm, frame, args):
        confirm(vm, frame, handle, args[0], "program")
        frame.stack.append(None)
        return False
    return commit


def _abort_verb(handle):
    def abort(vm, frame, args):
        abort_session(vm, frame, handle, "program")
        frame.stack.append(None)
        return False
    return abort


_VERBS = {"manifest": _manifest_verb, "commit": _commit_verb, "abort": _abort_verb}


# ----------------------------------------------------------------------------- open / close

def policy_digest(scope) -> str:
    """A digest of every capability rule in force for code in ``scope``."""
    import hashlib
    from sensevm.guard.policy import rules_in_force
    rules = sorted(rules_in_force(scope).items())
    return hashlib.sha256(repr(rules).encode()).hexdigest()


def b_session_open(vm, frame, args):
    from sensevm.guard.session import Session
    name = args[0]
    scope = frame.scope
    import hashlib
    program_hash = vm.program.source_hash.hex() if vm.program.source_hash else ""
    occurrence = vm.session_counts.get(name, 0) + 1
    vm.session_counts[name] = occurrence
    sid = hashlib.sha256(f"{program_hash}:{name}:{occurrence}".encode()).hexdigest()[:32]
    session = Session(name, program_hash, lambda: policy_digest(scope), vm.session_log(),
                      session_id=sid)
    handle = SessionHandle(session, scope, frame, frame.pos)
    vm.sessions.append(handle)
    _audit(vm, frame, handle, "opened", f"id {session.id}")
    frame.stack.append(handle)
    return False


def b_session_close(vm, frame, args):
    # Sessions nest with the blocks that open them, and no jump leaves a block: the innermost
    # open session is this block's. (Tier 2 may rebuild block scopes, so none is consulted.)
    handle = vm.sessions[-1]
    assert handle.frame is frame, "a session block closed in another frame"
    session = handle.session
    try:
        if session.state in ("open", "enumerated"):
            _host_verdict(vm, frame, handle)
    except SenseError:
        if session.state in ("open", "enumerated"):
            abort_session(vm, frame, handle, "host")     # a refused hash, say
        raise
    finally:
        if handle in vm.sessions:
            vm.sessions.remove(handle)
    frame.stack.append(None)
    return False


def _host_verdict(vm, frame, handle) -> None:
    """The block ended undecided: the host approves exactly this manifest, or it aborts.

    The approver returns the hash it approves, None when there was no one to ask (or nothing
    given), False when the person asked declined."""
    session = handle.session
    manifest = show_manifest(vm, frame, handle)
    if vm.dry_run:
        vm.write(render(manifest, session))
        abort_session(vm, frame, handle, "dry run")
        return
    if not session.of("deferred"):
        confirm(vm, frame, handle, manifest.hash, "nothing to approve")
        return
    approver = vm.session_approver
    answer = approver(session, manifest, render(manifest, session)) if approver else None
    if answer is False:             # a person was asked and said no
        abort_session(vm, frame, handle, "host")
        raise SenseSessionError(
            f"session '{session.name}' was declined at the terminal and aborted: nothing "
            "irreversible ran", located=False)
    if answer is None:
        abort_session(vm, frame, handle, "host")
        raise SenseSessionError(
            f"session '{session.name}' ended without a verdict and was aborted: nothing "
            "irreversible ran (approve it at a terminal, or pass --approve "
            f"{manifest.hash})", located=False)
    confirm(vm, frame, handle, answer, "host")


def render(manifest, session) -> str:
    lines = [f"session {session.name}: {manifest.summary}"]
    lines += [f"  {entry}" for entry in manifest.entries]
    lines.append(f"  hash {manifest.hash}")
    return "\n".join(lines) + "\n"


def show_manifest(vm, frame, handle):
    manifest = handle.session.manifest()
    _audit(vm, frame, handle, "enumerated", manifest.hash)
    return manifest


def confirm(vm, frame, handle, digest, approver: str) -> None:
    session = handle.session
    digest = plain(digest)          # (a hash the user typed is a String too)
    if type(digest) is not str:
        raise SenseSessionError(f"{session.name}.commit() expects the manifest's hash (a "
                                f"String), got {type_name(digest)}")
    # The approval is bound to the audit trail as it stands: its signed checkpoint goes into
    # the write-ahead log's approval record (and the checkpoint into the audit log itself).
    sink = vm.audit.sink
    checkpoint = sink.checkpoint() if sink is not None and not vm.dry_run else None
    handle.acting = frame
    try:
        session.confirm(digest, approver, checkpoint)
    finally:
        handle.acting = None
    from sensevm.guard.session import INCOMPLETE
    if session.state == INCOMPLETE:
        # Never a quiet "committed": the run fails here unless the program handles it.
        _audit(vm, frame, handle, "incomplete", _counters(session))
        raise SenseSessionError(session.flush_report())
    _audit(vm, frame, handle, "committed", _counters(session))


def abort_session(vm, frame, handle, by: str) -> None:
    session = handle.session
    handle.acting = frame
    try:
        session.abort()
    finally:
        handle.acting = None
    for action in handle.queued.values():
        if action.state == L.QUEUED:
            L.transition(action, "dropped")
    _audit(vm, frame, handle, "aborted", f"by {by}; {_counters(session)}")


def _counters(session) -> str:
    c = session.counters
    return f"commit={c['commit']} perCall={c['perCall']} residue={c['residue']}"


def _audit(vm, frame, handle, event: str, detail: str) -> None:
    from sensevm.guard.audit import AuditRecord
    name = handle.session.name
    # Host-side: audit_log() keeps the reference's lines for the actions themselves.
    vm.audit.append(AuditRecord(subject=f"session '{name}'", name=name, kind="session",
                                event=event, detail=detail, line=frame.pos.line,
                                lineage=vm.lineage(frame), host_only=True))


def abort_left(vm, left: set, frame, scope) -> None:
    """An error unwinds the frames in ``left`` and is caught in ``frame`` (if any) with
    ``scope`` restored: abort each open session it leaves, innermost first. Sessions of other
    execution states (a worker firing a queued action shares the list) are not touched."""
    for handle in reversed(list(vm.sessions)):
        if handle.frame in left or (handle.frame is frame and not _within(scope, handle.scope)):
            vm.sessions.remove(handle)
            if handle.session.state in ("open", "enumerated"):
                try:
                    abort_session(vm, handle.frame, handle, "error")
                except SenseError:
                    pass               # a failed rollback is residue, already counted


def _within(scope, block) -> bool:
    while scope is not None:
        if scope is block:
            return True
        scope = scope.parent
    return False


# ----------------------------------------------------------------------------- commits

def active(vm):
    return vm.sessions[-1] if vm.sessions else None


def route_commit(vm, f, action, scope, handle) -> bool:
    """``action.commit()`` inside a protocol session; True if a body frame was pushed."""
    from sensevm.guard.session import canonical
    session = handle.session
    decl = action.definition.decl
    args = canonical(list(action.args), to_str)
    if decl.reversible or decl.immediate:
        if decl.immediate and not action.approved:
            L.check_commit(action)
            raise SenseApprovalError(
                f"immediate action '{action.name}' runs at once inside session "
                f"'{session.name}', so it needs its own approval: call "
                f"{action.name}.approve() first", located=False)
        session.check_open(f"commit '{action.name}'")   # refused before anything runs
        action.session = handle            # written ahead (body_begins), registered once run
        return vm.commit(f, action, scope, routed=True)
    # Deferred: every check a commit makes now, except running the body.
    L.check_commit(action)
    vm.check_commit_policy(f, action, scope)
    vm.check_second_look(f, action)
    from sensevm.guard.provenance import deep_origins
    entry = session.enqueue(action.name, args, decl.capability,
                            lambda entry: _fire(vm, handle, action, scope),
                            after=_depends(handle, action.args),
                            origins=deep_origins(action.args))
    handle.queued[entry.n] = action
    vm.step(action, "commit_queued", "queued", f, None, f"session {session.name}", True)
    f.stack.append(action)
    return False


def _depends(handle, args) -> list:
    """The queued entries this one depends on: those whose actions it takes as arguments."""
    by_action = {id(a): n for n, a in handle.queued.items()}
    return [by_action[id(a)] for a in args if id(a) in by_action]


def body_begins(vm, action) -> None:
    """A reversible or immediate commit's body is about to run: its session writes it ahead."""
    from sensevm.guard.session import canonical
    handle = action.session
    cls = "witnessed" if action.definition.decl.reversible else "immediate"
    handle.begun[id(action)] = handle.session.begin(cls, action.name,
                                                    canonical(list(action.args), to_str))


def body_ran(vm, action) -> None:
    """A reversible or immediate commit's body returned (or a dry run skipped it): register it
    with its session, under the entry number body_begins wrote ahead."""
    from sensevm.guard.session import canonical
    handle, action.session = action.session, None
    session = handle.session
    n = handle.begun.pop(id(action), None)
    args = canonical(list(action.args), to_str)
    if action.definition.decl.reversible:
        session.witness(action.name, args, lambda entry: _undo(vm, handle, action), n)
    else:
        session.immediate(action.name, args, n)


def body_failed(vm, action, error: str) -> None:
    """A reversible or immediate commit's body raised: its session records that it ended."""
    handle, action.session = action.session, None
    n = handle.begun.pop(id(action), None)
    if n is not None:
        handle.session.failed(n, error)


def _fire(vm, handle, action, scope) -> None:
    frame = handle.acting or handle.frame
    vm.run_now(frame, lambda worker: worker.commit(frame, action, scope, routed=True,
                                                   confirmed=True))
    if action.state != L.COMMITTED:
        raise SenseSessionError(f"'{action.name}' did not commit (state {action.state})",
                                located=False)


def _undo(vm, handle, action) -> None:
    if vm.dry_run or action.state != L.COMMITTED:
        return
    frame = handle.acting or handle.frame
    vm.run_now(frame, lambda worker: worker.rollback(frame, action, handle.scope, handle.pos))


def default_log_path(vm) -> str:
    from sensevm.runtime.places import base_dir, entry_path
    return os.path.join(base_dir(vm, entry_path(vm.program)), ".sense", "sessions.wal")
