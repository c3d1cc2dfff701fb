"""The journal of fired effects: a segment retried after its worker died replays, not re-runs, the bodies that completed.

A run on Temporal (docs/temporal.md) runs its VM in segments, each from one saved state to the
next pause; a segment whose worker died is run again from the same saved state. The VM is
deterministic from there until it meets the world, and the places it meets the world through
the program's own declarations are tool bodies and the commit bodies and rollback blocks of
actions. The journal numbers those bodies in the order they start (on the segment's own thread)
and records each one's outcome as it ends: the value it returned (as data, provenance labels
kept), or the error it raised, with the output lines and audit records it produced. Before an
action's body runs (a commit, reversible or not, or a rollback), its intent (``committing``) is
recorded and acknowledged: an action's effect is what must never happen twice.

A retried attempt gets the journal of the attempts before it. Where its replay reaches a body
the journal has an outcome for, the body does not run: its output and audit records are written
again and its value returned (its error raised). A body that does not match the journal (another
tool or action, other arguments) stops the segment; so does an action body recorded
``committing`` with no outcome (it was in flight when the worker died: its effect may have
happened, and it is never run a second time), and a journal entry the replay never reaches.
Those stops are ``JournalStop``: not a Sense error, so no ``try`` or test block catches it, no
session aborts on its way out (an abort would run rollbacks), and the segment reports it.

An operator who found out whether such a body's effect happened *settles* it (``sensevm
settle``): the run's next attempt is given the settlement, and the replay, meeting the body,
does not run it either way: ``happened`` makes the commit (or rollback) succeed (its value nil:
the value the body returned died with the worker), ``not-happened`` makes it fail with an error
the program can catch, as a body that failed before its effect. The audit trail says which, and
who said so.

Only ``VM.journal`` (None unless a segment sets it) leads here: ``sensevm run`` never loads this.
"""

from __future__ import annotations

import hashlib
import json
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

from sensevm.base.errors import CATCHABLE, Pos
from sensevm.guard import provenance as PV
from sensevm.guard.audit import detail_text

MISS = object()          # begin(): no outcome recorded; the body runs
# What an operator may say of an action body whose outcome is unknown.
HAPPENED, NOT_HAPPENED = "happened", "not-happened"
SETTLEMENTS = (HAPPENED, NOT_HAPPENED)


class JournalStop(BaseException):
    """The segment stops here: ``reason`` is ``unknown`` (an action's body was in flight
    when a worker died), ``mismatch`` (the replay and the journal disagree), ``opaque`` (a
    body completed whose result the journal could not keep), ``unreached`` (a journaled body
    the replay did not reach), ``fenced`` (a newer attempt took the journal over) or
    ``approval`` (a session waits for one; see ``detail``). ``detail`` of ``unknown``: the
    ``effect`` number, the ``action``, its call as ``shown`` and the body's ``role`` (commit,
    rollback). A BaseException, so that nothing in the VM catches it."""

    def __init__(self, reason: str, message: str, detail=None):
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.detail = detail


class Opaque(Exception):
    """A value the journal cannot record as data (a closure, an action, an agent...)."""


def encode(v):
    """A body's value as JSON data: nil, Bool, String, Int, Float, Arrays and Maps of them,
    each with its provenance labels and each container with its shape (as saved states keep
    them). Raises Opaque otherwise."""
    t = type(v)
    if v is None or t is bool or t is str:
        return v
    if t is int:
        return {"int": format(v, "x")}
    if t is float:
        return {"float": v.hex()}
    if t in PV.LABELLED:
        if t is PV.LStr:
            return {"lstr": str.__str__(v),
                    "spans": [[a, b, _origins(o)] for a, b, o in v.spans]}
        return {"labelled": encode(PV.plain(v)), "origins": _origins(v.origins)}
    if t is list:
        return _shaped(v, {"array": [encode(x) for x in v]})
    if t is dict:
        return _shaped(v, {"map": [[encode(k), encode(x)] for k, x in v.items()]})
    from sensevm.runtime.values import type_name
    raise Opaque(type_name(v))


