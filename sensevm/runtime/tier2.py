"""Tier 2: compiles a verified, hot code object into a Python generator that runs its frames.

The generated generator replaces the dispatch loop for one frame: the operand stack lives in
Python locals (``s0``, ``s1``, ... by depth, which the verifier fixed per instruction), the
common instructions are inlined as Python statements, and every other instruction calls the
tier-1 handler itself, so actions, tools, policy, imports and agents run the very same checks
in both tiers.

The frame stays a real tier-1 frame at every point where anything else can see it: before a
call, or any instruction handed to its tier-1 handler, the generator writes its stack, scope
and instruction pointer back into the frame ("spills"). When the handler pushed a frame (a Sense
call, a commit, start/resume, import ...) the frame is run: by the generator itself, which
drives the callee's generator directly up to ``frames.INLINE_LIMIT`` deep, or else by yielding to
the VM loop, which resumes the generator when the frame is current again. Either way the
generator then reloads its stack from the frame. So every Sense call still has its frame,
``max_depth`` and the frame chain (lineage, stack-inspecting policy, pause) are exactly tier 1's,
the host stack stays small, and a suspended frame can be saved by persist.py and continued by
tier 1 in another process: spilled state is tier-1 state. (A function that calls only functions
runs without a frame, as a plain Python call, until it meets anything else: see ``Compiled``.)

Errors: each generated line belongs to one instruction; an exception leaving the generator
sets ``frame.ip`` from the line it was raised on, so positions match tier 1 exactly.

Names keep tier 1's run-time semantics (spec 5). The analysis rests on one fact about the VM: a
scope gains a binding only from the frame that owns it (parameters, STORE_LOCAL, a STORE_NAME
that found no binding); nested closures and callees can update existing bindings, never create
them, and no binding is ever removed. So per code object we know statically which names a block
scope or the function's own scope can ever hold, and look only there. When, in addition, the
code declares nothing that could capture its scopes (no def, action, tool or agent inside) and
writes no policy rule, nobody else can read or write them: the function scope's names are then
mirrored in Python locals (stores write through to the scope), and block scopes are not made at
all, their names living in Python locals that a spill turns back into tier-1 scopes.

Int versions: a block entered from the dispatch loop (the function's entry, a loop header, a
join) may be emitted twice, guarded by ``x.__class__ is int`` for the locals it reads before it
writes them (``_Gen.region``; the generated code reads every value's type as its ``__class__``,
which is ``type(x)`` for every value and an attribute read, not a call). Under the guard, the
arithmetic and comparisons on those locals, on Int constants and on what they give are plain
Python operators with no test of their own, a branch on such a comparison has no test for a
label, and a load of such a local no test for being unbound; anything else is emitted as in the
general version, which runs whenever the guard fails (a Float, a Bool, a labelled Int, an
unbound name found further out). The guard only reads, so falling back is exactly tier 1's
behaviour. A loop header's Int version is a ``while True`` of its own: a turn after which every
guarded local is still known to hold an Int (or was not written) starts the next without the
guard, any other goes back to it. A block gets its Int version only when it spares tests in
proportion to the code made twice (SPEC_LINES), and the generator of a loopless function with a
direct form gets none (it runs only on the first call and after a deoptimization). A direct
form's call of itself by its own name tests only that the callee is the closure it runs as
(``cl``) and calls ``direct``, or, from an Int version with Int arguments, ``direct_i``, its
Int entry, which skips the parameters' guard and, when all its returns are of known Ints, is
taken to return an Int (``_Gen.generate_direct``). In an Int version an operation on Int locals
and constants is one line with the loads of its operands and with the branch or store that
takes its result (``_Gen.int_op``): a line holds at most one operation that can fail, and has
its position. The version of a loop header or join also takes the locals bound on every path
to it (``defined``) to be bound in the function's scope, tested ``is not U`` on entry: their
loads and stores in it have no test (``_Gen.assume_bound``). A branch whose way on is a short
return puts the return under its ``if`` (``if n < 2: return n``): Python 3.11 specialises a
comparison only when its jump is short.

Direct forms' calls: a call made of Int locals and constants is read in the call itself (no
slot stored and read again), on a line of its own with its position (``_Gen.forwarded_args``,
``emit_parts``); a return takes the line before it (``return s0 + s1``); a deoptimization and
an error leaving are calls of helpers (deopt_at, deopt_in_call, direct_failure), and the
closure's scope is read as ``cl.scope`` where needed: every local of a direct form is paid for
at each of its calls. The Int entry of a recursive function is given its scope's bindings by
its callers (``pv``).

Item loops: a ``for`` loop's header gets an Int version (even with no Int to guard) whose turn
is a Python ``for`` over the iterator's items (``_Gen.item_loop``): Python's list or String
iterator, set to the ArrayIterator's index on entry, reads the next item of the live Array and
says when there is none, so a turn keeps no index of its own. The index is written back to the
ArrayIterator wherever the frame can be seen (each spill and deoptimization in the loop: one
less at the header, where FOR_ITER takes the item again) and wherever the ``for`` is left
before its end (``_Gen.sync_items``, ``loop_tail``); an iterator with origins runs the general
version.

Quiet loops: a loop's Int version whose loop (header to jump back) is made only of
instructions done in place (QUIET_OPS: no call) is made *quiet* while the process is not live:
its guard tests, once on entry, that no labelled value exists (provenance.LABELLED is empty;
SHAPES fills only after it) and that no other thread runs Sense code (no worker live), and then
nothing in the loop tests an item, a comparison or a branch for a label, or an Array for a
shape of the data's: nothing it does can make either, so each such test would say no. Nor does
a turn mark the cached names it stores out of date in the scope, or keep block scopes up to
date: the version does both once on entry (``_Gen.quiet_entry``). The loop's exit, made in the
same version, is made as any other code (it may call). The general version first asks the
same: a process gone live (or a worker running) makes the code again with no quiet version
(``loud``), and the frame goes on in tier 1 from the loop's header, entering the new code at
its next turn.

Inlined calls: a call whose callee the code can guess as it is made (what the name loaded as
the callee is bound to then, in the compiling frame's scopes, or in the closure's for a direct
form: a hint, never trusted) is done in place when the callee's body is small and straight
(sensevm/runtime/inlining.py): guarded by the callee being a Closure of that code, its depth
within the bound, and its arguments and the captured variables it reads being Ints (or
closures of the codes it calls in turn), the caller computes what the callee's direct form
would have returned, with no Python call (``_Gen.inlined_call``). Any guard failing makes the
call as before; a direct form has no frame, so nothing can tell the two apart. Under a step
budget nothing is inlined (each call is a step). In an Int version, a call whose inlined form
computes an Int is taken to return one (its slot, and the slots below it, which a generator's
call spills and reads back unchanged, keep what is known of them): where the call made instead
returns anything else, the frame goes on in tier 1 just after it, and the code is made again
at its next entry without taking it so (``untyped``).

Made again when hot: Int versions are budgeted (SPEC_LINES) because Python's compiler costs
some 67k instructions a generated line, which a short run never earns back. A loop whose
version only the budget declined counts the turns of its general version; after HOT_TURNS of
them in one activation its frame, spilled at the loop's header, goes on in the code made again
with the larger budget (``_Gen.hot_counter``, ``VM.retier``), once per code object.

Control: the generator is one ``while True`` that finds the block to run by testing ``L``; a
loop header runs in a ``while True`` of its own inside it, so a loop's next turn is a
``continue`` that skips those tests (``_Gen.turn``). A join (the code after an ``if``) is
emitted on every path into it, as long as no instruction is emitted more than MAX_COPIES
times (``_Gen.copied_joins``): a loop's turn is then one block with one Int guard.

Stores: a function's generator keeps a cached name's new value in its Python local only,
noting that the scope is out of date (``dw``); wherever the scope can be seen (any hand-out of
the frame: a spill, a call, a member read, a return through tier 1's RETURN, an error leaving)
the changed values are written to it first (``_Gen.publish``). Not where something can hold on
to the scope (a closure declared here, a policy rule, an internal builtin's ``@`` name).

A fused member call ``x.name(args)`` tests once for the receiver type its name most likely
means and calls that method straight away (``_Gen.guessed_method``), or, for the common case
of a String's, Array's or Map's method, does it in place (methods.INLINE_METHODS); a block
local its block has bound unconditionally is read without a test for being unbound.

Declined (they stay in tier 1): code containing test blocks (their recovery restores a stack
that lives in the frame), very large code objects, and code that keeps a deep operand stack
across its calls (see MAX_SPILLED).
"""

from __future__ import annotations

import math
import re
TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run that reaches tier 2
    from typing import Optional

from sensevm.base.errors import SenseError, SenseRecursionError, SenseRuntimeError
from sensevm.bytecode.opcodes import JUMPS, POPS, PUSHES, TERMINATORS, Op
from sensevm.bytecode.program import CodeKind
from sensevm.guard import provenance as PV
from sensevm.runtime import inlining, values as V
from sensevm.runtime.builtins import CORE
from sensevm.runtime.frames import (DIRECT_ARITIES, NO_DIRECT, Deoptimize, Frame, code_label,
                                    direct_bound)
from sensevm.runtime.values import (ActionDefinition, ArrayIterator, Builtin, Closure,
                                    PreparedAction, Scope, ToolDefinition, index_get, index_set,
                                    load_name, store_name, store_outer)

CORE_NAMES = frozenset(b.name for b in CORE)
_GRAND = "ppv = P.parent.vars if P is not None and P.parent is not None else EMPTY"
# The scope three out, where a store looking for an outer binding goes on (see outer_store).
_GREAT = "P3 = P.parent.parent if P is not None and P.parent is not None else None"
# The same in a direct form of a function or a tool, which names its closure's scope
# ``cl.scope`` (never None) rather than keep it in a local (see _Gen.P).
_DIRECT_GRAND = "ppv = cl.scope.parent.vars if cl.scope.parent is not None else EMPTY"
_DIRECT_GREAT = "P3 = cl.scope.parent.parent if cl.scope.parent is not None else None"
_CORE_BY_NAME = {b.name: b for b in CORE}
MAX_INSTRUCTIONS = 4000     # larger code objects stay in tier 1 (compile time, Python limits)
MAX_INDENT = 40             # deeper inlining turns the block into a dispatch target instead
# A join is emitted in place on every path into it (see _Gen.copied_joins) while no
# instruction would be emitted more than MAX_COPIES times; in code objects over COPY_SIZE
# instructions, twice.
MAX_COPIES = 8
COPY_SIZE = 500
# Every instruction done by its tier-1 handler (a call among them) writes the whole operand
# stack back and reads it again, so code that keeps a deep stack (calls nested hundreds deep,
# f(f(f(...)))) would generate code quadratic in its size: 700 nested calls took 1 GB. The
# corpus's largest total is under 200 stack slots; code over this stays in tier 1.
MAX_SPILLED = 2000
# A block is given an Int version (see _Gen.region) when it spares at least two tests, and no
# more than this many lines per test spared are generated twice.
SPEC_LINES = 40
# A loop whose Int version that budget declined counts its turns in its general version; after
# HOT_TURNS turns of one activation the code is made again (VM.retier) with HOT_SPEC_LINES
# lines per test spared, and the frame goes on in the new code from the loop's header: a loop
# that has run that long is likely to run longer, and the compiling, paid once per code object,
# is then a small part of its time (strings' run: some 25 ms, after 10,000 turns of about 7 µs).
HOT_TURNS = 10_000
HOT_SPEC_LINES = 400
# A loop over items walked by a Python ``for`` (_Gen.loop_head) spares per turn about what
# three tests of an Int do (an index read and written back, a bounds test): it counts as that
# many in its Int version's worth, and makes one where no local is worth a guard.
ITEM_LOOP_SAVES = 3
# An item loop's item, taken to be an Int where that spares tests (see _Gen.item_checks), as
# the Int versions name it among the locals worth a guard.
ITEM = "<item>"
# A generator whose deferred stores (_Gen.publish) are to more names than this writes them back
# by a call, not in line: the write-back points are many, and a long one at each made the
# generated code up to a third larger (compiling it cost more than the call saves).
INLINE_PUBLISH = 3
# Test and try handlers (TEST_*, TRY_*, EXCEPT_JUMP) resume a frame at a target the generator
# has no entry for; such code objects stay in tier 1 (the code they call does not).
# NATIVE too: its check reads the frame (the body it stands in), so such code has a frame
# always, the dispatch loop's (sensevm/bytecode/natives.py).
DECLINED_OPS = frozenset({Op.TEST_BEGIN, Op.TEST_END, Op.TEST_ABANDON, Op.TRY_BEGIN,
                          Op.TRY_END, Op.EXCEPT_JUMP, Op.RAISE, Op.NATIVE})
# Ops that let other code hold on to this frame's scopes (a closure, an action, a tool or an
# agent declared here) or that write into the current scope's policy table.
CAPTURING_OPS = frozenset({Op.MAKE_FUNCTION, Op.MAKE_ACTION, Op.MAKE_TOOL, Op.MAKE_AGENT})
POLICY_OPS = frozenset({Op.POLICY_ALLOW, Op.POLICY_DENY})
# The instructions the generator does itself, without the frame: a function made of only
# these (and calls) has a direct form (see Compiled).
IN_PLACE_OPS = frozenset({
    Op.NOP, Op.LOAD_CONST, Op.LOAD_NIL, Op.LOAD_TRUE, Op.LOAD_FALSE, Op.POP, Op.DUP,
    Op.LOAD_NAME, Op.STORE_NAME, Op.STORE_LOCAL, Op.CHECK_DECL, Op.PUSH_SCOPE, Op.POP_SCOPE,
    Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MOD, Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE, Op.NEG,
    Op.NOT, Op.JUMP, Op.POP_JUMP_IF_FALSE, Op.POP_JUMP_IF_TRUE, Op.JUMP_IF_FALSE_OR_POP,
    Op.JUMP_IF_TRUE_OR_POP, Op.BUILD_ARRAY, Op.BUILD_MAP, Op.INDEX, Op.STORE_INDEX, Op.GET_ITER,
    Op.FOR_ITER, Op.RETURN, Op.SLICE, Op.CONTAINS, Op.FORMAT_VALUE, Op.BUILD_STRING, Op.DUP2})
# What a quiet loop version may do (see _Gen.region): the instructions done in place call no
# Sense code, and while the process is not live (provenance.LABELLED empty) and no other thread
# runs Sense code, they read no labelled value, no Array or Map whose shape is the data's
# (provenance.SHAPES fills only once live) and no value that labels what it gives (a Python
# object under the second look makes the process live: provenance.go_live), so they make none:
# the process stays as it was until the version is left.
QUIET_OPS = IN_PLACE_OPS


class Compiled:
    """A tier-2 code object: ``fn(vm, frame, entry)`` makes the generator; ``entries`` are the
    instruction indices it can start at (function entry and loop headers).

    ``direct`` is the function's *direct form*, when it has one: ``direct(vm, closure, depth,
    bound, *args)`` (``bound``: frames.DIRECT_BOUND) runs the whole body as a plain Python
    call with no frame and returns the result, after the checks of a call (made first, so their errors are the caller's; a tool
    body's and a commit body's are made by call_tool and commit, which call theirs the same
    way, a commit body with its scope instead of arguments). vm.call_t2 and the generated code
    find it by argument count (PreparedCode.dx). A function has one when every instruction is
    done in place or is a CALL (a CALL only when no step budget counts). At a CALL, a pure builtin (values.Builtin)
    is called in place and a function with a direct form is called directly; nothing else can
    be called without this body's frame on the chain (policy, lineage and pausing read it), so
    anything else *deoptimizes*: the activation becomes a real frame stopped at that CALL,
    every direct activation below it on the Python stack becomes a frame stopped just after
    its own call, linked as callers, and the loop carries on from the innermost in tier 1.
    Nothing has happened of the call that deoptimized (the guards only read), so tier 1 makes
    it exactly once; until then, nothing can observe the missing frames: direct forms call only
    code that cannot look at the chain. A branch on a labelled value deoptimizes the same way
    (pc labels live in tier 1).
    """

    __slots__ = ("fn", "entries", "source", "direct", "direct_source")

    def __init__(self, fn, entries, source, direct=None):
        self.fn = fn
        self.entries = entries
        self.source = source
        self.direct = direct
        self.direct_source = None   # the direct form's Python, once it is made

    def set_direct(self, prepared, direct) -> None:
        """Make ``direct`` (or None) the direct form that calls of ``prepared`` find."""
        self.direct = prepared.direct = direct
        n = len(prepared.code.params)
        if n < DIRECT_ARITIES:
            prepared.dx = tuple(direct if k == n else None for k in range(DIRECT_ARITIES))


# ----------------------------------------------------------------------------- run-time helpers

UNSET = object()     # a variable mirrored in a Python local that is not bound (yet)


def chain(scope, *levels):
    """The block scopes tier 1 would have pushed by now, over the function scope ``scope``:
    one per level, outermost first, each given as (names, values); UNSET values are unbound."""
    for names, values in levels:
        scope = Scope(scope)
        bindings = scope.vars
        for name, value in zip(names, values):
            if value is not UNSET:
                bindings[name] = value
    return scope


def store_found(outer, name, value) -> bool:
    """Update the nearest binding of ``name`` from ``outer`` outward; False if there is none."""
    s = outer
    while s is not None:
        bindings = s.vars
        if name in bindings:
            bindings[name] = value
            return True
        s = s.parent
    return False


def function_scope(parent, names, values):
    """The function scope of a direct form with a lazy scope, as its locals say it is now."""
    scope = Scope(parent)
    bindings = scope.vars
    for name, value in zip(names, values):
        if value is not UNSET:
            bindings[name] = value
    return scope


def materialize(prepared, scope, owner, stack, ip):
    """The frame a direct activation becomes (its caller is linked by whoever called it):
    a function's, or a tool's, commit body's or rollback block's (role, owner and lineage
    frame, as call_tool, commit and rollback make them; rollback gives its frame the audit
    line)."""
    kind = prepared.code.kind
    if kind is CodeKind.TOOL_BODY:
        frame = Frame(prepared, scope, None, None, None, owner, "tool", owner.tags)
    elif kind is CodeKind.ACTION_BODY:
        frame = Frame(prepared, scope, None, None, None, owner, "commit", owner.definition.tags)
    elif kind is CodeKind.ROLLBACK:
        frame = Frame(prepared, scope, None, None, None, owner, "rollback",
                      owner.definition.rollback_tags)
    else:
        frame = Frame(prepared, scope, None, owner)
    frame.stack = stack
    frame.ip = ip
    return frame


def deopt_at(vm, prepared, scope, owner, stack, ip, depth) -> Deoptimize:
    """A direct activation at ``depth`` becoming the frame stopped at ``ip`` (the innermost of
    the frames a deoptimization makes; the loop runs it next): the Deoptimize to raise. (The
    generated code calls this and deopt_in_call rather than writing them out: every local a
    direct form has is paid for at each of its calls.)"""
    vm.frame = frame = materialize(prepared, scope, owner, stack, ip)
    vm.deopts += 1
    return Deoptimize(frame, depth)


def deopt_in_call(d, vm, prepared, scope, owner, stack, at, below, depth) -> Deoptimize:
    """A direct activation whose call at instruction ``at`` raised Deoptimize ``d``. Refused
    before it was entered (no frame made yet), the callee is called again by tier 1: this
    activation becomes the frame stopped at that call, its stack ``stack``. Otherwise the
    callee's activations are frames already: this one becomes the frame stopped just after the
    call (``below`` under the result to come), their caller."""
    if d.top is None:
        return deopt_at(vm, prepared, scope, owner, stack, at, depth)
    frame = materialize(prepared, scope, owner, below, at + 1)
    d.top.caller = frame
    d.top = frame
    return d


