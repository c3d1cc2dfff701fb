"""The client side of the Temporal commands: submit, runs, answer, output (docs/temporal.md)."""

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
                 args=(), request=None) -> str:
    """Start the run of the verified ``program``; return its id."""
    from temporalio.exceptions import WorkflowAlreadyStartedError
    job = {"snb": base64.b64encode(program).decode("ascii"), "args": list(args),
           "request": request}
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
        memo = (await wf.memo()).get(MEMO) or {}
        state = _CLOSED.get(wf.status) or memo.get("state", "running")
        found.append({"id": wf.id, "state": state, "waiting": memo.get("waiting", []),
                      "started": wf.start_time.isoformat() if wf.start_time else None})
    return found


def describe_state(run: dict) -> str:
    from sensevm.base.diagnostics import printable
    if run["state"] == "waiting":
        return "; ".join(f"waiting for an answer: agent '{printable(w['agent'])}' asks: "
                         f"{printable(w['question'])}" for w in run["waiting"]) or "waiting"
    return run["state"]


async def answer(client: Client, run_id: str, agent: str, text: str) -> None:
    handle = client.get_workflow_handle(run_id)
    try:
        await handle.execute_update("answer", {"agent": agent, "text": text})
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        raise RunError(f"answer refused: {getattr(cause, 'message', None) or cause}") from None
    except RPCError as exc:
        raise RunError(f"cannot answer run '{run_id}': {exc}") from None


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
