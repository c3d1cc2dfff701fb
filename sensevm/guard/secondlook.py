"""The second look: before an outgoing action verifies and again before it commits, and before
an outgoing tool runs, every recipient, amount, link, code and credential argument that outside
content influenced must be vouched for by the user's words, the program's own text or an
uninfluenced trusted record.

The VM calls ``SecondLook.evaluate`` from its verify and commit handlers (vm.py), after the
policy check, for actions that send data out (declared ``sends``, requiring an outbound
capability, or taking a credential: ``outbound.is_outbound``). A flagged evaluation makes the action
require ``.approve()`` given *after* the flag, whatever the policy or declaration say; the
approval is bound to a digest of the arguments and their origins, so changing an argument asks
again. An outgoing tool is evaluated at each call, before its body runs (``evaluate_tool``): a
flagged call is refused, and ``t.approve()`` after the refusal lets the same call run once.
Every evaluation with labelled arguments is recorded host-side in the audit trail, each value
with the kind it was recognised as and what vouched for it. The matching rules are in
endorse.py and the labels in provenance.py.
"""

from __future__ import annotations

from _thread import allocate_lock

from sensevm.guard import audit as A
from sensevm.guard import lifecycle as L
from sensevm.guard import provenance as P

_E = None
_new_int = int.__new__
_new_str = str.__new__


def _endorse():
    """endorse.py, imported at the first check (it needs decimal, which start-up does not)."""
    global _E
    if _E is None:
        from sensevm.guard import endorse
        _E = endorse
    return _E

PREVIEW = 60        # characters of a value shown in a reason or an audit record

_RANK = {"user": 0, "literal": 1, "trusted": 2}
# A declaration's parameters and their named roles (SecondLook._evaluate), by the id of the
# declaration, which the entry holds (one entry a declaration a program makes).
_NAMED: dict = {}
_PYTHON = P.only(P.untrusted("python"))


class Finding:
    __slots__ = ("param", "role", "value", "origins", "endorsed", "verdict", "kind", "path",
                 "matched")

    def __init__(self, param, role, value, origins, endorsed, verdict, kind=None, path=None,
                 matched=None):
        self.param = param
        self.role = role
        self.value = value            # the plain value checked (a whole argument or a part)
        self.origins = origins
        self.endorsed = endorsed      # (origin, text) of the clean text that vouched, or None
        self.verdict = verdict        # "clean" (not influenced), "endorsed" or "flagged"
        self.kind = kind              # what the value was recognised as (endorse.py)
        self.path = path              # where inside the argument (an element, an entry)
        self.matched = matched        # the value as compared (its key), when it has a kind

    def shown(self) -> str:
        return _masked(self.value) if self.role == "credential" else _preview(self.value)

    def as_json(self) -> dict:
        out = {
            "param": self.param, "role": self.role, "kind": self.kind, "preview": self.shown(),
            "origins": sorted(P.origin_text(o) for o in self.origins) or ["literal"],
            "endorsed_by": (P.origin_text(self.endorsed[0]) if self.endorsed else None),
            "verdict": self.verdict,
        }
        if self.path is not None and self.path != self.param:
            out["path"] = self.path
        if self.matched is not None and self.role != "credential":
            out["compared_as"] = self.matched
        if self.endorsed and self.role != "credential":
            out["evidence"] = _preview(self.endorsed[1])
        return out


class Evaluation:
    """One verdict on a call's arguments. The same at every stage (verify, commit, a tool's
    call) and for every call with the same arguments and origins, so the cache and an action
    keep the object itself; the stage is given where it shows (``detail``, ``as_json``)."""

    __slots__ = ("name", "args", "findings", "flagged", "_digest", "_pieces", "_kept_tail",
                 "details", "_reason")

    def __init__(self, name, args, findings):
        self.name = name
        self.args = args
        self.findings = findings
        if not findings:
            self.flagged = _NONE
        elif len(findings) == 1:        # (the common case, without a comprehension's frame)
            self.flagged = findings if findings[0].verdict == "flagged" else _NONE
        else:
            self.flagged = [f for f in findings if f.verdict == "flagged"]
        self._digest = None
        self._pieces = None         # what a passing verdict's digest is made from (_cached)
        self._kept_tail = None      # kept_detail()'s findings and pieces
        self.details = {}           # kept_detail()'s by stage: one each, however many records
        #                             show it (a loop's audit rows share it)
        self._reason = None

    @property
    def digest(self) -> str:
        """Made only for an evaluation that has findings (an unlabelled call has nothing to
        bind an approval to), when the VM reads it -- at once, before an argument can change."""
        if self._digest is None:
            pieces = self._pieces
            self._digest = _digest(self.name, self.args) if pieces is None \
                else _digest_of(pieces)
        return self._digest

    def kept_detail(self, stage: str) -> tuple:
        """The audit record's detail as the record keeps it: ``(_DETAIL, decision, digest,
        stage, n)``, then each of the n findings' four fields (what its JSON is written from:
        _kept_finding), then, for a passing verdict whose digest is not made yet, what it is
        made from (digest None, and _digest_pieces'). Written as text (_detail_text) only
        when the record is read (audit.detail_text: its records, the durable file, a journal).

        A new verdict is made at every check of new arguments, and most records are never
        read: writing each one's JSON text (about 0.4 kB, kept as long as the log) and hashing
        its arguments cost more than the rest of such a check. The tuple holds no argument (a
        finding's value is its preview; the pieces are Strings of at most _PIECES_CHARS
        characters in all), and only strings, numbers, None and the shared shapes: flat, so
        that the first collection that sees it stops tracking it (a tuple inside it would be
        seen after it, and keep it tracked to the next). The same one for every record of a
        stage; the stages share its strings."""
        kept = self.details.get(stage)
        if kept is not None:
            return kept
        tail = self._kept_tail
        if tail is None:
            found = self.findings
            tail = (len(found),) + (
                _kept_finding(found[0]) if len(found) == 1
                else tuple([field for f in found for field in _kept_finding(f)]))
            if self._digest is None:
                if self._pieces is None:
                    self.digest         # (made from the arguments it keeps)
                else:
                    tail += self._pieces
            self._kept_tail = tail
        kept = self.details[stage] = (_DETAIL, "ask" if self.flagged else "pass",
                                      self._digest, stage) + tail
        return kept

    def detail(self, stage: str) -> str:
        """``json.dumps(self.as_json(stage), ensure_ascii=False, sort_keys=True)``: the text
        of the audit record's detail (kept_detail)."""
        return _detail_text(self.kept_detail(stage))

    def reason(self) -> str:
        """A plain sentence naming the first flagged value and where it came from."""
        if self._reason is None:
            self._reason = self._reason_text()
        return self._reason

    def _reason_text(self) -> str:
        f = self.flagged[0]
        sources = sorted({P.describe(o) for o in f.origins if o[0] == "untrusted"})
        if not sources:
            sources = sorted({P.describe(o) for o in f.origins})
        where = ", ".join(sources)
        what = {"recipient": "goes to", "link": "carries the link", "code": "runs the code",
                "amount": "is for the amount", "content": "contains",
                "credential": "sets the credential"}[f.role]
        if f.role == "amount":
            tail = f"came from {where}, and you never gave that amount"
        else:
            tail = f"came from {where}, not from you or your records"
        kind = f", {_ARTICLE.get(f.kind)}" if f.kind in _ARTICLE else ""
        more = len(self.flagged) - 1
        extra = f" ({more} more value{'s' if more > 1 else ''} flagged)" if more else ""
        return (f"'{self.name}' {what} {f.shown()} (argument '{f.param}'{kind}), "
                f"which {tail}{extra}")

    def as_json(self, stage: str) -> dict:
        return {"stage": stage, "digest": self.digest,
                "decision": "ask" if self.flagged else "pass",
                "findings": [f.as_json() for f in self.findings]}