def untyped(prepared) -> None:
    """An inlined call ``prepared``'s code took to return an Int returned something else
    (see _Gen.typed_result): its tier-2 form is made again, at its next entry, without taking
    any so; the generators and direct activations running now go on as they are."""
    prepared.typed = False
    _made_again(prepared)


def loud(prepared) -> None:
    """A quiet loop version of ``prepared``'s code (see _Gen.region) found the process live,
    or another thread running Sense code: its tier-2 form is made again, at its next entry,
    with no quiet version; the activation that found it goes on in tier 1 from that loop's
    header, and enters the new form at the loop's next turn."""
    prepared.quiet = False
    _made_again(prepared)


def _made_again(prepared) -> None:
    prepared.t2 = None
    prepared.direct = None
    prepared.dx = NO_DIRECT


def inline_error(exc, levels):
    """What an inlined call (see inlining.py) raises for ``exc``, raised by an operation of the
    body inlined innermost: what each direct form's direct_failure would have made of it, from
    that operation (``levels``: (prepared code, instruction index) of each body, innermost
    first) out to the call site."""
    for prepared, j in levels:
        exc = direct_error(exc, prepared.positions[j], prepared.path, code_label(prepared.code))
    return exc


def direct_failure(exc, linemap, positions, path, label):
    """What a direct form raises for ``exc``, which left it from the line its traceback
    starts at: direct_error at that line's instruction."""
    tb = exc.__traceback__
    ip = linemap.get(tb.tb_lineno, 1) if tb is not None else 1
    return direct_error(exc, positions[ip - 1], path, label)


def direct_error(exc, pos, path, label):
    """The error a direct form's exception becomes, placed at ``pos`` as the loop would have,
    with the frame the direct form stood for on its call stack (as vm._unwind records one)."""
    if isinstance(exc, SenseError):
        err = exc.with_pos(pos, path)
    elif isinstance(exc, RecursionError):
        err = SenseRecursionError().with_pos(pos, path)
    elif isinstance(exc, MemoryError):
        err = SenseRuntimeError("out of memory", located=False).with_pos(pos, path)
    else:
        return exc
    err.left(path, pos.line, label)
    return err


def add_slow(a, b):
    """``+`` past the generated fast paths: a labelled Int plus an Int (a total of tool
    results) goes straight to provenance's case for it, anything else to values.add."""
    ta = type(a)
    if ta in _INT_TYPES:
        tb = type(b)
        if tb is int or tb is ta:       # provenance.add's first case, without the call
            return _new_int(ta, _int_add(a, b))
        return PV.add(a, b, V.add)
    if type(b) in _INT_TYPES:
        return PV.add(a, b, V.add)
    return V.add(a, b)


_INT_TYPES = PV.INT_TYPES       # (the set every labelled Int class joins)
_new_int = int.__new__
_int_add = int.__add__


_RUNTIME = {
    "load_name": load_name, "store_name": store_name, "store_outer": store_outer,
    "chain": chain, "store_found": store_found,
    "index_get": index_get, "index_set": index_set, "get_iter": V.get_iter,
    "slice_get": V.slice_get, "contains": V.contains, "str_form": V.str_form,
    "join_strings": V.join_strings,
    "array_limit": V.array_limit, "build_map": V.build_map,
    "decl_error": V.decl_error, "return_error": V.return_error, "direct_error": direct_error,
    "direct_failure": direct_failure, "inline_error": inline_error, "untyped": untyped,
    "loud": loud,
    "deopt_at": deopt_at, "deopt_in_call": deopt_in_call,
    "arity_error": V.arity_error, "param_error": V.param_error,
    "SenseRecursionError": SenseRecursionError,
    "add": add_slow, "arith": V.arith, "compare": V.compare, "equal": V.equal,
    "not_equal": V.not_equal,
    "negate": V.negate, "LT": PV.LABELLED, "negation": PV.negation,
    "CT": PV.CONTAINERS, "decides": PV.decides_branch, "SHAPES": PV.SHAPES,
    "container_negation": PV.container_negation, "PV": PV,
    "materialize": materialize, "function_scope": function_scope, "Deoptimize": Deoptimize, "Scope": Scope, "Closure": Closure, "Builtin": Builtin,
    "ArrayIterator": ArrayIterator, "SenseRuntimeError": SenseRuntimeError, "V": V,
    "ToolDefinition": ToolDefinition, "ActionDefinition": ActionDefinition,
    "PreparedAction": PreparedAction,
    "DB": direct_bound,
    "B_LEN": _CORE_BY_NAME["len"], "B_PUSH": _CORE_BY_NAME["push"], "B_STR": _CORE_BY_NAME["str"],
}


# ----------------------------------------------------------------------------- analysis

class ItemLoop:
    """A ``for`` loop's header walked by a Python ``for`` (see _Gen.item_loop): its FOR_ITER,
    the last instruction of its body (the jump back), the iterator's stack slot, the exit."""

    __slots__ = ("header", "last", "slot", "exit")

    def __init__(self, header: int, last: int, slot: int, exit: int):
        self.header, self.last, self.slot, self.exit = header, last, slot, exit


class _Declined(Exception):
    pass


def _keeps_scope(op, a) -> bool:
    """Can instruction (op, a) let something hold on to the scope it runs in: a closure,
    action, tool or agent declared there, a policy rule written into it, or an internal
    builtin (an ``@`` name, such as a session's, which keeps the scope it opens in)?"""
    return (op in CAPTURING_OPS or op in POLICY_OPS
            or op == Op.LOAD_NAME and type(a) is str and a.startswith("@"))


def _flow(instrs):
    """Stack and scope depth on entry to every reachable instruction, and each one's successors."""
    n = len(instrs)
    state = [None] * n
    succ = [()] * n
    state[0] = (0, 0)
    work = [0]
    while work:
        i = work.pop()
        op, a, b = instrs[i]
        op = Op(op)
        depth, scope = state[i]
        out = []
        pops, pushes = POPS[op](a, b), PUSHES[op](a, b)
        f_scope = scope
        if op is Op.PUSH_SCOPE:
            f_scope = scope + 1
        elif op is Op.POP_SCOPE:
            f_scope = scope - a
        if op in JUMPS:
            target = a if op is not Op.TEST_BEGIN else b
            out.append((target, (depth - op.branch[0] + op.branch[1], scope)))
        if op not in TERMINATORS:
            out.append((i + 1, (depth - pops + pushes, f_scope)))
        succ[i] = tuple(j for j, _ in out)
        for j, st in out:
            if state[j] is None:
                state[j] = st
                work.append(j)
    return state, succ


def _regions(instrs, state, succ):
    """Per instruction, the PUSH_SCOPE sites of its open block scopes, outermost first; None
    when two paths meet with different ones (then block scopes stay real)."""
    n = len(instrs)
    regions = [None] * n
    regions[0] = ()
    work = [0]
    while work:
        i = work.pop()
        cur = regions[i]
        op, a, b = instrs[i]
        after = cur
        if op == Op.PUSH_SCOPE:
            after = cur + (i,)
        elif op == Op.POP_SCOPE:
            after = cur[:len(cur) - a]
        for j in succ[i]:
            # A branch keeps the entry state, the fall-through gets the scope effect (only
            # PUSH/POP_SCOPE have one, and neither branches).
            new = after if j == i + 1 or op not in JUMPS else cur
            old = regions[j]
            if old is None:
                regions[j] = new
                work.append(j)
            elif old != new:
                return None
    return regions


def _defined(instrs, state, succ, params):
    """Per instruction: the names certainly bound in the function scope or further out.

    A STORE_NAME or STORE_LOCAL at scope depth 0 leaves its name bound there or outside, and
    bindings are never removed, so the set only grows along a path; paths meet by intersection.
    """
    n = len(instrs)
    defined = [None] * n
    defined[0] = frozenset(params)
    work = [0]
    while work:
        i = work.pop()
        cur = defined[i]
        op, a, b = instrs[i]
        if (op == Op.STORE_NAME or op == Op.STORE_LOCAL) and state[i][1] == 0:
            cur = cur | {a}
        for j in succ[i]:
            old = defined[j]
            new = cur if old is None else (old & cur)
            if new != old:
                defined[j] = new
                work.append(j)
    return defined


def _nested_names(prepared) -> frozenset:
    """Every name the code declared inside ``prepared`` can use (its closures', actions',
    tools' and agents' bodies, and theirs in turn): the only names of this frame's scopes that
    other code can ever read or write. Any string operand counts, a member's name or a constant
    too, which errs on the safe side."""
    unit, program = prepared.unit, prepared.program
    names: set = set()
    seen: set = set()
    todo = [prepared]
    while todo:
        code = todo.pop()
        for op, a, b in code.instrs:
            if code is not prepared:
                if type(a) is str:
                    names.add(a)
                if type(b) is str:
                    names.add(b)
            if op == Op.MAKE_FUNCTION:
                inner = [a]
            elif op == Op.MAKE_ACTION:
                decl = program.actions[a]
                inner = [decl.body] + ([decl.rollback] if decl.rollback >= 0 else [])
            elif op == Op.MAKE_TOOL:
                inner = [program.tools[a].body]
            elif op == Op.MAKE_AGENT:
                inner = [program.agents[a].body]
            else:
                continue
            for index in inner:
                if index not in seen:
                    seen.add(index)
                    todo.append(unit[index])
    return frozenset(names)


# ----------------------------------------------------------------------------- code generation

def _literal(value) -> Optional[str]:
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return repr(value)
    if t is float and math.isfinite(value):
        return repr(value)
    return None


