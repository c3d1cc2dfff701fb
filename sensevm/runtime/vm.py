"""The dispatch loop: runs a VerifiedProgram, one handler per opcode (frames.py holds the frames).

Sense calls never recurse in Python: a call pushes a ``Frame`` on the VM's own frame chain and
the loop continues with it, so the depth of Sense recursion is bounded by ``max_depth`` (an
ordinary, catchable Sense error) and never by the host's stack.

Each code object is prepared once into a list of ``(opcode, a, b)`` triples whose operands are
already resolved (constants, names, annotation checkers, jump targets as instruction indices),
plus a parallel list of source positions used only when an error needs one.
"""

from __future__ import annotations

import operator
import sys
from time import time as _now

_new_object = object.__new__

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing would slow every start
    from typing import Any, Optional

from sensevm.base.errors import (Pos, SenseError, SenseImportError, SenseLimitError, SenseNameError,
                                 SenseRecursionError, SenseRuntimeError, SenseSyntaxError)
from sensevm.base.errors import CATCHABLE, SenseApprovalError, SensePolicyError, SenseTypeError
from sensevm.base.name_hints import undefined_variable_message
from sensevm.bytecode.opcodes import Op, Operand
from sensevm.guard import lifecycle as L
from sensevm.guard import policy as P
from sensevm.guard import provenance as PV
from sensevm.guard.audit import AuditLog
from sensevm.guard.audit import AuditRecord
from sensevm.guard.provenance import CONTAINERS as _CONTAINERS, LABELLED as _LT
from sensevm.runtime import services
from sensevm.runtime import values as V
from sensevm.runtime.builtins import builtin_scope
from sensevm.runtime.frames import (CALLBACK_OP, DIRECT_ARITIES, DIRECT_REACH, INLINE_LIMIT,
                                    _NO_TESTS, Deoptimize, Frame, PreparedCode, TestHandler,
                                    TestResult, TryHandler, code_label)
from sensevm.runtime.limits import (DEFAULT_MAX_ARRAY, DEFAULT_MAX_DEPTH, DEFAULT_MAX_STRING,
                                    DEFAULT_MAX_WORKERS, Budget)
from sensevm.runtime.values import (ActionDefinition, AgentValue, Builtin, Closure, ErrorValue, Future,
                                    ModuleValue, PreparedAction, Scope, ToolDefinition, index_get,
                                    index_set, load_name, store_name, type_name)

DRY_RUN_BANNER = "DRY RUN — no actions will actually commit\n\n"
# The instructions that count as a step (with a step or time limit; see limits.py): every
# one that may call, besides the backward jumps.
CALL_OPS = (Op.CALL, Op.CALL_LABELED, Op.TOOL_CALL, Op.IMPORT, Op.ACTION_PREPARE,
            Op.ACTION_VERIFY, Op.ACTION_APPROVE, Op.ACTION_COMMIT, Op.ACTION_ROLLBACK)
JUMP_OPS = (Op.POP_JUMP_IF_FALSE, Op.POP_JUMP_IF_TRUE, Op.JUMP_IF_FALSE_OR_POP,
            Op.JUMP_IF_TRUE_OR_POP, Op.FOR_ITER)

_LOAD_NAME, _LOAD_CONST, _STORE_NAME, _POP_JUMP_IF_FALSE, _JUMP = (
    int(Op.LOAD_NAME), int(Op.LOAD_CONST), int(Op.STORE_NAME), int(Op.POP_JUMP_IF_FALSE),
    int(Op.JUMP))
_PUSH_SCOPE, _POP_SCOPE, _ADD, _DIV, _MOD, _GE = (
    int(Op.PUSH_SCOPE), int(Op.POP_SCOPE), int(Op.ADD), int(Op.DIV), int(Op.MOD), int(Op.GE))
# Under a pc label these store the top of the stack (_PC_STORES) or hand values to a callee
# (_PC_CALLS: the operand counts them).
_PC_STORES = frozenset(int(op) for op in (Op.STORE_NAME, Op.STORE_LOCAL, Op.STORE_INDEX,
                                          Op.RETURN))
_PC_CALLS = frozenset(int(op) for op in (Op.CALL, Op.CALL_LABELED, Op.ACTION_PREPARE,
                                         Op.TOOL_CALL))
_CALL_LABELED = int(Op.CALL_LABELED)
# ADD .. GE on two Ints, except DIV (always a Float, checked for zero) and MOD by zero.
_INT_OPS = {int(Op.ADD): operator.add, int(Op.SUB): operator.sub, int(Op.MUL): operator.mul,
            int(Op.MOD): operator.mod, int(Op.EQ): operator.eq,
            int(Op.NE): operator.ne, int(Op.LT): operator.lt, int(Op.LE): operator.le,
            int(Op.GT): operator.gt, int(Op.GE): operator.ge}

# Execution tiers (see tier2.py): 1 = the dispatch loop only; 2 = every code object that tier 2
# accepts runs as compiled Python from its first instruction; auto = compile a code object once
# it is hot (HOT_THRESHOLD frame entries plus loop back-edges). SENSE_TIER sets the default.
TIERS = ("1", "2", "auto")
HOT_THRESHOLD = 32


def default_tier() -> str:
    import os
    tier = os.environ.get("SENSE_TIER", "auto") or "auto"
    if tier not in TIERS:
        raise ValueError(f"SENSE_TIER must be one of {', '.join(TIERS)}, not {tier!r}")
    return tier


def _scope_hints(closure, scope=None) -> dict:
    """What tier 2's compile_code is told of the scopes a function was declared in: the
    names bound there and one scope out, now (a top-level function's globals and builtins);
    and where to guess what its calls call: ``scope``, the frame's when it has one, else the
    closure's."""
    hints = {} if scope is None else {"callees": scope}
    if closure is None:
        return hints
    outer = closure.scope
    hints["present"] = outer.vars
    hints["grand"] = outer.parent.vars if outer.parent is not None else ()
    hints.setdefault("callees", outer)
    return hints


