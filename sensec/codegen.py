"""Code generation: AST -> symbolic instructions (jumps to Labels), one code object per body."""

from __future__ import annotations

from typing import Optional

from sensevm.base.errors import Pos, NO_POS, SenseSyntaxError
from sensevm.bytecode.opcodes import Op
from sensevm.bytecode.program import ActionDecl, AgentDecl, CodeKind, CodeObject, ToolDecl

from . import nodes as n
from .assemble import Instr, Label, assemble, make_instr
from .nesting import MAX_NESTING, too_deep

_LIFECYCLE = {"verify": Op.ACTION_VERIFY, "approve": Op.ACTION_APPROVE,
              "commit": Op.ACTION_COMMIT, "rollback": Op.ACTION_ROLLBACK}

_BINARY = {"+": Op.ADD, "-": Op.SUB, "*": Op.MUL, "/": Op.DIV, "%": Op.MOD, "==": Op.EQ,
           "!=": Op.NE, "<": Op.LT, "<=": Op.LE, ">": Op.GT, ">=": Op.GE}


class ProgramBuilder:
    """The tables shared by every code object of one program: strings, constants, codes, modules."""

    def __init__(self):
        self.strings: list[str] = []
        self._string_index: dict[str, int] = {}
        self.constants: list = []
        self._constant_index: dict[tuple, int] = {}
        self.codes: list[Optional[CodeObject]] = []
        self.actions: list[ActionDecl] = []
        self.tools: list[ToolDecl] = []
        self.agents: list[AgentDecl] = []
        self.modules: list = []
        self.sources: list = []

    def string(self, s: str) -> int:
        index = self._string_index.get(s)
        if index is None:
            index = self._string_index[s] = len(self.strings)
            self.strings.append(s)
        return index

    def constant(self, value) -> int:
        # 1, 1.0, True and -0.0 / 0.0 are different constants. Only a Float needs its repr
        # for that; any other value is its own key (a repr would copy a long String, and an
        # Int of more than 4,300 digits has none).
        key = (type(value), repr(value) if type(value) is float else value)
        index = self._constant_index.get(key)
        if index is None:
            index = self._constant_index[key] = len(self.constants)
            self.constants.append(value)
        return index

    def reserve_code(self) -> int:
        self.codes.append(None)
        return len(self.codes) - 1


class _Control:
    """An entry of the block-structure stack that break/continue must unwind through."""

    __slots__ = ("kind", "break_label", "continue_label", "final", "final_pos")

    def __init__(self, kind: str, break_label: Optional[Label] = None,
                 continue_label: Optional[Label] = None, final=None, final_pos=None):
        self.kind = kind            # "scope" | "test" | "loop" | "try" | "finally"
        self.break_label = break_label
        self.continue_label = continue_label
        self.final = final          # a "finally" entry's block, run again by each jump out
        self.final_pos = final_pos