class _Gen:
    def __init__(self, prepared, counting=False, max_array=None, max_string=None, hot=False):
        self.prepared = prepared
        # Lines an Int version may make twice per test it spares (see worth); whether a loop
        # whose version this declines counts its turns, to be made again (see hot_counter).
        self.spec_lines = HOT_SPEC_LINES if hot else SPEC_LINES
        self.hot = hot
        self.counting = counting      # a step budget: count backward jumps and calls
        self.max_array = max_array    # --max-array, when an array literal could exceed it
        self.instrs = prepared.instrs
        code = prepared.code
        self.kind = code.kind
        self.params = tuple(code.params)
        self.lines: list[str] = []
        self.linemap: dict[int, int] = {}
        self.ns: dict = dict(_RUNTIME)
        self.ns["PREP"] = prepared
        # The Ints that str() turns into text in place under --max-string (values.int_text
        # does the others): those of at most this many bits.
        self.int_bits = V.int_bits(max_string if max_string is not None else V.MAX_STRING)
        self.nconst = 0
        self.direct = False     # generating the direct form (see Compiled)
        self.lazy = False       # ... whose function scope is made only if it deoptimizes
        self.captured: frozenset = frozenset()  # names read and written in pv (captured_names)
        # Names the parent scope bound when the code was generated: a load of one reads the
        # parent's dict once and asks further out only on a KeyError (see lookup).
        self.present: frozenset = frozenset()
        # ... and the scope out from it (where a top-level function finds the builtins).
        self.grand: frozenset = frozenset()
        self.argnames: list = []        # ... its Python parameters, one per Sense parameter
        # The scope whose bindings, as they are while the code is made, guess what its calls
        # call (see inlined_call); None once made (the code holds on to no scope).
        self.callee_scope = None
        self.ntemps = 0                 # the inlined calls' Python locals made so far
        self.slot_names: dict = {}      # stack slot -> the name last loaded into it, per block
        self.bound: set = set()         # block locals certainly bound here, per block (block)
        self.turning = None     # the dispatch target being emitted in its own loop (see turn)
        self.item_for = None    # the item loop whose Int version is being emitted (item_loop)
        self.from_item: dict = {}   # ... block locals holding its item, taken to be an Int
        self.item_int = False       # ... whether that version tests its items for Ints
        # The next turns of a loop's Int version, as emitted: (line index, the locals that may
        # no longer hold an Int there); see region.
        self.back_edges: list = []
        self.specialise = True  # give blocks Int versions (see region)
        self.spec = False       # emitting a region's Int version (see region)
        # ... a quiet one (no test for labels or data-made shapes in its loop's instructions,
        # quiet_span: header to jump back); whether the instruction being emitted is one of
        # them (quiet); whether one of them is not in QUIET_OPS (noisy)
        self.quiet_version = False
        self.quiet_span = None
        self.quiet = False
        self.noisy = False
        # ... where slot -> (line, expression, ip or None) for the slots the lines of Int
        # locals and constants put there (see int_op)
        self.exprs: dict = {}
        self.types: dict = {}           # ... stack slot -> "i" (an Int) or "b" (a Bool) there
        self.known: set = set()         # ... Python locals holding an Int there
        self.written: set = set()       # ... Python locals stored to on the way there
        self.origin: dict = {}          # ... stack slot -> the local it was loaded from
        self.confirm = None             # ... locals worth a guard (None: finding them)
        self.guards: list = []          # ... locals the version assumes Ints on entry
        # ... and the locals it assumes bound in the function's scope (see assume_bound):
        # which it may (the names certainly bound on entry to a generator's loop header or
        # join: ``defined`` there), the locals it did (tested ``is not U`` on entry), those a
        # first making found, those the second may take
        self.bounding = frozenset()
        self.bound_guards: list = []
        self.bound_useful: set = set()
        self.bound_confirm = None
        self.useful: set = set()        # ... locals an Int operation took (while finding)
        self.saved = 0                  # ... Int operations done without a test
        # A recursive function's direct form may come with an Int entry, ``direct_i``, for its
        # calls of itself with Int arguments (see generate_direct): whether it is being made;
        # whether such calls go to it (``int_calls``) and their results are taken to be Ints
        # (``int_results``); what a generation found: the sites of such calls, the entry
        # block's guards, and whether every return it made returned a known Int.
        self.int_entry = False
        self.int_calls = False
        self.int_results = False
        self.int_sites = 0
        self.entry_guards: list = []
        self.returns_int = True
        self.int_result_at = None       # the CALL whose result is an Int (see spec_after)
        self.chain_keys: dict = {}

    # -- helpers

    @property
    def P(self) -> str:
        """How the code names the scope the function was declared in. A generator and a
        commit body's or rollback block's direct form keep it in the local ``P``; a direct form
        of a function or a tool reads it from its closure where it needs it (the prologue's
        ``pv`` and rare paths), since every local of a direct form is paid for at each call."""
        return "cl.scope" if self.direct and self.kind not in _GIVEN_SCOPE else "P"

    def const(self, value) -> str:
        lit = _literal(value)
        if lit is not None:
            return lit
        name = f"_k{self.nconst}"
        self.nconst += 1
        self.ns[name] = value
        return name

    def emit(self, indent: int, text: str, ip: int) -> None:
        self.lines.append("    " * indent + text)
        self.linemap[len(self.lines)] = ip

    # -- analysis

    def analyse(self):
        instrs = self.instrs
        if len(instrs) > MAX_INSTRUCTIONS:
            raise _Declined("too large")
        for op, _, _ in instrs:
            if op in DECLINED_OPS:
                raise _Declined("test or try handlers, or a native")
        self.state, self.succ = _flow(instrs)
        spilled = 0
        for (op, _, _), st in zip(instrs, self.state):
            if st is not None and op not in IN_PLACE_OPS:
                spilled += st[0]
        if spilled > MAX_SPILLED:
            raise _Declined("stack too deep")
        # Parameters are bound in the function's own scope only for these kinds; a rollback
        # block sees its action's parameters one scope further out.
        fresh = self.kind in (CodeKind.FUNCTION, CodeKind.ACTION_BODY, CodeKind.TOOL_BODY,
                              CodeKind.ROLLBACK)
        self.fixed = frozenset(self.params) if self.kind in (
            CodeKind.FUNCTION, CodeKind.ACTION_BODY, CodeKind.TOOL_BODY) else frozenset()
        self.defined = _defined(instrs, self.state, self.succ, self.params)
        # Names a block scope of this frame can ever hold, and names its own scope can hold.
        # (And the names a `local` declares in its own scope: see captured_names.)
        blk, own, self.declared = set(), set(self.params), set()
        for i, (op, a, b) in enumerate(instrs):
            st = self.state[i]
            if st is None:
                continue
            if op == Op.STORE_LOCAL or op == Op.STORE_NAME:
                if st[1] == 0:
                    own.add(a)
                    if op == Op.STORE_LOCAL:
                        self.declared.add(a)
                elif op == Op.STORE_LOCAL or a not in self.defined[i]:
                    blk.add(a)
        self.blk = blk
        # A module's or agent's scope may already hold bindings (the REPL, a restored agent).
        self.own = own if fresh else None
        # Fixed parameters: always in the function scope and never shadowed by a block.
        self.fixed = frozenset(p for p in self.fixed if p not in blk)
        ops = {op for op, _, _ in instrs}
        captures = bool(ops & CAPTURING_OPS)
        # Cached variables: only this frame writes a name of its own scope that no code
        # declared here (closure, action, tool or agent, which alone can see this frame's
        # scopes) ever names, so such a name that lives there (never in a block) is mirrored in
        # a Python local. Stores write through to the scope, which therefore stays exact for a
        # spill, a save, a later tier-1 continuation and the code declared here (a function's
        # generator writes them where the scope can be seen instead: _Gen.publish).
        self.cached = {}
        if fresh:
            shared = _nested_names(self.prepared) if captures else frozenset()
            for j, name in enumerate(sorted(own - blk - shared)):
                self.cached[name] = f"l{j}"
        # The cached names some instruction stores (the others' locals never change), when
        # their stores may wait for the scope to be seen (_Gen.publish): not where anything
        # can hold on to the scope past a hand-out -- a closure, action, tool or agent declared
        # here (it may read a name by itself: ``ask`` reads the delegation its scope set), a
        # policy rule, an internal builtin such as a session's.
        if any(_keeps_scope(op, a) for op, a, _ in instrs):
            self.stored = ()
        else:
            stores = {a for op, a, _ in instrs if op == Op.STORE_NAME or op == Op.STORE_LOCAL}
            self.stored = tuple(name for name in self.cached if name in stores)
        # Block variables: with nothing declared here to capture a scope and no policy rule to
        # write into one, nobody but this frame sees its block scopes, so none is made: each
        # name a block can bind lives in a Python local of that block (reset when it is
        # entered). A spill builds the scopes tier 1 would have, with those bindings, so the
        # frame can be saved or continued by tier 1 at any call.
        self.regions = _regions(instrs, self.state, self.succ)
        self.blocal = (not captures and not (ops & POLICY_OPS) and self.regions is not None)
        # Block scopes made again and again (a loop's body): where nothing inside the block
        # can keep its scope (no closure, action, tool or agent declared there, no policy rule,
        # no internal builtin such as a session's, which holds on to the scope it opens in),
        # no one can tell this turn's scope from the last one's, so the block's last scope
        # serves again, emptied, whenever its parent is the same.
        self.reused: set = set()
        if not self.blocal and self.regions is not None:
            kept = set()
            for i, (op, a, b) in enumerate(instrs):
                if self.state[i] is None:
                    continue
                if _keeps_scope(op, a):
                    kept.update(self.regions[i])
            self.reused = {i for i, (op, _, _) in enumerate(instrs)
                           if op == Op.PUSH_SCOPE and self.state[i] is not None
                           and i not in kept}
        self.bnames: dict[int, dict[str, str]] = {}     # PUSH_SCOPE site -> name -> local
        if self.blocal:
            for i, (op, a, b) in enumerate(instrs):
                st = self.state[i]
                if st is None or st[1] == 0:
                    continue
                if op == Op.STORE_LOCAL or (op == Op.STORE_NAME and a not in self.defined[i]):
                    site = self.regions[i][-1]
                    names = self.bnames.setdefault(site, {})
                    if a not in names:
                        names[a] = f"b{site}_{len(names)}"

        # Blocks: leaders are the entry, jump targets and instructions after a jump/terminator.
        n = len(instrs)
        preds = [0] * n
        for i in range(n):
            if self.state[i] is None:
                continue
            for j in self.succ[i]:
                preds[j] += 1
        self.preds = preds
        dispatch = {0}
        loop_heads = set()
        for i in range(n):
            if self.state[i] is None:
                continue
            op, a, b = instrs[i]
            if op in JUMPS and op is not Op.TEST_BEGIN and a <= i:
                dispatch.add(a)
                loop_heads.add(a)         # loop headers: also where a tier-1 frame can switch in
            for j in self.succ[i]:
                if preds[j] > 1:
                    dispatch.add(j)
        self.entries = frozenset(j for j in dispatch if j == 0 or j in loop_heads)
        self.dispatch = dispatch - self.copied_joins(dispatch)
        self.fused, self.fused_calls = self.method_calls()
        self.guesses: dict = {}     # fused site -> its guessed method (see guessed_method)

    def copied_joins(self, dispatch) -> set:
        """The joins (blocks two paths reach, other than the entry and loop headers) emitted
        in place on each path into them, as single-predecessor blocks are, rather than found
        by the dispatch loop: a loop body's ``if`` then costs no trip through the dispatch
        loop and no second Int guard at its end, its join being part of the path that enters
        it. Chosen in instruction order (forward edges only go forward: every backward jump
        targets a loop header), so that no instruction is emitted more than MAX_COPIES times
        in one version of its region: a join the paths into which would exceed that stays a
        dispatch target, and starts the count afresh."""
        limit = MAX_COPIES if len(self.instrs) <= COPY_SIZE else 2
        arriving = [0] * len(self.instrs)      # how many times the paths into i are emitted
        copied = set()
        for i, st in enumerate(self.state):
            if st is None:
                continue
            if i in self.entries:
                count = 1
            elif i in dispatch:
                count = arriving[i]
                if count <= limit:
                    copied.add(i)
                else:
                    count = 1
            else:
                count = arriving[i]
            for j in self.succ[i]:
                if j > i:
                    arriving[j] += count
        return copied

    def method_calls(self):
        """The member calls ``x.name(args)`` tier 2 makes without binding the method first:
        GET_MEMBER index -> its CALL's index, and back.

        At such a site the receiver stays in the slot where tier 1 would have the bound method
        (see instr), which is safe as long as nothing can see the slot: every spill of the frame
        in between (a call in the arguments that may pause, deoptimize, or hand over to tier 1)
        first binds the method into the slot (materialize_methods). The arguments must be the
        straight code of an expression (forward jumps within it, no loop, scope, test or
        return), entered only through the GET_MEMBER: so the slot holds this site's receiver
        whenever the CALL is reached."""
        fused, calls = {}, {}
        instrs, state, succ = self.instrs, self.state, self.succ
        preds: dict = {}
        for k, outs in enumerate(succ):
            if state[k] is not None:
                for t in outs:
                    preds.setdefault(t, []).append(k)
        for i, (op, a, b) in enumerate(instrs):
            if op != Op.GET_MEMBER or state[i] is None:
                continue
            slot = state[i][0] - 1          # the receiver's, then the callee's
            for j in range(i + 1, len(instrs)):
                if state[j] is None or any(not i <= p < j for p in preds.get(j, ())):
                    break
                op_j, a_j, _ = instrs[j]
                if op_j == Op.CALL and state[j][0] - a_j - 1 == slot:
                    fused[i], calls[j] = j, i
                    break
                if op_j in _NOT_IN_ARGUMENTS or state[j][0] <= slot:
                    break
                if op_j in JUMPS and instrs[j][1] <= j:
                    break
        return fused, calls

    def guessed_method(self, site):
        """For the fused member call at ``site``: (type, entry, function) of the first of
        String, Array and Map (methods.PURE_BY_TYPE) whose method of that name calls no Sense
        code and takes the call's argument count, entry and function as names in the generated
        code; None when there is none."""
        from sensevm.runtime.methods import PURE_BY_TYPE
        name, n = self.instrs[site][1], self.instrs[self.fused[site]][1]
        for t in (str, list, dict):
            entry = PURE_BY_TYPE[t].get(name)
            if entry is not None and (entry[1] is None or entry[1] == n):
                if site not in self.guesses:
                    self.guesses[site] = (t, self.const(entry), self.const(entry[0]))
                return self.guesses[site]
        return None

    def guessed_call(self, site, guess, callee, args, n, indent, ip) -> None:
        """The call of the method ``guess`` found at ``site`` (its receiver is of the type
        guessed, exactly): the method's common case written in place when it has one
        (methods.INLINE_METHODS: no call of the method, no list of arguments), else the
        method's call."""
        from sensevm.runtime.methods import INLINE_METHODS
        call = f"{callee} = {guess[2]}({callee}, vm, [{args}])"
        inline = INLINE_METHODS[guess[0]].get((self.instrs[site][1], n))
        if inline is None:
            self.emit(indent, call, ip)
            return
        test, expr = (part.format(*args.split(", ") if args else (), r=callee) for part in inline)
        if not test:
            self.emit(indent, f"{callee} = {expr}", ip)
            return
        self.emit(indent, f"if {test}: {callee} = {expr}", ip)
        self.emit(indent, f"else: {call}", ip)

    def materialize_methods(self, k, count, indent):
        """Before instruction k spills ``count`` stack slots: bind the method of every fused
        site still open there into its slot (see method_calls), as tier 1 has it."""
        for site, call in self.fused.items():
            slot = self.state[site][0] - 1
            if site < k < call and slot < count:
                self.emit(indent, f"if _m{site} is not None: "
                                  f"s{slot} = vm.member(s{slot}, {self.instrs[site][1]!r}); "
                                  f"_m{site} = None", k + 1)

    def has_direct_form(self) -> bool:
        """A function with a direct form (see Compiled): every instruction done in place (no
        member read: it may capture the frame; no closure made) or a CALL, unless steps count."""
        if self.kind not in (CodeKind.FUNCTION, CodeKind.TOOL_BODY, CodeKind.ACTION_BODY,
                             CodeKind.ROLLBACK):
            return False
        allowed = IN_PLACE_OPS if self.counting else IN_PLACE_OPS | {Op.CALL}
        for i, (op, _, _) in enumerate(self.instrs):
            if self.state[i] is not None and op not in allowed:
                return False
        return True

    def outer_store(self, kw, q, top, indent, ip) -> tuple:
        """The branch keyword and test, after ``kw``, of a store's last branch: true when no
        scope outside the function binds name ``q`` (an outer binding is updated instead).
        Outside direct forms the parent's and grandparent's bindings are tested first, written
        out as ``elif`` branches (a store to a new local asks this on every first store, and
        these are where a binding is found if anywhere), then store_found from three out. A
        direct form's prologue runs on every call, so it reads only the parent's bindings
        (``pv``, which a closure's store to its captured variable finds): it tests those, then
        asks store_found from the grandparent."""
        if self.direct:
            self.emit(indent, f"{kw} {q} in pv: pv[{q}] = {top}", ip)
            return "elif", f"not store_found({self.P}.parent, {q}, {top})"
        self.emit(indent, f"{kw} {q} in pv: pv[{q}] = {top}", ip)
        self.emit(indent, f"elif {q} in ppv: ppv[{q}] = {top}", ip)
        self.reads_great = True
        return "elif", f"(P3 is None or not store_found(P3, {q}, {top}))"

    def store_block_local(self, i, kw, test, site, name, top, indent):
        """Bind block ``site``'s Python local of ``name`` to ``top`` (under ``{kw} {test}:``
        unless ``test`` is None). The block scopes built for this region (``bk`` is its key)
        are updated in place, as tier 1 updates its one scope per block entry; any others
        cached are out of date (``bk = False``). A direct form caches none (see scope_at)."""
        e = self.emit
        ip = i + 1
        local = self.bnames[site][name]
        if test is not None:
            e(indent, f"{kw} {test}:", ip)
            indent += 1
        else:
            self.bound.add(local)
        e(indent, f"{local} = {top}", ip)
        if self.direct:
            return
        region = self.regions[i]
        key = self.chain_keys.setdefault(region, len(self.chain_keys) + 1)
        up = ".parent" * (len(region) - 1 - region.index(site))
        self.keyed(indent, key, f"bsc{up}.vars[{name!r}] = {top}", ip)

    def first_bound(self, i, names):
        """The name of ``names`` (block i's) that the instruction after PUSH_SCOPE i binds in
        that block, reached only from i; else None."""
        k = i + 1
        if k >= len(self.instrs) or self.preds[k] != 1 or self.state[k] is None:
            return None
        op, a, _ = self.instrs[k]
        if op == Op.STORE_LOCAL and a in names and self.regions[k][-1:] == (i,):
            return a
        return None

    def keyed(self, indent, key, update, ip):
        """``if bk == key: {update}`` else the cached scopes are stale; just the latter when no
        scopes are ever built for that key (a loop that makes no call), see drop_keyed. Keys
        start at 1 and none cached is False, so a loop that keeps none pays one test of a
        bool (the interpreter's fastest branch). Nothing in a quiet version: see quiet_entry."""
        if self.quiet:
            return
        self.keyed_at.append((len(self.lines), key))
        self.emit(indent, "if bk:", ip)
        self.emit(indent + 1, f"if bk == {key}: {update}", ip)
        self.emit(indent + 1, "else: bk = False", ip)

    def drop_keyed(self) -> None:
        """Keyed updates (see keyed) of keys no scopes were built for become ``bk = False``."""
        for k, key in self.keyed_at:
            if key not in self.built_keys:
                line = self.lines[k]
                indent = line[:len(line) - len(line.lstrip())]
                self.lines[k:k + 3] = [indent + "bk = False", indent + "pass", indent + "pass"]

    def captured_names(self) -> frozenset:
        """The names a lazy direct form of a function assigns that its closure's scope bound
        when the form was made (``present``): a closure's captured variable, a function's
        global. Bound there on entry, such a name stays there for the whole call (a scope never
        loses a binding, and a store finds it there before it could bind one of the function's
        own), so the form reads and writes it in ``pv`` with no test, once its prologue has
        found it there. Not a parameter, not a name a block may hold or a ``local`` declares."""
        if not self.lazy or self.kind is not CodeKind.FUNCTION or not self.cached:
            return frozenset()
        return frozenset(name for name in self.cached if name in self.present
                         and name not in self.fixed and name not in self.blk
                         and name not in self.declared)

    def scope_is_lazy(self) -> bool:
        """A direct form needs no function scope while it runs when every name its scope can
        hold lives in a Python local (none is also bound in a block) and its blocks, if any,
        live in Python locals too: nothing reads the scope but a deoptimization, which builds
        it from those locals (params first, as tier 1 binds them)."""
        if self.own is None or self.own & self.blk or self.kind in _GIVEN_SCOPE:
            return False        # (the VM gives a commit body or rollback block its scope)
        pushes = any(op == Op.PUSH_SCOPE for op, _, _ in self.instrs)
        return self.blocal or not pushes

    # -- emission

    def generate(self) -> str:
        while True:
            try:
                return self._generate()
            except _Deeper as more:
                self.dispatch.add(more.block)

    def generate_direct(self) -> str:
        """The direct form's source (``direct``); with ``direct_i`` before it when the function
        calls itself with Int arguments from an Int version of its blocks and its entry block's
        Int version tests its parameters: ``direct_i`` is ``direct`` without those tests, for
        those calls, which know their arguments are Ints. When every return it makes returns
        a known Int, taking what those calls give to be an Int, it returns only Ints (each
        return's value comes from Int operations on Ints and on what calls that returned
        before it gave), and the callers' Int versions take them to be Ints too: fib's
        ``fib(n - 1) + fib(n - 2)`` is one Python addition."""
        source = self.generate()
        if (not self.int_sites or not set(self.entry_guards) & self.param_locals()
                or self.preds[0] or 0 in self.headers):
            return source
        self.int_entry = self.int_calls = self.int_results = True
        try:
            entry = self.generate()
            if not self.returns_int:
                self.int_results = False
                entry = self.generate()
            linemap = self.linemap
            self.int_entry = False
            source = self.generate()
        finally:
            self.int_entry = self.int_calls = self.int_results = False
        shift = entry.count("\n")
        self.linemap = {**linemap, **{n + shift: ip for n, ip in self.linemap.items()}}
        return entry + source

    def param_locals(self) -> set:
        """The Python locals that mirror the parameters (None for one that has none)."""
        return {self.cached.get(name) for name in self.params}

    def _generate(self) -> str:
        self.lines = []
        self.linemap = {}
        self.captured = self.captured_names() if self.direct else frozenset()
        self.spec = False
        # (A making cut short, _Deeper, leaves none of a version's state behind: the general
        # code made next must test for labels.)
        self.quiet = self.quiet_version = False
        self.quiet_span = None
        self.int_sites, self.entry_guards, self.returns_int = 0, [], True
        self.int_result_at = None
        self.keyed_at: list = []        # (line index, chain key): see keyed
        self.reads_great = False        # whether the code reads P3 (see outer_store)
        self.built_keys: set = set()
        # A function's generator keeps its cached names' new values in their Python locals
        # and writes them to its scope only where something can see it (see publish).
        self.defer = not self.direct and self.kind is CodeKind.FUNCTION and bool(self.stored)
        # A generator that may call a direct form computes the call's depth and bound once when
        # it starts and again after each yield it resumes from (frames.direct_bound), not at
        # every call.
        self.hoisted = not self.direct and not self.counting and any(
            op == Op.CALL and a < DIRECT_ARITIES for op, a, _ in self.instrs)
        maxdepth = max((st[0] for st in self.state if st is not None), default=0)
        slots = [f"s{i}" for i in range(maxdepth + 2)]
        e = self.emit
        if self.direct:
            self.direct_prologue()
        else:
            e(0, "def t2(vm, f, L):", 0)
            e(1, "H = vm.handlers", 0)
            e(1, "sc = f.scope", 0)
            if self.hoisted:
                e(1, "_dd, _M = DB(vm)", 0)
        if self.counting:
            e(1, "B = vm.budget", 0)
        if not self.direct:
            e(1, "fs = sc", 0)
            e(1, "if L:", 0)
            # Entered at a loop header (a frame switching over from tier 1): its stack is in
            # the frame, and the function's scope is as many scopes out as the depth there.
            e(2, "d = DEPTH[L]", 0)
            e(2, "while d:", 0)
            e(3, "fs = fs.parent", 0)
            e(3, "d -= 1", 0)
            e(2, "stk = f.stack", 0)
            e(2, "k = len(stk)", 0)
            for k in range(1, maxdepth + 1):
                e(2, f"{'if' if k == 1 else 'elif'} k == {k}: {', '.join(slots[:k])}, = stk", 0)
            e(1, "v0 = fs.vars", 0)
            e(1, "P = fs.parent", 0)
            e(1, "pv = P.vars if P is not None else EMPTY", 0)
        else:
            if not self.int_entry:
                e(1, f"pv = {self.P}.vars", 0)      # a closure's scope: never None
            # The captured names (see captured_names) are where they were when this form was
            # made, or it is made again for the closure at hand (REDO: _direct_on_first_call).
            args = "".join(", " + a for a in self.argnames or ())
            for name in sorted(self.captured):
                e(1, f"if {name!r} not in pv: return REDO(vm, cl, D, M{args})", 0)
        # The scope two out, where a top-level function finds the builtins (see lookup); the
        # line goes again if nothing reads it (prune_unread).
        named = self.P == "P"
        e(1, _GRAND if named else _DIRECT_GRAND, 0)
        e(1, _GREAT if named else _DIRECT_GREAT, 0)
        e(1, "U = UNSET", 0)
        if not self.direct:
            e(1, "_hot = 0", 0)         # (turns counted, if any loop counts: hot_counter)
        for site in sorted(self.reused):
            e(1, f"_r{site} = None", 0)
        for name, local in self.cached.items():
            if self.direct and name in self.fixed and self.argnames is not None:
                arg = self.argnames[self.params.index(name)]
                if arg != local:
                    e(1, f"{local} = {arg}", 0)
            elif name in self.fixed:
                e(1, f"{local} = v0[{name!r}]", 0)
            elif self.lazy:
                e(1, f"{local} = U", 0)             # a fresh function scope holds only params
            else:
                e(1, f"{local} = v0.get({name!r}, U)", 0)
        if self.defer:
            e(1, "dw = 0", 0)
        if self.blocal:
            if not self.direct:
                e(1, "sc = fs", 0)
            e(1, "bk = False", 0)
            e(1, "bsc = None", 0)
            for names in self.bnames.values():
                for local in names.values():
                    e(1, f"{local} = U", 0)
            # A frame switching over inside blocks: its block scopes are real; read them.
            for entry in ([] if self.direct else sorted(self.entries)):
                sites = self.regions[entry] if entry < len(self.regions) else ()
                if not sites or not any(site in self.bnames for site in sites):
                    continue
                e(1, f"if L == {entry}:", 0)
                e(2, "_s = f.scope", 0)
                for site in reversed(sites):
                    for name, local in self.bnames.get(site, {}).items():
                        e(2, f"{local} = _s.vars.get({name!r}, U)", 0)
                    e(2, "_s = _s.parent", 0)
        e(1, "try:", 0)
        e(2, "while True:", 0)
        order = sorted(j for j in self.dispatch if self.state[j] is not None)
        # Loop headers: the targets of backward jumps.
        self.headers = {j for k, outs in enumerate(self.succ) if self.state[k] is not None
                        for j in outs if j <= k}
        inner = self.innermost_loop(order)
        if inner is None:
            self._tree(order, 3)
        else:
            # Every turn of the innermost loop comes back here: its header is tested first,
            # the other blocks are found by the tree as before.
            e(3, f"if L == {inner}:", 0)
            self.turn(inner, 4)
            order.remove(inner)
            self._tree(order, 3, "elif")
        if self.direct:
            self.direct_epilogue()
        else:
            e(2, "if L is None: yield    # always a generator, even without calls", 0)
            e(1, "except Exception as exc:", 0)
            e(2, "tb = exc.__traceback__", 0)
            e(2, "f.ip = LINEMAP.get(tb.tb_lineno, f.ip) if tb is not None else f.ip", 0)
            self.publish(2, 0)
            e(2, "raise", 0)
        self.drop_keyed()
        self.prune_unread()
        if self.defer and len(self.stored) > INLINE_PUBLISH:
            self.lines += self.publisher()
        self.ns["DEPTH"] = {j: self.state[j][1] for j in self.entries}
        self.ns["UNSET"] = UNSET
        self.ns["EMPTY"] = {}
        return "\n".join(self.lines) + "\n"

    # Prologue assignments whose variable the code may never read.
    _UNREAD = {"    " + _GRAND: "ppv", "    " + _DIRECT_GRAND: "ppv", "    L = 0": "L",
               "    bk = False": "bk", "    bsc = None": "bsc", "    pv = P.vars": "pv",
               "    _hot = 0": "_hot",
               "    pv = cl.scope.vars": "pv"}
    # Read by the lines above only, if by nothing else: looked for once those are gone.
    _UNREAD_THEN = {"    U = UNSET": "U"}

    def prune_unread(self) -> None:
        """Drop the prologue's initial assignments of variables nothing reads (most small
        functions use no block scope and no dispatch; a direct form that reads no name from
        outside, as ``x * 2 + 1``, needs no scope), keeping the line map in step."""
        body_start = next((k for k, line in enumerate(self.lines) if line == "    try:"),
                          len(self.lines))
        text = "\n".join(self.lines)
        drop = []
        for k in range(body_start):
            if self.lines[k] in ("    " + _GREAT, "    " + _DIRECT_GREAT):
                if not self.reads_great:        # known without a search (see outer_store)
                    drop.append(k)
                continue
            name = self._UNREAD.get(self.lines[k]) or _unbound_local(self.lines[k])
            if name is not None and not _reads(text, name):
                drop.append(k)
        if any(line in self._UNREAD_THEN for line in self.lines[:body_start]):
            if drop:
                gone = set(drop)
                text = "\n".join(line for k, line in enumerate(self.lines) if k not in gone)
            for k in range(body_start):
                name = self._UNREAD_THEN.get(self.lines[k])
                if name is not None and not _reads(text, name):
                    drop.append(k)
        if not drop:
            return
        dropped = set(drop)
        new_number = {}             # old line number -> new, for the lines kept
        kept = []
        for k, line in enumerate(self.lines):
            if k not in dropped:
                kept.append(line)
                new_number[k + 1] = len(kept)
        self.lines = kept
        self.linemap = {new_number[n]: v for n, v in self.linemap.items() if n in new_number}

    def _tree(self, blocks, indent, kw="if"):
        """Find block L among ``blocks`` by halving; ``kw`` "elif" continues a test above."""
        if len(blocks) == 1:
            if kw == "elif":
                self.emit(indent, "else:", 0)
                indent += 1
            self.turn(blocks[0], indent)
            return
        mid = len(blocks) // 2
        self.emit(indent, f"{kw} L < {blocks[mid]}:", 0)
        self._tree(blocks[:mid], indent + 1)
        self.emit(indent, "else:", 0)
        self._tree(blocks[mid:], indent + 1)

    def turn(self, j, indent):
        """Dispatch target j, found by the tree; a loop's header in a ``while True`` of its
        own: a jump back to j (the loop's next turn) is a ``continue`` of it, which skips the
        dispatch's tests, and a jump anywhere else sets L and breaks out to the dispatch loop.
        (Other targets, a join, are left as they are: a break and the dispatch loop's turn
        cost more than a continue; so is a direct form that checks its return type, whose
        RETURN breaks out to the check.)"""
        if j not in self.headers or self.direct and self.direct_return_check() is not None:
            self.region(j, indent)
            return
        self.emit(indent, "while True:", 0)
        self.turning = j
        try:
            self.region(j, indent + 1)
        finally:
            self.turning = None

    def innermost_loop(self, order) -> Optional[int]:
        """The header, among the blocks ``order``, of the loop nested deepest (the smallest
        such loop), when there are enough blocks for the tree to cost more than one test."""
        if len(order) < 3:
            return None
        loops = [(a, i) for i, (op, a, _) in enumerate(self.instrs)
                 if self.state[i] is not None and op in JUMPS and op is not Op.TEST_BEGIN
                 and a <= i and a in order]
        best = None
        for head, end in loops:
            depth = sum(1 for h, e in loops if h <= head <= e)
            key = (-depth, end - head)
            if best is None or key < best[0]:
                best = (key, head)
        return None if best is None else best[1]

    def direct_prologue(self):
        """A direct form's start: the checks of a call, in tier 1's order (vm._bind_call), then
        its scope. Errors raised before the ``try`` are the caller's (placed at its CALL)."""
        e = self.emit
        prepared = self.prepared
        params = self.params
        self.ns["POSITIONS"] = prepared.positions
        self.ns["PATH"] = prepared.path
        self.ns["LABEL"] = code_label(prepared.code)
        if self.kind in _GIVEN_SCOPE:
            # A commit body: vm.commit made its scope (the scope a rollback will see) and bound
            # the checked arguments; a rollback block: vm.rollback made its scope, a child of
            # that one. ``cl`` is the prepared action.
            self.argnames = None
            e(0, "def direct(vm, cl, D, M, sc):", 0)
            e(1, "if D > M: raise Deoptimize(None, 0)", 0)
            e(1, "fs = sc", 0)
            e(1, "v0 = sc.vars", 0)
            e(1, "P = sc.parent", 0)
            e(1, "L = 0", 0)
            return
        # The arguments arrive as Python parameters (a call site with n arguments only uses a
        # direct form of n parameters: PreparedCode.dx), named as the locals that mirror them.
        self.argnames = [self.cached.get(name) if name in self.fixed and self.lazy
                         else f"a{k}" for k, name in enumerate(params)]
        # (direct_i is called only by this form's calls of the closure it runs as, which
        # have its scope's bindings at hand: they pass them, as ``pv``.)
        name = "direct_i(vm, cl, pv, D, M" if self.int_entry else "direct(vm, cl, D, M"
        e(0, f"def {name}{''.join(', ' + a for a in self.argnames)}):", 0)
        # D: the depth this call has (vm.depth is not moved by direct calls: it counts frames,
        # and a deoptimization sets it to the frames it made); M: the deepest a direct
        # activation of this chain may be (frames.DIRECT_BOUND: DIRECT_LIMIT activations on the
        # Python stack, and the depth limit). Past it the call is refused before anything is
        # checked: made again with a frame, it gets every check in tier 1's order, the depth
        # limit's included.
        e(1, "if D > M: raise Deoptimize(None, 0)", 0)
        # (A tool body's arguments were checked by call_tool, before its `called` record.)
        checks = () if self.kind is CodeKind.TOOL_BODY else prepared.param_checks
        for k, name, text, check, exact in checks:
            arg = self.argnames[k]
            e(1, f"if {self.exact_test(exact, arg)}not {self.const(check)}({arg}): "
                 f"raise param_error({name!r}, cl.name, {text!r}, {arg})", 0)
        if not self.lazy:
            e(1, "fs = sc = Scope(cl.scope)", 0)
            e(1, "v0 = sc.vars", 0)
            for k, name in enumerate(params):
                e(1, f"v0[{name!r}] = {self.argnames[k]}", 0)
        e(1, "L = 0", 0)

    def direct_epilogue(self):
        """Leaving a direct form: by its RETURN (``_v``, then the declared return type, checked
        outside the ``try`` so that an error is the caller's), by an error placed here, or as a
        frame (Deoptimize, which passes: it is no Exception)."""
        e = self.emit
        e(1, "except Exception as exc:", 0)
        e(2, "raise direct_failure(exc, LINEMAP, POSITIONS, PATH, LABEL) from None", 0)
        check = self.direct_return_check()
        if check is not None:
            e(1, f"if {self.exact_test(check[2], '_v')}not {self.const(check[1])}(_v): "
                 f"raise return_error(cl.name, {check[0]!r}, _v)", 0)
            e(1, "return _v", 0)

    def exact_test(self, exact, value: str) -> str:
        """The start of a type check's condition: a value of the annotation's exact type (see
        values.exact_type) skips the checker's call."""
        return "" if exact is None else f"{value}.__class__ is not {self.const(exact)} and "

    def direct_return_check(self):
        """The declared return type a direct form checks: a function's or a tool's, as tier 1's
        RETURN does (a commit body's value is never checked)."""
        return None if self.kind is CodeKind.ACTION_BODY else self.prepared.return_check

    def tick(self, indent, ip):
        """One step (vm.count_step, inlined): placed at instruction ip - 1, as tier 1 places it."""
        self.emit(indent, "B.left -= 1", ip)
        self.emit(indent, "if B.left < 0: raise B.exceeded()", ip)

    def thread(self, j):
        """Where control lands after instruction j's block when it does nothing but jump (the
        end of an `if` inside a loop: close its block scope, jump back): going there directly
        saves a trip through the dispatch tree. Not with a step budget, which counts jumps."""
        if self.counting:
            return j
        seen = set()
        while j not in seen:
            seen.add(j)
            k = j
            op, a, b = self.instrs[k]
            while op == Op.NOP or (op == Op.POP_SCOPE and (self.blocal or not a)):
                k += 1
                op, a, b = self.instrs[k]
            if op != Op.JUMP:
                return j
            j = a
        return j

    def goto(self, j, indent, ip):
        j = self.thread(j)
        if self.counting and j < ip:
            self.tick(indent, ip)       # a backward jump taken: a step
        if j in self.dispatch and j == self.turning:
            self.emit(indent, "continue", ip)       # another turn of this block's own loop
            if self.spec:
                self.back_edges.append((len(self.lines) - 1, self.written - self.known))
        elif j in self.dispatch and self.turning is not None:
            self.emit(indent, f"L = {j}", ip)
            self.emit(indent, "break", ip)          # to the dispatch loop, which finds j
        elif j in self.dispatch:
            self.emit(indent, f"L = {j}", ip)
            self.emit(indent, "continue", ip)
        elif indent > MAX_INDENT:
            raise _Deeper(j)
        elif self.spec:
            # The path into block j is this one: what is known of its slots and locals holds
            # there, and not after it (the code below the branch continues the other path).
            saved = dict(self.types), set(self.known), set(self.written)
            self.block(j, indent)
            self.types, self.known, self.written = saved
        else:
            self.block(j, indent)

    def block(self, i, indent):
        """Emit instructions from i until control leaves (always by goto, return or yield)."""
        instrs = self.instrs
        self.slot_names = {}
        # The block locals this block has bound so far, unconditionally: a load finds them
        # bound without a test. A block emitted within (a branch's target) starts afresh and
        # never falls back into this one's code, which then goes on knowing what it knew.
        outer, self.bound = self.bound, set()
        try:
            while True:
                op, a, b = instrs[i]
                depth, scope = self.state[i]
                nxt = self.instr(i, op, a, b, depth, scope, indent)
                if nxt is None:
                    return
                if nxt in self.dispatch or self.preds[nxt] != 1:
                    self.goto(nxt, indent, i + 1)
                    return
                i = nxt
        finally:
            self.bound = outer

    def region(self, i, indent):
        """Block i, as entered from the dispatch loop: in two versions when that pays. The Int
        version assumes the function's (and blocks') locals it reads before writing them hold
        Ints (exactly: ``x.__class__ is int``, so a Bool, a Float, a labelled Int or an unbound
        name fails it), tested once on entry; its arithmetic and comparisons on them, on Int
        constants and on what they give need no test of their own, and a branch on what such a
        comparison gave no test for a label. Anything the guard does not cover is done as in
        the general version (the ``else``), which is what runs when the guard fails.

        The locals worth a guard are found by making the Int version once with every local it
        reads assumed an Int (those an Int operation takes are kept), then again assuming those."""
        if not self.specialise:
            self.block(i, indent)
            return
        start = self.mark()
        # A loop's Int version is a loop of its own: a turn that leaves every guarded local
        # an Int goes on to the next without the guard; any other turn leaves it to test again.
        inner = self.turning == i
        items = self.item_loop(i) if inner else None
        self.emit(indent, "if True:", i + 1)        # the guard, written once it is known
        if inner:
            self.loop_head(i, items, indent + 1)
        self.spec, self.confirm, self.useful, self.saved = True, None, set(), 0
        self.bounding = self.defined[i] if not self.direct and i != 0 else frozenset()
        self.bound_confirm, self.bound_useful = None, set()
        self.noisy = False
        self.quiet_span = (i, self.loop_last(i)) if inner else None
        self.spec_block(i, indent + 1 + inner, items)
        useful, bound = self.useful, self.bound_useful
        # (Made while the process is live, a quiet version could never be entered.)
        quiet = (inner and not self.noisy and not self.counting and self.prepared.quiet
                 and not PV.LABELLED)
        # (Counted while made for the hot budget: see hot_counter.)
        wanted = inner and not self.direct and self.worth_when_hot(start)
        if not self.worth(start):
            useful = bound = ()     # (assuming more than the guards will, it spared too little)
        self.rollback(start)
        guards = bound_guards = []
        if items and not (useful or bound) and wanted:
            # The Int version the hot budget would make (see hot_counter) has the item loop
            # too, and the guards this budget declined: counting turns for it wins.
            items = None
        if useful or bound or items:
            def make(quiet):
                self.emit(indent, "if True:", i + 1)
                if quiet:
                    self.quiet_entry(indent + 1, i + 1)
                if inner:
                    self.loop_head(i, items, indent + 1)
                self.back_edges = []
                self.spec, self.confirm, self.saved = True, set(useful), 0
                self.bound_confirm = set(bound)
                self.quiet_version, self.noisy = quiet, False
                self.spec_block(i, indent + 1 + inner, items)
            make(quiet)
            if quiet and self.noisy:
                # (It made what the first making did not: made again as it would be.)
                self.rollback(start)
                quiet = False
                make(quiet)
            self.quiet = self.quiet_version = False
            guards = self.guards
            bound_guards = [g for g in self.bound_guards if g not in guards]
            # Worth it only where tests are spared in proportion to the code made twice (a
            # loop's header block holds the whole body and its exit: one `i < n` on Ints
            # would not pay for compiling all of it again).
            if not (guards or bound_guards or items) or not self.worth(start):
                wanted = wanted and bool(guards or bound_guards) and self.worth_when_hot(start)
                guards = bound_guards = []
                items = None
                quiet = False
                self.rollback(start)
        else:
            quiet = False
        self.spec, self.bounding, self.quiet_span = False, frozenset(), None
        if not (guards or bound_guards or items):
            if wanted:
                self.hot_counter(i, indent)
            self.block(i, indent)
            return
        if i == 0 and self.direct:
            self.entry_guards = list(guards)
            if self.int_entry:
                # direct_i is called only with Int arguments, and only a call enters block 0
                # (see generate_direct): its parameters need no test there.
                params = self.param_locals()
                guards = [g for g in guards if g not in params]
        self.lines[start[0]] = "    " * indent + "if " + (" and ".join(
            ([QUIET_TEST] if quiet else [])
            + [f"{g}.__class__ is int" for g in guards] + [f"{g} is not U" for g in bound_guards]
            + ([f"not s{items.slot}.origins"] if items else [])
            + ([self.next_item_int(items)] if items and self.item_int else []))
            or "True") + ":"
        if inner:
            tested = set(guards)
            for line, unsure in self.back_edges:
                if line > start[0] and unsure & tested:
                    self.lines[line] = self.lines[line].replace("continue", "break")
            # Left by a jump elsewhere (L set, as the turn's own loop is left), or to test again.
            self.emit(indent + 1, f"if L != {i}: break", i + 1)
        if not (guards or bound_guards or items):
            return      # no general version: nothing could run it
        self.emit(indent, "else:", i + 1)
        if quiet:
            self.emit(indent + 1, f"if {LOUD_TEST}:", i + 1)
            self.emit(indent + 2, "loud(PREP)", i + 1)
            self.to_tier1(i, self.state[i][0], indent + 2)
        self.block(i, indent + 1)

    def quiet_entry(self, indent, ip) -> None:
        """What a quiet version does once on entry, for what its turns then need not: mark the
        cached names out of date in the scope (a deferred store in it sets no ``dw``: nothing
        in it reads the scope, and only its exits publish) and drop the block scopes cached
        (``bk``; nothing in it builds one to keep up to date, and a block store updates none)."""
        if self.defer:
            self.emit(indent, "dw = 1", ip)
        if not self.direct:
            self.emit(indent, "bk = False", ip)

    def worth(self, start) -> bool:
        """Does the Int version made since ``start`` spare enough tests for its size?"""
        return self.saved >= 2 and len(self.lines) - start[0] <= self.spec_lines * self.saved

    def worth_when_hot(self, start) -> bool:
        """Would the Int version made since ``start`` be worth it with the budget of code made
        again for a long-running loop (see hot_counter)?"""
        return (not self.hot and self.saved >= 2
                and len(self.lines) - start[0] <= HOT_SPEC_LINES * self.saved)

    def hot_counter(self, i, indent) -> None:
        """At the start of each turn of loop header i's general version, when only the budget
        declined its Int version: count the turn, and after HOT_TURNS of them (in this
        activation) hand the frame, spilled at the header as tier 1 would have it, to VM.retier,
        which makes the code again with the larger budget and starts its generator there. (A
        generator only: a direct form runs no loop long enough to matter and has no frame.)"""
        e = self.emit
        e(indent, "_hot += 1", i + 1)
        e(indent, f"if _hot > {HOT_TURNS}:", i + 1)
        self.spill(i, [f"s{j}" for j in range(self.state[i][0])], indent + 1)
        e(indent + 1, f"f.ip = {i}", i + 1)
        e(indent + 1, "vm.retier(f)", i + 1)
        e(indent + 1, "yield", i + 1)
        e(indent + 1, "return", i + 1)

    def spec_block(self, i, indent, items=None):
        self.types, self.known, self.written, self.origin = {}, set(), set(), {}
        self.guards, self.bound_guards = [], []
        self.item_for, self.from_item, self.item_int = items, {}, False
        if items:
            self.saved += ITEM_LOOP_SAVES
        try:
            self.block(i, indent)
        finally:
            self.item_for = None
        if items:
            # The exit is taken at the header, where nothing is known but what the guard
            # tests: not what the body's last path left (a local it stored an Int in may
            # hold anything, or nothing, when the loop ran no turn).
            self.types, self.known, self.written, self.origin = {}, set(), set(), {}
            self.from_item = {}
            self.loop_tail(i, items, indent - 1)

    def item_loop(self, i) -> "Optional[ItemLoop]":
        """Loop header i, when it is a ``for`` loop's FOR_ITER whose Int version can walk its
        items with a Python ``for`` (see loop_head); not with a step budget (which counts the
        jump back as its own)."""
        op, a, _ = self.instrs[i]
        if op != Op.FOR_ITER or self.counting:
            return None
        return ItemLoop(i, self.loop_last(i), self.state[i][0] - 1, a)

    def loop_last(self, i) -> int:
        """The last instruction of loop header i's body: its jump back."""
        return max(k for k, outs in enumerate(self.succ)
                   if i in outs and k >= i and self.state[k] is not None)

    def loop_head(self, i, items, indent) -> None:
        """The loop of header i's Int version: ``while True``, or for a loop over items (see
        item_loop) a Python ``for`` over the iterator's items from its position: the list or
        String iterator Python keeps gives the next item and says when there is none (reading
        the live list, as FOR_ITER does: a push in the body extends the loop), with no index
        kept in the ArrayIterator. That index is written back (the Python iterator's own, from
        ``__reduce__``) wherever the iterator may be seen: each spill and deoptimization in the
        loop (sync_items), and the ``for``'s leaving other than at its end (loop_tail)."""
        if items is None:
            self.emit(indent, "while True:", i + 1)
            return
        it, e, ip = f"s{items.slot}", self.emit, i + 1
        e(indent, f"_o{i} = {it}", ip)
        e(indent, f"_f{i} = iter({it}.items)", ip)
        e(indent, f"if {it}.i: _f{i}.__setstate__({it}.i)", ip)
        e(indent, f"for s{items.slot + 1} in _f{i}:", ip)

    @staticmethod
    def next_item_int(items) -> str:
        """The guard's test that the item the loop takes next, if any, is an Int."""
        it = f"s{items.slot}"
        return f"({it}.i >= len({it}.items) or {it}.items[{it}.i].__class__ is int)"

    def loop_tail(self, i, items, indent) -> None:
        """After the Python ``for`` of an item loop: its ``else`` (no item left) goes on at the
        exit as FOR_ITER does (a ``break`` there leaves the header's own loop as well, for the
        dispatch loop); a ``break`` out of the ``for`` (to test the guard again, or for a block
        outside the Int version) writes the index back while the slot holds this loop's
        iterator (a ``break`` of the program's own has popped it, and what it leaves there is
        then not read)."""
        it, e, ip = f"s{items.slot}", self.emit, i + 1
        self.quiet = self.quiet_version         # (the header's FOR_ITER, finding no item)
        e(indent, "else:", ip)
        # An Array whose length became the data's while the loop ran (provenance.SHAPES: a
        # labelled index removed or inserted at): how many passes there were is the data's,
        # and tier 1 labels what the body assigned at this last FOR_ITER (item_checks asks at
        # every other). The index is where Python's iterator found no item. (None in a quiet
        # version: see region.)
        if not self.quiet:
            e(indent + 1, f"if {_reshaped(it)}:", ip)
            e(indent + 2, f"{it}.i = len({it}.items)", ip)
            self.to_tier1(i, items.slot + 1, indent + 2)
        self.goto(items.exit, indent + 1, ip)
        e(indent, f"if {it} is _o{i}: {it}.i = _f{i}.__reduce__()[2]", ip)

    def item_checks(self, i, depth, indent, ints) -> None:
        """FOR_ITER at the header of an item loop's Int version, whose Python ``for`` has taken
        the item into the slot above the iterator: what is left of it is tier 1's reasons to
        take it itself, with the index written back one less (sync_items); and with ``ints``,
        the item's test for an Int: any other leaves the ``for``, the index written back to
        that item, for the guard to test again (it asks the same of the next item) and the
        general version to take it."""
        e, ip = self.emit, i + 1
        top, push = f"s{depth - 1}", f"s{depth}"
        if not self.quiet:
            e(indent, f"if {_reshaped(top)}:", ip)
            self.to_tier1(i, depth, indent + 1)
            self.labelled_branch(i, push, depth, indent, containers=False)
        if ints and self.confirm is not None:
            self.item_int = True
            e(indent, f"if {push}.__class__ is not int:", ip)
            e(indent + 1, f"{top}.i = _f{i}.__reduce__()[2] - 1", ip)
            e(indent + 1, f"_o{i} = None", ip)        # (written back: see loop_tail)
            e(indent + 1, "break", ip)
            self.saved -= 1         # (a test of its own, for the ones it spares)

    def sync_items(self, k, count, indent) -> None:
        """Before instruction k of an item loop hands out a stack of ``count`` slots that
        holds the loop's iterator: write back its index (see loop_head); one less at the
        header, whose FOR_ITER, not yet run there, takes again the item the ``for`` took.
        (Within the loop's instructions a slot's depth says whether the iterator is in it:
        below the body's stack it stays put until a ``break`` pops it.)"""
        loop = self.item_for
        if loop is not None and loop.header <= k <= loop.last and count > loop.slot:
            less = " - 1" if k == loop.header else ""
            self.emit(indent, f"s{loop.slot}.i = _f{loop.header}.__reduce__()[2]{less}", k + 1)

    def mark(self):
        return len(self.lines), len(self.keyed_at)

    def rollback(self, mark):
        lines, keyed = mark
        self.exprs = {}
        del self.lines[lines:]
        del self.keyed_at[keyed:]
        self.linemap = {n: ip for n, ip in self.linemap.items() if n <= lines}

    def int_local(self, i, name, scope):
        """The Python local a load of ``name`` at i finds first (see lookup), when it is one."""
        if name in self.blk and scope > 0 and not self.blocal or name in self.captured:
            return None
        if self.blocal and scope > 0:
            found = self.block_locals(i, name)
            if found:
                return found[0]
        return self.cached.get(name)

    def assume_bound(self, name, local) -> bool:
        """In an Int version that may (see bounding), take cached local ``local``, of
        ``name``, to be bound in the function's scope, tested once on entry (``local is not
        U``): a load of it then reads the local and a store writes it with no test of its own.
        A binding is never removed, so one bound on entry stays bound for the whole version.
        Only names bound on every path to the version's entry (``defined``: in this scope or
        further out), whose test then fails only where an outer scope holds the name (a
        name assigned first in the loop, or after it, would fail it on every entry); not in a
        direct form, whose lazy scope starts empty."""
        if (not self.bound_eligible(name)
                or self.bound_confirm is not None and local not in self.bound_confirm):
            return False
        if local not in self.bound_guards:
            self.bound_guards.append(local)
        self.bound_useful.add(local)
        self.saved += 1
        return True

    def bound_eligible(self, name) -> bool:
        """May this Int version take ``name``'s cached local to be bound (see assume_bound)?"""
        return (self.spec and name in self.bounding and name not in self.fixed
                and name not in self.captured)

    def forget(self, name):
        """A store to ``name`` (any of its Python locals): nothing is known of them after it."""
        for local in [self.cached.get(name)] + [names[name] for names in self.bnames.values()
                                                if name in names]:
            if local is not None:
                self.known.discard(local)
                self.written.add(local)
                self.from_item.pop(local, None)

    def taken(self, *slots):
        """An Int operation took these slots: the locals they were loaded from earn a guard."""
        self.saved += 1
        for slot in slots:
            local = self.origin.get(slot)
            if local is not None:
                self.useful.add(local)

    def spec_instr(self, i, op, a, b, depth, scope, indent):
        """Instruction i in a region's Int version, when what is known makes it simpler: the
        index control goes on at, or _LEFT when it has left (both ways of a branch emitted);
        None when it is emitted as in the general version."""
        T = self.types
        e = self.emit
        ip = i + 1
        top, sec, push = f"s{depth - 1}", f"s{depth - 2}", f"s{depth}"
        kc = self.folded_constant(i)
        if (kc is not None and kc[0] is int and op in _INT_FOLD and (op is not Op.MOD or kc[2])
                and T.get(depth - 2) == "i"):
            self.int_op(indent, depth - 2, op, kc[1], None, ip)
            self.taken(depth - 2)
            self.set_type(depth - 2, "b" if op in _COMPARISONS else "i")
            return i + 1
        if kc is None and depth >= 2 and T.get(depth - 1) == "i" == T.get(depth - 2):
            if op in _INT_FOLD and op is not Op.MOD:
                self.int_op(indent, depth - 2, op, top, depth - 1, ip)
            elif op is Op.MOD:
                e(indent, f"if {top}: {sec} = {sec} % {top}", ip)
                e(indent, f"else: {sec} = arith('%', {sec}, {top})", ip)    # its error
            else:
                return None
            self.taken(depth - 1, depth - 2)
            self.set_type(depth - 2, "b" if op in _COMPARISONS else "i")
            return i + 1
        if op in (Op.POP_JUMP_IF_FALSE, Op.POP_JUMP_IF_TRUE) and T.get(depth - 1) == "b":
            # The branch taken goes under the ``if``, unless the way on is a short return and
            # the branch a block of its own: then the way on does, and the branch follows
            # (``if n < 2: return n``). Python 3.11 specialises a comparison only when its
            # jump is short (no EXTENDED_ARG: under 256 code units), and a jump over a whole
            # recursive case is not.
            taken = not (self.returns_soon(i + 1) and self.thread(a) not in self.dispatch)
            test = "not " if (op is Op.POP_JUMP_IF_FALSE) == taken else ""
            operand = self.operand(depth - 1, indent)
            if operand is None:
                e(indent, f"if {test}{top}:", ip)
            else:       # the condition's own line becomes the test (the slot is popped)
                self.lines[-1] = "    " * indent + f"if {test}{_parens(operand[0])}:"
                self.linemap[len(self.lines)] = operand[1] or ip
            self.set_type(depth - 1, None)
            if taken:
                self.goto(a, indent + 1, ip)
                return i + 1
            self.goto(i + 1, indent + 1, ip)
            self.goto(a, indent, ip)
            return _LEFT
        if op is Op.NOT and T.get(depth - 1) == "b":
            e(indent, f"{top} = not {top}", ip)
            return i + 1
        if op is Op.NEG and T.get(depth - 1) == "i":
            e(indent, f"{top} = -{top}", ip)
            self.taken(depth - 1)
            self.set_type(depth - 1, "i")
            return i + 1
        if op is Op.LOAD_NAME:
            local = self.int_local(i, a, scope)
            if local is None:
                return None
            if self.confirm is None and local == self.cached.get(a) and self.bound_eligible(a):
                self.bound_useful.add(local)    # (should it not be taken to be an Int)
            if local not in self.known:
                if local in self.written or (self.confirm is not None
                                             and local not in self.confirm):
                    return None
                if local not in self.guards:
                    self.guards.append(local)
                self.known.add(local)
            e(indent, f"{push} = {local}", ip)
            self.exprs[depth] = (len(self.lines), local, None)
            self.slot_names[depth] = a
            self.set_type(depth, "i", self.from_item.get(local, local))
            return i + 1
        if op is Op.FOR_ITER and self.item_for is not None and self.item_for.header == i:
            # The item taken to be an Int where an Int operation would take it (see
            # item_checks), like a local read before it is written.
            ints = self.confirm is None or ITEM in self.confirm
            self.item_checks(i, depth, indent, ints)
            if ints:
                self.set_type(depth, "i", ITEM)
            return i + 1
        return None

    def returns_soon(self, k) -> bool:
        """Does the code from instruction k, entered only from the instruction before it,
        just load a value or two (in a block of its own, maybe) and return it?"""
        if self.preds[k] != 1 or k in self.dispatch:
            return False
        for j in range(k, min(k + 4, len(self.instrs))):
            op = self.instrs[j][0]
            if op == Op.RETURN:
                return True
            if op not in _RETURNS_SOON:
                return False
        return False

    def operand(self, slot, indent, back=0):
        """(expression, ip or None) when the line ``back`` before the last one emitted only
        put into stack slot ``slot`` an expression of Int locals and constants (see int_op),
        with the ip of the one operation in it that can fail; else None."""
        entry = self.exprs.get(slot)
        if entry is None:
            return None
        line, expr, fails = entry
        if (line != len(self.lines) - back
                or self.lines[line - 1] != "    " * indent + f"s{slot} = {expr}"):
            return None
        return expr, fails

    def int_op(self, indent, slot, op, right, right_slot, ip):
        """``s{slot} = s{slot} OP right`` on Ints in an Int version. When the operands were
        put in their slots by the lines just before from Int locals and constants, it becomes
        one line with theirs (``s0 = l2``, ``s1 = l3``, ``s0 = s0 < s1``: ``s0 = l2 < l3``):
        a value in a Python local is cheaper than one moved through stack slots, and a slot
        above the stack is never read again. An error keeps its position: a line holds at most
        one operation that can fail (+, -, * and % can run out of memory; a load or a
        comparison cannot), and has that operation's ip."""
        symbol = _INT_FOLD[op]
        left = self.operand(slot, indent, 0 if right_slot is None else 1)
        rhs = (right, None) if right_slot is None else self.operand(right_slot, indent)
        if left is not None and rhs is not None:
            fails = [at for at in (left[1], rhs[1], None if op in _COMPARISONS else ip)
                     if at is not None]
            if len(fails) <= 1:
                if right_slot is not None:
                    del self.linemap[len(self.lines)]
                    self.lines.pop()
                expr = f"{_parens(left[0])} {symbol} {_parens(rhs[0])}"
                self.lines[-1] = "    " * indent + f"s{slot} = {expr}"
                self.linemap[len(self.lines)] = fails[0] if fails else ip
                self.exprs[slot] = (len(self.lines), expr, fails[0] if fails else None)
                return
        self.emit(indent, f"s{slot} = s{slot} {symbol} {right}", ip)

    def known_int(self, slot) -> bool:
        """Is stack slot ``slot`` known to hold an Int here (in an Int version only)? If so,
        an Int operation takes it (see taken)."""
        if self.spec and self.types.get(slot) == "i":
            self.taken(slot)
            return True
        return False

    def set_type(self, slot, kind, origin=None):
        if kind is None:
            self.types.pop(slot, None)
        else:
            self.types[slot] = kind
        if origin is None:
            self.origin.pop(slot, None)
        else:
            self.origin[slot] = origin

    def spec_after(self, i, op, a, b, depth):
        """What instruction i, emitted as in the general version, leaves known."""
        pops, pushes = POPS[op](a, b), PUSHES[op](a, b)
        low = depth - pops
        if op is Op.CALL:
            # A direct form's slots are Python locals a call leaves alone; a generator's below
            # the callee are written to the frame's stack and read back from it, the same
            # values (only this generator runs the frame's instructions: when anything else
            # has, the generator is not resumed).
            pass
        elif op in (Op.TOOL_CALL, Op.ACTION_PREPARE, Op.ACTION_VERIFY,
                    Op.ACTION_APPROVE, Op.ACTION_COMMIT) or op not in IN_PLACE_OPS:
            low = 0         # the stack may have been spilled and reloaded
        for slot in [k for k in self.types if k >= low]:
            self.set_type(slot, None)
        for slot in [k for k in self.origin if k >= low]:
            self.origin.pop(slot, None)
        if op is Op.CALL and self.int_result_at == i:
            # what direct_i returns (see generate_direct), or an inlined call (inlined_call)
            self.set_type(low, "i")
        elif op is Op.LOAD_CONST and type(a) is int:
            self.set_type(depth, "i")
        elif op in (Op.LOAD_TRUE, Op.LOAD_FALSE) or (op is Op.LOAD_CONST and type(a) is bool):
            self.set_type(depth, "b")
        elif op is Op.DUP and depth - 1 in self.types:
            self.set_type(depth, self.types[depth - 1])
        elif op is Op.PUSH_SCOPE:
            for local in self.bnames.get(i, {}).values():
                self.known.discard(local)
                self.written.add(local)

    def block_sites(self, i, name):
        """(site, Python local) of ``name`` in the blocks open at instruction i, innermost first."""
        return [(site, self.bnames[site][name]) for site in reversed(self.regions[i])
                if name in self.bnames.get(site, ())]

    def block_locals(self, i, name):
        """The Python locals of ``name`` in the blocks open at instruction i, innermost first."""
        return [local for _, local in self.block_sites(i, name)]

    def lookup(self, i, name, scope, dst):
        """Python statements (as lines) that put the binding of ``name`` into ``dst``."""
        q = repr(name)
        if name in self.blk and scope > 0 and not self.blocal:
            return [f"{dst} = load_name(sc, {q})"]
        lines = []
        kw = "if"
        if self.blocal and scope > 0:
            found = self.block_locals(i, name)
            if found and found[0] in self.bound:
                return [f"{dst} = {found[0]}"]
            for blocal in found:
                lines.append(f"{kw} {blocal} is not U: {dst} = {blocal}")
                kw = "elif"
        local = self.cached.get(name)
        if name in self.fixed:
            line = f"{dst} = {local or f'v0[{q}]'}"
            return lines + [f"else: {line}"] if lines else [line]
        if name in self.captured:
            return [f"{dst} = pv[{q}]"]     # (no block holds it: lines is empty)
        if not lines and local is not None and self.assume_bound(name, local):
            return [f"{dst} = {local}"]
        if local is not None:
            lines.append(f"{kw} {local} is not U: {dst} = {local}")
            kw = "elif"
        elif self.own is None or name in self.own:
            lines.append(f"{kw} {q} in v0: {dst} = v0[{q}]")
            kw = "elif"
        elif not lines and name in self.present:
            # One dict operation where the binding is where it was (a function's globals
            # and a closure's captures stay put); a raised KeyError is dear, so only then.
            return [f"try: {dst} = pv[{q}]",
                    f"except KeyError: {dst} = load_name({self.P}.parent, {q})"]
        lines.append(f"{kw} {q} in pv: {dst} = pv[{q}]")
        if name in CORE_NAMES and name in self.grand and name not in self.present:
            # A builtin, found two scopes out when the code was made: read there at once (a
            # KeyError only if it has gone; see present).
            return lines + ["else:", f"    try: {dst} = ppv[{q}]",
                            f"    except KeyError: {dst} = load_name({self.P}.parent, {q})"]
        if name in CORE_NAMES:
            # Most likely a builtin, two scopes out for a top-level function (see prologue).
            lines.append(f"elif {q} in ppv: {dst} = ppv[{q}]")
        lines.append(f"else: {dst} = load_name({self.P}.parent, {q})")
        return lines

    def instr(self, i, op, a, b, depth, scope, indent):
        """Emit one instruction; return the index control continues at, or None."""
        e = self.emit
        ip = i + 1
        s = [f"s{j}" for j in range(depth + 2)]
        top = s[depth - 1] if depth else None
        sec = s[depth - 2] if depth >= 2 else None
        push = s[depth]
        op = Op(op)
        if self.spec:
            span = self.quiet_span
            inside = span is not None and span[0] <= i <= span[1]
            if inside and op not in QUIET_OPS:
                self.noisy = True
            self.quiet = self.quiet_version and inside
            nxt = self.spec_instr(i, op, a, b, depth, scope, indent)
            if nxt is not None:
                return None if nxt is _LEFT else nxt
            if op in (Op.STORE_NAME, Op.STORE_LOCAL):
                return self.spec_store(i, op, a, depth, scope, indent)
            nxt = self.plain_instr(i, op, a, b, depth, scope, indent)
            self.spec_after(i, op, a, b, depth)
            return nxt
        self.quiet = False      # (a general version is never quiet)
        return self.plain_instr(i, op, a, b, depth, scope, indent)

    def spec_store(self, i, op, a, depth, scope, indent):
        """A store in a region's Int version: to a local known to hold an Int, or taken to be
        bound (assume_bound), so bound, its binding is updated as the general store's first
        case does; else the general store."""
        top = f"s{depth - 1}"
        value = self.types.get(depth - 1)
        local = self.cached.get(a)
        simple = (local is not None
                  and not (self.blocal and scope > 0 and self.block_sites(i, a))
                  and (op is Op.STORE_NAME or scope == 0)
                  and (local in self.known or self.assume_bound(a, local)))
        if simple:
            operand = self.operand(depth - 1, indent)
            if operand is None:
                self.emit(indent, self.cached_store(local, a, top), i + 1)
            else:       # the value's own line stores it (the slot is popped; see int_op)
                self.lines[-1] = "    " * indent + self.cached_store(local, a, operand[0])
                self.linemap[len(self.lines)] = operand[1] or i + 1
        else:
            self.plain_instr(i, op, a, None, depth, scope, indent)
        origin = self.origin.get(depth - 1)
        self.forget(a)
        if simple and value == "i":
            self.known.add(local)
        elif value == "i" and self.blocal and scope > 0:
            # A block's own name bound where the block begins (a for loop's variable): its
            # Python local holds the Int now, and what was read from the item says so.
            found = self.block_locals(i, a)
            if found and found[0] in self.bound:
                self.known.add(found[0])
                if origin == ITEM:
                    self.from_item[found[0]] = ITEM
        self.spec_after(i, op, a, None, depth)
        return i + 1

    def plain_instr(self, i, op, a, b, depth, scope, indent):
        e = self.emit
        ip = i + 1
        s = [f"s{j}" for j in range(depth + 2)]
        top = s[depth - 1] if depth else None
        sec = s[depth - 2] if depth >= 2 else None
        push = s[depth]
        # The right operand is a constant pushed just before (the common `x + 1`, `i < 10`):
        # its type test is done here, once.
        kc = self.folded_constant(i)
        if kc is not None and kc[0] is int and op in _INT_FOLD and (op is not Op.MOD or kc[2]):
            sym = _INT_FOLD[op]
            e(indent, f"if {sec}.__class__ is int: {sec} = {sec} {sym} {kc[1]}", ip)
            if op is Op.ADD:
                e(indent, f"else: {sec} = add({sec}, {kc[1]})", ip)
            elif op in (Op.SUB, Op.MUL, Op.MOD):
                e(indent, f"else: {sec} = arith({sym!r}, {sec}, {kc[1]})", ip)
            elif op in (Op.EQ, Op.NE):
                self.slow_compare(i, f"{sec} = {'' if op is Op.EQ else 'not_'}equal({sec}, {kc[1]})",
                                  sec, indent)
            else:
                self.slow_compare(i, f"{sec} = compare({sym!r}, {sec}, {kc[1]})", sec, indent)
            return i + 1
        if kc is not None and kc[0] is str and op is Op.ADD:
            e(indent, f"if {sec}.__class__ is str and len({sec}) <= V.MAX_STRING - {len(kc[2])}: "
                      f"{sec} = {sec} + {kc[1]}", ip)
            e(indent, f"else: {sec} = add({sec}, {kc[1]})", ip)
            return i + 1
        if kc is not None and kc[0] is _NIL:
            # values.equal(x, nil) is `x is None` for any x but a labelled value (none exists
            # while LT is empty).
            test = "is" if op is Op.EQ else "is not"
            if self.quiet:
                e(indent, f"{sec} = {sec} {test} None", ip)
                return i + 1
            e(indent, f"if not LT or {sec}.__class__ not in LT: {sec} = {sec} {test} None", ip)
            self.slow_compare(i, f"{sec} = {'' if op is Op.EQ else 'not_'}equal({sec}, None)",
                              sec, indent)
            return i + 1
        if kc is not None and kc[0] is str and op in (Op.EQ, Op.NE):
            # values.equal(x, a String) is Python's == for a plain String, and for any value
            # while the process has made no labelled one (LT is empty): a Bool, a number, nil,
            # an Array or Map (without labels) or a function never equals a String there.
            sym = _INT_FOLD[op]
            if self.quiet:
                e(indent, f"{sec} = {sec} {sym} {kc[1]}", ip)
                return i + 1
            e(indent, f"if not LT or {sec}.__class__ is str: {sec} = {sec} {sym} {kc[1]}", ip)
            self.slow_compare(i, f"{sec} = {'' if op is Op.EQ else 'not_'}equal({sec}, {kc[1]})",
                              sec, indent)
            return i + 1
        if op is Op.NOP:
            pass
        elif op is Op.LOAD_CONST:
            if self.folded_constant(i + 1) is None:     # else the next one uses the literal
                e(indent, f"{push} = {self.const(a)}", ip)
        elif op is Op.LOAD_NIL:
            if self.folded_constant(i + 1) is None:     # else the comparison uses None
                e(indent, f"{push} = None", ip)
        elif op is Op.LOAD_TRUE:
            e(indent, f"{push} = True", ip)
        elif op is Op.LOAD_FALSE:
            e(indent, f"{push} = False", ip)
        elif op is Op.POP:
            pass
        elif op is Op.DUP:
            e(indent, f"{push} = {top}", ip)
        elif op is Op.LOAD_NAME:
            for line in self.lookup(i, a, scope, push):
                e(indent, line, ip)
            self.slot_names[depth] = a      # a guess at what a CALL here calls (see inline_builtin)
        elif op is Op.STORE_NAME and self.blocal and scope > 0:
            self.store_in_block(i, a, top, indent)
        elif op is Op.STORE_NAME:
            q = repr(a)
            local = self.cached.get(a)
            if local is not None and self.lazy:
                if a in self.fixed:
                    e(indent, f"{local} = {top}", ip)
                elif a in self.captured:
                    e(indent, f"pv[{q}] = {top}", ip)
                else:
                    e(indent, f"if {local} is not U: {local} = {top}", ip)
                    kw, test = self.outer_store("elif", q, top, indent, ip)
                    e(indent, f"{kw} {test}: {local} = {top}", ip)
            elif local is not None:
                if a in self.fixed or self.assume_bound(a, local):
                    e(indent, self.cached_store(local, a, top), ip)
                else:
                    e(indent, f"if {local} is not U: {self.cached_store(local, a, top)}", ip)
                    e(indent, "else:", ip)
                    # Not in the function's scope: update an outer binding, or (possible
                    # only at depth 0) bind it in the function's scope.
                    e(indent + 1, f"store_outer({self.P}, {q}, {top}, fs)", ip)
                    e(indent + 1, f"{local} = v0.get({q}, U)", ip)
            elif a in self.fixed:
                e(indent, f"v0[{q}] = {top}", ip)
            elif (a not in self.blk or scope == 0) and a in self.defined[i]:
                # Bound at depth 0 or further out, and no block of this frame can hold it.
                if self.own is None or a in self.own:
                    e(indent, f"if {q} in v0: v0[{q}] = {top}", ip)
                    e(indent, f"else: store_outer({self.P}, {q}, {top}, sc)", ip)
                else:
                    e(indent, f"store_outer({self.P}, {q}, {top}, sc)", ip)
            else:
                e(indent, f"store_name(sc, {q}, {top})", ip)
        elif op is Op.STORE_LOCAL and self.blocal and scope > 0:
            self.store_block_local(i, None, None, self.regions[i][-1], a, top, indent)
        elif op is Op.STORE_LOCAL:
            local = self.cached.get(a) if scope == 0 else None
            target = "v0" if scope == 0 else "sc.vars"
            if self.lazy:
                e(indent, f"{local} = {top}", ip)     # depth 0: a name of its own, cached
            elif local:
                e(indent, self.cached_store(local, a, top), ip)
            else:
                e(indent, f"{target}[{a!r}] = {top}", ip)
        elif op is Op.CHECK_DECL:
            text, check = b
            cname = self.const(check)
            e(indent, f"if not {cname}({top}): raise decl_error({a!r}, {text!r}, {top})", ip)
        elif op is Op.PUSH_SCOPE:
            if i in self.reused:
                r = f"_r{i}"
                e(indent, f"if {r} is None or {r}.parent is not sc: {r} = Scope(sc)", ip)
                e(indent, f"elif {r}.vars: {r}.vars.clear()", ip)
                e(indent, f"sc = {r}", ip)
            elif not self.blocal:
                e(indent, "sc = Scope(sc)", ip)
            else:
                names = self.bnames.get(i, {})
                # A block whose first instruction binds one of its names (a for loop's
                # variable) binds it before anything can read it: no reset for that one, and
                # when it is the block's only name, no emptying of its cached scope either
                # (the store's update leaves that scope holding just the new binding).
                first = self.first_bound(i, names)
                for name, local in names.items():
                    self.bound.discard(local)
                    if name != first:
                        e(indent, f"{local} = U", ip)       # a fresh block: nothing bound yet
                # Nobody but this frame can tell one block scope from another (see blocal), so
                # the scopes cached for this block's last entry serve again, its own emptied
                # (a block that binds nothing leaves them as they are); any others are stale.
                if names and set(names) != {first} and not self.direct:
                    key = self.chain_keys.setdefault(self.regions[i] + (i,), len(self.chain_keys) + 1)
                    self.keyed(indent, key, "bsc.vars.clear()", ip)
        elif op is Op.POP_SCOPE:
            if not self.blocal and a:
                e(indent, "sc = sc.parent" + ".parent" * (a - 1), ip)
        elif op is Op.ADD:
            e(indent, f"if {sec}.__class__ is int is {top}.__class__: {sec} = {sec} + {top}", ip)
            # Strings too (values.add's first case, with its size limit).
            e(indent, f"elif {sec}.__class__ is str is {top}.__class__ and "
                      f"len({sec}) + len({top}) <= V.MAX_STRING: {sec} = {sec} + {top}", ip)
            e(indent, f"else: {sec} = add({sec}, {top})", ip)
        elif op in (Op.SUB, Op.MUL):
            sym = "-" if op is Op.SUB else "*"
            e(indent, f"if {sec}.__class__ is int is {top}.__class__: "
                      f"{sec} = {sec} {sym} {top}", ip)
            e(indent, f"else: {sec} = arith({sym!r}, {sec}, {top})", ip)
        elif op is Op.MOD:
            e(indent, f"if {sec}.__class__ is int is {top}.__class__ and {top}: "
                      f"{sec} = {sec} % {top}", ip)
            e(indent, f"else: {sec} = arith('%', {sec}, {top})", ip)
        elif op is Op.DIV:
            e(indent, f"{sec} = arith('/', {sec}, {top})", ip)
        elif op in (Op.LT, Op.LE, Op.GT, Op.GE):
            sym = {Op.LT: "<", Op.LE: "<=", Op.GT: ">", Op.GE: ">="}[op]
            e(indent, f"if {sec}.__class__ is int is {top}.__class__: "
                      f"{sec} = {sec} {sym} {top}", ip)
            self.slow_compare(i, f"{sec} = compare({sym!r}, {sec}, {top})", sec, indent)
        elif op in (Op.EQ, Op.NE):
            neg = "" if op is Op.EQ else "not_"
            cmp = "==" if op is Op.EQ else "!="
            e(indent, f"if {sec}.__class__ is int is {top}.__class__ "
                      f"or {sec}.__class__ is str is {top}.__class__: "
                      f"{sec} = {sec} {cmp} {top}", ip)
            self.slow_compare(i, f"{sec} = {neg}equal({sec}, {top})", sec, indent)
        elif op is Op.NEG:
            e(indent, f"{top} = negate({top})", ip)
        elif op is Op.NOT and self.quiet:
            e(indent, f"{top} = not {top}", ip)     # (container_negation, while not live)
        elif op is Op.NOT:
            e(indent, f"if {top}.__class__ in LT: {top} = negation({top})", ip)
            e(indent, f"elif {top}.__class__ in CT: {top} = container_negation({top})", ip)
            e(indent, f"else: {top} = not {top}", ip)
        elif op is Op.JUMP:
            self.goto(a, indent, ip)
            return None
        elif op in (Op.POP_JUMP_IF_FALSE, Op.POP_JUMP_IF_TRUE):
            if not self.compared(i):
                self.labelled_branch(i, top, depth, indent)
            e(indent, f"if {'not ' if op is Op.POP_JUMP_IF_FALSE else ''}{top}:", ip)
            self.goto(a, indent + 1, ip)
        elif op in (Op.JUMP_IF_FALSE_OR_POP, Op.JUMP_IF_TRUE_OR_POP):
            if not self.compared(i):
                self.labelled_branch(i, top, depth, indent)
            e(indent, f"if {'not ' if op is Op.JUMP_IF_FALSE_OR_POP else ''}{top}:", ip)
            self.goto(a, indent + 1, ip)
        elif op is Op.BUILD_ARRAY:
            if self.max_array is not None and a > self.max_array:
                e(indent, f"raise array_limit({a}, {self.max_array})", ip)
            elif a:
                items = s[depth - a:depth]
                e(indent, f"{items[0]} = [{', '.join(items)}]", ip)
            else:
                e(indent, f"{push} = []", ip)
        elif op is Op.BUILD_MAP:
            if a:
                flat = s[depth - 2 * a:depth]
                e(indent, f"{flat[0]} = build_map([{', '.join(flat)}])", ip)
            else:
                e(indent, f"{push} = {{}}", ip)
        elif op is Op.INDEX:
            # (In an Int version, an index known to be an Int is not tested again. While no
            # Array's length is the data's: then values.index_get labels an element by where
            # it sits.)
            known = self.known_int(depth - 1)
            it = "" if known else f"{top}.__class__ is int"
            key = "" if known else f"({top}.__class__ is str or {top}.__class__ is int) and "
            # (An index out of bounds is Python's IndexError, as values.index_get's test;
            # then index_get raises tier 1's error. A try costs nothing until it catches.)
            e(indent, f"if {sec}.__class__ is list{_also(it, self.no_shapes())}:", ip)
            e(indent + 1, f"try: {sec} = {sec}[{top}]", ip)
            e(indent + 1, f"except IndexError: {sec} = index_get({sec}, {top})", ip)
            # A Map read by a plain key it holds (values.map_get's first case).
            e(indent, f"elif {sec}.__class__ is dict and {key}{top} in {sec}: {sec} = {sec}[{top}]",
              ip)
            e(indent, f"else: {sec} = index_get({sec}, {top})", ip)
        elif op is Op.STORE_INDEX:
            obj, idx, val = s[depth - 3], s[depth - 2], s[depth - 1]
            known = self.known_int(depth - 2)
            it = "" if known else f"{idx}.__class__ is int"
            key = "" if known else f"({idx}.__class__ is str or {idx}.__class__ is int) and "
            # (While no Array's shape is the data's: values.index_set labels what lands in a
            # slot the data chose.)
            e(indent, f"if {obj}.__class__ is list{_also(it, self.no_shapes())}:", ip)
            e(indent + 1, f"try: {obj}[{idx}] = {val}", ip)       # (see INDEX)
            e(indent + 1, f"except IndexError: index_set({obj}, {idx}, {val})", ip)
            # A Map written by a plain key, within --max-array (values.map_set's first case).
            e(indent, f"elif {obj}.__class__ is dict and {key}"
                      f"len({obj}) < V.MAX_ARRAY: {obj}[{idx}] = {val}", ip)
            e(indent, f"else: index_set({obj}, {idx}, {val})", ip)
            e(indent, f"{obj} = {val}", ip)
        elif op is Op.SLICE:
            obj, lo, hi = s[depth - 3], s[depth - 2], s[depth - 1]
            e(indent, f"{obj} = slice_get({obj}, {lo}, {hi}, {a!r})", ip)
        elif op is Op.CONTAINS:
            e(indent, f"if {sec}.__class__ is str is {top}.__class__: {sec} = {sec} in {top}", ip)
            e(indent, f"else: {sec} = contains({sec}, {top})", ip)
        elif op is Op.FORMAT_VALUE:
            e(indent, f"if {top}.__class__ is not str: {top} = str_form({top})", ip)
        elif op is Op.BUILD_STRING:
            if a:
                items = s[depth - a:depth]
                e(indent, f"{items[0]} = join_strings([{', '.join(items)}])", ip)
            else:
                e(indent, f"{push} = ''", ip)
        elif op is Op.DUP2:
            e(indent, f"{s[depth]} = {s[depth - 2]}", ip)
            e(indent, f"{s[depth + 1]} = {top}", ip)
        elif op is Op.GET_MEMBER:
            if i in self.fused:
                # A String's, Array's or Map's method that calls no Sense code, called by the
                # CALL of this site (call()): the receiver stays in the slot meanwhile.
                if "MT" not in self.ns:
                    from sensevm.runtime.methods import PURE_BY_TYPE
                    self.ns["MT"] = PURE_BY_TYPE
                guess = self.guessed_method(i)
                if guess is not None:
                    # One test for the receiver type the name most likely means: its method
                    # is then known, and so is that the call's argument count fits it.
                    e(indent, f"if {top}.__class__ is {guess[0].__name__}: _m{i} = {guess[1]}", ip)
                    e(indent, "else:", ip)
                    indent += 1
                e(indent, f"_m{i} = MT.get({top}.__class__)", ip)
                e(indent, f"if _m{i} is not None: _m{i} = _m{i}.get({a!r})", ip)
                e(indent, f"if _m{i} is None:", ip)
                indent += 1
            # A member read may capture the frame's scope and position (a bound lifecycle
            # method does, for its policy check and audit line).
            e(indent, f"f.ip = {ip}", ip)
            self.publish(indent, ip)
            e(indent, "f.scope = sc", ip)
            e(indent, f"{top} = vm.member({top}, {a!r})", ip)
        elif op is Op.GET_ITER:
            e(indent, f"{top} = get_iter({top})", ip)
        elif op is Op.FOR_ITER:
            # An Array whose length is the data's (provenance.SHAPES): tier 1 labels each
            # element by where it sits and the loop's end by how many passes there were.
            if not self.quiet:
                e(indent, f"if {top}.origins or {_reshaped(top)}:", ip)
                self.to_tier1(i, depth, indent + 1)
            if self.thread(a) in self.dispatch:
                # The exit is a jump (no block inlined into the handler): the item is read
                # without asking the length first. (i is never negative: it counts up from 0,
                # and a saved agent's is checked to be a natural number when it is loaded.)
                e(indent, f"try: {push} = {top}.items[{top}.i]", ip)
                e(indent, "except IndexError:", ip)
                self.goto(a, indent + 1, ip)
                # A labelled item decides that the loop goes on: tier 1 takes this FOR_ITER
                # again and opens the pc label, as for a labelled condition.
                self.labelled_branch(i, push, depth, indent, containers=False)
                e(indent, f"{top}.i += 1", ip)
            else:
                # (The exit's block is made here: outside the handler, found by a sentinel
                # no item can be.)
                e(indent, f"try: {push} = {top}.items[{top}.i]", ip)
                e(indent, f"except IndexError: {push} = U", ip)
                e(indent, f"if {push} is not U:", ip)
                self.labelled_branch(i, push, depth, indent + 1, containers=False)
                e(indent + 1, f"{top}.i += 1", ip)
                e(indent, "else:", ip)
                self.goto(a, indent + 1, ip)
        elif op is Op.MAKE_FUNCTION:
            e(indent, f"_c = f.prepared.unit[{a}]", ip)
            e(indent, f"{push} = Closure(_c, sc, _c.code.name)", ip)
        elif op is Op.CALL:
            self.call(i, a, depth, indent)
        elif op is Op.TOOL_CALL and not self.counting:     # (a step budget counts it: generic)
            self.tool_call(i, a, depth, indent)
        elif op is Op.ACTION_PREPARE and not self.counting:
            self.action_prepare(i, a, depth, indent)
        elif op in (Op.ACTION_VERIFY, Op.ACTION_APPROVE, Op.ACTION_COMMIT) and not self.counting:
            self.lifecycle_step(i, op, depth, indent)       # (each is a step: counted by H)
        elif op is Op.RETURN:
            self.ret(i, top, indent)
            return None
        else:
            self.generic(i, op, a, b, depth, indent)
        if op in TERMINATORS:
            return None
        return i + 1

    def set_scope(self, i, indent):
        """Give the frame its scope as tier 1 would have it at instruction i. Block scopes are
        built once and reused (as tier 1's would be) until a block variable changes or a block
        is entered: ``bk`` says which blocks ``bsc`` was built for, False for none."""
        self.emit(indent, f"f.scope = {self.scope_at(i, indent)}", i + 1)

    def store_in_block(self, i, name, top, indent):
        """STORE_NAME inside blocks of Python locals: the nearest binding along blocks, the
        function scope and outwards is updated; else the name is bound in the innermost block."""
        e = self.emit
        ip = i + 1
        q = repr(name)
        kw = "if"
        for site, blocal in self.block_sites(i, name):
            self.store_block_local(i, kw, f"{blocal} is not U", site, name, top, indent)
            kw = "elif"
        local = self.cached.get(name)
        if local is not None:
            e(indent, f"{kw} {local} is not U: {self.cached_store(local, name, top)}", ip)
            kw = "elif"
        elif self.own is None or name in self.own:
            e(indent, f"{kw} {q} in v0: v0[{q}] = {top}", ip)
            kw = "elif"
        site = self.regions[i][-1]
        if name in self.bnames.get(site, ()):
            kw, test = self.outer_store(kw, q, top, indent, ip)
            self.store_block_local(i, kw, test, site, name, top, indent)
        elif self.lazy and local is not None:
            kw, test = self.outer_store(kw, q, top, indent, ip)
            e(indent, f"{kw} {test}: {local} = {top}", ip)
        else:
            # Known to be bound in the function scope or further out (the analysis).
            line = f"store_outer({self.P}, {q}, {top}, fs)"
            e(indent, f"else: {line}" if kw == "elif" else line, ip)

    def folded_constant(self, i):
        """(type, literal, value) when instruction i's right operand is the constant that the
        instruction just before pushed (an Int or String with a literal, or nil compared),
        else None."""
        if not (0 < i < len(self.instrs)) or self.preds[i] != 1 or i in self.dispatch:
            return None
        prev = self.instrs[i - 1]
        if not self.state[i] or not self.state[i][0]:
            return None
        if instrs_op(prev) == Op.LOAD_NIL and Op(self.instrs[i][0]) in (Op.EQ, Op.NE):
            return (_NIL, "None", None)
        if instrs_op(prev) != Op.LOAD_CONST:
            return None
        value = prev[1]
        if type(value) not in (int, str) or _literal(value) is None:
            return None
        op = Op(self.instrs[i][0])
        if type(value) is int and op in _INT_FOLD and (op is not Op.MOD or value):
            return (int, _literal(value), value)
        if type(value) is str and op in (Op.EQ, Op.NE, Op.ADD):
            return (str, _literal(value), value)
        return None

    def compared(self, i):
        """Is the branch at i fed directly by a comparison (which checked for a labelled result
        on its own slow path: its fast paths only ever give a Bool)?"""
        return (i > 0 and self.preds[i] == 1 and i not in self.dispatch
                and Op(self.instrs[i - 1][0]) in _COMPARISONS)

    def slow_compare(self, i, line, result, indent):
        """The slow path of the comparison at i; when a branch takes its result next, the check
        for a labelled result is made here, on this path only."""
        e = self.emit
        e(indent, "else:", i + 1)
        e(indent + 1, line, i + 1)
        j = i + 1
        if self.compared(j) and Op(self.instrs[j][0]) in _BRANCHES:
            self.labelled_branch(j, result, self.state[j][0], indent + 1)

    def no_shapes(self) -> str:
        """The test that no Array's shape is the data's (provenance.SHAPES), or none in a quiet
        version (see region)."""
        return "" if self.quiet else "not SHAPES"

    def labelled_branch(self, i, top, depth, indent, containers=True):
        """A branch on a labelled value (or on an Array or Map whose items are influenced:
        whether it is empty is theirs) goes back to tier 1, which keeps pc labels: the frame
        is spilled at the branch itself, and the generator gives the frame up. (A loop's item
        is no condition: only a labelled one opens a label, vm.py op_FOR_ITER.) None in a quiet
        version, which no labelled value, nor an Array or Map of the data's, reaches."""
        if self.quiet:
            return
        e = self.emit
        if containers:
            # (LT fills as the process goes live and grows as Ints are labelled: never a copy.)
            e(indent, f"if {top} is not True and {top} is not False and ({top}.__class__ in LT "
                      f"or {top}.__class__ in CT and decides({top})):", i + 1)
        else:
            # (Asked of every item: while the process has made no labelled value LT is empty,
            # and its length, not a look-up of the item's class, says no.)
            e(indent, f"if LT and {top}.__class__ in LT:", i + 1)
        self.to_tier1(i, depth, indent + 1)

    def to_tier1(self, i, depth, indent):
        """Give the frame to tier 1 at instruction ``i`` (not yet run), with the ``depth``
        slots below it on its stack."""
        e = self.emit
        if self.direct:
            self.deoptimize(i, depth, indent)
            return
        self.spill(i, [f"s{j}" for j in range(depth)], indent)
        e(indent, f"f.ip = {i}", i + 1)
        e(indent, "f.gen = None", i + 1)
        e(indent, "yield", i + 1)
        e(indent, "return", i + 1)

    def resume(self, indent, ip) -> None:
        """A yield the generator resumes after (the frames it left have returned): the depth
        and bound of its direct calls are found again (the frame may run at another depth
        now: an agent resumed from elsewhere)."""
        self.emit(indent, "yield; _dd, _M = DB(vm)" if self.hoisted else "yield", ip)

    def spill(self, i, items, indent, scope=True):
        """Write the frame's stack (``items``) and ip back as tier 1 has them at instruction
        i, and its scope unless the code has just set it (``scope`` False)."""
        ip = i + 1
        self.sync_items(i, len(items), indent)
        self.materialize_methods(i, len(items), indent)
        self.emit(indent, f"f.stack = [{', '.join(items)}]", ip)
        self.emit(indent, f"f.ip = {ip}", ip)
        if scope:
            self.set_scope(i, indent)

    def reload(self, i, count, indent):
        if count:
            slots = ", ".join(f"s{j}" for j in range(count))
            self.emit(indent, f"{slots}, = f.stack", i + 1)

    def cached_store(self, local: str, name: str, value: str) -> str:
        """The statement storing ``value`` in cached name ``name`` (its Python local ``local``):
        written through to the function's scope, or only to the local (a direct form's lazy
        scope; a generator's deferred store, which marks the scope out of date: publish)."""
        if self.lazy:
            return f"{local} = {value}"
        if self.defer:
            return f"{local} = {value}" if self.quiet else f"{local} = {value}; dw = 1"
        return f"{local} = v0[{name!r}] = {value}"

    def publish(self, indent, ip) -> None:
        """Where anything but this generator may read the frame's scope (a spill for a tier-1
        handler or a call, a yield, a member read, an error leaving), write the cached names'
        values to it, if any changed since it was last written (``dw``). Between such points a
        loop's stores touch only Python locals: nothing else can see the scope (no code
        declared here captures it) until the frame is handed out, and every hand-out passes
        here first (scope_at, the frame's return to tier 1's RETURN, the error handler)."""
        if not self.defer:
            return
        if len(self.stored) > INLINE_PUBLISH:
            # One line at each such point: they are many (each call and spill), and the
            # write-back (the function publisher makes) is taken rarely once dw is clear.
            values = ", ".join(self.cached[name] for name in self.stored)
            self.emit(indent, f"if dw: dw = PUBLISH(v0, {values})", ip)
            return
        e = self.emit
        e(indent, "if dw:", ip)
        for line in self.write_back("U"):
            e(indent + 1, line, ip)
        e(indent + 1, "dw = 0", ip)

    def write_back(self, unset: str) -> list:
        """The statements writing the cached names' locals to the scope's vars (v0); one that
        may be unbound (not fixed) is written only when its local is not UNSET (``unset``:
        how the code names it)."""
        lines = []
        for name in self.stored:
            local = self.cached[name]
            if name in self.fixed:
                lines.append(f"v0[{name!r}] = {local}")
            else:
                lines.append(f"if {local} is not {unset}: v0[{name!r}] = {local}")
        return lines

    def publisher(self) -> list:
        """The module-level function PUBLISH that publish calls when the cached names are more
        than INLINE_PUBLISH; it returns dw's new value. It follows t2, so t2's line numbers
        (LINEMAP) are unchanged."""
        params = ", ".join(self.cached[name] for name in self.stored)
        body = ["    " + line for line in self.write_back("UNSET")]
        return [f"def PUBLISH(v0, {params}):", *body, "    return 0"]

    def scope_at(self, i, indent) -> str:
        """The expression for the scope tier 1 would have at instruction i (see set_scope)."""
        if self.direct:
            return self.direct_scope(i)
        self.publish(indent, i + 1)
        if not self.blocal or not self.regions[i]:
            return "sc"
        key = self.chain_keys.setdefault(self.regions[i], len(self.chain_keys) + 1)
        self.built_keys.add(key)
        self.emit(indent, f"if bk != {key}: bsc = chain(fs, {self.levels(i)}); bk = {key}",
                  i + 1)
        return "bsc"

    def direct_scope(self, i) -> str:
        """The expression for the scope tier 1 would have at instruction i, in a direct form:
        only a deoptimization asks, once, in the call that makes its frame, so the scope is
        built there (a lazy form's function scope from its locals, params first, as tier 1
        binds them) and nothing is kept for reuse."""
        if self.lazy:
            names = [p for p in self.params] + [n for n in self.cached if n not in self.params]
            values = "".join(self.cached[n] + ", " for n in names)
            fs = sc = f"function_scope({self.P}, {tuple(names)!r}, ({values}))"
        else:
            fs, sc = "fs", "sc"
        if not self.blocal or not self.regions[i]:
            return sc
        return f"chain({fs}, {self.levels(i)})"

    def levels(self, i) -> str:
        """The block scopes open at instruction i, outermost first, as chain() takes them."""
        levels = []
        for site in self.regions[i]:
            names = self.bnames.get(site, {})
            levels.append(f"({tuple(names)!r}, ({''.join(v + ', ' for v in names.values())}))")
        return ", ".join(levels)

    def deoptimize(self, i, depth, indent, stack=None):
        """Become a frame stopped at instruction i (its stack as it is there: ``stack``, as
        emit_parts takes it, when slots were given expressions) and unwind."""
        if stack is None:
            stack = [(f"s{j}", None) for j in range(depth)]
        self.sync_items(i, len(stack), indent)
        self.emit_parts(indent, [(f"raise deopt_at(vm, PREP, {self.scope_at(i, indent)}, cl, [",
                                  None)] + _listed(stack) + [(f"], {i}, D)", None)], i + 1)

    def deoptimize_after(self, i, base, indent):
        """Become a frame stopped just after instruction i, a call whose result is in slot
        ``base`` (its stack as it is there), and unwind: tier 1 goes on with the result."""
        stack = ", ".join(f"s{j}" for j in range(base + 1))
        self.sync_items(i, base + 1, indent)
        self.emit(indent, f"raise deopt_at(vm, PREP, {self.scope_at(i, indent)}, cl, [{stack}], "
                          f"{i + 1}, D)", i + 1)

    def inline_builtin(self, i, n, base, indent) -> str:
        """For a call of what was loaded as `len`, `push` or `str`: that builtin's common case
        done in place when the callee *is* that builtin (checked by identity, so a program that
        rebinds the name loses nothing but speed); returns the keyword for the next test."""
        name = self.slot_names.get(base)
        c = f"s{base}"
        a = [f"s{j}" for j in range(base + 1, base + 1 + n)]
        ip = i + 1
        if name == "len" and n == 1:
            # (An Array only while no labels exist: then b_len labels its length with its
            # items' origins.)
            self.emit(indent, f"if {c} is B_LEN and ({a[0]}.__class__ is str "
                              f"or {a[0]}.__class__ is list and not PV.live): "
                              f"{c} = len({a[0]})", ip)
        elif name == "push" and n == 2:
            self.emit(indent, f"if {c} is B_PUSH and {a[0]}.__class__ is list and "
                              f"len({a[0]}) < vm.max_array and not SHAPES:", ip)
            self.emit(indent + 1, f"{a[0]}.append({a[1]})", ip)
            self.emit(indent + 1, f"{c} = {a[0]}", ip)
        elif name == "str" and n == 1:
            self.emit(indent, f"if {c} is B_STR and {a[0]}.__class__ is int and "
                              f"{a[0]}.bit_length() <= {self.int_bits}: {c} = str({a[0]})", ip)
        else:
            return "if"
        return "elif"

    def guessed_callee(self, base):
        """The closure a CALL whose callee is in slot ``base`` most likely calls: what the name
        last loaded into the slot (a guess: see slot_names) is bound to in callee_scope's chain
        now, or, for an Array of closures of one code (``handlers[k](x)``), its first. A guess:
        the code made from it tests it."""
        name = self.slot_names.get(base)
        scope = self.callee_scope
        while scope is not None and name is not None:
            bindings = scope.vars
            if name in bindings:
                value = bindings[name]
                if value.__class__ is list and value and value[0].__class__ is Closure:
                    code = value[0].code
                    if all(v.__class__ is Closure and v.code is code for v in value[:16]):
                        return value[0]
                return value if value.__class__ is Closure else None
            scope = scope.parent
        return None

    def inlined_call(self, i, n, base, indent) -> bool:
        """CALL n done in place when its callee is the closure guessed (see inlining.py): the
        plan's guards, with the depth the call would have within the bound, and its lines,
        under an ``if``; True when emitted, and the caller emits the call itself under the
        ``else:`` that follows. In an Int version, where the code may (PreparedCode.typed)
        and what it computes is an Int, the call's result is taken to be an Int
        (int_result_at): the caller then hands the frame on when the call it made returned
        anything else (typed_result)."""
        hint = self.guessed_callee(base)
        # (Not a call of DIRECT_ARITIES arguments or more: a generator knows its calls' depth
        # and bound only where it can call a direct form, see hoisted.)
        if hint is None or self.counting or n >= DIRECT_ARITIES:
            return False
        args = [inlining.Value(f"s{j}", "i" if self.spec and self.types.get(j) == "i" else None)
                for j in range(base + 1, base + 1 + n)]
        plan = inlining.plan(hint, f"s{base}", args, self.const, self.inline_temp)
        if plan is None:
            return False
        ip = i + 1
        # The deepest body inlined, levels - 1 below the callee (at the caller's D + 1 in a
        # direct form, at _dd in a generator), must be within the bound: depth + k <= bound,
        # written as one comparison with no addition where there need be none.
        depth, bound = ("D", "M") if self.direct else ("_dd", "_M")
        k = plan.levels if self.direct else plan.levels - 1
        within = (f"{depth} <= {bound}" if k == 0 else f"{depth} < {bound}" if k == 1 else
                  f"{depth} + {k - 1} < {bound}")
        self.emit(indent, "if " + " and ".join([plan.guards[0], within] + plan.guards[1:])
                  + ":", ip)
        result = plan.result.expr
        stores = plan.stores
        for k, (target, expr, levels) in enumerate(plan.lines):
            if k == len(plan.lines) - 1 and target == result:
                # (what the last line computes goes straight to the slot, and is stored
                # from there)
                stores = [(d, name, f"s{base}" if value == target else value)
                          for d, name, value in stores]
                target = result = f"s{base}"
            self.emit(indent + 1, f"try: {target} = {expr}", ip)
            self.emit(indent + 1, "except MemoryError as exc: "
                                  f"raise inline_error(exc, {self.const(levels)}) from None", ip)
        for scope, name, expr in stores:
            self.emit(indent + 1, f"{scope}[{name!r}] = {expr}", ip)
        if result != f"s{base}":
            self.emit(indent + 1, f"s{base} = {result}", ip)
        self.emit(indent, "else:", ip)
        if self.spec and plan.result.kind == "i" and self.prepared.typed:
            self.int_result_at = i
        return True

    def typed_result(self, i, base, indent) -> None:
        """After the call an inlined call's guards sent on, when its result was taken to be
        an Int (see inlined_call): anything else gives the frame to tier 1 just after the
        call, and the code is made again without taking it so (untyped): a speculation that
        failed once would likely fail again."""
        self.emit(indent, f"if s{base}.__class__ is not int:", i + 1)
        self.emit(indent + 1, "untyped(PREP)", i + 1)
        if self.direct:
            self.deoptimize_after(i, base, indent + 1)
        else:
            self.to_tier1(i + 1, base + 1, indent + 1)

    def inline_temp(self) -> str:
        self.ntemps += 1
        return f"_c{self.ntemps}"

    def direct_call(self, i, n, depth, indent):
        """CALL n in a direct form (see Compiled)."""
        ip = i + 1
        e = self.emit
        base = depth - n - 1
        callee = f"s{base}"
        self.int_result_at = None
        kw = self.inline_builtin(i, n, base, indent)
        inlined = (kw == "if" and not self.calls_itself(n, base)
                   and self.inlined_call(i, n, base, indent))
        if inlined:
            indent += 1
        # The arguments the lines just before only computed from Int locals and constants go
        # into the call itself, not through their slots (see forwarded_args); not where the
        # inlined call's guards read them.
        given = self.forwarded_args(base, depth, indent) if kw == "if" and not inlined else {}
        args = [given.get(j, (f"s{j}", None)) for j in range(base + 1, depth)]
        whole = [(f"s{j}", None) for j in range(base + 1)] + args
        if kw == "elif":
            e(indent, "else:", ip)
            indent += 1
        def called(fn, indent, args=args, whole=whole):
            e(indent, "try:", ip)
            given = ", pv" if fn == "direct_i" else ""      # (its own scope's: see above)
            self.emit_parts(indent + 1, [(f"{callee} = {fn}(vm, {callee}{given}, D + 1, M", None)]
                            + _listed(args, first=", ") + [(")", None)], ip)
            e(indent, "except Deoptimize as _d:", ip)
            below = ", ".join(f"s{j}" for j in range(base))
            self.sync_items(i, len(whole), indent + 1)
            self.emit_parts(indent + 1, [(f"raise deopt_in_call(_d, vm, PREP, "
                                          f"{self.scope_at(i, indent + 1)}, cl, [", None)]
                            + _listed(whole) + [(f"], {i}, [{below}], D)", None)], ip)
        if self.calls_itself(n, base):
            # The function calling itself (the closure it was called as, found again by its
            # name): its code is PREP, whose direct form for n arguments is this one, so the
            # type test and the look-up in PREP.dx would find ``direct``; it is called by name.
            # With Int arguments in an Int version, its Int entry (see generate_direct).
            ints = (self.spec and kw != "elif"
                    and all(self.types.get(j) == "i" for j in range(base + 1, depth)))
            self.int_sites += ints
            e(indent, f"if {callee} is cl:", ip)
            # Its leading early return, taken here when its test holds and the call would be
            # within the bound (D + 1 <= M): see inlining.leading_return. The arguments the
            # call would compute are computed first, in order, each into a temporary (a line
            # of its own: its operation's position), which the test and the call then read.
            leading = None
            if ints and self.int_calls and not self.counting:
                names = [a if a.isidentifier() else self.inline_temp() for a, _ in args]
                leading = inlining.leading_return(self.prepared, names)
            if leading is not None:
                test, result = leading
                for name, (expr, fails) in zip(names, args):
                    if name != expr:
                        self.emit_parts(indent + 1, [(f"{name} = (", None), (expr, fails),
                                                     (")", None)], ip)
                self.emit(indent + 1, f"if {test} and D < M:", ip)
                self.emit(indent + 2, f"{callee} = {result}", ip)
                e(indent + 1, "else:", ip)
                # (the call, and only it, reads the temporaries; the code for another callee
                # below computes its arguments itself)
                read = [(name, None) for name in names]
                called("direct_i", indent + 2, read, whole[:base + 1] + read)
            else:
                called("direct_i" if ints and self.int_calls else "direct", indent + 1)
            e(indent, "else:", ip)
            indent += 1
            if ints and self.int_results:
                self.int_result_at = i
        # (The class read again in the second test, not kept in a local: a direct form's
        # frame is made at every call, and each local it has costs that.)
        e(indent, f"if {callee}.__class__ is Closure and (_l := {callee}.code.dx[{n}]) is not None:"
                  if n < DIRECT_ARITIES else "if False:", ip)
        called("_l", indent + 1)
        e(indent, f"elif {callee}.__class__ is Builtin and {callee}.pure and "
                  f"({callee}.arity is None or {callee}.arity == {n}):", ip)
        self.emit_parts(indent + 1, [(f"{callee} = {callee}.fn(vm, [", None)] + _listed(args)
                        + [("])", None)], ip)
        e(indent, "else:", ip)
        self.deoptimize(i, depth, indent + 1, whole)
        if inlined and self.int_result_at == i:
            self.typed_result(i, base, indent)
        elif self.int_result_at == i:
            # Taken to be an Int below (see spec_after): so is what else was called here, or
            # tier 1 goes on with it.
            e(indent, f"if {callee}.__class__ is not int:", ip)
            self.deoptimize_after(i, base, indent + 1)

    def forwarded_args(self, base, depth, indent) -> dict:
        """The arguments of a CALL whose callee is in slot ``base`` that the lines just before
        it only computed into their slots from Int locals and constants (see operand), by
        slot: (expression, ip of its one operation that can fail, or None). Those lines are
        taken back; the call reads the expressions in their place, so no slot is stored and
        read again (in a direct form, where each call pays for every slot). Their operands
        are Python locals that nothing changes before the call, so the value is the same
        wherever the expression is read (a deoptimization reads it again for the frame's
        stack); the last arguments only, as far back as the lines run unbroken."""
        given: dict = {}
        for back, slot in enumerate(range(depth - 1, base, -1)):
            got = self.operand(slot, indent, back)
            if got is None or not _SLOT_FREE.fullmatch(got[0]):
                break
            given[slot] = got
        for _ in given:
            del self.linemap[len(self.lines)]
            self.lines.pop()
        return given

    def emit_parts(self, indent, parts, ip) -> None:
        """One statement made of ``parts``, (text, None) or (operand, the ip of its operation
        that can fail): each such operand starts a line of its own (inside the statement's
        brackets), mapped to its ip, so a line still holds at most one operation that can
        fail. (Python 3.11 places an error at the line its instruction starts on: a call's
        at the call's first line, an operand's at the operand's.)"""
        line, at = "    " * indent, ip
        for text, fails in parts:
            if fails is not None:
                self.lines.append(line.rstrip())
                self.linemap[len(self.lines)] = at
                line, at = "    " * (indent + 2), fails
            line += text
        self.lines.append(line)
        self.linemap[len(self.lines)] = at

    def calls_itself(self, n, base) -> bool:
        """Is a CALL of n arguments in this direct form, of what was loaded as the function's
        own name, likely a call of the closure it runs as (``cl``), whose direct form for n
        arguments is the one being made? A function's only: a tool body's, commit body's or
        rollback block's ``cl`` is no Closure. (Other calls are not given the test: it would
        cost them, and the code to compile.)"""
        return (self.kind is CodeKind.FUNCTION and n == len(self.params) and n < DIRECT_ARITIES
                and self.slot_names.get(base) == self.prepared.code.name)

    def call(self, i, n, depth, indent):
        """CALL n: a function with a direct form is called right here (vm.call_t2's first half,
        inlined), a plain builtin too; anything else goes through vm.call_t2."""
        if self.direct:
            self.direct_call(i, n, depth, indent)
            return
        ip = i + 1
        e = self.emit
        base = depth - n - 1
        site = self.fused_calls.get(i)
        if site is not None:
            # The method of this site's GET_MEMBER, on its receiver: (function, argument count
            # or None, name), checked as vm._call checks a builtin's count.
            callee, args = f"s{base}", ", ".join(f"s{j}" for j in range(base + 1, depth))
            guess = self.guessed_method(site)
            kw = "if"
            if guess is not None:
                e(indent, f"if _m{site} is {guess[1]}:", ip)
                if self.counting:
                    e(indent + 1, f"f.ip = {ip}", ip)
                    self.tick(indent + 1, ip)
                self.guessed_call(site, guess, callee, args, n, indent + 1, ip)
                kw = "elif"
            e(indent, f"{kw} _m{site} is not None:", ip)
            if self.counting:
                e(indent + 1, f"f.ip = {ip}", ip)
                self.tick(indent + 1, ip)
            e(indent + 1, f"if _m{site}[1] is not None and _m{site}[1] != {n}: "
                          f"raise arity_error(_m{site}[2], _m{site}[1], [{args}])", ip)
            e(indent + 1, f"{callee} = _m{site}[0]({callee}, vm, [{args}])", ip)
            e(indent, "else:", ip)
            indent += 1
        callee = f"s{base}"
        args = ", ".join(f"s{j}" for j in range(base + 1, depth))
        below = ", ".join(f"s{j}" for j in range(base))
        if self.counting:
            e(indent, f"f.ip = {ip}", ip)
            self.tick(indent, ip)       # a call: a step, before anything is called
        self.int_result_at = None
        guessed = self.inline_builtin(i, n, base, indent) == "elif"
        if guessed:
            e(indent, "else:", ip)
            indent += 1
        elif site is None and self.inlined_call(i, n, base, indent):
            indent += 1
        e(indent, f"_ty = {callee}.__class__", ip)
        # With a step budget no function has a direct form; one of n parameters is found by n.
        # (Nor is one looked for where the name was a builtin's: a function there means the
        # program rebound it, which vm.call_t2 below serves, direct form and all, in fewer
        # lines to compile -- an exit path can hold several of these, in every version.)
        if not self.counting and n < DIRECT_ARITIES and not guessed:
            e(indent, f"if _ty is Closure and (_l := {callee}.code.dx[{n}]) is not None:", ip)
            e(indent + 1, "try:", ip)
            e(indent + 2, f"{callee} = _l(vm, {callee}, _dd, _M{', ' + args if args else ''})",
              ip)
            e(indent + 1, "except Deoptimize as _d:", ip)
            # The frame is on the chain from here on: spilled, as for any other call.
            e(indent + 2, f"f.ip = {ip}", ip)
            self.sync_items(i, base, indent + 2)
            self.materialize_methods(i, base, indent + 2)
            e(indent + 2, f"f.stack = [{below}]", ip)
            self.set_scope(i, indent + 2)
            e(indent + 2, "if _d.top is None:", ip)      # refused before it was entered
            e(indent + 3, f"if vm.call_frame(f, {callee}, [{args}]):", ip)
            self.resume(indent + 4, ip)
            e(indent + 2, "else:", ip)               # its activations are frames: run them first
            e(indent + 3, "vm.depth = _d.depth", ip)
            e(indent + 3, "_d.top.caller = f", ip)
            self.resume(indent + 3, ip)
            self.reload(i, base + 1, indent + 2)
            kw = "elif"
        else:
            kw = "if"
        # A pure builtin sees no frame (values.Builtin): nothing to spill for it.
        e(indent, f"{kw} _ty is Builtin and {callee}.pure and "
                  f"({callee}.arity is None or {callee}.arity == {n}):", ip)
        e(indent + 1, f"{callee} = {callee}.fn(vm, [{args}])", ip)
        e(indent, f"elif _ty is Builtin and not {callee}.frames and "
                  f"({callee}.arity is None or {callee}.arity == {n}):", ip)
        if not self.counting:
            e(indent + 1, f"f.ip = {ip}", ip)
        self.publish(indent + 1, ip)
        e(indent + 1, "f.scope = sc", ip)
        e(indent + 1, f"{callee} = {callee}.fn(vm, [{args}])", ip)
        e(indent, "else:", ip)
        if not self.counting:
            e(indent + 1, f"f.ip = {ip}", ip)
        self.sync_items(i, base, indent + 1)
        self.materialize_methods(i, base, indent + 1)
        e(indent + 1, f"f.stack = [{below}]", ip)
        self.set_scope(i, indent + 1)
        e(indent + 1, f"if vm.call_t2(f, {callee}, [{args}]):", ip)
        self.resume(indent + 2, ip)
        self.reload(i, base + 1, indent + 1)
        if self.int_result_at == i:
            self.typed_result(i, base, indent)

    def tool_call(self, i, n, depth, indent):
        """TOOL_CALL n: vm.call_tool directly, as its handler would (through op_CALL and
        _call), with the frame spilled: policy, lineage and the audit record read it."""
        ip = i + 1
        e = self.emit
        base = depth - n - 1
        callee = f"s{base}"
        args = ", ".join(f"s{j}" for j in range(base + 1, depth))
        self.spill(i, [f"s{j}" for j in range(base)], indent)
        e(indent, f"if {callee}.__class__ is ToolDefinition:", ip)
        e(indent + 1, f"if vm.call_tool(f, {callee}, [{args}], {self.prepared.positions[i].line})"
                      " and not vm.inline(f):", ip)
        self.resume(indent + 2, ip)
        e(indent, f"elif vm.call_t2(f, {callee}, [{args}]):", ip)     # what CALL does with it
        self.resume(indent + 1, ip)
        self.reload(i, base + 1, indent)

    def action_prepare(self, i, n, depth, indent):
        """ACTION_PREPARE n: vm.prepare directly when the callee is an action (given the line
        of this instruction; it reads the frame's lineage); anything else is called as CALL
        calls it."""
        ip = i + 1
        e = self.emit
        base = depth - n - 1
        callee = f"s{base}"
        args = ", ".join(f"s{j}" for j in range(base + 1, depth))
        e(indent, f"if {callee}.__class__ is ActionDefinition:", ip)
        e(indent + 1, f"{callee} = vm.prepare(f, {callee}, [{args}], "
                      f"{self.prepared.positions[i].line})", ip)
        e(indent, "else:", ip)
        self.spill(i, [f"s{j}" for j in range(base)], indent + 1)
        e(indent + 1, f"if vm.call_t2(f, {callee}, [{args}]):", ip)
        self.resume(indent + 2, ip)
        self.reload(i, base + 1, indent + 1)

    def lifecycle_step(self, i, op, depth, indent):
        """ACTION_VERIFY / APPROVE / COMMIT on a prepared action: the VM's method directly, as
        the handler calls it; on any other value, the handler (a method call on that value).

        Policy and lineage read the frame's scope and its callers, so the scope is set first.
        A commit may run its body as a frame, which returns into this one: the stack and ip
        are spilled for it. Verify and approve never push a frame and are given the position;
        if one raises, the handler below (LINEMAP) sets the ip the error is placed at."""
        ip = i + 1
        e = self.emit
        top = f"s{depth - 1}"
        # What both branches need is written once, before the test: the scope, and for a
        # commit the stack below the action (the generated code is compiled, and made again
        # when hot, at every one of these sites: an agent's loop is mostly them).
        if op is Op.ACTION_COMMIT:
            self.spill(i, [f"s{j}" for j in range(depth - 1)], indent)
        else:
            self.set_scope(i, indent)
        e(indent, f"if {top}.__class__ is PreparedAction:", ip)
        # f.pos, known here: the position of instruction i, a constant of the generated code.
        pos = self.const(self.prepared.positions[i])
        if op is Op.ACTION_VERIFY:
            e(indent + 1, f"{top} = vm.verify(f, {top}, f.scope, {pos})", ip)
        elif op is Op.ACTION_APPROVE:
            e(indent + 1, f"{top} = vm.approve(f, {top}, {pos})", ip)
        else:
            e(indent + 1, f"if vm.commit(f, {top}, f.scope) and not vm.inline(f):", ip)
            self.resume(indent + 2, ip)
            self.reload(i, depth, indent + 1)
        e(indent, "else:", ip)
        # (The receiver is no fused method's: a member call's receiver stays below its
        # arguments, so the slots the spill above bound are all there is to bind.)
        if op is Op.ACTION_COMMIT:
            e(indent + 1, f"f.stack.append({top})", ip)
        else:
            self.spill(i, [f"s{j}" for j in range(depth)], indent + 1, scope=False)
        e(indent + 1, f"if H[{int(op)}](f, None, None) and not vm.inline(f):", ip)
        self.resume(indent + 2, ip)
        self.reload(i, depth, indent + 1)

    def ret(self, i, top, indent):
        ip = i + 1
        e = self.emit
        if self.direct:
            if not (self.spec and self.types.get(int(top[1:])) == "i"):
                self.returns_int = False
            if self.direct_return_check() is None:
                self.emit_return(indent, top, ip)
            else:
                e(indent, f"_v = {top}", ip)    # checked on the way out: direct_epilogue
                e(indent, "break", ip)
            return
        prepared = self.prepared
        if self.kind is CodeKind.FUNCTION:
            # A function frame: no module, no role (tier 1's op_RETURN, closure branch).
            e(indent, "if f.module is None and f.role is None:", ip)
            e(indent + 1, "c = f.caller", ip)
            e(indent + 1, "vm.frame = c", ip)
            e(indent + 1, "vm.depth -= 1", ip)
            check = prepared.return_check
            if check is not None:
                cname = self.const(check[1])
                e(indent + 1, f"if f.closure is not None and {self.exact_test(check[2], top)}"
                              f"not {cname}({top}): "
                              f"raise return_error(f.closure.name, {check[0]!r}, {top})", ip)
            e(indent + 1, f"if c is not None: c.stack.append({top})", ip)
            e(indent + 1, f"else: vm.result = {top}", ip)
            e(indent + 1, "return", ip)
        # Tier 1's RETURN reads the stack and the position, never the scope: no block scopes
        # are built for it.
        e(indent, f"f.stack = [{top}]", ip)
        e(indent, f"f.ip = {ip}", ip)
        self.publish(indent, ip)
        e(indent, f"H[{int(Op.RETURN)}](f, None, None)", ip)
        e(indent, "return", ip)

    def emit_return(self, indent, top, ip):
        """A direct form's ``return {top}`` (which cannot fail: no return check), taking the
        line just before when that line only put an expression into ``top``: ``s0 = l0 - 1``
        and ``return s0`` become ``return l0 - 1``, on the line and at the position of the
        expression (the line's one operation that can fail, if any). Two statements in a row
        at one indentation are run one after the other, whatever else the code does: nothing
        jumps between them."""
        last = self.lines[-1] if self.lines else ""
        start = "    " * indent + f"{top} = "
        value = last[len(start):]
        if last.startswith(start) and ";" not in value and " = " not in value:
            self.lines[-1] = "    " * indent + f"return {value}"
            return
        self.emit(indent, f"return {top}", ip)

    def generic(self, i, op, a, b, depth, indent):
        """Hand the instruction to its tier-1 handler, with the frame spilled."""
        ip = i + 1
        pops, pushes = POPS[op](a, b), PUSHES[op](a, b)
        self.spill(i, [f"s{j}" for j in range(depth)], indent)
        self.emit(indent, f"if H[{int(op)}](f, {self.const(a)}, {self.const(b)}) and not vm.inline(f):",
                  ip)
        self.resume(indent + 1, ip)
        self.reload(i, depth - pops + pushes, indent)


