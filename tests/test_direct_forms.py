"""Tier 2's direct forms: functions that call only functions run as plain Python calls, and
become real frames (deoptimize) the moment they meet anything that needs one.

Every program runs on tier 1 and tier 2 and must agree in everything observable (stdout, error
with its position, audit records with lineage, test results); the tier-2 run also says whether
the direct forms really ran and really deoptimized, so each test exercises the path it names.
"""

from __future__ import annotations

import io

import re

import pytest

from test_tiers import _run_source, _verified, run_tier


def both(tmp_path, source, **kw):
    one = _run_source(tmp_path, source, "1", **kw)
    two = _run_source(tmp_path, source, "2", **kw)
    assert one[:5] == two[:5]
    return one[:5], two[5]


def direct_form(vm, name):
    """The direct form of the function called ``name`` (None if it has none)."""
    for prepared in vm.prepared:
        if prepared.code.name == name:
            return prepared.direct
    raise AssertionError(f"no code object named {name}")


RECURSION = """\
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)
def depth(n):
    if n == 0:
        return 0
    return 1 + depth(n - 1)
print(fib(15), depth(300))
"""


def test_recursion_runs_direct_and_deep_recursion_becomes_frames(tmp_path):
    """fib never leaves its direct form; depth(300) nests deeper than DIRECT_LIMIT direct
    activations on the Python stack, so part of it runs as frames, with the same result."""
    from sensevm.runtime.frames import DIRECT_LIMIT
    assert DIRECT_LIMIT < 300
    (out, error, *_), vm = both(tmp_path, RECURSION)
    assert (out, error) == ("610 300\n", None)
    assert direct_form(vm, "fib") is not None and direct_form(vm, "depth") is not None
    # Each time the direct activations reach DIRECT_LIMIT they become frames; fib alone never.
    assert 300 // DIRECT_LIMIT <= vm.deopts <= 300 // DIRECT_LIMIT + 1
    assert vm.depth == 0
    _, vm = both(tmp_path, RECURSION.replace(", depth(300)", ""))
    assert vm.deopts == 0


def _run_with_depth(tmp_path, source, tier, max_depth, stdin=None):
    from sensevm.base.errors import SenseError
    from sensevm.runtime.vm import VM
    path = tmp_path / "p.sns"
    path.write_text(source)
    out = io.StringIO()
    vm = VM(_verified(str(path)), stdout=out, tier=tier, max_depth=max_depth,
            **({} if stdin is None else {"stdin": io.StringIO(stdin)}))
    try:
        vm.run()
    except SenseError as err:
        return out.getvalue(), (type(err).__name__, err.text, err.pos), vm
    return out.getvalue(), None, vm


@pytest.mark.parametrize("max_depth", [5, 40, 47, 48, 49, 60, 95, 96, 97, 130])
def test_max_depth_is_reached_at_the_same_call(tmp_path, max_depth):
    """The depth limit counts direct activations exactly as frames: the same call fails, at
    the same position, whether it is made directly, with a frame, or after a deoptimization."""
    source = RECURSION.replace("print(fib(15), depth(300))", "print(depth(100))\nprint(depth(1000))")
    one = _run_with_depth(tmp_path, source, "1", max_depth)
    two = _run_with_depth(tmp_path, source, "2", max_depth)
    assert one[:2] == two[:2]
    assert one[1][0] == "SenseRecursionError" and one[1][2].line == 8
    assert two[2].depth == one[2].depth       # every activation was given back its depth


COMMIT_DEPTH = """\
tool probe(n: Int) returns Int requires net.probe:
    return depth(n)
def depth(n):
    if n == 0:
        return 0
    return 1 + depth(n - 1)
def via(k):
    return probe(k)
irreversible action act(n: Int) requires log.act:
    k = n + 1
    return via(k)
policy:
    allow net.probe
    allow log.act
def go(n):
    a = act(n)
    a.verify()
    return a.commit()
i = 0
while i < 30:
    go(i % 4)
    i = i + 1
j = 0
while j < 1000:
    print(go(j))
    j = j + 1
"""


@pytest.mark.parametrize("max_depth", [12, 20, 33, 50])
def test_a_commit_body_that_deoptimizes_gives_its_frames_their_depth(tmp_path, max_depth):
    """A commit body run as a direct form that meets a tool call becomes frames at the depth
    it had reached: the recursion under the tool meets the limit at the same call as in
    tier 1 (the last line printed is the deepest that fit), however many commits did so
    before."""
    one = _run_with_depth(tmp_path, COMMIT_DEPTH, "1", max_depth)
    two = _run_with_depth(tmp_path, COMMIT_DEPTH, "2", max_depth)
    assert one[:2] == two[:2]
    assert one[1][0] == "SenseRecursionError"
    assert two[2].depth == one[2].depth
    assert two[2].deopts > 0