def decode(raw):
    if raw is None or type(raw) in (bool, str):
        return raw
    if "int" in raw:
        return int(raw["int"], 16)
    if "float" in raw:
        return float.fromhex(raw["float"])
    if "lstr" in raw:
        return PV.make_str(raw["lstr"], [(a, b, _unorigins(o)) for a, b, o in raw["spans"]])
    if "labelled" in raw:
        return PV.label(decode(raw["labelled"]), _unorigins(raw["origins"]))
    if "array" in raw:
        made = [decode(x) for x in raw["array"]]
    else:
        made = {decode(k): decode(x) for k, x in raw["map"]}
    shape = raw.get("shape")
    if shape is not None:
        PV.restore_shape(made, _unorigins(shape["length"]),
                         tuple((k, _unorigins(o)) for k, o in shape["starts"]),
                         tuple((k, _unorigins(o)) for k, o in shape["ends"]))
    return made


def _shaped(container, raw: dict) -> dict:
    """``raw`` with the container's shape (what its length and its elements' places depend
    on: provenance.Shape), kept as saved states keep it."""
    shape = PV.shape_of(container)
    if shape is not None and shape.length:
        size = max(len(container), 1)
        raw["shape"] = {"length": _origins(shape.length),
                        "starts": [[k, _origins(o)] for k, o in shape.starts if k < size],
                        "ends": [[k, _origins(o)] for k, o in shape.ends if k < size]}
    return raw


def _origins(origins) -> list:
    return sorted(list(o) for o in origins)


def _unorigins(raw) -> frozenset:
    return frozenset(tuple(o) for o in raw)


def digest(args) -> str:
    """What identifies a body's arguments: the SHA-256 of them as data, labels included (of
    their canonical form, the one a session's manifest hashes, when they are not all data)."""
    try:
        body = encode(list(args))
    except Opaque:
        from sensevm.guard.session import canonical
        from sensevm.runtime.values import to_str
        body = canonical([_unlabelled(a) for a in args], to_str)
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def shown(name: str, args) -> str:
    """``name(ARGS)``, the arguments quoted as a session's manifest quotes them."""
    from sensevm.guard.session import canonical
    from sensevm.guard.wal import shown_arg
    from sensevm.runtime.values import to_str
    return f"{name}({', '.join(shown_arg(canonical(_unlabelled(a), to_str)) for a in args)})"


def _unlabelled(v):
    if type(v) is list:
        return [_unlabelled(x) for x in v]
    return PV.plain(v)


class _Open:
    __slots__ = ("entry", "out", "rows", "frame")

    def __init__(self, entry, out, rows):
        self.entry = entry
        self.out = out           # the output's length when the body started
        self.rows = rows         # the audit rows' count when the body started
        self.frame = None