_COMPARISONS = frozenset({Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE})
# What the code on the way to a short return may do (see _Gen.returns_soon).
_RETURNS_SOON = frozenset({Op.PUSH_SCOPE, Op.LOAD_NAME, Op.LOAD_CONST, Op.LOAD_NIL,
                           Op.LOAD_TRUE, Op.LOAD_FALSE})
# What a method call's arguments at a fused site never hold (see method_calls).
_NOT_IN_ARGUMENTS = frozenset(int(op) for op in (
    Op.RETURN, Op.FOR_ITER, Op.GET_ITER, Op.PUSH_SCOPE, Op.POP_SCOPE, Op.TEST_BEGIN,
    Op.TEST_END, Op.TEST_ABANDON, Op.IMPORT, Op.IMPORT_FROM, Op.IMPORT_PYTHON, Op.MAKE_FUNCTION,
    Op.MAKE_ACTION, Op.MAKE_TOOL, Op.MAKE_AGENT, Op.POLICY_ALLOW, Op.POLICY_DENY))
# The bodies whose direct form is given its scope by the VM (commit, rollback).
_GIVEN_SCOPE = frozenset({CodeKind.ACTION_BODY, CodeKind.ROLLBACK})
_NIL = type(None)
_LEFT = -1      # spec_instr: emitted, and control left (not an instruction index)
# A quiet version's guard (see _Gen.region): the process is not live (no labelled value, no
# shape of the data's) and no other thread runs Sense code (workers.Workers).
QUIET_TEST = "not LT and (vm.workers is None or not vm.workers.live)"
LOUD_TEST = "LT or vm.workers is not None and vm.workers.live"     # (its negation)
_BRANCHES = frozenset({Op.POP_JUMP_IF_FALSE, Op.POP_JUMP_IF_TRUE, Op.JUMP_IF_FALSE_OR_POP,
                       Op.JUMP_IF_TRUE_OR_POP})
