"""The load-time verifier: checks a Program's tables and bytecode, and is the only producer of VerifiedProgram.

The checks follow the WebAssembly validation algorithm: one table-driven case per operand kind,
then an abstract interpretation that walks the control-flow graph with a worklist (our jumps are
unstructured, as in the JVM) and tracks, per instruction, three depths:

* the operand stack depth, from the ``pops``/``pushes``/``branch`` columns of opcodes.py;
* the scope depth (PUSH_SCOPE, POP_SCOPE, TEST_BEGIN, TEST_END, TEST_ABANDON);
* the running handlers: the stack of test blocks (TEST_BEGIN on fall-through, TEST_END,
  TEST_ABANDON) and try blocks (TRY_BEGIN on fall-through, TRY_END) the frame would resume at
  on an error, each as (kind, target, stack depth, scope depth), innermost last;

and which stack slots hold the two things that are not ordinary values to every instruction:

* an iterator (GET_ITER makes one): only FOR_ITER may use it and only POP drop it, so FOR_ITER
  always finds one and no other instruction ever sees one;
* a module fresh from IMPORT or IMPORT_PYTHON (or a DUP of one): the only operand IMPORT_FROM
  accepts.

Each must be the same along every path into an instruction and never negative; the stack depth
never exceeds the code object's ``max_stack``. While a handler runs, no instruction pops below the
stack depth it was pushed at, so an error anywhere in its range finds the slots it keeps, and its
target is entered (as a TRY_BEGIN's branch) with that depth plus the Error, the scope depth it
was pushed at and the handlers below it: the handler table of a code object is this stack, proved
at every instruction (``handler_ranges`` lists it). An ``EXCEPT_JUMP`` names a class a program
may catch. Every path ends in a terminator (control cannot
fall off the end). The first problem found is reported as VerifyError(code, offset, op, message).
"""

from __future__ import annotations


from sensevm.base.errors import CATCHABLE, VerifyError
from sensevm.base.record import record
from sensevm.bytecode.decode import DecodeError, Instruction, decode, decode_at
from sensevm.bytecode.opcodes import EFFECTS, OPS, POPS, PUSHES, SHAPES, TERMINATORS, Op, Operand
from sensevm.bytecode.program import MAX_ANNOTATION_NESTING, CodeKind, CodeObject, Program

__all__ = ["VerifiedCode", "VerifiedProgram", "verify", "load_verified", "handler_ranges"]

# The kinds of a running handler in the verifier's state (and in persist.py's check of a saved
# frame against it).
TEST_HANDLER, TRY_HANDLER = 0, 1

PROGRAM = "<program>"       # the code_name of errors in the program's own tables

# Handed only by verify() to VerifiedProgram.__init__: a VerifiedProgram cannot be made by
# accident, so the VM's isinstance check means "this passed the verifier".
_TOKEN = object()

_CONSTANT_TYPES = (type(None), bool, int, float, str)
SLICE_BOUNDS = 3            # SLICE's operand: 1 (a lower bound written) | 2 (an upper one)


@record(eq=False)
class VerifiedCode:
    """A code object that passed the verifier, with its decoded instructions."""
    code: CodeObject
    instructions: tuple[Instruction, ...]
    index_of: dict[int, int]        # byte offset of an instruction -> its index in instructions
    max_depth: int                  # the deepest operand stack on any path (<= code.max_stack)


class VerifiedProgram:
    """A Program that passed verify(); the VM runs nothing else."""

    __slots__ = ("program", "codes")

    def __init__(self, program: Program, codes: tuple[VerifiedCode, ...], *, _token=None):
        if _token is not _TOKEN:
            raise TypeError("a VerifiedProgram is made only by sensevm.bytecode.verify.verify()")
        object.__setattr__(self, "program", program)
        object.__setattr__(self, "codes", codes)

    def __setattr__(self, name, value):
        raise AttributeError("VerifiedProgram is immutable")

    @property
    def entry(self) -> VerifiedCode:
        return self.codes[self.program.entry]

    def __repr__(self) -> str:
        return f"<VerifiedProgram: {len(self.codes)} code objects, entry {self.program.entry}>"


def verify(program: Program) -> VerifiedProgram:
    """Check everything the VM relies on; return a VerifiedProgram or raise the first VerifyError."""
    _check_tables(program)
    fast = _FastVerifier(program)
    # The fast pass accepts exactly what the full one accepts; whatever it refuses goes through
    # the full verifier, which finds the same problem and reports the first one on its walk.
    codes = tuple(fast.run(code) or _CodeVerifier(program, code).run() for code in program.codes)
    return VerifiedProgram(program, codes, _token=_TOKEN)


def load_verified(data: bytes) -> VerifiedProgram:
    """Parse a .snb file and verify it (SnbFormatError or VerifyError on failure)."""
    from sensevm.bytecode import snb
    return verify(snb.load(data))


# ----------------------------------------------------------------------------- annotations

# Patterns are compiled on first use (re caches them): most programs never need them, and
# every start-up would pay for compiling them.
_ANNOTATION_TOKEN = r"[^\W\d]\w*|[<>,]| +"
_MALFORMED, _TOO_DEEP = "malformed", "too deep"


