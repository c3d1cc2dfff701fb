"""Where a code object's branches join, and what the code in between may assign or change.

That is what a pc label covers (vm.py ``_branch``) and what its arm not taken labels.
Computed from the verified bytecode itself, not from what the compiler meant, so hand-made
bytecode cannot end a label early or hide a change. Made at a code object's first labelled
branch (vm.py ``_joins``), never at start-up.
"""

from __future__ import annotations

from sensevm.bytecode.opcodes import EFFECTS, JUMPS, POPS, PUSHES, TERMINATORS, Op


class JoinPoints:
    """Where the branches of one code object join again: each instruction's immediate
    post-dominator, from post-dominator sets (bitsets) over the instruction graph.

    Computed from the bytecode itself, not from what the compiler meant, so hand-made
    bytecode cannot end a pc label early. A branch with no join inside its code object (one
    arm returns, or loops forever) keeps its label to the end of the frame."""

    __slots__ = ("pdom", "exit", "cache", "succ", "instrs", "stored", "region", "changes",
                 "_assigned", "_locals")

    def __init__(self, instrs):
        n = len(instrs)
        succ = []
        for i, (op, a, b) in enumerate(instrs):
            o = Op(op)
            out = []
            if o in JUMPS:
                out.append(b if o is Op.TEST_BEGIN or o is Op.EXCEPT_JUMP else a)
            if o not in TERMINATORS:
                out.append(i + 1 if i + 1 < n else n)
            if o is Op.RETURN or (not out and o is not Op.RAISE):
                # (A RAISE joins nothing: its error leaves the frame or resumes at a handler,
                # which carries the open labels on, vm.py _handled_under.)
                out.append(n)
            succ.append(out)
        everything = (1 << (n + 1)) - 1
        pdom = [everything] * n + [1 << n]
        changed = True
        while changed:
            changed = False
            for i in range(n - 1, -1, -1):
                acc = everything
                for j in succ[i]:
                    acc &= pdom[j]
                acc |= 1 << i
                if acc != pdom[i]:
                    pdom[i] = acc
                    changed = True
        self.pdom = pdom
        self.exit = n
        self.cache = {}
        self.succ = succ
        self.instrs = instrs
        self.stored = {}
        self.region = {}
        self.changes = {}
        self._assigned = self._locals = None

    def stores(self, i: int) -> tuple:
        """The names a variable store can reach from branch ``i`` before its join: those its
        arms may assign. Either arm's, the one not taken as much as the one taken: `x` left
        as it was says as much about the condition as `x` changed (vm.py labels each of them
        when the branch opens)."""
        return self._names(i, self.stored, (int(Op.STORE_NAME), int(Op.STORE_LOCAL)))

    def names_read(self, i: int) -> tuple:
        """The variable names read between instruction ``i`` and its join (either way)."""
        return self._names(i, self.region, (int(Op.LOAD_NAME),))

    def _names(self, i: int, cache: dict, ops: tuple) -> tuple:
        """The name operands of the ``ops`` instructions reachable from ``i`` before its join
        (the frame's end if it has none), in the order found; cached per ``i``."""
        found = cache.get(i)
        if found is not None:
            return found
        join = self.join(i)
        end = self.exit if join is None else join
        instrs = self.instrs
        names = []
        seen = {i, end}
        todo = list(self.succ[i])
        while todo:
            j = todo.pop()
            if j in seen or j >= self.exit:
                continue
            seen.add(j)
            op, a, _ = instrs[j]
            if op in ops and a not in names:
                names.append(a)
            todo.extend(self.succ[j])
        found = cache[i] = tuple(names)
        return found

    def changed(self, i: int):
        """What the region after branch ``i`` (to its join; ``i`` = -1: the whole code) may
        change in place, either arm: ``(names, calls, returned)``, the variables whose Array
        or Map (or one nested in it) an index store or a changing method or ``push`` is
        applied to; the calls it makes, each ``(callee, (names of each argument...),
        kind)`` (the callee: ``("names", variables)`` it may be loaded from,
        ``("member", variables, name)`` for ``x.name(...)``, or None), for the VM to look
        into (vm.py _label_changed): a function may change what it is handed, or a variable
        of its own scope; and the variables whose value (or something inside it) a RETURN
        may give back. A call's result counts as its callee's variables (and its
        arguments'), so ``mine().push(x)`` names ``mine``, whose ``returned`` the VM
        follows. Found by following, along every path of the region,
        which variable each stack slot was loaded from (the rows' stack effects)."""
        found = self.changes.get(i)
        if found is None:
            found = self.changes[i] = _changes(self, i)
        return found

    def locals(self) -> frozenset:
        """The names the code declares ``local`` (STORE_LOCAL): in a function, its own."""
        if self._locals is None:
            store = int(Op.STORE_LOCAL)
            self._locals = frozenset(a for op, a, _ in self.instrs if op == store)
        return self._locals

    def assigned(self) -> tuple:
        """The names the code assigns with STORE_NAME anywhere (each once): in a function,
        the variables of an outer scope it may rebind."""
        if self._assigned is None:
            store = int(Op.STORE_NAME)
            self._assigned = tuple(dict.fromkeys(a for op, a, _ in self.instrs if op == store))
        return self._assigned

    def join(self, i: int):
        """The immediate post-dominator of instruction ``i``, or None (the frame's end)."""
        if i in self.cache:
            return self.cache[i]
        pdom = self.pdom
        strict = pdom[i] & ~(1 << i)
        found = None
        if not strict >> self.exit & 1 or strict == (1 << self.exit):
            found = None
        else:
            rest = strict
            while rest:
                low = rest & -rest
                d = low.bit_length() - 1
                if pdom[d] == strict:
                    found = d if d != self.exit else None
                    break
                rest ^= low
        self.cache[i] = found
        return found


