"""The session commit protocol: one manifest, bound to its hash, over everything that cannot be undone.

A protocol session (``session NAME as s:``) owns three kinds of entries, fixed by declaration:
witnessed (a reversible commit that ran; its rollback is registered), deferred (an irreversible
commit, queued: nothing runs until the confirm) and immediate (an ``irreversible immediate``
action, run after its own approval). ``manifest()`` shows the human everything and hashes all of
it; ``confirm(hash)`` flushes the queue once, in order, only if the hash is the one the manifest
has now; ``abort()`` drops the queue and replays the rollbacks newest first. Every verb checks
the state machine below, and every step is written ahead to the session's WAL (``wal.py``).

    open --manifest--> enumerated --confirm--> approved --> flushing --> committed
      ^                    |
      +-- any new entry ---+          open | enumerated --abort--> aborting --> aborted

This module knows nothing of the VM: the caller hands each entry the functions that fire it or
roll it back (through the VM's ordinary ACTION_COMMIT / ACTION_ROLLBACK paths) and a function
giving the digest of the policy in force.
"""

from __future__ import annotations

import hashlib
import os

from sensevm.base.errors import SenseError, SenseRuntimeError, SenseSessionError
from sensevm.guard.wal import crash_point, shown_arg

DOMAIN = b"sense.manifest.v1\n"
OPEN, ENUMERATED, APPROVED, FLUSHING, COMMITTED, ABORTING, ABORTED = (
    "open", "enumerated", "approved", "flushing", "committed", "aborting", "aborted")
# Committed, but an entry of the queue failed (or was blocked by one that did) when it fired:
# what fired stands, what failed is residue; never reported as plain "committed".
INCOMPLETE = "incomplete"


def canonical(value, show):
    """A Sense value as canonical JSON data: no floats (their exact text instead), and values
    JSON has no form for as their type and printed form (``show`` is the VM's to_str)."""
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        return {"float": float.hex(value), "text": show(value)}
    if t is list:
        return [canonical(v, show) for v in value]
    if t is dict:
        # A Map: its printed form for the person, and its entries, in order, for the hash.
        return {"value": "Map", "text": show(value),
                "entries": [[canonical(k, show), canonical(v, show)] for k, v in value.items()]}
    return {"value": getattr(value, "type_name", t.__name__), "text": show(value)}


def _encode(body) -> bytes:
    from sensevm.guard.audit import encode_entry
    return encode_entry(body)


class Entry:
    __slots__ = ("n", "cls", "action", "args", "capability", "key", "fire", "undo", "after",
                 "outcome", "origins")

    def __init__(self, n, cls, action, args, capability=None, key=None, fire=None, undo=None,
                 after=(), origins=frozenset()):
        self.n = n
        self.cls = cls                  # "witnessed" | "deferred" | "immediate"
        self.action = action
        self.args = args                # canonical
        self.capability = capability
        self.key = key
        self.fire = fire
        self.undo = undo
        self.after = tuple(after)       # deferred entries this one depends on
        self.outcome = None             # fired | failed: ... | blocked: ... | rolled back
        self.origins = origins          # of the arguments (provenance): its line shows them

    def line(self) -> str:
        args = ", ".join(_shown(a) for a in self.args)
        text = f"#{self.n} {self.action}({args})"
        if self.capability:
            text += f" requires {self.capability}"
        if self.after:
            text += " after " + ", ".join(f"#{k}" for k in self.after)
        return text


_shown = shown_arg      # one quoting for the manifest, the prompt and recover


class Manifest:
    """What the human is shown, and its hash; ``body`` is exactly what was hashed."""

    __slots__ = ("body", "hash", "entries", "summary")
    type_name = "Manifest"

    def __init__(self, body: dict, digest: str, entries: list, summary: str):
        self.body = body
        self.hash = digest
        self.entries = entries
        self.summary = summary

    def __str__(self) -> str:
        return f"<manifest {self.hash[:19]}… ({len(self.entries)} to fire)>"

    def sense_member(self, vm, name: str):
        if name == "hash":
            return self.hash
        if name == "entries":
            return list(self.entries)
        if name == "summary":
            return self.summary
        counters = self.body["counters"]
        if name in ("commits", "per_call", "residue"):
            return counters[{"commits": "commit", "per_call": "perCall"}.get(name, name)]
        raise SenseSessionError(f"manifest has no member '{name}'")

    def member_names(self):
        return ["commits", "entries", "hash", "per_call", "residue", "summary"]


