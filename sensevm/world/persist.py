"""Saving paused agents, and resuming them as untrusted input: authenticated, bound, checked, then run.

A paused plain agent is a detached chain of VM frames. Saving it means saving everything those
frames can reach: scopes (up to the module and the builtins), arrays and maps (sharing and
cycles kept), closures, actions, tools, modules, other agents, iterators, the methods bound to
a String, Array or Map, and the callback frames of ``map`` / ``filter`` / ``reduce`` /
``sorted(key)`` calls that were under way (methods.py). Code is referred to by its index in
the program, which is saved beside the state as the verified .snb bytes, so a resumed agent runs
the very bytecode it paused in. A value that cannot be saved (a pending Future, a running async
agent) is an error naming it, raised before anything is written.

The state directory is not trusted: whoever can write it could otherwise point a frame at an
action body, rebind a builtin, flip a ``deny`` or wash a label off. So a state file is read the
way the verifier reads a ``.snb`` file, and nothing of it runs until every step has passed:

1. **Authenticated.** The file is ``{"mac": M, "state": S}``; M is an HMAC-SHA256, keyed by the
   host key (keys.py, never in the state directory), over the SHA-256 of ``program.snb`` and
   the exact bytes of S. It is checked before S is parsed.
2. **Bound.** S names its agent, the program's source hash and the opcode fingerprint; each must
   be the one of the ``program.snb`` beside it and of this VM.
3. **Shaped.** Every object and value has exactly the fields of its kind, of the right types,
   with every index and reference in range (``_Shape``).
4. **Coherent** (``_check``). Scopes are acyclic; a rule table holds only rules the bytecode
   can make; the builtins are rebound only by names the program assigns, never to a Python
   value; a Python value only where ``python.import`` is explicitly allowed and nowhere on the
   resumed chain denied; each frame runs code its role allows (an agent's body at the base,
   functions, sync tool bodies, an action's body only while that action is ``committing`` and
   its rollback only while ``rolling_back``), stands just after an instruction that can call,
   with exactly the stack depth, scope chain, test blocks and iterator slots the verifier
   computed for that point, and carries the lineage tags the VM gives that role.

A failed step is a ``StateError`` that names it; the agent does not run.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from typing import Any

from sensevm.base.errors import Pos, SenseRuntimeError
from sensevm.base.files import atomic_write
from sensevm.guard import lifecycle as L
from sensevm.guard import provenance as PV
from sensevm.guard import policy as P
from sensevm.runtime import methods as M
from sensevm.runtime.frames import TryHandler
from sensevm.runtime.values import (ActionDefinition, AgentValue, ArrayIterator,
                                    BoundLifecycleMethod, Builtin, Closure, ErrorValue, Future,
                                    ModuleValue,
                                    PreparedAction, Scope, StringIterator, ToolDefinition)

STATE_VERSION = 3         # 3: authenticated, hex Ints, flat object table (2: provenance)
MAC_PURPOSE = "sense.state.v3"
_HEAD = b'{"mac":"'
_MIDDLE = b'","state":'
_TAIL = b"}"
_MAC_HEX = 64


class SaveError(SenseRuntimeError):
    """A paused agent whose state cannot be written."""


class StateError(Exception):
    """A saved agent state that is refused: ``check`` names the step that refused it."""

    def __init__(self, path: str, check: str, message: str):
        super().__init__(f"{path}: refused ({check}): {message}")
        self.path = path
        self.check = check
        self.message = message


# ----------------------------------------------------------------------------- saving

class _Saver:
    """Assigns each shared object an index in a flat table and builds its record.

    Records are built from a worklist, never by recursion, so an Array nested 100,000 deep saves
    like a flat one; only the inline forms (a labelled Int, say) nest, and they nest once."""

    def __init__(self, vm):
        self.vm = vm
        self.ids: dict[int, int] = {}
        self.objects: list = []
        self.keep: list = []          # keeps saved objects alive so their ids stay unique
        self.pending: list = []       # (index, build) of records not built yet

    def save(self, root, where: str):
        ref = self.value(root, where)
        while self.pending:
            index, build = self.pending.pop()
            self.objects[index] = build()
        return ref

    def ref(self, obj, build) -> dict:
        key = id(obj)
        if key in self.ids:
            return {"ref": self.ids[key]}
        index = len(self.objects)
        self.ids[key] = index
        self.keep.append(obj)
        self.objects.append(None)
        self.pending.append((index, build))
        return {"ref": index}

    def value(self, v: Any, where: str):
        t = type(v)
        if v is None or t is bool or t is str:
            return v
        if t is int:
            return {"int": format(v, "x")}     # hex: parsed back in linear time
        if t is float:
            return {"float": v.hex()}
        if t in PV.LABELLED:
            # Provenance is saved with the value: a resumed agent's page text is still the
            # page's (the second look).
            if t is PV.LStr:
                return {"lstr": str.__str__(v),
                        "spans": [[a, b, _origins(o)] for a, b, o in v.spans]}
            return {"labelled": self.value(PV.plain(v), where), "origins": _origins(v.origins)}
        if t is list:
            return self.ref(v, lambda: _shaped(v, {"type": "array",
                                                   "items": [self.value(x, where) for x in v]}))
        if t is dict:
            # Pairs, in insertion order (the state file is written with sorted keys).
            return self.ref(v, lambda: _shaped(v, {"type": "map", "items": [
                [self.value(k, where), self.value(x, where)] for k, x in v.items()]}))
        if t is Scope:
            return self.scope(v)
        if t is Closure:
            return self.ref(v, lambda: {"type": "closure", "code": self.code(v.code),
                                        "scope": self.scope(v.scope)})
        if t is Builtin:
            if v.receiver is not None:       # a String's, Array's or Map's method
                return self.ref(v, lambda: {"type": "method", "name": v.name,
                                            "receiver": self.value(v.receiver, where)})
            return {"builtin": v.name}
        if t is ModuleValue:
            return self.ref(v, lambda: {"type": "module", "name": v.name, "path": v.path,
                                        "scope": self.scope(v.scope)})
        if t is ActionDefinition:
            return self.ref(v, lambda: {"type": "action_def", "index": self.decl_index(
                "actions", v.decl), "scope": self.scope(v.scope)})
        if t is PreparedAction:
            return self.ref(v, lambda: {
                "type": "action", "def": self.value(v.definition, where),
                "args": [self.value(a, where) for a in v.args], "state": v.state,
                "approved": v.approved, "flag": v.flag, "cleared": v.cleared,
                "reason": v.reason,
                "body_scope": self.scope(v.body_scope) if v.body_scope is not None else None})
        if t is BoundLifecycleMethod:
            return self.ref(v, lambda: {"type": "bound", "action": self.value(v.action, where),
                                        "method": v.method, "scope": self.scope(v.scope),
                                        "pos": [v.pos.line, v.pos.col]})
        if t is ToolDefinition:
            return self.ref(v, lambda: {"type": "tool_def", "index": self.decl_index(
                "tools", v.decl), "scope": self.scope(v.scope)})
        if t is AgentValue:
            return self.ref(v, lambda: self.agent(v, where))
        if t is ArrayIterator:
            return self.ref(v, lambda: {"type": "iter", "items": self.value(v.items, where),
                                        "i": v.i, **({"origins": _origins(v.origins)}
                                                     if v.origins else {})})
        if t is StringIterator:
            return self.ref(v, lambda: {"type": "str_iter", "text": self.value(v.text, where),
                                        "i": v.i})
        if t is Future:
            if not v.finished:
                raise SaveError(f"cannot save {where}: it holds a pending Future of tool "
                                f"'{v.tool.name}' (await it before pausing)", located=False)
            if v.error is not None:
                raise SaveError(f"cannot save {where}: it holds a failed Future of tool "
                                f"'{v.tool.name}'", located=False)
            return self.ref(v, lambda: {"type": "future", "tool": self.value(v.tool, where),
                                        "value": self.value(v.value, where),
                                        "pos": [v.call_pos.line, v.call_pos.col],
                                        "path": v.path})
        if t is ErrorValue:
            err = v.error
            pos = err.pos
            return self.ref(v, lambda: {
                "type": "error", "class": err.kind, "message": self.value(err.message, where),
                "pos": [pos.line, pos.col] if pos is not None else None, "path": err.path,
                "located": err.located, "origins": _origins(err.origins)})
        if getattr(v, "is_python", False):
            return self.python_value(v, where)
        model_value = self.model_value(v, t, where)
        if model_value is not None:
            return model_value
        memory_value = self.memory_value(v, t, where)
        if memory_value is not None:
            return memory_value
        refusal = getattr(v, "save_refusal", None)      # e.g. an MCP server (mcp.py)
        if refusal is not None:
            raise SaveError(f"cannot save {where}: {refusal()}", located=False)
        raise SaveError(f"cannot save {where}: a value of type {t.__name__} cannot be saved",
                        located=False)

    def python_value(self, v, where: str):
        """A Python module, or what was read from one by name, is saved as those names and
        fetched again on resume; a Python value a call or an index made cannot be saved."""
        from sensevm.world.interop import saved_form
        form = saved_form(v)
        if form is None:
            raise SaveError(f"cannot save {where}: it holds a Python value ({v.label}) made by "
                            "Python code; only Python modules and what is read from them by "
                            "name can be saved (docs/interop.md)", located=False)
        return self.ref(v, lambda: form)

    def model_value(self, v, t, where: str):
        from sensevm.world.models import Answer, BoundAsk, Model, Skill
        if t is Model:
            return self.ref(v, lambda: {"type": "model", "name": v.name,
                                        "provider": v.provider.state()})
        if t is BoundAsk:
            return self.ref(v, lambda: {"type": "bound_ask", "model": self.value(v.model, where),
                                        "name": v.name,
                                        "pos": [v.pos.line, v.pos.col] if v.pos else None})
        if t is Answer:
            return self.ref(v, lambda: {"type": "answer", "value": self.value(v.value, where),
                                        "confidence": v.confidence, "source": v.source})
        if t is Skill:
            return self.ref(v, lambda: {"type": "skill", "name": v.name,
                                        "description": v.description,
                                        "tools": self.value(v.tools, where)})
        return None

    def memory_value(self, v, t, where: str):
        from sensevm.world.memory import MemoryMethod, PersistentMemory, SessionMemory
        if t is SessionMemory:
            # Pairs, not an object: the state file is written with sorted keys, and a
            # memory's keys() order is its insertion order.
            return self.ref(v, lambda: {"type": "memory", "name": v.name, "kind": v.kind,
                                        "store": [[k, self.value(x, where)]
                                                  for k, x in v.store.items()]})
        if t is PersistentMemory:
            # Its contents live in its database; the state names the file (absolute, so a
            # resume from another directory reaches the same log).
            return self.ref(v, lambda: {"type": "pmemory", "name": v.name, "path": v.path,
                                        "location": v.location})
        if t is MemoryMethod:
            return self.ref(v, lambda: {"type": "memory_method",
                                        "memory": self.value(v.memory, where),
                                        "method": v.method, "pos": [v.pos.line, v.pos.col],
                                        "path": v.path})
        return None

    def scope(self, s: Scope):
        if s is self.vm.builtins:
            return {"builtins": True, "vars": {k: self.value(v, "a builtin")
                                               for k, v in s.vars.items()
                                               if not (type(v) is Builtin and v.name == k)}}

        def build():
            tag = s.tag
            return {"type": "scope",
                    "vars": {k: self.value(v, f"variable '{k}'") for k, v in s.vars.items()},
                    "parent": self.scope(s.parent) if s.parent is not None else None,
                    "policy": dict(s.policy) if s.policy else None,
                    "tag": self.value(tag, "an agent") if type(tag) is AgentValue else tag}
        return self.ref(s, build)

    def code(self, prepared) -> int:
        if prepared.unit is not self.vm.prepared:
            raise SaveError("cannot save code compiled in another unit (the REPL)", located=False)
        return prepared.index

    def decl_index(self, table: str, decl) -> int:
        return list(getattr(self.vm.program, table)).index(decl)

    def agent(self, a: AgentValue, where: str) -> dict:
        if a.decl.is_async and a.status in ("running", "paused"):
            raise SaveError(f"cannot save {where}: async agent '{a.name}' is {a.status} on a "
                            "worker thread", located=False)
        if a.status == "running":
            raise SaveError(f"cannot save {where}: agent '{a.name}' is running", located=False)
        out = {"type": "agent", "index": self.decl_index("agents", a.decl),
               "scope": self.scope(a.scope), "status": a.status,
               "pause_reason": self.value(a.pause_reason, f"agent '{a.name}'"),
               "mailbox": [self.value(m, f"agent '{a.name}'") for m in a.mailbox],
               "frames": None}
        if a.status == "paused":
            frames, frame = [], a.top
            while frame is not None:
                frames.append(self.frame(frame, f"agent '{a.name}'"))
                if frame is a.base:
                    break
                frame = frame.caller
            out["frames"] = frames          # innermost first
        return out

    def callback(self, driver, where: str) -> dict:
        return self.ref(driver, lambda: {"type": "callback", "kind": driver.kind,
                                         "fn": self.value(driver.fn, where),
                                         "items": self.value(driver.items, where),
                                         "i": driver.i, "out": self.value(driver.out, where),
                                         **({"decided": _origins(driver.decided)}
                                            if driver.decided else {})})

    def frame(self, f, where: str) -> dict:
        if M.is_callback(f.prepared):
            # A map/filter/reduce/sorted call under way: its state, and its branch labels; its
            # scope and position are its caller's, which is saved below it.
            return {"callback": self.callback(f.stack[0], where),
                    "pc": None if f.pc is None else [[j, _origins(o), d] for j, o, d in f.pc]}
        owner = f.action
        return {"code": self.code(f.prepared), "ip": f.ip,
                "stack": [self.value(v, where) for v in f.stack],
                "scope": self.scope(f.scope),
                "tests": [_saved_handler(h, self.scope(h.scope)) for h in f.tests],
                "closure": self.value(f.closure, where) if f.closure is not None else None,
                "module": self.value(f.module, where) if f.module is not None else None,
                "role": f.role, "tags": list(f.tags), "audit_line": f.audit_line,
                "pc": None if f.pc is None else [[j, _origins(o), d] for j, o, d in f.pc],
                "owner": self.value(owner, where) if owner is not None else None}


def _saved_handler(h, scope) -> list:
    """A running handler: [name, target, depth, scope, [line, col]] for a test block, [None,
    target, depth, scope, begin] for a try block (begin: its TRY_BEGIN's instruction)."""
    if type(h) is TryHandler:
        return [None, h.target, h.depth, scope, h.begin]
    return [h.name, h.target, h.depth, scope, [h.pos.line, h.pos.col]]


def _program_bytes(vm) -> bytes:
    """The program as program.snb holds it (made once per VM)."""
    data = getattr(vm, "_saved_program", None)
    if data is None:
        from sensevm.bytecode.snb import dump
        data = dump(vm.program)
        vm._saved_program = data
    return data


def _mac(key: bytes, program: bytes, body: bytes) -> str:
    digest = hashlib.sha256(program).digest()
    return hmac.new(key, digest + body, hashlib.sha256).hexdigest()


def save_agent(vm, agent: AgentValue, directory: str) -> str:
    """Write DIR/NAME.json (and DIR/program.snb once); return the state file's path."""
    from sensevm.guard.keys import HostKeyError, derive
    from sensevm.bytecode.opcodes import FINGERPRINT
    saver = _Saver(vm)
    root = saver.save(agent, f"agent '{agent.name}'")
    # The audit lines so far, labels kept (a failed commit's line may quote a page).
    lines = [saver.value(line, "the audit log") for line in vm.audit.lines()]
    state = {"version": STATE_VERSION, "name": agent.name, "agent": root,
             "objects": saver.objects, "audit_lines": lines,
             "second_look": None if vm.look is None else {
                 "evidence": [[list(o), text] for o, text in vm.look.evidence]},
             "source_hash": vm.program.source_hash.hex(), "fingerprint": FINGERPRINT.hex()}
    program = _program_bytes(vm)
    try:
        key = derive(MAC_PURPOSE, outside=directory)
    except HostKeyError as err:
        raise SaveError(f"cannot save agent '{agent.name}': {err}", located=False) from None
    os.makedirs(directory, exist_ok=True)
    program_path = os.path.join(directory, "program.snb")
    try:
        with open(program_path, "rb") as fh:
            existing = fh.read()
    except FileNotFoundError:
        atomic_write(program_path, program)
    else:
        if existing != program:
            raise SaveError(f"cannot save agent '{agent.name}': {directory} holds the saved "
                            f"agents of another program (its program.snb differs from this "
                            "one); use another --state-dir", located=False)
    body = json.dumps(state, ensure_ascii=False, sort_keys=True,
                      separators=(",", ":")).encode("utf-8")
    path = os.path.join(directory, f"{agent.name}.json")
    atomic_write(path, _HEAD + _mac(key, program, body).encode("ascii") + _MIDDLE + body + _TAIL)
    return path


# ----------------------------------------------------------------------------- reading

def read_saved(directory: str, name: str):
    """The verified program and the authenticated, bound state of agent ``name`` saved in
    ``directory``: (VerifiedProgram, state dict). Raises FileNotFoundError for a missing file,
    SnbFormatError / VerifyError for a bad program, StateError for a refused state."""
    from sensevm.guard.keys import HostKeyError, derive
    from sensevm.bytecode.opcodes import FINGERPRINT
    from sensevm.bytecode.verify import load_verified
    program_path = os.path.join(directory, "program.snb")
    state_path = os.path.join(directory, f"{name}.json")
    with open(program_path, "rb") as fh:
        program = fh.read()
    with open(state_path, "rb") as fh:
        data = fh.read()
    verified = load_verified(program)
    fail = _failer(state_path)
    cut = len(_HEAD) + _MAC_HEX
    if not (data.startswith(_HEAD) and data[cut:cut + len(_MIDDLE)] == _MIDDLE
            and data.endswith(_TAIL)):
        fail("integrity", "not a saved agent state of this format (version "
                          f"{STATE_VERSION}): it has no MAC")
    body = data[cut + len(_MIDDLE):-len(_TAIL)]
    try:
        key = derive(MAC_PURPOSE, outside=directory)
    except HostKeyError as err:
        fail("integrity", str(err))
    if not hmac.compare_digest(data[len(_HEAD):cut], _mac(key, program, body).encode("ascii")):
        fail("integrity", "its MAC does not match: the state or program.snb was changed after "
                          "it was saved, or saved with another host key "
                          "($SENSE_KEY_FILE, docs/durable-agents.md)")
    try:
        state = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        fail("shape", f"not valid JSON ({type(exc).__name__})")
    if not isinstance(state, dict):
        fail("shape", "the state is not a JSON object")
    if state.get("version") != STATE_VERSION:
        fail("binding", f"saved with state version {state.get('version')!r}; this sensevm "
                        f"reads version {STATE_VERSION}")
    if state.get("name") != name:
        fail("binding", f"it holds agent {state.get('name')!r}, not '{name}'")
    if state.get("source_hash") != verified.program.source_hash.hex():
        fail("binding", "it was saved by another program than the program.snb beside it")
    if state.get("fingerprint") != FINGERPRINT.hex():
        fail("binding", "it was saved by a sensevm with another instruction set")
    return verified, state


def _failer(path: str):
    def fail(check: str, message: str):
        raise StateError(path, check, message)
    return fail


# ----------------------------------------------------------------------------- the shape

_ROLES = (None, "agent", "tool", "commit", "rollback")
_STATUSES = ("created", "paused", "completed", "failed")
_METHODS = ("verify", "approve", "commit", "rollback")
_SCOPE_TAGS = (None, "module", "builtins")


class _Shape:
    """Step 3: every object of the table has exactly its kind's fields, each of the right type,
    every index and reference in range. Raises StateError naming the first field that is not."""

    def __init__(self, program, objects, fail):
        self.program = program
        self.objects = objects
        self.fail = fail
        self.types = []
        self.rebound: list = []       # the bindings of every builtins marker met

    def where(self, at, message: str):
        self.fail("shape", f"{at}: {message}")

    def run(self, state: dict) -> None:
        top = {"version", "name", "agent", "objects", "audit_lines", "second_look",
               "source_hash", "fingerprint"}
        self.fields(state, top, "the state")
        objects = state["objects"]
        if type(objects) is not list:
            self.where("objects", "not a list")
        for i, raw in enumerate(objects):
            if type(raw) is not dict or type(raw.get("type")) is not str:
                self.where(f"objects[{i}]", "not an object with a type")
            self.types.append(raw["type"])
        self.ref(state["agent"], "agent", ("agent",))
        self.listed(state["audit_lines"], "audit_lines")
        for j, line in enumerate(state["audit_lines"]):
            if type(line) is not str and not (type(line) is dict
                                              and line.keys() == {"lstr", "spans"}):
                self.where(f"audit_lines[{j}]", "not a line of text")
            self.value(line, f"audit_lines[{j}]")
        look = state["second_look"]
        if look is not None:
            self.fields(look, {"evidence"}, "second_look")
            self.listed(look["evidence"], "second_look.evidence")
            for j, pair in enumerate(look["evidence"]):
                at = f"second_look.evidence[{j}]"
                if type(pair) is not list or len(pair) != 2 or type(pair[1]) is not str:
                    self.where(at, "not an [origin, text] pair")
                self.origin(pair[0], at)
        for i, raw in enumerate(objects):
            check = getattr(self, "o_" + raw["type"], None)
            if check is None:
                self.where(f"objects[{i}]", f"unknown type {raw['type']!r}")
            check(raw, f"objects[{i}] ({raw['type']})")

    # -- the parts

    def fields(self, raw, names: set, at: str) -> None:
        if type(raw) is not dict:
            self.where(at, "not an object")
        if raw.keys() != names:
            missing, extra = sorted(names - raw.keys()), sorted(raw.keys() - names)
            self.where(at, (f"missing {', '.join(missing)}" if missing else "")
                       + ("; " if missing and extra else "")
                       + (f"unexpected {', '.join(extra)}" if extra else ""))

    def listed(self, raw, at: str) -> None:
        if type(raw) is not list:
            self.where(at, "not a list")

    def strings(self, raw, at: str) -> None:
        self.listed(raw, at)
        if any(type(x) is not str for x in raw):
            self.where(at, "not a list of strings")

    def nat(self, raw, at: str, bound: int | None = None) -> None:
        if type(raw) is not int or raw < 0 or (bound is not None and raw >= bound):
            self.where(at, "not an index in range" if bound is not None
                       else "not a whole number >= 0")

    def opt_str(self, raw, at: str) -> None:
        if raw is not None and type(raw) is not str:
            self.where(at, "not a string or null")

    def pos(self, raw, at: str) -> None:
        if type(raw) is not list or len(raw) != 2 or any(type(x) is not int or x < 0
                                                         for x in raw):
            self.where(at, "not a [line, column] position")

    def origin(self, raw, at: str) -> None:
        if (type(raw) is not list or not 1 <= len(raw) <= 2
                or any(type(x) is not str for x in raw)
                or raw[0] not in ("user", "literal", "trusted", "untrusted", "model")):
            self.where(at, "not a provenance origin")

    def origins(self, raw, at: str) -> None:
        self.listed(raw, at)
        for o in raw:
            self.origin(o, at)

    def ref(self, raw, at: str, types) -> int:
        if type(raw) is not dict or raw.keys() != {"ref"}:
            self.where(at, f"not a reference to {' or '.join(types)}")
        index = raw["ref"]
        self.nat(index, at, len(self.types))
        if self.types[index] not in types:
            self.where(at, f"refers to a {self.types[index]}, not {' or '.join(types)}")
        return index

    def scope(self, raw, at: str) -> None:
        if type(raw) is dict and "builtins" in raw:
            self.fields(raw, {"builtins", "vars"}, at)
            if raw["builtins"] is not True:
                self.where(at, "a builtins marker that is not true")
            self.vars(raw["vars"], f"{at}.vars")
            self.rebound.append(raw["vars"])    # for the coherence step
            return
        self.ref(raw, at, ("scope",))

    def vars(self, raw, at: str) -> None:
        if type(raw) is not dict:
            self.where(at, "not an object of bindings")
        value = self.value
        for k, v in raw.items():
            if v is not None and type(v) is not str and type(v) is not bool:
                value(v, _At(at, k))

    def value(self, v, at: str, inline: bool = True) -> None:
        """A saved value: a plain JSON scalar, an inline form, or a reference."""
        if v is None or type(v) is bool or type(v) is str:
            return
        if type(v) is not dict or len(v) == 0:
            self.where(at, "not a saved value")
        keys = v.keys()
        if keys == {"ref"}:
            self.nat(v["ref"], at, len(self.types))
            if self.types[v["ref"]] not in _VALUE_TYPES:
                self.where(at, f"refers to a {self.types[v['ref']]}, which is not a value")
        elif keys == {"int"}:
            text = v["int"]
            if (type(text) is not str or not text or len(text) > 1 << 22
                    or text.lstrip("-").strip("0123456789abcdef") or text.lstrip("-") == ""):
                self.where(at, "not a hex Int")
        elif keys == {"float"}:
            try:
                float.fromhex(v["float"])
            except (TypeError, ValueError, OverflowError):
                self.where(at, "not a hex Float")
        elif keys == {"lstr", "spans"}:
            text, spans = v["lstr"], v["spans"]
            if type(text) is not str:
                self.where(at, "not a labelled String")
            self.listed(spans, at + ".spans")
            end = 0
            for span in spans:
                if (type(span) is not list or len(span) != 3 or type(span[0]) is not int
                        or type(span[1]) is not int or not end <= span[0] <= span[1] <= len(text)):
                    self.where(at + ".spans", "spans not in order within the text")
                self.origins(span[2], at + ".spans")
                end = span[1]
        elif keys == {"labelled", "origins"}:
            inner = v["labelled"]
            if not (type(inner) in (bool, str) or (type(inner) is dict
                                                   and inner.keys() in ({"int"}, {"float"}))):
                self.where(at, "a label on something that is not a Bool, Int or Float")
            self.value(inner, at)
            self.origins(v["origins"], at + ".origins")
        elif keys == {"builtin"}:
            from sensevm.runtime.builtins import builtin_names
            if v["builtin"] not in builtin_names():
                self.where(at, f"names no builtin: {v['builtin']!r}")
        elif "builtins" in keys:
            self.scope(v, at)
        else:
            self.where(at, f"not a saved value (fields {', '.join(sorted(keys))})")

    def values(self, raw, at: str) -> None:
        self.listed(raw, at)
        value = self.value
        for j, v in enumerate(raw):
            if v is not None and type(v) is not str and type(v) is not bool:
                value(v, _At(at, j))            # the place is spelled out only if it is refused

    # -- one method per kind of object: o_TYPE(raw, at)

    def shape(self, raw, at: str, size: int) -> None:
        """A container's shape (provenance.Shape): what its length and its elements' places
        depend on; the breakpoints at increasing indexes within the container."""
        self.fields(raw, {"length", "starts", "ends"}, at)
        self.origins(raw["length"], at + ".length")
        for side in ("starts", "ends"):
            self.listed(raw[side], f"{at}.{side}")
            last = -1
            for j, point in enumerate(raw[side]):
                where = f"{at}.{side}[{j}]"
                if (type(point) is not list or len(point) != 2 or type(point[0]) is not int
                        or not last < point[0] < max(size, 1)):
                    self.where(where, "not a breakpoint (an index in order, then origins)")
                self.origins(point[1], where)
                last = point[0]

    def o_array(self, raw, at):
        self.fields(raw, {"type", "items"} | ({"shape"} & raw.keys()), at)
        self.values(raw["items"], at + ".items")
        if "shape" in raw:
            self.shape(raw["shape"], at + ".shape", len(raw["items"]))

    def o_map(self, raw, at):
        self.fields(raw, {"type", "items"} | ({"shape"} & raw.keys()), at)
        if "shape" in raw:
            self.listed(raw["items"], at + ".items")
            self.shape(raw["shape"], at + ".shape", len(raw["items"]))
        self.listed(raw["items"], at + ".items")
        seen = set()
        for j, pair in enumerate(raw["items"]):
            where = f"{at}.items[{j}]"
            if type(pair) is not list or len(pair) != 2:
                self.where(where, "not a [key, value] pair")
            key = _map_key(pair[0])
            if key is None:
                self.where(where, "a map key that is not a String or an Int")
            if key in seen:
                self.where(where, "a map key given twice")
            seen.add(key)
            self.value(pair[0], where)
            self.value(pair[1], where)

    def o_method(self, raw, at):
        self.fields(raw, {"type", "name", "receiver"}, at)
        name = raw["name"]
        kind, _, method = name.partition(".") if type(name) is str else (None, "", None)
        if kind not in M.TABLES or method not in M.TABLES[kind]:
            self.where(at + ".name", f"names no method of a String, Array or Map: {name!r}")
        receiver = raw["receiver"]
        if kind == "String":
            if not (type(receiver) is str or (type(receiver) is dict
                                              and receiver.keys() == {"lstr", "spans"})):
                self.where(at + ".receiver", "a String's method bound to no String")
            self.value(receiver, at + ".receiver")
        else:
            self.ref(receiver, at + ".receiver", ("array",) if kind == "Array" else ("map",))

    def o_callback(self, raw, at):
        self.fields(raw, {"type", "kind", "fn", "items", "i", "out"} | ({"decided"} & raw.keys()),
                    at)
        if "decided" in raw:
            self.origins(raw["decided"], at + ".decided")
        if raw["kind"] not in M.KINDS:
            self.where(at + ".kind", f"not a method that calls back: {raw['kind']!r}")
        self.value(raw["fn"], at + ".fn")
        self.ref(raw["items"], at + ".items", ("array",))
        self.nat(raw["i"], at + ".i")
        if raw["kind"] == "reduce":
            self.value(raw["out"], at + ".out")
        else:
            self.ref(raw["out"], at + ".out", ("array",))

    def o_scope(self, raw, at):
        self.fields(raw, {"type", "vars", "parent", "policy", "tag"}, at)
        self.vars(raw["vars"], at + ".vars")
        if raw["parent"] is not None:
            self.scope(raw["parent"], at + ".parent")
        policy = raw["policy"]
        if policy is not None and (type(policy) is not dict or any(
                rule not in ("allow", "deny") for rule in policy.values())):
            self.where(at + ".policy", "not a table of allow/deny rules")
        tag = raw["tag"]
        if type(tag) is dict:
            self.ref(tag, at + ".tag", ("agent",))
        elif tag not in _SCOPE_TAGS:
            self.where(at + ".tag", "not a scope tag")

    def o_closure(self, raw, at):
        self.fields(raw, {"type", "code", "scope"}, at)
        self.nat(raw["code"], at + ".code", len(self.program.codes))
        self.scope(raw["scope"], at + ".scope")

    def o_module(self, raw, at):
        self.fields(raw, {"type", "name", "path", "scope"}, at)
        if type(raw["name"]) is not str or type(raw["path"]) is not str:
            self.where(at, "a module without a name and path")
        self.scope(raw["scope"], at + ".scope")

    def o_action_def(self, raw, at):
        self.fields(raw, {"type", "index", "scope"}, at)
        self.nat(raw["index"], at + ".index", len(self.program.actions))
        self.scope(raw["scope"], at + ".scope")

    def o_action(self, raw, at):
        self.fields(raw, {"type", "def", "args", "state", "approved", "flag", "cleared",
                          "reason", "body_scope"}, at)
        self.ref(raw["def"], at + ".def", ("action_def",))
        self.values(raw["args"], at + ".args")
        if raw["state"] not in L.STATES:
            self.where(at + ".state", f"not a lifecycle state: {raw['state']!r}")
        if type(raw["approved"]) is not bool:
            self.where(at + ".approved", "not a Bool")
        for name in ("flag", "cleared", "reason"):
            self.opt_str(raw[name], f"{at}.{name}")
        if raw["body_scope"] is not None:
            self.scope(raw["body_scope"], at + ".body_scope")

    def o_bound(self, raw, at):
        self.fields(raw, {"type", "action", "method", "scope", "pos"}, at)
        self.ref(raw["action"], at + ".action", ("action",))
        if raw["method"] not in _METHODS:
            self.where(at + ".method", "not a lifecycle method")
        self.scope(raw["scope"], at + ".scope")
        self.pos(raw["pos"], at + ".pos")

    def o_tool_def(self, raw, at):
        self.fields(raw, {"type", "index", "scope"}, at)
        self.nat(raw["index"], at + ".index", len(self.program.tools))
        self.scope(raw["scope"], at + ".scope")

    def o_agent(self, raw, at):
        self.fields(raw, {"type", "index", "scope", "status", "pause_reason", "mailbox",
                          "frames"}, at)
        self.nat(raw["index"], at + ".index", len(self.program.agents))
        self.scope(raw["scope"], at + ".scope")
        if raw["status"] not in _STATUSES:
            self.where(at + ".status", f"not a saved agent's status: {raw['status']!r}")
        self.value(raw["pause_reason"], at + ".pause_reason")
        self.values(raw["mailbox"], at + ".mailbox")
        frames = raw["frames"]
        if (frames is None) != (raw["status"] != "paused"):
            self.where(at + ".frames", "frames where the agent is not paused, or none where "
                                       "it is")
        if frames is not None:
            self.listed(frames, at + ".frames")
            if not frames:
                self.where(at + ".frames", "a paused agent with no frames")
            for j, frame in enumerate(frames):
                self.frame(frame, f"{at}.frames[{j}]")

    def branch_labels(self, raw, at):
        if raw is not None:
            self.listed(raw, at)
            for j, label in enumerate(raw):
                if (type(label) is not list or len(label) != 3 or type(label[0]) is not int
                        or type(label[2]) is not int):
                    self.where(f"{at}[{j}]", "not a branch label")
                self.origins(label[1], f"{at}[{j}]")

    def frame(self, raw, at):
        if type(raw) is dict and "callback" in raw:
            self.fields(raw, {"callback", "pc"}, at)
            self.ref(raw["callback"], at + ".callback", ("callback",))
            self.branch_labels(raw["pc"], at + ".pc")
            return
        self.fields(raw, {"code", "ip", "stack", "scope", "tests", "closure", "module", "role",
                          "tags", "audit_line", "pc", "owner"}, at)
        self.nat(raw["code"], at + ".code", len(self.program.codes))
        self.nat(raw["ip"], at + ".ip")
        self.values(raw["stack"], at + ".stack")
        self.scope(raw["scope"], at + ".scope")
        self.listed(raw["tests"], at + ".tests")
        for j, t in enumerate(raw["tests"]):
            if (type(t) is not list or len(t) != 5 or type(t[0]) not in (str, type(None))
                    or type(t[1]) is not int or type(t[2]) is not int):
                self.where(f"{at}.tests[{j}]", "not a test or try handler")
            self.scope(t[3], f"{at}.tests[{j}].scope")
            if t[0] is None:
                self.nat(t[4], f"{at}.tests[{j}].begin")
            else:
                self.pos(t[4], f"{at}.tests[{j}].pos")
        if raw["closure"] is not None:
            self.ref(raw["closure"], at + ".closure", ("closure",))
        if raw["module"] is not None:
            self.ref(raw["module"], at + ".module", ("module",))
        if raw["role"] not in _ROLES:
            self.where(at + ".role", f"not a frame role: {raw['role']!r}")
        self.strings(raw["tags"], at + ".tags")
        if raw["audit_line"] is not None:
            self.nat(raw["audit_line"], at + ".audit_line")
        self.branch_labels(raw["pc"], at + ".pc")
        owner = raw["owner"]
        if owner is not None:
            self.ref(owner, at + ".owner", ("agent", "tool_def", "action"))

    def o_error(self, raw, at):
        from sensevm.base.errors import CATCHABLE
        self.fields(raw, {"type", "class", "message", "pos", "path", "located", "origins"}, at)
        if raw["class"] not in CATCHABLE:
            self.where(at + ".class", f"not an error class a program can catch: "
                                      f"{raw['class']!r}")
        message = raw["message"]
        if not (type(message) is str or (type(message) is dict
                                         and message.keys() == {"lstr", "spans"})):
            self.where(at + ".message", "not a String")
        self.value(message, at + ".message")
        if raw["pos"] is not None:
            self.pos(raw["pos"], at + ".pos")
        self.opt_str(raw["path"], at + ".path")
        if type(raw["located"]) is not bool:
            self.where(at + ".located", "not a Bool")
        self.origins(raw["origins"], at + ".origins")

    def o_iter(self, raw, at):
        self.fields(raw, {"type", "items", "i"} | ({"origins"} & raw.keys()), at)
        self.ref(raw["items"], at + ".items", ("array",))
        self.nat(raw["i"], at + ".i")
        if "origins" in raw:
            self.origins(raw["origins"], at + ".origins")

    def o_str_iter(self, raw, at):
        self.fields(raw, {"type", "text", "i"}, at)
        text = raw["text"]
        if not (type(text) is str or (type(text) is dict and text.keys() == {"lstr", "spans"})):
            self.where(at + ".text", "not a String")
        self.value(text, at + ".text")
        length = len(text if type(text) is str else text["lstr"])
        if type(raw["i"]) is not int or not 0 <= raw["i"] <= length:
            self.where(at + ".i", "not a position in its String")

    def o_future(self, raw, at):
        self.fields(raw, {"type", "tool", "value", "pos", "path"}, at)
        self.ref(raw["tool"], at + ".tool", ("tool_def",))
        self.value(raw["value"], at + ".value")
        self.pos(raw["pos"], at + ".pos")
        self.opt_str(raw["path"], at + ".path")

    def o_python(self, raw, at):
        self.fields(raw, {"type", "module", "attrs", "function"}, at)
        if type(raw["module"]) is not str or type(raw["function"]) is not bool:
            self.where(at, "not a Python module or function")
        self.strings(raw["attrs"], at + ".attrs")

    def o_model(self, raw, at):
        self.fields(raw, {"type", "name", "provider"}, at)
        if type(raw["name"]) is not str or type(raw["provider"]) is not dict:
            self.where(at, "not a model")

    def o_bound_ask(self, raw, at):
        self.fields(raw, {"type", "model", "name", "pos"}, at)
        self.ref(raw["model"], at + ".model", ("model",))
        if type(raw["name"]) is not str:
            self.where(at + ".name", "not a string")
        if raw["pos"] is not None:
            self.pos(raw["pos"], at + ".pos")

    def o_answer(self, raw, at):
        self.fields(raw, {"type", "value", "confidence", "source"}, at)
        self.value(raw["value"], at + ".value")
        if raw["confidence"] is not None and type(raw["confidence"]) not in (int, float):
            self.where(at + ".confidence", "not a number or null")
        self.opt_str(raw["source"], at + ".source")

    def o_skill(self, raw, at):
        self.fields(raw, {"type", "name", "description", "tools"}, at)
        if type(raw["name"]) is not str:
            self.where(at + ".name", "not a string")
        self.opt_str(raw["description"], at + ".description")
        self.ref(raw["tools"], at + ".tools", ("array",))

    def o_memory(self, raw, at):
        self.fields(raw, {"type", "name", "kind", "store"}, at)
        if type(raw["name"]) is not str:
            self.where(at + ".name", "not a string")
        self.opt_str(raw["kind"], at + ".kind")
        self.listed(raw["store"], at + ".store")
        for j, pair in enumerate(raw["store"]):
            if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not str:
                self.where(f"{at}.store[{j}]", "not a [key, value] pair")
            self.value(pair[1], f"{at}.store[{j}]")

    def o_pmemory(self, raw, at):
        self.fields(raw, {"type", "name", "path", "location"}, at)
        if any(type(raw[k]) is not str for k in ("name", "path", "location")):
            self.where(at, "not a persistent memory")

    def o_memory_method(self, raw, at):
        self.fields(raw, {"type", "memory", "method", "pos", "path"}, at)
        self.ref(raw["memory"], at + ".memory", ("memory", "pmemory"))
        if type(raw["method"]) is not str:
            self.where(at + ".method", "not a string")
        self.pos(raw["pos"], at + ".pos")
        self.opt_str(raw["path"], at + ".path")


class _At:
    """A place in the state, ``base[key]``, spelled out only when an error names it."""

    __slots__ = ("base", "key")

    def __init__(self, base, key):
        self.base = base
        self.key = key

    def __str__(self) -> str:
        return f"{self.base}[{self.key}]" if type(self.key) is int else f"{self.base}.{self.key}"

    def __add__(self, more: str) -> str:
        return str(self) + more

    __format__ = lambda self, spec: format(str(self), spec)


def _map_key(raw):
    """A saved map key as (kind, plain value), or None if it is no String or Int."""
    if type(raw) is str:
        return ("s", raw)
    if type(raw) is dict:
        if raw.keys() == {"lstr", "spans"} and type(raw["lstr"]) is str:
            return ("s", raw["lstr"])
        if raw.keys() == {"labelled", "origins"}:
            raw = raw["labelled"]
        if type(raw) is dict and raw.keys() == {"int"} and type(raw["int"]) is str:
            try:
                return ("i", int(raw["int"], 16))
            except ValueError:
                return None
    return None


# The object kinds a value may refer to (a frame's owner, say, is not written inline).
_VALUE_TYPES = frozenset({"array", "map", "method", "scope", "closure", "module", "action_def", "action", "bound",
                          "tool_def", "agent", "iter", "str_iter", "future", "python", "model", "bound_ask",
                          "answer", "skill", "memory", "pmemory", "memory_method", "error"})


# ----------------------------------------------------------------------------- coherence

class _Check:
    """Step 4: what the state says must be something this program's bytecode could have made,
    and each frame must stand where the verifier's proof of its code holds. StateError names
    the first thing that is not."""

    def __init__(self, vm, state, fail):
        from sensevm.bytecode.opcodes import Op
        self.vm = vm
        self.program = vm.program
        self.objects = state["objects"]
        self.fail = fail
        self.states: dict[int, list] = {}
        rules, stored, imported = set(), set(), set()
        strings = self.program.strings
        for code in vm.verified.codes:
            for ins in code.instructions:
                op = ins.op
                if op is Op.POLICY_ALLOW:
                    rules.add((strings[ins.args[0]], "allow"))
                elif op is Op.POLICY_DENY:
                    rules.add((strings[ins.args[0]], "deny"))
                elif op is Op.STORE_NAME:
                    stored.add(strings[ins.args[0]])
                elif op is Op.IMPORT_PYTHON:
                    imported.add(strings[ins.args[0]])
        self.rules, self.stored, self.imported = rules, stored, imported

    def where(self, at: str, message: str):
        self.fail("coherence", f"{at}: {message}")

    def obj(self, ref: dict) -> dict:
        return self.objects[ref["ref"]]

    def run(self, state: dict, rebound: list) -> None:
        self.scopes_acyclic()
        for i, raw in enumerate(self.objects):
            at = f"objects[{i}] ({raw['type']})"
            if raw["type"] == "scope":
                self.scope_rules(raw, at)
            elif raw["type"] == "agent":
                if raw["frames"] is not None:
                    self.frames(i, raw, at)
            elif raw["type"] == "closure":
                if self.program.codes[raw["code"]].kind != _kinds().FUNCTION:
                    self.where(at, "a closure over code that is not a function")
        self.builtins_rebound(rebound)
        pythons = [i for i, raw in enumerate(self.objects) if raw["type"] == "python"]
        if pythons:
            self.python_allowed(state, pythons)

    # -- scopes, rules, builtins

    def scopes_acyclic(self) -> None:
        done = set()
        for start, raw in enumerate(self.objects):
            if raw["type"] != "scope" or start in done:
                continue
            path, i = set(), start
            while i is not None and i not in done:
                if i in path:
                    self.where(f"objects[{start}] (scope)", "its parent chain is a cycle")
                path.add(i)
                parent = self.objects[i]["parent"]
                i = parent["ref"] if type(parent) is dict and "ref" in parent else None
            done |= path

    def scope_rules(self, raw, at: str) -> None:
        for cap, rule in (raw["policy"] or {}).items():
            if (cap, rule) not in self.rules:
                self.where(at + ".policy", f"'{rule} {cap}' is a rule the program never makes")

    def builtins_rebound(self, rebound: list) -> None:
        """Every builtins marker (the shape step collected them): rebinds only names the program
        itself assigns, never to a Python value (the builtins are the VM's, not the state's)."""
        for bindings in rebound:
            for name, value in bindings.items():
                if name not in self.stored:
                    self.where("builtins", f"rebinds '{name}', which the program never assigns")
                if (type(value) is dict and "ref" in value
                        and self.objects[value["ref"]]["type"] == "python"):
                    self.where("builtins", f"rebinds '{name}' to a Python value")

    def python_allowed(self, state, pythons) -> None:
        for i in pythons:
            module = self.objects[i]["module"]
            if module not in self.imported:
                self.where(f"objects[{i}] (python)", f"names Python module {module!r}, which the "
                                                     "program does not import")
        allowed = any(raw["type"] == "scope" and (raw["policy"] or {}).get("python.import")
                      == "allow" for raw in self.objects)
        if not allowed:
            self.where("python", "it holds Python values, but no scope of it allows "
                                 "python.import")
        root = self.obj(state["agent"])
        for j, frame in enumerate(root["frames"] or ()):
            if "callback" in frame:
                continue                # (its scope is its caller's)
            if self.decision(frame["scope"], "python.import") == "deny":
                self.where(f"frames[{j}]", "it holds Python values, but python.import is denied "
                                           "where it resumes")

    def decision(self, scope, capability: str):
        """lexical_decision over the saved scopes (acyclic by now)."""
        while type(scope) is dict and "ref" in scope:
            raw = self.obj(scope)
            rule = (raw["policy"] or {}).get(capability)
            if rule is not None:
                return rule
            scope = raw["parent"]
        return None

    # -- frames

    def frames(self, index: int, agent: dict, at: str) -> None:
        frames = agent["frames"]
        base = frames[-1]
        if "callback" in base or base["role"] != "agent" or base["owner"] != {"ref": index}:
            self.where(at, "its outermost frame is not its own body")
        for j, frame in enumerate(frames):
            if "callback" in frame:
                self.callback(frame, f"{at}.frames[{j}]")
            else:
                self.frame(frame, f"{at}.frames[{j}]", agent, index)
        for frame in frames[:-1]:
            if frame.get("role") == "agent":
                self.where(at, "an agent body's frame inside the chain")

    def callback(self, f: dict, at: str) -> None:
        """A callback frame stands where a call it made is out: past its first item, with
        as many results (map, sorted's keys) or at most as many kept items (filter)."""
        raw = self.obj(f["callback"])
        items = self.obj(raw["items"])["items"]
        i = raw["i"]
        if not 1 <= i <= len(items):
            self.where(at + ".i", f"{i} is not the position of a call out over "
                                  f"{len(items)} items")
        if raw["kind"] != "reduce":
            done = len(self.obj(raw["out"])["items"])
            if done > i - 1 or (raw["kind"] != "filter" and done != i - 1):
                self.where(at + ".out", f"{done} results for {i - 1} calls made")
        for j, (join, _origins_, depth_) in enumerate(f["pc"] or ()):
            if join != -1 or depth_ != 0:
                self.where(f"{at}.pc[{j}]", "a branch label outside its frame")

    def frame(self, f: dict, at: str, agent: dict, agent_index: int) -> None:
        program = self.program
        kinds = _kinds()
        code = program.codes[f["code"]]
        role, owner = f["role"], f["owner"]
        owner_raw = self.obj(owner) if owner is not None else None
        base_scope, base_parent = None, None     # what the frame's own scope must be
        if role == "agent":
            decl = program.agents[agent["index"]]
            if f["code"] != decl.body:
                self.where(at, "an agent frame not running its agent's body")
            tags = [f"agent:{decl.name}"]
            base_scope = agent["scope"]
        elif role == "tool":
            if owner_raw is None or owner_raw["type"] != "tool_def":
                self.where(at, "a tool frame not owned by a tool")
            decl = program.tools[owner_raw["index"]]
            if decl.is_async or f["code"] != decl.body:
                self.where(at, "a tool frame not running its (sync) tool's body")
            tags = [f"tool:{decl.name}"]
            base_parent = owner_raw["scope"]
        elif role in ("commit", "rollback"):
            if owner_raw is None or owner_raw["type"] != "action":
                self.where(at, f"a {role} frame not owned by an action")
            decl = program.actions[self.obj(owner_raw["def"])["index"]]
            wanted = decl.body if role == "commit" else decl.rollback
            state = L.COMMITTING if role == "commit" else L.ROLLING_BACK
            if f["code"] != wanted:
                self.where(at, f"a {role} frame not running its action's "
                               f"{'body' if role == 'commit' else 'rollback block'}")
            if owner_raw["state"] != state:
                self.where(at, f"an action's {'body' if role == 'commit' else 'rollback block'} "
                               f"runs although the action is '{owner_raw['state']}', not "
                               f"'{state}'")
            kind = "reversible" if decl.reversible else (
                "irreversible immediate" if decl.immediate else "irreversible")
            tags = [f"{kind}:{decl.name}"] + ([f"rollback:{decl.name}"] if role == "rollback"
                                              else [])
            if role == "commit":
                base_scope = owner_raw["body_scope"]
                if base_scope is None:
                    self.where(at, "a commit frame of an action with no body scope")
            else:
                base_parent = owner_raw["body_scope"]
        else:
            if owner is not None:
                self.where(at, "a plain frame with an owner")
            tags = []
            if f["closure"] is not None:
                closure = self.obj(f["closure"])
                if code.kind != kinds.FUNCTION or closure["code"] != f["code"]:
                    self.where(at, "a function frame not running its closure's code")
                if f["module"] is not None:
                    self.where(at, "a function frame with a module")
                base_parent = closure["scope"]
            elif f["module"] is not None and code.kind == kinds.MODULE and any(
                    m.code == f["code"] for m in program.modules):
                base_scope = self.obj(f["module"])["scope"]
            else:
                self.where(at, "a frame that is neither a call, a module, a tool, an action's "
                               "body nor an agent's")
        if role is not None and (f["closure"] is not None or f["module"] is not None):
            self.where(at, f"a {role} frame with a closure or module")
        if f["tags"] != tags:
            self.where(at + ".tags", "not the lineage its role gives")
        self.position(f, at, base_scope, base_parent)

    def position(self, f: dict, at: str, base_scope, base_parent) -> None:
        from sensevm.bytecode.opcodes import F, Op
        verified = self.vm.verified.codes[f["code"]]
        instructions = verified.instructions
        ip = f["ip"]
        if not 0 < ip < len(instructions):
            self.where(at + ".ip", f"{ip} is not inside its code")
        before = instructions[ip - 1].op
        if not (int(before.flags) & F.CALLS._value_ or before in (Op.ACTION_VERIFY,
                                                                   Op.ACTION_APPROVE)):
            self.where(at + ".ip", f"{ip} does not follow a call ({before.name})")
        states = self.states.get(f["code"])
        if states is None:
            from sensevm.bytecode.verify import entry_states
            states = self.states[f["code"]] = entry_states(verified)
        proven = states[ip]
        if proven is None:
            self.where(at + ".ip", f"{ip} is not reachable")
        depth, scopes, tests, iters, mods = proven
        stack = f["stack"]
        # The call's result is pushed when the frame continues (pause()'s answer, a callee's
        # return value): the saved stack is one slot short of what the verifier proved.
        if len(stack) != depth - 1:
            self.where(at + ".stack", f"{len(stack)} values where the verifier proved "
                                      f"{depth - 1}")
        for k, v in enumerate(stack):
            kind = self.objects[v["ref"]]["type"] if type(v) is dict and "ref" in v else None
            if (kind in _ITERATORS) != bool(iters >> k & 1):
                self.where(f"{at}.stack[{k}]", "an iterator where none is, or none where one is")
            if mods >> k & 1 and kind not in ("module", "python"):
                self.where(f"{at}.stack[{k}]", "not a module where IMPORT_FROM will read one")
        if len(f["tests"]) != len(tests):
            self.where(at + ".tests", f"{len(f['tests'])} running handlers where the "
                                      f"verifier proved {len(tests)}")
        n = len(instructions)
        chain = self.chain(f["scope"], scopes + 1)
        if len(chain) <= scopes:
            self.where(at + ".scope", f"fewer scopes than the {scopes} open blocks")
        own = chain[scopes]
        if base_scope is not None and own != base_scope:
            self.where(at + ".scope", "its scopes do not lead to the scope its role runs in")
        if base_parent is not None and self.obj(own)["parent"] != base_parent:
            self.where(at + ".scope", "its scopes do not lead to the scope its role runs in")
        # Each running handler is the one the verifier proved here: its kind, target, stack
        # depth and scope (the scope open at that depth), and a try handler's TRY_BEGIN.
        from sensevm.bytecode.verify import TRY_HANDLER
        for j, (saved, proven) in enumerate(zip(f["tests"], tests)):
            name, target, depth_, scope, extra = saved
            kind, p_target, p_depth, p_scope = proven
            if ((name is None) != (kind == TRY_HANDLER) or target != p_target
                    or depth_ != p_depth or scope != chain[scopes - p_scope]):
                self.where(f"{at}.tests[{j}]", "not the handler the verifier proved there")
            if name is None:
                begin = instructions[extra] if 0 <= extra < n else None
                if (begin is None or begin.op is not Op.TRY_BEGIN
                        or verified.index_of.get(begin.args[0]) != target):
                    self.where(f"{at}.tests[{j}].begin", "not the TRY_BEGIN of its handler")
        for j, (join, _origins_, depth_) in enumerate(f["pc"] or ()):
            if not (join == -1 or 0 <= join < n) or not 0 <= depth_ <= len(stack):
                self.where(f"{at}.pc[{j}]", "a branch label outside its frame")

    def chain(self, scope, n: int) -> list:
        """The first ``n`` scopes of ``scope``'s parent chain (as references; never the
        builtins)."""
        out = []
        while len(out) < n and type(scope) is dict and "ref" in scope:
            out.append(scope)
            scope = self.obj(scope)["parent"]
        return out


_ITERATORS = ("iter", "str_iter")


def _kinds():
    from sensevm.bytecode.program import CodeKind
    return CodeKind


# ----------------------------------------------------------------------------- loading

class _Loader:
    """Step 5, once the state has passed every check: every object made empty first, then
    filled, so no reference is followed by recursion."""

    def __init__(self, vm, objects: list):
        self.vm = vm
        self.raw = objects
        self.made: list = [None] * len(objects)

    def rule_places(self) -> dict:
        """(capability, rule) -> (file, line) of the one POLICY_ALLOW/POLICY_DENY of the program
        that makes it; a rule made in several places has no entry."""
        places = getattr(self, "_places", None)
        if places is None:
            from sensevm.bytecode.opcodes import Op
            program = self.vm.program
            strings = program.strings
            places, seen = {}, set()
            for vcode in self.vm.verified.codes:
                code = vcode.code
                for ins in vcode.instructions:
                    if ins.op is Op.POLICY_ALLOW or ins.op is Op.POLICY_DENY:
                        key = (strings[ins.args[0]],
                               P.ALLOW if ins.op is Op.POLICY_ALLOW else P.DENY)
                        if key in seen:
                            places.pop(key, None)
                            continue
                        seen.add(key)
                        path = (program.sources[code.source].path if program.sources
                                else "<input>")
                        places[key] = (path, code.position_at(ins.offset).line)
            self._places = places
        return places

    def value(self, v):
        if v is None or type(v) is bool or type(v) is str:
            return v
        if "ref" in v:
            return self.made[v["ref"]]
        if "int" in v:
            return int(v["int"], 16)
        if "float" in v:
            return float.fromhex(v["float"])
        if "lstr" in v:
            return PV.make_str(v["lstr"], [(a, b, _unorigins(o)) for a, b, o in v["spans"]])
        if "labelled" in v:
            return PV.label(self.value(v["labelled"]), _unorigins(v["origins"]))
        if "builtin" in v:
            return self.vm.builtins.vars.get(v["builtin"]) or _builtin(self.vm, v["builtin"])
        for k, x in v["vars"].items():         # the builtins, with what the program rebound
            self.vm.builtins.vars[k] = self.value(x)
        return self.vm.builtins

    def run(self, root):
        for index, raw in enumerate(self.raw):
            self.made[index] = self.shell(raw)
        for index, raw in enumerate(self.raw):
            self.fill(self.made[index], raw)
        return self.value(root)

    def shell(self, raw):
        kind = raw["type"]
        unit, program = self.vm.prepared, self.vm.program
        if kind == "array":
            return []
        if kind == "map":
            return {}
        if kind == "method":
            type_, _, name = raw["name"].partition(".")
            return M.make_bound(type_, name, None)      # bound in fill
        if kind == "callback":
            return M.Callback(raw["kind"], None, [], None)
        if kind == "scope":
            return Scope(None)
        if kind == "closure":
            code = unit[raw["code"]]
            return Closure(code, None, code.code.name)
        if kind == "module":
            return ModuleValue(raw["name"], raw["path"], None)
        if kind == "action_def":
            decl = program.actions[raw["index"]]
            return ActionDefinition(decl, unit[decl.body],
                                    unit[decl.rollback] if decl.rollback >= 0 else None, None)
        if kind == "action":
            return PreparedAction(None, [])
        if kind == "bound":
            return BoundLifecycleMethod(None, raw["method"], None, Pos(*raw["pos"]))
        if kind == "tool_def":
            decl = program.tools[raw["index"]]
            return ToolDefinition(decl, unit[decl.body], None)
        if kind == "agent":
            decl = program.agents[raw["index"]]
            return AgentValue(decl, unit[decl.body], None)
        if kind == "iter":
            return ArrayIterator([])
        if kind == "str_iter":          # its text is inline: no reference to wait for
            it = StringIterator(self.value(raw["text"]))
            it.i = raw["i"]
            return it
        if kind == "future":
            f = Future(None, Pos(*raw["pos"]), raw["path"])
            f.finished = True
            return f
        if kind == "python":
            from sensevm.world.interop import restore
            return restore(raw, self.vm.look)
        if kind == "error":             # its message is inline: no reference to wait for
            from sensevm.base.errors import CATCHABLE
            err = CATCHABLE[raw["class"]](self.value(raw["message"]),
                                          Pos(*raw["pos"]) if raw["pos"] else None,
                                          located=raw["located"], path=raw["path"])
            err.origins = _unorigins(raw["origins"])
            return ErrorValue(err)
        if kind in ("model", "bound_ask", "answer", "skill"):
            return self.model_shell(kind, raw)
        return self.memory_shell(kind, raw)

    def model_shell(self, kind: str, raw: dict):
        from sensevm.world.models import Answer, BoundAsk, Model, Skill
        from sensevm.world.providers import ProviderError, restore
        if kind == "model":
            try:
                provider = restore(raw["provider"])
            except ProviderError as err:
                raise SenseRuntimeError(f"cannot restore model '{raw['name']}': {err}",
                                        located=False) from None
            except (KeyError, TypeError, ValueError) as err:
                raise SenseRuntimeError(f"cannot restore model '{raw['name']}': its saved "
                                        f"provider is malformed ({err!r})",
                                        located=False) from None
            return Model(raw["name"], provider)
        if kind == "bound_ask":
            return BoundAsk(None, raw["name"], Pos(*raw["pos"]) if raw["pos"] else None)
        if kind == "answer":
            return Answer(None, raw["confidence"], raw["source"])
        return Skill(raw["name"], raw["description"], [])

    def memory_shell(self, kind: str, raw: dict):
        from sensevm.world.memory import MemoryMethod, PersistentMemory, SessionMemory
        if kind == "memory":
            return SessionMemory(raw["name"], raw["kind"])
        if kind == "pmemory":
            # Opened at its first use after the resume, where a problem with the file is
            # reported with the position of that use.
            return PersistentMemory(raw["name"], raw["path"], raw["location"])
        return MemoryMethod(None, raw["method"], Pos(*raw["pos"]), raw["path"])

    def fill(self, made, raw) -> None:
        kind = raw["type"]
        value = self.value
        if kind == "array":
            made.extend(value(x) for x in raw["items"])
            if "shape" in raw:
                _unshaped(made, raw["shape"])
        elif kind == "map":
            for k, x in raw["items"]:
                made[value(k)] = value(x)
            if "shape" in raw:
                _unshaped(made, raw["shape"])
        elif kind == "method":
            type_, _, name = raw["name"].partition(".")
            receiver = value(raw["receiver"])
            made.fn = M.make_bound(type_, name, receiver).fn
            made.receiver = receiver
        elif kind == "callback":
            made.fn = value(raw["fn"])
            made.items = value(raw["items"])
            made.i = raw["i"]
            made.out = value(raw["out"])
            made.decided = _unorigins(raw.get("decided", ()))
        elif kind == "scope":
            made.parent = value(raw["parent"]) if raw["parent"] is not None else None
            if raw["policy"]:
                table = P.Rules(raw["policy"])
                self.vm.denials.note(table)          # before the table can decide anything
                made.policy = table
                # Where each rule was declared is not saved (the format predates it): the
                # program says, when it makes that rule in one place only.
                places = self.rule_places()
                for cap, rule in table.items():
                    at = places.get((cap, rule))
                    if at is not None:
                        table.at[cap] = at
            tag = raw["tag"]
            made.tag = value(tag) if type(tag) is dict else tag
            for k, x in raw["vars"].items():
                made.vars[k] = value(x)
        elif kind in ("closure", "module", "action_def", "tool_def"):
            made.scope = value(raw["scope"])
        elif kind == "action":
            made.definition = value(raw["def"])
            made.args = [value(x) for x in raw["args"]]
            made.state = raw["state"]
            made.approved = raw["approved"]
            made.flag, made.cleared, made.reason = raw["flag"], raw["cleared"], raw["reason"]
            made.body_scope = value(raw["body_scope"]) if raw["body_scope"] else None
        elif kind == "bound":
            made.action = value(raw["action"])
            made.scope = value(raw["scope"])
        elif kind == "agent":
            made.scope = value(raw["scope"])
            made.status = raw["status"]
            made.pause_reason = value(raw["pause_reason"])
            made.mailbox = [value(m) for m in raw["mailbox"]]
            if raw["frames"] is not None:
                self.frames(made, raw["frames"])
        elif kind == "iter":
            made.items = value(raw["items"])
            made.i = raw["i"]
            made.origins = _unorigins(raw.get("origins", ()))
        elif kind == "future":
            made.tool = value(raw["tool"])
            made.value = value(raw["value"])
        elif kind == "bound_ask":
            made.model = value(raw["model"])
        elif kind == "answer":
            made.value = value(raw["value"])
        elif kind == "skill":
            made.tools = value(raw["tools"])
        elif kind == "memory":
            for key, x in raw["store"]:
                made.store[key] = value(x)
        elif kind == "memory_method":
            made.memory = value(raw["memory"])

    def frames(self, agent: AgentValue, raws: list) -> None:
        from sensevm.runtime.vm import Frame, TestHandler, TryHandler
        frames = []
        for raw in raws:                           # innermost first
            if "callback" in raw:
                driver = self.value(raw["callback"])
                f = Frame(M.callback_prepared(driver.kind, Pos(0, 0), None), None, None)
                f.stack = [driver]
                if raw["pc"] is not None:
                    f.pc = [(j, _unorigins(o), d) for j, o, d in raw["pc"]]
                frames.append((f, raw))
                continue
            f = Frame(self.vm.prepared[raw["code"]], None, None)
            f.ip = raw["ip"]
            f.role = raw["role"]
            f.tags = tuple(raw["tags"])
            f.audit_line = raw["audit_line"]
            if raw["pc"] is not None:
                f.pc = [(j, _unorigins(o), d) for j, o, d in raw["pc"]]
            frames.append((f, raw))
        for i, (f, raw) in reversed(list(enumerate(frames))):     # callers first
            f.caller = frames[i + 1][0] if i + 1 < len(frames) else None
            if "callback" in raw:
                # At its caller's call, in its caller's scope, as start_callback made it.
                caller = f.caller
                f.prepared = M.callback_prepared(f.stack[0].kind, caller.pos,
                                                 caller.prepared.path)
                f.instrs = f.prepared.instrs
                f.scope = caller.scope
                continue
            f.stack = [self.value(v) for v in raw["stack"]]
            f.scope = self.value(raw["scope"])
            f.tests = [TestHandler(n, t, d, self.value(s), Pos(*p)) if n is not None
                       else TryHandler(t, d, self.value(s), p)
                       for n, t, d, s, p in raw["tests"]] or f.tests
            f.closure = self.value(raw["closure"]) if raw["closure"] is not None else None
            f.module = self.value(raw["module"]) if raw["module"] is not None else None
            f.action = self.value(raw["owner"]) if raw["owner"] is not None else None
        agent.top = frames[0][0]
        agent.base = frames[-1][0]
        agent.frames = len(frames)


def _origins(origins) -> list:
    return sorted(list(o) for o in origins)


def _unorigins(raw) -> frozenset:
    """Saved origins. Any at all mean the process that saved them was live, and this one is
    from now (provenance.go_live): what carries them (an Error's message, an iterator, a pc
    label) can make labelled values without being one."""
    origins = frozenset(tuple(o) for o in raw)
    if origins:
        PV.go_live()
    return origins


def _shaped(container, saved: dict) -> dict:
    """``saved`` (an Array's or Map's object) with the container's shape, if it has one."""
    shape = PV.shape_of(container)
    if shape is not None and shape.length:
        size = max(len(container), 1)
        saved["shape"] = {"length": _origins(shape.length),
                          "starts": [[k, _origins(o)] for k, o in shape.starts if k < size],
                          "ends": [[k, _origins(o)] for k, o in shape.ends if k < size]}
    return saved


def _unshaped(container, raw: dict) -> None:
    PV.restore_shape(container, _unorigins(raw["length"]),
                     tuple((k, _unorigins(o)) for k, o in raw["starts"]),
                     tuple((k, _unorigins(o)) for k, o in raw["ends"]))


def _builtin(vm, name):
    raise SenseRuntimeError(f"saved state names an unknown builtin '{name}'", located=False)


def load_agent(vm, state: dict, path: str = "saved state") -> AgentValue:
    """Check ``state`` (read by read_saved, so authenticated and bound) and restore its agent
    in ``vm``: StateError, with nothing restored, when a check refuses it."""
    fail = _failer(path)
    shape = _Shape(vm.program, state.get("objects"), fail)
    shape.run(state)
    _Check(vm, state, fail).run(state, shape.rebound)
    loader = _Loader(vm, state["objects"])
    look = state["second_look"]
    if look is not None and vm.look is not None:
        for origin, text in look["evidence"]:
            vm.look.add_evidence(tuple(origin), text)
        vm.look.live = True
    agent = loader.run(state["agent"])
    vm.audit.prefix = [loader.value(line) for line in state["audit_lines"]]
    return agent