POLICY_CHAIN = """\
tool ping(k: Int) returns Int requires net.ping:
    return k + 1000
policy:
    allow net.ping
def inner(k):
    if k > LIMIT:
        return ping(k)
    return k
def relay(k):
    return inner(k)
def make_helper():
    policy: deny net.ping
    def helper(k):
        return relay(k)
    return helper
helper = make_helper()
def plain(k):
    return inner(k)
def hot(f, n):
    total = 0
    i = 0
    while i < n:
        total = total + f(i)
        i = i + 1
    return total
print(hot(plain, 60))
print(hot(helper, 60))
"""


def test_a_deny_on_a_direct_callers_scope_still_applies(tmp_path):
    """`helper` (declared in a scope that denies net.ping) calls `relay` directly, which calls
    `inner`, which calls the tool: the tool sees helper's frame on the chain because every
    direct activation became a frame before the call was made, so stack inspection denies it
    as in tier 1."""
    (out, error, lines, records, _), vm = both(tmp_path, POLICY_CHAIN.replace("LIMIT", "50"))
    assert out.splitlines()[0] == str(sum(range(51)) + sum(k + 1000 for k in range(51, 60)))
    assert error[0] == "SensePolicyError" and error[2].line == 7, error
    # `inner` calls a declared tool (its own instruction): no direct form, so every call of it
    # from `helper` or `plain` is a deoptimization.
    assert direct_form(vm, "helper") is not None and direct_form(vm, "relay") is not None
    assert direct_form(vm, "inner") is None
    assert vm.deopts >= 10
    denied = [r for r in records if r[1] == "denied"]
    assert len(denied) == 1


def test_tool_calls_after_a_deoptimization_keep_their_lineage(tmp_path):
    """Deoptimized at every call of `plain`; the audit records (lineage included) match."""
    src = POLICY_CHAIN.replace("LIMIT", "-1").replace("print(hot(helper, 60))\n", "")
    src += 'def labelled(k):\n    return ping(k)\nprint(hot(labelled, 70))\n'
    (out, error, lines, records, _), vm = both(tmp_path, src)
    assert error is None and len(records) == 130
    assert vm.deopts >= 59


BLOCKS = """\
tool twice(k: Int) returns Int requires calc:
    return k * 2
def mix(n):
    total = 0
    for x in range(n):
        local y = x + 1
        if x % 4 == 3:
            total = total + y * 10 + twice(x + y) + y
        else:
            total = total + y
    return total
def outer(n):
    return 1 + mix(n) * 2
def run():
    t = 0
    for k in range(40):
        t = t + outer(k)
    return t
print(run())
"""


def test_deoptimizing_mid_expression_inside_blocks(tmp_path):
    """A deoptimization with operands on the stack and block variables in Python locals: the
    frame it becomes holds them exactly, and the loop goes on in tier 1 then tier 2 again."""
    (out, error, *_), vm = both(tmp_path, BLOCKS)
    expect = 0
    for k in range(40):
        total = 0
        for x in range(k):
            y = x + 1
            total += y * 10 + 2 * (x + y) + y if x % 4 == 3 else y
        expect += 1 + total * 2
    assert (out, error) == (f"{expect}\n", None)
    assert vm.deopts > 0


AGENT = """\
def ask_it(q):
    return ask_human(q)
def wrapper(q):
    return ask_it(q) + "!"
def twice(q):
    return wrapper(q) + wrapper(q)
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)
agent a:
    first = ask_human("go?")
    print("got", first, fib(12), twice("more?"))
start(a)
print(a)
resume(a, "yes")
print(a.status)
"""


def _run_with_stdin(tmp_path, source, tier, stdin):
    from sensevm.runtime.vm import VM
    path = tmp_path / "p.sns"
    path.write_text(source)
    out = io.StringIO()
    vm = VM(_verified(str(path)), stdout=out, tier=tier, stdin=io.StringIO(stdin))
    vm.run()
    return out.getvalue(), [(r.subject, r.event, r.lineage) for r in vm.audit.records], vm


def test_an_agent_pauses_and_its_resumed_body_calls_direct_chains(tmp_path):
    """An agent pauses in its own body (a frame, saved whole) and, resumed, calls functions
    that run directly until one reads input with ask_human (not a plain call: it becomes
    frames first), on both tiers alike."""
    one = _run_with_stdin(tmp_path, AGENT, "1", "first\nsecond\n")
    two = _run_with_stdin(tmp_path, AGENT, "2", "first\nsecond\n")
    assert one[:2] == two[:2]
    lines = one[0].splitlines()
    assert lines[0] == "<agent a status=paused (go?)>"
    assert lines[-2].endswith("got yes 144 first!second!") and lines[-1] == "completed"
    assert two[2].deopts >= 1