def _kept_finding(f: Finding) -> tuple:
    """(shape, shown, evidence, compared as) of a finding: what its JSON is written from
    (_finding_text). The shape is what the findings of one parameter, role, kind, origins,
    vouching origin and verdict share, written once (_finding_shape); shown is the value's
    preview (a credential's mask), evidence the preview of the text that vouched (the very
    object shown, when that is the value's own text: a tool's address vouched for by the
    trusted record that gave it), or None."""
    endorsed = f.endorsed
    path = f.path
    if path is None or path == f.param:
        key = (f.param, f.role, f.kind, f.verdict, f.origins,
               endorsed[0] if endorsed else None)
        shape = _SHAPES.get(key)
        if shape is None:
            shape = _finding_shape(f)
            if len(_SHAPES) < _SHAPES_KEPT:
                _SHAPES[key] = shape
    else:
        shape = _finding_shape(f)       # (a value inside a container: its path is its own)
    value = f.value
    if shape[0]:
        return (shape, _masked(value), None, None)
    if type(value) is str:
        # (_preview's common case, a short String shown whole, written out.)
        shown = repr(value) if len(value) <= PREVIEW else _preview(value)
        evidence = None if not endorsed else shown if endorsed[1] == value \
            else _preview(endorsed[1])
    else:
        shown = _preview(value)
        evidence = None if not endorsed else _preview(endorsed[1])
    return (shape, shown, evidence, f.matched)


def _finding_text(kept: tuple) -> str:
    """``json.dumps(f.as_json(), ensure_ascii=False, sort_keys=True)`` of the finding ``kept``
    was made from (_kept_finding), written out key by key in sorted order with json's own
    string escaping."""
    (credential, head, middle, tail), shown, evidence, matched = kept
    shown_json = _json_string(shown)
    if credential:
        return f"{{{head}{middle}{shown_json}{tail}"
    if evidence is not None:
        head = (f'{head}, "evidence": '
                f'{shown_json if evidence is shown else _json_string(evidence)}')
    if matched is None:
        return f"{{{head}{middle}{shown_json}{tail}"
    return (f'{{"compared_as": '
            f'{_json_string(matched) if type(matched) is str else _json_value(matched)}, '
            f'{head}{middle}{shown_json}{tail}')


def _detail_text(kept: tuple) -> str:
    """The text of a detail kept as Evaluation.kept_detail keeps it: "stage" sorts last."""
    _, decision, digest, stage, count = kept[:5]
    end = 5 + 4 * count
    if digest is None:
        digest = _digest_of(kept[end:])
    tail = _STAGE_TAIL.get(stage)
    if tail is None:
        tail = ', "stage": ' + _json_string(stage) + "}"
    written = ", ".join([_finding_text(kept[at:at + 4]) for at in range(5, end, 4)])
    # (The digest is sha256: and hex digits, with nothing to escape.)
    return f'{{"decision": "{decision}", "digest": "{digest}", "findings": [{written}]{tail}'


# What an audit record's detail kept as a tuple starts with, for audit.detail_text to find
# _detail_text by.
_DETAIL = "second look"
A.write_details(_DETAIL, _detail_text)


def _finding_shape(f: Finding) -> tuple:
    """(credential?, the text from "endorsed_by" to before "evidence", from after it to
    "preview", and after that) of ``f``'s JSON."""
    endorsed = f.endorsed
    middle = (', "kind": ' + _json_value(f.kind) + ', "origins": '
              + (_origin_names(f.origins)[1] if f.origins else '["literal"]') + ', "param": '
              + _json_value(f.param))
    if f.path is not None and f.path != f.param:
        middle += ', "path": ' + _json_value(f.path)
    return (f.role == "credential",
            '"endorsed_by": ' + (_json_string(P.origin_text(endorsed[0])) if endorsed
                                 else "null"),
            middle + ', "preview": ',
            ', "role": ' + _json_value(f.role) + ', "verdict": ' + _json_value(f.verdict) + "}")


