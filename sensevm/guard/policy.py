"""Capability decisions for the action and tool handlers: lexical policy plus the call-chain rule.

Spec 11: every scope may own a rule table; the first table on the lexical chain that mentions a
capability decides, and a capability nobody mentions is allowed. Spec 21.2 adds stack
inspection: the capability must also not be denied from any frame on the active call chain,
each judged by the same lexical lookup from the scope it is executing in. Deny wins, so a
caller's ``deny`` reaches every function, tool and action body it calls.
"""

from __future__ import annotations

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


def denial_text(capability: str, scope, frame) -> str:
    """The end of a capability check's refusal: why ``allowed`` said no."""
    if capability in EXPLICIT:
        return refusal_text(capability, granted(capability, scope, frame) or DENY)
    return f"requires capability '{capability}', which is denied by policy"


def set_rule(scope, capability: str, effect: str) -> None:
    if scope.policy is None:
        scope.policy = {}
    scope.policy[capability] = effect


def rules_in_force(scope) -> dict[str, str]:
    """Every capability mentioned on the chain, with the decision that applies (for tools)."""
    seen: dict[str, str] = {}
    while scope is not None:
        if scope.policy:
            for cap, effect in scope.policy.items():
                seen.setdefault(cap, effect)
        scope = scope.parent
    return seen
