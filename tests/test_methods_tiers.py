"""Method calls in tier 2 (EXTENSIONS.md E2): a String's, Array's or Map's method called where
it is read (``x.name(args)``) runs without its bound method being made, and every way the frame
can be seen in between (a call in the arguments that pauses, deoptimizes or hands over to tier 1,
a saved agent) still finds the bound method where tier 1 has it. Everything observable is the
same as in tier 1 (tests/test_tiers.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT
from test_tier2_ints import HEADER
from test_tiers import _run_source, _verified, run_tier


def same_on_both_tiers(tmp_path, source):
    path = tmp_path / "p.sns"
    path.write_text(source)
    verified = _verified(str(path))
    one = run_tier(verified, "1")
    two = run_tier(verified, "2")
    assert one[:5] == two[:5]
    return two


def test_a_hot_method_call_makes_no_bound_method(tmp_path, monkeypatch):
    from sensevm.runtime import methods
    made = []
    real = methods.make_bound
    monkeypatch.setattr(methods, "make_bound", lambda *a, **k: made.append(a[:2]) or real(*a, **k))
    out, error, *_, vm = same_on_both_tiers(tmp_path, '''words = []
i = 0
while i < 300:
    words.push("w" + str(i % 7))
    i = i + 1
counts = {}
for w in words:
    counts[w.upper()] = counts.get(w.upper(), 0) + 1
print(counts.keys().join(","), len(words))
''')
    assert error is None and out == "W0,W1,W2,W3,W4,W5,W6 300\n"
    made.clear()
    run_tier(vm.verified, "2")
    assert len(made) < 10          # (tier 1 binds 1,202 methods here: one per method read)
    made.clear()
    run_tier(vm.verified, "1")
    assert len(made) == 1202


ERRORS = [
    # the arity, at the call's '('
    'i = 0\nwhile i < 50:\n    i = i + 1\n    x = "ab".upper(i)\n',
    # no such method, at the name
    'i = 0\nwhile i < 50:\n    i = i + 1\n    x = [1].size(i)\n',
    # a bad argument in an argument, before the call
    'i = 0\nwhile i < 50:\n    i = i + 1\n    x = "ab".find(1 + "a")\n',
    # the method's own error
    'i = 0\nwhile i < 50:\n    i = i + 1\n    x = "ab".repeat("2")\n',
    # a Map's missing key inside the arguments
    'm = {}\ni = 0\nwhile i < 50:\n    i = i + 1\n    x = "ab".find(m["k"])\n',
]


@pytest.mark.parametrize("source", ERRORS)
def test_errors_are_the_same_and_in_the_same_place(tmp_path, source):
    out, error, *_ = same_on_both_tiers(tmp_path, source)
    assert error is not None


def test_arguments_that_call_deoptimize_or_branch_on_labels(tmp_path):
    out, error, *_ = same_on_both_tiers(tmp_path, '''tool page() returns String:
    return "x@evil.example"
def twice(s):
    return s + s
def via_tool(s):
    return page().find(s)
total = 0
out = []
i = 0
p = page()
while i < 60:
    out.push(twice(str(i)).find(str(i % 3)))
    out.push("abc".find(via_tool("@") > 0 and "b"))
    total = total + "evil".find(p.contains("e") and "v")
    i = i + 1
print(len(out), out.slice(0, 4), total)
''')
    assert error is None and out.splitlines() == ["120 [0, 1, 0, 1] 60"]


def test_a_method_call_paused_in_its_arguments_saves_the_bound_method(tmp_path):
    (tmp_path / "p.sns").write_text('''agent collector:
    got = []
    i = 0
    while i < 40:
        got.push(i)
        i = i + 1
    got.push(ask_human("one more?"))
    parts = "a,b".split(ask_human("separator?"))
    print(len(got), got[-1], parts)
start(collector)
''')
    env = dict(os.environ, PYTHONPATH=ROOT)
    run = [sys.executable, "-m", "sensevm"]
    first = subprocess.run(run + ["run", "--tier", "2", "--state-dir", "st", "p.sns"],
                           cwd=tmp_path, capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    state = json.loads((tmp_path / "st" / "collector.json").read_text())["state"]
    (agent,) = [o for o in state["objects"] if o["type"] == "agent"]
    (slot,) = agent["frames"][0]["stack"]       # the callee of the paused call: push, bound
    method = state["objects"][slot["ref"]]
    assert (method["type"], method["name"]) == ("method", "Array.push")
    lines = []
    for answer in ("99", ","):
        proc = subprocess.run(run + ["resume", "st", "collector", answer], cwd=tmp_path,
                              capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        lines += proc.stdout.splitlines()
    assert lines == ["41 99 [a, b]"]


def test_forged_code_jumping_into_a_call_is_not_fused():
    """Hand-made bytecode may enter the arguments of a member call from elsewhere: then the
    slot could hold anything when the call is reached, and the site is left unfused."""
    from dataclasses import replace
    from test_verify import asm, program
    from sensevm.bytecode.opcodes import Op
    from sensevm.bytecode.verify import verify
    from sensevm.runtime.tier2 import _Gen
    from sensevm.runtime.vm import VM
    straight = program((Op.LOAD_CONST, 1), (Op.GET_MEMBER, 0), (Op.LOAD_CONST, 1),
                       (Op.CALL, 1), (Op.RETURN,))
    # Both paths reach "in" with one value on the stack: a method bound, or the Int 42.
    entered = program((Op.LOAD_CONST, 0), (Op.LOAD_TRUE,), (Op.POP_JUMP_IF_TRUE, "in"),
                      (Op.POP,), (Op.LOAD_CONST, 1), (Op.GET_MEMBER, 0), "in",
                      (Op.LOAD_CONST, 1), (Op.CALL, 1), (Op.RETURN,))
    for prog, fusions in ((straight, 1), (entered, 0)):
        vm = VM(verify(prog))
        gen = _Gen(vm.prepared[0])
        gen.analyse()
        assert len(gen.fused) == fusions


STEPPED = '''def double(x):
    return x * 2
def odd(x):
    return x % 2 == 1
def add(a, b):
    return a + b
words = "a bb ccc dddd".split()
total = 0
i = 0
while i < 40:
    xs = range(i % 5).map(double).filter(odd)
    total = total + words.map(len).reduce(add, 0) + xs.sum() + len(words.join("-").upper())
    i = i + 1
print(total, {"k": total}.get("k"))
'''


def test_method_calls_and_callbacks_take_the_same_steps_in_both_tiers(tmp_path):
    """A method call is a step, as a call is, and each call a callback method makes is one;
    a budget one short stops both tiers at the same place (docs/limits.md)."""
    from sensevm.base.errors import SenseLimitError
    from sensevm.runtime.vm import VM
    import io
    path = tmp_path / "p.sns"
    path.write_text(STEPPED)
    verified = _verified(str(path))
    used = {}
    for tier in ("1", "2"):
        vm = VM(verified, stdout=io.StringIO(), tier=tier, max_steps=10 ** 9)
        vm.run()
        used[tier] = 10 ** 9 - vm.budget.left
    assert used["1"] == used["2"]
    stops = []
    for tier in ("1", "2"):
        VM(verified, stdout=io.StringIO(), tier=tier, max_steps=used[tier]).run()    # enough
        with pytest.raises(SenseLimitError) as info:
            VM(verified, stdout=io.StringIO(), tier=tier, max_steps=used[tier] - 1).run()
        stops.append(info.value.pos)
    assert stops[0] == stops[1]


CALLBACKS = """\
tool lab(k: Int) returns Int requires calc:
    return k