# Finding shapes' text by what decides it: a run has a few (a declaration's parameters, each
# with the origins its values come from), shared by all its findings.
_SHAPES: dict = {}
_SHAPES_KEPT = 4096


def _json_string(text: str) -> str:
    """json.dumps(text, ensure_ascii=False): the same function the encoder escapes with."""
    global _json_string
    from json.encoder import encode_basestring
    _json_string = encode_basestring
    return encode_basestring(text)


def _json_value(value) -> str:
    if type(value) is str:
        return _json_string(value)
    if value is None:
        return "null"
    import json
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


_STAGE_TAIL = {stage: f', "stage": "{stage}"}}' for stage in ("verify", "commit", "call")}

# Kinds a reason names, because they say why an address that looks right is not the one given.
_ARTICLE = {"malformed email": "a malformed e-mail address", "malformed url": "a malformed URL",
            "iban (unverified)": "an IBAN whose check digits do not verify"}

_NONE: list = []        # (shared: read, never changed)
_NOTHING = Evaluation("", (), [])


def _preview(value) -> str:
    if type(value) is str and len(value) <= PREVIEW:
        return repr(value)          # (the common case: a short String, shown whole)
    text = str(P.plain(value)) if not isinstance(value, (list, dict)) else repr(value)
    return repr(text if len(text) <= PREVIEW else text[:PREVIEW] + "...")


def _masked(value) -> str:
    """A credential is never written out: the reason and the audit trail give its length."""
    text = str(P.plain(value))
    return f"<secret, {len(text)} character{'' if len(text) == 1 else 's'}>"


