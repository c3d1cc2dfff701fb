"""Incremental execution for the REPL: each input is compiled, verified and run in one persistent scope."""

from __future__ import annotations

import re
import sys
from typing import Optional

from sensevm.base.diagnostics import render
from sensevm.base.errors import SenseError, SnbFormatError, VerifyError
from sensevm.guard import policy as P
from sensevm.runtime.methods import names as method_names
from sensevm.runtime.values import (ActionDefinition, AgentValue, Builtin, Closure,
                                    ModuleValue, PreparedAction, Scope, ToolDefinition, to_str)

# The binding the compiler calls with an input's last expression value (not a writable name).
ECHO = "@echo"
NOTHING = object()


def echo_text(value, _seen: Optional[set] = None) -> str:
    """How the REPL shows a value: as printed, but Strings quoted (inside Arrays and Maps too),
    so ``"1"`` and ``1`` look different."""
    from sensevm.guard.provenance import LStr
    t = type(value)
    if t is str or t is LStr:
        text = str(value)
        for a, b in (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\t", "\\t"),
                     ("\r", "\\r")):
            text = text.replace(a, b)
        return '"' + text + '"'
    if t is list or t is dict:
        seen = _seen if _seen is not None else set()
        if id(value) in seen:
            return "[...]" if t is list else "{...}"
        seen.add(id(value))
        try:
            if t is list:
                return "[" + ", ".join(echo_text(x, seen) for x in value) + "]"
            return "{" + ", ".join(f"{echo_text(k, seen)}: {echo_text(v, seen)}"
                                   for k, v in value.items()) + "}"
        finally:
            seen.discard(id(value))
    return to_str(value)