def annotation_ok(text) -> bool:
    """``NAME`` or ``NAME<T, U, ...>`` recursively, NAME an identifier; spaces between tokens;
    type arguments nested at most MAX_ANNOTATION_NESTING deep."""
    return _annotation_problem(text) is None


def _annotation_problem(text):
    """None for a good annotation, else _MALFORMED or _TOO_DEEP."""
    if not isinstance(text, str) or not text or text != text.strip():
        return _MALFORMED
    # A state machine rather than recursive descent, so that absurd nesting in a forged file
    # cannot hit Python's recursion limit.
    depth, pos, want_name, after_name = 0, 0, True, False
    import re       # (not at start-up: a program without annotations never needs it)
    for m in re.finditer(_ANNOTATION_TOKEN, text):
        if m.start() != pos:
            return _MALFORMED           # a character that is no token
        pos = m.end()
        tok = m.group()
        if tok[0] == " ":
            continue
        if want_name:
            if tok in "<>,":
                return _MALFORMED
            want_name, after_name = False, True
        elif tok == "<" and after_name:
            depth, want_name = depth + 1, True
            if depth > MAX_ANNOTATION_NESTING:
                return _TOO_DEEP
        elif tok == "," and depth:
            want_name = True
        elif tok == ">" and depth:
            depth, after_name = depth - 1, False
        else:
            return _MALFORMED
    return None if pos == len(text) and depth == 0 and not want_name else _MALFORMED


def _annotation_message(text, kind: str = "type annotation", where: str = ""):
    """Why the annotation ``text`` is refused (``kind`` names it, ``where`` says whose it
    is), or None."""
    problem = _annotation_problem(text)
    if problem is None:
        return None
    if problem is _TOO_DEEP:
        return (f"{kind}{where} nests type arguments more than {MAX_ANNOTATION_NESTING} deep")
    return f"malformed {kind} {text!r}{where}"


# ----------------------------------------------------------------------------- program tables

def _check_tables(program: Program) -> None:
    def fail(message: str):
        raise VerifyError(PROGRAM, 0, None, message)

    codes = program.codes
    if not 0 <= program.entry < len(codes):
        fail(f"entry code index {program.entry} out of range ({len(codes)} code objects)")
    entry = codes[program.entry]
    if entry.kind != CodeKind.MODULE:
        fail(f"entry code {program.entry} ({entry.name}) is not a module")
    for i, m in enumerate(program.modules):
        if m.error is not None and m.code != -1:
            fail(f"module {i} ({m.name}) has both code and a compile error")
        if m.code == -1:
            continue
        if not 0 <= m.code < len(codes):
            fail(f"module {i} ({m.name}) has code index {m.code}, out of range "
                 f"({len(codes)} code objects)")
        if codes[m.code].kind != CodeKind.MODULE:
            fail(f"module {i} ({m.name}) has code {m.code} ({codes[m.code].name}), "
                 f"which is not a module")
    _check_manifest(program, fail)
    for i, c in enumerate(program.constants):
        if not isinstance(c, _CONSTANT_TYPES):
            fail(f"constant {i} has unsupported type {type(c).__name__}")
    for i, s in enumerate(program.strings):
        if not isinstance(s, str):
            fail(f"string {i} is not a str")
    # Code names and paths become file names (of tier 2's generated code, of the file an error
    # is shown from), where the host refuses a NUL character.
    for what, items, fields in (("code", codes, ("name",)),
                                ("source", program.sources, ("path",)),
                                ("module", program.modules, ("name", "rel", "path"))):
        for i, item in enumerate(items):
            for field in fields:
                if "\0" in getattr(item, field):
                    fail(f"{what} {i} has a NUL character in its {field}")
    _check_names(program, fail)


def _check_names(program: Program, fail) -> None:
    """No name holds a control character (diagnostics.CONTROL). The compiler writes only
    identifiers, capabilities and annotations there (and a module's name and path as its
    import wrote them, which it refuses with such characters too); names reach error
    messages, listings, audit lines and printed values, where one could drive the terminal."""
    names = list(program.strings)
    for code in program.codes:
        names.append(code.name)
        names += code.params
    names += [entry.name for entries in (program.actions, program.tools, program.agents)
              for entry in entries]
    names += [m.name + m.rel for m in program.modules]
    names += [param for action in program.actions for param, _ in action.roles]
    if "".join(names).isprintable():        # the usual case: one pass, in C
        return
    from sensevm.base.diagnostics import CONTROL

    import re

    def check(what: str, text: str) -> None:
        if re.search(CONTROL, text):
            fail(f"{what} has a control character: {text!r}")

    for i, text in enumerate(program.strings):
        check(f"name {i}", text)
    for i, code in enumerate(program.codes):
        check(f"code {i}'s name", code.name)
        for j, param in enumerate(code.params):
            check(f"code {i}'s parameter {j}", param)
    for what, entries in (("action", program.actions), ("tool", program.tools),
                          ("agent", program.agents)):
        for i, entry in enumerate(entries):
            check(f"{what} {i}'s name", entry.name)
    for i, action in enumerate(program.actions):
        for param, _ in action.roles:
            check(f"action {i}'s role parameter", param)
    for i, module in enumerate(program.modules):
        check(f"module {i}'s name", module.name)
        check(f"module {i}'s path", module.rel)