# Arguments of these types are not labelled and hold nothing: the common case, decided first.
_PLAIN_TYPES = frozenset((str, int, float, bool, type(None)))
_LABELLED = P.LABELLED     # (one set, grown in place as labelled Int classes are made)


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
        # Pieces of evidence and units of code added so far (both only grow): a verdict holds
        # while this is what it was.
        self.grown = 0
        self._seen: set = set()
        self._literals = None
        # Verdicts by what decides them (_cached), all made when ``grown`` was
        # ``_verdicts_grown``: any other is dead (grown never goes back), so they go at once.
        self._verdicts: dict = {}
        self._verdict_chars = 0
        self._verdicts_grown = 0
        self._reset_index()

    def _reset_index(self) -> None:
        # What the evidence holds, by key, each with the best span (by precedence) holding it:
        # built as the first checks need it, and extended as evidence grows.
        self._keys: dict = {}
        self._amounts: dict = {}          # Decimal -> [(currency, span)]
        self._indexed = 0
        self._literals_indexed = False

    # -- minting labels where values enter the program

    def add_evidence(self, origin, text) -> None:
        key = (origin, text)
        if text and key not in self._seen:
            self._seen.add(key)
            self.evidence.append(key)
            self._grow()

    def _grow(self) -> None:
        # After the addition, and under the lock once threads run Sense code: two threads
        # adding at once must not leave it counting one, or a verdict made between them would
        # hold after the second. (Until then, lifecycle.threaded, nobody can race: no lock.)
        if L.threaded:
            with _VERDICT_LOCK:
                self.grown += 1
        else:
            self.grown += 1

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
        if t is str and P.live:
            s = _new_str(_LStr, value)          # (LStr's __new__, written out)
            s._spans = ((0, len(value), origins),)
            return s
        return P.label(value, origins)

    def context(self, *values) -> None:
        """Text a model or a trusted record showed: its clean spans count as evidence (the
        literal half of a prompt like ``"Email a@b.example. Notes: " + page`` vouches for
        that address)."""
        for v in values:
            for origin, text in P.clean_spans(v):
                self.add_evidence(origin, text)
            if type(v) is _LStr or type(v) is str:
                continue            # (no number inside)
            for x in _flat(v):
                if (type(x) in P.INT_TYPES or type(x) is P.LFloat) \
                        and not P.is_influenced(x.origins):
                    self.add_evidence(P._best(x.origins), str(P.plain(x)))

    # -- the program's own words

    def add_unit(self, unit) -> None:
        """A loaded unit of code (its literals are gathered at the first check)."""
        self._units.append(unit)
        self._grow()
        self._literals = None
        self._literals_indexed = False

    def literals(self) -> list:
        """The constants the program's code pushes: its own words and numbers -- except inside
        tool bodies, whose text stands for what the tool fetches. Strings as (LITERAL, text);
        numbers (Int and Float constants, amounts the author wrote) as (LITERAL, number)."""
        if self._literals is None:
            from sensevm.bytecode.opcodes import Op
            from sensevm.bytecode.program import CodeKind
            load_const = int(Op.LOAD_CONST)
            found = set()
            numbers = set()
            for unit in self._units:
                for prepared in unit:
                    if prepared.code.kind is CodeKind.TOOL_BODY:
                        continue
                    for op, a, _ in prepared.instrs:
                        if op == load_const:
                            t = type(a)
                            if t is str and a:
                                found.add(a)
                            elif t is int or t is float:
                                numbers.add(a)
            self._literals = ([(P.LITERAL, c) for c in sorted(found)]
                              + [(P.LITERAL, n) for n in sorted(numbers, key=repr)])
        return self._literals

    def _index(self) -> None:
        """Bring the index up to the evidence and literals seen so far."""
        E = _E or _endorse()
        if not self._literals_indexed:
            if self._indexed:
                self._reset_index()
            for span in self.literals():
                if type(span[1]) is str:
                    self._add_to_index(E, span)
                else:
                    amount = E.as_amount(span[1])
                    if amount is not None:
                        self._add_amount(amount[0], None, (P.LITERAL, repr(span[1])))
            self._literals_indexed = True
        evidence = self.evidence
        while self._indexed < len(evidence):
            self._add_to_index(E, evidence[self._indexed])
            self._indexed += 1

    def _add_to_index(self, E, span) -> None:
        origin, text = span
        analysis = E.analyse(text)
        rank = _RANK.get(origin[0], 3)
        keys = self._keys
        for key in analysis.keys:
            known = keys.get(key)
            if known is None or _RANK.get(known[0][0], 3) > rank:
                keys[key] = span
        if origin[0] in ("user", "literal"):        # only you, or the author, give amounts
            for value, currency in analysis.amounts:
                self._add_amount(value, currency, span)

    def _add_amount(self, value, currency, span) -> None:
        entries = self._amounts.setdefault(value, [])
        if (currency, span) not in entries:
            entries.append((currency, span))
            entries.sort(key=lambda e: _RANK.get(e[1][0][0], 3))

    # -- the check

    def evaluate(self, action) -> Evaluation:
        """The verdict on an outgoing action's arguments as they are now (at verify, at
        commit)."""
        looked = action.looked
        if looked and looked[1] == self.grown:
            # Its verdict at verify: the same arguments (none of them a container, so none
            # changed), the same origins, no evidence or code added since.
            return looked[0]
        args = action.args
        # One pass: is anything labelled, is anything not a String, is anything a container,
        # and might a labelled String hold something to vouch for.
        plain = scalars = strings = quiet = True
        for a in args:
            t = type(a)
            if t is _LStr:
                plain = False
                if "@" in a:
                    quiet = False   # (an address, most likely: something to vouch for)
            elif t is not str:
                strings = False
                if t not in _PLAIN_TYPES:
                    plain = False
                    if t not in _LABELLED:
                        scalars = False     # (a container: it may change before commit)
                        break
        if plain:
            # Nothing labelled, nothing inside, and never will be: a plain value cannot change
            # and a verdict on nothing labelled depends on no evidence (False: the VM's commit
            # then does not ask).
            action.looked = False
            return _NOTHING
        if strings:
            definition = action.definition
            if quiet and _sends_nothing(definition, args):
                action.looked = False   # (nothing found, in arguments that cannot change)
                return _NOTHING
            # The verdict's key (_key's, made here for Strings and labelled Strings): only
            # now, as a page's text sent on with nothing in it is decided without one.
            found = []
            for a in args:
                # (The String itself for its text: equal, with the hash it keeps, to the
                # plain copy _key makes; LStr compares and hashes as str does.)
                found.append(a if type(a) is str else (_LStr, a, a._spans or a.spans))
            ev = self._cached(definition, args, tuple(found), True)
        else:
            ev = self._cached(action.definition, args, _key(args))
        if scalars:
            if ev.findings:
                if ev._digest is None and ev._pieces is None:
                    ev.digest           # (bound now, from the arguments as they are)
                action.looked = (ev, self.grown)
            else:
                # Labelled, but nothing to vouch for (a page's text with no address in it):
                # what is found depends on the arguments alone (evidence and code only decide
                # who vouches for what is), and these cannot change, so commit finds nothing
                # either and does not ask.
                action.looked = False
        return ev

    def evaluate_tool(self, tool, args) -> Evaluation:
        """An outgoing tool's call, before its body runs (stage ``call``)."""
        for a in args:
            if type(a) not in _PLAIN_TYPES:
                break
        else:
            return _NOTHING
        return self._cached(tool, args, _key(args))

    def _cached(self, definition, args, found, flat=False) -> Evaluation:
        """The evaluation of ``definition`` (an action's or a tool's) with ``args``, whose key
        is ``found`` (_key's, or None: not cacheable; ``flat``: every argument is a String,
        labelled or not, each keyed by itself): computed once for the same definition,
        the same arguments with the same origins (every span's) and the same evidence and
        code, then reused -- at commit after verify, and by later calls alike. The key is made
        afresh from the arguments' current contents at every check, so an Array or Map changed
        in between is a different key."""
        # Evidence and units are only ever appended to: how many were says which there are,
        # and a verdict depends on nothing else besides the definition and the arguments.
        grown = self.grown
        if found is not None:
            key = (definition, found)
            if self._verdicts_grown == grown:
                hit = self._verdicts.get(key)
                if hit is not None:
                    return hit[0]
        decl = definition.decl
        ev = self._evaluate(definition.name, definition.params, args, decl, decl.capability)
        if found is None or not ev.findings:
            if ev.findings:
                ev.args = list(args)    # (its own copy, for a digest made later)
            return ev
        ev.args = None          # (the cache keeps no mutable argument alive)
        # (Only now: a verdict found in the cache needs none. A flat key keeps the arguments'
        # own texts, so its characters are theirs, counted by a loop: sum(map(len, args))
        # costs more than its few additions.)
        if flat:
            chars = 0
            for a in args:
                chars += len(a)
            # The digest binds an approval to the arguments: a flagged verdict's is made now.
            # A passing one's is only shown in its records, and is made when one is read, from
            # what it is made of now (Strings, kept as text and their one span's origins; a
            # String of several spans, or long texts, are hashed now).
            pieces = None if ev.flagged or chars > _PIECES_CHARS else _digest_pieces(ev.name,
                                                                                   args)
            if pieces is None:
                ev._digest = _digest(ev.name, args)     # bound now, from the arguments now
            else:
                ev._pieces = pieces
        else:
            ev._digest = _digest(ev.name, args)
            chars = _key_chars(found)
        # Agents and async tools check from threads of their own, which lifecycle.threaded
        # says exist (set before the first starts): until then nobody can race, and the lock
        # (about an eighth of a microsecond) is not taken.
        locked = L.threaded
        if locked:
            _VERDICT_LOCK.acquire()
        try:
            verdicts = self._verdicts
            if self._verdicts_grown != grown:
                if grown < self._verdicts_grown:
                    return ev           # (another thread's check saw more evidence)
                verdicts.clear()
                self._verdict_chars = 0
                self._verdicts_grown = grown
            while verdicts and (len(verdicts) >= _VERDICT_ENTRIES
                                or self._verdict_chars + chars > _VERDICT_CHARS):
                old = next(iter(verdicts))
                self._verdict_chars -= verdicts.pop(old)[1]
            if chars <= _VERDICT_CHARS:
                verdicts[key] = (ev, chars)
                self._verdict_chars += chars
        finally:
            if locked:
                _VERDICT_LOCK.release()
        return ev

    def _evaluate(self, name, params, args, decl, capability) -> Evaluation:
        """The evaluation, holding ``args`` itself (the caller copies it if it keeps it)."""
        E = _E or _endorse()
        named = _NAMED.get(id(decl))
        if named is None or named[0] is not decl or named[1] != params:
            named = _NAMED[id(decl)] = _named(decl, params, capability, E)
        findings = []
        for param, role_named, value in zip(params, named[2], args):
            t = type(value)
            if t in _LABELLED:          # (a labelled scalar: its own leaf, no walk)
                role = role_named or (named[3] if t is _LStr
                                      else E.value_role(capability, P.plain(value)))
                if findings:
                    findings.extend(self._check(param, role, value, param, E))
                else:
                    findings = self._check(param, role, value, param, E)    # (its own list)
                continue
            if t in _PLAIN_TYPES:
                continue                # (a clean scalar: nothing to find)
            for leaf, hint, path in _leaves(value, param, E):
                role = role_named or hint or E.value_role(capability, P.plain(leaf))
                findings.extend(self._check(param, role, leaf, path, E))
        # (Nothing found: the one shared verdict on nothing, which holds no arguments. Only
        # what an evaluation found is read of it then.)
        return Evaluation(name, args, findings) if findings else _NOTHING

    def _check(self, param, role, leaf, path, E) -> list:
        if type(leaf) is _LStr:     # (P.origins_of and P.plain, written out for the common case)
            spans = leaf._spans or leaf.spans
            # (A String of one span is influenced or clean as a whole: checked only when it is
            # influenced, it has no clean text of its own to vouch for itself.)
            own = len(spans) != 1
            origins = P.origins_of(leaf) if own else spans[0][2]
            influenced = False
            for origin in origins:          # (P.is_influenced, written out)
                if origin[0] == "untrusted":
                    influenced = True
                    break
            if role == "content":
                # Recipients and links inside any text an outgoing call sends are checked too,
                # each by the spans it came from. (Only a String holds any: read as it is,
                # without a plain copy, which its parts' slices are.)
                if not influenced:
                    return []
                out = []
                for kind, key, start, end in E.sent_parts(leaf):
                    part_origins = _origins_between(leaf, start, end)
                    if not P.is_influenced(part_origins):
                        continue
                    part_role = "link" if key[0] in ("url", "url?") else "recipient"
                    part = (kind, key, leaf[start:end])
                    endorsed = self._endorsement(leaf, part_role, part, E, own)
                    out.append(Finding(param, part_role, part[2], part_origins, endorsed,
                                       "endorsed" if endorsed else "flagged", kind, path,
                                       _compared(part)))
                return out
            value = str.__str__(leaf)
        else:
            origins = P.origins_of(leaf)
            if not origins or role == "content":
                return []       # (nothing labelled; or not a String, which holds no part)
            own = True
            value = P.plain(leaf)
            influenced = P.is_influenced(origins)
        out = []
        for part in E.value_parts(role, value):
            kind, key, shown = part
            if not influenced:
                out.append(Finding(param, role, shown, origins, None, "clean", kind, path,
                                   _compared(part)))
                continue
            endorsed = self._endorsement(leaf, role, part, E, own)
            out.append(Finding(param, role, shown, origins, endorsed,
                               "endorsed" if endorsed else "flagged", kind, path,
                               None if key is None else key[1] if key[0] != "amount"
                               else _compared(part)))
        return out

    def _endorsement(self, leaf, role, part, E, own=True):
        """The clean text that holds a value equal to ``part``, by precedence (user, literal,
        trusted; the value's own clean spans first among equals), or None. ``own``: ``leaf``
        may hold clean text (False for an influenced String of one span, which holds none)."""
        best = None
        if own:
            for span in P.clean_spans(leaf):
                if role == "amount" and span[0][0] not in ("user", "literal"):
                    continue
                if E.matches(role, part, span[1]):
                    if best is None or _RANK.get(span[0][0], 3) < _RANK.get(best[0][0], 3):
                        best = span
        self._index()
        kind, key, shown = part
        if kind == "amount":
            found = None
            if key is not None:
                for currency, span in self._amounts.get(key[1], ()):
                    if key[2] is None or currency is None or currency == key[2]:
                        found = span
                        break
        elif key is not None:
            found = self._keys.get(key)
        else:
            found = None
            for span in self.evidence + [s for s in self.literals() if type(s[1]) is str]:
                if (found is None or _RANK.get(span[0][0], 3) < _RANK.get(found[0][0], 3)) \
                        and E.text_match(role, shown, span[1]):
                    found = span
                    if _RANK.get(span[0][0], 3) == 0:
                        break
        if found is not None and (best is None
                                  or _RANK.get(found[0][0], 3) < _RANK.get(best[0][0], 3)):
            best = found
        return best


