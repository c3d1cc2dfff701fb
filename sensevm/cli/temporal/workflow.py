"""The workflow of one Sense run on Temporal (docs/temporal.md).

It holds the run: the verified program, the latest saved state of each agent, the output
and the audit log so far, and who waits for what. It runs segments (activities, worker.py)
and, between them, waits for answers, which arrive as updates (``answer``): validated
against who is waiting, so an answer is accepted once and only for an agent that waits.

Workflow code must be deterministic: this module imports temporalio and the standard library
only, reads no clock, does no I/O; everything it decides follows from its history.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

WORKFLOW = "SenseRun"
SEGMENT = "sense_segment"
MEMO = "sense"          # the run's state, in the memo: `sensevm runs` reads it with no worker

RUNNING, WAITING, COMPLETED, FAILED = "running", "waiting", "completed", "failed"


@workflow.defn(name=WORKFLOW)
class SenseRun:
    def __init__(self) -> None:
        self.state = RUNNING
        self.waiting: dict[str, str] = {}       # agent -> its question
        self.answers: list[dict] = []           # accepted, not yet delivered
        self.output: list[str] = []             # each segment's stdout, in order
        self.errors: list[str] = []             # each segment's stderr that said something
        self.audit = ""                          # the run's audit log (JSON lines, one chain)
        self.states: dict[str, str] = {}        # agent -> its latest saved state
        self.segments = 0
        self.status = None

    @workflow.run
    async def run(self, job: dict) -> dict:
        self.job = {"snb": job["snb"], "args": job.get("args", []),
                    "request": job.get("request")}
        timeout = timedelta(seconds=job.get("segment_timeout", 600))
        resume = None
        while True:
            self._publish()
            result = await workflow.execute_activity(
                SEGMENT, dict(self.job, states=self.states, audit=self.audit, resume=resume,
                              segment=self.segments),
                start_to_close_timeout=timeout, heartbeat_timeout=timedelta(seconds=10),
                retry_policy=RetryPolicy(maximum_attempts=job.get("segment_attempts", 5)))
            self.segments += 1
            self.output.append(result["stdout"])
            if result["stderr"]:
                self.errors.append(result["stderr"])
            self.audit += result["audit"]
            self.states = result["states"]
            if resume is not None:
                self.waiting.pop(resume["agent"], None)
            for paused in result["paused"]:
                self.waiting[paused["agent"]] = paused["question"]
            if result["status"] != 0:
                self.state, self.status = FAILED, result["status"]
                break
            if not self.waiting:
                self.state, self.status = COMPLETED, 0
                break
            self.state = WAITING
            self._publish()
            await workflow.wait_condition(lambda: bool(self.answers))
            resume = self.answers.pop(0)
            self.state = RUNNING
        self._publish()
        return self.describe()

    def _publish(self) -> None:
        workflow.upsert_memo({MEMO: {"state": self.state, "status": self.status,
                                     "waiting": [{"agent": a, "question": q}
                                                 for a, q in self.waiting.items()
                                                 if not self._answered(a)]}})

    def _answered(self, agent: str) -> bool:
        return any(a["agent"] == agent for a in self.answers)

    @workflow.update(name="answer")
    def answer(self, given: dict) -> str:
        self.answers.append({"agent": given["agent"], "answer": given["text"]})
        self._publish()
        return "accepted"

    @answer.validator
    def _check_answer(self, given: dict) -> None:
        agent = given.get("agent")
        if not isinstance(agent, str) or not isinstance(given.get("text"), str):
            raise ValueError("an answer is an agent's name and a text")
        if self.state in (COMPLETED, FAILED):
            raise ValueError(f"the run has {self.state}: no agent waits for an answer")
        if agent not in self.waiting:
            waits = ", ".join(f"'{a}'" for a in self.waiting) or "no agent"
            raise ValueError(f"agent '{agent}' is not waiting for an answer "
                             f"(waiting: {waits})")
        if self._answered(agent):
            raise ValueError(f"agent '{agent}' has been answered already")

    @workflow.query(name="describe")
    def describe(self) -> dict:
        return {"state": self.state, "status": self.status, "segments": self.segments,
                "waiting": [{"agent": a, "question": q} for a, q in self.waiting.items()
                            if not self._answered(a)],
                "output": "".join(self.output), "errors": "".join(self.errors),
                "audit": self.audit}