_KIND_NAMES = {CodeKind.MODULE: "a module body", CodeKind.FUNCTION: "a function",
               CodeKind.ACTION_BODY: "an action body", CodeKind.ROLLBACK: "a rollback block",
               CodeKind.TOOL_BODY: "a tool body", CodeKind.AGENT_BODY: "an agent body"}


def _capability_ok(capability: str) -> bool:
    import re       # (here, not at start-up: a program without actions or tools never needs it)
    return re.fullmatch(_CAPABILITY, capability) is not None


def _check_manifest(program: Program, fail) -> None:
    """Action bodies and rollback blocks are reachable only through their manifest entry.

    Each ACTION_BODY code object belongs to exactly one declared action and each ROLLBACK one to
    exactly one reversible action; nothing else (MAKE_FUNCTION, a module entry, the entry point)
    may name them, so the only way into a body is ACTION_COMMIT and into a rollback block
    ACTION_ROLLBACK, whose handlers check policy first.
    """
    codes = program.codes
    owner: dict[int, int] = {}

    def claim(i: int, index: int, kind: CodeKind, role: str, name: str) -> None:
        if not 0 <= index < len(codes):
            fail(f"action {i} ({name}) has {role} code index {index}, out of range "
                 f"({len(codes)} code objects)")
        if codes[index].kind != kind:
            fail(f"action {i} ({name}) has {role} code {index} ({codes[index].name}), which is "
                 f"{_KIND_NAMES[codes[index].kind]}")
        if index in owner:
            fail(f"code {index} ({codes[index].name}) is claimed by actions {owner[index]} and {i}")
        owner[index] = i

    for i, a in enumerate(program.actions):
        claim(i, a.body, CodeKind.ACTION_BODY, "body", a.name)
        if a.reversible:
            claim(i, a.rollback, CodeKind.ROLLBACK, "rollback", a.name)
        elif a.rollback != -1:
            fail(f"action {i} ({a.name}) is irreversible but has a rollback block "
                 f"(code {a.rollback})")
        if a.capability is not None and not _capability_ok(a.capability):
            fail(f"action {i} ({a.name}) has a malformed capability {a.capability!r}")
    tool_owner = _claim_bodies(codes, program.tools, "tool", CodeKind.TOOL_BODY, fail)
    agent_owner = _claim_bodies(codes, program.agents, "agent", CodeKind.AGENT_BODY, fail)
    for t in program.tools:
        if t.capability is not None and not _capability_ok(t.capability):
            fail(f"tool {tool_owner[t.body]} ({t.name}) has a malformed capability "
                 f"{t.capability!r}")
    for index, code in enumerate(codes):
        if code.kind == CodeKind.AGENT_BODY and index not in agent_owner:
            fail(f"code {index} ({code.name}) is an agent body that no agent declares")
        if code.kind in (CodeKind.ACTION_BODY, CodeKind.ROLLBACK) and index not in owner:
            fail(f"code {index} ({code.name}) is {_KIND_NAMES[code.kind]} that no action declares")
        if code.kind == CodeKind.TOOL_BODY and index not in tool_owner:
            fail(f"code {index} ({code.name}) is a tool body that no tool declares")


def _claim_bodies(codes, entries, what: str, kind: CodeKind, fail) -> dict[int, int]:
    """Each manifest entry's body: in range, of ``kind``, and claimed by that entry alone."""
    owner: dict[int, int] = {}
    for i, entry in enumerate(entries):
        body = entry.body
        if not 0 <= body < len(codes):
            fail(f"{what} {i} ({entry.name}) has body code index {body}, out of range "
                 f"({len(codes)} code objects)")
        if codes[body].kind != kind:
            fail(f"{what} {i} ({entry.name}) has body code {body} ({codes[body].name}), which is "
                 f"{_KIND_NAMES[codes[body].kind]}")
        if body in owner:
            fail(f"code {body} ({codes[body].name}) is claimed by {what}s {owner[body]} and {i}")
        owner[body] = i
    return owner


_CAPABILITY = r"[^\W\d]\w*(\.[^\W\d]\w*)*"


# ----------------------------------------------------------------------------- code objects


def native_problem(program: Program, code: CodeObject, name):
    """Why a NATIVE naming ``name`` may not stand in ``code``, or None: it names a native of
    the registry, and a non-pure one stands in the body of a declaration of its kind that
    requires exactly its capability (natives.py; the VM checks the same at run time, which is
    the check that matters)."""
    from sensevm.bytecode import natives
    spec = natives.SPECS.get(name) if type(name) is str else None
    if spec is None:
        return f"{name!r} is not a native of the standard library"
    kind, cap = spec
    if kind == natives.PURE:
        return None
    codes = program.codes
    if kind == natives.TOOL:
        owner = next((t for t in program.tools
                      if 0 <= t.body < len(codes) and codes[t.body] is code), None)
        what = "a tool's body"
    else:
        reversible = kind == natives.REVERSIBLE
        owner = next((a for a in program.actions if a.reversible == reversible and any(
            0 <= i < len(codes) and codes[i] is code for i in (a.body, a.rollback))), None)
        what = f"the body of an {kind} action"
    if owner is None:
        return f"{natives.describe(name)} outside {what}"
    if owner.capability != cap:
        return (f"{natives.describe(name)} in '{owner.name}', which requires "
                f"{owner.capability or 'no capability'}")
    return None

