"""The client side of the Temporal commands: submit, runs, answer, approve, settle, output (docs/temporal.md)."""

from __future__ import annotations

import base64
import uuid

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.service import RPCError

from sensevm.cli.temporal.workflow import MEMO, WORKFLOW, SenseRun


class RunError(Exception):
    """A command that cannot do what it was asked; its text is said on stderr."""


async def connect(address: str, namespace: str) -> Client:
    try:
        return await Client.connect(address, namespace=namespace)
    except (RuntimeError, RPCError) as exc:
        raise RunError(f"cannot reach the Temporal server at {address}: {exc}") from None


def new_run_id() -> str:
    return "sense-" + uuid.uuid4().hex[:12]


async def submit(client: Client, program: bytes, run_id: str, task_queue: str,
                 args=(), request=None, heartbeat=10, history_events=None) -> str:
    """Start the run of the verified ``program``; return its id."""
    from temporalio.exceptions import WorkflowAlreadyStartedError
    job = {"snb": base64.b64encode(program).decode("ascii"), "args": list(args),
           "request": request, "heartbeat_timeout": heartbeat}
    if history_events is not None:
        job["history_events"] = history_events
    try:
        handle = await client.start_workflow(SenseRun.run, job, id=run_id,
                                             task_queue=task_queue,
                                             memo={MEMO: {"state": "running", "waiting": []}})
    except WorkflowAlreadyStartedError:
        raise RunError(f"a run with id '{run_id}' already exists") from None
    return handle.id


_CLOSED = {
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.CANCELED: "failed (cancelled)",
    WorkflowExecutionStatus.TERMINATED: "failed (terminated)",
    WorkflowExecutionStatus.TIMED_OUT: "failed (timed out)",
}


async def runs(client: Client) -> list[dict]:
    """Every Sense run the cluster knows, newest first, each with its state (from the
    workflow's memo: no worker needs to be up)."""
    found = []
    async for wf in client.list_workflows(f'WorkflowType = "{WORKFLOW}"'):
        if wf.status == WorkflowExecutionStatus.CONTINUED_AS_NEW:
            continue        # an earlier run of a chain: its latest run stands for it
        memo = (await wf.memo()).get(MEMO) or {}
        state = _CLOSED.get(wf.status) or memo.get("state", "running")
        found.append({"id": wf.id, "state": state, "waiting": memo.get("waiting", []),
                      "approval": memo.get("approval"), "reason": memo.get("reason"),
                      "settlement": memo.get("settlement"),
                      "continued": memo.get("continued", 0),
                      "started": wf.start_time.isoformat() if wf.start_time else None})
    return found


def describe_state(run: dict) -> str:
    from sensevm.base.diagnostics import printable
    if run["state"] == "waiting":
        return "; ".join(f"waiting for an answer: agent '{printable(w['agent'])}' asks: "
                         f"{printable(w['question'])}" for w in run["waiting"]) or "waiting"
    approval = run.get("approval")
    if run["state"] == "waiting for approval" and approval:
        manifest = "".join(f"\n    {printable(line)}" for line in
                           approval["manifest"].splitlines())
        return (f"waiting for a session approval: session '{printable(approval['session'])}' "
                f"(sensevm approve {run['id']} {approval['hash']}){manifest}")
    settlement = run.get("settlement")
    if run["state"] == "waiting for a settlement" and settlement:
        return (f"waiting for a settlement: effect #{settlement['effect']}, the "
                f"{settlement.get('role', 'commit')} of "
                f"{printable(settlement['shown'])}, was in flight when a worker died; its "
                f"outcome is unknown and it is not run again (sensevm settle {run['id']} "
                f"{settlement['effect']} --happened | --not-happened)")
    if run["state"] == "failed" and run.get("reason"):
        return f"failed: {printable(run['reason'])}"
    return run["state"]


async def answer(client: Client, run_id: str, agent: str, text: str) -> None:
    await _deliver(client, run_id, "answer", {"agent": agent, "text": text}, "answer")


async def approve(client: Client, run_id: str, digest: str, decline: bool = False) -> None:
    await _deliver(client, run_id, "approve", {"hash": digest, "decline": decline}, "approval")


async def settle(client: Client, run_id: str, effect: int, outcome: str) -> None:
    await _deliver(client, run_id, "settle", {"effect": effect, "outcome": outcome},
                   "settlement")


async def _deliver(client: Client, run_id: str, update: str, given: dict, what: str) -> None:
    """Send the update ``update`` to run ``run_id``; its validator's refusal, or why it could
    not reach the run, is a RunError."""
    handle = client.get_workflow_handle(run_id)
    try:
        await handle.execute_update(update, given)
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        raise RunError(f"{what} refused: {getattr(cause, 'message', None) or cause}") from None
    except RPCError as exc:
        raise await _not_delivered(handle, run_id, update, exc) from None


async def _not_delivered(handle, run_id: str, verb: str, exc) -> RunError:
    """Why an answer, approval or settlement could not reach the run: it has ended, or the
    server said."""
    try:
        status = (await handle.describe()).status
    except RPCError:
        status = None
    if status is not None and status != WorkflowExecutionStatus.RUNNING:
        ended = "completed" if status == WorkflowExecutionStatus.COMPLETED else \
            _CLOSED.get(status, "ended")
        what = {"answer": "no agent waits for an answer",
                "approve": "no session waits for an approval"}.get(
                    verb, "no commit waits to be settled")
        return RunError(f"run '{run_id}' has {ended.replace('failed', 'ended: failed')}: "
                        f"{what}")
    return RunError(f"cannot {verb} run '{run_id}': {exc}")


async def record(client: Client, run_id: str) -> dict:
    """The run's record (state, output, audit): its result once it has ended, else what a
    worker answers to the query."""
    handle = client.get_workflow_handle(run_id)
    try:
        info = await handle.describe()
        if info.status == WorkflowExecutionStatus.COMPLETED:
            return await handle.result()
        if info.status in _CLOSED:
            raise RunError(f"run '{run_id}' {_CLOSED[info.status]}: it has no record")
        return await handle.query("describe")
    except RPCError as exc:
        raise RunError(f"cannot read run '{run_id}': {exc}") from None