class Session:
    """One protocol session's queue, registered rollbacks, fired immediates, state and counters."""

    def __init__(self, name: str, program_hash: str, policy_digest, log=None,
                 session_id: str | None = None):
        self.name = name
        # The id in the hash: given by the VM from the program, the session's name and its
        # occurrence in the run, so a dry run shows the hash a real run will ask to approve
        # (`--approve HASH`), and a hash from any other session never matches.
        self.id = session_id or os.urandom(16).hex()
        # The id in the write-ahead log: unique to this run, so runs never mix there.
        self.log_id = f"{self.id[:16]}-{os.urandom(8).hex()}"
        self.program_hash = program_hash
        self.policy_digest = policy_digest          # () -> str, asked at every manifest
        self.log = log
        self.state = OPEN
        self.entries: list[Entry] = []
        self.numbered = 0               # entry numbers handed out (a body may still be running)
        self.counters = {"commit": 0, "perCall": 0, "residue": 0}
        self._write("header", name=name, program=program_hash, policy=policy_digest(),
                    version=1)

    # ------------------------------------------------------------------ bookkeeping

    def _write(self, kind: str, **fields) -> None:
        if self.log is not None:
            from sensevm.guard.wal import WalError
            try:
                self.log.append(kind, self.log_id, **fields)
            except WalError as err:
                # Fail closed: without a durable record, nothing more happens in this session.
                raise SenseRuntimeError(str(err), located=False) from None

    def _refuse(self, verb: str) -> SenseSessionError:
        return SenseSessionError(f"session '{self.name}' is {self.state}: cannot {verb}")

    def check_open(self, what: str) -> None:
        """Refuse ``what`` (a new entry) unless the session still takes entries."""
        if self.state not in (OPEN, ENUMERATED):
            raise self._refuse(what)

    def _adding(self, what: str, n: int | None = None) -> int:
        self.check_open(what)
        self.state = OPEN              # anything new invalidates a manifest already shown
        if n is None:
            self.numbered += 1
            n = self.numbered
        return n

    def begin(self, cls: str, action: str, args: list) -> int:
        """A reversible (``witnessed``) or ``immediate`` commit's body is about to run: its
        entry number, written ahead, so that a crash inside the body is read as an effect that
        may have happened (``recover``: unknown), never as nothing having run."""
        n = self._adding(f"commit '{action}'")
        self._write("begin", n=n, action=action, args=args, cls=cls)
        crash_point("after-begin", n)
        return n

    def failed(self, n: int, error: str) -> None:
        """The body begun as entry ``n`` raised: nothing is registered for it."""
        self._write("failed", n=n, error=error)

    def witness(self, action: str, args: list, undo, n: int | None = None) -> Entry:
        """A reversible commit ran (begun as entry ``n``, if it was): register how to undo it."""
        crash_point("before-witnessed", n)
        n = self._adding(f"commit '{action}'", n)
        entry = Entry(n, "witnessed", action, args, undo=undo)
        self.entries.append(entry)
        self._write("witnessed", n=n, action=action, args=args)
        return entry

    def enqueue(self, action: str, args: list, capability: str | None, fire,
                after=(), origins=frozenset()) -> Entry:
        """An irreversible commit: queued with its idempotency key; nothing runs. ``origins``:
        those of its arguments, which its manifest line shows."""
        n = self._adding(f"queue '{action}'")
        key = hashlib.sha256(f"{self.id}:{n}".encode()).hexdigest()[:32]
        entry = Entry(n, "deferred", action, args, capability, key, fire=fire, after=after,
                      origins=origins)
        self.entries.append(entry)
        self._write("queued", n=n, action=action, args=args, capability=capability, key=key)
        crash_point("after-queued", n)
        return entry

    def immediate(self, action: str, args: list, n: int | None = None) -> Entry:
        """An immediate action fired after its own approval (begun as entry ``n``, if it
        was): it stands whatever happens."""
        crash_point("before-fired", n)
        n = self._adding(f"commit '{action}'", n)
        entry = Entry(n, "immediate", action, args)
        entry.outcome = "fired"
        self.entries.append(entry)
        self.counters["perCall"] += 1
        self._write("fired", n=n, action=action, args=args)
        return entry

    def of(self, cls: str) -> list:
        return [e for e in self.entries if e.cls == cls]

    # ------------------------------------------------------------------ the manifest

    def body(self) -> dict:
        return {
            "v": 1, "session": self.id, "name": self.name, "program": self.program_hash,
            "policy": self.policy_digest(),
            "deferred": [{"n": e.n, "action": e.action, "args": e.args,
                          "capability": e.capability, "key": e.key, "after": list(e.after)}
                         for e in self.of("deferred")],
            "witnessed": [{"n": e.n, "action": e.action, "args": e.args}
                          for e in self.of("witnessed")],
            "fired": [{"n": e.n, "action": e.action, "args": e.args}
                      for e in self.of("immediate")],
            "counters": dict(self.counters),
        }

    def current_hash(self) -> str:
        return "sha256:" + hashlib.sha256(DOMAIN + _encode(self.body())).hexdigest()

    def manifest(self) -> Manifest:
        if self.state not in (OPEN, ENUMERATED):
            raise self._refuse("show a manifest")
        body = self.body()
        digest = "sha256:" + hashlib.sha256(DOMAIN + _encode(body)).hexdigest()
        deferred = self.of("deferred")
        # A line quotes its entry's arguments: it keeps their origins (a program picking an
        # address out of the manifest gets the page's label with it).
        from sensevm.guard.provenance import label
        entries = [label(e.line(), e.origins) for e in deferred]
        counts: dict[str, int] = {}
        for e in deferred:
            counts[e.action] = counts.get(e.action, 0) + 1
        what = ", ".join(f"{a} x{c}" if c > 1 else a for a, c in counts.items())
        summary = (f"{len(deferred)} irreversible action{'' if len(deferred) == 1 else 's'} "
                   f"will run" + (f": {what}" if what else "") +
                   f"; {len(self.of('witnessed'))} reversible already ran"
                   f"; {len(self.of('immediate'))} immediate already ran"
                   f" — {digest[:19]}…")
        self.state = ENUMERATED
        return Manifest(body, digest, entries, summary)

    # ------------------------------------------------------------------ verdicts

    def confirm(self, digest, approver: str, checkpoint: str | None = None) -> list:
        """Approve exactly the manifest hashed ``digest`` and flush its queue once, in order.
        ``checkpoint``: the audit log's signed checkpoint at this approval, recorded with it."""
        if self.state not in (OPEN, ENUMERATED):
            raise self._refuse("commit")
        if type(digest) is not str or digest != self.current_hash():
            raise SenseSessionError(
                f"session '{self.name}': the manifest hash does not match what this session "
                "would commit now (stale, or from another session); nothing was run — ask for "
                "a new manifest")
        deferred = self.of("deferred")
        crash_point("before-approved")
        self.counters["commit"] += 1
        self._write("approved", hash=digest, entries=[e.n for e in deferred], approver=approver,
                    checkpoint=checkpoint)
        self.state = APPROVED
        crash_point("after-approved")
        self.state = FLUSHING
        failed: set = set()
        for e in deferred:
            blocked = [k for k in e.after if k in failed]
            if blocked:
                e.outcome = f"blocked: #{blocked[0]} did not run"
                failed.add(e.n)
                self.counters["residue"] += 1
                self._write("residue", n=e.n, error=e.outcome)
                continue
            self._write("attempt", n=e.n, key=e.key)
            crash_point("after-attempt", e.n)
            try:
                e.fire(e)
            except SenseError as err:
                e.outcome = f"failed: {err.text}"
                failed.add(e.n)
                self.counters["residue"] += 1
                self._write("residue", n=e.n, error=err.text)
                continue
            e.outcome = "fired"
            self._write("flushed", n=e.n)
            crash_point("after-flushed", e.n)
        crash_point("before-discharge")
        self._write("discharge")
        self.state = INCOMPLETE if failed else COMMITTED
        self._write("complete")
        return deferred

    def flush_report(self) -> str:
        """What the queue's flush did, for the error of an incomplete commit: what fired, what
        failed (and why), and that nothing was rolled back."""
        fired = [f"#{e.n} {e.action}" for e in self.of("deferred") if e.outcome == "fired"]
        failed = [f"#{e.n} {e.action} ({e.outcome})" for e in self.of("deferred")
                  if e.outcome and e.outcome != "fired"]
        return (f"session '{self.name}' committed, but not all of it: "
                f"{len(failed)} of {len(fired) + len(failed)} queued actions did not run — "
                + "; ".join(failed)
                + (f"; fired: {', '.join(fired)}" if fired else "; none fired")
                + "; nothing was rolled back (what fired cannot be undone, the reversible "
                  "actions stand): `sensevm recover` reports the same")

    def abort(self) -> list:
        """Drop the queue and undo what ran reversibly, newest first; immediates stand."""
        if self.state not in (OPEN, ENUMERATED):
            raise self._refuse("abort")
        self.state = ABORTING
        for e in self.of("deferred"):
            e.outcome = "dropped"
        replayed = []
        for e in reversed(self.of("witnessed")):
            try:
                e.undo(e)
            except SenseError as err:
                e.outcome = f"rollback failed: {err.text}"
                self.counters["residue"] += 1
                continue
            e.outcome = "rolled back"
            replayed.append(e.n)
            self._write("rollback", n=e.n)
            crash_point("after-rollback", e.n)
        crash_point("before-aborted")
        self._write("aborted", replayed=sorted(replayed))
        self.state = ABORTED
        return self.entries