class _CodeVerifier:
    """Verifies one code object; ``fail`` reports at an instruction, like wasm's error_if."""

    def __init__(self, program: Program, code: CodeObject):
        self.program = program
        self.code = code
        self.instructions: tuple[Instruction, ...] = ()
        self.index_of: dict[int, int] = {}
        self.states: list = []          # (stack, scope, test) on entry to each instruction
        self.work: list[int] = []       # instruction indices still to visit, as a heap

    def fail(self, offset: int, opname, message: str):
        raise VerifyError(self.code.name, offset, opname, message)

    def fail_at(self, ins: Instruction, message: str):
        self.fail(ins.offset, ins.op.name, message)

    def run(self) -> VerifiedCode:
        self.check_header()
        decode_error = self.decode()
        self.check_operands()
        if decode_error is not None:
            op = OPS.get(self.code.code[decode_error.offset])
            opname = op.name if op is not None else None
            message = decode_error.message
            if opname and message.startswith(opname + ": "):
                message = message[len(opname) + 2:]
            self.fail(decode_error.offset, opname, message)
        self.check_positions()
        max_depth = self.check_flow()
        return VerifiedCode(self.code, self.instructions, self.index_of, max_depth)

    # -- the code object's own fields

    def check_header(self) -> None:
        code, program = self.code, self.program

        def fail(message: str):
            self.fail(0, None, message)

        if code.kind not in _KIND_NAMES:
            fail(f"unknown code kind {code.kind!r}")
        if not 0 <= code.source < len(program.sources):
            fail(f"source index {code.source} out of range ({len(program.sources)} sources)")
        if len(code.params) != len(code.param_types):
            fail(f"{len(code.params)} params but {len(code.param_types)} param_types")
        for p, t in zip(code.params, code.param_types):
            problem = t is not None and _annotation_message(t, where=f" for parameter {p!r}")
            if problem:
                fail(problem)
        if code.return_type is not None:
            problem = _annotation_message(code.return_type, "return type annotation")
            if problem:
                fail(problem)
        if code.max_stack < 0:
            fail(f"negative max_stack {code.max_stack}")
        if not code.code:
            fail("empty code")

    # -- static checks, instruction by instruction

    def decode(self):
        """Decode as far as possible; the error (if any) is reported after earlier instructions' checks."""
        out = []
        error = None
        try:
            for ins in decode(self.code.code):
                out.append(ins)
        except DecodeError as e:
            error = e
        self.instructions = tuple(out)
        self.index_of = {ins.offset: i for i, ins in enumerate(out)}
        return error

    def check_operands(self) -> None:
        program = self.program
        n_strings = len(program.strings)
        for ins in self.instructions:
            for kind, value in zip(ins.op.operands, ins.args):
                if kind is Operand.CONST:
                    if value >= len(program.constants):
                        self.fail_at(ins, f"constant index {value} out of range "
                                          f"({len(program.constants)} constants)")
                    if ins.op is Op.TEST_BEGIN and not isinstance(program.constants[value], str):
                        self.fail_at(ins, f"test name constant {value} is not a string")
                    if ins.op is Op.NATIVE:
                        self.check_native(ins, program.constants[value])
                elif kind is Operand.NAME:
                    if value >= n_strings:
                        self.fail_at(ins, f"name index {value} out of range ({n_strings} strings)")
                    if ins.op is Op.EXCEPT_JUMP and program.strings[value] not in CATCHABLE:
                        self.fail_at(ins, f"{program.strings[value]!r} is not an error class a "
                                          f"program can catch")
                elif kind is Operand.TYPE:
                    if value >= n_strings:
                        self.fail_at(ins, f"type index {value} out of range ({n_strings} strings)")
                    problem = _annotation_message(program.strings[value])
                    if problem:
                        self.fail_at(ins, problem)
                elif kind is Operand.CODE:
                    if value >= len(program.codes):
                        self.fail_at(ins, f"code index {value} out of range "
                                          f"({len(program.codes)} code objects)")
                    target = program.codes[value]
                    if target.kind != CodeKind.FUNCTION:
                        self.fail_at(ins, f"code {value} ({target.name}) is "
                                          f"{_KIND_NAMES[target.kind]}, not a function")
                elif kind is Operand.AGENT:
                    if value >= len(program.agents):
                        self.fail_at(ins, f"agent index {value} out of range "
                                          f"({len(program.agents)} agents)")
                elif kind is Operand.TOOL:
                    if value >= len(program.tools):
                        self.fail_at(ins, f"tool index {value} out of range "
                                          f"({len(program.tools)} tools)")
                elif kind is Operand.ACTION:
                    if value >= len(program.actions):
                        self.fail_at(ins, f"action index {value} out of range "
                                          f"({len(program.actions)} actions)")
                elif kind is Operand.MODULE:
                    if value >= len(program.modules):
                        self.fail_at(ins, f"module index {value} out of range "
                                          f"({len(program.modules)} modules)")
                elif kind is Operand.TARGET:
                    if value not in self.index_of:
                        self.fail_at(ins, f"jump target {value} is not the start of an instruction")
                elif kind is Operand.COUNT:
                    # Any count is well-formed (the stack check bounds it), except SLICE's,
                    # which says which of its two bounds were written.
                    if ins.op is Op.SLICE and value > SLICE_BOUNDS:
                        self.fail_at(ins, f"SLICE operand {value} is not a set of bounds "
                                          f"(0 to {SLICE_BOUNDS}: 1 lower, 2 upper)")

    def check_native(self, ins: Instruction, name) -> None:
        problem = native_problem(self.program, self.code, name)
        if problem is not None:
            self.fail_at(ins, problem)

    def check_positions(self) -> None:
        prev = None
        for entry in self.code.positions:
            offset = entry[0]
            ins = self.instructions[self.index_of[offset]] if offset in self.index_of else None
            opname = ins.op.name if ins else None
            if prev is not None and offset <= prev:
                self.fail(offset, opname, f"position offsets not strictly increasing "
                                          f"({offset} after {prev})")
            if ins is None:
                self.fail(offset, None, f"position for offset {offset} is not at the start "
                                        f"of an instruction")
            prev = offset

    # -- abstract interpretation over the control-flow graph

    def check_flow(self) -> int:
        """Propagate (stack, scope, test) depths to a fixed point; return the maximum stack depth."""
        instructions, code = self.instructions, self.code
        end = len(code.code)
        self.states = [None] * len(instructions)
        # Lowest offset first, so that the problem reported is the earliest one on the walk.
        # (heapq is imported here: only a program the fast pass refuses comes this way.)
        from heapq import heappop, heappush
        self.push = heappush
        self.work = []
        self.flow(None, 0, (0, 0, (), 0, 0))
        max_depth = 0

        while self.work:
            i = heappop(self.work)
            ins = instructions[i]
            op, args = ins.op, ins.args
            stack, scope, tests, iters, mods = self.states[i]

            pops, pushes = POPS[op](*args), PUSHES[op](*args)
            branch = op.branch
            needed = max(pops, branch[0]) if branch else pops
            if stack < needed:
                self.fail_at(ins, f"stack underflow (needs {needed}, depth {stack})")
            if tests and stack - needed < tests[-1][2]:
                self.fail_at(ins, f"pops below the stack depth {tests[-1][2]} of the handler "
                                  f"that resumes at offset "
                                  f"{self.instructions[tests[-1][1]].offset}")

            # What the slots hold: an iterator is no value (only FOR_ITER uses it, only POP
            # drops it), and IMPORT_FROM reads a module's scope, so its operand must be one.
            top = 1 << (stack - 1) if stack else 0
            if op is Op.FOR_ITER:
                if not iters & top:
                    self.fail_at(ins, "the top of the stack is not an iterator (made by GET_ITER)")
            elif op is Op.IMPORT_FROM:
                if not mods & top:
                    self.fail_at(ins, "the top of the stack is not a module (pushed by IMPORT or IMPORT_PYTHON)")
            elif op is not Op.POP and iters >> (stack - needed):
                slot = (iters >> (stack - needed)).bit_length() - 1 + stack - needed
                self.fail_at(ins, f"uses the iterator in stack slot {slot} as a value")
            kept = (1 << (stack - pops)) - 1
            f_iters, f_mods = iters & kept, mods & kept
            if op is Op.GET_ITER:
                f_iters |= top
            elif op is Op.FOR_ITER:
                f_iters |= top               # the iterator stays below the item
            elif op is Op.IMPORT or op is Op.IMPORT_PYTHON:
                f_mods |= 1 << stack
            elif op is Op.DUP and mods & top:
                f_mods |= top | (top << 1)

            # Scope and test effects apply to the fall-through edge; a branch (TEST_BEGIN's
            # handler included) keeps the entry state.
            f_scope, f_tests = scope, tests
            if op is Op.PUSH_SCOPE:
                f_scope = scope + 1
            elif op is Op.POP_SCOPE:
                f_scope = scope - args[0]
                if f_scope < 0:
                    self.fail_at(ins, f"POP_SCOPE {args[0]} leaves more scopes than are open "
                                      f"(scope depth {scope})")
                if tests and f_scope < _handler_scope(tests[-1]):
                    self.fail_at(ins, f"POP_SCOPE {args[0]} leaves the scope of the handler "
                                      f"that resumes at offset "
                                      f"{self.instructions[tests[-1][1]].offset}")
            elif op is Op.TEST_BEGIN:
                handler = (TEST_HANDLER, self.index_of[args[1]], stack, scope)
                f_scope, f_tests = scope + 1, tests + (handler,)
            elif op is Op.TEST_END or op is Op.TEST_ABANDON:
                if not tests or tests[-1][0] != TEST_HANDLER:
                    self.fail_at(ins, f"{op.name} without a running test")
                if scope == 0:
                    self.fail_at(ins, f"{op.name} with no open scope")
                f_scope, f_tests = scope - 1, tests[:-1]
            elif op is Op.TRY_BEGIN:
                f_tests = tests + ((TRY_HANDLER, self.index_of[args[0]], stack, scope),)
            elif op is Op.TRY_END:
                if not tests or tests[-1][0] != TRY_HANDLER:
                    self.fail_at(ins, "TRY_END without a running try handler")
                f_tests = tests[:-1]

            edges = []
            if branch is not None:
                target = args[op.operands.index(Operand.TARGET)]
                b_kept = (1 << (stack - branch[0])) - 1
                edges.append((self.index_of[target], (stack - branch[0] + branch[1], scope, tests,
                                                      iters & b_kept, mods & b_kept)))
            if op not in TERMINATORS:     # a set lookup: IntFlag's & is slow
                if ins.next_offset >= end:
                    self.fail_at(ins, "control falls off the end of the code")
                edges.append((i + 1, (stack - pops + pushes, f_scope, f_tests, f_iters, f_mods)))

            for j, state in edges:
                if state[0] > code.max_stack:
                    self.fail_at(ins, f"stack depth {state[0]} exceeds max_stack {code.max_stack}")
                max_depth = max(max_depth, state[0])
                self.flow(ins, j, state)
        return max_depth

    def show_handlers(self, handlers) -> str:
        return "[" + ", ".join(f"{'test' if kind == TEST_HANDLER else 'try'} -> "
                               f"{self.instructions[target].offset}"
                               for kind, target, _, _ in handlers) + "]"

    def flow(self, ins, j: int, state: tuple) -> None:
        """Record ``state`` on entry to instruction j, or check it against the one recorded."""
        old = self.states[j]
        if old is None:
            self.states[j] = state
            self.push(self.work, j)
            return
        at = self.instructions[j].offset
        for what, new, was in zip(("stack depth", "scope depth", "running handlers"), state, old):
            if new != was:
                if what == "running handlers":
                    new, was = self.show_handlers(new), self.show_handlers(was)
                self.fail_at(ins, f"inconsistent {what} at offset {at}: "
                                  f"{new} on this path, {was} on another")
        for kinds, new, was in zip(_SLOT_KINDS, state[3:], old[3:]):
            if new != was:
                slot = (new ^ was).bit_length() - 1
                this, other = kinds if new >> slot & 1 else kinds[::-1]
                self.fail_at(ins, f"inconsistent stack at offset {at}: slot {slot} holds {this} "
                                  f"on this path, {other} on another")