class Journal:
    """One segment attempt's journal. ``entries``: what earlier attempts recorded (effect number
    -> entry); ``send(entry)``: record an entry durably, returning once it is acknowledged;
    ``stdout``: the segment's output buffer (a StringIO); ``settlements``: effect number ->
    HAPPENED or NOT_HAPPENED, an operator's word on action bodies journaled in flight; ``limit``:
    the largest entry ``send`` can carry (in bytes of JSON; a larger outcome is journaled
    without its value, as ``opaque``)."""

    MISS = MISS

    def __init__(self, entries: dict, send, stdout, settlements=None, limit=None):
        self.limit = limit
        self.entries = {int(k): v for k, v in entries.items()}
        self.settlements = {int(k): v for k, v in (settlements or {}).items()}
        self.unmet = set(self.entries)          # journaled, not yet met by the replay
        self.send = send
        self.stdout = stdout
        self.next = 0
        self.thread = threading.get_ident()
        self.open: dict = {}                    # id(frame) -> _Open
        self.pending = None                     # begun, its frame not made yet
        self.rows: list = []                    # every audit row of the attempt, in order
        self.replayed = 0

    # ------------------------------------------------------------------ the VM's side

    def attach(self, vm) -> None:
        """Tap ``vm``'s audit log, so that the records a body produces can be journaled."""
        audit = vm.audit
        append, quoting = audit.append, audit.append_quoting
        rows = self.rows

        def tapped(row):
            rows.append(row)
            append(row)

        def tapped_quoting(row, origins):
            if not origins:     # (the log's own append_quoting would append through tapped)
                tapped(row)
                return
            rows.append(row)
            quoting(row, origins)
        audit.append = tapped
        audit.append_quoting = tapped_quoting
        vm.journal = self

    def begin(self, vm, kind: str, name: str, args, action: Optional[str] = None):
        """A body of ``kind`` (tool, commit, rollback) is about to start: MISS when it is to
        run, else its journaled value (its output and audit records written again), or its
        journaled error raised. ``action``: ``reversible`` or ``irreversible`` for an action's
        body, whose intent is journaled before it starts. Other threads (async bodies) are not
        journaled."""
        if threading.get_ident() != self.thread:
            return MISS
        k = self.next
        self.next += 1
        what = shown(name, args)
        sig = digest(args)
        entry = self.entries.get(k)
        if entry is not None:
            self.unmet.discard(k)
            if entry["kind"] != kind or entry["name"] != name or entry["digest"] != sig:
                raise JournalStop("mismatch", (
                    f"the replay of this segment does not match its journal: effect #{k} is "
                    f"{kind} {what} now, but the attempt that died ran {entry['kind']} "
                    f"{entry['shown']}; the run stops rather than guess (the program is not "
                    f"deterministic here)"))
            state = entry["state"]
            if state == "committing":
                settled = self.settlements.get(k)
                if settled is None:
                    vm.audit.append(_unknown_row(entry))
                    raise JournalStop("unknown", (
                        f"{kind} of {entry['shown']} in flight when worker died; outcome "
                        f"unknown (it is not run again: find out whether it happened, then "
                        f"sensevm settle RUN_ID {k} --happened or --not-happened)"),
                        {"effect": k, "action": entry["name"], "shown": entry["shown"],
                         "role": kind})
                entry = self._settled(k, entry, settled)
                state = entry["state"]
            if state == "opaque":
                raise JournalStop("opaque", (
                    f"{kind} {what} completed in the attempt that died, but {entry['why']}; "
                    f"it is not run again"))
            self.replayed += 1
            # The bodies that ran inside this one are stood for by it: the replay meets none.
            self.unmet.difference_update(range(k + 1, entry["next"]))
            self.stdout.write(entry["output"])
            for row in entry["audit"]:
                vm.audit.append(_row(row))
            self.next = entry["next"]
            if state == "failed":
                raise _error(entry["error"])
            return decode(entry["value"])
        entry = {"k": k, "kind": kind, "name": name, "digest": sig, "shown": what,
                 "action": action}
        if action is not None:
            self.send(dict(entry, state="committing"))
        self.pending = _Open(entry, self.stdout.tell(), len(self.rows))
        return MISS

    def _settled(self, k: int, entry: dict, settled: str) -> dict:
        """The outcome of the action body journaled in flight as effect ``k``, as the operator
        settled it, journaled in its place: later attempts of the segment replay it as any
        outcome. Every body journaled after the intent ran inside it (the worker died before
        it ended, and bodies are numbered on one thread), so it stands for them."""
        rows = [_plain_row(_unknown_row(entry)), _plain_row(_settled_row(entry, settled))]
        outcome = dict(entry, next=max(self.entries) + 1, output="", audit=rows)
        if settled == HAPPENED:
            outcome.update(state="done", value=None)
        else:
            outcome.update(state="failed", error={
                "class": "SenseRuntimeError", "located": False, "path": None, "pos": None,
                "message": f"the {entry['kind']} of {entry['shown']} did not happen: it was in "
                           f"flight when a worker died, and an operator settled that it did "
                           f"not happen; it is not run again"})
        self.send(outcome)
        self.entries[k] = outcome
        return outcome

    def opened(self, frame) -> None:
        """The body begun last now runs in ``frame``."""
        rec, self.pending = self.pending, None
        if rec is not None:
            rec.frame = frame
            self.open[id(frame)] = rec

    def not_started(self, err) -> None:
        """The body begun last failed before its frame was made (no effect of it ran)."""
        rec, self.pending = self.pending, None
        if rec is not None:
            self._finish(rec, "failed", error=err)

    def returned(self, frame, value) -> None:
        rec = self.open.pop(id(frame), None)
        if rec is None:
            return
        try:
            encoded = encode(value)
        except Opaque as exc:
            self._finish(rec, "opaque", why=f"its result (a {exc}) could not be journaled")
            return
        self._finish(rec, "done", value=encoded)

    def failed(self, frame, err) -> None:
        rec = self.open.pop(id(frame), None)
        if rec is not None:
            self._finish(rec, "failed", error=err)

    def _finish(self, rec: _Open, state: str, error=None, **more) -> None:
        entry = dict(rec.entry, state=state, next=self.next, **more)
        if error is not None:
            if error.kind not in CATCHABLE:
                return          # a limit ends the run: nothing to replay
            pos = error.pos
            entry["error"] = {"class": error.kind, "message": str(error.message),
                              "located": error.located, "path": error.path,
                              "pos": [pos.line, pos.col] if pos is not None else None}
        text = self.stdout.getvalue()
        entry["output"] = text[rec.out:]
        entry["audit"] = [_plain_row(r) for r in self.rows[rec.rows:]]
        if self.limit is not None:
            size = len(json.dumps(entry, separators=(",", ":"), ensure_ascii=False))
            if size > self.limit:
                # Sent whole, the server would refuse it and the segment could not go on; sent
                # without its outcome, the body still counts as done and is never run again.
                entry = dict(rec.entry, state="opaque", next=self.next, output="", audit=[],
                             why=f"its outcome ({size:,} bytes of value, output and audit) "
                                 f"was over the journal's limit ({self.limit:,} bytes)")
        self.send(entry)

    def finish(self) -> None:
        """The segment ended: every journaled body must have been met by the replay."""
        if self.unmet:
            k = min(self.unmet)
            entry = self.entries[k]
            raise JournalStop("unreached", (
                f"the replay of this segment ended without reaching effect #{k}, "
                f"{entry['kind']} {entry['shown']}, which the attempt that died ran "
                f"({entry['state']}); the run stops rather than lose or repeat it"))