policy:
    allow calc
def double(x):
    return x * 2 + 1
def odd(x):
    return x % 3 != 0
def add(acc, x):
    return (acc + x) % 1000003
def key(x):
    return (x * 7919) % 10007
def loud(x):
    if x == SPECIAL:
        g = lab
        return g(x) + 1
    return x
xs = []
i = 0
while i < 200:
    xs.push(i)
    i = i + 1
xs.push(lab(7))
ys = xs.map(double)
zs = ys.filter(odd)
print(zs.reduce(add, 0), len(zs), zs.sorted(key)[0], xs.map(loud).reduce(add, 0))
print(xs.map(str).join(",").find("199"))
"""


@pytest.mark.parametrize("special", [-1, 150])
def test_a_callback_with_a_direct_form_is_called_without_call_t2(tmp_path, monkeypatch, special):
    """map, filter, reduce and sorted(key) call a function that has a direct form themselves
    (methods.step), as vm.call_t2 would, with tier 1's results: a labelled item, a callback that
    deoptimizes (it calls a tool) halfway and one that is no function (str) included."""
    from sensevm.runtime.vm import VM
    calls = []
    real = VM.call_t2
    monkeypatch.setattr(VM, "call_t2", lambda self, *a: calls.append(a[1]) or real(self, *a))
    source = CALLBACKS.replace("SPECIAL", str(special))
    out, error, *_, vm = same_on_both_tiers(tmp_path, source)
    assert error is None and len(out.splitlines()) == 2
    # Only the first call of each (which makes its direct form) and those of the builtin str
    # are made through call_t2.
    names = [getattr(c, "name", "") for c in calls]
    assert all(names.count(name) == 1 for name in ("double", "odd", "add", "key", "loud"))
    # loud deoptimizes where it branches on the labelled item, and where it calls the tool.
    assert vm.deopts == (2 if special > 0 else 1)


GUESSED = '''tool page() returns String:
    return "a page from a tool"
def probe(x, w):
    return x.contains(w)
p = page()
seen = []
i = 0
while i < 80:
    seen.push(probe("alpha" + str(i % 3), "a1"))
    i = i + 1
seen.push(probe(["a1", "b"], "a1"))
seen.push(probe(p, "page"))
print(seen.slice(78, 84))
print(probe(BAD, "a"))
'''


@pytest.mark.parametrize("bad", ['{"a": 1}', "5", '"text".upper'])
def test_a_member_call_guesses_its_receiver_type_and_falls_back(tmp_path, bad):
    """A fused member call tests once for the type its name most likely means (``contains``:
    a String) and calls that method straight away; an Array's, a labelled String's (a tool's
    result) or a receiver with no such method take the general path, with tier 1's results and
    errors."""
    from test_tier2_ints import source_of
    out, error, *_, vm = same_on_both_tiers(tmp_path, GUESSED.replace("BAD", bad))
    assert out.splitlines() == ["[false, true, true, true]"]
    assert error is not None
    source = source_of(vm, "probe")
    assert re.search(r"if s\d\.__class__ is str: _m\d+ = _k\d+", source)


def test_map_reduce_and_sorted_take_a_direct_forms_results_themselves(tmp_path, monkeypatch):
    """methods.step puts the result of a direct form's call where map, sorted(key) and reduce
    keep it without Callback.take, and keeps filter's item on a plain true or false; a
    labelled answer (odd of the tool's 7: it may label what it keeps) and a frame's results
    still go through take."""
    from sensevm.runtime import methods
    taken = []
    real = methods.Callback.take
    monkeypatch.setattr(methods.Callback, "take",
                        lambda self, *a: taken.append(self.kind) or real(self, *a))
    path = tmp_path / "p.sns"
    path.write_text(CALLBACKS.replace("SPECIAL", "-1"))
    verified = _verified(str(path))
    one = run_tier(verified, "1")
    assert {kind: taken.count(kind) for kind in methods.KINDS} == {
        "map": 603, "filter": 201, "reduce": 334, "sorted": 133}
    taken.clear()
    two = run_tier(verified, "2")
    assert one[:5] == two[:5]
    # (map's: str's 201 calls, and the few made before double and loud had direct forms)
    assert 1 <= taken.count("filter") <= 3 and 201 <= taken.count("map") <= 210
    assert taken.count("reduce") <= 3 and taken.count("sorted") <= 3


FILTERED = "untrusted " + HEADER + """\
xs = []
i = 0
while i < 100:
    xs.push(i)
    i = i + 1
def odd(x):
    if x == 51:
        xs[51] = 1001
    return x % 2 == 1
def rest(x):
    return x % 3
def big(x):
    return x > lab(90)
print(xs.filter(odd).slice(23, 28), len(xs.filter(odd)))
print(xs.filter(rest).slice(0, 5))
ys = xs.filter(big)
print(ys)
s = send("team" + str(len(ys)) + "@example.com")
s.verify()
print(s.second_look != nil)
"""


def test_filter_keeps_the_item_its_answer_was_about_as_tier_one_does(tmp_path, monkeypatch):
    """filter's plain true keeps the item at the answered position as it is after the call
    (odd rewrites its own item: 1001 is kept, not 51), a plain false drops it, an answer that
    is no Bool (an Int) is taken as tier 1 takes it, and a labelled one (compared with a tool's
    result) labels the Array's length: the address made from it is flagged."""
    from sensevm.runtime import methods
    taken = []
    real = methods.Callback.take
    monkeypatch.setattr(methods.Callback, "take",
                        lambda self, *a: taken.append(a[0]) or real(self, *a))
    path = tmp_path / "p.sns"
    path.write_text(FILTERED)
    verified = _verified(str(path))
    one = run_tier(verified, "1")

    def plain():
        return sum(1 for t in taken if t is True or t is False)
    assert len(taken) == 400 and plain() == 200         # odd's twice: all through take
    taken.clear()
    two = run_tier(verified, "2")
    assert one[:5] == two[:5]
    out, error = two[:2]
    assert error is None
    assert out.splitlines() == ["[47, 49, 1001, 53, 55] 50", "[1, 2, 4, 5, 7]",
                                "[1001, 91, 92, 93, 94, 95, 96, 97, 98, 99]", "true"]
    # odd's answers after the call that made its direct form are kept by step itself; rest's
    # Ints and big's labelled Bools are taken.
    assert plain() <= 4 and len(taken) - plain() >= 200


IN_PLACE = '''tool page() returns String:
    return "a page from a tool"
def probe(x, w, n, fill):
    return [x.upper(), x.trim(), x.starts_with(w), x.ends_with(w), x.contains(w), x.find(w),
            x.replace(w, "-"), x.pad_start(n, fill), x.pad_end(n, fill)]
p = page()
seen = []
i = 0
while i < 60:
    seen.push(probe(" alpha" + str(i % 3), "a", 9, "."))
    i = i + 1
print(seen[58])
print(probe(p, "page", 3, "."))
print(probe(" ab ", p, 9, "."))
print(probe("ab", "ß", 2, ".."))
'''


def test_string_methods_answer_in_place_and_fall_back_to_the_method(tmp_path):
    """A hot String method call on a plain String is written in place (no call of the method,
    no list of its arguments): a labelled receiver or argument, a fill longer than one
    character take the method, with tier 1's results and error."""
    from test_tier2_ints import source_of
    out, error, *_, vm = same_on_both_tiers(tmp_path, IN_PLACE)
    assert out.splitlines()[0] == "[ ALPHA1, alpha1, false, false, true, 1,  -lph-1, .. alpha1,  alpha1..]"
    assert len(out.splitlines()) == 3 and error is not None and "exactly one" in error[1]
    source = source_of(vm, "probe")
    for form in (".upper()", ".strip()", ".startswith(", ".endswith(", " in s", ".find(",
                 ".replace(", ".rjust(", ".ljust("):
        assert form in source, form


COLLECTIONS = '''tool page() returns String:
    return "k1"
def probe(xs, m, k):
    xs.push(k)
    return [xs.pop(), xs.pop(), m.has(k), m.get(k), m.get(k, 0), len(xs)]
m = {"k1": 1, "k2": 2}
seen = []
i = 0
while i < 60:
    seen.push(probe([1, 2, 3], m, "k" + str(i % 4)))
    i = i + 1
print(seen[58], seen[59])
print(probe([7], m, page()))
print(probe([], {page(): 5}, "k1"))
print(probe([], m, 1.5))
'''


def test_array_and_map_methods_answer_in_place_and_fall_back_to_the_method(tmp_path):
    """push, pop, has and get on an Array or a Map, written in place; a labelled key, a Map
    with a labelled key, an empty Array's pop and a Float key take the method, with tier 1's
    results, labels and error."""
    from test_tier2_ints import source_of
    out, error, *_, vm = same_on_both_tiers(tmp_path, COLLECTIONS)
    assert out.splitlines()[0] == "[k2, 3, true, 2, 2, 2] [k3, 3, false, nil, 0, 2]"
    assert len(out.splitlines()) == 2 and error is not None and "pop" in error[1]
    source = source_of(vm, "probe")
    for form in (".append(", ".pop()", " in s", ".get("):
        assert form in source, form


GROWING = '''xs = [1, 2, 3]
ys = []
doubled = []
odd = []
def grow(x):
    if len(xs) < 40:
        push(xs, x + 10)
    return x * 2
def shrink(x):
    if len(ys) > 3:
        ys.pop()
    return x % 2 == 1
i = 0
while i < 3:
    i = i + 1
    xs = [1, 2, 3]
    doubled = xs.map(grow)
    ys = [5, 6, 7, 8, 9, 10, 11]
    odd = ys.filter(shrink)
print(len(xs), len(doubled), doubled.slice(0, 6), doubled[-1], odd, ys)
'''


def test_a_callback_that_grows_or_shrinks_the_array_it_walks(tmp_path):
    """map and filter walk the live Array, in tier 2's loop of direct calls as in tier 1's:
    an item pushed by the callback is met, and an item popped is not."""
    out, error, *_, vm = same_on_both_tiers(tmp_path, GROWING)
    assert error is None
    assert out == "40 40 [2, 4, 6, 22, 24, 26] 262 [5, 7] [5, 6, 7]\n"
    # (grow runs as a direct form, called by step's loop of them, with no frame)
    grow = next(c for c in vm.prepared if c.code.name == "grow")
    assert grow.direct is not None and vm.deopts == 0