# ----------------------------------------------------------------------------- the fast pass
#
# Every program the compiler writes is valid, and loading one (``sensec build`` re-loads its own
# output, ``sensevm run`` verifies before running) verified each instruction through the general
# code above: one Instruction built by a generator, a heap push and pop, two formula calls, a
# tuple per edge and a loop over the state per revisit. The fast pass decides the same question
# with less: its decoder handles one-byte operands inline, the operand bounds are compared
# against a per-program table, and the flow walk follows fall-through chains (pushing only branch
# targets) and compares whole states as tuples.
#
# It is an accept/refuse decision only. Because states are never merged (every path into an
# instruction must bring the same one), the order of the walk cannot change whether a code
# object is accepted, what state each instruction gets or the deepest stack; it changes only
# which problem would be met first. So the fast pass gives up on the first problem, and the
# general verifier, run on that code object from the start, reports the one it meets first.

# The instructions whose flow needs more than the stack columns (scope, test, iterator and
# module slots), by opcode value; any other, on a stack with no iterator or module, is plain.
_SPECIAL = [0] * 256
for _op, _kind in ((Op.FOR_ITER, 1), (Op.IMPORT_FROM, 2), (Op.GET_ITER, 3), (Op.IMPORT, 4),
                   (Op.IMPORT_PYTHON, 4), (Op.DUP, 5), (Op.PUSH_SCOPE, 6), (Op.POP_SCOPE, 7),
                   (Op.TEST_BEGIN, 8), (Op.TEST_END, 9), (Op.TEST_ABANDON, 9), (Op.POP, 10),
                   (Op.TRY_BEGIN, 11), (Op.TRY_END, 12)):
    _SPECIAL[_op] = _kind