_INT_FOLD = inlining.INT_SYMBOLS


def _listed(items, first="") -> list:
    """``items`` ((text, fails) pairs, see _Gen.emit_parts) separated by commas, after
    ``first`` when there are any."""
    parts: list = []
    for k, (text, fails) in enumerate(items):
        parts.append((first if k == 0 else ", ", None))
        parts.append((text, fails))
    return parts


# An expression that reads no stack slot (``s`` and digits): Int locals and constants only.
_SLOT_FREE = re.compile(r"(?:(?!\bs\d+\b)[^'\"])*")


def _reshaped(it: str) -> str:
    """The test that iterator ``it`` walks an Array whose length is the data's
    (provenance.SHAPES): then tier 1's FOR_ITER labels each pass and the loop's end."""
    return f"SHAPES and {it}.__class__ is ArrayIterator and id({it}.items) in SHAPES"


def _also(*tests: str) -> str:
    """`` and `` before each test that is not empty, joined (to follow a first one)."""
    return "".join(f" and {t}" for t in tests if t)


def _parens(expr: str) -> str:
    """``expr`` as an operand: a compound one in parentheses (so comparisons never chain)."""
    return f"({expr})" if " " in expr else expr


def _unbound_local(line: str):
    """The cached or block local (``l3``, ``b12_0``) a prologue line starts as unbound, if it
    is one: a name a direct form reads in pv alone (see captured_names), or one only written."""
    if line.startswith(("    l", "    b")) and line.endswith(" = U"):
        name = line[4:-4]
        if name[1:].replace("_", "").isdigit():
            return name
    return None


