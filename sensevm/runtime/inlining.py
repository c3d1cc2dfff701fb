"""Inlined calls for tier 2: what a small function's call returns, as guards and Python lines.

A call site whose callee tier 2 can guess when it compiles (the closure its name is bound to in
the scopes the compiling frame or closure sees: a hint, never trusted) may compute the call's
result in place: when, at run time, the callee *is* a closure of the guessed code, its depth is
within the bound, and the values its body reads are of the types the plan takes them to be, the
caller does what the callee's direct form would have done, with no Python call. Otherwise the
call is made as before. A direct form has no frame and nothing can observe its activation, so
an inlined one is the same call, as long as it never stops part-way: the plan is all or nothing.

What can be inlined (``plan``): a function's straight-line body (no jump, no block scope) of
loads of its parameters, Int, Bool and nil constants and captured variables, ``+ - *`` and
comparisons on Ints, stores to its parameters or to captured variables, calls of captured
variables that are themselves inlined (``MAX_LEVELS`` deep), and a return. Every load and
type is settled by the guards, which only read, before anything is computed: a captured
variable is read from the callee's scope with ``get`` (a name bound further out, or not at all,
fails the guard and the call is made, which finds it or raises tier 1's error), an Int operand
is tested to be exactly an Int (not a Bool, not a labelled Int), a callee to be exactly a
Closure of the guessed code. Under the guards the only thing that can still fail is running out
of memory in ``+ - *``: each such line raises the error the direct forms would have raised
(tier2.inline_error, from the levels the plan records for it). Stores come last, after
everything that can fail, and only in a body that calls nothing (so no inlined callee reads a
variable before a store it should have seen); each updates a binding the guards found, so the
store cannot fail or allocate.

Beside plans, ``leading_return``: the early return a recursive function starts with (``if n <
2: return n``), tested at each of its calls of itself in its Int direct form and taken there,
so that the calls at the bottom of a recursion (about half of them) are no Python call.
"""

from __future__ import annotations

import re

from sensevm.bytecode.opcodes import Op
from sensevm.bytecode.program import CodeKind
from sensevm.runtime.values import Closure

# How deep a site inlines: the callee, and the callees it calls. (Deeper nests are rare in
# small bodies, and each level adds guards to every call of the site.)
MAX_LEVELS = 2
# The instructions of all the bodies one site inlines: past this, the guards and lines cost
# compiling more than the call they spare (a Python call is some twenty lines' worth).
MAX_INSTRUCTIONS = 24

# The Python operator each Int instruction is on two Ints (tier 2's Int versions use it too).
INT_SYMBOLS = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*", Op.MOD: "%", Op.LT: "<", Op.LE: "<=",
               Op.GT: ">", Op.GE: ">=", Op.EQ: "==", Op.NE: "!="}
# ... those a plan takes: ``%`` can fail on a zero divisor, which only the call reports.
_INT_OPS = {op: INT_SYMBOLS[op] for op in (Op.ADD, Op.SUB, Op.MUL)}
_COMPARISONS = {op: INT_SYMBOLS[op] for op in (Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE)}
_CONSTANTS = {Op.LOAD_TRUE: ("True", "b"), Op.LOAD_FALSE: ("False", "b"),
              Op.LOAD_NIL: ("None", "n")}


class _NotInlined(Exception):
    """The body is not of the shape plan takes."""


class Value:
    """A value in an inlined body: a Python expression and what is known of it: ``kind`` "i"
    (an Int), "b" (a Bool), "n" (nil), "f" (a closure of ``hint``'s code) or None (anything);
    ``load``, while set, is the read that binds ``expr`` (a temporary), not yet in a guard."""

    __slots__ = ("expr", "kind", "load", "hint")

    def __init__(self, expr: str, kind=None, load=None, hint=None):
        self.expr = expr
        self.kind = kind
        self.load = load
        self.hint = hint