del _op, _kind


_make_instruction = tuple.__new__     # Instruction(...) without its Python-level __new__


class _Refused(Exception):
    """The fast pass met a problem; the general verifier will name it."""


class _FastVerifier:
    """The accept-only pass over each code object of one program (see above)."""

    def __init__(self, program: Program):
        self.program = program
        unbounded = 1 << 40           # COUNT and TARGET operands are not table indices
        self.limits = {Operand.CONST: len(program.constants), Operand.NAME: len(program.strings),
                       Operand.TYPE: len(program.strings), Operand.CODE: len(program.codes),
                       Operand.MODULE: len(program.modules), Operand.ACTION: len(program.actions),
                       Operand.TOOL: len(program.tools), Operand.AGENT: len(program.agents),
                       Operand.COUNT: unbounded, Operand.TARGET: unbounded}
        self.annotations: dict[int, bool] = {}
        self.code = None
        # opcode byte -> (op, shape (opcodes.SHAPES), bound of a lone varint operand, operand
        # kinds, whether extra checks apply: a test name, an annotation, a function's code)
        self.rows = [None] * 256
        for op in Op:
            kinds, shape = op.operands, SHAPES[op._value_]
            extra = op is Op.TEST_BEGIN or op is Op.SLICE or op is Op.EXCEPT_JUMP or \
                op is Op.NATIVE or any(
                k is Operand.TYPE or k is Operand.CODE for k in kinds)
            self.rows[op._value_] = (op, shape, self.limits[kinds[0]] if shape == 1 else 0,
                                     kinds, extra)

    def run(self, code: CodeObject):
        """The VerifiedCode, or None when the code object has a problem (or a header problem's
        VerifyError, raised by the same check the general verifier starts with)."""
        _CodeVerifier(self.program, code).check_header()
        self.code = code            # (for the check of a NATIVE, which depends on its body)
        try:
            instructions, index_of = self.decode(code.code)
            self.check_positions(code.positions, index_of)
            max_depth = self.check_flow(code, instructions, index_of)
        except _Refused:
            return None
        return VerifiedCode(code, instructions, index_of, max_depth)

    def decode(self, data: bytes):
        rows, extra_check = self.rows, self.extra_check
        end = len(data)
        out, index_of = [], {}
        append = out.append
        pos = 0
        while pos < end:
            start = pos
            row = rows[data[pos]]
            if row is None:
                raise _Refused
            op, shape, limit, kinds, extra = row
            pos += 1
            if shape == 0:
                args = ()
            elif shape == 1 and pos < end and data[pos] < 0x80:    # a one-byte operand
                value = data[pos]
                pos += 1
                if value >= limit:
                    raise _Refused
                args = (value,)
            else:                   # the shared decoder, for any other shape or width
                try:
                    ins = decode_at(data, start)
                except DecodeError:
                    raise _Refused from None
                args, pos = ins.args, start + ins.size
                limits = self.limits
                for kind, value in zip(kinds, args):
                    if value >= limits[kind]:
                        raise _Refused
            if extra:
                extra_check(op, kinds, args)
            index_of[start] = len(out)
            append(_make_instruction(Instruction, (start, op, args, pos - start)))
        for ins in out:                 # every target, reached or not, as check_operands does
            target = EFFECTS[ins[1]][5]
            if target >= 0 and ins[2][target] not in index_of:
                raise _Refused
        return tuple(out), index_of

    def extra_check(self, op: Op, kinds, args) -> None:
        program = self.program
        if op is Op.SLICE and args[0] > SLICE_BOUNDS:
            raise _Refused
        if op is Op.NATIVE and native_problem(program, self.code,
                                              program.constants[args[0]]) is not None:
            raise _Refused
        for kind, value in zip(kinds, args):
            if kind is Operand.CONST:
                if op is Op.TEST_BEGIN and not isinstance(program.constants[value], str):
                    raise _Refused
            elif kind is Operand.NAME:
                if op is Op.EXCEPT_JUMP and program.strings[value] not in CATCHABLE:
                    raise _Refused
            elif kind is Operand.TYPE:
                ok = self.annotations.get(value)
                if ok is None:
                    ok = self.annotations[value] = annotation_ok(program.strings[value])
                if not ok:
                    raise _Refused
            elif kind is Operand.CODE:
                if program.codes[value].kind != CodeKind.FUNCTION:
                    raise _Refused

    @staticmethod
    def check_positions(positions, index_of) -> None:
        prev = -1
        for entry in positions:
            offset = entry[0]
            if offset <= prev or offset not in index_of:
                raise _Refused
            prev = offset

    @staticmethod
    def check_flow(code: CodeObject, instructions, index_of, states=None) -> int:
        """The general walk's depths and slot masks, following fall-through chains (recorded in
        ``states``, a list of one None per instruction, when one is given)."""
        limit = code.max_stack
        n = len(instructions)
        if states is None:
            states = [None] * n
        states[0] = (0, 0, (), 0, 0)
        work = [0]
        best = 0
        while work:
            i = work.pop()
            state = states[i]
            while True:
                op, args = instructions[i][1:3]
                pops, pushes, b_pops, b_pushes, terminates, target = EFFECTS[op]
                special = _SPECIAL[op]
                if pops is None:
                    pops, pushes = POPS[op](*args), PUSHES[op](*args)
                stack, scope, tests, iters, mods = state
                needed = pops if b_pops is None or b_pops < pops else b_pops
                if stack < needed:
                    raise _Refused
                if tests and stack - needed < tests[-1][2]:
                    raise _Refused              # below a running handler's depth
                if not (special or iters or mods):
                    f_state = (stack - pops + pushes, scope, tests, 0, 0)
                    b_state = None if b_pops is None else (stack - b_pops + b_pushes, scope,
                                                           tests, 0, 0)
                else:
                    f_state, b_state = _general_step(op, args, special, pops, pushes, b_pops,
                                                     b_pushes, stack, scope, tests, iters, mods,
                                                     index_of)
                if b_state is not None:
                    depth = b_state[0]
                    if depth > limit:
                        raise _Refused
                    if depth > best:
                        best = depth
                    j = index_of[args[target]]
                    old = states[j]
                    if old is None:
                        states[j] = b_state
                        work.append(j)
                    elif old != b_state:
                        raise _Refused
                if terminates:
                    break
                depth = f_state[0]
                if depth > limit:
                    raise _Refused
                if depth > best:
                    best = depth
                i += 1
                if i == n:
                    raise _Refused              # control falls off the end
                old = states[i]
                if old is None:
                    states[i] = state = f_state
                    continue
                if old != f_state:
                    raise _Refused
                break
        return best