def _sends_nothing(definition, args) -> bool:
    """True if ``args``, every one a String, hold nothing to vouch for, decided before any
    verdict is looked for or made: every labelled one is sent as content (the role its
    parameter's declaration or name gives it, or a String's where none does) and holds nothing
    that could be an address, a link or a number (endorse.sent_parts, which reads nothing
    then). So a page's text sent on to a literal address, new every turn, is checked without a
    key, the verdict cache or the evaluation's walk. Anything else is theirs (False), as is
    every check of a declaration before its first evaluation has found its roles."""
    decl = definition.decl
    named = _NAMED.get(id(decl))
    if named is None or named[0] is not decl or named[1] != definition.params:
        return False
    sent_parts = _E.sent_parts
    content = named[4]
    i = 0
    for a in args:      # (a count, not zip: a third of the loop's cost)
        if type(a) is _LStr and (not content[i] or sent_parts(a)):
            return False
        i += 1
    return True


def _named(decl, params, capability, E) -> tuple:
    """(decl, params, the role each parameter's declaration or name gives it, the role a
    String has where no name gives one, whether each parameter's String is sent as content):
    the same for every call of the declaration, found once. (value_role reads only the
    value's type and the capability. Found here rather than in _evaluate, whose every call
    would make cells for this comprehension's names.)"""
    roles = dict(getattr(decl, "roles", ()))
    named = [E.named_role(p, roles.get(p)) for p in params]
    string_role = E.value_role(capability, "")
    return (decl, params, named, string_role,
            tuple((role or string_role) == "content" for role in named))