class Plan:
    """A call site's inlined form: ``guards`` (conditions, in order: each reads only what an
    earlier one bound), ``lines`` ((target, expression, levels): an operation that can run out
    of memory, and the (prepared code, instruction index) of each body it is in, innermost
    first), ``stores`` ((scope dict, name, expression)), ``result`` and ``levels`` (how many
    calls deep it goes: the depth guard is the caller's to write)."""

    def __init__(self, const, temp):
        self.const = const      # a value -> the name the generated code knows it by
        self.temp = temp        # -> a fresh Python local's name
        self.guards: list = []
        self.lines: list = []
        self.stores: list = []
        self.result = None
        self.levels = 0
        self.size = 0
        self.calls = False
        self.scopes: list = []      # (local, the dict it is bound to, its guard's index)

    # -- what a use asks of a value

    def _bind(self, value: Value, test: str) -> None:
        """Guard ``value`` with ``test`` (a format of its expression), binding it first if its
        read has not been made yet."""
        if value.load is not None:
            self.guards.append(test.format(f"({value.expr} := {value.load})"))
            value.load = None
        else:
            self.guards.append(test.format(value.expr))

    def int(self, value: Value) -> str:
        if value.kind == "i":
            return value.expr
        if value.kind is not None:
            raise _NotInlined("not an Int")
        self._bind(value, "{}.__class__ is int")
        value.kind = "i"
        return value.expr

    def found(self, value: Value) -> str:
        """A value read from a scope must have been there (else the call finds it further out,
        or fails as tier 1 does)."""
        if value.load is not None:
            self._bind(value, "{} is not U")
        return value.expr

    def closure(self, value: Value):
        """The code of the closure ``value`` is guessed to be, guarded."""
        hint = value.hint
        if value.kind == "f" or hint.__class__ is not Closure:
            raise _NotInlined("no closure to guess")
        if value.load is None and not value.expr.isidentifier():
            raise _NotInlined("a callee that is no name")
        self._bind(value, "{}.__class__ is Closure")
        self.guards.append(f"{value.expr}.code is {self.const(hint.code)}")
        value.kind = "f"
        return hint

    def scope_of(self, callee: str) -> str:
        """A Python local for the dict of the scope ``callee`` was declared in, bound by a
        guard (true when it holds anything: a read from an empty one would fail anyway)."""
        scope = self.temp()
        self.scopes.append((scope, f"{callee}.scope.vars", len(self.guards)))
        self.guards.append(f"({scope} := {callee}.scope.vars)")
        return scope

    def unbind_single_scopes(self) -> None:
        """A scope's dict read just once (and not stored to) is read there, not bound first:
        two instructions fewer, and the guard that bound it goes."""
        dropped = set()
        for scope, expr, at in self.scopes:
            name = re.compile(rf"\b{scope}\b")
            uses = sum(len(name.findall(g)) for g in self.guards) - 1
            if uses == 1 and all(target != scope for target, _, _ in self.stores):
                dropped.add(at)
                self.guards = [name.sub(expr, g) if k != at else g
                               for k, g in enumerate(self.guards)]
        self.guards = [g for k, g in enumerate(self.guards) if k not in dropped]

    # -- bodies

    def body(self, callee: str, hint: Closure, args: list, level: int, outer: tuple) -> Value:
        """Plan the body of ``hint``'s code, called as ``callee`` with ``args`` (Values)."""
        prepared = hint.code
        code = prepared.code
        if (code.kind is not CodeKind.FUNCTION or len(code.params) != len(args)
                or prepared.param_checks or prepared.return_check is not None
                or level > MAX_LEVELS):
            raise _NotInlined("not a function of this many untyped parameters, or too deep")
        self.levels = max(self.levels, level)
        env = dict(zip(code.params, args))     # its own bindings: the parameters
        stored: dict = {}   # the captured variables it has stored to, and what it stored
        read = set()        # ... and read from its scope (so the guards find them there)
        scope = None        # the Python local bound to the callee's scope's dict
        stack: list = []
        for j, (op, a, _) in enumerate(prepared.instrs):
            self.size += 1
            if self.size > MAX_INSTRUCTIONS:
                raise _NotInlined("too large")
            if op == Op.LOAD_NAME:
                if a in env or a in stored:
                    stack.append(env[a] if a in env else stored[a])
                    continue
                if scope is None:
                    scope = self.scope_of(callee)
                value = Value(self.temp(), load=f"{scope}.get({a!r}, U)",
                              hint=hint.scope.vars.get(a))
                read.add(a)
                stack.append(value)
            elif op == Op.LOAD_CONST:
                if type(a) is not int:
                    raise _NotInlined("a constant other than an Int")
                stack.append(Value(f"({a})" if a < 0 else repr(a), "i"))
            elif op in _CONSTANTS:
                stack.append(Value(*_CONSTANTS[op]))
            elif op in _INT_OPS:
                right, left = stack.pop(), stack.pop()
                target = self.temp()
                self.lines.append((target, f"{self.int(left)} {_INT_OPS[op]} {self.int(right)}",
                                   ((prepared, j),) + outer))
                stack.append(Value(target, "i"))
            elif op in _COMPARISONS:
                right, left = stack.pop(), stack.pop()
                stack.append(Value(f"({self.int(left)} {_COMPARISONS[op]} {self.int(right)})",
                                   "b"))
            elif op == Op.STORE_NAME:
                value = stack.pop()
                self.found(value)
                if a in env:
                    env[a] = value      # its own binding (a parameter): a local
                    continue
                if level > 1 or a not in hint.scope.vars:
                    # Only where no call follows (see the module's docstring), and only the
                    # binding the callee's scope held when compiled (a new local of its own, or
                    # one further out, takes the call).
                    raise _NotInlined("a store the plan does not make")
                if scope is None:
                    scope = self.scope_of(callee)
                if a not in stored and a not in read:
                    self.guards.append(f"{a!r} in {scope}")
                self.stores.append((scope, a, value.expr))
                stored[a] = value       # what the body reads of it from here on
            elif op == Op.CALL:
                args_here = stack[len(stack) - a:]
                del stack[len(stack) - a:]
                target = stack.pop()
                if self.stores:
                    raise _NotInlined("a call after a store")
                inner = self.closure(target)
                for value in args_here:     # (read by the call even if its body does not)
                    self.found(value)
                self.calls = True
                stack.append(self.body(target.expr, inner, args_here, level + 1,
                                       ((prepared, j),) + outer))
            elif op == Op.RETURN:
                value = stack.pop()
                self.found(value)
                return value
            elif op != Op.NOP:
                raise _NotInlined("an instruction the plan does not take")
        raise _NotInlined("no return")