# Methods that change their receiver in place (EXTENSIONS.md E2), and those that call back a
# function with its items (which may change them, or a variable of the function's own).
CHANGING_METHODS = frozenset({"push", "pop", "insert", "remove_at", "remove"})
CALLBACK_METHODS = frozenset({"map", "filter", "reduce", "sorted"})
_NOWHERE = (frozenset(), None)      # a stack slot loaded from no variable


def _changes(joins: "JoinPoints", i: int):
    """JoinPoints.changed: an abstract run of the region over stacks whose slots are
    (variables the slot's value may be, or be inside; the member name when it is ``x.m``).
    A variable the region assigns from a slot stands for that slot's variables too (``t =
    xs; push(t, 1)``), so the run is repeated until those aliases stop growing."""
    aliases: dict = {}
    for _ in range(8):
        before = {k: v for k, v in aliases.items()}
        found = _walk(joins, i, aliases)
        if aliases == before:
            return found
    return found


def _walk(joins: "JoinPoints", i: int, aliases: dict):
    instrs, n = joins.instrs, joins.exit
    if i < 0:
        starts, end = (0,), n
    else:
        join = joins.join(i)
        starts, end = joins.succ[i], n if join is None else join
    names: set = set()
    returned: set = set()
    calls: list = []
    seen_calls: set = set()
    states: dict = {}
    todo = []
    for j in starts:
        if j != end and j < n:
            # (What the stack holds where the region starts is not known: every slot below
            # what the region pushes itself is loaded from no variable it can name.)
            states[j] = ()
            todo.append(j)
    load, dup, dup2 = int(Op.LOAD_NAME), int(Op.DUP), int(Op.DUP2)
    index, member, store_index = int(Op.INDEX), int(Op.GET_MEMBER), int(Op.STORE_INDEX)
    call, labeled = int(Op.CALL), int(Op.CALL_LABELED)
    tool_call, prepare = int(Op.TOOL_CALL), int(Op.ACTION_PREPARE)
    ret, get_iter, for_iter = int(Op.RETURN), int(Op.GET_ITER), int(Op.FOR_ITER)
    stores = (int(Op.STORE_NAME), int(Op.STORE_LOCAL))
    builds = (int(Op.BUILD_ARRAY), int(Op.BUILD_MAP))
    while todo:
        j = todo.pop()
        stack = list(states[j])
        op, a, b = instrs[j]
        row = EFFECTS[op]
        pops = row[0] if row[0] is not None else POPS[Op(op)](a, b)
        pushes = row[1] if row[1] is not None else PUSHES[Op(op)](a, b)

        def slot(k):            # the k-th slot from the top (1 = top); unknown below
            return stack[-k] if len(stack) >= k else _NOWHERE

        out = None
        if op == load:
            out = [(frozenset((a,)) | aliases.get(a, frozenset()), None)]
        elif op in stores:
            if slot(1)[0]:
                aliases[a] = aliases.get(a, frozenset()) | slot(1)[0]
        elif op == dup:
            out = [slot(1), slot(1)]
        elif op == dup2:
            out = [slot(2), slot(1), slot(2), slot(1)]
        elif op == index or op == get_iter:
            out = [(slot(pops)[0], None)]
        elif op == for_iter:
            out = [slot(1), (slot(1)[0], None)]        # the item is inside what it walks
        elif op in builds:
            out = [(frozenset().union(*[slot(k)[0] for k in range(1, pops + 1)]), None)]
        elif op == member:
            out = [(slot(1)[0], a)]
        elif op == store_index:
            names.update(slot(3)[0])
            out = [slot(1)]
        elif op == ret:
            returned.update(slot(1)[0])
        elif op == call or op == labeled or op == tool_call or op == prepare:
            # (A prepared action's body may run at its commit, with what it was handed.)
            argc = a if op != labeled else a + 2 * b
            callee = slot(argc + 1)
            args = tuple(slot(k)[0] for k in range(argc, 0, -1))
            site = None
            if callee[1] is not None:
                if callee[1] in CHANGING_METHODS:
                    names.update(callee[0])
                elif callee[1] in CALLBACK_METHODS and args:
                    # items.map(fn), items.reduce(fn, start): fn is called with the items
                    # (inside the receiver) and with what else the method was handed.
                    site = (("names", args[0]), (callee[0],) + args[1:], "callback")
                else:
                    # module.f(xs), or a method that changes nothing (the VM tells which).
                    site = (("member", callee[0], callee[1]), args, "call")
            elif callee[0]:
                site = (("names", callee[0]), args, "call")
            else:
                site = (None, args, "call")
            if site is not None and site not in seen_calls:
                seen_calls.add(site)
                calls.append(site)
            # What a call gives back may be (inside) what it was handed: `pick(c, a, b)`,
            # `m.get(k)`, or what the callee returns from its own scope (the VM follows it).
            out = [(callee[0].union(*args), None)]
        if out is None:
            out = [_NOWHERE] * pushes
        after = stack[:len(stack) - pops] if pops <= len(stack) else []
        after.extend(out)
        nexts = []
        jumps = row[5] >= 0
        for k in joins.succ[j]:
            if k == end or k >= n:
                continue
            if jumps and k == (b if op in (int(Op.TEST_BEGIN), int(Op.EXCEPT_JUMP)) else a) \
                    and row[2] is not None and k != j + 1:
                bstack = stack[:len(stack) - row[2]] if row[2] <= len(stack) else []
                bstack.extend([_NOWHERE] * row[3])
                nexts.append((k, bstack))
            else:
                nexts.append((k, after))
        for k, st in nexts:
            old = states.get(k, False)
            if old is False:
                states[k] = tuple(st)
                todo.append(k)
                continue
            merged = _merge(old, st)
            if merged != old:
                states[k] = merged
                todo.append(k)
    return tuple(sorted(names)), tuple(calls), tuple(sorted(returned))


def _merge(old: tuple, new: list) -> tuple:
    """Two abstract stacks met at one instruction: slot by slot, the union (aligned at the
    top; a slot one of them does not know is unknown)."""
    new = tuple(new)
    if len(old) != len(new):
        m = min(len(old), len(new))
        old, new = old[len(old) - m:], new[len(new) - m:]
    return tuple((x[0] | y[0], x[1] if x[1] == y[1] else None) for x, y in zip(old, new))