ERRORS = [
    # (the failing line, program)
    (4, "def inner(x: Int):\n    return x + 1\ndef mid(v):\n    return inner(v)\n"
        "def top(v):\n    return mid(v) * 2\nprint(top(1))\nprint(top(\"s\"))\n"),
    (4, "def inner(x):\n    return x + 1\ndef mid(v):\n    return inner(v, v)\n"
        "def top(v):\n    return mid(v)\nprint(top(1))\n"),
    (4, "def inner(x) -> Int:\n    return x\ndef mid(v):\n    return inner(v) + 1\n"
        "def top(v):\n    return mid(v)\nprint(top(1))\nprint(top(\"s\"))\n"),
    (2, "def inner(x):\n    return x[5]\ndef mid(v):\n    return inner(v)\n"
        "def top(v):\n    return mid(v)\nprint(top([1, 2, 3, 4, 5, 6]))\nprint(top([1]))\n"),
    (4, "def inner(x):\n    return x\ndef mid(v):\n    return nothing(v)\n"
        "def top(v):\n    return mid(v)\nprint(top(1))\n"),
    (4, "def mid(v):\n    if v > 1:\n        return 3\n    return len(v, v)\n"
        "def top(v):\n    return mid(v)\nprint(top(2))\nprint(top(1))\n"),
]


@pytest.mark.parametrize("line, source", ERRORS)
def test_errors_inside_direct_calls_are_placed_as_in_tier_one(tmp_path, line, source):
    """A type error in a callee, an argument count, a parameter or return annotation, an
    undefined name, a builtin's arity: the same error at the same place on both tiers."""
    (out, error, *_), vm = both(tmp_path, source)
    assert error is not None and error[2].line == line, error
    assert vm.depth == _run_source(tmp_path, source, "1")[5].depth


REBIND = """\
def f(n):
    if n == 0:
        return 0
    if n == 5:
        f = g
    return 1 + f(n - 1)
def g(n):
    return 100 + n
print(f(9), f(9))
"""


def test_a_function_rebound_during_its_own_recursion(tmp_path):
    (out, error, *_), vm = both(tmp_path, REBIND)
    assert (out, error) == ("109 109\n", None)      # the assignment makes a local `f`


REQUEST = """\
def pick():
    r = user_request()
    if r == "hello":
        return 1
    return 2
def top():
    return pick() * 10 + pick()
print(top())
"""


def test_outside_data_stops_a_direct_form(tmp_path):
    """user_request() gives the user's words, a labelled value: it is no pure builtin, so
    the direct forms become frames before it is called, and the branch on it runs in tier 1
    with its pc label."""
    from sensevm.runtime.vm import VM
    path = tmp_path / "p.sns"
    path.write_text(REQUEST)
    verified = _verified(str(path))
    outs = []
    for tier in ("1", "2"):
        out = io.StringIO()
        vm = VM(verified, stdout=out, tier=tier)
        vm.set_request("hello")
        vm.run()
        outs.append(out.getvalue())
    assert outs == ["11\n", "11\n"]
    assert vm.look.live and vm.deopts >= 1


INFLUENCED = """\
untrusted tool fetch(k: Int) returns String requires web.read:
    if k % 3 == 0:
        return "bob@evil.example"
    return "alice@example.com"
irreversible action send(to: String, body: String) requires email.send:
    print("sent to", to)
policy:
    allow web.read
    allow email.send
def choose(page, k):
    if page == "bob@evil.example":
        return "boss@example.com"
    return "team" + str(k) + "@example.com"
def route(page, k):
    return choose(page, k)
def run():
    i = 0
    while i < 6:
        to = route(fetch(i), i)
        a = send(to, "hi")
        a.verify()
        print(i, a.second_look != nil)
        i = i + 1
run()
"""


def test_a_branch_on_a_labelled_value_in_a_direct_form(tmp_path):
    """`choose` runs directly until it branches on a tool's result: there it becomes a frame
    stopped at the branch, tier 1 opens the pc label, and the recipient it picks is influenced:
    the second look judges every action exactly as tier 1 does (a literal picked under the
    influenced branch passes; an address built from the loop counter there is flagged)."""
    (out, error, lines, records, _), vm = both(tmp_path, INFLUENCED)
    assert error is None
    assert [line.split()[-1] for line in out.splitlines()] == \
        ["false", "true", "true", "false", "true", "true"]
    looks = [r for r in records if r[1] == "second_look"]
    assert len(looks) == 6
    assert vm.deopts >= 5


