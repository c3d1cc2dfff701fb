"""The second look: before an outgoing action verifies and again before it commits, every
recipient, amount, link and code argument that outside content influenced must be vouched for
by the user's words, the program's own text or an uninfluenced trusted record.

The VM calls ``SecondLook.evaluate`` from its verify and commit handlers (vm.py), after the
policy check, for actions that send data out (declared ``sends``, or requiring an outbound
capability: OUTBOUND). A flagged evaluation makes the action require ``.approve()``
given *after* the flag, whatever the policy or declaration say; the approval is bound to a
digest of the arguments and their origins, so changing an argument asks again. Every
evaluation is recorded host-side in the audit trail. The matching rules are in endorse.py and
the labels in provenance.py.
"""

from __future__ import annotations

from . import provenance as P

_E = None
_new_int = int.__new__


def _endorse():
    """endorse.py, imported at the first check (it needs decimal, which start-up does not)."""
    global _E
    if _E is None:
        from . import endorse
        _E = endorse
    return _E

PREVIEW = 60        # characters of a value shown in a reason or an audit record

# Capabilities that send data out of the program, as prefixes ("email." covers email.send).
# (Here, not in endorse.py: telling whether an action is outgoing must not cost the import of
# the matching rules, which a program that sends nothing never needs.)
OUTBOUND = ("email.", "mail.", "sms.", "payment.", "pay.", "calendar.invite", "http.post",
            "net.post", "shell.exec")


def is_outbound(capability, sends: bool = False) -> bool:
    if sends:
        return True
    if capability is None:
        return False
    return any(capability == p or (p.endswith(".") and capability.startswith(p))
               for p in OUTBOUND)


class Finding:
    __slots__ = ("param", "role", "value", "origins", "endorsed", "verdict")

    def __init__(self, param, role, value, origins, endorsed, verdict):
        self.param = param
        self.role = role
        self.value = value            # the plain value checked (a whole argument or a part)
        self.origins = origins
        self.endorsed = endorsed      # (origin, text) of the clean span that vouched, or None
        self.verdict = verdict        # "clean" (not influenced), "endorsed" or "flagged"

    def as_json(self) -> dict:
        return {
            "param": self.param, "role": self.role, "preview": _preview(self.value),
            "origins": sorted(P.origin_text(o) for o in self.origins) or ["literal"],
            "endorsed_by": (P.origin_text(self.endorsed[0]) if self.endorsed else None),
            "verdict": self.verdict,
        }


class Evaluation:
    __slots__ = ("action", "findings", "digest", "stage")

    def __init__(self, action, findings, digest, stage):
        self.action = action
        self.findings = findings
        self.digest = digest
        self.stage = stage

    @property
    def flagged(self) -> list:
        return [f for f in self.findings if f.verdict == "flagged"]

    def reason(self) -> str:
        """A plain sentence naming the first flagged value and where it came from."""
        f = self.flagged[0]
        sources = sorted({P.describe(o) for o in f.origins if o[0] == "untrusted"})
        if not sources:
            sources = sorted({P.describe(o) for o in f.origins})
        where = ", ".join(sources)
        what = {"recipient": "goes to", "link": "carries the link", "code": "runs the code",
                "amount": "is for the amount", "content": "contains"}[f.role]
        if f.role == "amount":
            tail = f"came from {where}, and you never gave that amount"
        else:
            tail = f"came from {where}, not from you or your records"
        more = len(self.flagged) - 1
        extra = f" ({more} more value{'s' if more > 1 else ''} flagged)" if more else ""
        return (f"'{self.action.name}' {what} {_preview(f.value)} (argument '{f.param}'), "
                f"which {tail}{extra}")

    def as_json(self) -> dict:
        return {"stage": self.stage, "digest": self.digest,
                "decision": "ask" if self.flagged else "pass",
                "findings": [f.as_json() for f in self.findings]}


def _preview(value) -> str:
    text = str(P.plain(value)) if not isinstance(value, list) else repr(value)
    return repr(text if len(text) <= PREVIEW else text[:PREVIEW] + "...")