def _plain_row(row) -> list:
    subject, name, kind, event, detail, line, lineage, stamp, host_only = tuple(row)
    detail = detail_text(detail)
    return [str(subject), str(name), str(kind), str(event),
            None if detail is None else str(detail), line, [str(t) for t in lineage],
            stamp, bool(host_only)]


def _row(raw) -> tuple:
    subject, name, kind, event, detail, line, lineage, stamp, host_only = raw
    return (subject, name, kind, event, detail, line, tuple(lineage), stamp, host_only)


def _unknown_row(entry) -> tuple:
    return _action_row(entry, "unknown",
                       "in flight when a worker died: outcome unknown, not run again")


def _settled_row(entry, settled: str) -> tuple:
    role = entry["kind"]
    said = (f"it happened: the {role} succeeds, its body not run again" if settled == HAPPENED
            else f"it did not happen: the {role} fails, its body not run")
    return _action_row(entry, "settled", f"outcome settled by an operator: {said}")


def _action_row(entry, event: str, detail: str) -> tuple:
    """A host-side audit row of the journal's own about the action body ``entry`` stands for."""
    import time
    return (f"{entry['action']} action '{entry['name']}'", entry["name"], entry["action"],
            event, detail, None, (), time.time(), True)


def _error(raw):
    cls = CATCHABLE.get(raw["class"], CATCHABLE["SenseRuntimeError"])
    pos = Pos(*raw["pos"]) if raw.get("pos") else None
    return cls(raw["message"], pos, located=raw["located"], path=raw.get("path"))
