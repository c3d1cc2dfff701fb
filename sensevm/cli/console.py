"""``sensevm inspect``: run a program, then serve a live console over what it left behind.

The console adds no execution logic of its own. After the program has run to its end (exactly
as ``sensevm run`` runs it), every button drives the VM's own handlers -- ``prepare``,
``verify``, ``approve``, ``commit``, ``rollback``, ``call_tool`` -- from a *host frame*: a frame
that stands where the main module's last line would be, in the main module's scope, with no
lineage tags. So policy is asked about the same scopes a line appended to the program would be,
denials raise the same errors and the audit log gets the same records. Bodies that run (a
commit, a rollback, a tool) run through ``VM.run_now`` on an execution state of their own, and
every request that touches the VM holds one lock: the HTTP server is threaded, the VM is not.
An answer to a paused agent resumes it through ``VM.resume_paused``, the resume ``sensevm
resume`` gives a saved agent, on an execution state of its own.

Security: the server binds 127.0.0.1 unless ``--host`` says otherwise; every ``/api`` request
must carry the random token printed with the URL (constant-time comparison, 403 otherwise);
a request whose Host header is not the bound host:port is refused (DNS rebinding); state
changes are POSTs. The static page holds no program data, so it is served without the token.

This module is imported only by ``sensevm inspect`` (never by ``sensevm run``).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from sensevm.base.errors import SenseError, SnbFormatError, VerifyError
from sensevm.guard import policy as P
from sensevm.guard.lifecycle import threads_start
from sensevm.guard.provenance import plain
from sensevm.runtime.frames import Frame
from sensevm.runtime.values import (Builtin, PreparedAction, format_float, sized_string,
                                    to_str, type_name)
from sensevm.runtime.vm import VM
from sensevm.world import install
from sensevm.world.memory import PersistentMemory, SessionMemory

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "console_static")
STATIC_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/console.js": ("console.js", "text/javascript; charset=utf-8"),
    "/console.css": ("console.css", "text/css; charset=utf-8"),
}
LIFECYCLE = ("verify", "approve", "commit", "rollback")
MAX_BODY = 1 << 20          # bytes of a request body
MAX_SHOWN = 2000            # characters of one value as the console shows it
# How deeply the arrays of a request's arguments may nest, and how deeply the console shows a
# value's (deeper ones as [...]): both are walked recursively, and a request must not be able
# to exhaust the host stack.
MAX_NESTING = 100
TOKEN_HEADER = "X-Sense-Token"


# ----------------------------------------------------------------------------- errors

class ConsoleError(Exception):
    """A request the console refuses before the VM sees it: an HTTP status and a message."""

    def __init__(self, status: int, kind: str, message: str):
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message


class AfterError(Exception):
    """A request the VM failed part way (an answered agent's body raised): the Sense error,
    and what the reply reports beside it (the output so far, the agent's state)."""

    def __init__(self, err: SenseError, reply: dict):
        super().__init__(err.message)
        self.err = err
        self.reply = reply


class _NoPosition:
    """Where console-driven events happen: no source line (audit records carry no line)."""

    __slots__ = ()
    line = None
    col = None

    def __str__(self) -> str:
        return "console"


HOST_POS = _NoPosition()


class HostFrame(Frame):
    """The frame console requests run from: the main module's scope, no caller, no tags."""

    __slots__ = ()

    @property
    def pos(self):
        return HOST_POS


def error_json(err: SenseError) -> dict:
    """A Sense error as the console shows it: its class and the VM's own text (with the
    position when the error has one, e.g. inside a body that failed)."""
    pos = err.pos
    if pos is HOST_POS or (pos is not None and not isinstance(pos.line, int)):
        err.pos = pos = None
    line = pos.line if pos is not None and pos.line > 0 else None
    return {"kind": err.kind, "message": err.message, "text": err.text,
            "path": err.path if line is not None else None, "line": line,
            "col": pos.col if line is not None else None}


# ----------------------------------------------------------------------------- values

def show(value, _seen=None) -> str:
    """A value in Sense literal notation (strings quoted), for the console's tables."""
    text = _show(value, _seen if _seen is not None else set())
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN - 1] + "\u2026"


def _show(v, seen, depth=0) -> str:
    v = plain(v)
    t = type(v)
    if t is str:
        return '"' + (v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
                      .replace("\t", "\\t").replace("\r", "\\r")) + '"'
    if t is bool:
        return "true" if v else "false"
    if v is None:
        return "nil"
    if t is int:
        return str(v) if v.bit_length() < 2000 else f"<Int of {len(str(v))} digits>"
    if t is float:
        try:
            return format_float(v)
        except SenseError:
            return repr(v)
    if t is list:
        if id(v) in seen or depth >= MAX_NESTING:
            return "[...]"
        seen.add(id(v))
        try:
            parts, size = [], 0
            for x in v:
                part = _show(x, seen, depth + 1)
                parts.append(part)
                size += len(part) + 2
                if size > MAX_SHOWN:
                    parts.append("\u2026")
                    break
            return "[" + ", ".join(parts) + "]"
        finally:
            seen.discard(id(v))
    if t is dict:
        if id(v) in seen or depth >= MAX_NESTING:
            return "{...}"
        seen.add(id(v))
        try:
            parts, size = [], 0
            for k, x in v.items():
                part = f"{_show(k, seen, depth + 1)}: {_show(x, seen, depth + 1)}"
                parts.append(part)
                size += len(part) + 2
                if size > MAX_SHOWN:
                    parts.append("\u2026")
                    break
            return "{" + ", ".join(parts) + "}"
        finally:
            seen.discard(id(v))
    try:
        return to_str(v)
    except SenseError:
        return f"<{type_name(v)}>"


def from_json(value, where: str, depth: int = 0):
    """A JSON value as a Sense value: an object is a Map (EXTENSIONS.md E1)."""
    t = type(value)
    if value is None or t in (bool, int, float, str):
        return value
    if t is list:
        if depth >= MAX_NESTING:
            raise ConsoleError(400, "BadArguments", f"{where}: arrays nested more than "
                                                    f"{MAX_NESTING} deep")
        return [from_json(x, where, depth + 1) for x in value]
    if t is dict:
        if depth >= MAX_NESTING:
            raise ConsoleError(400, "BadArguments", f"{where}: maps nested more than "
                                                    f"{MAX_NESTING} deep")
        return {k: from_json(x, where, depth + 1) for k, x in value.items()}
    raise ConsoleError(400, "BadArguments", f"{where}: not a JSON value Sense has")


class ArgumentSyntaxError(ConsoleError):
    def __init__(self, message: str, col: int):
        super().__init__(400, "BadArguments", f"arguments, column {col}: {message}")
        self.col = col


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


class _Literals:
    """Comma-separated Sense (or JSON) literals: strings, numbers, true/false, nil/null, arrays,
    maps (``{"k": v, 1: w}``, String or Int keys).

    Numbers as in Sense (``42``, ``3.14``, a leading ``-``) plus JSON's exponent form
    (``1e3`` is a Float). Strings use Sense's escapes (spec 2.7) plus JSON's ``\\uXXXX``.
    """

    def __init__(self, text: str):
        self.s = text
        self.i = 0
        self.depth = 0              # arrays open around the value being read

    def error(self, message: str):
        raise ArgumentSyntaxError(message, self.i + 1)

    def ws(self) -> None:
        s = self.s
        while self.i < len(s) and s[self.i] in " \t\r\n":
            self.i += 1

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def items(self, close: str) -> list:
        out = []
        self.ws()
        if self.peek() == close:
            return out
        while True:
            out.append(self.value())
            self.ws()
            c = self.peek()
            if c == ",":
                self.i += 1
                continue
            if c == close:
                return out
            self.error(f"expected ',' or {'the end' if not close else repr(close)}, "
                       f"found {c!r}")

    def entries(self) -> dict:
        out: dict = {}
        self.ws()
        if self.peek() == "}":
            return out
        while True:
            self.ws()
            at = self.i
            key = self.value()
            if type(key) is not str and type(key) is not int:
                self.i = at
                self.error("map keys must be String or Int")
            self.ws()
            if self.peek() != ":":
                self.error(f"expected ':' after a map key, found {self.peek()!r}")
            self.i += 1
            out[key] = self.value()
            self.ws()
            c = self.peek()
            if c == ",":
                self.i += 1
                self.ws()
                if self.peek() == "}":      # a trailing comma, as a Sense literal may have
                    return out
                continue
            if c == "}":
                return out
            self.error(f"expected ',' or '}}', found {c!r}")

    def value(self):
        self.ws()
        c = self.peek()
        if c == "":
            self.error("expected a value, found the end")
        if c == '"':
            return self.string()
        if c == "[":
            if self.depth >= MAX_NESTING:
                self.error(f"arrays nested more than {MAX_NESTING} deep")
            self.i += 1
            self.depth += 1
            items = self.items("]")
            self.depth -= 1
            self.i += 1
            return items
        if c == "{":
            if self.depth >= MAX_NESTING:
                self.error(f"maps nested more than {MAX_NESTING} deep")
            self.i += 1
            self.depth += 1
            entries = self.entries()
            self.depth -= 1
            self.i += 1
            return entries
        if c == "-" or c.isdigit():
            return self.number()
        if c.isalpha() or c == "_":
            start = self.i
            while self.i < len(self.s) and (self.s[self.i].isalnum() or self.s[self.i] == "_"):
                self.i += 1
            word = self.s[start:self.i]
            if word == "true":
                return True
            if word == "false":
                return False
            if word in ("nil", "null"):
                return None
            self.i = start
            self.error(f"'{word}' is not a literal (strings need double quotes)")
        self.error(f"unexpected {c!r}")

    def string(self) -> str:
        s, i = self.s, self.i + 1
        out = []
        while True:
            if i >= len(s):
                self.error("unterminated string literal")
            c = s[i]
            if c == '"':
                self.i = i + 1
                return "".join(out)
            if c == "\\" and i + 1 < len(s):
                e = s[i + 1]
                hexits = s[i + 2:i + 6]
                if e == "u" and len(hexits) == 4 and all(h in "0123456789abcdefABCDEF"
                                                         for h in hexits):
                    out.append(chr(int(hexits, 16)))
                    i += 6
                    continue
                out.append(_ESCAPES.get(e, e))
                i += 2
                continue
            out.append(c)
            i += 1

    def number(self):
        s, start = self.s, self.i
        i = start + 1 if s[start] == "-" else start
        digits = i
        while i < len(s) and s[i].isdigit():
            i += 1
        if i == digits:
            self.error("expected digits after '-'")
        is_float = False
        if i + 1 < len(s) and s[i] == "." and s[i + 1].isdigit():
            is_float = True
            i += 1
            while i < len(s) and s[i].isdigit():
                i += 1
        if i < len(s) and s[i] in "eE":
            j = i + 1
            if j < len(s) and s[j] in "+-":
                j += 1
            if j < len(s) and s[j].isdigit():
                is_float = True
                i = j
                while i < len(s) and s[i].isdigit():
                    i += 1
        if i < len(s) and (s[i].isalnum() or s[i] in "._"):
            self.i = i
            self.error(f"malformed number {s[start:i + 1]!r}")
        self.i = i
        text = s[start:i]
        if not is_float:
            return int(text)
        value = float(text)
        if value != value or value in (float("inf"), float("-inf")):
            self.i = start
            self.error(f"number {text!r} is out of range for a Float")
        return value


def parse_arguments(text: str) -> list:
    """The arguments of a call written as between its parentheses: ``"a@b.example", 3, [1]``."""
    p = _Literals(text)
    values = p.items("")
    p.ws()
    if p.i < len(text):
        p.error(f"unexpected {text[p.i]!r}")
    return values


def request_arguments(body: dict) -> list:
    """``{"args": [JSON values]}`` or ``{"text": "Sense literals"}`` (neither: no arguments)."""
    if "args" in body and "text" in body:
        raise ConsoleError(400, "BadArguments", "give either 'args' or 'text', not both")
    if "text" in body:
        if type(body["text"]) is not str:
            raise ConsoleError(400, "BadArguments", "'text' must be a string of literals")
        return parse_arguments(body["text"])
    args = body.get("args", [])
    if type(args) is not list:
        raise ConsoleError(400, "BadArguments", "'args' must be a JSON array")
    return [from_json(a, f"argument {i + 1}") for i, a in enumerate(args)]


# ----------------------------------------------------------------------------- the VM

class ConsoleVM(VM):
    """The VM, keeping what the console lists: every action and tool definition made (by
    declaration index), every prepared action, every memory, and the main module's scope."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.main_scope = None
        self.action_defs: dict = {}         # index in program.actions -> latest definition
        self.tool_defs: dict = {}           # index in program.tools -> latest definition
        self.prepared_actions: list = []    # [PreparedAction], in the order prepared
        self.console_made: set = set()      # ids of those the console prepared
        self.memories: list = []
        original = self.builtins.vars["@memory"]

        def memory_decl(vm, frame, args):
            pushed = original.fn(vm, frame, args)
            self.memories.append(frame.stack[-1])
            return pushed

        self.builtins.vars["@memory"] = Builtin(original.name, memory_decl, original.arity,
                                                frames=True)

    def _run_main(self):
        from sensevm.runtime.values import Scope
        self.main_scope = Scope(self.builtins, tag="module")
        return self.run_unit(self.prepared, self.main_scope)

    def op_MAKE_ACTION(self, f, a, b):
        super().op_MAKE_ACTION(f, a, b)
        if f.prepared.program is self.program:
            self.action_defs[a] = f.stack[-1]

    def op_MAKE_TOOL(self, f, a, b):
        super().op_MAKE_TOOL(f, a, b)
        if f.prepared.program is self.program:
            self.tool_defs[a] = f.stack[-1]

    def prepare(self, f, definition, args, line=None):
        action = super().prepare(f, definition, args, line)
        self.prepared_actions.append(action)
        return action


class _Tee:
    """Program output during a console request: to the terminal, and kept for the reply."""

    def __init__(self, out):
        self.out = out
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()

    def __getattr__(self, name):
        return getattr(self.out, name)


class Console:
    """The console's view of one finished run, and the operations its buttons perform."""

    def __init__(self, vm: ConsoleVM, path: str):
        self.vm = vm
        self.path = path
        self.lock = threading.RLock()
        self.status = None            # the run's exit status
        self.run_error = None         # the SenseError that ended the run, if one did
        self.program_records = 0      # audit records made by the program itself
        self.answers: dict = {}       # index in vm.agents -> [what each answer from here did]

    # -- reading

    def _params(self, body_index: int):
        code = self.vm.prepared[body_index].code
        return [{"name": n, "type": t} for n, t in zip(code.params, code.param_types)]

    def state(self) -> dict:
        vm = self.vm
        program = vm.program
        actions = []
        for i, decl in enumerate(program.actions):
            actions.append({
                "index": i, "name": decl.name, "kind": decl.kind, "capability": decl.capability,
                "approval": decl.approval, "reversible": decl.reversible,
                "params": self._params(decl.body), "declared": i in vm.action_defs,
                "policy": self.decision(decl.capability)})
        tools = []
        for i, decl in enumerate(program.tools):
            code = vm.prepared[decl.body].code
            tools.append({
                "index": i, "name": decl.name, "capability": decl.capability,
                "description": decl.description, "async": decl.is_async,
                "trusted": decl.trusted, "returns": code.return_type,
                "params": self._params(decl.body), "declared": i in vm.tool_defs,
                "policy": self.decision(decl.capability)})
        agents = [self.agent_json(i) for i in range(len(vm.agents))]
        return {
            "program": self.path, "dry_run": vm.dry_run,
            "second_look": vm.look is not None,
            "run": {"status": self.status,
                    "error": error_json(self.run_error) if self.run_error else None},
            "actions": actions, "tools": tools, "agents": agents,
            "prepared": [self.action_json(i) for i in range(len(vm.prepared_actions))],
            "memories": [self.memory_json(i, m) for i, m in enumerate(vm.memories)],
            "policy": self.policy(),
        }

    def decision(self, capability):
        """What policy in the main module's scope says about ``capability`` (None: nothing)."""
        if capability is None or self.vm.main_scope is None:
            return None
        return P.lexical_decision(self.vm.main_scope, capability) or "default allow"

    def policy(self) -> list:
        caps = sorted({d.capability for d in (*self.vm.program.actions, *self.vm.program.tools)
                       if d.capability is not None})
        return [{"capability": c, "decision": self.decision(c)} for c in caps]

    def action_json(self, i: int) -> dict:
        a = self.vm.prepared_actions[i]
        decl = a.definition.decl
        return {
            "id": i + 1, "name": a.name, "kind": a.kind, "state": a.state,
            "args": [show(x) for x in a.args], "approved": a.approved,
            "capability": decl.capability, "approval": decl.approval,
            "reversible": decl.reversible,
            "second_look": a.reason if a.flag is not None else None,
            "reason": a.reason,
            "origin": "console" if id(a) in self.vm.console_made else "program",
            "in_session": a.session is not None,
        }

    def agent_json(self, i: int) -> dict:
        """An agent as the console lists it: while paused, the question it asked (the text
        ``ask_human`` was given, or ``pause``'s reason), which question from this console
        that is (1 for the one it paused on when the run ended) and whether the console can
        answer it; and what every answer from here did."""
        a = self.vm.agents[i]
        paused = a.status == "paused"
        reason = a.pause_reason
        question = None
        if paused and reason is not None:
            question = plain(reason) if type(plain(reason)) is str else show(reason)
        given = self.answers.get(i, [])
        return {"index": i, "name": a.name, "async": a.decl.is_async, "status": a.status,
                "pause_reason": None if reason is None else show(reason),
                "question": question,
                "question_number": len(given) + 1 if paused else None,
                "answerable": paused and not a.decl.is_async,
                "answers": given, "doc": a.decl.doc}

    def memory_json(self, i: int, m) -> dict:
        if type(m) is SessionMemory:
            entries = list(m.store.items())
            out = {"kind": "memory", "hint": m.kind}
        else:
            try:
                entries = m.snapshot((None, None))
            except SenseError as err:
                return {"index": i, "name": m.name, "kind": "persistent", "path": m.path,
                        "entries": [], "error": error_json(err)}
            out = {"kind": "persistent", "path": m.path}
        out.update(index=i, name=m.name,
                   entries=[{"key": k, "value": show(v)} for k, v in entries[:500]],
                   count=len(entries))
        return out

    def audit(self) -> dict:
        records = [self.record_json(n, r) for n, r in enumerate(self.vm.audit.records)]
        return {"records": records, "tree": audit_tree(records),
                "program_records": self.program_records}

    def record_json(self, n: int, r) -> dict:
        return {"seq": n + 1, "subject": r.subject, "name": r.name, "kind": r.kind,
                "event": r.event, "detail": r.detail, "line": r.line,
                "lineage": list(r.lineage), "host_only": r.host_only,
                "time": r.timestamp, "text": r.describe(),
                "origin": "program" if n < self.program_records else "console"}

    # -- driving the VM

    def host_frame(self) -> HostFrame:
        vm = self.vm
        if vm.main_scope is None:
            raise ConsoleError(409, "NotRun", "the program did not start, so there is nothing "
                                              "to drive")
        return HostFrame(vm.prepared[vm.program.entry], vm.main_scope, None)

    def _capture(self, run):
        """Run ``run()`` with the program's output also captured; (value, output)."""
        with self._capturing() as tee:
            value = run()
        return value, "".join(tee.parts)

    @contextmanager
    def _capturing(self):
        """While inside, the program's output (of this VM and of workers made meanwhile) is
        also kept in the ``_Tee`` given."""
        vm = self.vm
        tee = _Tee(vm.out)
        vm.out = tee
        try:
            yield tee
        finally:
            vm.out = tee.out
            try:
                tee.out.flush()
            except (OSError, ValueError):
                pass

    @staticmethod
    def _declared(kind: str, index: int, decls, defs: dict, verb: str):
        """The value declaration ``index`` of the manifest table ``decls`` bound when it ran."""
        if not 0 <= index < len(decls):
            raise ConsoleError(404, f"Unknown{kind.capitalize()}",
                               f"no {kind} #{index} in this program")
        value = defs.get(index)
        if value is None:
            raise ConsoleError(409, "NotDeclared",
                               f"{kind} '{decls[index].name}' was never declared while the "
                               f"program ran (its declaration did not execute), so it cannot "
                               f"be {verb}")
        return value

    def prepare(self, index: int, args: list) -> dict:
        vm = self.vm
        definition = self._declared("action", index, vm.program.actions, vm.action_defs,
                                    "prepared")
        f = self.host_frame()
        action = vm.prepare(f, definition, args)
        vm.console_made.add(id(action))
        return {"action": self.action_json(len(vm.prepared_actions) - 1)}

    def step(self, ident: int, method: str) -> dict:
        vm = self.vm
        if not 1 <= ident <= len(vm.prepared_actions):
            raise ConsoleError(404, "UnknownAction", f"no prepared action #{ident}")
        action: PreparedAction = vm.prepared_actions[ident - 1]
        f = self.host_frame()
        scope = vm.main_scope

        def start(worker):
            if method == "verify":
                f.stack.append(worker.verify(f, action, scope, HOST_POS))
                return False
            if method == "approve":
                f.stack.append(worker.approve(f, action, HOST_POS))
                return False
            if method == "commit":
                return worker.commit(f, action, scope)
            return worker.rollback(f, action, scope, HOST_POS)

        result, output = self._capture(lambda: vm.run_now(f, start))
        reply = {"action": self.action_json(ident - 1), "output": output}
        if method in ("commit", "rollback"):
            reply["result"] = show(result)
        return reply

    def call_tool(self, index: int, args: list) -> dict:
        vm = self.vm
        tool = self._declared("tool", index, vm.program.tools, vm.tool_defs, "called")
        f = self.host_frame()

        def run():
            value = vm.run_now(f, lambda worker: worker.call_tool(f, tool, args))
            if tool.decl.is_async:
                value = value.sense_await(vm)      # the Future the call returned
            return value

        result, output = self._capture(run)
        return {"result": show(result), "output": output}

    def answer(self, index: int, body: dict) -> dict:
        """Give paused agent ``index`` its answer and let it run until it pauses again or
        ends, as ``sensevm resume`` continues a saved agent (``VM.resume_paused``), on an
        execution state of its own. ``body``: ``{"answer": TEXT}``, and optionally
        ``"question": N`` (the agent's ``question_number``): then an answer meant for a
        question already answered is refused, not given to the next one."""
        vm = self.vm
        if not 0 <= index < len(vm.agents):
            raise ConsoleError(404, "UnknownAgent", f"no agent #{index} in this run")
        agent = vm.agents[index]
        text = body.get("answer")
        if type(text) is not str:
            raise ConsoleError(400, "BadAnswer", "'answer' must be a string: what the agent's "
                                                 "ask_human() (or pause()) returns")
        asked = body.get("question")
        if asked is not None and type(asked) is not int:
            raise ConsoleError(400, "BadAnswer", "'question' must be an integer: the "
                                                 "question_number the answer is for")
        try:
            text = sized_string(text)
        except SenseError as err:
            raise ConsoleError(400, "BadAnswer", err.message) from None
        given = self.answers.setdefault(index, [])
        number = len(given) + 1
        name = agent.name
        paused = agent.status == "paused"
        if asked is not None and 1 <= asked < number or not paused and given:
            which = asked if asked is not None and 1 <= asked < number else len(given)
            now = (f"it now asks question {number}: {show(self.agent_json(index)['question'])}"
                   if paused else f"its status is now '{agent.status}'")
            raise ConsoleError(409, "AlreadyAnswered",
                               f"agent '{name}' was already answered (question {which}, "
                               f"{show(given[which - 1]['question'])}): {now}")
        if not paused:
            raise ConsoleError(409, "NotPaused", f"agent '{name}' is not waiting for an answer "
                                                 f"(status: '{agent.status}')")
        if asked is not None and asked != number:
            raise ConsoleError(409, "NoSuchQuestion", f"agent '{name}' is waiting on question "
                                                      f"{number}, not {asked}")
        if agent.decl.is_async:
            raise ConsoleError(409, "AsyncAgent",
                               f"agent '{name}' is async: it waits on a thread of its own, and "
                               "only resume() in its program can continue it")
        entry = {"question": self.agent_json(index)["question"], "answer": text}
        given.append(entry)         # used, whatever happens next: it is never given twice
        value = text if vm.look is None else vm.look.user_text(text)   # the user's own words
        records, prepared = len(vm.audit), len(vm.prepared_actions)
        error = None
        with self._capturing() as tee:
            try:
                vm.worker().resume_paused(agent, value)
            except SenseError as err:
                error = err
        after = vm.audit.records        # (made once: each read builds the whole list)
        new_records = [self.record_json(n, after[n]) for n in range(records, len(after))]
        new_actions = [self.action_json(i) for i in range(prepared, len(vm.prepared_actions))]
        entry.update(output="".join(tee.parts), status=agent.status,
                     records=[r["seq"] for r in new_records],
                     prepared=[a["id"] for a in new_actions],
                     error=error_json(error) if error is not None else None)
        reply = {"agent": self.agent_json(index), "output": entry["output"],
                 "records": new_records, "prepared": new_actions}
        if error is not None:
            raise AfterError(error, reply)
        return reply


def audit_tree(records: list) -> dict:
    """The records as a call tree: each lineage frame (``agent:w``, ``tool:t``,
    ``irreversible:send`` ...) a node, nested outermost first; records are leaves, in order.

    Consecutive records under the same frames share those nodes; a frame entered again after
    something else happened at its level is a new node (a new call)."""
    root = {"type": "root", "children": []}
    for rec in records:
        node = root
        for tag in rec["lineage"]:
            children = node["children"]
            last = children[-1] if children else None
            if last is not None and last["type"] == "frame" and last["tag"] == tag:
                node = last
                continue
            kind, _, name = tag.partition(":")
            frame = {"type": "frame", "tag": tag, "kind": kind, "name": name, "children": []}
            children.append(frame)
            node = frame
        node["children"].append({"type": "record", "record": rec})
    return root


# ----------------------------------------------------------------------------- running it

def open_console(path: str, *, dry_run: bool = False, stdout=None, stderr=None,
                 request: str | None = None, second_look: bool = True, stdin=None):
    """Run ``path`` as ``sensevm run`` does (same output, same error reports); return
    ``(Console, status)``, or ``(None, 1)`` when the program could not be loaded at all."""
    from sensevm.guard.audit import AuditLog
    from sensevm.base.diagnostics import report
    from sensevm.cli.running import run_guarded, session_host, stale_source
    from sensevm.cli.running import load_path
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    try:
        verified, sources = load_path(path)
    except SenseError as err:
        report(err, {}, stderr)
        return None, 1
    except (SnbFormatError, VerifyError) as exc:
        from sensevm.base.diagnostics import report_file_error
        report_file_error(path, exc, stderr)
        return None, 1
    stale = stale_source(path, verified.program.source_hash)
    if stale:
        stderr.write(f"warning: {path} is older than {stale}, which has changed since it was "
                     f"built (rebuild with: sensec build {stale})\n")
    audit = AuditLog()
    install()
    vm = ConsoleVM(verified, stdout=stdout, dry_run=dry_run, audit=audit,
                   second_look=second_look)
    vm.set_request(request)
    session_host(vm, path, None, None, stdin, stderr)
    console = Console(vm, path)

    def body():
        try:
            vm.run()
        except SenseError as err:
            console.run_error = err
            raise

    console.status = run_guarded(body, audit, sources, stdout, stderr)
    console.program_records = len(audit)
    return console, console.status


# ----------------------------------------------------------------------------- HTTP

def _host_header(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class ConsoleServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, console: Console, host: str, port: int):
        import socket
        if ":" in host:
            self.address_family = socket.AF_INET6
        self.console = console
        self.token = secrets.token_urlsafe(32)
        threads_start()             # request threads run the program's lifecycle calls
        super().__init__((host, port), ConsoleHandler)
        self.host = host
        self.port = self.server_address[1]
        self.expected_host = _host_header(host, self.port)

    @property
    def url(self) -> str:
        return f"http://{self.expected_host}/?token={self.token}"


class ConsoleHandler(BaseHTTPRequestHandler):
    server_version = "sensevm-inspect"
    sys_version = ""

    def log_message(self, fmt, *args) -> None:     # the terminal belongs to the program
        pass

    # -- replies

    def _send(self, status: int, body: bytes, content_type: str, extra=()) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Frame-Options", "DENY")
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, payload: dict, extra=()) -> None:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8", "surrogatepass")
        self._send(status, body, "application/json; charset=utf-8", extra)

    def _fail(self, status: int, kind: str, message: str, extra=(), **more) -> None:
        self._json(status, {"ok": False, "error": {"kind": kind, "message": message,
                                                   "text": message}, **more}, extra)

    # -- checks

    def _host_ok(self) -> bool:
        host = self.headers.get("Host")
        if host is None or host != self.server.expected_host:
            self._fail(403, "BadHost", "this console answers only requests addressed to "
                                       f"{self.server.expected_host}")
            return False
        return True

    def _token_ok(self, query: dict) -> bool:
        given = self.headers.get(TOKEN_HEADER)
        if given is None:
            values = query.get("token")
            given = values[0] if values else ""
        if not secrets.compare_digest(given.encode("utf-8", "surrogateescape"),
                                      self.server.token.encode("ascii")):
            self._fail(403, "Forbidden", "a missing or wrong token: open the URL that "
                                         "`sensevm inspect` printed")
            return False
        return True

    def _body(self) -> dict:
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding"):
            raise ConsoleError(411, "LengthRequired", "send the body with a Content-Length")
        try:
            n = int(length) if length else 0
        except ValueError:
            raise ConsoleError(400, "BadRequest", "a malformed Content-Length") from None
        if n < 0:
            raise ConsoleError(400, "BadRequest", "a malformed Content-Length")
        if n > MAX_BODY:
            raise ConsoleError(413, "TooLarge", f"a request body over {MAX_BODY} bytes")
        raw = self.rfile.read(n) if n else b""
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ConsoleError(400, "BadJSON", f"the request body is not JSON: {exc}") from None
        except RecursionError:
            raise ConsoleError(400, "BadJSON", "the request body nests arrays or objects "
                                               f"more than {MAX_NESTING} deep") from None
        if type(body) is not dict:
            raise ConsoleError(400, "BadJSON", "the request body must be a JSON object")
        return body

    # -- routing

    def do_GET(self) -> None:       # noqa: N802 (http.server's naming)
        self._handle("GET")

    def do_HEAD(self) -> None:      # noqa: N802
        self._handle("HEAD")

    def do_POST(self) -> None:      # noqa: N802
        self._handle("POST")

    def _handle(self, method: str) -> None:
        try:
            self._route(method)
        except ConsoleError as exc:
            self._fail(exc.status, exc.kind, exc.message)
        except Exception as exc:    # a bug in the console: say so, never a traceback
            self._fail(500, "InternalError", f"internal error in the console: "
                                             f"{type(exc).__name__}: {exc}")

    def _route(self, method: str) -> None:
        if not self._host_ok():
            return
        url = urlsplit(self.path)
        path = url.path
        if path in STATIC_FILES:
            if method == "POST":
                raise ConsoleError(405, "MethodNotAllowed", f"{path} takes GET")
            name, content_type = STATIC_FILES[path]
            with open(os.path.join(STATIC_DIR, name), "rb") as fh:
                data = fh.read()
            self._send(200, data, content_type, [(
                "Content-Security-Policy",
                "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                "img-src 'self' data:; base-uri 'none'; form-action 'none'; "
                "frame-ancestors 'none'")])
            return
        if path == "/favicon.ico":
            self._send(204, b"", "image/x-icon")
            return
        if not path.startswith("/api/"):
            raise ConsoleError(404, "NotFound", f"nothing at {path}")
        if not self._token_ok(parse_qs(url.query)):
            return
        parts = [unquote(p) for p in path.split("/")[2:]]
        console = self.server.console
        route = self._match(parts)
        if route is None:
            raise ConsoleError(404, "NotFound", f"no endpoint {path}")
        wanted, run = route
        if method == "HEAD":
            method = "GET"
        if method != wanted:
            raise ConsoleError(405, "MethodNotAllowed", f"{path} takes {wanted}")
        body = self._body() if method == "POST" else {}
        with console.lock:
            try:
                reply = run(console, body)
            except AfterError as exc:
                self._json(409, {"ok": False, "error": error_json(exc.err), **exc.reply})
                return
            except SenseError as err:
                status = 422 if parts[0] in ("actions", "tools") else 409
                payload = {"ok": False, "error": error_json(err)}
                if parts[0] == "prepared":
                    payload["action"] = console.action_json(int(parts[1]) - 1)
                self._json(status, payload)
                return
        self._json(200, {"ok": True, **reply})

    @staticmethod
    def _match(parts: list):
        """(method, run(console, body)) for an API path, or None."""
        if parts == ["state"]:
            return "GET", lambda c, b: c.state()
        if parts == ["audit"]:
            return "GET", lambda c, b: c.audit()
        if parts == ["ping"]:
            return "GET", lambda c, b: {}
        if len(parts) == 3 and parts[0] == "agents" and parts[2] == "answer":
            try:
                n = int(parts[1], 10)
            except ValueError:
                return None
            return "POST", lambda c, b: c.answer(n, b)
        if len(parts) == 3 and parts[0] in ("actions", "tools", "prepared"):
            try:
                n = int(parts[1], 10)
            except ValueError:
                return None
            if parts[0] == "actions" and parts[2] == "prepare":
                return "POST", lambda c, b: c.prepare(n, request_arguments(b))
            if parts[0] == "tools" and parts[2] == "call":
                return "POST", lambda c, b: c.call_tool(n, request_arguments(b))
            if parts[0] == "prepared" and parts[2] in LIFECYCLE:
                return "POST", lambda c, b: c.step(n, parts[2])
        return None