class VM:
    """One interpreter: a program, its builtins, its modules, its audit log and test results."""

    def __init__(self, verified, *, stdout=None, max_depth: int = DEFAULT_MAX_DEPTH,
                 max_array: int = DEFAULT_MAX_ARRAY, dry_run: bool = False,
                 audit: Optional[AuditLog] = None, stdin=None,
                 state_dir: Optional[str] = None, tier: Optional[str] = None,
                 max_string: int = DEFAULT_MAX_STRING, max_steps: Optional[int] = None,
                 timeout: Optional[float] = None, second_look: bool = True,
                 dry_run_allow=frozenset(), max_workers: int = DEFAULT_MAX_WORKERS):
        from sensevm.bytecode.verify import VerifiedProgram
        if not isinstance(verified, VerifiedProgram):
            raise TypeError("the VM runs only a VerifiedProgram (see sensevm.bytecode.verify)")
        # Int is unbounded (spec 4.1), including its decimal form.
        sys.set_int_max_str_digits(0)
        self.verified = verified
        self.program = verified.program
        self.out = stdout if stdout is not None else sys.stdout
        self.max_depth = max_depth
        self.direct_cap = max_depth - DIRECT_REACH       # (see frames.DIRECT_BOUND)
        self.max_array = max_array
        self.max_string = max_string
        self.max_workers = max_workers
        self.workers = None     # async bodies running (workers.Workers), made by worker()
        # Steps and time are counted only when limited (docs/limits.md): shared with workers.
        self.budget = (Budget(max_steps, timeout)
                       if max_steps is not None or timeout is not None else None)
        self.dry_run = dry_run
        # The host capabilities a dry run may still use (--dry-run-allow; policy.py).
        self.dry_run_allow = frozenset(dry_run_allow)
        self.audit = audit if audit is not None else AuditLog()
        self.stdin = stdin if stdin is not None else sys.stdin
        self.worker_agent = None        # on an async agent's worker: that agent
        self.state_dir = state_dir      # where paused agents are saved (--state-dir)
        self.agents: list = []
        self.mcp_servers: list = []     # connect_mcp()'s servers, closed when run() ends
        self.sessions: list = []        # open protocol sessions, innermost last (sessions.py)
        self.session_counts: dict = {}  # sessions opened so far, by name
        self.session_approver = None    # the host's verdict on a session left undecided
        self.session_log_path: Optional[str] = None     # the sessions' write-ahead log
        self._session_log = None
        # A run on Temporal: the journal of fired effects (runtime/journal.py), which tool
        # bodies and action bodies consult before they start; None everywhere else.
        self.journal = None
        self.tests: list[TestResult] = []
        self.test_filter = None   # `sensevm test -k`: which test names run (None: all)
        self.tests_skipped = 0
        self.request = None             # user_request(): the run's --request, labelled user
        self.args = []                  # std.env.args(): the words after `--`, labelled user
        self.builtins = builtin_scope()
        self.denials = P.Denials()      # (shared with the workers, as copy.copy shares it)
        # The second look (secondlook.py): None when switched off for a comparison run.
        if second_look:
            from sensevm.guard.secondlook import SecondLook
            self.look = SecondLook()
        else:
            self.look = None
        self.prepared = self.load(verified)
        self.modules: dict[str, ModuleValue] = {}      # by absolute path: a module runs once
        self.loading: set[ModuleValue] = set()
        self.frame: Optional[Frame] = None
        self.depth = 0
        self.result: Any = None
        self.inlined = 0
        self.deopts = 0         # times direct forms became frames (tier2.Compiled; tests read it)
        self.tier = default_tier() if tier is None else str(tier)
        if self.tier not in TIERS:
            raise ValueError(f"tier must be one of {', '.join(TIERS)}, not {tier!r}")
        self.handlers = self._handler_table()

    # ------------------------------------------------------------------ preparation

    def load(self, verified) -> list:
        """Prepare every code object of a verified program; returns the unit (list) of them."""
        from sensevm.bytecode.verify import VerifiedProgram
        if not isinstance(verified, VerifiedProgram):
            raise TypeError("the VM runs only a VerifiedProgram (see sensevm.bytecode.verify)")
        program = verified.program
        unit = [self._prepare(program, vc) for vc in verified.codes]
        if self.look is not None:
            self.look.add_unit(unit)
        for i, prepared in enumerate(unit):
            prepared.index = i
            prepared.unit = unit
            prepared.program = program
        return unit

    def _prepare(self, program, vcode) -> PreparedCode:
        code = vcode.code
        checkers: dict[str, Any] = {}

        def checker(text):
            if text not in checkers:
                checkers[text] = V.make_checker(text)
            return checkers[text]

        instrs, positions = [], []
        # The verifier guarantees positions sit on instruction starts, in order: one lookup each.
        at_offset = {off: Pos(line, col) for off, line, col in code.positions}
        for ins in vcode.instructions:
            resolved = []
            for kind, value in zip(ins.op.operands, ins.args):
                if kind is Operand.CONST:
                    resolved.append(program.constants[value])
                elif kind is Operand.NAME:
                    resolved.append(program.strings[value])
                elif kind is Operand.TYPE:
                    text = program.strings[value]
                    resolved.append((text, checker(text)))
                elif kind is Operand.TARGET:
                    resolved.append(vcode.index_of[value])
                else:
                    resolved.append(value)
            while len(resolved) < 2:
                resolved.append(None)
            instrs.append((ins.op.value, resolved[0], resolved[1]))
            pos = at_offset.get(ins.offset)
            positions.append(pos if pos is not None else code.position_at(ins.offset))
        path = program.sources[code.source].path if program.sources else "<input>"
        # Only the annotated parameters, each as (index, name, annotation, check, exact type):
        # a value of the exact type (values.exact_type; None if there is none) needs no check.
        param_checks = tuple((i, name, text, checker(text), V.exact_type(text))
                             for i, (name, text) in enumerate(zip(code.params, code.param_types))
                             if text is not None)
        return_check = ((code.return_type, checker(code.return_type),
                         V.exact_type(code.return_type)) if code.return_type else None)
        return PreparedCode(code, instrs, positions, path, param_checks, return_check)

    # ------------------------------------------------------------------ running

    def write(self, text: str) -> None:
        self.out.write(text)

    def _write_lines(self, lines: list, if_none: str) -> None:
        """Write ``lines``, each ending in a newline (``if_none`` when there are none), a few
        thousand at a time: a long summary joined whole would be held two or three times over
        (text, encoded bytes), costing fresh memory and its page faults for nothing."""
        if not lines:
            self.write(if_none + "\n")
        for start in range(0, len(lines), 2048):
            self.write("\n".join(lines[start:start + 2048]) + "\n")

    def run(self) -> Any:
        """Run the program's main module to completion; a Sense error propagates to the caller.

        A dry run's stdout is framed as spec 14 says: the banner first, and after a program
        that finished, the summary of every audit line (no summary after an error).
        """
        budget = self.budget
        if budget is not None:
            budget.start_clock()
        try:
            if self.dry_run:
                self.write(DRY_RUN_BANNER)
            result = self._run_main()
            self.save_paused_agents()
            if self.dry_run:
                self.write("\n--- dry run summary ---\n")
                self._write_lines(self.audit.lines(), "(no actions were prepared)")
            return result
        finally:
            if budget is not None:
                budget.stop_clock()
            if self.mcp_servers:
                services.close_servers(self.mcp_servers)

    @property
    def steps(self) -> Optional[int]:
        """Steps taken so far, when steps are counted (a step or time limit is set)."""
        return self.budget.steps if self.budget is not None else None

    def _run_main(self) -> Any:
        scope = Scope(self.builtins, tag="module")
        return self.run_unit(self.prepared, scope)

    def run_unit(self, unit: list, scope: Scope) -> Any:
        """Run a unit's entry code in ``scope`` (a fresh module scope, or the REPL's)."""
        entry = unit[unit[0].program.entry]
        main = ModuleValue("__main__", entry.path, scope)
        self.frame = Frame(entry, scope, None, module=main)
        self.depth = 1
        self._loop()
        return self.result

    def _loop(self) -> None:
        handlers = self.handlers
        tiered = self.tier != "1"
        budget = self.budget
        # JUMP is done in the loop only when nothing counts it (tier 2's heat, a step budget).
        jumps = not tiered and budget is None
        V.set_limits(self.max_string, self.max_array, budget)
        while self.frame is not None:
            frame = self.frame
            try:
                if frame.pc is not None:
                    self._run_tainted(frame)
                    continue
                gen = frame.gen
                if gen is not None:
                    if frame.gvm is self:
                        next(gen, None)
                        continue
                    # Made by another VM (a worker thread resumed it): the frame is spilled,
                    # so tier 1 continues it here.
                    frame.gen = None
                elif tiered and frame.ip == 0 and self._tier2(frame):
                    continue
                # The hot state lives in locals: ``ip`` is written back to the frame before
                # any handler runs (handlers, errors and saves read frame.ip), and the most
                # frequent instructions are done right here instead of through the table.
                instrs = frame.instrs
                stack = frame.stack
                ip = frame.ip
                while True:
                    op, a, b = instrs[ip]
                    ip += 1
                    if op == _LOAD_NAME:
                        scope = frame.scope
                        while scope is not None:
                            bindings = scope.vars
                            if a in bindings:
                                stack.append(bindings[a])
                                break
                            scope = scope.parent
                        else:
                            frame.ip = ip
                            raise SenseNameError(undefined_variable_message(a))
                        continue
                    if op == _LOAD_CONST:
                        stack.append(a)
                        continue
                    if op == _STORE_NAME:
                        value = stack.pop()
                        scope = frame.scope
                        while scope is not None:
                            bindings = scope.vars
                            if a in bindings:
                                bindings[a] = value
                                break
                            scope = scope.parent
                        else:
                            frame.scope.vars[a] = value
                        continue
                    if op == _POP_JUMP_IF_FALSE:
                        value = stack.pop()
                        if value is True or value is False or type(value) not in _LT and (
                                type(value) not in _CONTAINERS or not PV.live):
                            if not value:
                                if a < ip and budget is not None:     # backward: a step
                                    frame.ip = ip
                                    self.count_step()
                                ip = a
                            continue
                        stack.append(value)     # influenced: the handler opens a pc label
                    if op == _JUMP and jumps:
                        ip = a
                        continue
                    if _ADD <= op <= _GE and op != _DIV:
                        # Int operands: the result Python gives is the Sense result.
                        right = stack[-1]
                        left = stack[-2]
                        if type(left) is int and type(right) is int and (right or op != _MOD):
                            del stack[-1]
                            try:
                                stack[-1] = _INT_OPS[op](left, right)
                            except MemoryError:     # (placed at this instruction)
                                frame.ip = ip
                                raise
                            continue
                    elif op == _PUSH_SCOPE:
                        frame.scope = Scope(frame.scope)
                        continue
                    elif op == _POP_SCOPE and a == 1 and not frame.tests:
                        frame.scope = frame.scope.parent
                        continue
                    frame.ip = ip
                    if handlers[op](frame, a, b):
                        break
                    ip = frame.ip
            except SenseError as err:
                self._unwind(err)
            except RecursionError:
                # Only deeply nested values (printing or comparing arrays nested thousands deep)
                # can exhaust the host stack; calls never do.
                self._unwind(SenseRecursionError())
            except MemoryError:
                self._unwind(SenseRuntimeError("out of memory", located=False))

    def _unwind(self, err: SenseError) -> None:
        """Find the innermost running test or try block (in this frame or a caller) or
        re-raise. A try block resumes at its handler with the Error on the stack."""
        frame = self.frame
        if frame is not None:
            err.with_pos(frame.pos, frame.prepared.path)
        # A limit stops the program: no test or try block catches it, no finally block runs.
        catchable = not isinstance(err, SenseLimitError)
        if self.sessions:
            self._abort_sessions_left(frame, catchable)
        branched = err.origins      # what the error's happening may depend on (see below)
        while frame is not None:
            if frame.pc:
                for _join, origins, _depth in frame.pc:
                    branched = PV.union(branched, origins)
            if frame.tests and catchable:
                frame.gen = None
                handler = frame.tests.pop()
                del frame.stack[handler.depth:]
                frame.scope = handler.scope
                frame.ip = handler.target
                self.frame = frame
                if type(handler) is TryHandler:
                    frame.stack.append(ErrorValue(err))
                    self._handled_under(frame, handler, branched)
                else:
                    self.tests.append(TestResult(handler.name, False, err, frame.prepared.path,
                                                 handler.pos))
                return
            code = frame.prepared.code
            if code.kind is not None:   # (a method's callback frame is the method's call)
                err.left(frame.prepared.path, frame.pos.line, code_label(code))
            if frame.module is not None:
                # A module that failed half-way may be imported again later (a test block
                # caught the error): it is no longer "loading".
                self._forget_loading(frame)
            elif frame.role is not None:
                self._body_failed(frame, err)
            frame = frame.caller
            self.depth -= 1
        self.frame = None
        raise err

    def _handled_under(self, frame, handler: TryHandler, origins) -> None:
        """Whether a handler runs is a branch on whatever made the error happen: the values
        its message quotes and the branches open where it was raised (in this frame and in
        every frame it left). Influenced, that opens a pc label on the handler's frame, up to
        where the try statement's paths join again (the frame's end if they never do), so
        that nothing the handler stores comes out clean (vm.py ``_branch``)."""
        if not PV.is_influenced(origins):
            return
        join = _joins(frame.prepared).join(handler.begin)
        pc = frame.pc
        if pc is None:
            pc = frame.pc = []
        elif pc:
            origins = PV.union(origins, pc[-1][1])
        pc.append((-1 if join is None else join, origins, handler.depth))

    def _abort_sessions_left(self, frame, catchable: bool = True) -> None:
        """Every protocol session the error leaves (outside the block that catches it) aborts:
        those opened in the frames it unwinds, and in the catching frame outside its handler."""
        from sensevm.runtime.sessions import abort_left
        left = set()
        while frame is not None and (not frame.tests or not catchable):
            left.add(frame)
            frame = frame.caller
        abort_left(self, left, frame, frame.tests[-1].scope if frame is not None else None)

    def _forget_loading(self, frame: Frame) -> None:
        if frame.module in self.loading:
            self.loading.discard(frame.module)
            for index, module in list(self.modules.items()):
                if module is frame.module:
                    del self.modules[index]

    # ------------------------------------------------------------------ calls

    def _call(self, frame: Frame, callee, args: list) -> bool:
        """Call ``callee``; returns True when a new frame was pushed. ``args`` is a list no one
        else holds (a prepared action keeps it): every caller makes one per call (CALL slices
        the stack; tier 2 and the Array methods write a display)."""
        t = type(callee)
        if t is Closure:
            self._enter_closure(frame, callee, args)
            return True
        if t is ActionDefinition:
            frame.stack.append(self.prepare(frame, callee, args))
            return False
        if t is ToolDefinition:
            return self.call_tool(frame, callee, args)
        if t is Builtin:
            if callee.arity is not None and len(args) != callee.arity:
                raise V.arity_error(callee.name, callee.arity, args)
            if callee.frames:
                return callee.fn(self, frame, args)
            frame.stack.append(callee.fn(self, args))
            return False
        sense_call = getattr(callee, "sense_call", None)
        if sense_call is not None:
            return sense_call(self, frame, args)
        raise SenseRuntimeError(f"value of type {type_name(callee)} is not callable")

    def _bind_call(self, callee: Closure, args: list) -> Scope:
        """Spec 6: check the arity, then each annotated parameter, then the depth; return the
        new scope of the call, its parameters bound."""
        prepared = callee.code
        params = prepared.code.params
        if len(args) != len(params):
            raise V.arity_error(callee.name, len(params), args)
        scope = Scope(callee.scope)
        bindings = scope.vars
        for i, name, text, check, exact in prepared.param_checks:
            if type(args[i]) is not exact and not check(args[i]):
                raise V.param_error(name, callee.name, text, args[i])
        for name, value in zip(params, args):
            bindings[name] = value
        if self.depth >= self.max_depth:
            raise SenseRecursionError()
        return scope

    def _enter_closure(self, frame: Frame, callee: Closure, args: list) -> Frame:
        """Check a call of a ``def`` function and push its frame."""
        scope = self._bind_call(callee, args)
        self.depth += 1
        new = self.frame = Frame(callee.code, scope, frame, callee)     # positional: cheaper
        return new

    def call_t2(self, frame: Frame, callee, args: list) -> bool:
        """A call made by tier-2 code (its frame spilled); True when it must yield to the loop.

        A ``def`` function whose code is in tier 2 runs right here: its direct form as a plain
        Python call when it has one (tier2.Compiled), else its generator (see call_frame).
        """
        if type(callee) is not Closure:
            return self._call(frame, callee, args) and not self.inline(frame)
        n = len(args)
        direct = callee.code.dx[n] if n < DIRECT_ARITIES else None
        if direct is not None:
            try:
                d = self.depth + 1      # (the bound: frames.DIRECT_BOUND)
                frame.stack.append(direct(self, callee, d, d + DIRECT_REACH if d < self.direct_cap
                                          else self.max_depth, *args))
                return False
            except Deoptimize as stop:
                if stop.top is not None:
                    # The callee's activations are frames now, the innermost current: the
                    # loop continues them, and the outermost returns into ``frame``.
                    stop.top.caller = frame
                    self.depth = stop.depth
                    return True
                # Refused before it was entered: called with a frame.
        return self.call_frame(frame, callee, args)

    def call_frame(self, frame: Frame, callee: Closure, args: list) -> bool:
        """Call a ``def`` function from tier-2 code with a frame, and run the frame's generator
        right here when it has one (up to INLINE_LIMIT deep); True when it must yield."""
        new = self._enter_closure(frame, callee, args)
        if self.inlined >= INLINE_LIMIT:
            return True
        t2 = callee.code.t2
        if t2 is None or t2 is False:
            t2 = self._compiled(callee.code, callee)
            if t2 is None:
                return True
        gen = new.gen = t2.fn(self, new, 0)
        new.gvm = self
        self.inlined += 1
        try:
            next(gen, None)
        finally:
            self.inlined -= 1
        return self.frame is not frame

    # ------------------------------------------------------------------ the handlers

    def _handler_table(self):
        table = [None] * 256
        for op in Op:
            handler = getattr(self, "op_" + op.name, None)
            if handler is None:
                raise NotImplementedError(f"the VM has no handler for {op.name}")
            table[op.value] = handler
        # A callback frame's one instruction (methods.py): no program holds it. It counts the
        # steps of the calls it makes itself.
        table[CALLBACK_OP] = self.op_CALLBACK
        if self.tier != "1":
            # Backward jumps count towards tier 2 and can switch a running frame over to it.
            table[Op.JUMP] = self.op_JUMP_counting
        if self.budget is not None:
            # A step or time limit: backward jumps and calls count (tier 2 counts the same
            # steps in its own code, and calls these for everything else).
            table[Op.JUMP] = self._counted_jump(table[Op.JUMP], True)
            for op in JUMP_OPS:
                table[op] = self._counted_jump(table[op], False)
            for op in CALL_OPS:
                table[op] = self._counted_call(table[op])
        return table

    def count_step(self) -> None:
        """Count one step; the limit error when the budget is spent or the time is up."""
        budget = self.budget
        budget.left -= 1
        if budget.left < 0:
            raise budget.exceeded()

    def _counted_call(self, handler):
        budget = self.budget

        def counted(f, a, b):
            budget.left -= 1
            if budget.left < 0:
                raise budget.exceeded()
            return handler(f, a, b)
        return counted

    def _counted_jump(self, handler, always: bool):
        """A jump handler that counts a step when it jumps backward (before JUMP jumps, so an
        error is placed at the jump; a conditional jump is counted once it has decided)."""
        budget = self.budget
        if always:
            def counted(f, a, b):
                if a < f.ip:
                    budget.left -= 1
                    if budget.left < 0:
                        raise budget.exceeded()
                return handler(f, a, b)
            return counted

        def counted_if(f, a, b):
            ip = f.ip
            result = handler(f, a, b)
            if a < ip and f.ip == a:
                budget.left -= 1
                if budget.left < 0:
                    f.ip = ip
                    raise budget.exceeded()
            return result
        return counted_if

    # ------------------------------------------------------------------ tier 2

    def _compiled(self, code, closure=None, frame=None):
        """The tier-2 form of ``code`` if it is (now) hot enough and tier 2 accepts it; the
        bindings of ``closure``'s scope, when given, are a hint to the generated code's loads,
        and those of ``frame``'s to its calls."""
        t2 = code.t2
        if t2 is None:
            code.heat += 1
            if self.tier == "auto" and code.heat < HOT_THRESHOLD:
                return None
            from sensevm.runtime.tier2 import compile_code
            hints = _scope_hints(closure, None if frame is None else frame.scope)
            t2 = code.t2 = compile_code(code, counting=self.budget is not None,
                                        max_array=self.max_array, max_string=self.max_string,
                                        hot=code.hot, **hints) or False
            if t2 and t2.direct is not None:
                t2.set_direct(code, t2.direct)
        return t2 or None

    def retier(self, frame) -> None:
        """Called by ``frame``'s generator, spilled at a loop header, after that loop has run
        long in its general version (tier2.HOT_TURNS turns): make the code's tier-2 form again
        with the larger budget for Int versions, once per code object, and go on in it from
        the header (or in tier 1, if it declines now). The direct form made already stays."""
        from sensevm.runtime.tier2 import compile_code
        code = frame.prepared
        old = code.t2
        if not code.hot:
            code.hot = True
            new = compile_code(code, counting=self.budget is not None, max_array=self.max_array,
                               max_string=self.max_string, hot=True,
                               **_scope_hints(frame.closure, frame.scope))
            if new:
                if old:
                    new.direct, new.direct_source = old.direct, old.direct_source
                code.t2 = new
        t2 = code.t2
        frame.gen = t2.fn(self, frame, frame.ip) if t2 and frame.ip in t2.entries else None

    def _tier2(self, frame) -> bool:
        """Start ``frame`` in tier 2 at its current instruction if possible."""
        if frame.pc is not None:
            return False        # pc labels live in tier 1 only
        t2 = self._compiled(frame.prepared, frame.closure, frame)
        if t2 is None or frame.ip not in t2.entries:
            return False
        frame.gen = t2.fn(self, frame, frame.ip)
        frame.gvm = self
        return True

    def inline(self, caller) -> bool:
        """Run the frame ``caller`` just pushed, here, while it stays in tier 2; True when it
        has already returned to ``caller`` (its result is on caller.stack).

        Otherwise (it pushed a frame of its own, paused, or is not tier-2 code) the caller
        yields to the loop as usual, which continues whatever frame is current.
        """
        frame = self.frame
        if frame is None or self.inlined >= INLINE_LIMIT:
            return False
        gen = frame.gen
        if gen is None or frame.gvm is not self:
            if frame.ip != 0 or not self._tier2(frame):
                return False
            gen = frame.gen
        elif gen.gi_running:
            return False        # control went back to a frame further up this Python stack
        self.inlined += 1
        try:
            next(gen, None)
        finally:
            self.inlined -= 1
        return self.frame is caller

    def op_JUMP_counting(self, f, a, b):
        back = a < f.ip
        f.ip = a
        if back and f.prepared.t2 is not False:
            return self._tier2(f)
        return False

    def op_NOP(self, f, a, b):
        pass

    def op_LOAD_CONST(self, f, a, b):
        f.stack.append(a)

    def op_LOAD_NIL(self, f, a, b):
        f.stack.append(None)

    def op_LOAD_TRUE(self, f, a, b):
        f.stack.append(True)

    def op_LOAD_FALSE(self, f, a, b):
        f.stack.append(False)

    def op_POP(self, f, a, b):
        f.stack.pop()

    def op_DUP(self, f, a, b):
        f.stack.append(f.stack[-1])

    def op_LOAD_NAME(self, f, a, b):
        f.stack.append(load_name(f.scope, a))

    def op_STORE_NAME(self, f, a, b):
        store_name(f.scope, a, f.stack.pop())

    def op_STORE_LOCAL(self, f, a, b):
        f.scope.vars[a] = f.stack.pop()

    def op_CHECK_DECL(self, f, a, b):
        text, check = b
        value = f.stack[-1]
        if not check(value):
            raise V.decl_error(a, text, value)

    def op_PUSH_SCOPE(self, f, a, b):
        f.scope = Scope(f.scope)

    def op_POP_SCOPE(self, f, a, b):
        scope = f.scope
        tests = f.tests
        if tests and PV.live and type(tests[-1]) is TryHandler:
            # A block of a running try body closes: keep what its bindings came from.
            handler = tests[-1]
            inner = scope
            for _ in range(a):
                for value in inner.vars.values():
                    handler.seen = PV.union(handler.seen, PV.deep_origins(value))
                inner = inner.parent
        for _ in range(a):
            scope = scope.parent
        f.scope = scope

    def op_ADD(self, f, a, b):
        stack = f.stack
        right = stack.pop()
        left = stack[-1]
        if type(left) is int and type(right) is int:
            stack[-1] = left + right
        else:
            stack[-1] = V.add(left, right)

    def op_SUB(self, f, a, b):
        stack = f.stack
        right = stack.pop()
        stack[-1] = V.arith("-", stack[-1], right)

    def op_MUL(self, f, a, b):
        stack = f.stack
        right = stack.pop()
        stack[-1] = V.arith("*", stack[-1], right)

    def op_DIV(self, f, a, b):
        stack = f.stack
        right = stack.pop()
        stack[-1] = V.arith("/", stack[-1], right)

    def op_MOD(self, f, a, b):
        stack = f.stack
        right = stack.pop()
        stack[-1] = V.arith("%", stack[-1], right)

    def op_EQ(self, f, a, b):
        stack = f.stack
        right = stack.pop()
        stack[-1] = V.equal(stack[-1], right)

    def op_NE(self, f, a, b):
        stack = f.stack
        right = stack.pop()
        stack[-1] = V.not_equal(stack[-1], right)

    def op_LT(self, f, a, b):
        stack = f.stack
        right = stack.pop()
        stack[-1] = V.compare("<", stack[-1], right)

    def op_LE(self, f, a, b):
        stack = f.stack
        right = stack.pop()
        stack[-1] = V.compare("<=", stack[-1], right)

    def op_GT(self, f, a, b):
        stack = f.stack
        right = stack.pop()
        stack[-1] = V.compare(">", stack[-1], right)

    def op_GE(self, f, a, b):
        stack = f.stack
        right = stack.pop()
        stack[-1] = V.compare(">=", stack[-1], right)

    def op_NEG(self, f, a, b):
        f.stack[-1] = V.negate(f.stack[-1])

    def op_NOT(self, f, a, b):
        value = f.stack[-1]
        if type(value) in _LT:
            f.stack[-1] = PV.negation(value)
        elif type(value) in _CONTAINERS:
            f.stack[-1] = PV.container_negation(value)
        else:
            f.stack[-1] = not value

    def op_JUMP(self, f, a, b):
        f.ip = a

    # A conditional jump on a labelled value whose origins are influenced opens a pc label
    # (see _run_tainted): each returns True then, so the loop continues the frame there.

    def op_POP_JUMP_IF_FALSE(self, f, a, b):
        value = f.stack.pop()
        if type(value) in _LT:
            tainted = self._branch(f, value, len(f.stack))
            if not PV.plain(value):
                f.ip = a
            return tainted
        # (An Array or Map, empty or not: how long it is can be the data's.)
        tainted = type(value) in _CONTAINERS and PV.live and self._branch(f, value, len(f.stack))
        if not value:
            f.ip = a
        return tainted

    def op_POP_JUMP_IF_TRUE(self, f, a, b):
        value = f.stack.pop()
        if type(value) in _LT:
            tainted = self._branch(f, value, len(f.stack))
            if PV.plain(value):
                f.ip = a
            return tainted
        tainted = type(value) in _CONTAINERS and PV.live and self._branch(f, value, len(f.stack))
        if value:
            f.ip = a
        return tainted

    def op_JUMP_IF_FALSE_OR_POP(self, f, a, b):
        value = f.stack[-1]
        tainted = (type(value) in _LT or type(value) in _CONTAINERS) and self._branch(
            f, value, len(f.stack) - 1)
        if not (PV.plain(value) if tainted else value):
            f.ip = a
        else:
            f.stack.pop()
        return tainted

    def op_JUMP_IF_TRUE_OR_POP(self, f, a, b):
        value = f.stack[-1]
        tainted = (type(value) in _LT or type(value) in _CONTAINERS) and self._branch(
            f, value, len(f.stack) - 1)
        if PV.plain(value) if tainted else value:
            f.ip = a
        else:
            f.stack.pop()
        return tainted

    # ------------------------------------------------------------------ pc labels
    # Branching on an influenced value influences everything the branch stores: an address
    # rebuilt character by character under `if c == "a"` must not come out clean. A branch
    # opens a pc label on its frame that lasts until control reaches the branch's immediate
    # post-dominator (its join point); meanwhile the frame runs in _run_tainted, which labels
    # every value stored, returned or handed to a call, and frames called from there carry the
    # label for their whole activation. Values still on the stack at the join (the result of
    # `a and b`) get it too.

    def _branch(self, f, value, depth) -> bool:
        origins = PV.origins_of(value) if type(value) in _LT else PV.emptiness_origins(value)
        if not PV.is_influenced(origins):
            return False
        joins = _joins(f.prepared)
        join = joins.join(f.ip - 1)
        pc = f.pc
        join = -1 if join is None else join
        if pc is None:
            pc = f.pc = []
        elif pc:
            top = pc[-1]
            if top[0] == join and top[2] <= depth and origins <= top[1]:
                return True         # a loop's condition again: the open label covers it
            origins = PV.union(origins, top[1])
        pc.append((join, origins, depth))
        # The arm not taken: a variable either arm may assign holds, at the join, what the
        # condition chose, assigned or not; labelled now, in its binding, since labels only
        # add and a store under the label labels anything newer (no state to keep or save).
        _label_bound(f.scope, joins.stores(f.ip - 1), origins)
        # ... and so does an Array or Map either arm may change in place (`push(a, x)`,
        # `a[i] = x`, in a function it calls too): left as it was, it says as much.
        _label_changed(f.scope, joins.changed(f.ip - 1), origins)
        f.gen = None        # tier 2 keeps no pc labels: the frame continues in tier 1
        return True

    def _run_tainted(self, frame) -> None:
        """Run ``frame`` while it has pc labels, one instruction at a time through the handlers,
        labelling what it stores; returns when its labels close or another frame is current."""
        handlers = self.handlers
        instrs = frame.instrs
        pc = frame.pc
        label = PV.label
        while True:
            ip = frame.ip
            stack = frame.stack
            while pc and pc[-1][0] == ip:
                _, origins, depth = pc.pop()
                for k in range(depth, len(stack)):
                    stack[k] = label(stack[k], origins)
            if not pc:
                frame.pc = None
                return
            origins = pc[-1][1]
            op, a, b = instrs[ip]
            if op in _PC_STORES:
                stack[-1] = label(stack[-1], origins)
            elif op in _PC_CALLS:
                n = a if op != _CALL_LABELED else a + 2 * b
                for k in range(len(stack) - n, len(stack)):
                    stack[k] = label(stack[k], origins)
            frame.ip = ip + 1
            if handlers[op](frame, a, b):
                new = self.frame
                if new is not None and new is not frame and new.pc is None and (
                        new.caller is frame or new.origin is frame):
                    new.pc = [(-1, origins, 0)]
                return

    def op_BUILD_ARRAY(self, f, a, b):
        stack = f.stack
        if a > self.max_array:      # (tier 2 compiles no inline form for such a literal)
            raise V.array_limit(a, self.max_array)
        if a:
            items = stack[-a:]
            del stack[-a:]
        else:
            items = []
        stack.append(items)

    def op_BUILD_MAP(self, f, a, b):
        stack = f.stack
        if a:
            flat = stack[-2 * a:]
            del stack[-2 * a:]
            stack.append(V.build_map(flat))
        else:
            stack.append({})

    def op_CALLBACK(self, f, a, b):
        # (A resumed agent's callback frame was made by persist.py: methods.py may be new.)
        return (_methods or _load_methods()).step(self, f)

    def op_INDEX(self, f, a, b):
        stack = f.stack
        index = stack.pop()
        stack[-1] = index_get(stack[-1], index)

    def op_STORE_INDEX(self, f, a, b):
        stack = f.stack
        value = stack.pop()
        index = stack.pop()
        index_set(stack[-1], index, value)
        stack[-1] = value

    def op_SLICE(self, f, a, b):
        stack = f.stack
        hi = stack.pop()
        lo = stack.pop()
        stack[-1] = V.slice_get(stack[-1], lo, hi, a)

    def op_CONTAINS(self, f, a, b):
        stack = f.stack
        container = stack.pop()
        stack[-1] = V.contains(stack[-1], container)

    def op_FORMAT_VALUE(self, f, a, b):
        f.stack[-1] = V.str_form(f.stack[-1])

    def op_BUILD_STRING(self, f, a, b):
        stack = f.stack
        if a:
            parts = stack[-a:]
            del stack[-a:]
        else:
            parts = []
        stack.append(V.join_strings(parts))

    def op_DUP2(self, f, a, b):
        stack = f.stack
        stack.extend(stack[-2:])

    def op_GET_MEMBER(self, f, a, b):
        f.stack[-1] = self.member(f.stack[-1], a)

    def member(self, obj, name: str):
        t = type(obj)
        if t is ModuleValue:
            bindings = obj.scope.vars
            if name not in bindings:
                raise SenseRuntimeError(f"module '{obj.name}' has no member '{name}'")
            return bindings[name]
        if t is str or t is list or t is dict or t is PV.LStr:
            return (_methods or _load_methods()).bound(obj, name)      # EXTENSIONS.md E2
        getter = getattr(obj, "sense_member", None)
        if getter is None:
            raise SenseRuntimeError(f"cannot access member '{name}' on type {type_name(obj)}")
        return getter(self, name)

    def op_GET_ITER(self, f, a, b):
        f.stack[-1] = V.get_iter(f.stack[-1])

    def op_FOR_ITER(self, f, a, b):
        it = f.stack[-1]
        origins = it.origins
        if PV.SHAPES and type(it) is V.ArrayIterator:
            # (Read at every pass: the loop may make the Array's length the data's, pushing
            # onto it under a labelled branch.)
            origins = PV.union(origins, PV.length_origins(it.items))
        if it.i < len(it.items):
            item = it.items[it.i]
            if origins and type(it) is V.ArrayIterator:
                # After a tool's elements, which element comes at this pass is the tool's.
                where = PV.position_origins(it.items, it.i)
                if where:
                    item = PV.label(item, where)
            f.stack.append(item)
            it.i += 1
            if type(item) in _LT:
                # A labelled item (range() of a tool's count, a page's characters) is why the
                # loop goes on: what the body stores is labelled, as under a labelled `while`
                # condition; the label closes where the loop exits.
                return self._branch(f, item, len(f.stack) - 2)
        else:
            f.stack.pop()
            if origins:
                # How many passes there were (none, for a tool's empty list) was the data's:
                # what the body would have assigned is labelled, as at a labelled `while`
                # test that fails (the label closes at once, at the exit).
                opened = self._branch(f, PV.label(False, origins), len(f.stack))
                f.ip = a
                return opened
            f.ip = a

    def op_MAKE_FUNCTION(self, f, a, b):
        code = f.prepared.unit[a]
        f.stack.append(Closure(code, f.scope, code.code.name))

    def op_CALL(self, f, a, b):
        stack = f.stack
        if a:
            args = stack[-a:]
            del stack[-a:]
        else:
            args = []
        return self._call(f, stack.pop(), args)

    def op_CALL_LABELED(self, f, a, b):
        stack = f.stack
        pairs = stack[len(stack) - 2 * b:]
        del stack[len(stack) - 2 * b:]
        labels = {}
        for i in range(0, len(pairs), 2):
            if type(pairs[i]) is not str:   # the compiler pushes a String; forged bytecode may not
                raise SenseRuntimeError(f"a labeled argument's label must be a String, "
                                        f"not {type_name(pairs[i])}")
            labels[pairs[i]] = pairs[i + 1]
        args = stack[len(stack) - a:] if a else []
        if a:
            del stack[-a:]
        callee = stack.pop()
        if type(callee) is Builtin or getattr(callee, "is_builtin", False):
            if not callee.labels:
                raise SenseRuntimeError(
                    f"'{callee.name}' does not accept labeled arguments ({', '.join(labels)})")
            stack.append(callee.fn(self, args, labels))
            return False
        raise SenseRuntimeError(
            "labeled arguments are only supported for a handful of builtins "
            f"(e.g. inference(...)) -- not {type_name(callee)}")

    def op_RETURN(self, f, a, b):
        value = f.stack.pop()
        caller = f.caller
        self.frame = caller
        self.depth -= 1
        if f.module is not None:
            self.loading.discard(f.module)
            value = f.module
        elif f.role is not None:
            value = self._body_returned(f, value)
        elif f.closure is not None:
            check = f.prepared.return_check
            if check is not None and type(value) is not check[2] and not check[1](value):
                # Reported at the call, as the reference does: the callee's frame is gone.
                raise V.return_error(f.closure.name, check[0], value)
        if caller is not None:
            caller.stack.append(value)
        else:
            self.result = value
        return True

    def op_TEST_BEGIN(self, f, a, b):
        if self.test_filter is not None and not self.test_filter(a):
            # `sensevm test -k`: a test not selected is skipped where it stands, as if it had
            # failed at once, and not reported (tier 2 never compiles test blocks).
            self.tests_skipped += 1
            f.ip = b
            return
        if f.tests is _NO_TESTS:
            f.tests = []
        f.tests.append(TestHandler(a, b, len(f.stack), f.scope, f.pos))
        f.scope = Scope(f.scope)

    def op_TEST_END(self, f, a, b):
        handler = f.tests.pop()
        f.scope = handler.scope
        self.tests.append(TestResult(handler.name, True, None, f.prepared.path, handler.pos))

    def op_TEST_ABANDON(self, f, a, b):
        f.scope = f.tests.pop().scope

    # ------------------------------------------------------------------ errors a program handles

    def op_TRY_BEGIN(self, f, a, b):
        if f.tests is _NO_TESTS:
            f.tests = []
        f.tests.append(TryHandler(a, len(f.stack), f.scope, f.ip - 1))

    def op_TRY_END(self, f, a, b):
        handler = f.tests.pop()
        if PV.live:
            self._no_error_under(f, handler)

    def _no_error_under(self, f, handler) -> None:
        """The try body ended without an error, which says as much about what it computed
        from as an error would have (`x = "b"` after `int(page)` tells that the page is a
        number): what the try statement may assign (in its body or its handlers) is labelled
        with the influenced origins of the variables its body reads or writes, as for the
        arm not taken of a branch (_branch)."""
        joins = _joins(f.prepared)
        stored = joins.stores(handler.begin)
        changes = joins.changed(handler.begin)
        if not stored and not changes[0] and not changes[1]:
            return
        scope = f.scope
        origins = handler.seen
        for name in joins.names_read(handler.begin) + stored:
            found = scope.find(name)
            if found is not None:
                origins = PV.union(origins, PV.deep_origins(found.vars[name]))
        if f.pc:
            origins = PV.union(origins, f.pc[-1][1])
        if PV.is_influenced(origins):
            _label_bound(scope, stored, origins)
            _label_changed(scope, changes, origins)

    def op_EXCEPT_JUMP(self, f, a, b):
        value = f.stack[-1]
        if type(value) is not ErrorValue:
            raise SenseTypeError(f"'except' needs an Error, got {type_name(value)}")
        if not isinstance(value.error, CATCHABLE[a]):
            f.ip = b

    def op_RAISE(self, f, a, b):
        raise V.raised_error(f.stack.pop())

    def op_IMPORT(self, f, a, b):
        entry = f.prepared.program.modules[a]
        module = self.modules.get(entry.path) if entry.code >= 0 else None
        if module is not None:
            if module in self.loading:
                raise SenseImportError(f"circular import detected: {entry.path}")
            f.stack.append(module)
            return False
        if entry.error is not None:
            if not entry.error_line:
                # Refused before it was read (an import outside the program's directory):
                # reported at this import, never with a line of the file it names.
                raise SenseImportError(entry.error)
            raise SenseSyntaxError(entry.error, Pos(entry.error_line, entry.error_col),
                                   path=entry.path)
        if entry.code < 0:
            raise SenseImportError(f"module not found: '{entry.rel}' (resolved to {entry.path})")
        if self.depth >= self.max_depth:
            raise SenseRecursionError()
        scope = Scope(self.builtins, tag="module")
        module = ModuleValue(entry.name, entry.path, scope)
        self.modules[entry.path] = module
        self.loading.add(module)
        self.depth += 1
        self.frame = Frame(f.prepared.unit[entry.code], scope, f, module=module)
        return True

    def op_IMPORT_FROM(self, f, a, b):
        module = f.stack[-1]
        if type(module) is not ModuleValue:
            importer = getattr(module, "sense_import_from", None)      # a Python module
            if importer is None:
                raise SenseRuntimeError(f"cannot import '{a}' from a value of type "
                                        f"{type_name(module)}")
            f.stack[-1] = importer(self, a)
            return
        bindings = module.scope.vars
        if a not in bindings:
            raise SenseRuntimeError(f"module '{module.name}' has no member '{a}'")
        f.stack[-1] = bindings[a]

    def op_IMPORT_PYTHON(self, f, a, b):
        # The capability check lives here, in the handler both tiers run, so bytecode made by
        # hand cannot import without it (interop.py; docs/interop.md).
        f.stack.append(services.import_python(self, f, a))

    def op_NATIVE(self, f, a, b):
        # The native bridge's one guarantee (sensevm/bytecode/natives.py): a non-pure native
        # runs only in the body of a declaration of its kind requiring exactly its capability,
        # checked here, in the handler both tiers run (tier 2 leaves such code to tier 1).
        name = a                    # (the prepared instruction holds the constant itself)
        entry = services.native(name) if type(name) is str else None
        if entry is None:
            raise SenseRuntimeError(f"unknown native {name!r}")
        kind, cap, fn = entry
        if kind != "pure":
            problem = _native_refusal(f, kind, cap)
            if problem is not None:
                # Only a forged file gets here (the verifier refuses what it can see): on the
                # record, host-side, like any other refusal.
                from sensevm.guard.audit import AuditRecord
                self.audit.append(AuditRecord(subject=f"native '{name}'", name=name,
                                              kind="native", event="refused", detail=problem,
                                              line=f.pos.line, lineage=self.lineage(f),
                                              host_only=True))
                raise SensePolicyError(f"native '{name}' refused: {problem}")
        if b:
            args = f.stack[-b:]
            del f.stack[-b:]
        else:
            args = []
        try:
            value = fn(self, args)
        except SenseError as err:
            # Reported where the program called the library (the first frame outside it).
            caller = _library_caller(f)
            raise err.with_pos(caller.pos, caller.prepared.path)
        f.stack.append(value)
        return False

    # ------------------------------------------------------------------ policy

    def op_POLICY_ALLOW(self, f, a, b):
        P.set_rule(f.scope, a, P.ALLOW, (f.prepared.path, f.pos.line))

    def op_POLICY_DENY(self, f, a, b):
        self.denials.seen = True        # first: a check made meanwhile takes the long way
        P.set_rule(f.scope, a, P.DENY, (f.prepared.path, f.pos.line))

    # ------------------------------------------------------------------ actions

    def op_MAKE_ACTION(self, f, a, b):
        decl = f.prepared.program.actions[a]
        unit = f.prepared.unit
        body = unit[decl.body]
        rollback = unit[decl.rollback] if decl.rollback >= 0 else None
        f.stack.append(ActionDefinition(decl, body, rollback, f.scope))

    def op_ACTION_PREPARE(self, f, a, b):
        # Identical to CALL: the callee is expected to be an action definition, and CALL reaches
        # the same prepare() when it meets one.
        return self.op_CALL(f, a, b)

    def op_ACTION_VERIFY(self, f, a, b):
        receiver = f.stack.pop()
        if type(receiver) is not PreparedAction:
            # Not an action: exactly what `receiver.verify()` means for any other value.
            return self._call(f, self.member(receiver, "verify"), [])
        pos = f.pos
        try:
            f.stack.append(self.verify(f, receiver, f.scope, pos))
        except SenseError as err:
            raise err.with_pos(pos, f.prepared.path)
        return False

    def op_ACTION_APPROVE(self, f, a, b):
        receiver = f.stack.pop()
        if type(receiver) is not PreparedAction:
            return self._call(f, self.member(receiver, "approve"), [])
        pos = f.pos
        try:
            f.stack.append(self.approve(f, receiver, pos))
        except SenseError as err:
            raise err.with_pos(pos, f.prepared.path)
        return False

    def op_ACTION_COMMIT(self, f, a, b):
        receiver = f.stack.pop()
        if type(receiver) is not PreparedAction:
            return self._call(f, self.member(receiver, "commit"), [])
        try:
            return self.commit(f, receiver, f.scope)
        except SenseError as err:
            raise err.with_pos(f.pos, f.prepared.path)

    def op_ACTION_ROLLBACK(self, f, a, b):
        return self._lifecycle_op(f, "rollback")

    def _lifecycle_op(self, f, method: str) -> bool:
        receiver = f.stack.pop()
        if type(receiver) is PreparedAction:
            return self.lifecycle(f, receiver, method, f.scope, f.pos)
        # Not an action: exactly what `receiver.method()` means for any other value.
        return self._call(f, self.member(receiver, method), [])

    def lifecycle(self, f, action: PreparedAction, method: str, scope: Scope, pos: Pos) -> bool:
        """Run one lifecycle method as written at ``pos`` in ``scope``; True if it pushed a frame.

        Policy is asked about ``scope`` (the scope of the member expression ``a.commit``) and
        about every frame on the call chain; errors and audit lines carry ``pos``. (The
        ACTION_VERIFY / APPROVE / COMMIT handlers do the same, written out.)
        """
        try:
            if method == "verify":
                f.stack.append(self.verify(f, action, scope, pos))
            elif method == "approve":
                f.stack.append(self.approve(f, action, pos))
            elif method == "commit":
                return self.commit(f, action, scope)
            else:
                return self.rollback(f, action, scope, pos)
        except SenseError as err:
            raise err.with_pos(pos, f.prepared.path)
        return False

    def lineage(self, frame) -> tuple:
        """Audit lineage along the dynamic call chain, outermost first (spec 21.7)."""
        if frame is None or frame.clean:
            return ()
        start = frame
        tags = None
        while frame is not None:
            if frame.tags:
                if tags is None:
                    tags = []
                tags.extend(reversed(frame.tags))
            frame = frame.caller or frame.origin
        if tags is None:
            start.clean = True      # (Frame.clean: why it holds from now on)
            return ()
        tags.reverse()
        return tuple(tags)

    def record(self, action: PreparedAction, event: str, frame, line: Optional[int] = None,
               detail: Optional[str] = None, host_only: bool = False, quoting=None) -> None:
        """Audit ``event`` of ``action``; ``quoting``: the origins of values its detail shows
        (an error's), which the line audit_log() gives for it keeps."""
        definition = action.definition
        # AuditRecord's fields in order, as the plain tuple the log keeps; the lineage's
        # usual answer, a clean chain (Frame.clean), found without the call.
        row = (definition.subject, definition.name, definition.kind, event, detail, line,
               () if frame is None or frame.clean else self.lineage(frame), _now(), host_only)
        if quoting:
            self.audit.append_quoting(row, quoting)
        else:
            self.audit.append(row)

    def step(self, action: PreparedAction, event: str, audited: str, frame, line=None,
             detail=None, host_only: bool = False, quoting=None) -> None:
        """Move ``action`` along the table for ``event`` and record ``audited``, as one step:
        under the lifecycle lock once other threads run Sense code, so that the audit log lists
        an action's events in the order its state moved (lifecycle.py)."""
        if L.threaded:
            with L.MOVING:
                L.move(action, L.EDGES[event])
                self.record(action, audited, frame, line, detail, host_only, quoting)
        else:
            L.move(action, L.EDGES[event])
            self.record(action, audited, frame, line, detail, host_only, quoting)

    def prepare(self, f, definition: ActionDefinition, args: list,
                line: Optional[int] = None) -> PreparedAction:
        """Prepare ``definition`` with ``args`` in frame ``f``; ``line`` is the frame's current
        line when the caller knows it (tier 2 does), else it is read from the frame. ``args``
        becomes the action's own: a list no one else holds."""
        params = definition.params
        if len(args) != len(params):
            raise V.arity_error(definition.name, len(params), args)
        for i, name, text, check, exact in definition.param_checks:
            if type(args[i]) is not exact and not check(args[i]):
                raise V.param_error(name, definition.name, text, args[i])
        # PreparedAction(definition, args), written out: its __init__ would be a Python frame
        # more for each of an agent's lifecycles.
        action = _new_object(PreparedAction)
        action.definition = definition
        action.args = args
        action.state = "prepared"
        action.approved = False
        action.flag = action.cleared = action.reason = action.looked = None
        action.body_scope = action.session = None
        # record(action, "prepared", ...), written out as the records below are: one of these
        # per lifecycle event is most of what an agent's loop does.
        self.audit.append((definition.subject, definition.name, definition.kind, "prepared",
                           None, f.pos.line if line is None else line,
                           () if f.clean else self.lineage(f), _now(), False))
        return action

    def verify(self, f, action: PreparedAction, scope: Scope, pos: Pos) -> PreparedAction:
        if action.state not in L.VERIFY_FROM:
            L.check_verify(action)
        cap = action.definition.decl.capability
        if cap is not None and (self.denials.seen or cap in P.EXPLICIT) \
                and not P.permitted(cap, scope, f):
            self.step(action, "verify_denied", "denied", f, pos.line,
                      f"capability '{cap}' denied by policy")
            self._denial_reason(action, f, pos.line, cap, scope)
            raise P.denial(f"action '{action.name}'", cap, scope, f)
        if L.threaded:
            self.step(action, "verify_allowed", "verified", f, pos.line)
        else:
            action.state = L.VERIFY_ALLOWED[action.state]
            definition = action.definition
            self.audit.append((definition.subject, definition.name, definition.kind,
                               "verified", None, pos.line,
                               () if f.clean else self.lineage(f), _now(), False))
        if self.look is not None and action.definition.outbound:
            evaluation = self.look.evaluate(action)
            if evaluation.findings:         # (most checks find nothing: no call then)
                self.second_look(f, action, "verify", pos.line, evaluation)
        return action

    def set_request(self, text: Optional[str]) -> None:
        """The run's request in the user's own words (``--request``); with the second look off,
        the audit trail records that it was off."""
        if self.look is None:
            self.audit.append(AuditRecord.make("second look", "second_look", "run", "disabled",
                                               "--second-look=off", None, (), True))
            self.request = text
        else:
            self.request = None if text is None else self.look.user_text(text)

    def set_args(self, words) -> None:
        """The program's arguments (``sensevm run FILE -- ARG...``), the user's own words as
        ``--request`` is (labelled user and evidence for the second look, when it is on)."""
        look = self.look
        self.args = [w if look is None else look.user_text(w) for w in words]

    def check_second_look(self, f, action: PreparedAction) -> None:
        """The second look at a commit (or a session queueing one): raises if it must ask."""
        look = self.look
        if look is not None and action.definition.outbound:
            evaluation = look.evaluate(action)
            if evaluation.findings:
                self.second_look(f, action, "commit", None, evaluation)

    def second_look(self, f, action: PreparedAction, stage: str, line, evaluation) -> None:
        """An outgoing action's evaluation (secondlook.py) that found something: recorded
        host-side, and at commit a flagged one not approved after the flag for these arguments
        is refused. (Its callers evaluate: one that finds nothing needs no call.)"""
        definition = action.definition
        self.audit.append((definition.subject, definition.name, definition.kind, "second_look",
                           evaluation.details.get(stage) or evaluation.kept_detail(stage), line,
                           () if f is None or f.clean else self.lineage(f), _now(), True))
        if not evaluation.flagged:
            if stage == "verify":
                action.flag = None
            return
        if stage == "verify":
            action.flag = evaluation.digest
            action.reason = evaluation.reason()
            return
        if action.cleared == evaluation.digest:
            return
        action.flag = evaluation.digest
        action.reason = reason = evaluation.reason()
        self.step(action, "commit_unapproved", "denied", f, None, "second look: requires approval")
        raise SenseApprovalError(f"action '{action.name}' needs a second look before commit(): "
                                 f"{reason} -- call {action.name}.approve() to send it anyway",
                                 located=False)

    def second_look_tool(self, f, tool: ToolDefinition, args: list, line) -> None:
        """An outgoing tool's call, before its body runs: evaluated as an action is, recorded
        host-side, and refused if flagged -- unless ``tool.approve()`` followed the refusal of
        this very call (same arguments, same origins), which lets it run once."""
        evaluation = self.look.evaluate_tool(tool, args)
        if not evaluation.findings:
            return
        self.audit.append((tool.subject, tool.name, "tool", "second_look",
                           evaluation.kept_detail("call"), line, self.lineage(f), _now(), True))
        if not evaluation.flagged:
            return
        digest = evaluation.digest
        if tool.cleared == digest:
            tool.flag = tool.cleared = tool.reason = None     # one approval, one call
            return
        tool.flag = digest
        tool.reason = reason = evaluation.reason()
        self.record_tool(tool, "denied", f, line, "second look: requires approval")
        raise SenseApprovalError(f"tool '{tool.name}' needs a second look before it runs: "
                                 f"{reason} -- call {tool.name}.approve(), then call it again, "
                                 "to run it anyway")

    def approve(self, f, action: PreparedAction, pos: Pos) -> PreparedAction:
        if action.state not in L.APPROVE_FROM:
            L.check_approve(action)
        action.approved = True
        if action.flag is not None:
            action.cleared = action.flag     # covers exactly the flagged arguments
        # Recorded host-side (spec 21.9); audit_log() keeps the reference's lines unchanged.
        definition = action.definition
        self.audit.append((definition.subject, definition.name, definition.kind, "approved",
                           None, pos.line, () if f.clean else self.lineage(f), _now(), True))
        return action

    def commit(self, f, action: PreparedAction, scope: Scope, *, routed: bool = False,
               confirmed: bool = False) -> bool:
        """``.commit()``: inside a protocol session, the session decides (sessions.py) and
        calls back with ``routed``; ``confirmed`` is its confirm firing a queued action."""
        if self.sessions and not routed:
            from sensevm.runtime.sessions import route_commit
            return route_commit(self, f, action, scope, self.sessions[-1])
        if action.state not in L.COMMIT_FROM:
            L.check_commit(action, confirmed)
        definition = action.definition
        decl = definition.decl
        # check_commit_policy and check_second_look, written out (a session calls those).
        cap = decl.capability
        if cap is not None and (self.denials.seen or cap in P.EXPLICIT) \
                and not P.permitted(cap, scope, f):
            self._commit_denied(f, action, cap, scope)
        if decl.approval and not action.approved and not confirmed:
            self.step(action, "commit_unapproved", "denied", f, None, "requires approval")
            raise SenseApprovalError(f"action '{action.name}' requires approval before "
                                     f"commit() — call {action.name}.approve() first",
                                     located=False)
        if self.look is not None and definition.outbound and action.looked is not False:
            evaluation = self.look.evaluate(action)
            if evaluation.findings:
                self.second_look(f, action, "commit", None, evaluation)
        if self.dry_run:
            self.step(action, "commit_dry_run", "committed", f, None, "dry run — body not executed")
            if action.session is not None:
                from sensevm.runtime.sessions import body_ran
                body_ran(self, action)      # so a dry run shows the manifest a run will
            f.stack.append(None)
            return False
        # The body is entered only past this edge, taken once: a second commit (from the body
        # itself, or another thread) now meets E-COMMIT in state 'committing'.
        # Its record is the intent before the effect: with a durable log, a crash inside the
        # body still leaves a record that the commit began (host-side; audit_log() shows the
        # outcome).
        if L.threaded:
            self.step(action, "commit_begin", "committing", f, None, None, True)
        else:
            action.state = L.COMMIT_BEGIN[action.state]
            self.audit.append((definition.subject, definition.name, definition.kind,
                               "committing", None, None,
                               () if f is None or f.clean else self.lineage(f),
                               _now(), True))
        prepared = definition.body
        # Scope(definition.scope) with the arguments bound, written out (no __init__ frame, no
        # empty dict made to be replaced).
        scope = _new_object(Scope)
        scope.parent = definition.scope
        scope.policy = scope.tag = None
        args, params = action.args, definition.params
        # (dict(zip(...)) costs three times a display's two entries: most actions take one or two)
        n = len(args)
        scope.vars = ({params[0]: args[0]} if n == 1 else
                      {params[0]: args[0], params[1]: args[1]} if n == 2 else
                      dict(zip(params, args)))
        action.body_scope = scope
        try:
            if action.session is not None:
                from sensevm.runtime.sessions import body_begins
                body_begins(self, action)       # the session's write-ahead record
            if self.journal is not None:
                return self._journaled_body(f, action, prepared, scope, "commit",
                                            action.definition.tags, None,
                                            "reversible" if decl.reversible else "irreversible")
            direct = prepared.direct
            if direct is not None and action.session is None and not self.sessions:
                # The body's direct form: no frame unless it deoptimizes; its return and its
                # failure do what op_RETURN / _unwind do for the commit frame (as a rollback
                # block's does in _run_direct_rollback; written out here: one per commit). A
                # SenseError from the body, placed in it already, meets the handler below.
                d = self.depth + 1      # (the bound: frames.DIRECT_BOUND)
                try:
                    value = direct(self, action, d, d + DIRECT_REACH if d < self.direct_cap
                                   else self.max_depth, scope)
                except Deoptimize as stop:
                    if stop.top is not None:
                        stop.top.caller = f
                        stop.top.audit_line = None
                        self.depth = stop.depth
                        return True
                    # (It declined before starting: the body runs in a frame, below.)
                else:
                    action.state = L.COMMIT_SUCCEEDED[action.state]
                    self.audit.append((definition.subject, definition.name, definition.kind,
                                       "committed", None, None,
                                       () if f.clean else self.lineage(f), _now(), False))
                    f.stack.append(value)
                    return False
            self._push_body(f, prepared, scope, action, "commit", action.definition.tags, None)
        except SenseError as err:
            # Still 'committing': the body failed to begin, or its direct form failed (placed
            # in the body already); either way the commit failed here.
            if action.state == L.COMMITTING:
                if self.journal is not None:
                    self.journal.not_started(err)
                self._body_failed_at(action, "commit", f, err)
            raise
        return True

    def check_commit_policy(self, f, action: PreparedAction, scope: Scope) -> None:
        cap = action.definition.decl.capability
        if cap is not None and (self.denials.seen or cap in P.EXPLICIT) \
                and not P.permitted(cap, scope, f):
            self._commit_denied(f, action, cap, scope)

    def _commit_denied(self, f, action: PreparedAction, cap: str, scope=None):
        self.step(action, "commit_denied", "denied", f, None,
                  f"capability '{cap}' denied by policy")
        self._denial_reason(action, f, None, cap, scope)
        raise P.denial(f"action '{action.name}'", cap, scope, f, located=False)

    def _denial_reason(self, action, f, line, cap: str, scope, suffix: str = "") -> None:
        """The host-side record after an action's reference-visible `denied`: which rule
        decided, where, and the call chain (policy.explain); audit_log() does not show it."""
        self.record(action, "denial_reason", f, line,
                    P.explained_detail(cap, scope, f) + suffix, host_only=True)

    def rollback(self, f, action: PreparedAction, scope: Scope, pos: Pos) -> bool:
        L.check_rollback(action)
        decl = action.definition.decl
        cap = decl.capability
        line = pos.line
        if cap is not None and (self.denials.seen or cap in P.EXPLICIT) \
                and not P.permitted(cap, scope, f):
            self.step(action, "rollback_denied", "denied", f, line,
                      f"capability '{cap}' denied by policy (rollback)")
            self._denial_reason(action, f, line, cap, scope, " (rollback)")
            raise P.denial(f"action '{action.name}'", cap, scope, f, located=False)
        if self.dry_run:
            self.step(action, "rollback_dry_run", "rolled_back", f, line,
                      "dry run — rollback not executed")
            f.stack.append(None)
            return False
        # Taken once, as commit's: a rollback from inside the block meets E-RSTATE.
        if L.threaded:
            L.move(action, L.ROLLBACK_BEGIN)
        else:
            action.state = L.ROLLBACK_BEGIN[action.state]
        # The block runs in a new scope whose parent is exactly the scope the body ran in.
        scope = Scope(action.body_scope)
        prepared = action.definition.rollback
        try:
            if self.journal is not None:
                return self._journaled_body(f, action, prepared, scope, "rollback",
                                            action.definition.rollback_tags, line, "reversible")
            direct = prepared.direct
            if direct is not None and action.session is None and not self.sessions:
                ran = self._run_direct_rollback(f, action, direct, scope, line)
                if ran is not None:
                    return ran
            self._push_body(f, prepared, scope, action, "rollback",
                            action.definition.rollback_tags, line)
        except SenseError as err:
            if action.state == L.ROLLING_BACK:  # the block never started
                if self.journal is not None:
                    self.journal.not_started(err)
                self._body_failed_at(action, "rollback", f, err, line)
            raise
        return True

    def _journaled_body(self, f, action, prepared, scope, role, tags, line,
                        kind: str) -> bool:
        """A commit body or rollback block under the journal (runtime/journal.py): its
        journaled outcome when a dead attempt recorded one, else the body in a frame (never
        its direct form: the journal sees a frame return or fail)."""
        journal = self.journal
        value = journal.begin(self, role, action.name, action.args, kind)
        if value is not journal.MISS:
            self._body_done(action, role, f, line)
            f.stack.append(value)
            return False
        self._push_body(f, prepared, scope, action, role, tags, line)
        journal.opened(self.frame)
        return True

    def _push_body(self, f, prepared, scope, action, role, tags, line) -> None:
        if self.depth >= self.max_depth:
            raise SenseRecursionError()
        self.depth += 1
        self.frame = Frame(prepared, scope, f, None, None, action, role, tags, line)

    def _body_returned(self, frame, value):
        if frame.role == "agent":
            agent = frame.action
            agent.status = "completed"
            agent.pause_reason = None
            agent.base = None
            return agent                # start()/resume() return the agent
        if frame.role == "tool":
            check = frame.action.return_check
            if check is not None and type(value) is not check[2] and not check[1](value):
                # Reported at the call, as for functions: the tool's frame is gone.
                raise V.return_error(frame.action.name, check[0], value)
            if self.journal is not None:
                self.journal.returned(frame, value)
            if self.look is not None:
                value = self.look.tool_result(frame.action, value)
            return value
        if frame.role == "async_tool":
            if self.look is not None:
                value = self.look.tool_result(frame.action, value)
            return value            # checked at await (spec 12.3)
        if self.journal is not None:
            self.journal.returned(frame, value)
        self._body_done(frame.action, frame.role, frame.caller, frame.audit_line)
        return value

    def _body_done(self, action, role, caller, line=None) -> None:
        """A commit body or rollback block returned: its state and audit record (``caller``
        is the frame that called commit/rollback, where the lineage starts)."""
        if role == "commit":
            action.state = L.COMMIT_SUCCEEDED[action.state]
            self.record(action, "committed", caller)
            if action.session is not None:
                from sensevm.runtime.sessions import body_ran
                body_ran(self, action)
        else:
            action.state = L.ROLLBACK_SUCCEEDED[action.state]
            self.record(action, "rolled_back", caller, line)

    def _run_direct_rollback(self, f, action, direct, scope, line) -> Optional[bool]:
        """Run a rollback block's direct form (tier2.Compiled) for frame ``f``, as the frame
        _push_body would make runs (commit runs a body's in line, the same way): False when it
        returned (its value pushed), True when it deoptimized into frames the loop now runs
        (the bottom one given the caller and audit line _push_body would have given it), None
        when it declined before starting (then the caller makes the frame)."""
        try:
            d = self.depth + 1      # (the bound: frames.DIRECT_BOUND)
            value = direct(self, action, d, d + DIRECT_REACH if d < self.direct_cap
                           else self.max_depth, scope)
        except Deoptimize as stop:
            if stop.top is None:
                return None
            stop.top.caller = f
            stop.top.audit_line = line
            self.depth = stop.depth
            return True
        except SenseError as err:       # placed in the block already
            self._body_failed_at(action, "rollback", f, err, line)
            raise
        # _body_done, written out for an action outside a session (the only kind run here).
        action.state = L.ROLLBACK_SUCCEEDED[action.state]
        definition = action.definition
        self.audit.append((definition.subject, definition.name, definition.kind,
                           "rolled_back", None, line, () if f.clean else self.lineage(f),
                           _now(), False))
        f.stack.append(value)
        return False

    def _body_failed(self, frame, err: SenseError) -> None:
        if self.journal is not None:
            self.journal.failed(frame, err)
        if frame.role == "agent":
            agent = frame.action
            agent.status = "failed"
            agent.pause_reason = None
            agent.base = None
            return
        if frame.role in ("tool", "async_tool"):
            return
        self._body_failed_at(frame.action, frame.role, frame.caller, err, frame.audit_line)

    def _body_failed_at(self, action, role, caller, err: SenseError, line=None) -> None:
        """A commit or rollback body failed: its state and audit record (``caller`` is the
        frame that called commit/rollback, where the lineage starts)."""
        if role == "commit":
            self.step(action, "commit_failed", "failed", caller, None, err.text,
                      quoting=err.origins)
            if action.session is not None:
                from sensevm.runtime.sessions import body_failed
                body_failed(self, action, err.text)
        else:
            self.step(action, "rollback_failed", "failed", caller, line,
                      f"rollback body failed: {err.text}", quoting=err.origins)

    # ------------------------------------------------------------------ tools

    def op_MAKE_TOOL(self, f, a, b):
        decl = f.prepared.program.tools[a]
        f.stack.append(ToolDefinition(decl, f.prepared.unit[decl.body], f.scope))

    def op_TOOL_CALL(self, f, a, b):
        # Identical to CALL: the callee is expected to be a tool, and CALL reaches the same
        # call_tool() when it meets one.
        return self.op_CALL(f, a, b)

    def call_tool(self, f, tool: ToolDefinition, args: list, line: Optional[int] = None) -> bool:
        """Spec 12.2: arity, capability (audited), argument types, audit `called`, then the body.
        ``line`` is the frame's current line when the caller knows it (tier 2 does)."""
        n = len(args)
        if n != tool.arity:
            raise V.arity_error(tool.name, tool.arity, args)
        if line is None:
            line = f.pos.line
        cap = tool.capability
        if cap is not None and (self.denials.seen or cap in P.EXPLICIT) \
                and not P.permitted(cap, f.scope, f):
            self.record_tool(tool, "denied", f, line, f"capability '{cap}' denied by policy")
            callee = f"{tool.name}()"
            self.audit.append((tool.subject, tool.decl.name, "tool", "denial_reason",
                               P.explained_detail(cap, f.scope, f, callee), line,
                               self.lineage(f), _now(), True))
            raise P.denial(f"tool '{tool.name}'", cap, f.scope, f, callee)
        for i, name, text, check, exact in tool.param_checks:
            if type(args[i]) is not exact and not check(args[i]):
                raise V.param_error(name, tool.name, text, args[i])
        if tool.outbound and self.look is not None:
            self.second_look_tool(f, tool, args, line)
        # record_tool(tool, "called", f, line), written out: this runs for every tool call.
        self.audit.append((tool.subject, tool.name, "tool", "called", None, line,
                           () if f.clean else self.lineage(f), _now(), False))
        if self.journal is not None and not tool.is_async:
            return self._journaled_tool(f, tool, args)
        direct = tool.body.dx[n] if n < DIRECT_ARITIES and not tool.is_async else None
        if direct is not None:
            # The body's direct form (tier2.Compiled), `tool` standing for its closure: no
            # frame unless it deoptimizes, when its activations become frames (the body's with
            # the role, tool and lineage frame below) and the loop runs them.
            try:
                d = self.depth + 1      # (the bound: frames.DIRECT_BOUND)
                value = direct(self, tool, d, d + DIRECT_REACH if d < self.direct_cap
                               else self.max_depth, *args)
            except Deoptimize as stop:
                if stop.top is not None:
                    stop.top.caller = f
                    self.depth = stop.depth
                    return True
            else:       # what _body_returned does for a tool frame (the type was checked)
                if self.look is not None:
                    value = self.look.tool_result(tool, value)
                f.stack.append(value)
                return False
        scope = Scope(tool.scope)
        for name, value in zip(tool.params, args):
            scope.vars[name] = value
        tags = tool.tags
        if tool.is_async:
            f.stack.append(self._start_async(f, tool, scope, tags))
            return False
        if self.depth >= self.max_depth:
            raise SenseRecursionError()
        self.depth += 1
        self.frame = Frame(tool.body, scope, f, None, None, tool, "tool", tags)
        return True

    def _journaled_tool(self, f, tool: ToolDefinition, args: list) -> bool:
        """A (synchronous) tool's body under the journal: its journaled result when a dead
        attempt recorded one (then what _body_returned does for a tool frame), else the body in
        a frame."""
        journal = self.journal
        value = journal.begin(self, "tool", tool.name, args)
        if value is not journal.MISS:
            if self.look is not None:
                value = self.look.tool_result(tool, value)
            f.stack.append(value)
            return False
        scope = Scope(tool.scope)
        for name, value in zip(tool.params, args):
            scope.vars[name] = value
        if self.depth >= self.max_depth:
            journal.not_started(SenseRecursionError())
            raise SenseRecursionError()
        self.depth += 1
        self.frame = Frame(tool.body, scope, f, None, None, tool, "tool", tool.tags)
        journal.opened(self.frame)
        return True

    def call_tool_now(self, f, tool: ToolDefinition, args: list) -> Any:
        """Run a (synchronous) tool to its end for host code in ``f`` — a model's request —
        through ``call_tool``, so the checks and audit are the ones TOOL_CALL makes."""
        return self.run_now(f, lambda worker: worker.call_tool(f, tool, args))

    def run_now(self, f, start) -> Any:
        """Run to its end the body that ``start(worker)`` pushes, for host code in frame ``f``.

        The body runs on an execution state of its own whose only frame stands on ``f`` for
        policy and lineage; control returns here when it returns, and an error in it
        propagates. When ``start`` pushes nothing (a dry run), its result is on ``f``'s stack.
        """
        worker = self.worker()
        if not start(worker):
            return f.stack.pop()
        body = worker.frame
        body.caller, body.origin = None, f
        worker._loop()
        return worker.result

    def session_log(self):
        """The write-ahead log of this run's sessions, opened at the first session (or None)."""
        if self.session_log_path is None or self.dry_run:
            return None                 # a dry run fires nothing, so it owes no record
        if self._session_log is None:
            import os
            from sensevm.guard.wal import SessionLog, WalError
            try:
                os.makedirs(os.path.dirname(os.path.abspath(self.session_log_path)),
                            exist_ok=True)
                self._session_log = SessionLog(self.session_log_path)
            except (WalError, OSError) as err:
                raise SenseRuntimeError(f"cannot open the session log: {err}",
                                        located=False) from None
        return self._session_log

    def record_tool(self, tool, event, frame, line, detail=None) -> None:
        self.audit.append((tool.subject, tool.decl.name, "tool", event, detail, line,
                           self.lineage(frame), _now(), False))

    def _start_async(self, f, tool: ToolDefinition, scope: Scope, tags) -> Future:
        """Run the body on a worker thread with an execution state of its own.

        The worker shares the program, builtins, modules and audit log, never a frame: its
        body frame has no caller, and a frozen snapshot of the calling chain (scopes and
        lineage tags at the moment of the call) stands in for policy and lineage.
        """
        import threading
        future = Future(tool, f.pos, f.prepared.path)
        worker = self.worker(1)
        body = Frame(tool.body, scope, None, action=tool, role="async_tool", tags=tags)
        body.origin = _snapshot(f)
        worker.frame = body
        workers = self.workers

        def run():
            try:
                worker._loop()
                future.value = worker.result
            except SenseError as err:
                future.error = err
            except BaseException as exc:          # a VM bug must not vanish with the thread
                future.error = SenseRuntimeError(f"internal error in async tool: {exc!r}",
                                                 located=False)
            finally:
                workers.leave()         # first: a program that saw it done may start another
                future.finished = True

        future.thread = threading.Thread(target=run, name=f"sense-tool-{tool.name}", daemon=True)
        L.threads_start()
        workers.start(future.thread)
        return future


    def save_paused_agents(self) -> None:
        """With --state-dir, (re)write every paused agent, as the run leaves it."""
        if self.state_dir is None:
            return
        for agent in self.agents:
            if agent.status == "paused" and not agent.decl.is_async:
                services.save_agent(self, agent, self.state_dir)

    def resume_saved(self, agent, answer: str) -> Any:
        """Continue a saved, paused agent in this (new) process until it pauses or ends, with
        a person's ``answer``: the user's own words, labelled and evidence for the second
        look, as an answer typed at the terminal or in the console is."""
        self._must_be_paused(agent)
        self.agents.append(agent)
        if self.look is not None:
            answer = self.look.user_text(answer)
        return self.resume_paused(agent, answer)

    @staticmethod
    def _must_be_paused(agent) -> None:
        if agent.status != "paused":
            raise SenseRuntimeError(f"cannot resume agent '{agent.name}' — status is "
                                    f"'{agent.status}', not 'paused'", located=False)

    def resume_paused(self, agent, value) -> Any:
        """Continue a paused plain agent from the host, with ``value`` as what its ``pause()``
        or ``ask_human()`` returns, until it pauses again or ends; no frame of the program is
        its caller, so either way control comes back here. ``sensevm resume`` (resume_saved)
        and the inspect console's answer both come this way."""
        self._must_be_paused(agent)
        agent.status = "running"
        agent.pause_reason = None
        agent.base.caller = None
        top, agent.top = agent.top, None
        top.stack.append(value)
        self.depth = agent.frames
        self.frame = top
        budget = self.budget
        if budget is not None:
            budget.start_clock()
        try:
            self._loop()
        finally:
            if budget is not None:
                budget.stop_clock()
            self.save_paused_agents()
            # Records that it has ended; one still running was stopped by no error of its own
            # (a journal stop, an interrupt), which goes on out unmasked.
            if self.state_dir is not None and agent.status not in ("paused", "running"):
                services.save_agent(self, agent, self.state_dir)
        return agent

    def worker(self, frames: int = 0) -> "VM":
        """An execution state for another thread: shares everything but frames. Its depth
        goes on from this one's, plus the ``frames`` it starts with (an async body's frame),
        so recursion through async tools and agents meets ``max_depth`` as calls do."""
        import copy
        if self.depth + frames > self.max_depth:
            raise SenseRecursionError()
        if self.workers is None:        # made before the first copy, which shares it
            from sensevm.runtime.workers import Workers
            self.workers = Workers(self.max_workers)
        worker = copy.copy(self)
        worker.frame = None
        worker.depth = self.depth + frames
        worker.result = None
        worker.inlined = 0
        worker.worker_agent = None
        worker.handlers = worker._handler_table()   # bound to the worker
        return worker

    def snapshot(self, frame):
        return _snapshot(frame)

    def new_frame(self, prepared, scope, caller, owner, role, tags) -> Frame:
        return Frame(prepared, scope, caller, action=owner, role=role, tags=tags)

    def enter_frames(self, n: int) -> None:
        if self.depth + n > self.max_depth:
            raise SenseRecursionError()
        self.depth += n

    def leave_frames(self, n: int) -> None:
        self.depth -= n

    # ------------------------------------------------------------------ agents

    def op_MAKE_AGENT(self, f, a, b):
        decl = f.prepared.program.agents[a]
        scope = Scope(f.scope)
        agent = AgentValue(decl, f.prepared.unit[decl.body], scope)
        scope.tag = agent               # lets pause()/receive() find the agent lexically
        self.agents.append(agent)
        f.stack.append(agent)