def entry_states(verified: VerifiedCode) -> list:
    """What the verifier proved on entry to each instruction of a verified code object, by
    instruction index: (stack depth, scope depth, running handlers, iterator slots, module
    slots), the handlers a tuple of (kind: TEST_HANDLER or TRY_HANDLER, target instruction
    index, stack depth, scope depth), innermost last, the slots as bit masks (bit k: stack slot
    k), or None where no path reaches it. A saved
    agent's frames are checked against these before they run again (persist.py)."""
    states = [None] * len(verified.instructions)
    _FastVerifier.check_flow(verified.code, verified.instructions, verified.index_of, states)
    return states


def _handler_scope(handler) -> int:
    """The lowest scope depth code may leave open while ``handler`` runs: the one it restores
    (a test block's own scope, which TEST_BEGIN opened above it, included)."""
    return handler[3] + (handler[0] == TEST_HANDLER)


def handler_ranges(verified: VerifiedCode) -> list:
    """The handler table of a verified code object, for listings: each try or test handler
    as (kind "try" or "test", first offset, end offset, target offset, stack depth), a range
    being a run of consecutive instructions where that handler is innermost, in offset order."""
    states = entry_states(verified)
    instructions = verified.instructions
    out, open_row = [], None
    for i, state in enumerate(states):
        top = state[2][-1] if state is not None and state[2] else None
        if open_row is not None and (top is None or top != open_row[0]):
            out.append(open_row[1] + (instructions[i].offset,) + open_row[2])
            open_row = None
        if top is not None and open_row is None:
            kind, target, depth, _scope = top
            open_row = (top, ("try" if kind == TRY_HANDLER else "test",
                              instructions[i].offset),
                        (instructions[target].offset, depth))
    if open_row is not None:
        end = instructions[-1].offset + instructions[-1].size
        out.append(open_row[1] + (end,) + open_row[2])
    return out


