"""Frames and what both tiers share about them (code objects, handlers, direct-call limits).

The dispatch loop (vm.py) and tier 2 (tier2.py) both make and run these; neither imports the
other to reach them.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing would slow every start
    from typing import Optional

    from sensevm.base.errors import Pos
    from sensevm.runtime.values import Closure, ModuleValue, Scope

# A tier-2 frame runs the tier-2 frame it just pushed by calling its generator directly, which
# saves a trip through the loop; at most this many deep, so the host stack stays small.
INLINE_LIMIT = 32
# Calls with fewer arguments than this find a direct form by their count (PreparedCode.dx).
DIRECT_ARITIES = 8
NO_DIRECT = (None,) * DIRECT_ARITIES
# The VM's own instruction, which only a callback frame runs (methods.py: map, filter, reduce,
# sorted(key)); no program can hold it, as the instruction table has no row for it and the
# verifier refuses any opcode without one.
CALLBACK_OP = 0xFF
# Direct-form activations nested on the Python stack (one Python frame each); a call past this
# is made with a real frame, so deep recursion never reaches Python's recursion limit.
DIRECT_LIMIT = 48
# The bound a chain of direct activations starting at depth d is given, as the Python
# expression its callers write out (it is computed once per chain; each activation then tests
# one comparison, ``D > M``): the deepest an activation of the chain may be, DIRECT_LIMIT
# activations in all and none past the VM's depth limit.
# (``vm.direct_cap`` is ``vm.max_depth - DIRECT_REACH``, fixed with it when the VM is made.)
DIRECT_REACH = DIRECT_LIMIT - 1
DIRECT_BOUND = "({d} + %d if {d} < {vm}.direct_cap else {vm}.max_depth)" % DIRECT_REACH


def direct_bound(vm) -> tuple:
    """The depth and bound (DIRECT_BOUND) of a direct call from the frame ``vm`` runs: what a
    tier-2 generator computes when it starts and again whenever it resumes, and passes to
    every direct call it makes in between (the frame's depth holds while it runs: a call
    either returns before the next line or leaves frames, and then the generator yields)."""
    d = vm.depth + 1
    return d, (d + DIRECT_REACH if d < vm.direct_cap else vm.max_depth)


class PreparedCode:
    """A verified code object in the shape the dispatch loop wants.

    ``unit`` is the list of every PreparedCode of the same program and ``program`` that program:
    operands that name other code objects, actions or modules are relative to them, so values
    made by different compiled units (the REPL's inputs) live side by side in one VM.
    """

    __slots__ = ("code", "index", "instrs", "positions", "path", "param_checks", "return_check",
                 "unit", "program", "t2", "direct", "dx", "heat", "joins", "hot", "typed",
                 "quiet")

    def __init__(self, code, instrs, positions, path, param_checks, return_check):
        self.joins = None         # post-dominator sets, made at the first labelled branch
        self.t2 = None            # tier 2: None = not tried yet, False = declined, else Compiled
        self.direct = None        # tier 2's direct form, if it has one (see tier2.Compiled)
        self.dx = NO_DIRECT       # ... by argument count: a call with n arguments uses dx[n]
        self.heat = 0             # frame entries and loop back-edges seen by tier 1
        self.hot = False          # t2 made again for a long-running loop (tier2.HOT_TURNS)
        self.typed = True         # t2 may take inlined calls to return Ints (tier2.untyped)
        self.quiet = True         # t2 may make quiet loop versions (tier2.loud)
        self.index = -1
        self.unit: list = []
        self.program = None
        self.code = code
        self.instrs = instrs
        self.positions = positions
        self.path = path
        self.param_checks = param_checks
        self.return_check = return_check


class TestHandler:
    """A running ``test`` block: where to resume, and the stack and scope to restore, on error."""

    __slots__ = ("name", "target", "depth", "scope", "pos")

    def __init__(self, name, target, depth, scope, pos):
        self.name = name
        self.target = target
        self.depth = depth
        self.scope = scope
        self.pos = pos


class TryHandler:
    """A running ``try`` block's handler (TRY_BEGIN): where to resume on an error, with the
    stack depth and scope to restore there; ``begin`` is the TRY_BEGIN's instruction index
    (where the branches of the try statement start, for its pc label). It shares the frame's
    handler stack (``Frame.tests``) with test handlers: the innermost of either kind catches."""

    __slots__ = ("target", "depth", "scope", "begin", "seen")

    def __init__(self, target, depth, scope, begin):
        self.target = target
        self.depth = depth
        self.scope = scope
        self.begin = begin
        # The origins of what the body's block scopes held when they closed (vm.py
        # op_POP_SCOPE): what an error could have come from, for _no_error_under.
        self.seen = frozenset()


class TestResult:
    __slots__ = ("name", "passed", "error", "path", "pos")

    def __init__(self, name, passed, error, path, pos):
        self.name = name
        self.passed = passed
        self.error = error
        self.path = path
        self.pos = pos


_NO_TESTS = ()      # most frames never run a test block: they share this empty sequence


class Deoptimize(BaseException):
    """Raised through the direct forms of tier 2 (tier2.Compiled) when one meets a call it
    cannot make as a plain Python call: each direct activation on the way out becomes a real
    frame, ``top`` the outermost so far (None: the callee was refused before it was entered),
    and ``depth`` is the depth of the innermost, which the VM's depth becomes.

    A BaseException, so that no ``except Exception`` on the way (a direct form's own position
    handler) mistakes it for an error.
    """

    def __init__(self, top, depth):
        self.top = top
        self.depth = depth


class Frame:
    """One running body. ``action``/``role`` mark an action's commit body or rollback block, whose
    return and failure move the action's state; ``tags`` are its audit lineage frames."""

    __slots__ = ("prepared", "instrs", "ip", "stack", "scope", "closure", "tests", "module",
                 "caller", "action", "role", "tags", "audit_line", "origin", "gen", "gvm", "pc",
                 "clean")

    def __init__(self, prepared: PreparedCode, scope: Scope, caller: Optional["Frame"],
                 closure: Optional[Closure] = None, module: Optional[ModuleValue] = None,
                 action=None, role: Optional[str] = None, tags: tuple = (),
                 audit_line: Optional[int] = None):
        self.action = action
        self.role = role
        self.origin = None    # for a body on a worker thread: a snapshot of who called it
        self.tags = tags
        self.audit_line = audit_line
        self.prepared = prepared
        self.instrs = prepared.instrs
        self.ip = 0
        self.stack: list = []
        self.scope = scope
        self.closure = closure
        # The running handlers, test blocks' and try blocks' (TestHandler, TryHandler),
        # innermost last: a list once one starts.
        self.tests: list = _NO_TESTS
        self.module = module
        self.caller = caller
        self.gen = None       # a tier-2 generator running this frame, made by the VM ``gvm``
        self.gvm = None
        # Branches on influenced values still open here: [(join ip or -1, origins, depth)]
        # (see _run_tainted); None for almost every frame.
        self.pc = None
        # True once lineage() found no tags on this frame's chain. It stays true: a chain
        # only loses frames, except as a new frame is linked in before it runs (a
        # deoptimized body's bottom frame given its caller) or as an agent's base frame is
        # given its resumer -- and a base frame is tagged, so no frame above it is clean.
        self.clean = False

    @property
    def pos(self) -> Pos:
        """The position of the instruction being executed."""
        return self.prepared.positions[max(self.ip - 1, 0)]


_CODE_LABELS = {0: "<module>", 2: "action {}", 3: "rollback of {}", 4: "tool {}", 5: "agent {}"}


def code_label(code) -> str:
    """What a call stack calls a frame of ``code``: ``f()``, ``tool t``, ``action a``,
    ``rollback of a``, ``agent x``, ``<module>`` (the same in both tiers)."""
    shape = _CODE_LABELS.get(code.kind)
    if shape is None:
        return f"{code.name}()"
    name = code.name
    if code.kind == 3 and name.endswith(".rollback"):      # (the compiler names it so)
        name = name[:-len(".rollback")]
    return shape.format(name)
