"""The session write-ahead log: durable intent before every irreversible fire, and recovery verdicts.

One record per line, canonical JSON (sorted keys, compact, UTF-8) carrying ``seq`` (the line
number), ``crc`` (CRC-32 of the line's canonical JSON without ``crc``) and ``prev`` (SHA-256 of
the previous line's bytes; all zeros for the first): a bit flip anywhere is caught by the CRC of
its line, and a line removed, inserted or reordered by the chain. Each append is one write and an
fsync; the file is locked exclusively while open; a new file's directory is fsync'd. A torn last
line (a crash mid-write: no newline) is tolerated and ignored; damage anywhere else is refused.

Records, per session (``session`` is its random id):

    header      name, program (SHA-256 of the bytecode), policy (digest)
    begin       n, action, args, cls: written before a reversible (cls ``witnessed``) or an
                immediate (cls ``immediate``) body runs, so a crash inside it reads "unknown"
    failed      n, error: that body raised; nothing was registered
    witnessed   n, action, args: a reversible commit ran; its rollback is registered
    queued      n, action, args, capability, key: an irreversible commit deferred (the intent)
    fired       n, action, args: an immediate action ran after its own approval
    approved    hash, entries (the queued n's the confirm covers), approver, checkpoint (the
                signed checkpoint of the run's durable audit log at the approval, or null)
    attempt     n, key: written before an entry fires, so a crash after it reads "unknown"
    flushed     n                       residue     n, error
    discharge   (the flush is over)     complete    (the session is done)
    rollback    n: a witnessed rollback ran during an abort
    aborted     replayed (the n's rolled back)
    recovered   verdict: written by ``recover`` so that running it again changes nothing

A failed fsync is fatal for the log: nothing may fire without a durable intent.
"""

from __future__ import annotations

import fcntl
import json
import os
import zlib
from dataclasses import dataclass, field
from typing import Optional

from sensevm.base.files import append_line
from sensevm.guard.audit import GENESIS, encode_entry, line_hash

VERSION = 1
KINDS = {
    "header": ("name", "program", "policy", "version"),
    "begin": ("n", "action", "args", "cls"),
    "failed": ("n", "error"),
    "witnessed": ("n", "action", "args"),
    "queued": ("n", "action", "args", "capability", "key"),
    "fired": ("n", "action", "args"),
    "approved": ("hash", "entries", "approver", "checkpoint"),
    "attempt": ("n", "key"),
    "flushed": ("n",),
    "residue": ("n", "error"),
    "discharge": (),
    "complete": (),
    "rollback": ("n",),
    "aborted": ("replayed",),
    "recovered": ("verdict",),
}
_COMMON = ("rec", "session", "seq", "crc", "prev")
CRASH_ENV = "SENSE_CRASH_AT"


class WalError(Exception):
    """A write-ahead log that cannot be opened, appended to or trusted."""


def crash_point(name: str, n: Optional[int] = None) -> None:
    """Die here, as a crash would, if ``$SENSE_CRASH_AT`` names this point (tests only).

    ``SENSE_CRASH_AT=after-attempt:2`` kills the process right after entry 2's attempt record.
    """
    wanted = os.environ.get(CRASH_ENV)
    if wanted and wanted in (name, f"{name}:{n}"):
        os._exit(137)


def _crc(entry: dict) -> str:
    body = {k: v for k, v in entry.items() if k != "crc"}
    return f"{zlib.crc32(encode_entry(body)) & 0xFFFFFFFF:08x}"


def _shape_problem(entry) -> Optional[str]:
    if not isinstance(entry, dict):
        return "line is not a JSON object"
    kind = entry.get("rec")
    if kind not in KINDS:
        return f"unknown record kind {kind!r}"
    expected = set(_COMMON) | set(KINDS[kind])
    missing = sorted(expected - entry.keys())
    if missing:
        return f"{kind} record without {', '.join(missing)}"
    extra = sorted(entry.keys() - expected)
    if extra:
        return f"{kind} record with unexpected field(s) {', '.join(extra)}"
    if type(entry["seq"]) is not int or not isinstance(entry["session"], str):
        return "seq must be an integer and session a string"
    if "n" in entry and type(entry["n"]) is not int:
        return "n must be an integer"
    return None


@dataclass
class Scan:
    """The intact records of a log, and where (if anywhere) it stops being trustworthy."""

    path: str
    records: list = field(default_factory=list)
    last_hash: str = GENESIS
    end: int = 0                       # bytes of intact, complete lines
    torn: bool = False                 # the last line was cut short (tolerated)
    problem: Optional[str] = None      # damage before the end (refused)
    line: Optional[int] = None


