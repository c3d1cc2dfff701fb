"""A Temporal worker for Sense runs: the workflow (workflow.py) and the segment activity.

The activity runs one segment (segment.py) on a thread of its own and heartbeats while it
runs, so that a worker killed mid-segment is noticed within the heartbeat timeout and the
segment is given to another worker, from the same saved state."""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from sensevm.cli.temporal.workflow import SEGMENT, SenseRun

HEARTBEAT_SECONDS = 2.0


@activity.defn(name=SEGMENT)
async def segment(job: dict) -> dict:
    from sensevm.cli.temporal.segment import run_segment
    task = asyncio.get_running_loop().run_in_executor(None, run_segment, job)
    while True:
        done, _ = await asyncio.wait({task}, timeout=HEARTBEAT_SECONDS)
        if done:
            return task.result()
        activity.heartbeat(job.get("segment"))


async def serve(address: str, namespace: str, task_queue: str, *, ready=None) -> None:
    """Poll ``task_queue`` until cancelled (Ctrl-C, SIGTERM); ``ready()`` once connected."""
    client = await Client.connect(address, namespace=namespace)
    # One segment at a time per worker: a VM is one thread's, and its stdout is the
    # segment's (the reason to run more workers, not more slots).
    worker = Worker(client, task_queue=task_queue, workflows=[SenseRun],
                    activities=[segment], max_concurrent_activities=1)
    async with worker:
        if ready is not None:
            ready()
        await asyncio.Event().wait()