class FunctionCompiler(n.NodeVisitor):
    """Compiles one body (a module's top level or a def) into one CodeObject."""

    def __init__(self, builder: ProgramBuilder, source: int, module_slots: dict,
                 action_names: frozenset = frozenset(), tool_names: frozenset = frozenset(),
                 level: int = 0):
        self.b = builder
        self.source = source
        self.module_slots = module_slots      # import ModRef -> module table index
        self.action_names = action_names      # names some action declaration of this file binds
        self.tool_names = tool_names          # ... and some tool declaration
        self.items: list = []
        self.control: list[_Control] = []
        self.level = level                    # nesting level of the node being compiled
        self.handling = 0                     # except clauses around the code being compiled

    # ------------------------------------------------------------------ nesting

    def visit(self, node: n.Node):
        # NodeVisitor.visit, counting levels (nesting.py): past the bound, nothing deeper is
        # entered, so the recursion stays within the deep stack the driver runs this on.
        fn = self._visit_table.get(node.__class__)
        if fn is None:
            fn = (getattr(type(self), "visit_" + type(node).__name__, None)
                  or type(self).generic_visit)
            self._visit_table[node.__class__] = fn
        level = self.level = self.level + 1
        if level > MAX_NESTING:
            raise too_deep(node.pos, self.b.sources[self.source].path)
        fn(self, node)
        self.level = level - 1

    def enter(self, node: n.Node) -> None:
        """A level for ``node``, which is compiled without a visit of its own."""
        self.level += 1
        if self.level > MAX_NESTING:
            raise too_deep(node.pos, self.b.sources[self.source].path)

    # ------------------------------------------------------------------ emitting

    def emit(self, op: Op, *args, pos: Pos = NO_POS) -> None:
        self.items.append(make_instr(Instr, (op, args, pos)))

    def place(self, label: Label) -> None:
        self.items.append(label)

    def finish(self, name: str, kind: CodeKind, params=(), param_types=(), return_type=None,
               pos: Pos = NO_POS) -> CodeObject:
        self.emit(Op.LOAD_NIL, pos=pos)
        self.emit(Op.RETURN, pos=pos)
        code, max_stack, positions = assemble(self.items)
        return CodeObject(name=name, kind=kind, source=self.source, params=tuple(params),
                          param_types=tuple(param_types), return_type=return_type,
                          max_stack=max_stack, code=code, positions=positions)

    def block(self, stmts) -> None:
        for stmt in stmts:
            self.visit(stmt)

    def scoped_block(self, stmts, pos: Pos) -> None:
        """A block in a scope of its own (if/else branches, loop iterations, sessions)."""
        self.emit(Op.PUSH_SCOPE, pos=pos)
        self.control.append(_Control("scope"))
        self.block(stmts)
        self.control.pop()
        self.emit(Op.POP_SCOPE, 1, pos=pos)

    # ------------------------------------------------------------------ statements

    def visit_ExprStmt(self, s: n.ExprStmt):
        if isinstance(s.expr, n.Assign):
            self.enter(s.expr)
            self.assign(s.expr, keep=False)
            self.level -= 1
        elif isinstance(s.expr, n.CompoundAssign):
            self.enter(s.expr)
            self.compound_assign(s.expr, keep=False)
            self.level -= 1
        else:
            self.visit(s.expr)
            self.emit(Op.POP, pos=s.pos)

    def visit_TypedDecl(self, s: n.TypedDecl):
        self.visit(s.value)
        self.emit(Op.CHECK_DECL, self.b.string(s.name), self.b.string(s.type.text), pos=s.pos)
        self.emit(Op.STORE_NAME, self.b.string(s.name), pos=s.pos)

    def visit_LocalDecl(self, s: n.LocalDecl):
        self.visit(s.value)
        if s.type is not None:
            self.emit(Op.CHECK_DECL, self.b.string(s.name), self.b.string(s.type.text), pos=s.pos)
        self.emit(Op.STORE_LOCAL, self.b.string(s.name), pos=s.pos)

    def visit_If(self, s: n.If):
        else_label, end = Label("else"), Label("endif")
        self.visit(s.cond)
        self.emit(Op.POP_JUMP_IF_FALSE, else_label if s.orelse else end, pos=s.pos)
        self.scoped_block(s.body, s.pos)
        if s.orelse:
            self.emit(Op.JUMP, end, pos=s.pos)
            self.place(else_label)
            if len(s.orelse) == 1 and isinstance(s.orelse[0], n.If):
                # `else if`: its condition runs in the enclosing scope (as the reference does).
                self.visit(s.orelse[0])
            else:
                self.scoped_block(s.orelse, s.pos)
        self.place(end)

    def visit_While(self, s: n.While):
        top, end = Label("while"), Label("endwhile")
        self.place(top)
        self.visit(s.cond)
        self.emit(Op.POP_JUMP_IF_FALSE, end, pos=s.pos)
        self.control.append(_Control("loop", end, top))
        self.scoped_block(s.body, s.pos)
        self.control.pop()
        self.emit(Op.JUMP, top, pos=s.pos)
        self.place(end)

    def visit_For(self, s: n.For):
        top, broken, end = Label("for"), Label("break"), Label("endfor")
        self.visit(s.iterable)
        self.emit(Op.GET_ITER, pos=s.pos)     # (the reference reports the line of `for`)
        self.place(top)
        self.emit(Op.FOR_ITER, end, pos=s.pos)
        self.control.append(_Control("loop", broken, top))
        self.emit(Op.PUSH_SCOPE, pos=s.pos)
        self.control.append(_Control("scope"))
        self.emit(Op.STORE_LOCAL, self.b.string(s.var), pos=s.pos)
        self.block(s.body)
        self.control.pop()
        self.emit(Op.POP_SCOPE, 1, pos=s.pos)
        self.control.pop()
        self.emit(Op.JUMP, top, pos=s.pos)
        self.place(broken)
        self.emit(Op.POP, pos=s.pos)          # the iterator, still on the stack after a break
        self.place(end)

    def _leave_to_loop(self, pos: Pos) -> _Control:
        """Unwind scopes, tests and try blocks (running their finally blocks) up to the
        innermost loop of this body; return the loop."""
        scopes = 0
        for depth in range(len(self.control) - 1, -1, -1):
            entry = self.control[depth]
            if entry.kind == "loop":
                if scopes:
                    self.emit(Op.POP_SCOPE, scopes, pos=pos)
                return entry
            if entry.kind == "scope":
                scopes += 1
            else:
                if scopes:
                    self.emit(Op.POP_SCOPE, scopes, pos=pos)
                    scopes = 0
                self._leave(entry, depth, pos)
        raise SenseSyntaxError("'break' outside loop", pos)   # the resolver rules this out

    def _leave(self, entry: _Control, depth: int, pos: Pos) -> None:
        """Leave a test or try block by a jump: its handler is dropped, and a finally block
        runs (compiled again here, outside the try it belongs to)."""
        if entry.kind == "test":
            self.emit(Op.TEST_ABANDON, pos=pos)
            return
        self.emit(Op.TRY_END, pos=pos)
        if entry.kind == "finally":
            saved, self.control = self.control, self.control[:depth]
            self.scoped_block(entry.final, entry.final_pos)
            self.control = saved

    def _leave_for_return(self, pos: Pos) -> None:
        """Before a return: each finally block around it runs, innermost first (the value to
        return waits on the stack). Without one, the frame's end drops every handler."""
        outermost = next((depth for depth, entry in enumerate(self.control)
                          if entry.kind == "finally"), None)
        if outermost is None:
            return
        scopes = 0
        for depth in range(len(self.control) - 1, outermost - 1, -1):
            entry = self.control[depth]
            if entry.kind == "scope":
                scopes += 1
            elif entry.kind != "loop":
                if scopes:
                    self.emit(Op.POP_SCOPE, scopes, pos=pos)
                    scopes = 0
                self._leave(entry, depth, pos)

    def visit_Break(self, s: n.Break):
        loop = self._leave_to_loop(s.pos)
        self.emit(Op.JUMP, loop.break_label, pos=s.pos)

    def visit_Continue(self, s: n.Continue):
        loop = self._leave_to_loop(s.pos)
        self.emit(Op.JUMP, loop.continue_label, pos=s.pos)

    def visit_Return(self, s: n.Return):
        if s.value is None:
            self.emit(Op.LOAD_NIL, pos=s.pos)
        else:
            self.visit(s.value)
        self._leave_for_return(s.pos)
        self.emit(Op.RETURN, pos=s.pos)

    def body(self, name: str, kind: CodeKind, stmts, pos: Pos, params=(), returns=None) -> int:
        """Compile a body into a code object of its own; return its index."""
        index = self.b.reserve_code()
        inner = self.nested()
        inner.block(stmts)
        self.b.codes[index] = inner.finish(
            name, kind, params=[p.name for p in params],
            param_types=[p.type.text if p.type else None for p in params],
            return_type=returns.text if returns else None, pos=pos)
        return index

    def visit_FunctionDef(self, s: n.FunctionDef):
        index = self.body(s.name, CodeKind.FUNCTION, s.body, s.pos, s.params, s.returns)
        self.emit(Op.MAKE_FUNCTION, index, pos=s.pos)
        self.emit(Op.STORE_LOCAL, self.b.string(s.name), pos=s.pos)

    def nested(self) -> "FunctionCompiler":
        return FunctionCompiler(self.b, self.source, self.module_slots, self.action_names,
                                self.tool_names, self.level)

    def visit_ActionDef(self, s: n.ActionDef):
        body_index = self.body(s.name, CodeKind.ACTION_BODY, s.body, s.pos, s.params)
        rollback_index = -1
        if s.rollback is not None:
            rollback_index = self.body(f"{s.name}.rollback", CodeKind.ROLLBACK, s.rollback,
                                       s.rollback_pos or s.pos)
        self.b.actions.append(ActionDecl(s.name, s.kind == "reversible", s.capability,
                                         s.approval, body_index, rollback_index,
                                         immediate=s.kind == "irreversible immediate",
                                         sends=s.sends, roles=s.roles))
        self.emit(Op.MAKE_ACTION, len(self.b.actions) - 1, pos=s.pos)
        self.emit(Op.STORE_LOCAL, self.b.string(s.name), pos=s.pos)

    def visit_ToolDef(self, s: n.ToolDef):
        body_index = self.body(s.name, CodeKind.TOOL_BODY, s.body, s.pos, s.params, s.returns)
        self.b.tools.append(ToolDecl(s.name, s.capability, s.description, s.is_async, body_index,
                                     trusted=s.trusted))
        self.emit(Op.MAKE_TOOL, len(self.b.tools) - 1, pos=s.pos)
        self.emit(Op.STORE_LOCAL, self.b.string(s.name), pos=s.pos)

    def visit_AgentDef(self, s: n.AgentDef):
        body_index = self.body(s.name, CodeKind.AGENT_BODY, s.body, s.pos)
        first = s.body[0] if s.body else None
        doc = (first.expr.value if isinstance(first, n.ExprStmt)
               and isinstance(first.expr, n.StrLit) else None)
        self.b.agents.append(AgentDecl(s.name, s.is_async, doc, body_index))
        self.emit(Op.MAKE_AGENT, len(self.b.agents) - 1, pos=s.pos)
        self.emit(Op.STORE_LOCAL, self.b.string(s.name), pos=s.pos)

    def visit_Policy(self, s: n.Policy):
        for rule in s.rules:
            self.emit(Op.POLICY_ALLOW if rule.effect == "allow" else Op.POLICY_DENY,
                      self.b.string(rule.capability), pos=rule.pos)

    def visit_ModelDecl(self, s: n.ModelDecl):
        # `model NAME = value`: the helper checks and renames the Model; NAME is bound locally.
        self.statement_helper("@model", s.name, s.value, s.pos)
        self.emit(Op.STORE_LOCAL, self.b.string(s.name), pos=s.pos)

    def visit_SetStmt(self, s: n.SetStmt):
        # `set delegation = model`: the value runs first, then the helper checks the target.
        self.statement_helper("@set", s.name, s.value, s.pos)
        self.emit(Op.STORE_LOCAL, self.b.string("@delegation"), pos=s.pos)

    def visit_MemoryDecl(self, s: n.MemoryDecl):
        # `[persistent] memory NAME[: "hint"]`: the helper makes the Memory; NAME is bound
        # locally, as the reference defines it in the current scope.
        self.emit(Op.LOAD_NAME, self.b.string("@memory"), pos=s.pos)
        self.emit(Op.LOAD_CONST, self.b.constant(s.name), pos=s.pos)
        if s.hint is None:
            self.emit(Op.LOAD_NIL, pos=s.pos)
        else:
            self.emit(Op.LOAD_CONST, self.b.constant(s.hint), pos=s.pos)
        self.emit(Op.LOAD_TRUE if s.persistent else Op.LOAD_FALSE, pos=s.pos)
        self.emit(Op.CALL, 3, pos=s.pos)
        self.emit(Op.STORE_LOCAL, self.b.string(s.name), pos=s.pos)

    def statement_helper(self, helper: str, name: str, value: n.Expr, pos: Pos) -> None:
        """Call builtin ``helper(name, value)``; its name cannot be written (or shadowed) in source."""
        self.emit(Op.LOAD_NAME, self.b.string(helper), pos=pos)
        self.emit(Op.LOAD_CONST, self.b.constant(name), pos=pos)
        self.visit(value)
        self.emit(Op.CALL, 2, pos=pos)

    def visit_Session(self, s: n.Session):
        if s.handle is None:
            self.scoped_block(s.body, s.pos)
            return
        # `session NAME as HANDLE:` opens the protocol in the block's scope; the block's end
        # asks for the verdict. No jump can leave the block (resolve.py); an error aborts it.
        self.emit(Op.PUSH_SCOPE, pos=s.pos)
        self.control.append(_Control("scope"))
        self.emit(Op.LOAD_NAME, self.b.string("@session_open"), pos=s.pos)
        self.emit(Op.LOAD_CONST, self.b.constant(s.name), pos=s.pos)
        self.emit(Op.CALL, 1, pos=s.pos)
        self.emit(Op.STORE_LOCAL, self.b.string(s.handle), pos=s.pos)
        self.block(s.body)
        self.emit(Op.LOAD_NAME, self.b.string("@session_close"), pos=s.pos)
        self.emit(Op.CALL, 0, pos=s.pos)
        self.emit(Op.POP, pos=s.pos)
        self.control.pop()
        self.emit(Op.POP_SCOPE, 1, pos=s.pos)

    def visit_Test(self, s: n.Test):
        end = Label("endtest")
        self.emit(Op.TEST_BEGIN, self.b.constant(s.name), end, pos=s.pos)
        self.control.append(_Control("test"))
        self.block(s.body)
        self.control.pop()
        self.emit(Op.TEST_END, pos=s.pos)
        self.place(end)

    def visit_Try(self, s: n.Try):
        """Handlers, outermost first: the finally block's (catches everything, runs the block,
        raises again), then the except clauses'; each is dropped by TRY_END where control
        leaves its range normally, and by the VM when it resumes at it."""
        done, end = Label("endtry"), Label("endfinally")
        final = Label("finally") if s.final is not None else None
        if final is not None:
            self.emit(Op.TRY_BEGIN, final, pos=s.pos)
            self.control.append(_Control("finally", final=s.final,
                                         final_pos=s.final_pos or s.pos))
        if s.handlers:
            clauses = Label("except")
            self.emit(Op.TRY_BEGIN, clauses, pos=s.pos)
            self.control.append(_Control("try"))
            self.scoped_block(s.body, s.pos)
            self.control.pop()
            self.emit(Op.TRY_END, pos=s.pos)
            self.emit(Op.JUMP, done, pos=s.pos)
            self.place(clauses)
            self.except_clauses(s.handlers, done)
        else:
            self.scoped_block(s.body, s.pos)
        self.place(done)
        if final is not None:
            self.control.pop()
            self.emit(Op.TRY_END, pos=s.final_pos)
            self.scoped_block(s.final, s.final_pos)
            self.emit(Op.JUMP, end, pos=s.final_pos)
            self.place(final)                       # the Error on the stack
            self.scoped_block(s.final, s.final_pos)
            self.emit(Op.RAISE, pos=s.final_pos)
            self.place(end)

    def except_clauses(self, clauses, done: Label) -> None:
        """The first clause whose class the Error (on the stack) is of runs, in a scope of its
        own holding ``as NAME`` and ``@handling`` (what a bare raise raises); with no such
        clause the Error is raised again."""
        for clause in clauses:
            after = Label("next")
            if clause.cls is not None:
                self.emit(Op.EXCEPT_JUMP, self.b.string(clause.cls), after,
                          pos=clause.class_pos or clause.pos)
            self.emit(Op.PUSH_SCOPE, pos=clause.pos)
            self.control.append(_Control("scope"))
            if clause.name is not None:
                self.emit(Op.DUP, pos=clause.pos)
                self.emit(Op.STORE_LOCAL, self.b.string(clause.name), pos=clause.pos)
            self.emit(Op.STORE_LOCAL, self.b.string("@handling"), pos=clause.pos)
            self.handling += 1
            self.block(clause.body)
            self.handling -= 1
            self.control.pop()
            self.emit(Op.POP_SCOPE, 1, pos=clause.pos)
            self.emit(Op.JUMP, done, pos=clause.pos)
            if clause.cls is not None:
                self.place(after)
        if clauses[-1].cls is not None:
            self.emit(Op.RAISE, pos=clauses[-1].pos)

    def visit_Raise(self, s: n.Raise):
        if s.value is not None:
            self.visit(s.value)
        elif self.handling:
            self.emit(Op.LOAD_NAME, self.b.string("@handling"), pos=s.pos)
        else:
            # The resolver let it through: the program binds `raise`, and this line is the
            # reference's expression statement naming it.
            self.emit(Op.LOAD_NAME, self.b.string("raise"), pos=s.pos)
            self.emit(Op.POP, pos=s.pos)
            return
        self.emit(Op.RAISE, pos=s.pos)

    def visit_Import(self, s: n.Import):
        if s.python:
            # Bound as the alias, else the last dotted part (`import python os.path` -> path).
            self.emit(Op.IMPORT_PYTHON, self.b.string(s.module.text), pos=s.pos)
            name = s.alias or s.module.text.rsplit(".", 1)[-1]
            self.emit(Op.STORE_LOCAL, self.b.string(name), pos=s.pos)
            return
        slot = self.module_slots[s.module]
        self.emit(Op.IMPORT, slot, pos=s.pos)
        name = s.alias or module_binding_name(s.module)
        self.emit(Op.STORE_LOCAL, self.b.string(name), pos=s.pos)

    def visit_FromImport(self, s: n.FromImport):
        if s.python:
            self.emit(Op.IMPORT_PYTHON, self.b.string(s.module.text), pos=s.pos)
        else:
            self.emit(Op.IMPORT, self.module_slots[s.module], pos=s.pos)
        for item in s.names:
            self.emit(Op.DUP, pos=item.pos)
            self.emit(Op.IMPORT_FROM, self.b.string(item.name), pos=item.pos)
            self.emit(Op.STORE_LOCAL, self.b.string(item.alias or item.name), pos=item.pos)
        self.emit(Op.POP, pos=s.pos)

    # ------------------------------------------------------------------ expressions

    def visit_IntLit(self, e: n.IntLit):
        self.emit(Op.LOAD_CONST, self.b.constant(e.value), pos=e.pos)

    visit_FloatLit = visit_IntLit
    visit_StrLit = visit_IntLit

    def visit_BoolLit(self, e: n.BoolLit):
        self.emit(Op.LOAD_TRUE if e.value else Op.LOAD_FALSE, pos=e.pos)

    def visit_NilLit(self, e: n.NilLit):
        self.emit(Op.LOAD_NIL, pos=e.pos)

    def visit_Name(self, e: n.Name):
        self.emit(Op.LOAD_NAME, self.b.string(e.name), pos=e.pos)

    def visit_ArrayLit(self, e: n.ArrayLit):
        for item in e.items:
            self.visit(item)
        self.emit(Op.BUILD_ARRAY, len(e.items), pos=e.pos)

    def visit_MapLit(self, e: n.MapLit):
        # Key then value, entry by entry: the order they are evaluated in (EXTENSIONS.md E1).
        # An entry is no level of nesting (nesting.py): its key and value are visited directly.
        for entry in e.entries:
            self.visit(entry.key)
            self.visit(entry.value)
        self.emit(Op.BUILD_MAP, len(e.entries), pos=e.pos)

    def visit_Unary(self, e: n.Unary):
        self.visit(e.operand)
        self.emit(Op.NEG if e.op == "-" else Op.NOT, pos=e.pos)

    def visit_Binary(self, e: n.Binary):
        self.visit(e.left)
        self.visit(e.right)
        if e.op == "in" or e.op == "not in":
            self.emit(Op.CONTAINS, pos=e.pos)
            if e.op == "not in":
                self.emit(Op.NOT, pos=e.pos)      # (a labelled answer's negation keeps its labels)
            return
        self.emit(_BINARY[e.op], pos=e.pos)

    def visit_Logical(self, e: n.Logical):
        end = Label(e.op)
        self.visit(e.left)
        self.emit(Op.JUMP_IF_FALSE_OR_POP if e.op == "and" else Op.JUMP_IF_TRUE_OR_POP, end,
                  pos=e.pos)
        self.visit(e.right)
        self.place(end)

    def visit_Call(self, e: n.Call):
        callee = e.callee
        if (isinstance(callee, n.Member) and callee.name in _LIFECYCLE and not e.args
                and not e.labels):
            # `x.commit()`: the lifecycle opcode, positioned at the method name (spec 10.4).
            self.enter(callee)
            self.visit(callee.obj)
            self.level -= 1
            self.emit(_LIFECYCLE[callee.name], pos=callee.pos)
            return
        if isinstance(callee, n.Name) and not e.labels and (
                callee.name in self.action_names or callee.name in self.tool_names):
            # The statically likely callee picks the opcode; at run time both behave as CALL
            # does for any other callee, and CALL reaches the same handlers for these.
            self.visit(callee)
            for arg in e.args:
                self.visit(arg)
            op = Op.ACTION_PREPARE if callee.name in self.action_names else Op.TOOL_CALL
            self.emit(op, len(e.args), pos=e.pos)
            return
        self.visit(e.callee)
        for arg in e.args:
            self.visit(arg)
        if e.labels:
            for label in e.labels:
                self.emit(Op.LOAD_CONST, self.b.constant(label.name), pos=label.pos)
                self.enter(label)
                self.visit(label.value)
                self.level -= 1
            self.emit(Op.CALL_LABELED, len(e.args), len(e.labels), pos=e.pos)
        else:
            self.emit(Op.CALL, len(e.args), pos=e.pos)

    def visit_NativeCall(self, e: n.NativeCall):
        for arg in e.args:
            self.visit(arg)
        self.emit(Op.NATIVE, self.b.constant(e.name), len(e.args), pos=e.pos)

    def visit_Member(self, e: n.Member):
        self.visit(e.obj)
        self.emit(Op.GET_MEMBER, self.b.string(e.name), pos=e.pos)

    def visit_Index(self, e: n.Index):
        self.visit(e.obj)
        self.visit(e.index)
        self.emit(Op.INDEX, pos=e.pos)

    def visit_Slice(self, e: n.Slice):
        self.visit(e.obj)
        written = 0
        for bit, bound in ((1, e.lower), (2, e.upper)):
            if bound is None:
                self.emit(Op.LOAD_NIL, pos=e.pos)       # a slot SLICE does not read
            else:
                self.visit(bound)
                written |= bit
        self.emit(Op.SLICE, written, pos=e.pos)

    def visit_FString(self, e: n.FString):
        # Each value's str() form at the value (its errors are positioned there), then the
        # pieces joined: BUILD_STRING only when there is more than one.
        for part in e.parts:
            if isinstance(part, str):
                self.emit(Op.LOAD_CONST, self.b.constant(part), pos=e.pos)
            else:
                self.visit(part)
                self.emit(Op.FORMAT_VALUE, pos=part.pos)
        if not e.parts:
            self.emit(Op.LOAD_CONST, self.b.constant(""), pos=e.pos)
        elif len(e.parts) > 1:
            self.emit(Op.BUILD_STRING, len(e.parts), pos=e.pos)

    def visit_CompoundAssign(self, e: n.CompoundAssign):
        self.compound_assign(e, keep=True)

    def compound_assign(self, e: n.CompoundAssign, keep: bool) -> None:
        """``t OP= v`` as ``t = t OP v`` compiles, the container and index of an Index target
        evaluated once (DUP2 keeps them for the store)."""
        target, op = e.target, _BINARY[e.op]
        if isinstance(target, n.Name):
            name = self.b.string(target.name)
            self.emit(Op.LOAD_NAME, name, pos=target.pos)
            self.visit(e.value)
            self.emit(op, pos=e.pos)
            if keep:
                self.emit(Op.DUP, pos=e.pos)
            self.emit(Op.STORE_NAME, name, pos=e.pos)
            return
        self.enter(target)
        self.visit(target.obj)
        self.visit(target.index)
        self.level -= 1
        self.emit(Op.DUP2, pos=target.pos)
        self.emit(Op.INDEX, pos=target.pos)
        self.visit(e.value)
        self.emit(op, pos=e.pos)
        self.emit(Op.STORE_INDEX, pos=e.pos)
        if not keep:
            self.emit(Op.POP, pos=e.pos)

    def visit_Assign(self, e: n.Assign):
        self.assign(e, keep=True)

    def assign(self, e: n.Assign, keep: bool) -> None:
        target = e.target
        if isinstance(target, n.Name):
            self.visit(e.value)
            if keep:
                self.emit(Op.DUP, pos=e.pos)
            self.emit(Op.STORE_NAME, self.b.string(target.name), pos=e.pos)
        else:
            # Container, then index, then value: the reference's evaluation order.
            self.enter(target)
            self.visit(target.obj)
            self.visit(target.index)
            self.level -= 1
            self.visit(e.value)
            self.emit(Op.STORE_INDEX, pos=e.pos)     # reported at the '=', as the reference does
            if not keep:
                self.emit(Op.POP, pos=e.pos)


def module_binding_name(ref: n.ModRef) -> str:
    """``import "lib/util.sns"`` and ``import lib.util`` both bind ``util``."""
    text = ref.text
    if ref.is_string:
        base = text.replace("\\", "/").rsplit("/", 1)[-1]
        return base[:-4] if base.endswith(".sns") else base.rsplit(".", 1)[0] if "." in base else base
    return text.rsplit(".", 1)[-1]


def module_relative_path(ref: n.ModRef) -> str:
    return ref.text if ref.is_string else ref.text.replace(".", "/") + ".sns"