REBOUND_BUILTINS = """\
def count(xs):
    return len(xs)
def grow(xs, v):
    return push(xs, v)
def text(v):
    return str(v)
def run(n):
    xs = []
    i = 0
    total = 0
    while i < n:
        grow(xs, i)
        total = total + count(xs) + len(text(i)) + len(str(i * 2))
        i = i + 1
    return total
print(run(40))
def len(x):
    return 1000
def push(xs, v):
    return xs
str = type_of
print(run(40), count("abc"), text(3))
"""


def test_inlined_builtins_follow_a_rebinding(tmp_path):
    """Tier 2 does `len`, `push` and `str` in place when the callee *is* that builtin: a
    program that rebinds those names gets its own functions, on both tiers alike, though
    the code was made when the names were the builtins' alone."""
    (out, error, *_), vm = both(tmp_path, REBOUND_BUILTINS)
    first = sum(k + 1 + len(str(k)) + len(str(2 * k)) for k in range(40))
    assert (out, error) == (f"{first}\n{3000 * 40} 1000 Int\n", None)
    # run was made while `len` was only the builtin, two scopes out: it reads it there with
    # one look-up, after the module's own scope (where the second call finds the new one)
    run = next(c for c in vm.prepared if c.code.name == "run").t2.source
    assert re.search(r"if 'len' in pv: (s\d) = pv\['len'\]\n +else:\n +try: \1 = ppv\['len'\]", run)


BUILTIN_SITES = """\
def build(n):
    i = 0
    t = ""
    while i < n:
        t = t + str(i) + str(len(t))
        i = i + 1
    return t
print(build(30))
"""


def test_a_call_made_where_a_builtin_was_found_compiles_no_direct_form_probe(tmp_path):
    """Where the name called was `str` or `len` when the code was made, the call's general
    case is vm.call_t2's (which still runs a rebound function's direct form): not the
    direct-form probe and its deoptimization, about fifteen lines more at every such site
    in every version -- an exit path with three `str()` calls held a tenth of an agent
    loop's code."""
    (out, error, *_), vm = both(tmp_path, BUILTIN_SITES)
    t = ""
    for i in range(30):
        t = t + str(i) + str(len(t))
    assert (out, error) == (t + "\n", None)
    source = next(c for c in vm.prepared if c.code.name == "build").t2.source
    assert "B_STR" in source and "B_LEN" in source
    assert ".code.dx[" not in source and "call_t2" in source


PUSH_LIMIT = """\
def fill(xs, n):
    i = 0
    while i < n:
        push(xs, i)
        i = i + 1
    return len(xs)
print(fill([], 50))
print(fill([], 500))
"""


def test_an_inlined_push_stops_at_the_array_limit(tmp_path):
    from sensevm.runtime.vm import VM
    path = tmp_path / "p.sns"
    path.write_text(PUSH_LIMIT)
    verified = _verified(str(path))
    seen = []
    for tier in ("1", "2"):
        out = io.StringIO()
        vm = VM(verified, stdout=out, tier=tier, max_array=100)
        from sensevm.base.errors import SenseError
        try:
            vm.run()
        except SenseError as err:
            seen.append((out.getvalue(), err.text, err.pos))
    assert len(seen) == 2 and seen[0] == seen[1]
    assert seen[0][0] == "50\n" and seen[0][2].line == 4


# (seven and none keep a local of their own, so no call of theirs is inlined: see
# tier2._Gen.inlined_call. Their direct forms are what is tested.)
MANY_ARGS = """\
def seven(a, b, c, d, e, f, g):
    local r = a + b * c - d + e * f - g
    return r
def eight(a, b, c, d, e, f, g, h):
    return seven(a, b, c, d, e, f, g) + h
def none():
    local r = 5
    return r
def run(n):
    t = 0
    for i in range(n):
        t = t + eight(i, 1, 2, 3, 4, 5, 6, 7) + none()
    return t
print(run(60))
print(seven(1, 2, 3))
"""


def test_direct_forms_of_every_arity(tmp_path):
    """A direct form takes its arguments as Python parameters and is found by the call's
    argument count: no arguments, seven (the largest found that way), eight (called with a
    frame), and a wrong count (refused there, reported as tier 1 does)."""
    (out, error, *_), vm = both(tmp_path, MANY_ARGS)
    expect = sum(i + 2 - 3 + 20 - 6 + 7 + 5 for i in range(60))
    assert out == f"{expect}\n"
    assert error[1] == "[line 15] 'seven' expects 7 argument(s), got 3"
    assert direct_form(vm, "seven") is not None and direct_form(vm, "none") is not None