class Interactive:
    """A REPL session: one VM, one top-level scope, inputs run as they come.

    Every input goes through the same path as a file: compile (the compiler is imported only
    here), dump to .snb bytes, load and verify, run. Names, functions, actions, policy rules and
    the audit log persist from one input to the next.
    """

    def __init__(self, stdout=None, path: str = "<repl>", dry_run: bool = False,
                 limits: Optional[dict] = None):
        self.stdout = stdout if stdout is not None else sys.stdout
        if limits is None:
            # The environment's resource limits (docs/limits.md); a bad one is ignored here
            # (`sensevm run` names it).
            import os
            from sensevm.runtime.limits import from_env
            try:
                limits = from_env(os.environ)
            except ValueError:
                limits = {}
        self.limits = limits
        self.path = path
        self.dry_run = dry_run
        self.vm = None
        self.scope: Optional[Scope] = None
        self.sources: dict[str, str] = {}
        self.units: list = []
        # Every input's lines, numbered on from the previous input's (as IPython counts In[n]):
        # an error or an audit entry names the line of the session it came from, and quotes it.
        self.lines: list[str] = []
        self.echo = False               # echo the value of a last expression statement
        self.echoed = NOTHING           # ... the value of the input that just ran, if any

    @property
    def next_line(self) -> int:
        return len(self.lines) + 1

    def execute(self, source: str, first_line: Optional[int] = None) -> Optional[SenseError]:
        """Run one input; return None, or the (positioned) error it ended with.

        The input's lines are numbered from ``first_line`` (default: after the session's lines
        so far; a larger number leaves the lines between empty, as piped mode's skipped blank
        lines and ':' commands are).
        """
        from sensec.driver import compile_source
        from sensevm.bytecode.snb import dump
        from sensevm.bytecode.verify import load_verified
        from sensevm.runtime.vm import VM
        from sensevm.world import install
        if first_line is None or first_line < self.next_line:
            first_line = self.next_line
        self.lines.extend([""] * (first_line - self.next_line))
        self.lines.extend(source.rstrip("\n").split("\n"))
        self.sources[self.path] = "\n".join(self.lines) + "\n"
        self.echoed = NOTHING
        # Empty lines before the input put its positions at the session's line numbers.
        padded = "\n" * (first_line - 1) + source
        try:
            program = compile_source(padded, self.path, defer_import_errors=True,
                                     echo=ECHO if self.echo else None)
            verified = load_verified(dump(program))
        except SenseError as err:
            return err
        except (SnbFormatError, VerifyError) as exc:      # a compiler bug, reported, not raised
            return SenseError(f"internal error: {exc}", path=self.path)
        if self.vm is None:
            install()
            self.vm = VM(verified, stdout=self.stdout, dry_run=self.dry_run, **self.limits)
            self.scope = Scope(self.vm.builtins, tag="module")
            self.scope.vars[ECHO] = Builtin(ECHO, self._echo, arity=1, pure=True)
            unit = self.vm.prepared
        else:
            unit = self.vm.load(verified)
        self.units.append(unit)
        budget = self.vm.budget
        if budget is not None:
            budget.reset()              # steps and time are counted per input
            budget.start_clock()
        try:
            self.vm.run_unit(unit, self.scope)
        except SenseError as err:
            return err
        finally:
            if budget is not None:
                budget.stop_clock()
            flush = getattr(self.stdout, "flush", None)
            if flush:
                flush()
        return None

    def _echo(self, vm, args):
        self.echoed = args[0]
        return None

    def render_error(self, err: SenseError, color: bool = False) -> str:
        text = "".join(render(e, self.sources.get(e.path or ""), color=color)
                       for e in (getattr(err, "errors", None) or [err]))
        return text

    def _value(self, name: str):
        scope = self.scope
        while scope is not None:
            if name in scope.vars:
                return scope.vars[name]
            scope = scope.parent
        if self.vm is None:
            from sensevm.runtime.builtins import builtin_scope
            bindings = builtin_scope().vars
            if name in bindings:
                return bindings[name]
        raise KeyError(name)

    def names(self) -> list[str]:
        names = set(self.scope.vars) if self.scope is not None else set()
        if self.vm is not None:
            names |= set(self.vm.builtins.vars)
        else:
            from sensevm.runtime.builtins import builtin_scope
            names |= set(builtin_scope().vars)
        # Bindings whose names cannot be written (`@delegation`, the statement helpers).
        return sorted(n for n in names if n.isidentifier())

    def members(self, name: str) -> list[str]:
        try:
            value = self._value(name)
        except KeyError:
            return []
        if type(value) is PreparedAction:
            return ["approve", "approved", "commit", "kind", "name", "rollback", "state", "verify"]
        if type(value) is ModuleValue:
            return sorted(value.scope.vars)
        methods = method_names(value)           # a String's, Array's or Map's (E2)
        if methods:
            return methods
        members = getattr(value, "member_names", None)
        return sorted(members()) if members else []

    def disassemble(self, name: str) -> str:
        """The listing of the function or action bound to ``name``."""
        from sensevm.bytecode.disasm import disassemble
        value = self._value(name)
        if type(value) is PreparedAction:
            value = value.definition
        if type(value) is Closure:
            code = value.code
            return disassemble(code.program, code_index=code.index)
        if type(value) is ActionDefinition:
            body = value.body
            text = disassemble(body.program, code_index=body.index)
            if value.rollback is not None:
                text += "\n" + disassemble(body.program, code_index=value.rollback.index)
            return text
        if type(value) in (ToolDefinition, AgentValue):
            body = value.body
            return disassemble(body.program, code_index=body.index)
        raise TypeError(f"'{name}' is not a function, action, tool or agent")

    def audit_lines(self) -> list[str]:
        return self.vm.audit.lines() if self.vm is not None else []

    def policy_rules(self) -> dict[str, str]:
        return P.rules_in_force(self.scope) if self.scope is not None else {}


_OPENERS, _CLOSERS = "([{", ")]}"


def needs_more(text: str) -> bool:
    """Is a (possibly multi-line) input still incomplete?

    Incomplete while brackets or a triple-quoted string are open, after a line ending in ':'
    (a block starts), and while the block goes on: a block ends only at an empty line.
    """
    depth, i, in_triple = 0, 0, False
    n = len(text)
    while i < n:
        c = text[i]
        if in_triple:
            if text.startswith('"""', i):
                in_triple = False
                i += 3
                continue
            i += 2 if c == "\\" else 1
            continue
        if c == "#":
            while i < n and text[i] != "\n":
                i += 1
            continue
        if text.startswith('"""', i):
            in_triple = True
            i += 3
            continue
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            continue
        if c in _OPENERS:
            depth += 1
        elif c in _CLOSERS:
            depth = max(depth - 1, 0)
        i += 1
    if in_triple or depth > 0:
        return True
    lines = text.split("\n")
    if text.endswith("\n") and len(lines) >= 2 and lines[-1] == "" and lines[-2].strip() == "":
        return False                                  # an empty line ends any block
    code_lines = [re.sub(r"#.*$", "", l).rstrip() for l in lines if l.strip()]
    if not code_lines:
        return False
    if code_lines[-1].endswith(":"):
        return True
    # Inside a block (more than one line, first one opened it): wait for the empty line.
    return len(code_lines) > 1 and re.sub(r"#.*$", "", lines[0]).rstrip().endswith(":") \
        and not (text.endswith("\n\n"))
