"""Item loops: a `for` loop's Int version walks its items with a Python `for` (tier2._Gen
item_loop), the iterator's index kept by Python's own iterator and written back wherever the
frame can be seen (a spill, a deoptimization, a pause saved to disk) and wherever the Python
`for` is left before its end. Each program here attacks that write-back: the Array changed
under the loop, a guard failing part-way, a labelled item taking the frame back to tier 1 at
the loop's header, loops left by break, continue and return, a pause in the loop saved and
continued in other processes. Tier 2 must do exactly what tier 1 does."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from conftest import ROOT, run_source
from test_tiers import TOOL_AND_SEND, _run_source


def _code(vm, name):
    return next(c for c in vm.prepared if c.code.name == name)


def _item_loops(code) -> int:
    """How many item loops the tier-2 code of ``code`` (generator and direct form) has."""
    texts = [code.t2.source, code.t2.direct_source or ""] if code.t2 else []
    return sum(text.count(".__setstate__(") for text in texts)


PROGRAMS = {
    # A push in the loop extends it, as FOR_ITER reads the live Array.
    "push_extends": ('''def run():
    xs = [1, 2, 3]
    total = 0
    for x in xs:
        total = total + x
        if x < 100:
            push(xs, x * 10)
    return str(total) + " " + str(len(xs))
print(run())
''', "666 9"),
    # A pop in the loop shortens it.
    "pop_shortens": ('''def run():
    xs = [1, 2, 3, 4, 5, 6, 7, 8]
    total = 0
    for x in xs:
        total = total + x
        xs.pop()
    return str(total) + " " + str(len(xs))
print(run())
''', "10 4"),
    # A Float part-way: the Int version's turn breaks out to test its guard again, which
    # fails; the general version must go on at the next item, not the first or a later one.
    "guard_fails_part_way": ('''def run(items):
    total = 0
    count = 0
    for x in items:
        total = total + x
        count = count + 1
    return str(total) + " " + str(count)
print(run([1, 2, 3, 4.5, 5, 6]))
print(run([1, 2, 3]))
print(run([]))
''', "21.5 6\n6 3\n0 0"),
    # Left by break, continue and return, nested, and entered again for each row.
    "break_continue_return": ('''def first(rows, want):
    for row in rows:
        for x in row:
            if x == want:
                return x
            if x < 0:
                break
    return -1
def run():
    rows = [[1, 3, 5], [2, -1, 7], [9, 11, 4]]
    seen = 0
    total = 0
    for row in rows:
        for x in row:
            seen = seen + 1
            if x < 0:
                break
            if x % 2 == 0:
                continue
            total = total + x
    return str(seen) + " " + str(total) + " " + str(first(rows, 4)) + " " + str(first(rows, 7))
print(run())
''', "8 29 4 -1"),
    # A String longer than values.COPIED_CHARS is walked in place (a StringIterator).
    "long_string": ('''def run():
    text = "ab c"
    while len(text) < 70000:
        text = text + text
    spaces = 0
    chars = 0
    for c in text:
        chars = chars + 1
        if c == " ":
            spaces = spaces + 1
    return str(chars) + " " + str(spaces)
print(run())
''', "131072 32768"),
    # A Map's keys, taken when the loop starts, while the loop adds to it.
    "map_keys": ('''def run():
    m = {"a": 1, "b": 2, "c": 3}
    total = 0
    for k in m:
        total = total + m[k]
        m[k + "x"] = 10
    return str(total) + " " + str(len(m))
print(run())
''', "6 6"),
    # Items taken to be Ints: a Float leaves the Int version at that item, which the general
    # version takes; the next Int goes back to the Int version.
    "items_not_all_ints": ('''def run(items):
    big = 0
    seen = 0
    for x in items:
        if x > 2:
            big = big + 1
        seen = seen + 1
    return str(big) + " " + str(seen)
print(run([1, 5, 2.5, 7, 0.5, 9, 3, 2.0, 2]))
print(run([2.5, 3.5]))
''', "5 9\n2 2"),
    # A call in the loop: its frame is spilled with the index written back.
    "calls_in_the_loop": ('''def twice(x):
    return x * 2
def run():
    total = 0
    for x in [1, 2, 3, 4]:
        total = total + twice(x)
    for x in [5, 6]:
        total = total + [x, 1][1]
    return total
print(run())
''', "22"),
}


@pytest.fixture
def generous(monkeypatch):
    """Int versions made whatever their size (short loops here would not earn theirs)."""
    from sensevm.runtime import tier2
    monkeypatch.setattr(tier2, "SPEC_LINES", 10_000)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_item_loops_do_what_tier_one_does(tmp_path, generous, name):
    source, expected = PROGRAMS[name]
    one = _run_source(tmp_path, source, "1")
    two = _run_source(tmp_path, source, "2")
    assert one[1] is None and one[:5] == two[:5]
    assert one[0] == expected + "\n"
    loops = sum(_item_loops(code) for code in two[5].prepared if code.t2)
    assert loops >= 1       # (tier 2 walked at least one of them with a Python ``for``)


LABELLED = TOOL_AND_SEND + '''def run(xs):
    total = 0
    seen = 0
    for x in xs:
        total = total + x
        seen = seen + 1
    return [total, seen]
got = run([1, 2, count(1), 4, 5])
print(got[0], got[1])
s = send("team" + str(got[0]) + "@example.com")
s.verify()
print(s.second_look != nil)
got = run([1, 2, 3])
print(got[0], got[1])
'''


EMPTY_FIRST = """\
def run(xs, start):
    k = start
    total = 0
    for x in xs:
        k = 5
        total = total + x
    return k * 2