TOOL_BODIES = """\
irreversible action note(k: Int) requires log.write:
    print("note", k)
def maybe(k):
    if k % 10 == 0:
        a = note(k)
        a.verify()
    return k
def helper(k):
    return maybe(k) + 1
tool score(k: Int) returns Int requires calc.score:
    return helper(k) * 2
tool typed(k: Int) returns Int requires calc.score:
    if k > 45:
        return "late"
    return k
policy:
    allow calc.score
    allow log.write
def run(n):
    total = 0
    i = 0
    while i < n:
        total = total + score(i) + typed(i)
        i = i + 1
    return total
print(run(40))
print(run(50))
"""


def test_tool_bodies_run_direct_and_deoptimize_with_their_role(tmp_path):
    """A tool's body runs as a direct form after call_tool's checks and `called` record; when
    it meets an action it becomes the tool's frame (role, tool and lineage frame), so the
    action's records say `tool:score`, exactly as tier 1's do; a wrong return type is reported
    at the call."""
    (out, error, lines, records, _), vm = both(tmp_path, TOOL_BODIES)
    assert out.splitlines()[0] == str(sum(2 * (k + 1) + k for k in range(40)))
    assert error[1] == "[line 23] 'typed' declared to return Int, got String"
    prepared = [r for r in records if r[0] == "irreversible action 'note'" and r[1] == "prepared"]
    assert len(prepared) == 9 and all(r[4] == ("tool:score",) for r in prepared)
    tool_body = [p for p in vm.prepared if p.code.name == "score"]
    assert tool_body and tool_body[0].direct is not None
    assert vm.deopts >= 4


COMMIT_BODIES = """\
ledger = [0]
tool audit_it(k: Int) returns Int requires ledger.audit:
    return k
def plain(k):
    return k * 2
def loud(k):
    if k % 7 == 0:
        audit_it(k)
    return k
reversible action credit(delta: Int) requires ledger.write:
    local before = ledger[0]
    kept = plain(delta) + loud(delta)
    ledger[0] = ledger[0] + kept
rollback:
    ledger[0] = before
irreversible action fragile(k: Int) requires ledger.write:
    return 10 / k
policy:
    allow ledger.write
    allow ledger.audit
def run(n):
    i = 1
    while i < n:
        c = credit(i)
        c.verify()
        c.commit()
        if i % 5 == 0:
            c.rollback()
        i = i + 1
    return ledger[0]
print(run(40))
for k in [4, 2, 1, 0]:
    f = fragile(k)
    f.verify()
    test "a failing body":
        f.commit()
    print(f.state)
"""


def test_commit_bodies_run_direct_keep_their_scope_and_fail_as_frames_do(tmp_path):
    """A commit body runs as a direct form in the scope its rollback will see (the rollback
    reads the body's `before`); a body that calls a tool becomes the commit frame first, so
    the tool's records carry `reversible:credit`; a body that fails is recorded `failed` and
    leaves the action failed, on both tiers alike."""
    (out, error, lines, records, tests), vm = both(tmp_path, COMMIT_BODIES)
    assert error is None
    ledger = 0
    for i in range(1, 40):
        before = ledger
        ledger += 3 * i
        if i % 5 == 0:
            ledger = before
    assert out.splitlines() == [str(ledger), "committed", "committed", "committed", "failed"]
    called = [r for r in records if r[0] == "tool 'audit_it'" and r[1] == "called"]
    assert len(called) == 5 and all(r[4] == ("reversible:credit",) for r in called)
    failed = [r for r in records if r[1] == "failed"]
    assert len(failed) == 1 and "division by zero" in failed[0][2].lower()
    assert [p.direct is not None for p in vm.prepared if p.code.name == "credit"] == [True]
    assert vm.deopts >= 3


# ----------------------------------------------------------------------------- a property

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

# What one function's body does besides calling functions further down the chain: each step
# is something a direct form does in place, or something that makes it deoptimize.
STEPS = [
    "    x = x * 3 % 101",                                   # in place
    "    x = x + len(str(x))",                               # pure builtins, inlined
    "    if x % 4 == 1:\n        x = probe(x)",              # a tool: deoptimize
    "    if x % 5 == 2:\n        a = mark(x)\n        a.verify()",    # an action: deoptimize
    "    if x % 97 == 13:\n        x = x / (x - x)",         # an error (caught by the test)
    "    for y in range(x % 3):\n        x = x + y",        # a loop in blocks
]


