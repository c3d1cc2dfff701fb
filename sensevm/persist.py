"""Saving paused agents: the heap reachable from their frames, as JSON, written atomically.

A paused plain agent is a detached chain of VM frames. Saving it means saving everything those
frames can reach: scopes (up to the module and the builtins), arrays (sharing and cycles kept),
closures, actions, tools, modules, other agents, iterators. Code is referred to by its index in
the program, which is saved beside the state as the verified .snb bytes, so a resumed agent runs
the very bytecode it paused in. A value that cannot be saved (a pending Future, a running async
agent) is an error naming it, raised before anything is written.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .errors import Pos, SenseRuntimeError
from . import provenance as PV
from .files import atomic_write
from .values import (ActionDefinition, AgentValue, ArrayIterator, BoundLifecycleMethod, Builtin,
                     Closure, Future, ModuleValue, PreparedAction, Scope, ToolDefinition)

STATE_VERSION = 2         # 2: provenance (labels, pc labels, second-look state)


class SaveError(SenseRuntimeError):
    """A paused agent whose state cannot be written."""


class _Saver:
    def __init__(self, vm):
        self.vm = vm
        self.ids: dict[int, int] = {}
        self.objects: list = []
        self.keep: list = []          # keeps saved objects alive so their ids stay unique

    def ref(self, obj, build) -> dict:
        key = id(obj)
        if key in self.ids:
            return {"ref": self.ids[key]}
        index = len(self.objects)
        self.ids[key] = index
        self.keep.append(obj)
        self.objects.append(None)
        self.objects[index] = build()
        return {"ref": index}

    def value(self, v: Any, where: str):
        t = type(v)
        if v is None or t is bool or t is str:
            return v
        if t is int:
            return {"int": str(v)}
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
            return self.ref(v, lambda: {"type": "array",
                                        "items": [self.value(x, where) for x in v]})
        if t is Scope:
            return self.scope(v)
        if t is Closure:
            return self.ref(v, lambda: {"type": "closure", "code": self.code(v.code),
                                        "scope": self.scope(v.scope)})
        if t is Builtin:
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
        from .interop import saved_form
        form = saved_form(v)
        if form is None:
            raise SaveError(f"cannot save {where}: it holds a Python value ({v.label}) made by "
                            "Python code; only Python modules and what is read from them by "
                            "name can be saved (docs/interop.md)", located=False)
        return self.ref(v, lambda: form)

    def model_value(self, v, t, where: str):
        from .models import Answer, BoundAsk, Model, Skill
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
        from .memory import MemoryMethod, PersistentMemory, SessionMemory
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

    def frame(self, f, where: str) -> dict:
        owner = f.action
        return {"code": self.code(f.prepared), "ip": f.ip,
                "stack": [self.value(v, where) for v in f.stack],
                "scope": self.scope(f.scope),
                "tests": [[h.name, h.target, h.depth, self.scope(h.scope), [h.pos.line, h.pos.col]]
                          for h in f.tests],
                "closure": self.value(f.closure, where) if f.closure is not None else None,
                "module": self.value(f.module, where) if f.module is not None else None,
                "role": f.role, "tags": list(f.tags), "audit_line": f.audit_line,
                "pc": None if f.pc is None else [[j, _origins(o), d] for j, o, d in f.pc],
                "owner": self.value(owner, where) if owner is not None else None}


def save_agent(vm, agent: AgentValue, directory: str) -> str:
    """Write DIR/NAME.json (and DIR/program.snb once); return the state file's path."""
    saver = _Saver(vm)
    root = saver.value(agent, f"agent '{agent.name}'")
    state = {"version": STATE_VERSION, "agent": root, "objects": saver.objects,
             "audit_lines": vm.audit.lines(),
             "second_look": None if vm.look is None else {
                 "evidence": [[list(o), text] for o, text in vm.look.evidence]},
             "source_hash": vm.program.source_hash.hex()}
    os.makedirs(directory, exist_ok=True)
    program_path = os.path.join(directory, "program.snb")
    if not os.path.exists(program_path):
        from .snb import dump
        atomic_write(program_path, dump(vm.program))
    path = os.path.join(directory, f"{agent.name}.json")
    atomic_write(path, json.dumps(state, ensure_ascii=False, sort_keys=True).encode("utf-8"))
    return path


# ----------------------------------------------------------------------------- loading

