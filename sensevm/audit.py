"""The audit log: host-side records, the one-line text audit_log() returns, and the durable file."""

from __future__ import annotations

import os
import re
import time
from _thread import allocate_lock
from collections import deque, namedtuple
from itertools import islice

from .record import record

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
        text = f"{subject} -> {event}" if line is None else f"[line {line}] {subject} -> {event}"
        if detail:
            text = f"{text} ({detail})"
        if lineage:
            text = f"{text} (via {' > '.join(lineage)})"
        return text


_tuple_new = tuple.__new__


class AuditLog:
    """The log of one run; every record stays host-side even if no program reads it.

    Records are kept as rows: plain tuples of AuditRecord's fields (the VM appends one per
    lifecycle event), or AuditRecords. A plain tuple of strings, numbers and None is one the
    garbage collector stops tracking once it has seen it, so a long run's log costs the
    collector nothing; a tuple subclass such as AuditRecord is tracked, and walked by every
    full collection, for as long as the run lasts. ``records`` gives them back as AuditRecords.

    Without a sink every row is kept in ``rows``. With a sink (an ``AuditFile``) each record
    goes to the file and ``rows`` keeps only the last ``TAIL`` of them, so memory stays
    bounded however long the run; ``lines()`` then reads this run's records back.
    """

    TAIL = 64

    def __init__(self, sink: "AuditFile | None" = None):
        self.sink = sink
        self.rows = [] if sink is None else deque(maxlen=self.TAIL)
        if sink is None:
            # Nothing to write: appending a record is appending it to the list (the VM calls
            # this once per lifecycle event).
            self.append = self.rows.append
        # Lines of an earlier run this one continues (a resumed agent): audit_log() shows
        # them first. Their records are in that run's durable log, if it had one.
        self.prefix: list[str] = []
        # What lines() has described so far (no sink): the texts of rows[:_seen], and the
        # texts made, by line, event and subject and by the fields describe() reads.
        self._texts: list[str] = []
        self._seen = 0
        self._made: tuple[dict, dict] = ({}, {})
        self._describing = allocate_lock()

    def append(self, row: tuple) -> None:
        """Add a record: an AuditRecord, or a plain tuple of its fields in order."""
        if self.sink is not None:
            self.sink.write(_tuple_new(AuditRecord, row))
        self.rows.append(row)

    @property
    def records(self) -> list[AuditRecord]:
        """The kept records (all of them, or the sink's last TAIL), oldest first."""
        rows = list(self.rows)      # a snapshot: async tool bodies record from other threads
        return [_tuple_new(AuditRecord, row) for row in rows]

    def __len__(self) -> int:
        return len(self.rows)

    def lines(self) -> list[str]:
        if self.sink is not None:
            return self.prefix + self.sink.texts()
        # Rows are only ever appended: the texts of those already seen are kept (a dry run's
        # summary after a program that called audit_log() describes only what came since).
        with self._describing:      # async tool bodies may call audit_log() too
            rows = self.rows
            end = len(rows)         # ... and be appending meanwhile
            if self._seen < end:
                self._describe(islice(rows, self._seen, end))
                self._seen = end
            return self.prefix + self._texts

    def _describe(self, rows) -> None:
        """Add the texts audit_log() shows for ``rows`` to ``_texts``.

        As the durable file gives them back (a surrogate pair read back as one character), so
        audit_log() is the same with and without --audit-log. A loop records the same event at
        the same line over and over: each distinct text is made once. Most records have no
        detail and no lineage; their texts are found by line, event and subject in nested dicts
        (no key tuple to make and hash), the rest's by the fields describe() reads."""
        append = self._texts.append
        plain, other = self._made
        for r in rows:
            if r[8]:                            # host_only
                continue
            if r[4] is None and not r[6]:
                by_event = plain.get(r[5])
                if by_event is None:
                    by_event = plain[r[5]] = {}
                by_subject = by_event.get(r[3])
                if by_subject is None:
                    by_subject = by_event[r[3]] = {}
                text = by_subject.get(r[0])
                if text is None:
                    text = by_subject[r[0]] = _shown_text(r)
            else:
                key = (r[0], r[3], r[4], r[5], r[6])
                text = other.get(key)
                if text is None:
                    text = other[key] = _shown_text(r)
            append(text)

    def close(self) -> None:
        if self.sink is not None:
            self.sink.close()


# ----------------------------------------------------------------------------- the durable log
#
# File format: one record per line, each line canonical JSON (sorted keys, no spaces, UTF-8)
# ending in "\n". ``prev`` is the hex SHA-256 of the previous line's bytes without its newline
# (GENESIS for the first line), so altering, removing, inserting or reordering any line breaks
# the chain at or just after that line.

GENESIS = "0" * 64
FIELDS = frozenset({"seq", "time", "subject", "name", "kind", "event", "detail", "line",
                    "lineage", "host_only", "text", "prev"})
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


def _escape_surrogate(m: re.Match) -> str:
    return f"\\u{ord(m.group()):04x}"


def encode_entry(entry: dict) -> bytes:
    """The canonical bytes of one line, without its newline."""
    text = _encoder().encode(entry)
    if re.search(_SURROGATE, text):
        text = re.sub(_SURROGATE, _escape_surrogate, text)
    return text.encode("utf-8")


def _shown_text(row) -> str:
    """The line audit_log() shows for ``row``, as the durable file gives it back."""
    return _storable(_tuple_new(AuditRecord, row).describe())