CALLS
"""


@pytest.mark.parametrize("calls, printed", [
    ("print(run([], true))", ""),           # the first call: run's generator
    ("print(run([], 4))\nprint(run([1, 2], 4))\nprint(run([], true))", "8\n10\n")])
def test_the_exit_knows_only_what_the_header_knows(tmp_path, generous, calls, printed):
    """The loop's exit is taken at its header: k holds an Int after every turn, but no turn
    may have run, and then k is what it was before the loop (true: an error), in run's
    generator and in its direct form."""
    source = EMPTY_FIRST.replace("CALLS", calls)
    one = _run_source(tmp_path, source, "1")
    two = _run_source(tmp_path, source, "2")
    assert one[:5] == two[:5]
    assert one[0] == printed and "got Bool and Int" in one[1][1]
    assert _item_loops(_code(two[5], "run")) >= 1


def test_an_item_taken_to_be_an_int_is_tested_once(tmp_path, generous):
    """``total + x`` on an Int total and the item: the item is tested for an Int as the loop
    takes it (and the next one by the guard), and the addition and the store need no test."""
    source = "def run(xs):\n    total = 0\n    for x in xs:\n        total = total + x\n" \
             "    return total\nprint(run([1, 2, 3]), run([1, 2.5, 3]))\n"
    one = _run_source(tmp_path, source, "1")
    two = _run_source(tmp_path, source, "2")
    assert one[:5] == two[:5] and one[0] == "6 6.5\n"
    text = _code(two[5], "run").t2.source
    assert re.search(r"if s1\.__class__ is not int:\n +s0\.i = _f\d+\.__reduce__\(\)\[2\] - 1", text)
    assert "s0.items[s0.i].__class__ is int)" in text
    assert re.search(r"\n +(l\d) = \1 \+ b\d+_\d(; dw = 1)?\n", text)     # (none: quiet)


def test_a_labelled_item_gives_the_loop_to_tier_one_at_that_item(tmp_path, generous):
    """The third item is a tool's: tier 2 hands the frame to tier 1 at the loop's header,
    which takes that item again (the index written back one less than Python's iterator's)
    and labels what the loop computes from it: the address built from the total is flagged."""
    one = _run_source(tmp_path, LABELLED, "1")
    two = _run_source(tmp_path, LABELLED, "2")
    assert one[1] is None and one[:5] == two[:5]
    assert one[0].splitlines() == ["53 5", "true", "6 3"]
    assert _item_loops(_code(two[5], "run")) >= 1


RESHAPED = TOOL_AND_SEND + """\
def drop(xs, k):
    xs.remove_at(k)
    return 0
def run(xs, k):
    n = 0
    for x in xs:
        n = n + 1
        if x == 3:
            WHERE
    return n
