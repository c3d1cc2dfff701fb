"""Memory (spec 18.2, 18.4, 18.5): session and persistent memory values, ask_with_memory, default locations.

``memory NAME[: "hint"]`` and ``persistent memory NAME[: "path"]`` compile to a call of the
helper builtin ``@memory(name, hint, persistent)`` (a name source cannot write) and a local
store, like ``model NAME = ...``.

A persistent memory is an append-only log in SQLite, with the reference's schema, so either
implementation can read the other's file: every ``remember``/``forget`` is one new row in one
committed ``BEGIN IMMEDIATE`` transaction (never an UPDATE or DELETE), versions come from
``AUTOINCREMENT`` and are therefore unique and increasing across every process writing the file,
and the database runs in WAL mode with a busy timeout so concurrent writers wait instead of
failing. Any SQLite failure (a file that is not a database, a read-only or locked file) is a
SenseRuntimeError naming the memory and the file.
"""

from __future__ import annotations

import os
import time
from _thread import allocate_lock

from sensevm.base.errors import Pos, SenseRuntimeError
from sensevm.guard import provenance as PV
from sensevm.guard.provenance import LBool, LStr
from sensevm.runtime.values import Closure, sized, sized_array, to_str, type_name

SUFFIX = ".sense_memory.db"
ENV_DIR = "SENSE_MEMORY_DIR"
# How long a write waits for another process's transaction before giving up (seconds).
BUSY_TIMEOUT = 30.0

# Every memory log this process opened, closed at exit: closing checkpoints SQLite's WAL into
# the database and removes the -wal/-shm files, which a process that exits without collecting
# its objects (the fast run path freezes them) would otherwise leave behind.
_OPEN = None                 # a WeakSet once a log is opened: a collected memory closes itself


