"""One segment of a run: the VM from the program's start, or from one saved agent and its
answer, to the next pause or the end (docs/temporal.md).

A segment is a pure function of its input as far as the run's record goes: the verified
program, the saved agents (each HMAC-signed by persist.py, so a state that went through the
cluster is checked as any state directory is), the audit log so far, and what to resume. It
returns what the segment printed, the audit records it appended, the agents' states as it
left them and who waits for what. It runs in a fresh temporary directory; nothing of it
outlives the call but its result.
"""

from __future__ import annotations

import base64
import io
import os
import tempfile

from sensevm.base.errors import SnbFormatError, VerifyError
from sensevm.runtime.journal import JournalStop

PROGRAM = "program.snb"
AUDIT = "audit.jsonl"


def run_segment(job: dict, send=None, journal=None) -> dict:
    """Run one segment. ``job``: ``snb`` (base64 of the verified program), ``states`` (agent
    name -> the text of its saved state), ``audit`` (the audit log's lines so far), ``resume``
    (None for the program's start, else ``{"agent": NAME, "answer": TEXT}``), ``args`` (the
    program's arguments), ``request``, ``approvals`` and ``declines`` (the session manifest
    hashes an operator approved, or declined, for this segment) and ``settlements`` (effect
    number -> ``happened`` or ``not-happened``: an operator's word on an action body
    the journal has in flight) and ``journal_limit`` (the largest journal entry, in bytes).

    ``send``, when given, journals the segment's effects (runtime/journal.py): each entry is
    passed to it, and it returns once the entry is durable; ``journal`` is what earlier
    attempts of this segment recorded (effect number -> entry). Without ``send`` a session
    left undecided fails closed, as ``sensevm run`` with no one to ask.

    Returns ``status`` (the exit status ``sensevm run``/``resume`` would have), ``stdout``,
    ``stderr``, ``audit`` (the lines this segment appended), ``states`` (every saved agent as
    the segment left it), ``paused`` (``[{"agent", "question"}]``: the agents this segment
    left waiting), ``stopped`` (None, or why the journal stopped the segment: ``reason``,
    ``message``, ``detail``) and ``replayed`` (bodies not run again: their journaled outcome
    stood for them)."""
    program = base64.b64decode(job["snb"])
    with tempfile.TemporaryDirectory(prefix="sense-segment-") as work:
        state_dir = os.path.join(work, "state")
        os.mkdir(state_dir)
        with open(os.path.join(state_dir, PROGRAM), "wb") as fh:
            fh.write(program)
        for name, text in job.get("states", {}).items():
            if not _plain_name(name):
                # The record came through the cluster: a name that is not a file's own name
                # would write outside this directory. Refused, as a forged state is.
                return _refused(f"a saved agent's name in the run's record is not a name: "
                                f"{name!r}")
            with open(os.path.join(state_dir, f"{name}.json"), "w", encoding="utf-8") as fh:
                fh.write(text)
        audit_path = os.path.join(work, AUDIT)
        before = job.get("audit", "")
        with open(audit_path, "w", encoding="utf-8") as fh:
            fh.write(before)
        stdout, stderr = io.StringIO(), io.StringIO()
        host = _Host(job, send, journal, stdout)
        resume = job.get("resume")
        try:
            if resume is None:
                status, vm = _start(program, state_dir, audit_path, job, stdout, stderr, host)
            else:
                status, vm = _resume(state_dir, resume["agent"], resume["answer"], audit_path,
                                     stdout, stderr, host)
            if status == 0 and host.journal is not None:
                host.journal.finish()
        except JournalStop as stop:
            status, vm = 1, None
            host.stopped = {"reason": stop.reason, "message": stop.message,
                            "detail": stop.detail}
            if stop.reason != "approval":
                stderr.write(f"sensevm: {stop.message}\n")
        states = {}
        for entry in sorted(os.listdir(state_dir)):
            if entry.endswith(".json"):
                with open(os.path.join(state_dir, entry), encoding="utf-8") as fh:
                    states[entry[:-5]] = fh.read()
        with open(audit_path, encoding="utf-8") as fh:
            after = fh.read()
    paused = [] if vm is None else [
        {"agent": a.name, "question": "" if a.pause_reason is None else str(a.pause_reason)}
        for a in vm.agents if a.status == "paused" and not a.decl.is_async]
    return {"status": status, "stdout": stdout.getvalue(), "stderr": stderr.getvalue(),
            "audit": after[len(before):] if after.startswith(before) else after,
            "states": states, "paused": paused, "stopped": host.stopped,
            "replayed": host.journal.replayed if host.journal is not None else 0}