def scan(path: str) -> Scan:
    """Read and check the whole log; a torn tail is noted, any other fault is a problem."""
    result = Scan(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise WalError(f"{path}: no such write-ahead log") from None
    except OSError as exc:
        raise WalError(f"{path}: cannot read: {exc.strerror or exc}") from None
    lines = data.split(b"\n")
    tail = lines.pop()                 # what follows the last newline: empty unless torn
    for number, line in enumerate(lines, start=1):
        problem = _line_problem(line, number, result.last_hash)
        if problem:
            result.problem, result.line = problem, number
            return result
        result.records.append(json.loads(line))
        result.last_hash = line_hash(line)
        result.end += len(line) + 1
    if tail:
        result.torn, result.line = True, len(lines) + 1
    return result


def _line_problem(line: bytes, number: int, prev: str) -> Optional[str]:
    try:
        entry = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return "line is not valid JSON"
    problem = _shape_problem(entry)
    if problem:
        return problem
    if entry["crc"] != _crc(entry):
        return "CRC mismatch: the line was altered or damaged"
    if encode_entry(entry) != line:
        return "line is not in canonical form: it was altered"
    if entry["seq"] != number:
        return f"seq is {entry['seq']}, expected {number}: lines were removed, added or reordered"
    if entry["prev"] != prev:
        return f"prev does not match line {number - 1}: the chain is broken"
    return None


class SessionLog:
    """The writer: appends records durably, under an exclusive lock, to an intact log.

    An existing log with a torn tail is truncated to its last complete line first (that line
    was never acknowledged, so nothing relied on it); one damaged elsewhere is refused.
    """

    def __init__(self, path: str, *, fsync: bool = True):
        self.path = os.fspath(path)
        self.fsync = fsync
        self.failed: Optional[str] = None
        created = not os.path.exists(self.path)
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0),
                              0o644)
        except OSError as exc:
            raise WalError(f"cannot open write-ahead log {self.path}: "
                           f"{exc.strerror or exc}") from None
        try:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise WalError(f"write-ahead log {self.path} is in use by another process") \
                    from None
            found = scan(self.path)
            if found.problem:
                raise WalError(f"{self.path}:{found.line}: {found.problem}; refusing to append "
                               "(run: sensevm recover " + self.path + ")")
            if found.torn:
                os.ftruncate(self.fd, found.end)
            os.lseek(self.fd, 0, os.SEEK_END)
            if created and fsync:
                _fsync_dir(self.path)
        except BaseException:
            os.close(self.fd)
            raise
        self.seq = len(found.records)
        self.last_hash = found.last_hash
        self.records = found.records

    def append(self, kind: str, session: str, **fields) -> dict:
        """Write one record durably and return it; any failure stops every later write."""
        if self.failed:
            raise WalError(self.failed)
        if set(fields) != set(KINDS[kind]):
            raise ValueError(f"{kind} record needs {KINDS[kind]}, got {sorted(fields)}")
        entry = {"rec": kind, "session": session, "seq": self.seq + 1, "prev": self.last_hash,
                 **fields}
        entry["crc"] = _crc(entry)
        line = encode_entry(entry)
        try:
            append_line(self.fd, line, self.fsync)
        except OSError as exc:
            self.failed = (f"write-ahead log {self.path}: cannot write record {self.seq + 1}: "
                           f"{exc.strerror or exc}; nothing more may fire")
            raise WalError(self.failed) from None
        self.seq += 1
        self.last_hash = line_hash(line)
        self.records.append(entry)
        return entry

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)

    def __enter__(self) -> "SessionLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


# ----------------------------------------------------------------------------- recovery

@dataclass
class Verdict:
    """What happened to one session, as far as its records can tell."""

    session: str
    name: str
    verdict: str                       # committed | rolled back | in doubt
    fired: list = field(default_factory=list)         # queued entries known to have fired
    failed: list = field(default_factory=list)        # queued entries whose fire failed
    owed: list = field(default_factory=list)          # approved, never attempted
    unknown: list = field(default_factory=list)       # attempted or begun, outcome never recorded
    dropped: list = field(default_factory=list)       # queued, never approved
    rollbacks_owed: list = field(default_factory=list)  # witnessed, not rolled back
    immediate: list = field(default_factory=list)     # immediate actions that fired
    recorded: bool = False             # an earlier recover already wrote this verdict

    @property
    def clean(self) -> bool:
        return not (self.failed or self.owed or self.unknown or self.rollbacks_owed)

    def as_json(self) -> dict:
        return {"session": self.session, "name": self.name, "verdict": self.verdict,
                "clean": self.clean, "fired": self.fired, "failed": self.failed,
                "owed": self.owed, "unknown": self.unknown, "dropped": self.dropped,
                "rollbacks_owed": self.rollbacks_owed, "immediate": self.immediate}

    def describe(self) -> str:
        lines = [f"session {self.name} ({self.session}): {self.verdict}"
                 + ("" if self.clean else " — needs attention")]
        for label, items in (("fired", self.fired), ("FAILED", self.failed),
                             ("OWED, not attempted", self.owed),
                             ("UNKNOWN, attempted or begun but no outcome recorded", self.unknown),
                             ("dropped, never approved", self.dropped),
                             ("ROLLBACK OWED", self.rollbacks_owed),
                             ("immediate, fired", self.immediate)):
            for item in items:
                lines.append(f"  {label}: {item}")
        return "\n".join(lines)