def _close_all() -> None:
    for memory in list(_OPEN or ()):
        with memory.lock:
            if memory.conn is not None:
                try:
                    memory.conn.close()
                except Exception:       # exiting anyway; the log itself is already durable
                    pass
                memory.conn = None

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_log (
    version   INTEGER PRIMARY KEY AUTOINCREMENT,
    key       TEXT NOT NULL,
    op        TEXT NOT NULL,
    value     TEXT,
    timestamp REAL NOT NULL
)
"""
# Not in the reference's schema; harmless to it, and keeps recall/history off a full scan.
_INDEX = "CREATE INDEX IF NOT EXISTS memory_log_key ON memory_log (key, version)"
# The provenance of what a record stores, beside the reference's table (which it leaves as the
# reference reads and writes it): the origins of its key and of its value, as JSON lists, for
# the records that had any. A value a page supplied stays the page's in the next run.
_LABELS = """
CREATE TABLE IF NOT EXISTS memory_labels (
    version        INTEGER PRIMARY KEY,
    key_origins    TEXT NOT NULL,
    value_origins  TEXT NOT NULL
)
"""

_COLUMNS = {"version", "key", "op", "value", "timestamp"}
_SQLITE_MAX = 2 ** 63 - 1


class _NotALog(Exception):
    """A database whose memory_log table was made by something else."""


def default_path(name: str, declaring_file: str | None) -> str:
    """Where ``persistent memory NAME`` (no explicit path) keeps its file.

    ``$SENSE_MEMORY_DIR/NAME.sense_memory.db`` when that variable is set (as given, so a relative
    directory is relative to the working directory), else ``.sense_memory/`` next to the
    declaring file; code with no file (the REPL) uses the working directory.
    """
    filename = name + SUFFIX
    override = os.environ.get(ENV_DIR)
    if override:
        from pathlib import Path
        return str(Path(override) / filename)
    if declaring_file is not None and not declaring_file.startswith("<"):
        from pathlib import Path
        return str(Path(declaring_file).resolve().parent / ".sense_memory" / filename)
    return filename


def _check_key(key, at) -> str:
    """A memory key: any String, labelled or not (a labelled one is kept as it is, so the
    keys a memory gives back keep their origins)."""
    if type(key) is not str and type(key) is not LStr:
        raise SenseRuntimeError(f"memory key must be a String, got {type_name(key)}", at[0],
                                path=at[1])
    return key


def _origins_json(origins) -> str:
    import json
    return json.dumps(sorted(list(o) for o in origins))


def _origins_from(text) -> frozenset:
    """Origins read back from memory_labels; a damaged entry labels the value with what a
    damaged file is: outside content."""
    import json
    try:
        return frozenset(tuple(o) for o in json.loads(text) if type(o) is list
                         and o and all(type(x) is str for x in o))
    except (ValueError, TypeError, RecursionError):
        return PV.only(PV.untrusted("memory file"))


# ----------------------------------------------------------------------------- values

class SessionMemory:
    """``memory NAME``: an in-process store; keys keep their first insertion position."""

    __slots__ = ("name", "kind", "store")
    type_name = "Memory"
    METHODS = {"remember": 2, "recall": 1, "forget": 1, "keys": 0}

    def __init__(self, name: str, kind: str | None, store: dict | None = None):
        self.name = name
        self.kind = kind
        self.store: dict = store if store is not None else {}

    def __str__(self) -> str:
        return f"<memory {self.name} ({len(self.store)} entries)>"

    def sense_member(self, vm, name: str):
        if name in self.METHODS:
            return MemoryMethod(self, name, vm.frame.pos, vm.frame.prepared.path)
        if name == "name":
            return self.name
        if name == "kind":
            return self.kind
        raise SenseRuntimeError(f"memory '{self.name}' has no member '{name}'")

    def member_names(self):
        return sorted([*self.METHODS, "kind", "name"])

    def sense_equal(self, other) -> bool:
        # The reference compares two session memories field by field with host equality
        # (so a stored 1 equals a stored 1.0 or true); values are held by reference.
        return (self.name == other.name and self.kind == other.kind
                and self.store == other.store)

    # The operations; ``at`` is (position, file) of the member expression, where the
    # reference reports their errors.
    def remember(self, at, key, value):
        self.store[_check_key(key, at)] = value

    def recall(self, at, key):
        # Which value comes back is the key's doing too: it carries the key's origins.
        return PV.like(self.store.get(_check_key(key, at)), key)

    def forget(self, at, key):
        self.store.pop(_check_key(key, at), None)

    def keys(self, at):
        return sized_array(list(self.store))

    def snapshot(self, at) -> list:
        return list(self.store.items())


class PersistentMemory:
    """``persistent memory NAME``: a versioned, append-only log in a SQLite file."""

    __slots__ = ("name", "path", "location", "conn", "lock", "__weakref__")
    type_name = "Memory"
    METHODS = {"remember": 2, "recall": 1, "forget": 1, "keys": 0, "history": 1, "as_of": 2}

    def __init__(self, name: str, path: str, location: str):
        self.name = name
        self.path = path              # as the program sees it (``.path``), possibly relative
        self.location = location      # absolute, fixed at declaration: what is opened
        self.conn: sqlite3.Connection | None = None
        # One connection is shared by every thread of the VM (async tools and agents run on
        # workers), and a sqlite3 connection must not be used by two threads at once.
        self.lock = allocate_lock()       # threading.Lock, without importing threading at start-up

    def __str__(self) -> str:
        return f"<memory {self.name} (persistent, {self.path})>"

    def sense_member(self, vm, name: str):
        if name in self.METHODS:
            return MemoryMethod(self, name, vm.frame.pos, vm.frame.prepared.path)
        if name == "name":
            return self.name
        if name == "path":
            return self.path
        raise SenseRuntimeError(f"memory '{self.name}' has no member '{name}'")

    def member_names(self):
        return sorted([*self.METHODS, "name", "path"])

    # ------------------------------------------------------------------ the database

    def open(self, at=(None, None)) -> sqlite3.Connection:
        """Open (creating it and its directory if needed) the log; idempotent."""
        if self.conn is not None:
            return self.conn
        import sqlite3              # here, not at the top: most runs never open a memory log
        try:
            directory = os.path.dirname(self.location)
            os.makedirs(directory, exist_ok=True)
            # isolation_level=None: this module issues BEGIN/COMMIT itself.
            conn = sqlite3.connect(self.location, timeout=BUSY_TIMEOUT, isolation_level=None,
                                   check_same_thread=False)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(_SCHEMA)
                columns = {row[1] for row in conn.execute("PRAGMA table_info(memory_log)")}
                if not _COLUMNS <= columns:
                    raise _NotALog("its memory_log table is not a memory log (columns: "
                                   f"{', '.join(sorted(columns))})")
                conn.execute(_INDEX)
                conn.execute(_LABELS)
            except BaseException:
                conn.close()
                raise
        except (sqlite3.Error, OSError, _NotALog) as exc:
            raise SenseRuntimeError(f"cannot open persistent memory '{self.name}' at "
                                    f"{self.path}: {_reason(exc)}", at[0], path=at[1]) from None
        self.conn = conn
        global _OPEN
        if _OPEN is None:
            import atexit
            import weakref
            _OPEN = weakref.WeakSet()
            atexit.register(_close_all)
        _OPEN.add(self)
        return conn

    def _failed(self, exc: Exception, at) -> SenseRuntimeError:
        return SenseRuntimeError(f"persistent memory '{self.name}' ({self.path}): {_reason(exc)}",
                                 at[0], path=at[1])

    def _read(self, at, sql: str, params=()) -> list:
        import sqlite3
        with self.lock:
            conn = self.open(at)
            try:
                return conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise self._failed(exc, at) from None

    def _append(self, at, key: str, op: str, encoded: str | None, value=None) -> None:
        """One record (and the origins of its key and ``value``, if any), in one committed
        transaction: it is written whole or not at all."""
        import sqlite3
        key_origins = PV.origins_of(key)
        value_origins = PV.deep_origins(value)
        with self.lock:
            conn = self.open(at)
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    cursor = conn.execute("INSERT INTO memory_log (key, op, value, timestamp) "
                                          "VALUES (?, ?, ?, ?)",
                                          (str.__str__(key), op, encoded, time.time()))
                    if key_origins or value_origins:
                        conn.execute("INSERT INTO memory_labels VALUES (?, ?, ?)",
                                     (cursor.lastrowid, _origins_json(key_origins),
                                      _origins_json(value_origins)))
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise self._failed(exc, at) from None

    def _decode(self, text: str, at):
        import json
        from sensevm.runtime import values
        from sensevm.runtime.conversions import int_reader
        try:
            value = json.loads(text, parse_int=int_reader(values.BUDGET))
        # A hand-edited file: a value that is not text (TypeError) or nested too deeply to
        # read (RecursionError) is as damaged as one that is not JSON.
        except (ValueError, TypeError, RecursionError) as exc:
            raise self._failed(exc, at) from None
        return sized(value)         # (the file may have been written under other limits)

    def _when(self, stamp, key: str, version, at) -> str:
        """The ``time.ctime`` text of a record's timestamp; a timestamp that is no time (a
        hand-edited file: text, a blob, out of the host's range) is an error naming the file,
        the key and the record."""
        if type(stamp) is float or type(stamp) is int:
            try:
                return time.ctime(stamp)
            except (OverflowError, OSError, ValueError):      # out of range, or NaN
                pass
        shown = repr(stamp)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        raise SenseRuntimeError(f"persistent memory '{self.name}' ({self.path}): record v{version} "
                                f"of key '{key}' has a timestamp that is not a time: {shown}",
                                at[0], path=at[1])

    # ------------------------------------------------------------------ the operations

    def remember(self, at, key, value):
        key = _check_key(key, at)
        self._append(at, key, "remember", encode(value, at), value)

    def recall(self, at, key):
        key = _check_key(key, at)
        rows = self._read(at, "SELECT m.op, m.value, l.value_origins FROM memory_log m "
                              "LEFT JOIN memory_labels l ON l.version = m.version "
                              "WHERE m.key = ? ORDER BY m.version DESC LIMIT 1",
                              (str.__str__(key),))
        if not rows or rows[0][0] != "remember":
            return None
        return PV.like(self._labelled(rows[0][1], rows[0][2], at), key)

    def _labelled(self, encoded, origins, at):
        """A stored value, decoded, with the origins memory_labels kept for it."""
        value = self._decode(encoded, at)
        return value if origins is None else PV.label(value, _origins_from(origins))

    def forget(self, at, key):
        self._append(at, _check_key(key, at), "forget", None)

    def _latest(self, at) -> list:
        """(key, encoded value, key origins, value origins) of every key whose latest record
        is a remember, in that record's order."""
        return self._read(at, "SELECT m.key, m.value, l.key_origins, l.value_origins "
                              "FROM memory_log m LEFT JOIN memory_labels l "
                              "ON l.version = m.version WHERE m.op = 'remember' AND m.version "
                              "IN (SELECT MAX(version) FROM memory_log GROUP BY key) "
                              "ORDER BY m.version")

    def keys(self, at):
        return sized_array([key if origins is None else PV.label(key, _origins_from(origins))
                            for key, _, origins, _ in self._latest(at)])

    def snapshot(self, at) -> list:
        return [(key, self._labelled(value, origins, at))
                for key, value, _, origins in self._latest(at)]

    def history(self, at, key):
        key = _check_key(key, at)
        lines = []
        for version, op, value, stamp, origins in self._read(
                at, "SELECT m.version, m.op, m.value, m.timestamp, l.value_origins "
                    "FROM memory_log m LEFT JOIN memory_labels l ON l.version = m.version "
                    "WHERE m.key = ? ORDER BY m.version", (str.__str__(key),)):
            when = self._when(stamp, key, version, at)
            if op == "remember":
                shown = to_str(self._decode(value, at))
                line = f"[v{version}] remember '{key}' = {shown} ({when})"
                lines.append(PV.label(line, PV.origins_of(key) if origins is None else
                                      PV.union(PV.origins_of(key), _origins_from(origins))))
            else:
                lines.append(PV.label(f"[v{version}] forget '{key}' ({when})",
                                      PV.origins_of(key)))
        return sized_array(lines)

    def as_of(self, at, key, version):
        key = _check_key(key, at)
        asked = version
        version = PV.plain(version)
        if type(version) is not int:
            raise SenseRuntimeError(f"as_of() expects an Int version, got {type_name(version)}",
                                    at[0], path=at[1])
        if version < -_SQLITE_MAX:
            return None
        rows = self._read(at, "SELECT m.op, m.value, l.value_origins FROM memory_log m "
                              "LEFT JOIN memory_labels l ON l.version = m.version "
                              "WHERE m.key = ? AND m.version <= ? ORDER BY m.version DESC "
                              "LIMIT 1", (str.__str__(key), min(version, _SQLITE_MAX)))
        if not rows or rows[0][0] != "remember":
            return None
        return PV.like(self._labelled(rows[0][1], rows[0][2], at), key, asked)