def _compared(part):
    """A part's key as the audit record shows it (None for text, which has no kind)."""
    kind, key, shown = part
    if key is None:
        return None
    if key[0] == "amount":
        return str(key[1]) + (f" {key[2]}" if key[2] else "")
    return key[1]


def _flat(value):
    """The values inside an array or a map's keys and values (nested ones flattened), or the
    value itself."""
    if type(value) is not list and type(value) is not dict:
        yield value
        return
    seen = set()
    stack = [value]
    while stack:
        x = stack.pop()
        if type(x) is list or type(x) is dict:
            if id(x) not in seen:
                seen.add(id(x))
                stack.extend(reversed(x) if type(x) is list
                             else reversed([y for pair in x.items() for y in pair]))
        else:
            yield x


def _leaves(value, param, E):
    """(value, role hint, path) of every value inside an argument: array elements (nested
    arrays included), a Map's keys and values (EXTENSIONS.md E1), an Answer's value, a Memory's
    entries, and a Python map's, list's or object's contents (all of which Python code chose).
    An entry whose key names a role (``{"recipient": ..., "amount": ...}``) has that role unless
    the parameter has one; a Map's keys are checked too (``{address: amount}`` sends to them)."""
    t = type(value)
    if t in _PLAIN_TYPES or t in P.LABELLED:
        yield value, None, param
        return
    seen = set()
    stack = [(value, None, param)]
    while stack:
        x, hint, path = stack.pop()
        t = type(x)
        if t is list:
            if id(x) not in seen:
                seen.add(id(x))
                stack.extend(reversed([(y, hint, f"{path}[{i}]") for i, y in enumerate(x)]))
            continue
        if t in _PLAIN_TYPES or t in P.LABELLED:
            yield x, hint, path
            continue
        if t is dict:
            if id(x) not in seen:
                seen.add(id(x))
                inside = []
                for k, v in x.items():
                    shown = repr(P.plain(k))
                    inside.append((k, hint, f"{path}{{key {shown}}}"))
                    inside.append((v, E.named_role(str(P.plain(k))) or hint, f"{path}[{shown}]"))
                stack.extend(reversed(inside))
            continue
        kind = getattr(t, "type_name", None)
        if kind == "Answer":
            stack.append((x.value, hint, f"{path}.value"))
        elif kind == "Memory" and hasattr(x, "snapshot"):
            if id(x) not in seen:
                seen.add(id(x))
                entries = x.snapshot((None, None))
                stack.extend(reversed([(v, E.named_role(k) or hint, f"{path}[{k!r}]")
                                       for k, v in entries]))
        elif kind == "Python" and hasattr(x, "value"):
            yield from _python_leaves(x.value, hint, path, seen, E)
        # Functions, actions, agents, futures... carry no data of their own to look into.


def _python_leaves(obj, hint, path, seen, E):
    """The contents of a Python value, labelled as what Python code gives is (untrusted)."""
    stack = [(obj, hint, path)]
    while stack:
        x, hint, path = stack.pop()
        if x is None:
            continue
        if isinstance(x, (str, int, float)):
            yield P.label(x if type(x) in (str, int, float, bool) else _py_str(x), _PYTHON), \
                hint, path
        elif isinstance(x, (dict, list, tuple, set, frozenset)):
            if id(x) in seen:
                continue
            seen.add(id(x))
            try:        # a subclass's own items() or __iter__ may raise: then it is its text
                if isinstance(x, dict):
                    inside = [(v, E.named_role(_py_str(k)) or hint, f"{path}[{_py_repr(k)}]")
                              for k, v in list(x.items())]
                else:
                    inside = [(v, hint, f"{path}[{i}]") for i, v in enumerate(list(x))]
            except Exception:
                yield P.label(_py_str(x), _PYTHON), hint, path
                continue
            stack.extend(reversed(inside))
        else:
            yield P.label(_py_str(x), _PYTHON), hint, path


def _py_repr(x) -> str:
    try:
        text = repr(x)
        return text if type(text) is str else str.__str__(text)
    except Exception:
        return f"<python {type(x).__name__}>"


def _py_str(x) -> str:
    try:
        text = str(x)
        return text if type(text) is str else str.__str__(text)
    except Exception:       # a broken __str__ must not break the check
        return f"<python {type(x).__name__}>"


def _origins_between(leaf, start: int, end: int) -> frozenset:
    """The origins of the spans of ``leaf`` that [start, end) overlaps."""
    if type(leaf) is not P.LStr:
        return P.origins_of(leaf)
    out = P.EMPTY
    for a, b, origins in leaf.spans:
        if a < end and start < b:
            out = P.union(out, origins)
    return out