def _general_step(op, args, special, pops, pushes, b_pops, b_pushes,
                  stack, scope, tests, iters, mods, index_of):
    """The fall-through and branch states of an instruction the general walk treats specially
    (or any instruction with an iterator or module on the stack); _CodeVerifier.check_flow's
    rules, in the same order."""
    needed = pops if b_pops is None or b_pops < pops else b_pops
    top = 1 << (stack - 1) if stack else 0
    if special == 1:                                    # FOR_ITER
        if not iters & top:
            raise _Refused
    elif special == 2:                                  # IMPORT_FROM
        if not mods & top:
            raise _Refused
    elif special != 10 and iters >> (stack - needed):   # any value use but POP's
        raise _Refused
    kept = (1 << (stack - pops)) - 1
    f_iters, f_mods = iters & kept, mods & kept
    if special == 3 or special == 1:                    # GET_ITER; FOR_ITER keeps it below
        f_iters |= top
    elif special == 4:                                  # IMPORT, IMPORT_PYTHON
        f_mods |= 1 << stack
    elif special == 5 and mods & top:                   # DUP of a module
        f_mods |= top | (top << 1)
    f_scope, f_tests = scope, tests
    if special == 6:
        f_scope = scope + 1
    elif special == 7:
        f_scope = scope - args[0]
        if f_scope < 0 or tests and f_scope < _handler_scope(tests[-1]):
            raise _Refused
    elif special == 8:
        f_scope = scope + 1
        f_tests = tests + ((TEST_HANDLER, index_of[args[1]], stack, scope),)
    elif special == 9:
        if not tests or tests[-1][0] != TEST_HANDLER or scope == 0:
            raise _Refused
        f_scope, f_tests = scope - 1, tests[:-1]
    elif special == 11:
        f_tests = tests + ((TRY_HANDLER, index_of[args[0]], stack, scope),)
    elif special == 12:
        if not tests or tests[-1][0] != TRY_HANDLER:
            raise _Refused
        f_tests = tests[:-1]
    b_state = None
    if b_pops is not None:
        b_kept = (1 << (stack - b_pops)) - 1
        b_state = (stack - b_pops + b_pushes, scope, tests, iters & b_kept, mods & b_kept)
    return (stack - pops + pushes, f_scope, f_tests, f_iters, f_mods), b_state


# What a slot holds when its bit is set in each mask of the state, and when it is not.
_SLOT_KINDS = (("an iterator", "a value"), ("a module from IMPORT", "any value"))
