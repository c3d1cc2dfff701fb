"""Capability decisions for the action and tool handlers: lexical policy plus the call-chain rule.

Spec 11: every scope may own a rule table; the first table on the lexical chain that mentions a
capability decides, and a capability nobody mentions is allowed. Spec 21.2 adds stack
inspection: the capability must also not be denied from any frame on the active call chain,
each judged by the same lexical lookup from the scope it is executing in. Deny wins, so a
caller's ``deny`` reaches every function, tool and action body it calls.
"""

from __future__ import annotations

from sensevm.base.errors import SensePolicyError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing would slow every start
    from typing import Optional

ALLOW, DENY = "allow", "deny"


class Denials:
    """Whether any rule table of a run holds a deny rule yet; shared by a VM and its workers.

    Until one does, ``allowed`` is True for every capability and call chain: a table can only
    allow, and a capability no table mentions is allowed. So the VM's own checks (every action
    step, every tool call) skip the walks while ``seen`` is False. It only ever becomes True,
    and does so before the first deny rule enters any table of the run (the POLICY_DENY
    handler, an agent's restored scopes), so no check can miss one."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen = False

    def note(self, table) -> None:
        """Mark ``table`` (a rule table about to be put on a scope) if it holds a deny rule."""
        if table and DENY in table.values():
            self.seen = True


def lexical_decision(scope, capability: str) -> Optional[str]:
    """The rule of the nearest table on ``scope``'s chain that mentions ``capability``, if any."""
    while scope is not None:
        table = scope.policy
        if table is not None:
            rule = table.get(capability)
            if rule is not None:
                return rule
        scope = scope.parent
    return None


def allowed(capability: str, scope, frame) -> bool:
    """Is ``capability`` allowed for code running in ``scope`` in ``frame`` (and its callers)?

    The first walk is lexical_decision written out: every action step and tool call makes this
    check, most of them through two or three scopes with no table."""
    s = scope
    while s is not None:
        table = s.policy
        if table is not None:
            rule = table.get(capability)
            if rule is not None:
                if rule == DENY:
                    return False
                break
        s = s.parent
    found = s       # the scope whose table allows it (None: no table on the chain mentions it)
    # The frame making the check is on the chain too: a bound method (`v = a.verify`) read in
    # one scope may be called from a frame whose own scope denies. A frame running in the
    # scope that decided (a module's frame, for a function it called) decides the same.
    while frame is not None:
        s = frame.scope
        if s is not scope and s is not found and lexical_decision(s, capability) == DENY:
            return False
        # A body running on a worker thread has no caller, but a snapshot of who called it.
        frame = frame.caller or frame.origin
    return True


def granted(capability: str, scope, frame) -> Optional[str]:
    """For a capability that is *not* allowed by default (``python.import``): None when it is
    granted, else why not: ``DENY`` when any scope on the lexical chain or the call chain denies
    it, ``"unmentioned"`` when no scope on either chain explicitly allows it."""
    decision = lexical_decision(scope, capability)
    if decision == DENY:
        return DENY
    seen_allow = decision == ALLOW
    while frame is not None:
        if frame.scope is not scope:
            decision = lexical_decision(frame.scope, capability)
            if decision == DENY:
                return DENY
            seen_allow = seen_allow or decision == ALLOW
        frame = frame.caller or frame.origin
    return None if seen_allow else "unmentioned"


# The capabilities that hand a program the host itself (docs/interop.md, docs/mcp.md): each
# needs an explicit allow (granted), and in a dry run also the command line's leave
# (``--dry-run-allow``), since a dry run must not start host code nobody asked it to.
HOST_CAPABILITIES = ("python.import", "mcp.connect")
# The capabilities a tool or action requiring them may use only with an explicit allow on its
# lexical or call chain (``granted``), whatever the defaults (EXTENSIONS.md E5): the host ones,
# std.shell's (an action body, which never runs in a dry run) and std.env's.
EXPLICIT = frozenset(HOST_CAPABILITIES + (
    "shell.exec",
    "env.read",
))
DRY_RUN = "dry run"


def host_refusal(capability: str, scope, frame, dry_run: bool = False,
                 dry_run_allowed=()) -> Optional[str]:
    """Why ``capability`` (one of HOST_CAPABILITIES) is refused to code in ``scope`` running in
    ``frame``: None when it is granted, else DENY, ``"unmentioned"`` or DRY_RUN."""
    why = granted(capability, scope, frame)
    if why is None and dry_run and capability not in dry_run_allowed:
        return DRY_RUN
    return why


def refusal_text(capability: str, why: str) -> str:
    """The end of a refusal's message, for each reason host_refusal gives."""
    if why == DENY:
        return f"requires capability '{capability}', which is denied by policy"
    if why == DRY_RUN:
        return (f"is not done in a dry run, which starts no host code unless the command line "
                f"allows it (--dry-run-allow {capability})")
    return (f"requires capability '{capability}', which is not allowed by any policy (add "
            f"'policy: allow {capability}')")


def permitted(capability: str, scope, frame) -> bool:
    """The VM's capability check for a declaration's step or call: ``allowed``, except that a
    capability of EXPLICIT must be explicitly granted (the VM asks even when no deny rule
    exists yet)."""
    if capability in EXPLICIT:
        return granted(capability, scope, frame) is None
    return allowed(capability, scope, frame)


class Rules(dict):
    """A scope's rule table: capability -> ALLOW or DENY, as a plain dict reads it (every check
    does), and in ``at`` where each rule was declared: capability -> (file, line), for the
    message of a denial (``explain``). A table restored from saved state has its places
    rebuilt from the program (persist.py), or none."""

    __slots__ = ("at",)

    def __init__(self, *args):
        dict.__init__(self, *args)
        self.at = {}