@st.composite
def call_chains(draw):
    """A DAG of functions f0..fn (fi calls only fj with j > i), a caller that denies the
    tool's capability for one of them, and a hot loop over f0 inside a test block."""
    n = draw(st.integers(2, 6))
    lines = ["tool probe(k: Int) returns Int requires net.probe:",
             "    return k + 1",
             "irreversible action mark(k: Int) requires log.mark:",
             "    print(k)",
             "policy:",
             "    allow net.probe",
             "    allow log.mark"]
    for i in reversed(range(n)):
        lines.append(f"def f{i}(x):")
        for step in draw(st.lists(st.sampled_from(STEPS), max_size=2)):
            lines.append(step)
        # Each calls the next (a chain as deep as n) and maybe one more further down.
        callees = ([i + 1] + draw(st.lists(st.integers(i + 1, n - 1), max_size=1))
                   if i + 1 < n else [])
        for j in callees:
            lines.append(f"    x = x + f{j}(x % 50)")
        lines.append("    return x")
    denied = draw(st.integers(0, n - 1))
    lines += ["def guarded():",
              "    policy: deny net.probe",
              f"    return f{denied}(7)",
              "def run(m):",
              "    total = 0",
              "    for k in range(m):",
              "        total = total + f0(k)",
              "    return total",
              "test \"hot\":",
              f"    print(run({draw(st.integers(20, 60))}))",
              "test \"denied\":",
              "    print(guarded())"]
    return "\n".join(lines) + "\n"


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(call_chains())
def test_direct_forms_are_invisible(tmp_path, source):
    """Whatever mix of plain work, tool calls, actions, errors, loops and a caller's deny a
    chain of functions has, tier 2 (direct forms, deoptimizing at any depth) gives what tier 1
    gives: output, error, audit records with their lineage, test results."""
    both(tmp_path, source)


LIFECYCLE_SITES = """\
irreversible action send(k: Int) requires net.send:
    print("sent", k)
policy:
    allow net.send
def run(n):
    i = 0
    while i < n:
        a = send(i)
        a.verify()
        a.approve()
        r = a.commit()
        i = i + 1
    return i
print(run(40))
def fake(k):
    return "not an action"
send = fake
print(run(3))
"""


def test_lifecycle_instructions_in_tier_two_and_what_else_they_meet(tmp_path):
    """Tier 2 calls prepare/verify/approve/commit directly on actions; once `send` names a
    function, the same instructions call it and fail on a String as tier 1's handlers do."""
    (out, error, lines, records, _), vm = both(tmp_path, LIFECYCLE_SITES)
    assert out.splitlines()[-1] == "40" and len(out.splitlines()) == 41
    assert error is not None and error[2].line == 9, error
    assert len([r for r in records if r[1] == "committed"]) == 40


ROLLBACK_BLOCKS = """\
ledger = [0]
tool audit_it(k: Int) returns Int requires ledger.audit:
    return k
def loud(k):
    if k % 7 == 0:
        audit_it(k)
    return k
reversible action credit(delta: Int) requires ledger.write:
    local before = ledger[0]
    ledger[0] = ledger[0] + delta
rollback:
    ledger[0] = before - loud(delta) + delta
    if delta == 33:
        ledger[0] = ledger[0] / 0
policy:
    allow ledger.write
    allow ledger.audit
def run(n):
    i = 1
    while i < n:
        c = credit(i)
        c.verify()
        c.commit()
        test "rollback":
            c.rollback()
        i = i + 1
    return ledger[0]
print(run(40))
"""


def test_rollback_blocks_run_direct_and_deoptimize_with_their_role(tmp_path):
    """A rollback block runs as a direct form in the scope under its commit body's (it reads
    the body's `before`); when it calls a tool it becomes the rollback frame first, so the
    tool's records carry `reversible:credit > rollback:credit`; a block that fails leaves the
    action failed with the rollback's line and what failed, on both tiers alike."""
    (out, error, lines, records, tests), vm = both(tmp_path, ROLLBACK_BLOCKS)
    assert error is None and out == "0\n"
    assert len([r for r in records if r[1] == "rolled_back"]) == 38
    called = [r for r in records if r[0] == "tool 'audit_it'" and r[1] == "called"]
    assert len(called) == 5
    assert all(r[4] == ("reversible:credit", "rollback:credit") for r in called)
    failed, = [r for r in records if r[1] == "failed"]
    assert failed[3] == 25 and "rollback body failed: [line 14] division by zero" in failed[2]
    assert [t[1] for t in tests].count(False) == 1
    assert [p.direct is not None for p in vm.prepared
            if p.code.name == "credit.rollback"] == [True]
    assert vm.deopts >= 5


def _direct_source(vm, name):
    """The source of the direct form of the function called ``name``, made as tier 2 makes it."""
    from sensevm.runtime.tier2 import _Gen
    prepared = next(p for p in vm.prepared if p.code.name == name)
    gen = _Gen(prepared)
    gen.analyse()
    gen.direct = True
    gen.lazy = gen.scope_is_lazy()
    return gen.generate()


