"""The workflow of one Sense run on Temporal (docs/temporal.md).

It holds the run: the verified program, the latest saved state of each agent, the output
and the audit log so far, and who waits for what. It runs segments (activities, worker.py)
and, between them, waits for answers, which arrive as updates (``answer``): validated
against who is waiting, so an answer is accepted once and only for an agent that waits.

While a segment runs, the workflow keeps its journal of fired effects (runtime/journal.py):
the segment's attempt records each entry with the update ``journal``, acknowledged once in
the history, and an attempt retried after its worker died fetches it (``claim``). A claim
fences the attempts before it off: an entry from an older attempt (a worker thought dead that
was not) is refused. A segment that stops at a session left undecided makes the run wait for
an approval (``approve``, the manifest's whole hash); the segment then runs again from the same
saved state with the approval, its journal kept, so what it had fired is replayed, not re-run.
A segment that stops at an action body the journal has in flight (its worker died
during it: its outcome is unknown) makes the run wait the same way for an operator to settle
it (``settle``: it happened, or it did not); the segment then runs again with the settlement.

A long run keeps its history small: between segments, once the history is past HISTORY_SIZE
or HISTORY_EVENTS (or the server suggests it), the workflow continues as new, carrying
everything above (the record so far, who waits, the journal kept across an approval) into the
next run of the chain, which goes on where it left off. The run's id stays; `runs`, `answer`
and `output` address the latest run of the chain.

Workflow code must be deterministic: this module imports temporalio and the standard library
only, reads no clock, does no I/O; everything it decides follows from its history.
"""

from __future__ import annotations

import json
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

WORKFLOW = "SenseRun"
SEGMENT = "sense_segment"
MEMO = "sense"          # the run's state, in the memo: `sensevm runs` reads it with no worker

RUNNING, WAITING, COMPLETED, FAILED = "running", "waiting", "completed", "failed"
APPROVAL = "waiting for approval"
SETTLEMENT = "waiting for a settlement"
OUTCOMES = ("happened", "not-happened")     # runtime/journal.py's SETTLEMENTS
# Temporal refuses a payload over 2 MB (its default blob size limit); what a segment is given
# and gives back is kept under this, with room for the envelope.
PAYLOAD_LIMIT = 1_900_000
# Temporal warns past 10 MB or 10,240 events of history and refuses a run past 50 MB or 51,200
# events. Every segment's input (the program, the saved agents, the audit log so far) enters the
# history once, so a run that pauses often with a sizeable state grows its history fast: it
# continues as new, well before the warnings, from this size or this many events on.
# A journal entry travels as an update, under the same limit, with room for its envelope.
JOURNAL_LIMIT = PAYLOAD_LIMIT - 4_000
HISTORY_SIZE = 4_000_000
HISTORY_EVENTS = 4_000
# What a continued run takes over from the run before it (see _carry).
CARRIED = ("waiting", "answers", "output", "errors", "audit", "states", "segments",
           "journal", "approvals", "declines", "settlements")