def set_rule(scope, capability: str, effect: str, at=None) -> None:
    """Put ``effect`` for ``capability`` in ``scope``'s table; ``at``: (file, line) of the rule."""
    table = scope.policy
    if table is None:
        table = scope.policy = Rules()
    elif type(table) is not Rules:
        table = scope.policy = Rules(table)
    table[capability] = effect
    if at is not None:
        table.at[capability] = at


def _deciding_table(scope, capability: str):
    """The nearest table on ``scope``'s chain that mentions ``capability``, or None."""
    while scope is not None:
        table = scope.policy
        if table is not None and capability in table:
            return table
        scope = scope.parent
    return None


def _frame_name(frame) -> str:
    prepared = getattr(frame, "prepared", None)
    if prepared is None:        # an async tool's snapshot of who called it (vm._FrameSnapshot)
        return "the caller of an async tool"
    code = prepared.code
    kind = code.kind
    if kind == 0:                       # CodeKind.MODULE
        return f"the top level of {frame.prepared.path or '<input>'}"
    if kind == 4:                       # CodeKind.TOOL_BODY
        return f"tool {code.name}()"
    if kind == 2 or kind == 3:          # an action's commit body or rollback block
        action = frame.action
        name = getattr(action, "name", None) or code.name
        return f"{'the rollback' if kind == 3 else 'the commit'} of '{name}'"
    if kind == 5:                       # CodeKind.AGENT_BODY
        return f"agent {code.name}"
    return f"{code.name}()"


MAX_CHAIN = 6


def explain(capability: str, scope, frame, callee: Optional[str] = None) -> str:
    """Which deny rule refuses ``capability`` to code in ``scope`` running in ``frame``, where it
    was declared, and the call chain from the frame it reached the check from: the words after
    "which is denied by", e.g. ``'deny payment.send' at app.sns:9, in locked_down() which
    called pay()``. ``callee``: the name the refused call has in the chain (a tool's ``pay()``).
    Only a denial's message asks (never a check), so it may walk at leisure."""
    table, decider = None, frame
    s = _deciding_table(scope, capability)
    if s is not None and s[capability] == DENY:
        table = s
    else:
        found = s
        fr = frame
        while fr is not None:
            t = _deciding_table(fr.scope, capability)
            if fr.scope is not scope and t is not None and t is not found \
                    and t[capability] == DENY:
                table, decider = t, fr
                break
            fr = fr.caller or fr.origin
    if table is None:
        return "policy"
    text = f"'deny {capability}'"
    at = getattr(table, "at", None)
    where = at.get(capability) if at else None
    if where is not None:
        text += f" at {where[0] or '<input>'}:{where[1]}"
    names = []
    fr = frame
    while fr is not None:
        names.append(_frame_name(fr))
        if fr is decider:
            break
        fr = fr.caller or fr.origin
    names.reverse()
    if callee is not None:
        names.append(callee)
    if len(names) > MAX_CHAIN:
        names[2:-2] = ["..."]
    if not (decider is frame and (frame is None or frame.prepared.code.kind == 0)):
        text += ", in " + " which called ".join(names)
    return text


class Denial(SensePolicyError):
    """A capability refused by a deny rule, explained. ``message`` (what ``sensevm run`` shows on
    stderr, and ``e.message`` to a handler) names the deciding rule, where it was declared and
    the call chain; ``text`` (what the reference shows: a test block's FAIL line, a commit's
    failure detail in the audit log) keeps the reference's words, ``bare``."""

    def __init__(self, bare: str, explained: str, *, located: bool = True):
        super().__init__(explained, located=located)
        self.bare = bare

    @property
    def text(self) -> str:
        if self.located and self.pos is not None and self.pos.line > 0:
            return f"[line {self.pos.line}] {self.bare}"
        return self.bare


# It is a SensePolicyError to every reader, by name too (type(err).__name__, a host's report).
Denial.__name__ = Denial.__qualname__ = "SensePolicyError"


def denial(subject: str, capability: str, scope, frame, callee: Optional[str] = None, *,
           located: bool = True) -> SensePolicyError:
    """The error refusing ``capability`` to ``subject`` (``tool 'pay'``) in ``scope`` and
    ``frame``: a Denial when a deny rule decided; for an EXPLICIT capability nothing allows,
    the reference-style refusal (it says which allow to add)."""
    if capability in EXPLICIT:
        why = granted(capability, scope, frame) or DENY
        if why != DENY:
            return SensePolicyError(f"{subject} {refusal_text(capability, why)}",
                                    located=located)
    bare = f"{subject} requires capability '{capability}', which is denied by policy"
    return Denial(bare, f"{subject} requires capability '{capability}', which is denied by "
                        f"{explain(capability, scope, frame, callee)}", located=located)


def explained_detail(capability: str, scope, frame, callee: Optional[str] = None) -> str:
    """The host-side audit detail of a denial (event ``denial_reason``): its rule and chain."""
    if capability in EXPLICIT and granted(capability, scope, frame) != DENY:
        return (f"capability '{capability}' is not allowed by any policy (it needs "
                f"'policy: allow {capability}')")
    return f"capability '{capability}' denied by {explain(capability, scope, frame, callee)}"


def rules_in_force(scope) -> dict[str, str]:
    """Every capability mentioned on the chain, with the decision that applies (for tools)."""
    seen: dict[str, str] = {}
    while scope is not None:
        if scope.policy:
            for cap, effect in scope.policy.items():
                seen.setdefault(cap, effect)
        scope = scope.parent
    return seen