_J = None       # guard/joins.py, loaded at the first labelled branch (not at start-up)


def _joins(prepared) -> "JoinPoints":
    """A code object's join points (guard/joins.py), made at its first labelled branch."""
    joins = prepared.joins
    if joins is None:
        global _J
        if _J is None:
            from sensevm.guard import joins as _J
        joins = prepared.joins = _J.JoinPoints(prepared.instrs)
    return joins


def _label_bound(scope, names, origins) -> None:
    """Label, where it is bound (the nearest binding from ``scope``), each of ``names`` that
    is: what a branch or try statement may assign, whichever way it went."""
    for name in names:
        found = scope.find(name)
        if found is not None:
            bindings = found.vars
            bindings[name] = PV.label(bindings[name], origins)


# How deep _label_changed follows calls into calls; past it, a call is one the VM cannot look
# into (everything it is handed is labelled), and the Python stack stays small.
_LABEL_DEPTH = 48


def _label_changed(scope, changes, origins, params=None, visiting=None, own=frozenset(),
                   depth=0) -> None:
    """Label in place each Array or Map that code may change (JoinPoints.changed: the
    variables it changes in place, resolved from ``scope``, and the calls it makes, looked
    into): what a branch or try statement may change, whichever way it went. ``params`` maps
    a callee's parameter names to what its caller handed it (the caller's variables); ``own``
    are the callee's ``local`` names, which are no outer variable."""
    names, calls, _ = changes

    def places(found):
        out = []
        for name in found:
            if params is not None and name in params:
                out.extend(params[name])
            elif name not in own:
                out.append((scope, name))
        return out

    visiting = set() if visiting is None else visiting
    for place in places(names):
        _label_place(place, origins, visiting, depth)
    for callee, args, kind in calls:
        handed = [places(arg) for arg in args]
        if kind == "callback":
            # fn(item) / fn(acc, item): any parameter may be handed any of them.
            every = [p for ps in handed for p in ps]
            handed = [every] * 4
        values = []
        if callee is None:
            values.append(None)
        elif callee[0] == "names":
            for place in places(callee[1]):
                value = _place_value(place)
                values.append(value)
                if type(value) is Closure:
                    # `get()(xs)`: the call's callee may be a function get returns.
                    values.extend(_returned_functions(value))
        else:
            for place in places(callee[1]):
                receiver = _place_value(place)
                if type(receiver) is ModuleValue:
                    values.append(receiver.scope.vars.get(callee[2]))
                elif not (type(receiver) in _CONTAINERS or isinstance(receiver, str)):
                    values.append(None)     # an agent's, a Python value's member: unknown
        for value in values:
            _label_call(value, handed, origins, visiting, depth + 1)