class SecondLook:
    """One run's second look: the evidence seen so far and the tool-call counter for origins.

    Shared by the VM and its worker execution states (they share this object)."""

    def __init__(self):
        self._units: list = []
        self._untrusted: dict = {}            # tool name -> the LInt class of its origin
        # Set once any labelled value exists: from then on tier 2 runs no leaf forms (they
        # have no frame to keep a pc label on).
        self.live = False
        self.evidence: list = []          # (origin, text): the user's words, trusted records
        self._seen: set = set()
        self._literals = None

    # -- minting labels where values enter the program

    def add_evidence(self, origin, text) -> None:
        key = (origin, text)
        if text and key not in self._seen:
            self._seen.add(key)
            self.evidence.append(key)

    def user_text(self, text: str):
        """The user's own words (an ask_human answer, the run's request): evidence, labelled."""
        self.add_evidence(P.USER, text)
        self.live = True
        return P.label(text, frozenset({P.USER}))

    def tool_result(self, tool, value):
        """A tool's result: trusted (and then evidence) or untrusted, as the tool is declared."""
        self.live = True
        decl = tool.decl
        if decl.trusted:
            value = P.label(value, P.only(P.trusted(decl.name)))
            self.context(value)
            return value
        cls = self._untrusted.get(decl.name)
        if cls is None:
            cls = self._untrusted[decl.name] = P.int_class(P.only(P.untrusted(decl.name)))
        origins = cls.origins
        t = type(value)
        if t is int:
            return _new_int(cls, value)         # the common cases, without label()'s dispatch
        if t is str:
            return P.LStr(value, ((0, len(value), origins),))
        return P.label(value, origins)

    def context(self, *values) -> None:
        """Text a model or a trusted record showed: its clean spans count as evidence (the
        literal half of a prompt like ``"Email a@b.example. Notes: " + page`` vouches for
        that address)."""
        for v in values:
            for origin, text in P.clean_spans(v):
                self.add_evidence(origin, text)
            for x in _leaves(v):
                if (type(x) in P.INT_TYPES or type(x) is P.LFloat) \
                        and not P.is_influenced(x.origins):
                    self.add_evidence(P._best(x.origins), str(P.plain(x)))

    # -- the check

    def add_unit(self, unit) -> None:
        """A loaded unit of code (its literals are gathered at the first check)."""
        self._units.append(unit)
        self._literals = None

    def literals(self) -> list:
        """The String constants the program's code pushes: its own words -- except inside
        tool bodies, whose text stands for what the tool fetches."""
        if self._literals is None:
            from .opcodes import Op
            from .program import CodeKind
            load_const = int(Op.LOAD_CONST)
            found = set()
            for unit in self._units:
                for prepared in unit:
                    if prepared.code.kind is CodeKind.TOOL_BODY:
                        continue
                    for op, a, _ in prepared.instrs:
                        if op == load_const and type(a) is str and a:
                            found.add(a)
            self._literals = [(P.LITERAL, c) for c in sorted(found)]
        return self._literals

    def evaluate(self, action, stage: str) -> Evaluation:
        definition = action.definition
        roles = dict(getattr(definition.decl, "roles", ()))
        findings = []
        for param, value in zip(definition.params, action.args):
            role = _endorse().role_of(param, roles.get(param))
            for leaf in _leaves(value):
                findings.extend(self._check(param, role, leaf))
        return Evaluation(action, findings, _digest(action), stage)

    def _check(self, param, role, leaf) -> list:
        origins = P.origins_of(leaf)
        value = P.plain(leaf)
        E_ = _endorse()
        if role == "content":
            # Recipients and links inside any text an outgoing action sends are checked too,
            # each in the span it came from.
            if type(value) is not str or not P.is_influenced(origins):
                return []
            out = []
            for part, kind in ([(e, "recipient") for e in E_.find_emails(value)]
                               + [(p, "recipient") for p in E_.find_phones(value)]
                               + [(u, "link") for u in E_.find_urls(value)]):
                part_origins = _origins_of_part(leaf, part)
                if not P.is_influenced(part_origins):
                    continue
                endorsed = _endorse().endorsed_by(kind, part, self._evidence(leaf, kind))
                out.append(Finding(param, kind, part, part_origins, endorsed,
                                   "endorsed" if endorsed else "flagged"))
            return out
        if not P.is_influenced(origins):
            return [Finding(param, role, value, origins, None, "clean")] if origins else []
        endorsed = _endorse().endorsed_by(role, value, self._evidence(leaf, role))
        return [Finding(param, role, value, origins, endorsed,
                        "endorsed" if endorsed else "flagged")]

    def _evidence(self, leaf, role) -> list:
        """Clean text that may vouch, by precedence: user, literal, trusted."""
        spans = P.clean_spans(leaf) + self.evidence + self.literals()
        if role == "amount":
            # Only an amount you gave (or the program's own text) vouches for an amount.
            spans = [s for s in spans if s[0][0] in ("user", "literal")]
        rank = {"user": 0, "literal": 1, "trusted": 2}
        return sorted(spans, key=lambda s: rank.get(s[0][0], 3))


def _leaves(value):
    """The values inside an argument (arrays flattened, as nested attendee lists are)."""
    if type(value) is not list:
        yield value
        return
    seen = set()
    stack = [value]
    while stack:
        x = stack.pop()
        if type(x) is list:
            if id(x) not in seen:
                seen.add(id(x))
                stack.extend(reversed(x))
        else:
            yield x


def _origins_of_part(leaf, part: str) -> frozenset:
    """The origins of the spans that the first occurrence of ``part`` overlaps in ``leaf``."""
    text = str(P.plain(leaf)).lower()
    at = text.find(part.lower())
    if at < 0 or type(leaf) is not P.LStr:
        return P.origins_of(leaf)
    end = at + len(part)
    out = P.EMPTY
    for start, stop, origins in leaf.spans:
        if start < end and at < stop:
            out = P.union(out, origins)
    return out


def _digest(action) -> str:
    """The arguments and their origins, hashed: what an approval after a flag is bound to."""
    import hashlib
    import json

    def canon(v):
        if type(v) is list:
            return ["list", [canon(x) for x in v]]
        origins = sorted(P.origin_text(o) for o in P.origins_of(v))
        if type(v) is P.LStr:
            origins = [[a, b, sorted(P.origin_text(o) for o in o_)] for a, b, o_ in v.spans]
        p = P.plain(v)
        if type(p) in (str, int, bool) or p is None:
            return [type(p).__name__, p, origins]
        if type(p) is float:
            return ["float", repr(p), origins]
        return ["other", str(p), origins]

    doc = [action.name, [canon(a) for a in action.args]]
    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