@workflow.defn(name=WORKFLOW)
class SenseRun:
    def __init__(self) -> None:
        self.state = RUNNING
        self.waiting: dict[str, str] = {}       # agent -> its question
        self.answers: list[dict] = []           # accepted, not yet delivered
        self.delivering = None                   # the answer the running segment delivers
        self.output: list[str] = []             # each segment's stdout, in order
        self.errors: list[str] = []             # each segment's stderr that said something
        self.audit = ""                          # the run's audit log (JSON lines, one chain)
        self.states: dict[str, str] = {}        # agent -> its latest saved state
        self.segments = 0
        self.status = None
        self.reason = None                       # why a run failed, when the journal said
        self.journal: dict[str, dict] = {}      # the running segment's: effect number -> entry
        self.lease = 0                           # segment invocations so far
        self.claimed = None                      # [lease, attempt] that may journal now
        self.approvals: list[str] = []          # manifest hashes an operator approved
        self.declines: list[str] = []           # ... and declined
        self.awaiting = None                     # the session a segment stopped at
        self.settlements: dict[str, str] = {}   # effect number -> an operator's outcome
        self.unsettled = None                    # the commit in flight a segment stopped at
        self.continued = 0                       # runs of the chain before this one
        self.here = 0                            # segments this run of the chain ran

    @workflow.run
    async def run(self, job: dict) -> dict:
        self.job = {"snb": job["snb"], "args": job.get("args", []),
                    "request": job.get("request")}
        timeout = timedelta(seconds=job.get("segment_timeout", 600))
        heartbeat = timedelta(seconds=job.get("heartbeat_timeout", 10))
        resume = None
        carried = job.get("carried")
        if carried is not None:
            for name in CARRIED:
                setattr(self, name, carried[name])
            resume, self.continued = carried["resume"], carried["continued"]
            self.delivering = resume
        while True:
            # Never before a segment of its own: a run continued from one already past the
            # budget (a small budget, a large input) would otherwise only ever continue.
            if self.here and self._history_full(job):
                onward = dict(job, carried=self._carry(resume))
                # Past the payload limit the next run could not start: this one goes on, and
                # its next segment's own size check says why if that is too large too.
                if len(json.dumps(onward, separators=(",", ":"))) <= PAYLOAD_LIMIT:
                    await workflow.wait_condition(workflow.all_handlers_finished)
                    workflow.continue_as_new(onward, memo={MEMO: self._memo()})
            self._publish()
            self.lease += 1
            self.claimed = [self.lease, 1]
            given = dict(self.job, states=self.states, audit=self.audit, resume=resume,
                         segment=self.segments, lease=self.lease, journal=dict(self.journal),
                         approvals=list(self.approvals), declines=list(self.declines),
                         settlements=dict(self.settlements), journal_limit=JOURNAL_LIMIT)
            size = len(json.dumps(given, separators=(",", ":")))
            if size > PAYLOAD_LIMIT:
                # The server would refuse to schedule it, and the run would be stuck.
                self.state, self.status = FAILED, 1
                self.reason = (f"the next segment's input (the program, the saved agents and "
                               f"the audit log so far) is {size:,} bytes, over Temporal's "
                               f"payload limit ({PAYLOAD_LIMIT:,})")
                self.errors.append(f"sensevm: {self.reason}\n")
                break
            result = await workflow.execute_activity(
                SEGMENT, given,
                start_to_close_timeout=timeout, heartbeat_timeout=heartbeat,
                retry_policy=RetryPolicy(maximum_attempts=job.get("segment_attempts", 5)))
            self.claimed = None
            self.here += 1
            stopped = result.get("stopped")
            if stopped is not None and stopped["reason"] == "approval":
                # Nothing of this attempt enters the record: it runs again once approved.
                self.awaiting, self.state = stopped["detail"], APPROVAL
                self._publish()
                await workflow.wait_condition(lambda: self.awaiting is None)
                self.state = RUNNING
                continue
            if stopped is not None and stopped["reason"] == "unknown" \
                    and stopped.get("detail") is not None:
                # As for an approval: nothing of this attempt enters the record, and the
                # segment runs again, from the same saved state, once the commit is settled.
                self.unsettled, self.state = stopped["detail"], SETTLEMENT
                self._publish()
                await workflow.wait_condition(lambda: self.unsettled is None)
                self.state = RUNNING
                continue
            # An approval is for the segment that waited on it (its session's occurrence in
            # that segment's VM): a later segment's session, even one with the same manifest,
            # is asked again, as a second run of `sensevm run --approve` would be.
            self.journal, self.approvals, self.declines, self.settlements = {}, [], [], {}
            self.segments += 1
            self.output.append(result["stdout"])
            if result["stderr"]:
                self.errors.append(result["stderr"])
            self.audit += result["audit"]
            self.states = result["states"]
            if resume is not None:
                self.waiting.pop(resume["agent"], None)
            self.delivering = None
            for paused in result["paused"]:
                self.waiting[paused["agent"]] = paused["question"]
            if result["status"] != 0:
                self.state, self.status = FAILED, result["status"]
                if stopped is not None:
                    self.reason = stopped["message"]
                break
            if not self.waiting:
                self.state, self.status = COMPLETED, 0
                break
            self.state = WAITING
            self._publish()
            await workflow.wait_condition(lambda: bool(self.answers))
            resume = self.delivering = self.answers.pop(0)
            self.state = RUNNING
        self._publish()
        return self.describe()

    def _history_full(self, job: dict) -> bool:
        info = workflow.info()
        return (info.is_continue_as_new_suggested()
                or info.get_current_history_size() > job.get("history_size", HISTORY_SIZE)
                or info.get_current_history_length() > job.get("history_events",
                                                               HISTORY_EVENTS))

    def _carry(self, resume) -> dict:
        carried = {name: getattr(self, name) for name in CARRIED}
        carried["resume"], carried["continued"] = resume, self.continued + 1
        return carried

    def _memo(self) -> dict:
        return {"state": self.state, "status": self.status, "reason": self.reason,
                "approval": self.awaiting, "settlement": self.unsettled,
                "continued": self.continued,
                "waiting": [{"agent": a, "question": q} for a, q in self.waiting.items()
                            if not self._answered(a)]}

    def _publish(self) -> None:
        workflow.upsert_memo({MEMO: self._memo()})

    def _answered(self, agent: str) -> bool:
        # Until the segment that delivers an answer has ended, its agent still has its
        # question in ``waiting``; the answer on its way counts as given.
        return any(a["agent"] == agent for a in self.answers) or (
            self.delivering is not None and self.delivering["agent"] == agent)

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

    @workflow.update(name="journal")
    def journal_entry(self, given: dict):
        """``claim``: an attempt of the running segment takes the journal over (returned);
        ``record``: an entry of the attempt that holds it."""
        if given["op"] == "claim":
            self.claimed = [given["lease"], given["attempt"]]
            return self.journal
        entry = given["entry"]
        self.journal[str(entry["k"])] = entry
        return "recorded"

    @journal_entry.validator
    def _check_journal(self, given: dict) -> None:
        op, lease, attempt = given.get("op"), given.get("lease"), given.get("attempt")
        if self.claimed is None or lease != self.lease:
            raise ValueError("no segment of this invocation is running")
        if op == "claim":
            if not isinstance(attempt, int) or [lease, attempt] <= self.claimed:
                raise ValueError(f"attempt {attempt} cannot take the journal over from "
                                 f"attempt {self.claimed[1]}")
            return
        if op != "record" or [lease, attempt] != self.claimed:
            raise ValueError(f"attempt {attempt} no longer holds the journal "
                             f"(attempt {self.claimed[1]} does)")
        entry = given.get("entry")
        if not isinstance(entry, dict) or not isinstance(entry.get("k"), int):
            raise ValueError("a journal entry is an object with its effect number k")
        before = self.journal.get(str(entry["k"]))
        if before is not None and before["state"] != "committing":
            raise ValueError(f"effect #{entry['k']} has its outcome recorded already")

    @workflow.update(name="approve")
    def approve(self, given: dict) -> str:
        (self.declines if given.get("decline") else self.approvals).append(given["hash"])
        self.awaiting = None
        self._publish()
        return "approved"

    @approve.validator
    def _check_approve(self, given: dict) -> None:
        digest = given.get("hash")
        if self.awaiting is None:
            raise ValueError(f"the run is {self.state}: no session waits for an approval")
        if not isinstance(digest, str) or digest != self.awaiting["hash"]:
            want = self.awaiting["hash"]
            if isinstance(digest, str) and digest and want.startswith(digest):
                raise ValueError(f"a short hash does not approve: give the whole hash of "
                                 f"session '{self.awaiting['session']}' ({want[:19]}…, "
                                 f"{len(want)} characters)")
            raise ValueError(f"that is not the hash of the manifest session "
                             f"'{self.awaiting['session']}' waits on: nothing was approved "
                             f"(sensevm runs shows the manifest and its hash)")

    @workflow.update(name="settle")
    def settle(self, given: dict) -> str:
        self.settlements[str(given["effect"])] = given["outcome"]
        self.unsettled = None
        self._publish()
        return "settled"

    @settle.validator
    def _check_settle(self, given: dict) -> None:
        if self.unsettled is None:
            raise ValueError(f"the run is {self.state}: no commit waits to be settled")
        effect, outcome = given.get("effect"), given.get("outcome")
        if outcome not in OUTCOMES:
            raise ValueError("a settlement says the commit happened or did not happen")
        if effect != self.unsettled["effect"]:
            raise ValueError(f"effect #{effect} is not the one whose outcome is unknown: the "
                             f"run waits on effect #{self.unsettled['effect']}, "
                             f"{self.unsettled['shown']}; nothing was settled")

    @workflow.query(name="describe")
    def describe(self) -> dict:
        """What the memo says (``_memo``), and the record: output, errors and audit log."""
        return dict(self._memo(), segments=self.segments, output="".join(self.output),
                    errors="".join(self.errors), audit=self.audit)