SELF_CALLS = """\
def other(n):
    return 1000 + n
def fib(n):
    if n < 2:
        return n
    if n == REBIND:
        fib = other
    return fib(n - 1) + fib(n - 2)
def make(k):
    def f(n, g):
        if n == 0:
            return k
        return g(n - 1, f) * 2 + k
    return f
a = make(1)
b = make(5)
alias = fib
print(fib(16), alias(12), a(9, b), b(9, a), a(8, a), fib(14))
"""


@pytest.mark.parametrize("rebind", [-1, 3, 9])
def test_a_function_calling_itself_skips_the_type_dispatch(tmp_path, rebind):
    """A call in a direct form, by the function's own name, of the very closure it runs as
    (``cl``) calls ``direct`` by name, skipping the type test and the look-up in PREP.dx; any
    other callee (the global rebound halfway through the recursion, an alias, another closure
    of the same code) takes the general path, with tier 1's result."""
    (out, error, *_), vm = both(tmp_path, SELF_CALLS.replace("REBIND", str(rebind)))
    assert error is None
    if rebind == -1:
        assert out == "987 144 3751 2387 511 377\n"
    source = _direct_source(vm, "fib")
    assert "if s0 is cl:\n" in source and "s0 = direct(vm, s0, D + 1, M, s1)" in source
    # f calls g (f itself only when the caller passed f): a call by another name is not
    # given the test.
    assert " is cl:" not in _direct_source(vm, "f")


CAPTURED = """\
def make(step):
    count = 0
    total = 100
    def outer_counter():
        def next():
            count = count + step
            total = total - 1
            fresh = count * 2
            return count + total + fresh
        return next
    return outer_counter()
bump = make(3)
other = make(-1)
i = 0
s = 0
while i < 120:
    s = s + bump() + other()
    i = i + 1
print(s, bump(), other())
"""


def test_a_closure_updates_captured_variables_from_its_direct_form(tmp_path):
    """next updates `count` and `total` two scopes out and binds `fresh` as its own, all in
    its direct form: the grandparent's bindings are found past the parent's, whose own test
    comes first (a closure's store finds its captured variable there in one test)."""
    out, vm = both(tmp_path, CAPTURED)
    assert out[1] is None and out[0].split()[0] == "53040"
    assert direct_form(vm, "next") is not None and vm.deopts == 0
    source = _direct_source(vm, "next")
    assert "elif 'count' in pv: pv['count'] = s0\n" in source
    assert "elif not store_found(cl.scope.parent, 'count', s0)" in source


def test_a_direct_call_tests_one_bound(tmp_path):
    """A direct form's first test is one comparison of its depth with the bound its chain was
    given (frames.DIRECT_BOUND: the nesting limit and the depth limit in one number, made once
    per chain), and its call of itself passes the bound on unchanged; the recursion and depth
    tests above show both limits still hold where they held."""
    out, vm = both(tmp_path, RECURSION)
    source = _direct_source(vm, "fib")
    assert "\n    if D > M: raise Deoptimize(None, 0)\n" in source
    assert re.search(r"= direct\(vm, s\d+, D \+ 1, M, s\d+\)", source)
    assert "vm.max_depth" not in source and "N + 1" not in source


THROUGH_MAP = """\
def down(n):
    if n == 0:
        return 0
    return [n - 1].map(down)[0] + 1
print(down(20))
print(down(1000))
"""


@pytest.mark.parametrize("max_depth", [30, 47, 48, 49, 96, 97])
def test_recursion_through_a_callback_meets_the_depth_limit_at_the_same_call(tmp_path, max_depth):
    """A method's callbacks are called directly with the bound worked out once per method call
    (methods.step): recursion through ``map`` fails at the same call, with the same depth, in
    both tiers, whatever the limit's distance from the nesting limit."""
    one = _run_with_depth(tmp_path, THROUGH_MAP, "1", max_depth)
    two = _run_with_depth(tmp_path, THROUGH_MAP, "2", max_depth)
    assert one[:2] == two[:2]
    assert one[1][0] == "SenseRecursionError"
    assert two[2].depth == one[2].depth


CAPTURED_COUNT = """\
count = 1000
def make(k):
    def next():
        count = count + k
        return count
    if k == 1:
        return next
    local count = 10 * k
    return next
a = make(2)
b = make(1)
c = make(3)
out = []
i = 0
while i < 60:
    push(out, a())
    if i % 20 == 19 and CALL_B:
        push(out, b())
    push(out, c())
    i = i + 1
print(out.slice(0, 6), out.slice(40, 46), out[-1], len(out), count)
"""