def _returned_functions(closure) -> list:
    params = closure.code.code.params
    out = []
    for name in _joins(closure.code).changed(-1)[2]:
        if name not in params:
            value = _place_value((closure.scope, name))
            if type(value) is Closure and value is not closure:
                out.append(value)
    return out


def _label_body(code, scope, handed, origins, visiting, depth) -> None:
    """What running ``code`` (a function's, a tool's, an action's or an agent's body) in
    ``scope`` with the places ``handed`` as its parameters may change."""
    key = (id(code), id(scope), tuple((id(s), n) for ps in handed for s, n in ps))
    if key in visiting:
        return
    visiting.add(key)
    joins = _joins(code)
    own = joins.locals()
    params = {name: handed[k] if k < len(handed) else []
              for k, name in enumerate(code.code.params)}
    _label_changed(scope, joins.changed(-1), origins, params, visiting, own, depth)
    # A variable of an outer scope it assigns (`x = v` binds the nearest existing `x`).
    _label_bound(scope, [n for n in joins.assigned() if n not in params and n not in own],
                 origins)


def _label_call(callee, handed, origins, visiting, depth) -> None:
    """What a call of ``callee`` (with arguments from the places ``handed``) may change."""
    t = type(callee)
    if depth > _LABEL_DEPTH:
        # Too deep to follow: every Array or Map its scopes hold, and what it was handed.
        scope = getattr(callee, "scope", None)
        while scope is not None:
            for value in list(scope.vars.values()):
                if type(value) in _CONTAINERS:
                    PV.label(value, origins)
            scope = scope.parent
        t = None
    if t is Builtin:
        if callee.receiver is not None:         # a method of an Array or Map
            method = callee.name.partition(".")[2]
            if method in _J.CHANGING_METHODS or method in _J.CALLBACK_METHODS:
                if type(callee.receiver) in _CONTAINERS:
                    PV.label(callee.receiver, origins)
                if method in _J.CALLBACK_METHODS:
                    for places in handed:
                        for place in places:
                            _label_place(place, origins, visiting, depth)
        elif callee.name == "push" and handed:
            for place in handed[0]:
                _label_place(place, origins, visiting, depth)
        elif callee.name in ("start", "resume") and handed:
            for place in handed[0]:             # an agent's body runs
                agent = _place_value(place)
                if type(agent) is AgentValue and agent.body is not None:
                    _label_body(agent.body, agent.scope, [], origins, visiting, depth)
        return          # (the other builtins change no Array or Map of the program's)
    if t is Closure:
        _label_body(callee.code, callee.scope, handed, origins, visiting, depth)
        return
    if t is ToolDefinition or t is ActionDefinition:
        # A tool's body, or an action's (it runs at commit, with what it was prepared with).
        _label_body(callee.body, callee.scope, handed, origins, visiting, depth)
        return
    if t in _CONTAINERS and depth <= _LABEL_DEPTH:
        # `fs[0](xs)`, `handlers["add"]()`: any function it holds.
        for value in (callee if t is list else list(callee.values())):
            if type(value) is Closure or type(value) is ToolDefinition:
                _label_call(value, handed, origins, visiting, depth + 1)
        return
    # A Python function, a value not known until the call: whatever it was handed.
    for places in handed:
        for place in places:
            _label_place(place, origins, visiting, depth)


