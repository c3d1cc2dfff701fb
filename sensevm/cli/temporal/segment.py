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

PROGRAM = "program.snb"
AUDIT = "audit.jsonl"


def run_segment(job: dict) -> dict:
    """Run one segment. ``job``: ``snb`` (base64 of the verified program), ``states`` (agent
    name -> the text of its saved state), ``audit`` (the audit log's lines so far), ``resume``
    (None for the program's start, else ``{"agent": NAME, "answer": TEXT}``), ``args`` (the
    program's arguments) and ``request``.

    Returns ``status`` (the exit status ``sensevm run``/``resume`` would have), ``stdout``,
    ``stderr``, ``audit`` (the lines this segment appended), ``states`` (every saved agent as
    the segment left it) and ``paused`` (``[{"agent", "question"}]``: the agents this segment
    left waiting)."""
    program = base64.b64decode(job["snb"])
    with tempfile.TemporaryDirectory(prefix="sense-segment-") as work:
        state_dir = os.path.join(work, "state")
        os.mkdir(state_dir)
        with open(os.path.join(state_dir, PROGRAM), "wb") as fh:
            fh.write(program)
        for name, text in job.get("states", {}).items():
            with open(os.path.join(state_dir, f"{name}.json"), "w", encoding="utf-8") as fh:
                fh.write(text)
        audit_path = os.path.join(work, AUDIT)
        before = job.get("audit", "")
        with open(audit_path, "w", encoding="utf-8") as fh:
            fh.write(before)
        stdout, stderr = io.StringIO(), io.StringIO()
        resume = job.get("resume")
        if resume is None:
            status, vm = _start(program, state_dir, audit_path, job, stdout, stderr)
        else:
            status, vm = _resume(state_dir, resume["agent"], resume["answer"], audit_path,
                                 stdout, stderr)
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
            "states": states, "paused": paused}


def _start(program: bytes, state_dir, audit_path, job, stdout, stderr):
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
    # No one at a terminal: a session left undecided fails closed (stage 1: no approvals yet).
    running.session_host(vm, os.path.join(state_dir, PROGRAM), None, None, io.StringIO(),
                         stderr)
    return running.run_guarded(vm.run, audit, sources, stdout, stderr), vm


def _resume(state_dir, name, answer, audit_path, stdout, stderr):
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
    vm.program_dir = state_dir

    def body():
        vm.resume_saved(load_agent(vm, state, state_path), answer)
    try:
        return running.run_guarded(body, audit, sources, stdout, stderr,
                                   error_path=state_path), vm
    except StateError as exc:
        stderr.write(f"sensevm: cannot resume agent '{name}': {exc}\n")
        return 1, None