def _plain_name(name) -> bool:
    return (isinstance(name, str) and name not in ("", ".", "..") and "/" not in name
            and os.sep not in name and "\0" not in name and not name.startswith("."))


def _refused(message: str) -> dict:
    return {"status": 1, "stdout": "", "stderr": f"sensevm: {message}\n", "audit": "",
            "states": {}, "paused": [], "stopped": None, "replayed": 0}


class _Host:
    """What a segment gives its VM beyond ``sensevm run``'s: the journal and the approver."""

    def __init__(self, job, send, entries, stdout):
        self.approvals = set(job.get("approvals") or ())
        self.declines = set(job.get("declines") or ())
        self.journal = None
        if send is not None:
            from sensevm.runtime.journal import Journal
            self.journal = Journal(entries or {}, send, stdout, job.get("settlements"),
                                   job.get("journal_limit"))
        self.stopped = None

    def attach(self, vm, path, stderr) -> None:
        from sensevm.cli import running
        running.session_host(vm, path, None, None, io.StringIO(), stderr)
        if self.journal is None:
            return      # no one to ask: a session left undecided fails closed
        self.journal.attach(vm)

        def approver(session, manifest, shown):
            if manifest.hash in self.approvals:
                return manifest.hash        # confirm() checks it is this manifest's
            if manifest.hash in self.declines:
                return False                # as a person at the terminal saying no
            # The run waits for an operator (`sensevm approve RUN_ID HASH`); the segment runs
            # again with the approval, its effects so far replayed from the journal.
            raise JournalStop("approval", f"session '{session.name}' waits for approval",
                              {"session": session.name, "hash": manifest.hash,
                               "manifest": shown})
        vm.session_approver = approver


def _start(program: bytes, state_dir, audit_path, job, stdout, stderr, host):
    """The program from its start, as ``sensevm run program.snb --state-dir`` runs it."""
    from sensevm.bytecode.verify import load_verified
    from sensevm.cli import running
    from sensevm.runtime.vm import VM
    from sensevm.world import install
    try:
        verified = load_verified(program)
    except (SnbFormatError, VerifyError) as exc:
        from sensevm.base.diagnostics import report_file_error
        report_file_error(PROGRAM, exc, stderr)
        return 1, None
    limits = running.run_limits(stderr)
    if limits is None:
        return 2, None
    audit = running.open_audit(audit_path, stderr)
    if audit is None:
        return 1, None
    sources = {s.path: s.text for s in verified.program.sources}
    install()
    vm = VM(verified, stdout=stdout, audit=audit, state_dir=state_dir, **limits)
    vm.set_request(job.get("request"))
    vm.set_args(tuple(job.get("args", ())))
    host.attach(vm, os.path.join(state_dir, PROGRAM), stderr)
    return running.run_guarded(vm.run, audit, sources, stdout, stderr), vm


def _resume(state_dir, name, answer, audit_path, stdout, stderr, host):
    """One saved agent with its answer, as ``sensevm resume`` continues it: the state passes
    its MAC, binding, shape and coherence checks before any of it runs."""
    from sensevm.cli import running
    from sensevm.runtime.vm import VM
    from sensevm.world import install
    from sensevm.world.persist import StateError, load_agent, read_saved
    state_path = os.path.join(state_dir, f"{name}.json")
    try:
        verified, state = read_saved(state_dir, name)
    except FileNotFoundError:
        stderr.write(f"sensevm: no saved agent '{name}'\n")
        return 1, None
    except (SnbFormatError, VerifyError) as exc:
        from sensevm.base.diagnostics import report_file_error
        report_file_error(PROGRAM, exc, stderr)
        return 1, None
    except StateError as exc:
        stderr.write(f"sensevm: cannot resume agent '{name}': {exc}\n")
        return 1, None
    limits = running.run_limits(stderr)
    if limits is None:
        return 2, None
    audit = running.open_audit(audit_path, stderr)
    if audit is None:
        return 1, None
    sources = {s.path: s.text for s in verified.program.sources}
    install()
    vm = VM(verified, stdout=stdout, audit=audit, state_dir=state_dir, **limits)
    host.attach(vm, os.path.join(state_dir, PROGRAM), stderr)

    def body():
        vm.resume_saved(load_agent(vm, state, state_path), answer)
    try:
        return running.run_guarded(body, audit, sources, stdout, stderr,
                                   error_path=state_path), vm
    except StateError as exc:
        stderr.write(f"sensevm: cannot resume agent '{name}': {exc}\n")
        return 1, None