def _place_value(place):
    scope, name = place
    found = scope.find(name) if scope is not None else None
    return found.vars[name] if found is not None else None


def _label_place(place, origins, visiting, depth=0) -> None:
    """Label the Array or Map a variable holds; for a function (a call's result was changed
    or handed on: ``mine().push(x)``), what its body may return from its own scope."""
    value = _place_value(place)
    if type(value) in _CONTAINERS:
        PV.label(value, origins)
    elif type(value) is Closure and ("returns", id(value.code)) not in visiting \
            and depth <= _LABEL_DEPTH:
        visiting.add(("returns", id(value.code)))
        code = value.code
        own = _joins(code).locals()
        for name in _joins(code).changed(-1)[2]:
            if name not in code.code.params and name not in own:
                # (what it was handed is labelled at its call; its locals are its own)
                _label_place((value.scope, name), origins, visiting, depth + 1)


_methods = None      # methods.py, loaded at the first method a program reads (not at start-up)



def _native_refusal(f, kind: str, cap: str):
    """Why frame ``f`` may not run a native of ``kind`` requiring ``cap``, or None when it
    may: it must be the body of a tool (kind "tool") or the commit body or rollback block of
    an action of that kind, whose declared capability is exactly ``cap``."""
    role, owner = f.role, f.action
    if kind == "tool":
        if role not in ("tool", "async_tool") or type(owner) is not ToolDefinition \
                or owner.body is not f.prepared:
            return "it runs only in the body of a tool"
        declared = owner.decl.capability
        what = f"tool '{owner.decl.name}'"
    else:
        if role not in ("commit", "rollback") or type(owner) is not PreparedAction:
            return f"it runs only in the body of a {kind} action"
        definition = owner.definition
        body = definition.body if role == "commit" else definition.rollback
        if body is not f.prepared or definition.decl.reversible != (kind == "reversible"):
            return f"it runs only in the body of a {kind} action"
        declared = definition.decl.capability
        what = f"action '{definition.decl.name}'"
    if declared != cap:
        return f"it requires capability '{cap}', and {what} declares " + \
            (f"'{declared}'" if declared else "none")
    return None


def _library_caller(f):
    """The innermost frame at or above ``f`` whose code is not the standard library's (the
    program's call into it), else ``f``."""
    from sensevm.base.stdlib_dir import in_stdlib
    frame = f
    while frame is not None:
        if not in_stdlib(frame.prepared.path):
            return frame
        frame = frame.caller
    return f

def _load_methods():
    global _methods
    from sensevm.runtime import methods
    _methods = methods
    return methods


class _FrameSnapshot:
    """What policy and lineage need of a frame, frozen: its scope, tags and callers."""

    __slots__ = ("scope", "tags", "caller", "origin", "clean")

    def __init__(self, scope, tags, caller):
        self.scope = scope
        self.tags = tags
        self.caller = caller
        self.origin = None
        self.clean = False


def _snapshot(frame):
    chain = []
    while frame is not None:
        chain.append(frame)
        frame = frame.caller or frame.origin
    snap = None
    for fr in reversed(chain):
        snap = _FrameSnapshot(fr.scope, fr.tags, snap)
    return snap