@pytest.mark.parametrize("call_b", ["true", "false"])
def test_a_captured_variable_is_read_and_written_where_it_was_found(tmp_path, call_b):
    """next's direct form is made for a closure whose scope binds count (make(2)'s): it reads
    and writes count in that scope with no test, once its prologue has found it there. The
    closure of make(1), whose scope has no count (next then updates the global), fails that
    test: the form is made again for it, without the assumption, and serves every closure
    from then on. Both tiers print the same."""
    (out, error, *_), vm = both(tmp_path, CAPTURED_COUNT.replace("CALL_B", call_b))
    assert error is None
    if call_b == "true":
        assert out == ("[22, 33, 24, 36, 26, 39] [90, 62, 93, 64, 96, 66] 210 123 1003\n")
    else:
        assert out == "[22, 33, 24, 36, 26, 39] [62, 93, 64, 96, 66, 99] 210 120 1000\n"
    source = next(c for c in vm.prepared if c.code.name == "next").t2.direct_source
    assumed = "if 'count' not in pv: return REDO(vm, cl, D, M)" in source
    assert assumed == (call_b == "false")
    assert bool(re.search(r"^ +pv\['count'\] = s0$", source, re.M)) == assumed
    assert ("if l0 is not U: s0 = l0" in source) != assumed


HOISTED = """\
def depth(n):
    if n == 0:
        return 0
    return 1 + depth(n - 1)
def ask_it(q):
    return ask_human(q)
def loop(k, pause):
    total = 0
    i = 0
    while i < k:
        total = total + depth(i * 7)
        if i == pause:
            total = total + len(ask_it("more?"))
        i = i + 1
    return total
print(loop(4, -1))
print(loop(30, 2))
"""


def _generator_source(vm, name):
    """The source of the generator tier 2 runs a frame of the function called ``name`` with."""
    from sensevm.runtime.tier2 import _Gen
    prepared = next(p for p in vm.prepared if p.code.name == name)
    gen = _Gen(prepared)
    gen.analyse()
    return gen.generate()


@pytest.mark.parametrize("max_depth", [30, 47, 48, 49, 96, 97, 250])
def test_a_generator_finds_the_bound_of_its_direct_calls_when_it_starts_and_resumes(
        tmp_path, max_depth):
    """(issue 27) A frame's generator works out the depth and bound of its direct calls once
    when it starts and again after every yield it resumes from (frames.direct_bound), not at
    each call: the depth limit is still met at the same call in both tiers, before and after
    the loop has left frames (ask_human in a callee) and come back."""
    runs = [_run_with_depth(tmp_path, HOISTED, tier, max_depth, "yes\n") for tier in "12"]
    vm = runs[1][2]
    runs = [(out, error, run_vm.depth) for out, error, run_vm in runs]
    assert runs[0] == runs[1]
    if max_depth < 250:
        assert runs[0][1][0] == "SenseRecursionError" and runs[0][1][2].line == 4
    else:
        assert runs[0][1] is None
        assert runs[0][0].split()[0] == "42" and runs[0][0].split()[-1] == "3048"
    source = _generator_source(vm, "loop")
    assert source.count("_dd, _M = DB(vm)\n") == 1 + source.count("yield; _dd, _M = DB(vm)\n")
    assert re.search(r"= _l\(vm, s\d+, _dd, _M, s\d+\)", source)
    assert "vm.depth + 1" not in source
    lines = source.splitlines()
    for k, line in enumerate(lines):       # a bare yield only where the generator ends
        if line.strip() == "yield":
            assert lines[k + 1].strip() == "return", lines[k - 3:k + 2]


AGENT_DEPTHS = """\
def depth(n):
    if n == 0:
        return 0
    return 1 + depth(n - 1)
agent a:
    total = 0
    i = 0
    while i < 12:
        total = total + depth(i * 7)
        if i == 2:
            total = total + len(ask_human("more?"))
        i = i + 1
    print("agent", total)
def deep(n):
    if n == 0:
        start(a)
        return 0
    return deep(n - 1)
deep(40)
resume(a, "yes")
print(a.status)
"""


@pytest.mark.parametrize("max_depth", [60, 90, 97, 130])
def test_an_agent_resumed_at_another_depth_gives_its_direct_calls_the_new_bound(
        tmp_path, max_depth):
    """The agent starts 41 frames deep and pauses in its loop; resumed from the top, its
    frames run at another depth, and the generator's direct calls must be given the bound of
    that depth (found again after the yield), or tier 2 would stop the recursion early."""
    runs = [(out, error, vm.depth) for out, error, vm in
            (_run_with_depth(tmp_path, AGENT_DEPTHS, tier, max_depth, "") for tier in "12")]
    assert runs[0] == runs[1]
    assert (runs[0][1] is None) == (max_depth >= 90)
    if max_depth >= 90:
        assert runs[0][0] == "agent 465\ncompleted\n"