class _Loader:
    def __init__(self, vm, objects: list):
        self.vm = vm
        self.raw = objects
        self.made: dict[int, Any] = {}

    def value(self, v):
        if v is None or isinstance(v, (bool, str)):
            return v
        if "int" in v:
            return int(v["int"])
        if "float" in v:
            return float.fromhex(v["float"])
        if "lstr" in v:
            return PV.make_str(v["lstr"], [(a, b, _unorigins(o)) for a, b, o in v["spans"]])
        if "labelled" in v:
            return PV.label(self.value(v["labelled"]), _unorigins(v["origins"]))
        if "builtin" in v:
            return self.vm.builtins.vars.get(v["builtin"]) or _builtin(self.vm, v["builtin"])
        if "builtins" in v:
            for k, x in v["vars"].items():
                self.vm.builtins.vars[k] = self.value(x)
            return self.vm.builtins
        return self.obj(v["ref"])

    def obj(self, index: int):
        if index in self.made:
            return self.made[index]
        raw = self.raw[index]
        kind = raw["type"]
        vm = self.vm
        unit = vm.prepared
        program = vm.program
        if kind == "array":
            out: list = []
            self.made[index] = out
            out.extend(self.value(x) for x in raw["items"])
            return out
        if kind == "scope":
            s = Scope(None)
            self.made[index] = s
            s.parent = self.value(raw["parent"]) if raw["parent"] is not None else None
            if raw["policy"]:
                table = dict(raw["policy"])
                vm.denials.note(table)          # before the table can decide anything
                s.policy = table
            tag = raw["tag"]
            s.tag = self.value(tag) if isinstance(tag, dict) else tag
            for k, x in raw["vars"].items():
                s.vars[k] = self.value(x)
            return s
        if kind == "closure":
            code = unit[raw["code"]]
            c = Closure(code, None, code.code.name)
            self.made[index] = c
            c.scope = self.value(raw["scope"])
            return c
        if kind == "module":
            m = ModuleValue(raw["name"], raw["path"], None)
            self.made[index] = m
            m.scope = self.value(raw["scope"])
            return m
        if kind == "action_def":
            decl = program.actions[raw["index"]]
            d = ActionDefinition(decl, unit[decl.body],
                                 unit[decl.rollback] if decl.rollback >= 0 else None, None)
            self.made[index] = d
            d.scope = self.value(raw["scope"])
            return d
        if kind == "action":
            a = PreparedAction(None, [])
            self.made[index] = a
            a.definition = self.value(raw["def"])
            a.args = [self.value(x) for x in raw["args"]]
            a.state = raw["state"]
            a.approved = raw["approved"]
            a.flag, a.cleared, a.reason = raw["flag"], raw["cleared"], raw["reason"]
            a.body_scope = self.value(raw["body_scope"]) if raw["body_scope"] else None
            return a
        if kind == "bound":
            b = BoundLifecycleMethod(None, raw["method"], None, Pos(*raw["pos"]))
            self.made[index] = b
            b.action = self.value(raw["action"])
            b.scope = self.value(raw["scope"])
            return b
        if kind == "tool_def":
            decl = program.tools[raw["index"]]
            t = ToolDefinition(decl, unit[decl.body], None)
            self.made[index] = t
            t.scope = self.value(raw["scope"])
            return t
        if kind == "future":
            f = Future(None, Pos(*raw["pos"]), raw["path"])
            self.made[index] = f
            f.tool = self.value(raw["tool"])
            f.value = self.value(raw["value"])
            f.finished = True
            return f
        if kind == "iter":
            it = ArrayIterator([])
            self.made[index] = it
            it.items = self.value(raw["items"])
            it.i = raw["i"]
            return it
        if kind == "agent":
            decl = program.agents[raw["index"]]
            a = AgentValue(decl, unit[decl.body], None)
            self.made[index] = a
            a.scope = self.value(raw["scope"])
            a.status = raw["status"]
            a.pause_reason = self.value(raw["pause_reason"])
            a.mailbox = [self.value(m) for m in raw["mailbox"]]
            if raw["frames"] is not None:
                self.frames(a, raw["frames"])
            return a
        if kind == "python":
            from .interop import restore
            from .opcodes import Op
            # Only a module the verified program itself imports: the saved state cannot name
            # a module the bytecode never asked for (its import was checked when it ran).
            imported = {self.vm.program.strings[ins.args[0]]
                        for code in self.vm.verified.codes for ins in code.instructions
                        if ins.op is Op.IMPORT_PYTHON}
            if raw.get("module") not in imported:
                raise SenseRuntimeError(f"saved state names Python module {raw.get('module')!r}, "
                                        "which the program does not import", located=False)
            value = self.made[index] = restore(raw, self.vm.look)
            return value
        if kind in ("model", "bound_ask", "answer", "skill"):
            return self.model_obj(index, kind, raw)
        if kind in ("memory", "pmemory", "memory_method"):
            return self.memory_obj(index, kind, raw)
        raise ValueError(f"unknown saved object type {kind!r}")

    def model_obj(self, index: int, kind: str, raw: dict):
        from .models import Answer, BoundAsk, Model, Skill
        from .providers import ProviderError, restore
        if kind == "model":
            try:
                provider = restore(raw["provider"])
            except ProviderError as err:
                raise SenseRuntimeError(f"cannot restore model '{raw['name']}': {err}",
                                        located=False) from None
            made = self.made[index] = Model(raw["name"], provider)
        elif kind == "bound_ask":
            made = self.made[index] = BoundAsk(None, raw["name"],
                                               Pos(*raw["pos"]) if raw["pos"] else None)
            made.model = self.value(raw["model"])
        elif kind == "answer":
            made = self.made[index] = Answer(None, raw["confidence"], raw["source"])
            made.value = self.value(raw["value"])
        else:
            made = self.made[index] = Skill(raw["name"], raw["description"], [])
            made.tools = self.value(raw["tools"])
        return made

    def memory_obj(self, index: int, kind: str, raw: dict):
        from .memory import MemoryMethod, PersistentMemory, SessionMemory
        if kind == "memory":
            made = self.made[index] = SessionMemory(raw["name"], raw["kind"])
            for key, value in raw["store"]:
                made.store[key] = self.value(value)
        elif kind == "pmemory":
            # Opened at its first use after the resume, where a problem with the file is
            # reported with the position of that use.
            made = self.made[index] = PersistentMemory(raw["name"], raw["path"],
                                                       raw["location"])
        else:
            made = self.made[index] = MemoryMethod(None, raw["method"], Pos(*raw["pos"]),
                                                   raw["path"])
            made.memory = self.value(raw["memory"])
        return made

    def frames(self, agent: AgentValue, raws: list) -> None:
        from .vm import Frame, TestHandler
        frames = []
        for raw in raws:                           # innermost first
            f = Frame(self.vm.prepared[raw["code"]], None, None)
            f.ip = raw["ip"]
            f.role = raw["role"]
            f.tags = tuple(raw["tags"])
            f.audit_line = raw["audit_line"]
            if raw["pc"] is not None:
                f.pc = [(j, _unorigins(o), d) for j, o, d in raw["pc"]]
            frames.append((f, raw))
        for i, (f, raw) in enumerate(frames):
            f.caller = frames[i + 1][0] if i + 1 < len(frames) else None
            f.stack = [self.value(v) for v in raw["stack"]]
            f.scope = self.value(raw["scope"])
            f.tests = [TestHandler(n, t, d, self.value(s), Pos(*p)) for n, t, d, s, p in raw["tests"]]
            f.closure = self.value(raw["closure"]) if raw["closure"] is not None else None
            f.module = self.value(raw["module"]) if raw["module"] is not None else None
            f.action = self.value(raw["owner"]) if raw["owner"] is not None else None
        agent.top = frames[0][0]
        agent.base = frames[-1][0]
        agent.frames = len(frames)


def _origins(origins) -> list:
    return sorted(list(o) for o in origins)


def _unorigins(raw) -> frozenset:
    return frozenset(tuple(o) for o in raw)


def _builtin(vm, name):
    raise SenseRuntimeError(f"saved state names an unknown builtin '{name}'", located=False)


def load_agent(vm, state: dict) -> AgentValue:
    if state.get("version") != STATE_VERSION:
        raise SenseRuntimeError(f"saved agent state has version {state.get('version')!r}; "
                                f"this sensevm reads version {STATE_VERSION}", located=False)
    vm.audit.prefix = list(state["audit_lines"])
    look = state["second_look"]
    if look is not None and vm.look is not None:
        for origin, text in look["evidence"]:
            vm.look.add_evidence(tuple(origin), text)
        vm.look.live = True
    loader = _Loader(vm, state["objects"])
    return loader.value(state["agent"])