def shown_arg(arg) -> str:
    """A manifest argument (canonical data) as every place shows it: the manifest's entries,
    the terminal prompt, ``sensevm recover``. Strings in Sense literal form ("...", with the
    language's five escapes), nil/true/false, arrays in brackets, anything else its printed
    form."""
    if isinstance(arg, dict):
        return arg["text"]
    if isinstance(arg, list):
        return "[" + ", ".join(shown_arg(a) for a in arg) + "]"
    if arg is None:
        return "nil"
    if arg is True or arg is False:
        return "true" if arg else "false"
    if isinstance(arg, str):
        return '"' + (arg.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
                      .replace("\t", "\\t").replace("\r", "\\r")) + '"'
    return str(arg)


def _label(entry: dict) -> str:
    return f"#{entry['n']} {entry['action']}({', '.join(map(shown_arg, entry['args']))})"


def verdicts(records: list) -> list:
    """Each session's verdict, from its records alone."""
    sessions: dict[str, list] = {}
    for r in records:
        sessions.setdefault(r["session"], []).append(r)
    out = []
    for sid, recs in sessions.items():
        by = {}
        for r in recs:
            by.setdefault(r["rec"], []).append(r)
        header = (by.get("header") or [{"name": "?"}])[0]
        v = Verdict(sid, header["name"], "rolled back")
        queued = {r["n"]: r for r in by.get("queued", [])}
        done = {r["n"] for r in by.get("flushed", [])}
        failed = {r["n"]: r["error"] for r in by.get("residue", [])}
        attempted = {r["n"] for r in by.get("attempt", [])}
        v.immediate = [_label(r) for r in by.get("fired", [])]
        v.recorded = "recovered" in by
        # A reversible or immediate body begun with no outcome recorded: the crash came while
        # it ran, so its effect may have happened (and a reversible one's rollback be owed).
        ended = {r["n"] for kind in ("witnessed", "fired", "failed") for r in by.get(kind, [])}
        for r in by.get("begin", []):
            if r["n"] not in ended:
                what = ("reversible body interrupted, rollback may be owed"
                        if r["cls"] == "witnessed" else "immediate body interrupted")
                v.unknown.append(f"{_label(r)}: {what}")
        if "approved" in by:
            v.verdict = "committed"
            approved = by["approved"][-1]["entries"]
            for n in approved:
                entry = queued.get(n)
                label = _label(entry) if entry else f"#{n}"
                if n in done:
                    v.fired.append(label)
                elif n in failed:
                    v.failed.append(f"{label}: {failed[n]}")
                elif n in attempted:
                    v.unknown.append(label)
                else:
                    v.owed.append(label)
            v.dropped = [_label(e) for n, e in queued.items() if n not in approved]
        else:
            v.dropped = [_label(e) for e in queued.values()]
            rolled = {r["n"] for r in by.get("rollback", [])}
            if "aborted" in by:
                rolled |= set(by["aborted"][-1]["replayed"])
            v.rollbacks_owed = [_label(r) for r in by.get("witnessed", [])
                                if r["n"] not in rolled]
        out.append(v)
    return out


def recover(path: str, *, fsync: bool = True) -> list:
    """Every session's verdict; the first run records each unfinished one, later runs change nothing.

    Recovery never fires anything: an entry that was approved but not attempted is reported
    owed, one attempted without an outcome is reported unknown, for a person to settle.
    """
    found = scan(path)
    if found.problem:
        raise WalError(f"{path}:{found.line}: {found.problem}; the log cannot be trusted past "
                       "this line and is not recovered automatically")
    results = verdicts(found.records)
    pending = [v for v in results if not v.recorded and not _finished(found.records, v.session)]
    if pending or found.torn:
        with SessionLog(path, fsync=fsync) as log:
            for v in pending:
                if v.verdict == "committed":
                    log.append("discharge", v.session)
                log.append("recovered", v.session, verdict=v.verdict)
                v.recorded = True
    return results


def _finished(records: list, session: str) -> bool:
    kinds = {r["rec"] for r in records if r["session"] == session}
    return "complete" in kinds or "aborted" in kinds