def _storable(text):
    """``text`` as JSON will give it back: a lone high surrogate followed by a lone low one
    reads back as the one character the pair encodes, so store it that way from the start."""
    if text is None or text.isascii() or not re.search(_SURROGATE, text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def record_entry(record: AuditRecord, seq: int, prev: str) -> dict:
    """The JSON object stored for ``record`` as line ``seq`` of a file."""
    entry = {"seq": seq, "time": _utc(record.timestamp), "subject": record.subject,
             "name": record.name, "kind": record.kind, "event": record.event,
             "detail": record.detail, "line": record.line, "lineage": list(record.lineage),
             "host_only": record.host_only, "text": record.describe(), "prev": prev}
    if re.search(_SURROGATE, entry["text"] + record.name + record.kind):
        for key in ("subject", "name", "kind", "event", "detail", "text"):
            entry[key] = _storable(entry[key])
        entry["lineage"] = [_storable(x) for x in record.lineage]
    return entry


def line_hash(line: bytes) -> str:
    import hashlib
    return hashlib.sha256(line).hexdigest()


@record(frozen=False)
class ChainResult:
    """What ``verify_chain`` found. ``records``/``last_seq``/``last_hash``/``end`` describe the
    intact prefix; ``problem`` and ``line`` the first fault (None when the chain is intact)."""

    path: str
    records: int = 0
    last_seq: int = 0
    last_hash: str = GENESIS
    end: int = 0                       # byte offset just past the last intact line
    line: int | None = None
    problem: str | None = None
    torn: bool = False

    @property
    def ok(self) -> bool:
        return self.problem is None

    def message(self) -> str:
        if self.ok:
            return (f"OK: {self.records} record{'' if self.records == 1 else 's'}, "
                    f"chain intact (last hash {self.last_hash})")
        return f"{self.path}:{self.line}: {self.problem}"


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


def _line_problem(number: int, raw: bytes, result: ChainResult) -> str | None:
    """What is wrong with line ``number`` (``raw`` with its newline) given the intact prefix."""
    line = raw[:-1]
    if not line:
        return "empty line"
    try:
        import json
        entry = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        return "line is not valid UTF-8"
    except ValueError as exc:
        return f"line is not valid JSON ({exc})"
    problem = _entry_problem(entry)
    if problem:
        return problem
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


def _scan(fh, path: str) -> ChainResult:
    """Check the chain of the binary file ``fh`` from its start, stopping at the first fault."""
    result = ChainResult(path)
    for number, raw in enumerate(fh, start=1):
        if not raw.endswith(b"\n"):
            result.line, result.torn = number, True
            result.problem = ("torn final line: the last record is incomplete (no terminating "
                              "newline), so a write was interrupted")
            return result
        problem = _line_problem(number, raw, result)
        if problem:
            result.line, result.problem = number, problem
            return result
        result.records = result.last_seq = number
        result.last_hash = line_hash(raw[:-1])
        result.end += len(raw)
    return result


def verify_chain(path) -> ChainResult:
    """Check the whole hash chain of the audit log at ``path``; raise AuditLogError if unreadable."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            return _scan(fh, path)
    except FileNotFoundError:
        raise AuditLogError(f"{path}: no such audit log file") from None
    except OSError as exc:
        raise AuditLogError(f"{path}: cannot read audit log: {exc.strerror or exc}") from None


class AuditFile:
    """A durable sink: appends each record to ``path`` as one chained JSON line, fsync'd.

    The file is locked exclusively (flock) from open to close, and its existing chain is
    verified before anything is appended, so a run only ever extends an intact log.
    ``fsync=False`` is for tests only: it keeps the format but gives up durability.
    """

    def __init__(self, path, *, fsync: bool = True):
        self.path = os.fspath(path)
        self.fsync = fsync
        import threading
        self._mutex = threading.Lock()       # async tool bodies record from other threads
        self._failed: str | None = None
        self.fd = self._open()
        try:
            self._lock_exclusive()
            with open(self.fd, "rb", closefd=False) as fh:
                found = _scan(fh, self.path)
            if not found.ok:
                raise AuditLogError(self._refusal(found))
        except BaseException:
            os.close(self.fd)
            self.fd = -1
            raise
        self.last_seq, self.last_hash = found.last_seq, found.last_hash
        self.start_seq, self.start_offset = found.last_seq + 1, found.end

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
            if self.fd < 0:
                raise AuditLogError(f"audit log {self.path} is closed")
            if self._failed:
                raise AuditLogError(self._failed)
            seq = self.last_seq + 1
            line = encode_entry(record_entry(record, seq, self.last_hash))
            try:
                from .files import append_line
                append_line(self.fd, line, self.fsync)
            except OSError as exc:
                self._failed = (f"audit log {self.path}: cannot write record {seq}: "
                                f"{exc.strerror or exc}; no further records can be written")
                raise AuditLogError(self._failed) from None
            self.last_seq, self.last_hash = seq, line_hash(line)
            return seq

    def texts(self) -> list[str]:
        """The ``text`` of every record this run wrote that is not host-only, in order."""
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
                            out.append(entry["text"])
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise AuditLogError(f"audit log {self.path}: cannot read back this run's "
                                    f"records: {exc}") from None
            return out

    def close(self) -> None:
        with self._mutex:
            if self.fd >= 0:
                fd, self.fd = self.fd, -1
                os.close(fd)            # releases the flock

    def __enter__(self) -> "AuditFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