def _reads(text, name) -> bool:
    """Does the code ``text`` read the variable ``name`` anywhere: the name as a whole word,
    not assigned to (followed on its line by ``=`` but not ``==``)? Found with str.find (a
    regular expression starting with a word boundary tries every position of the text, and
    searching line by line cost more than all the rest of generating the code)."""
    size = len(name)
    k = text.find(name)
    while k >= 0:
        end = k + size
        if not (k and (text[k - 1].isalnum() or text[k - 1] == "_")) and not (
                end < len(text) and (text[end].isalnum() or text[end] == "_")):
            after = text[end:end + 40].lstrip(" ")
            if not (after.startswith("=") and after[1:2] not in ("=", "\n", "")):
                return True
        k = text.find(name, end)
    return False


def instrs_op(ins):
    return ins[0]


class _Deeper(Exception):
    def __init__(self, block):
        self.block = block


def compile_code(prepared, counting: bool = False, max_array: Optional[int] = None,
                 max_string: Optional[int] = None, present=(), hot: bool = False,
                 grand=(), callees=None) -> Optional[Compiled]:
    """The tier-2 form of ``prepared``, or None when it stays in tier 1. With ``counting`` (a
    step or time limit), the code counts the steps tier 1 counts (sensevm/runtime/limits.py); an array
    literal longer than ``max_array`` raises tier 1's error, and an Int whose text could be
    longer than ``max_string`` is made into text by values.int_text. ``present``: the names
    bound in the scope the code's function was declared in, as far as the caller knows, and
    ``grand`` in the scope out from that (hints: see _Gen.present, _Gen.grand), ``callees``
    the scope whose bindings guess what its calls call (see _Gen.inlined_call). ``hot``: made
    again for a long-running loop, with the larger budget for Int versions (see
    _Gen.hot_counter)."""
    gen = _Gen(prepared, counting, max_array, max_string, hot)
    gen.present = frozenset(present)
    gen.grand = frozenset(grand)
    try:
        gen.analyse()
    except _Declined:
        return None
    # A function with a direct form and no loop runs as its generator only on its first call
    # and after a deoptimization: Int versions there would cost their compiling and spare
    # next to nothing. (One with a loop may run its longest call there: a frame that started
    # in tier 1 switches over at a loop header.)
    direct = gen.has_direct_form()
    gen.specialise = not direct or len(gen.entries) > 1
    gen.callee_scope = callees
    try:
        source = gen.generate()
    finally:
        gen.callee_scope = None
    gen.ns["LINEMAP"] = gen.linemap
    filename = f"<tier2 {prepared.code.name}#{prepared.index}>"
    try:
        code = compile(source, filename, "exec")
    except (SyntaxError, RecursionError, MemoryError):
        return None     # a Python limit (nesting, size): tier 1 runs it as it is
    exec(code, gen.ns)
    compiled = Compiled(gen.ns["t2"], gen.entries, source)
    if direct:
        compiled.direct = _direct_on_first_call(compiled, gen, filename)
    return compiled