def _reason(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


class MemoryMethod:
    """``m.recall`` and friends: a function value bound to one memory and to the position of
    the member expression, where its errors are reported (as the reference reports them)."""

    __slots__ = ("memory", "method", "pos", "path")
    type_name = "Function"
    is_function = True

    def __init__(self, memory, method: str, pos: Pos, path: str | None):
        self.memory = memory
        self.method = method
        self.pos = pos
        self.path = path

    def __str__(self) -> str:
        return f"<builtin {self.memory.name}.{self.method}>"

    def sense_call(self, vm, frame, args) -> bool:
        arity = self.memory.METHODS[self.method]
        if len(args) != arity:
            raise SenseRuntimeError(f"'{self.memory.name}.{self.method}' expects {arity} "
                                    f"argument(s), got {len(args)}")
        frame.stack.append(getattr(self.memory, self.method)((self.pos, self.path), *args))
        return False


# ----------------------------------------------------------------------------- JSON values

# The reference's host class names, which its "not JSON serializable" message shows.
_HOST_NAMES = {"Model": "SenseModel", "Answer": "Answer", "Skill": "SenseSkill",
               "Agent": "SenseAgent", "Tool": "SenseToolDef", "Module": "SenseModule",
               "Future": "SenseFuture", "McpServer": "SenseMcpServer"}


def host_name(v) -> str:
    t = type(v)
    if t is SessionMemory:
        return "SenseMemory"
    if t is PersistentMemory:
        return "SensePersistentMemory"
    if t is Closure:
        return "SenseFunction"
    own = getattr(t, "host_name", None)         # e.g. an MCP server's tool (mcp.py)
    if own is not None:
        return own
    name = type_name(v)
    if name == "Function":
        return "BuiltinFunction"
    if name == "Action":
        from sensevm.runtime.values import ActionDefinition
        return "SenseActionDef" if t is ActionDefinition else "SenseAction"
    return _HOST_NAMES.get(name, t.__name__)


def _not_json(v):
    if type(v) is LBool:
        return v.value          # stored plain: a persistent memory keeps no provenance
    raise TypeError(f"Object of type {host_name(v)} is not JSON serializable")


def _int_key(value):
    """A Map with an Int key somewhere in ``value`` (JSON would turn the key into a String, so
    it would not read back as it was written), or None."""
    seen, todo = set(), [value]
    while todo:
        x = todo.pop()
        if type(x) is list or type(x) is dict:
            if id(x) in seen:
                continue
            seen.add(id(x))
            if type(x) is dict:
                for k in x:
                    if type(PV.plain(k)) is int:
                        return k
                todo.extend(x.values())
            else:
                todo.extend(x)
    return None


def encode(value, at) -> str:
    """The JSON text a persistent memory stores for ``value`` (Int, Float, String, Bool, nil
    and Arrays and Maps with String keys of those, at any depth)."""
    import json
    key = _int_key(value)
    if key is not None:
        raise SenseRuntimeError(
            "persistent memory can only store Maps whose keys are Strings (JSON has no Int "
            f"keys): got the key {int(PV.plain(key))}", at[0], path=at[1])
    try:
        return json.dumps(value, default=_not_json)
    except (TypeError, ValueError) as exc:
        raise SenseRuntimeError(
            "persistent memory can only store JSON-serializable values "
            f"(Int/Float/String/Bool/Nil/Array of those): {type(exc).__name__}: {exc}",
            at[0], path=at[1]) from None


# ----------------------------------------------------------------------------- builtins

PERSIST_CAPABILITY = "memory.persistent"


def b_memory_decl(vm, frame, args):
    """``@memory(name, hint, persistent)``: the value a memory declaration binds."""
    name, hint, persistent = args
    if not persistent:
        frame.stack.append(SessionMemory(name, hint))
        return False
    declaring = frame.prepared.path
    # A persistent memory is a file on the host: like every way out of the program it has a
    # capability a policy can deny (allowed unless denied, as spec 11 has it), asked before
    # the file is touched and recorded host-side.
    from sensevm.guard import policy as P
    from sensevm.guard.audit import AuditRecord
    from sensevm.base.errors import SensePolicyError
    allowed = P.allowed(PERSIST_CAPABILITY, frame.scope, frame)
    vm.audit.append(AuditRecord.make(f"persistent memory '{name}'", name, "memory",
                                     "opened" if allowed else "denied",
                                     None if allowed else
                                     f"capability '{PERSIST_CAPABILITY}' denied by policy",
                                     frame.pos.line, vm.lineage(frame), True))
    if not allowed:
        raise SensePolicyError(f"persistent memory '{name}' requires capability "
                               f"'{PERSIST_CAPABILITY}', which is denied by policy")
    # Program-relative, not working-directory-relative (sensevm.runtime.places): the same
    # program run from anywhere reaches the same file.
    from sensevm.runtime.places import resolve, source_file
    if hint is not None:
        path, location = hint, resolve(vm, declaring, hint)
    else:
        path = default_path(name, source_file(vm, declaring))
        location = os.path.abspath(path)
    memory = PersistentMemory(name, path, location)
    memory.open((frame.pos, declaring))
    frame.stack.append(memory)
    return False


def b_ask_with_memory(vm, frame, args):
    from sensevm.world.models import _no_model, ask_model, delegated_model
    prompt, memory = args
    model = delegated_model(frame.scope)
    if model is None:
        raise _no_model("ask_with_memory()", 'inference("mock")')
    if type(prompt) is not str and type(prompt) is not LStr:
        raise SenseRuntimeError(f"ask_with_memory() expects a String prompt, got "
                                f"{type_name(prompt)}")
    context = [prompt]
    if type(memory) not in (SessionMemory, PersistentMemory):
        raise SenseRuntimeError(f"ask_with_memory() expects a Memory, got {type_name(memory)}")
    known = memory.snapshot((frame.pos, frame.prepared.path))
    if known:
        lines = "\n".join(f"- {key}: {to_str(value)}" for key, value in known)
        prompt = f"Known information from memory:\n{lines}\n\n{to_str(prompt)}"
        context.extend(value for _, value in known)
    frame.stack.append(ask_model(vm, frame, model, prompt, what="ask_with_memory()",
                                 context=context))
    return False