# The verdict cache's bounds: entries, and characters of the strings its keys keep alive.
_VERDICT_ENTRIES = 1024
_VERDICT_CHARS = 1_000_000
_VERDICT_LOCK = allocate_lock()
_KEY_DEPTH = 32         # containers nested deeper than this are not cached (nor cycles)
_KEY_VALUES = 10_000    # nor arguments holding more values than this


def _key(args):
    """The key of a verdict's arguments, or None if they cannot be keyed.

    Equal keys mean equal arguments with equal origins, so that the evaluation -- and the
    digest, which is a function of the same things -- is the same: every value carries its
    exact type (1, 1.0, True and a labelled 1 are four keys; a labelled Int's type is its origin
    set's class), a Float its repr (0.0 and -0.0 differ, as in the digest), a labelled String
    its text and all its spans with their origins, a labelled Float or Bool its origins, and
    an Array or Map its elements (a Map's keys and values, in order) recursively, tagged with
    what it is. Anything else -- an Answer, a Memory (whose entries change under it), a Python
    value, a function -- makes the arguments uncacheable, as does a cycle."""
    out = []
    count = None
    for a in args:
        t = type(a)
        if t is str:                        # the common arguments first, without a call
            out.append(a)
        elif t is _LStr:
            out.append((_LStr, str.__str__(a), a.spans))
        else:
            if count is None:
                count = [0]             # values in containers
            try:
                out.append(_k(a, count, 0))
            except _Uncacheable:
                return None
    return tuple(out)


def _key_chars(key) -> int:
    """The characters of the strings ``key`` keeps alive (what the cache's size bound counts),
    made only when a verdict is stored. (Recursive: a key is at most _KEY_DEPTH deep.)"""
    n = 0
    for x in key:
        if type(x) is str:
            n += len(x)
        elif type(x) is tuple and x:
            tag = x[0]
            if tag is _LStr:
                n += len(x[1])
            elif tag is list:
                n += _key_chars(x[1])
            elif tag is dict:
                for pair in x[1]:
                    n += _key_chars(pair)
    return n


_LStr = P.LStr


class _Uncacheable(Exception):
    pass


def _k(v, count, depth):
    t = type(v)
    if t is str or t is int or v is None:
        return v
    if t is P.LStr:
        return (P.LStr, str.__str__(v), v.spans)
    if t is bool:
        return (bool, v)
    if t is float:
        return (float, repr(v))
    if t in P.INT_TYPES:
        return (t, int(v))
    if t is P.LFloat:
        return (P.LFloat, repr(float(v)), v.origins)
    if t is P.LBool:
        return (P.LBool, v.value, v.origins)
    if depth < _KEY_DEPTH and count[0] < _KEY_VALUES:
        count[0] += len(v) if t is list or t is dict else 0
        if t is list:
            return (list, tuple([_k(x, count, depth + 1) for x in v]))
        if t is dict:
            return (dict, tuple([(_k(a, count, depth + 1), _k(b, count, depth + 1))
                                 for a, b in v.items()]))
    raise _Uncacheable


def _digest(name, args) -> str:
    """The arguments and their origins, hashed: what an approval after a flag is bound to.

    The SHA-256 of a canonical JSON text, ``[name, [canon(arg), ...]]`` with no spaces, in
    which a value is ``["str"|"int"|"bool"|"NoneType"|"float"|"other", value, origins]``
    (a Float as its repr, anything else as its text; a labelled String's origins per span,
    ``[[start, end, [origin, ...]], ...]``), an Array ``["list", [...]]`` and a Map ``["map",
    [[key, value], ...]]``. The text is written here directly, string by string with
    json's own escaping (the same bytes ``json.dumps`` gives: tests/test_second_look_cache.py
    holds that definition), since it is made for every outgoing call a label reaches."""
    # Each argument written here, by a loop rather than map(_canon, args): a function that
    # map calls from C gets a frame of its own, one called from this loop does not, and the
    # common arguments (a String, a tool's String of one span) are written without a call.
    written = []
    for v in args:
        t = type(v)
        if t is str:
            written.append(f'["str",{_json_string(v)},[]]')
        elif t is _LStr and v._spans is not None and len(v._spans) == 1:
            a, b, o = v._spans[0]
            names = _ORIGIN_NAMES.get(o) if o else None
            written.append(f'["str",{_json_string(v)},[[{_digits(a)},{_digits(b)},'
                           f'{(names or _origin_names(o))[0] if o else "[]"}]]]')
        else:
            written.append(_canon(v))
    return _hashed(f'[{_json_string(name)},[{",".join(written)}]]')


def _hashed(text: str) -> str:
    """A digest's canonical text, hashed: ``sha256:`` and the hex SHA-256 of its UTF-8 (a lone
    surrogate as surrogatepass writes it)."""
    global _sha256
    if _sha256 is None:
        from hashlib import sha256 as _sha256
    try:
        data = text.encode()        # (the same bytes, when there is no lone surrogate)
    except UnicodeEncodeError:
        data = text.encode("utf-8", "surrogatepass")
    return "sha256:" + _sha256(data).hexdigest()


_sha256 = None


# A passing verdict's digest is made when a record shows it (Evaluation.kept_detail) from
# Strings of at most these many characters in all; longer ones are hashed at the check, so
# that a record keeps no more text than its detail would have held.
_PIECES_CHARS = 256