print(run([1, 2, 3], 0))
j = count(0) - 40
got = run([1, 2, 3], j)
print(got)
s = send("team" + str(got) + "@example.com")
s.verify()
print(s.second_look != nil)
"""


@pytest.mark.parametrize("where", ["xs.remove_at(k)", "drop(xs, k)"])
@pytest.mark.parametrize("spec_lines", [None, 10_000])
def test_an_array_reshaped_by_a_labelled_index_labels_the_last_pass(tmp_path, monkeypatch,
                                                                     where, spec_lines):
    """(Found by review.) Removing at a tool's index makes the Array's length the tool's
    (provenance.SHAPES) while the loop runs: how many passes there were is then the data's,
    and tier 1 labels what the loop counted at the FOR_ITER that finds no item left. The
    item loop's Python ``for`` ends without asking: its ``else`` asks, and hands that last
    FOR_ITER to tier 1. The address built from the count is flagged on both tiers (in the
    function's generator, then its direct form; at the default budget and a generous one)."""
    from sensevm.runtime import tier2
    if spec_lines:
        monkeypatch.setattr(tier2, "SPEC_LINES", spec_lines)
    source = RESHAPED.replace("WHERE", where)
    one = _run_source(tmp_path, source, "1")
    two = _run_source(tmp_path, source, "2")
    assert one[1] is None and one[:5] == two[:5]
    assert one[0].splitlines()[-2:] == ["3", "true"]
    assert _item_loops(_code(two[5], "run")) >= 1


@settings(max_examples=40, deadline=None)
@given(items=st.lists(st.one_of(st.integers(-5, 30), st.sampled_from([1.5, -2.5])),
                      max_size=12),
       stop=st.integers(-5, 30), grow=st.integers(-5, 30), shrink=st.integers(-5, 30),
       before=st.sampled_from(["0", "2.5", "true"]), leaves=st.booleans())
def test_random_item_loops_match_tier_one(tmp_path_factory, items, stop, grow, shrink, before,
                                          leaves):
    """Random items (Ints, and Floats that fail the Int guard part-way) and a body that may
    push, pop, continue or break on them (with no break, the loop's exit is made in its Int
    version), a local that each turn leaves an Int read after the loop (what it was before,
    when no turn ran): both tiers print the same, or fail alike."""
    from sensevm.runtime import tier2
    tmp_path = tmp_path_factory.mktemp("loop")
    source = f'''def run(xs, start):
    last = start
    total = 0
    turns = 0
    for x in xs:
        turns = turns + 1
        last = turns
{"        if turns > 40:" + chr(10) + "            break" + chr(10) if leaves else ""}        if x == {grow} and turns < 30:
            push(xs, x + 1)
        if x == {shrink} and len(xs) > 0:
            xs.pop()
        if x == {stop}:
            continue
        total = total + x
    return str(total) + " " + str(turns) + " " + str(len(xs)) + " " + str(last * 2)
print(run({items!r}, {before}))
'''
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tier2, "SPEC_LINES", 10_000)
        one = _run_source(tmp_path, source, "1")
        two = _run_source(tmp_path, source, "2")
    assert one[:5] == two[:5]
    assert (one[1] is None) == (bool(items) or before != "true")


AGENT = '''agent counter:
    "counts its answers"
    total = 0
    for k in [1, 2, 3, 4]:
        total = total + k
        answer = ask_human("after " + str(k) + "?")
        print("item", k, "total", total, "heard", answer)
    print("done", total)
start(counter)
'''


def _sensevm(*args, cwd, tier):
    """``sensevm ARGS`` in a process of its own, Int versions made whatever their size (as
    the ``generous`` fixture does in this one)."""
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1", SENSE_TIER=tier)
    launcher = ("import sys\nfrom sensevm.runtime import tier2\ntier2.SPEC_LINES = 10_000\n"
                "from sensevm.cli.launch import entry\n"
                f"sys.argv = ['sensevm'] + {list(args)!r}\nentry()\n")
    return subprocess.run([sys.executable, "-c", launcher], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=120)


@pytest.mark.parametrize("tier", ("1", "2"))
def test_a_pause_in_an_item_loop_is_saved_at_its_item(tmp_path, tier):
    """The agent pauses inside the loop: the state saved to disk has the iterator at the
    item after the one being worked on, so each resume (a new process) goes on with the
    next item, as one process does."""
    (tmp_path / "a.sns").write_text(AGENT)
    first = _sensevm("run", "a.sns", "--state-dir", "state", cwd=tmp_path, tier=tier)
    assert first.returncode == 0, first.stderr
    outs = [_sensevm("resume", "state", "counter", word, cwd=tmp_path, tier=tier)
            for word in ("a", "b", "c", "d")]
    assert all(p.returncode == 0 for p in outs), [p.stderr for p in outs]
    single = run_source(AGENT + "".join(f'resume(counter, "{w}")\n' for w in "abcd"),
                        tmp_path, "single.sns")
    assert single.error is None
    assert "".join(p.stdout for p in outs) == single.stdout
    assert single.stdout.splitlines()[-2:] == ["item 4 total 10 heard d", "done 10"]