def plan(hint, callee: str, args: list, const, temp):
    """The Plan of a call of ``callee`` (a Python local) with ``args`` (Values), guessed to be
    a call of the closure ``hint``; None when its body is not of the shape inlined."""
    if hint.__class__ is not Closure:
        return None
    p = Plan(const, temp)
    p.guards.append(f"{callee}.__class__ is Closure and {callee}.code is {const(hint.code)}")
    try:
        p.result = p.body(callee, hint, args, 1, ())
    except (_NotInlined, IndexError):
        return None
    if p.stores and p.calls:
        return None
    p.unbind_single_scopes()
    return p


def leading_return(prepared, names: list):
    """A function's leading early return, for its calls of itself with Int arguments: when its
    code starts ``if A <cmp> B: return R`` (A, B and R each a parameter or an Int constant),
    the condition and the result as Python expressions over ``names`` (the call's arguments,
    each a Python local holding an Int: the caller binds an argument computed in place to
    one first, every argument in order, as the call would compute them); None for any other
    start.

    The caller tests the condition itself, and when it holds and the call would be within the
    depth bound, takes the result with no call: the call's activation would have tested the
    same condition on the same Ints (nothing has run in it before) and returned the same
    value, and nothing can observe an activation that is never made (see the module's
    docstring). Calls that go on past the test are made as before. A recursion's calls at its
    base case, about half of all its calls in a two-way recursion such as fib's, are no
    Python call."""
    code = prepared.code
    if (code.kind is not CodeKind.FUNCTION or len(code.params) != len(names)
            or prepared.param_checks or prepared.return_check is not None):
        return None
    env = dict(zip(code.params, names))

    def operand(instr):
        op, a, _ = instr
        if op == Op.LOAD_NAME and a in env:
            return env[a]
        if op == Op.LOAD_CONST and type(a) is int:
            return f"({a})" if a < 0 else repr(a)
        return None

    instrs = prepared.instrs
    if len(instrs) < 6:
        return None
    left, right = operand(instrs[0]), operand(instrs[1])
    compare = _COMPARISONS.get(instrs[2][0])
    if left is None or right is None or compare is None or instrs[3][0] != Op.POP_JUMP_IF_FALSE:
        return None
    at = 5 if instrs[4][0] == Op.PUSH_SCOPE else 4     # (the if's block: nothing bound in it)
    if at + 1 >= len(instrs) or instrs[at + 1][0] != Op.RETURN:
        return None
    result = operand(instrs[at])
    if result is None:
        return None
    return f"{left} {compare} {right}", result