def inspect_file(path: str, *, dry_run: bool = False, host: str = "127.0.0.1", port: int = 0,
                 request: str | None = None, second_look: bool = True, stdout=None,
                 stderr=None) -> int:
    """``sensevm inspect``: run, serve until Ctrl-C, return the run's exit status."""
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    console, status = open_console(path, dry_run=dry_run, stdout=stdout, stderr=stderr,
                                   request=request, second_look=second_look)
    if console is None:
        return status
    try:
        server = ConsoleServer(console, host, port)
    except OSError as exc:
        stderr.write(f"sensevm inspect: cannot listen on {host}:{port}: {exc.strerror or exc}\n")
        return 1
    if host not in ("127.0.0.1", "::1", "localhost"):
        stderr.write(f"note: listening on {host}: other machines may reach this console "
                     "(every request still needs the token)\n")
    paused = sum(1 for a in console.vm.agents if a.status == "paused")
    waiting = (f"  {paused} agent{'s' if paused != 1 else ''} paused, waiting for an answer: "
               f"answer {'them' if paused != 1 else 'it'} under Paused agents\n" if paused else "")
    stdout.write(f"\nSense console for {path}{' (DRY RUN)' if dry_run else ''}\n"
                 f"  {server.url}\n{waiting}"
                 f"  (Ctrl-C to stop)\n")
    stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        stdout.write("\nconsole stopped\n")
        stdout.flush()
    finally:
        server.server_close()
    return status