def _direct_on_first_call(compiled: Compiled, gen: _Gen, filename: str):
    """A stand-in for the direct form that makes it when it is first called: most functions
    hot enough for tier 2 are called often, but one that is hot only for its loops (a
    program's ``main``) would make its direct form for nothing."""
    def first_call(vm, closure, depth, bound, *args):
        gen.direct = True
        gen.specialise = True
        gen.lazy = gen.scope_is_lazy()
        # The scope the code was declared in, as the prologue finds it (P): a function's or
        # a tool's, or, for a body called with its scope, that scope's parent.
        outer = args[0].parent if gen.kind in _GIVEN_SCOPE else closure.scope
        gen.present = frozenset(outer.vars)
        gen.grand = frozenset(outer.parent.vars) if outer.parent is not None else frozenset()
        gen.ns = dict(gen.ns)       # its own globals: LINEMAP differs from the generator's
        gen.ns["REDO"] = first_call
        gen.callee_scope = outer
        try:
            source = gen.generate_direct()
        finally:
            gen.callee_scope = None
        try:
            exec(compile(source, filename, "exec"), gen.ns)
        except (SyntaxError, RecursionError, MemoryError):
            compiled.set_direct(gen.prepared, None)     # a Python limit: with a frame
            raise Deoptimize(None, 0) from None
        compiled.direct_source = source
        gen.ns["LINEMAP"] = gen.linemap
        direct = gen.ns["direct"]
        compiled.set_direct(gen.prepared, direct)
        return direct(vm, closure, depth, bound, *args)
    return first_call
