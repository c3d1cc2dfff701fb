"""The audit log: host-side records, the one-line text audit_log() returns, and the durable file."""

from __future__ import annotations

import os
import time
from _thread import allocate_lock
from collections import deque, namedtuple

from sensevm.base.record import record

_now = time.time

# json, datetime, hashlib and threading serve only the durable file (``--audit-log``, ``sensevm
# audit verify``): they are imported where that is used, not on every ``sensevm run``.


class AuditRecord(namedtuple("AuditRecord", "subject name kind event detail line lineage "
                                            "timestamp host_only")):
    """One audit event, host-side. A tuple (immutable, compared and hashed by its fields); the
    log keeps the VM's records as plain tuples of these fields (see AuditLog).

    subject:   "irreversible action 'ship'", "tool 'camera'", ...
    kind:      "reversible" | "irreversible" | "tool" | "model" | ...
    event:     prepared, verified, committed, denied, failed, rolled_back, called, ...
    lineage:   the tags of the call chain, outermost first
    host_only: kept in the host-side trail, not in audit_log()'s lines
    """

    __slots__ = ()

    def __new__(cls, subject, name, kind, event, detail=None, line=None, lineage=(),
                timestamp=None, host_only=False):
        return _tuple_new(cls, (subject, name, kind, event, detail, line, lineage,
                                _now() if timestamp is None else timestamp, host_only))

    @classmethod
    def make(cls, subject: str, name: str, kind: str, event: str, detail: str | None,
             line: int | None, lineage: tuple, host_only: bool = False) -> "AuditRecord":
        """The record with these fields, stamped now."""
        return _tuple_new(cls, (subject, name, kind, event, detail, line, lineage, _now(),
                                host_only))

    def describe(self) -> str:
        """``[line L] SUBJECT -> EVENT (DETAIL) (via F1 > F2)`` as spec section 13 specifies."""
        subject, _, _, event, detail, line, lineage, _, _ = self
        if type(detail) is tuple:
            detail = detail_text(detail)
        text = f"{subject} -> {event}" if line is None else f"[line {line}] {subject} -> {event}"
        if detail:
            text = f"{text} ({detail})"
        if lineage:
            text = f"{text} (via {' > '.join(lineage)})"
        return text


_tuple_new = tuple.__new__
_HOST_ONLY = AuditRecord._fields.index("host_only")     # (its place in a record's fields)
_DETAIL = AuditRecord._fields.index("detail")

# A record's detail is text, None, or -- for a record made often with a long detail that is
# seldom read (the second look's, one for every check of new arguments that finds something)
# -- a tuple ``(kind, ...)`` of strings, numbers and tuples of them, written as text only when
# the record is read, by the function registered for ``kind``: ``records``, the durable file,
# a journal and describe() give the text. (Such a tuple is immutable, so its text is the same
# whenever it is written; and the collector stops looking at it once it has seen it.)
_WRITERS: dict = {}


def write_details(kind: str, writer) -> None:
    """Register ``writer``, which gives the text of a detail kept as a tuple ``(kind, ...)``."""
    _WRITERS[kind] = writer


def detail_text(detail):
    """A record's detail as text (None stays None)."""
    return _WRITERS[detail[0]](detail) if type(detail) is tuple else detail


def _written(row) -> tuple:
    """``row`` (a record's fields) with its detail as text."""
    if type(row[_DETAIL]) is not tuple:
        return row
    row = list(row)
    row[_DETAIL] = detail_text(row[_DETAIL])
    return tuple(row)