def _digest_pieces(name, args):
    """``(name, text, start, end, origins, ...)``: what _digest writes of Strings, four fields
    each (a String: its text and three None; a labelled String of one span: its plain text,
    the span's offsets and its origins' names as the digest writes them) -- only strings,
    numbers and None, kept instead of the digest until it is read (_digest_of makes the same
    one); None if a labelled String has several spans (_digest writes those through _canon).
    """
    pieces = [name]
    for v in args:
        if type(v) is str:
            pieces += (v, None, None, None)
        else:
            spans = v._spans or v.spans
            if len(spans) != 1:
                return None
            a, b, o = spans[0]
            names = _ORIGIN_NAMES.get(o)      # (_origin_list's common case, written out)
            pieces += (str.__str__(v), a, b, names[0] if names else _origin_list(o))
    return tuple(pieces)


def _digest_of(pieces) -> str:
    """_digest's value for the arguments ``pieces`` were made from (_digest_pieces)."""
    written = []
    for at in range(1, len(pieces), 4):
        text, a, b, names = pieces[at:at + 4]
        written.append(f'["str",{_json_string(text)},[]]' if a is None else
                       f'["str",{_json_string(text)},[[{_digits(a)},{_digits(b)},{names}]]]')
    return _hashed(f'[{_json_string(pieces[0])},[{",".join(written)}]]')


def _origin_list(origins) -> str:
    if not origins:
        return "[]"
    names = _ORIGIN_NAMES.get(origins)         # (the common case, without _origin_names' call)
    return (names or _origin_names(origins))[0]


# A set of origins's names as JSON lists, sorted: (without spaces, as the digest writes them;
# with, as a record's detail does). By the set: a run makes a few of them, shared by its values.
_ORIGIN_NAMES: dict = {}
_ORIGIN_NAMES_KEPT = 4096


def _origin_names(origins) -> tuple[str, str]:
    names = _ORIGIN_NAMES.get(origins)
    if names is None:
        quoted = [_json_string(t) for t in sorted([P.origin_text(o) for o in origins])]
        names = ("[" + ",".join(quoted) + "]", "[" + ", ".join(quoted) + "]")
        if len(_ORIGIN_NAMES) < _ORIGIN_NAMES_KEPT:
            _ORIGIN_NAMES[origins] = names
    return names


# An Int's digits, whatever its class (a span's offset read back from a journal may be a Bool:
# it is written as the number it is, 1, not True).
_digits = int.__repr__


def _canon(v, path: tuple = ()) -> str:
    """``v``'s canonical text (see _digest). ``path``: the ids of the Arrays and Maps it is
    inside, outermost first. An Array or a Map met again inside itself (``push(a, a)``) is
    written ``["cycle",k]``, k the number of levels up it was entered: a value holding
    itself is written once, and the text still tells apart every way of holding itself. (A
    value shared without a cycle is written out each time, as it always was.)"""
    # (f-strings: one piece of text made at once, where + makes one per step.)
    t = type(v)
    if t is _LStr:
        spans = v._spans or v.spans
        if len(spans) == 1:         # (a tool's result: one span, labelled; written out)
            a, b, o = spans[0]
            return f'["str",{_json_string(v)},[[{_digits(a)},{_digits(b)},{_origin_list(o)}]]]'
        spans = ",".join([f"[{_digits(a)},{_digits(b)},{_origin_list(o)}]" for a, b, o in spans])
        return f'["str",{_json_string(v)},[{spans}]]'
    if t is str:
        return f'["str",{_json_string(v)},[]]'
    if t is list or t is dict:
        at = id(v)
        if at in path:
            return f'["cycle",{len(path) - path.index(at)}]'
        inside = path + (at,)
        written = []
        if t is list:
            for x in v:
                written.append(_canon(x, inside))
            return f'["list",[{",".join(written)}]]'
        for k, x in v.items():      # (a key is a scalar: nothing inside it)
            written.append(f"[{_canon(k)},{_canon(x, inside)}]")
        return f'["map",[{",".join(written)}]]'
    origins = _origin_list(P.origins_of(v))
    p = P.plain(v)
    tp = type(p)
    if tp is str:
        return f'["str",{_json_string(p)},{origins}]'
    if tp is bool:
        return f'["bool",{"true" if p else "false"},{origins}]'
    if tp is int:
        return f'["int",{p},{origins}]'
    if p is None:
        return f'["NoneType",null,{origins}]'
    if tp is float:
        return f'["float",{_json_string(repr(p))},{origins}]'
    return f'["other",{_json_string(str(p))},{origins}]'


# ----------------------------------------------------------------------------- outgoing tools

def tool_member(tool, vm, name: str):
    """``t.second_look`` and ``t.approve`` of an outgoing tool; any other member (and these,
    on a tool that sends nothing) is the error every Tool gives."""
    from sensevm.base.errors import SenseRuntimeError
    if tool.outbound:
        if name == "second_look":
            return tool.reason if tool.flag is not None else None
        if name == "approve":
            return ToolApproval(tool, vm.frame.pos)
    raise SenseRuntimeError(f"cannot access member '{name}' on type Tool")


class ToolApproval:
    """``t.approve``: after a refused call, lets exactly that call (the same arguments, from
    the same origins) run once."""

    __slots__ = ("tool", "pos")
    type_name = "Function"
    is_function = True

    def __init__(self, tool, pos):
        self.tool = tool
        self.pos = pos

    def __str__(self) -> str:
        return f"<builtin {self.tool.name}.approve>"

    def sense_call(self, vm, frame, args) -> bool:
        from sensevm.guard.audit import AuditRecord
        from sensevm.base.errors import SenseRuntimeError
        if args:
            raise SenseRuntimeError(f"'{self.tool.name}.approve' expects 0 argument(s), "
                                    f"got {len(args)}")
        tool = self.tool
        if tool.flag is not None:
            tool.cleared = tool.flag
            # Host-side, as an action's approval is (spec 21.9).
            vm.audit.append(AuditRecord.make(tool.subject, tool.name, "tool", "approved",
                                             "second look", self.pos.line, vm.lineage(frame),
                                             True))
        frame.stack.append(None)
        return False
