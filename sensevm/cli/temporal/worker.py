"""A Temporal worker for Sense runs: the workflow (workflow.py) and the segment activity.

The activity runs one segment (segment.py) on a thread of its own and heartbeats while it
runs, so that a worker killed mid-segment is noticed within the heartbeat timeout and the
segment is given to another worker, from the same saved state. It journals the segment's
effects (runtime/journal.py) to its own workflow, as updates: each entry is acknowledged, once
in the workflow's history, before the segment goes on; a retried attempt first takes the
journal over (``claim``), which fences off any older attempt still running somewhere.

``SENSE_TEMPORAL_CRASH_AT=K`` (tests only) makes the worker process die, as SIGKILL would,
right after its K-th journal entry is acknowledged (counted over the process's life)."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import timedelta

from temporalio import activity
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.worker import Worker

from sensevm.cli.temporal.workflow import PAYLOAD_LIMIT, SEGMENT, SenseRun

HEARTBEAT_SECONDS = 1.0
DEFAULT_CONCURRENCY = 4
CRASH_ENV = "SENSE_TEMPORAL_CRASH_AT"
_acknowledged = 0


@activity.defn(name=SEGMENT)
async def segment(job: dict) -> dict:
    from sensevm.cli.temporal.segment import run_segment
    from sensevm.runtime.journal import JournalStop
    info = activity.info()
    handle = activity.client().get_workflow_handle(info.workflow_id,
                                                   run_id=info.workflow_run_id)
    lease, attempt = job["lease"], info.attempt
    journal = job.get("journal") or {}
    if attempt > 1:         # the journal as the attempts before this one left it
        # (Heartbeating while it waits: the update may wait seconds for the workflow's
        # worker, when that is the worker that died.)
        journal = await _beating(handle.execute_update(
            "journal", {"op": "claim", "lease": lease, "attempt": attempt}), job)
    loop = asyncio.get_running_loop()
    crash_at = int(os.environ.get(CRASH_ENV) or 0)

    def send(entry: dict) -> None:
        global _acknowledged
        call = handle.execute_update("journal", {"op": "record", "lease": lease,
                                                 "attempt": attempt, "entry": entry})
        try:
            asyncio.run_coroutine_threadsafe(call, loop).result()
        except WorkflowUpdateFailedError as exc:
            cause = getattr(exc.cause, "message", None) or exc.cause
            raise JournalStop("fenced", f"the journal refused effect #{entry['k']}: {cause}")
        except Exception as exc:        # noqa: BLE001 - the server, the run: gone or ended
            # Nothing goes on without its record: the segment stops here.
            raise JournalStop("fenced", f"effect #{entry['k']} could not be journaled: {exc}")
        _acknowledged += 1
        if crash_at and _acknowledged == crash_at:
            os._exit(137)

    return fits(await _beating(loop.run_in_executor(None, run_segment, job, send, journal),
                               job))


async def _beating(work, job):
    """Await ``work`` (a coroutine or future), heartbeating every HEARTBEAT_SECONDS."""
    task = asyncio.ensure_future(work)
    while True:
        done, _ = await asyncio.wait({task}, timeout=HEARTBEAT_SECONDS)
        if done:
            return task.result()
        activity.heartbeat(job.get("segment"))


def fits(result: dict) -> dict:
    """``result``, or, when it would be over the payload limit (which the server would refuse,
    leaving the run stuck), a failed segment saying so: nothing of it enters the record."""
    size = len(json.dumps(result, separators=(",", ":")))
    if size <= PAYLOAD_LIMIT:
        return result
    largest = max(result["states"].items(), key=lambda kv: len(kv[1]), default=(None, ""))
    what = (f"; the largest part is the saved state of agent '{largest[0]}', "
            f"{len(largest[1]):,} bytes" if largest[0] is not None else "")
    return {"status": 1, "stdout": "", "audit": "", "states": {}, "paused": [], "replayed": 0,
            "stderr": f"sensevm: the segment's result is {size:,} bytes, over Temporal's "
                      f"payload limit ({PAYLOAD_LIMIT:,} bytes){what}; the run stops here\n",
            "stopped": {"reason": "size", "detail": None,
                        "message": f"the segment's result is {size:,} bytes, over Temporal's "
                                   f"payload limit ({PAYLOAD_LIMIT:,}){what}"}}


async def serve(address: str, namespace: str, task_queue: str, *, ready=None,
                concurrency: int = DEFAULT_CONCURRENCY) -> None:
    """Poll ``task_queue`` until cancelled (Ctrl-C, SIGTERM); ``ready()`` once connected.

    Up to ``concurrency`` segments at once, each on a thread of its own. That is safe because
    a segment shares nothing with another but the process: its own VM (made from its own
    copy of the program), its own output buffer, audit file, temporary directory and journal;
    the VM writes to no process-wide stream, and its time limit uses no signal off the main
    thread. What runs Python in a segment (interop) shares that module with the other
    segments of the worker, as async tools of one program share it. The slots do not add CPU
    (one interpreter lock): they let segments overlap their round trips to the server."""
    from sensevm.world import install
    install()           # once, before segments race to do it
    client = await Client.connect(address, namespace=namespace)
    # Heartbeats reach the server at least every second (temporalio would otherwise hold
    # them back for 80% of the heartbeat timeout, leaving a busy machine little slack before
    # a live segment is taken for dead and given to another worker).
    worker = Worker(client, task_queue=task_queue, workflows=[SenseRun],
                    activities=[segment], max_concurrent_activities=concurrency,
                    max_heartbeat_throttle_interval=timedelta(seconds=HEARTBEAT_SECONDS),
                    default_heartbeat_throttle_interval=timedelta(seconds=HEARTBEAT_SECONDS))
    async with worker:
        if ready is not None:
            ready()
        await asyncio.Event().wait()