class AuditLog:
    """The log of one run; every record stays host-side even if no program reads it.

    Without a sink every record is kept, as its nine fields (AuditRecord's, in order) laid end
    to end in one flat list, ``fields``: record k is ``fields[9k:9k + 9]``. ``append`` takes a
    record as a tuple of its fields (the VM makes one per lifecycle event) and extends the list
    by them; the tuple itself is dropped. A record kept as a tuple (even a plain one, which the
    garbage collector stops tracking once it has seen it) is seen by a young-generation
    collection first, and a loop of lifecycles keeps nothing else alive: those collections
    were most of the collector's work in such a run, and a flat list of strings, numbers and
    None gives it nothing to look at. (A detail kept as a tuple, the second look's, is flat
    too: the first young collection stops tracking it.) ``records`` gives them back as
    AuditRecords, each detail as text.

    With a sink (an ``AuditFile``) each record goes to the file and ``tail`` keeps only the
    last ``TAIL`` of them (as tuples), so memory stays bounded however long the run;
    ``lines()`` then reads this run's records back.
    """

    TAIL = 64
    WIDTH = len(AuditRecord._fields)

    def __init__(self, sink: "AuditFile | None" = None):
        self.sink = sink
        if sink is None:
            self.fields: list = []
            # Nothing to write: appending a record is extending the list by its fields (the
            # VM calls this once per lifecycle event; list.extend is one step under the GIL,
            # so another thread's record never lands inside this one's).
            self.append = self.fields.extend
        else:
            self.tail: deque = deque(maxlen=self.TAIL)
        # Lines of an earlier run this one continues (a resumed agent): audit_log() shows
        # them first. Their records are in that run's durable log, if it had one.
        self.prefix: list[str] = []
        # What lines() has described so far (no sink): the texts of the records in
        # fields[:_seen], and the texts made, by line, event and subject and by the fields
        # describe() reads.
        self._texts: list[str] = []
        self._seen = 0
        self._made: tuple[dict, dict] = ({}, {})
        self._describing = allocate_lock()
        # Records whose detail quotes labelled values (a failed commit's error showing a page's
        # text): their lines keep the values' origins. By the record's number without a sink
        # (in the order they were appended), by its seq with one.
        self._quoted: dict = {}

    def append(self, row: tuple) -> None:
        """Add a record: an AuditRecord, or a plain tuple of its fields in order."""
        if type(row[_DETAIL]) is tuple:
            row = _written(row)     # (the file is written now)
        self.sink.write(_tuple_new(AuditRecord, row))
        self.tail.append(row)

    def append_quoting(self, row: tuple, origins) -> None:
        """``append(row)``, for a record whose detail quotes values of ``origins``: the line
        audit_log() gives for it carries them."""
        if not origins:
            self.append(row)
            return
        with self._describing:
            if self.sink is not None:
                row = _written(row)
                self._quoted[self.sink.write(_tuple_new(AuditRecord, row))] = origins
                self.tail.append(row)
                return
            fields, width = self.fields, self.WIDTH
            fields.extend(row)
            # Other threads append without the lock: this record is the last one with these
            # very fields (each record's time is a float of its own), almost always the last.
            at = len(fields) - width
            while at > 0 and any(fields[at + k] is not row[k] for k in range(width)):
                at -= width
            self._quoted[at // width] = origins

    @property
    def records(self) -> list[AuditRecord]:
        """The kept records (all of them, or the sink's last TAIL), oldest first."""
        if self.sink is not None:
            rows = list(self.tail)  # a snapshot: async tool bodies record from other threads
            return [_tuple_new(AuditRecord, row) for row in rows]
        fields, width = self.fields[:], self.WIDTH
        return [_tuple_new(AuditRecord, _written(fields[at:at + width]))
                for at in range(0, len(fields), width)]

    def __len__(self) -> int:
        return len(self.tail) if self.sink is not None else len(self.fields) // self.WIDTH

    def lines(self) -> list[str]:
        if self.sink is not None:
            quoted = self._quoted
            shown = self.sink.texts()
            if not quoted:
                return self.prefix + [text for _, text in shown]
            from sensevm.guard.provenance import label
            return self.prefix + [label(text, quoted[seq]) if seq in quoted else text
                                  for seq, text in shown]
        # Records are only ever appended: the texts of those already seen are kept (a dry
        # run's summary after a program that called audit_log() describes only what came since).
        with self._describing:      # async tool bodies may call audit_log() too
            end = len(self.fields)  # ... and be appending meanwhile (whole records)
            if self._seen < end:
                self._describe(self._seen, end)
                self._seen = end
            return self.prefix + self._texts

    def _describe(self, start: int, end: int) -> None:
        """Add the texts audit_log() shows for the records in ``fields[start:end]`` to ``_texts``.

        As the durable file gives them back (a surrogate pair read back as one character), so
        audit_log() is the same with and without --audit-log. A loop records the same event at
        the same line over and over: each distinct text is made once. Most records have no
        detail and no lineage; their texts are found by line, event and subject in nested dicts
        (no key tuple to make and hash), the rest's by the fields describe() reads. The fields
        are read in one pass."""
        fields, width = self.fields, self.WIDTH
        texts = self._texts
        first = len(texts)
        append = texts.append
        plain, other = self._made
        # Nine at a time from one iterator (zip reuses its tuple, which the loop unpacks): one
        # pass over the list, in order (a column at a time, a slice with the record's width as
        # its step, would read the whole list once a column). Over a copy of a bounded piece
        # at a time, since other threads may be extending the list meanwhile.
        piece = width * 4096
        for at in range(start, end, piece):
            row = iter(fields[at:min(at + piece, end)])
            for subject, _, _, event, detail, line, lineage, _, host_only in zip(*(row,) * width):
                if host_only:
                    continue
                if detail is None and not lineage:
                    try:
                        text = plain[line][event][subject]
                    except KeyError:        # (the first of its kind: made once)
                        text = plain.setdefault(line, {}).setdefault(event, {})[subject] = \
                            _shown_text(subject, event, detail, line, lineage)
                else:
                    key = (subject, event, detail, line, lineage)
                    text = other.get(key)
                    if text is None:
                        text = other[key] = _shown_text(subject, event, detail, line, lineage)
                append(text)
        quoted = self._quoted
        if quoted:      # (whatever its detail: as the sink labels)
            self._label_quoted(start, end, first)

    def _label_quoted(self, start: int, end: int, first: int) -> None:
        """Label the texts just made (from ``_texts[first]`` on, for the records in
        ``fields[start:end]``) of the records that quote labelled values."""
        from sensevm.guard.provenance import label
        quoted, width = self._quoted, self.WIDTH
        low = start // width
        numbers = []
        # Numbered in the order appended (under the lock lines() holds), so those described
        # now are the last ones.
        for number in reversed(quoted):
            if number < low:
                break
            numbers.append(number)
        if not numbers:
            return
        texts, place, at = self._texts, {}, first
        for k, host_only in enumerate(self.fields[start + _HOST_ONLY:end:width]):
            if not host_only:
                place[k] = at
                at += 1
        for number in numbers:
            at = place.get(number - low)
            if at is not None:
                texts[at] = label(texts[at], quoted[number])

    def close(self) -> None:
        if self.sink is not None:
            self.sink.close()


# ----------------------------------------------------------------------------- the durable log
#
# File format: one record per line, each line canonical JSON (sorted keys, no spaces, UTF-8)
# ending in "\n". ``prev`` is the hex SHA-256 of the previous line's bytes without its newline
# (GENESIS for the first line), so altering, removing, inserting or reordering any line breaks
# the chain at or just after that line. ``mac`` is an HMAC-SHA256 of the line without it, under
# the host key's audit key (keys.py, kept outside the log's directory): nobody without the key
# can re-chain the log after removing or rewriting a record.
#
# The writer adds host-side records of its own (kind "audit", subject "audit log"): ``opened``
# when a run starts, ``checkpoint`` every CHECKPOINT_EVERY records and at every session commit,
# and ``sealed`` when the run ends, the last two with a signed checkpoint note (tlog.py: the
# log's origin, its size and its RFC 6962 Merkle root). A run whose last record is not its seal
# was cut short: a crash, or its tail removed.

GENESIS = "0" * 64
FIELDS = frozenset({"seq", "time", "subject", "name", "kind", "event", "detail", "line",
                    "lineage", "host_only", "text", "prev", "mac"})
MAC_PURPOSE = "sense.audit.v2"
CHECKPOINT_EVERY = 1000
AUDIT_SUBJECT = "audit log"
_HEX = frozenset("0123456789abcdef")
# Lone surrogates cannot be encoded as UTF-8; JSON's \uXXXX escape carries them (but see
# _storable).
_SURROGATE = "[\ud800-\udfff]"      # compiled on first use (re caches it)


class AuditLogError(Exception):
    """A durable audit log cannot be opened, appended to or read: a host failure, not a Sense error."""


def _utc(timestamp: float) -> str:
    from datetime import datetime, timezone
    return (datetime.fromtimestamp(timestamp, tz=timezone.utc)
            .isoformat(timespec="microseconds").replace("+00:00", "Z"))


_ENCODER = None    # the canonical JSON encoder, made on first use


def _encoder():
    global _ENCODER
    if _ENCODER is None:
        import json
        _ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return _ENCODER


def _escape_surrogate(m) -> str:
    return f"\\u{ord(m.group()):04x}"


def _has_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    import re       # only for a non-ASCII text: start-up does without re
    return re.search(_SURROGATE, text) is not None


def encode_entry(entry: dict) -> bytes:
    """The canonical bytes of one line, without its newline."""
    text = _encoder().encode(entry)
    if _has_surrogate(text):
        import re
        text = re.sub(_SURROGATE, _escape_surrogate, text)
    return text.encode("utf-8")


def _shown_text(subject, event, detail, line, lineage) -> str:
    """The line audit_log() shows for a record of these fields, as the durable file gives it
    back."""
    return _storable(AuditRecord(subject, "", "", event, detail, line, lineage, 0.0,
                                 False).describe())


def _storable(text):
    """``text`` as JSON will give it back: a lone high surrogate followed by a lone low one
    reads back as the one character the pair encodes, so store it that way from the start."""
    if text is None or not _has_surrogate(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def record_entry(record: AuditRecord, seq: int, prev: str) -> dict:
    """The JSON object stored for ``record`` as line ``seq`` of a file."""
    entry = {"seq": seq, "time": _utc(record.timestamp), "subject": record.subject,
             "name": record.name, "kind": record.kind, "event": record.event,
             "detail": record.detail, "line": record.line, "lineage": list(record.lineage),
             "host_only": record.host_only, "text": record.describe(), "prev": prev}
    if _has_surrogate(entry["text"] + record.name + record.kind):
        for key in ("subject", "name", "kind", "event", "detail", "text"):
            entry[key] = _storable(entry[key])
        entry["lineage"] = [_storable(x) for x in record.lineage]
    return entry


def line_hash(line: bytes) -> str:
    import hashlib
    return hashlib.sha256(line).hexdigest()


def entry_mac(key: bytes, entry: dict) -> str:
    """The MAC of a line: HMAC-SHA256 of its canonical bytes without the ``mac`` field."""
    import hashlib
    import hmac
    body = {k: v for k, v in entry.items() if k != "mac"}
    return hmac.new(key, encode_entry(body), hashlib.sha256).hexdigest()


def audit_key(path, *, create: bool = True) -> bytes:
    """The audit key for the log at ``path`` (the host key must lie outside its directory)."""
    from sensevm.guard.keys import derive
    return derive(MAC_PURPOSE, outside=os.path.dirname(os.path.abspath(os.fspath(path))),
                  create=create)


def _origin(first_line: bytes) -> str:
    return "sensevm-audit/" + line_hash(first_line)[:32]


# `sensevm audit verify` exit statuses: intact and every run sealed; damaged, forged or not
# checkable; a torn last line (a crash in the middle of a write); intact, but a run was cut
# short (no seal: a crash, or records removed from its end).
VERIFY_OK, VERIFY_DAMAGED, VERIFY_TORN, VERIFY_UNSEALED = 0, 1, 2, 3


@record(frozen=False)
class ChainResult:
    """What ``verify_chain`` found. ``records``/``last_seq``/``last_hash``/``end`` describe the
    intact prefix; ``problem`` and ``line`` the first fault (None when the chain is intact);
    ``unsealed`` the (first, last) records of each run that ended without its seal."""

    path: str
    records: int = 0
    last_seq: int = 0
    last_hash: str = GENESIS
    end: int = 0                       # byte offset just past the last intact line
    line: int | None = None
    problem: str | None = None
    torn: bool = False
    checkpoints: int = 0               # signed checkpoints found, and checked
    unsealed: list = None
    origin: str | None = None
    tree: object = None                # the Merkle tree of the intact lines (tlog.MerkleTree)
    run_start: int = 0                 # seq of the running run's ``opened`` record
    last_event: str | None = None      # of the last intact record, when it is the writer's own
    against: int | None = None         # the size of a checkpoint kept elsewhere, once matched

    @property
    def ok(self) -> bool:
        return self.problem is None

    @property
    def sealed(self) -> bool:
        return self.ok and not self.unsealed

    @property
    def status(self) -> int:
        if self.torn:
            return VERIFY_TORN
        if not self.ok:
            return VERIFY_DAMAGED
        return VERIFY_UNSEALED if self.unsealed else VERIFY_OK

    def message(self) -> str:
        if not self.ok:
            return f"{self.path}:{self.line}: {self.problem}"
        plural = "" if self.records == 1 else "s"
        head = (f"{self.records} record{plural}, chain intact, every line's MAC verified, "
                f"{self.checkpoints} signed checkpoint{'' if self.checkpoints == 1 else 's'} "
                f"checked")
        if not self.records:
            return "NOT SEALED: the log is empty, so it holds no sealed run"
        if self.unsealed:
            runs = "; ".join(f"records {a}-{b}" for a, b in self.unsealed)
            return (f"NOT SEALED: {head}, but {len(self.unsealed)} run"
                    f"{'' if len(self.unsealed) == 1 else 's'} ended without its seal "
                    f"({runs}): the process died, or records were removed from the end "
                    f"(last hash {self.last_hash})")
        return f"OK: {head}, every run sealed (last hash {self.last_hash})"


def _is_int(v) -> bool:
    return type(v) is int


def _entry_problem(entry) -> str | None:
    """What is wrong with the shape of one parsed line, or None."""
    if not isinstance(entry, dict):
        return "line is not a JSON object"
    missing = sorted(FIELDS - entry.keys())
    if missing:
        return f"missing field(s): {', '.join(missing)}"
    extra = sorted(entry.keys() - FIELDS)
    if extra:
        return f"unexpected field(s): {', '.join(extra)}"
    if not _is_int(entry["seq"]):
        return "seq is not an integer"
    for key in ("time", "subject", "name", "kind", "event", "text", "prev"):
        if not isinstance(entry[key], str):
            return f"{key} is not a string"
    if entry["detail"] is not None and not isinstance(entry["detail"], str):
        return "detail is neither a string nor null"
    if entry["line"] is not None and not _is_int(entry["line"]):
        return "line is neither an integer nor null"
    lineage = entry["lineage"]
    if not isinstance(lineage, list) or not all(isinstance(x, str) for x in lineage):
        return "lineage is not an array of strings"
    if type(entry["host_only"]) is not bool:
        return "host_only is not a boolean"
    prev = entry["prev"]
    if len(prev) != 64 or not set(prev) <= _HEX:
        return "prev is not a lowercase hex SHA-256"
    mac = entry["mac"]
    if not isinstance(mac, str) or len(mac) != 64 or not set(mac) <= _HEX:
        return "mac is not a lowercase hex HMAC-SHA256"
    try:
        from datetime import datetime
        when = datetime.fromisoformat(entry["time"])
    except ValueError:
        when = None
    if when is None or when.utcoffset() is None or when.utcoffset().total_seconds() != 0:
        return f"time {entry['time']!r} is not an ISO-8601 UTC timestamp"
    return None


def _rebuilt_text(entry: dict) -> str:
    return AuditRecord(subject=entry["subject"], name=entry["name"], kind=entry["kind"],
                       event=entry["event"], detail=entry["detail"], line=entry["line"],
                       lineage=tuple(entry["lineage"]), timestamp=0.0,
                       host_only=entry["host_only"]).describe()


def _line_problem(number: int, raw: bytes, result: ChainResult, key: bytes,
                  against) -> str | None:
    """What is wrong with line ``number`` (``raw`` with its newline) given the intact prefix."""
    line = raw[:-1]
    if not line:
        return "empty line"
    try:
        import json
        entry = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        return "line is not valid UTF-8"
    except (ValueError, RecursionError) as exc:
        return f"line is not valid JSON ({exc})"
    problem = _entry_problem(entry)
    if problem:
        return problem
    problem = _structure_problem(number, line, entry, result)
    if problem:
        return problem
    import hmac
    if not hmac.compare_digest(entry["mac"], entry_mac(key, entry)):
        return ("MAC does not match: the line was altered, or the log re-written without the "
                "host key (or with another one)")
    return _sequence_problem(number, line, entry, result, key, against)


def _structure_problem(number: int, line: bytes, entry: dict, result: ChainResult):
    expected = result.last_seq + 1
    if entry["seq"] != expected:
        return (f"seq is {entry['seq']}, expected {expected} (a record is missing, duplicated "
                "or out of order)")
    if entry["prev"] != result.last_hash:
        if number == 1:
            return f"prev of the first line must be {GENESIS}"
        return (f"prev does not match the SHA-256 of line {number - 1} (line {number - 1} was "
                "altered, or lines were removed, inserted or reordered)")
    if entry["text"] != _rebuilt_text(entry):
        return "text does not match the record's fields (the line was altered)"
    if encode_entry(entry) != line:
        return "line is not in canonical JSON form (the line was altered)"
    return None


def _sequence_problem(number, line, entry, result: ChainResult, key, against):
    """The writer's own records in their places: every run opens and ends with its seal, and
    every checkpoint (seal included) is signed and names this log's first ``seq - 1`` lines."""
    from sensevm.guard import tlog
    if number == 1:
        result.origin = _origin(line)
    if entry["subject"] != AUDIT_SUBJECT or entry["kind"] != "audit":
        result.last_event = None
        return None
    event = entry["event"]
    last, result.last_event = result.last_event, event
    if event == "opened":
        if number > 1 and last != "sealed":
            result.unsealed.append((result.run_start or 1, number - 1))
        result.run_start = number
    elif event in ("checkpoint", "sealed"):
        try:
            origin, size, root = tlog.parse(entry["detail"] or "", key)
        except tlog.CheckpointError as exc:
            return f"{event} record: {exc}"
        if origin != result.origin or size != number - 1 or root != result.tree.root():
            return (f"{event} record: its checkpoint does not match the {number - 1} lines "
                    "before it")
        result.checkpoints += 1
    return None


def _scan(fh, path: str, key: bytes, against=None) -> ChainResult:
    """Check the chain of the binary file ``fh`` from its start, stopping at the first fault.
    ``against``: (size, root) of a checkpoint kept elsewhere, which the log must extend."""
    from sensevm.guard.tlog import MerkleTree
    result = ChainResult(path, unsealed=[], tree=MerkleTree())
    tree = result.tree
    for number, raw in enumerate(fh, start=1):
        if not raw.endswith(b"\n"):
            result.line, result.torn = number, True
            result.problem = ("torn final line: the last record is incomplete (no terminating "
                              "newline), so a write was interrupted")
            return result
        problem = _line_problem(number, raw, result, key, against)
        if problem:
            result.line, result.problem = number, problem
            return result
        line = raw[:-1]
        if against is not None and tree.size == against[0]:
            if tree.root() != against[1]:
                result.line = number
                result.problem = (f"the checkpoint kept outside the log ({against[0]} records) "
                                  "does not match its first records: the log was rewritten")
                return result
            result.against = against[0]
        tree.append(line)
        result.records = result.last_seq = number
        result.last_hash = line_hash(line)
        result.end += len(raw)
    if against is not None and result.against is None:
        if tree.size == against[0] and tree.root() == against[1]:
            result.against = against[0]
        else:
            result.line = result.records + 1
            result.problem = (f"the log holds {result.records} records, fewer than the "
                              f"{against[0]} of the checkpoint kept outside it (or others): "
                              "records were removed from its end")
            return result
    if result.last_event != "sealed":
        # An empty file holds no sealed run either: a log is never empty once a run opened it.
        result.unsealed.append((result.run_start or 1, result.records))
    return result


def verify_chain(path, *, key: bytes | None = None, checkpoint: str | None = None) -> ChainResult:
    """Check the whole audit log at ``path``: its chain, every line's MAC, every checkpoint and
    seal, and (``checkpoint``: a note kept elsewhere) that it extends that checkpoint. Raises
    AuditLogError if it cannot be read, or if the host key or the checkpoint is unusable."""
    from sensevm.guard import tlog
    path = os.fspath(path)
    if key is None:
        from sensevm.guard.keys import HostKeyError
        try:
            key = audit_key(path, create=False)
        except HostKeyError as exc:
            raise AuditLogError(f"{path}: cannot check its MACs: {exc}") from None
    against = None
    if checkpoint is not None:
        try:
            _, size, root = tlog.parse(checkpoint, key)
        except tlog.CheckpointError as exc:
            raise AuditLogError(f"the checkpoint given: {exc}") from None
        against = (size, root)
    try:
        with open(path, "rb") as fh:
            return _scan(fh, path, key, against)
    except FileNotFoundError:
        raise AuditLogError(f"{path}: no such audit log file") from None
    except OSError as exc:
        raise AuditLogError(f"{path}: cannot read audit log: {exc.strerror or exc}") from None


class AuditFile:
    """A durable sink: appends each record to ``path`` as one chained, MAC'd JSON line, fsync'd.

    The file is locked exclusively (flock) from open to close, and its existing chain, MACs and
    checkpoints are verified before anything is appended, so a run only ever extends an intact
    log. A run opens with an ``opened`` record, is checkpointed every CHECKPOINT_EVERY records,
    and is sealed by ``close()``. ``fsync=False`` is for tests only: it keeps the format but
    gives up durability.
    """

    def __init__(self, path, *, fsync: bool = True):
        from sensevm.guard.keys import HostKeyError
        self.path = os.fspath(path)
        self.fsync = fsync
        import threading
        self._mutex = threading.Lock()       # async tool bodies record from other threads
        self._failed: str | None = None
        try:
            self.key = audit_key(self.path)
        except HostKeyError as exc:
            raise AuditLogError(f"cannot open audit log {self.path}: {exc}") from None
        self.fd = self._open()
        try:
            self._lock_exclusive()
            with open(self.fd, "rb", closefd=False) as fh:
                found = _scan(fh, self.path, self.key)
            if not found.ok:
                raise AuditLogError(self._refusal(found))
        except BaseException:
            os.close(self.fd)
            self.fd = -1
            raise
        self.last_seq, self.last_hash = found.last_seq, found.last_hash
        self.tree, self.origin = found.tree, found.origin
        self.since_checkpoint = 0
        self.start_seq, self.start_offset = found.last_seq + 1, found.end
        self._own("opened", f"run of pid {os.getpid()}")

    def _own(self, event: str, detail: str) -> int:
        """Append one of the writer's own records (host-side, kind "audit")."""
        return self._append(AuditRecord.make(AUDIT_SUBJECT, "audit", "audit", event, detail,
                                             None, (), True))

    def _note(self) -> str:
        from sensevm.guard.tlog import checkpoint
        return checkpoint(self.origin, self.tree.size, self.tree.root(), self.key)

    def _open(self) -> int:
        flags = os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        try:
            try:
                fd = os.open(self.path, flags | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                return os.open(self.path, flags)
        except OSError as exc:
            raise AuditLogError(f"cannot open audit log {self.path}: "
                                f"{exc.strerror or exc}") from None
        if self.fsync:
            # A new file's directory entry must be durable too, or a crash can lose the file.
            try:
                dfd = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
                try:
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
            except OSError:
                pass
        return fd

    def _lock_exclusive(self) -> None:
        try:
            import fcntl
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AuditLogError(f"audit log {self.path} is in use by another process") from None
        except OSError as exc:
            raise AuditLogError(f"cannot lock audit log {self.path}: "
                                f"{exc.strerror or exc}") from None

    def _refusal(self, found: ChainResult) -> str:
        where = f"{found.path}:{found.line}: {found.problem}"
        if found.torn:
            return (f"{where}\nrefusing to append to {found.path}: the file is evidence and is "
                    "not repaired automatically. Keep it as it is and start a new audit log; or, "
                    "after preserving a copy, truncate it to its last complete line "
                    f"({found.end} bytes, {found.records} records) to continue its chain")
        return (f"{where}\nrefusing to append to {found.path}: its chain is broken "
                f"(check it with: sensevm audit verify {found.path})")

    def write(self, record: AuditRecord) -> int:
        """Append ``record`` durably; return its seq. Any failure stops all later writes."""
        with self._mutex:
            seq = self._append(record)
            self.since_checkpoint += 1
            if self.since_checkpoint >= CHECKPOINT_EVERY:
                self._own("checkpoint", self._note())
                self.since_checkpoint = 0
            return seq

    def checkpoint(self) -> str:
        """Write a signed checkpoint of the log as it stands now, and return its note (a
        session's approval carries the checkpoint it was given at)."""
        with self._mutex:
            note = self._note()
            self._own("checkpoint", note)
            self.since_checkpoint = 0
            return note

    def _append(self, record: AuditRecord) -> int:
        if self.fd < 0:
            raise AuditLogError(f"audit log {self.path} is closed")
        if self._failed:
            raise AuditLogError(self._failed)
        seq = self.last_seq + 1
        entry = record_entry(record, seq, self.last_hash)
        entry["mac"] = entry_mac(self.key, entry)
        line = encode_entry(entry)
        try:
            from sensevm.base.files import append_line
            append_line(self.fd, line, self.fsync)
        except OSError as exc:
            self._failed = (f"audit log {self.path}: cannot write record {seq}: "
                            f"{exc.strerror or exc}; no further records can be written")
            raise AuditLogError(self._failed) from None
        if seq == 1:
            self.origin = _origin(line)
        self.tree.append(line)
        self.last_seq, self.last_hash = seq, line_hash(line)
        return seq

    def texts(self) -> list[tuple[int, str]]:
        """(seq, text) of every record this run wrote that is not host-only, in order."""
        with self._mutex:
            if self.fd < 0:
                raise AuditLogError(f"audit log {self.path} is closed")
            out = []
            try:
                with open(self.fd, "rb", closefd=False) as fh:
                    fh.seek(self.start_offset)
                    for raw in fh:
                        import json
                        entry = json.loads(raw)
                        if not entry["host_only"]:
                            out.append((entry["seq"], entry["text"]))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise AuditLogError(f"audit log {self.path}: cannot read back this run's "
                                    f"records: {exc}") from None
            return out

    def close(self) -> None:
        """Seal the run (a signed checkpoint of everything written) and release the file. A
        log whose writes failed is left unsealed: ``audit verify`` reports that run cut short."""
        with self._mutex:
            if self.fd >= 0:
                if not self._failed:
                    try:
                        self._own("sealed", self._note())
                    except AuditLogError:
                        pass            # recorded in _failed; the run's end already says why
                fd, self.fd = self.fd, -1
                os.close(fd)            # releases the flock

    def __enter__(self) -> "AuditFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
