"""Quiet loop versions (tier2._Gen.region): a loop's Int version whose every instruction is
done in place (no call) tests once, on entry, that the process is not live and that no other
thread runs Sense code, and then tests nothing per item or per comparison for labels or for
Arrays whose shape is the data's. Each test here attacks that: the process going live between
two runs of a loop compiled quiet (a tool's result, a Python object under the second look),
another thread running, and random loops run on both tiers before and after going live. Tier
2 must do exactly what tier 1 does, pc labels and second looks included."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from conftest import ROOT
from test_tiers import TOOL_AND_SEND

TESTS = os.path.dirname(os.path.abspath(__file__))


# Whether the process is live is the process's own (provenance.live, never undone): each
# program runs in a fresh process, tier 2 first (while nothing is labelled), then tier 1.
_RUN = """\
import io, json, sys
sys.path.insert(0, sys.argv[1])
from test_tiers import _verified, run_tier
from sensevm.runtime import tier2
from sensevm.runtime.vm import VM
from sensevm.runtime.workers import Workers
tier2.SPEC_LINES = 10_000       # (Int versions made whatever their size)
verified = _verified(sys.argv[2])
if sys.argv[3] == "workers":
    # Another thread running Sense code, as an async tool's body or an agent would be.
    real = VM.__init__
    def with_a_worker(self, *args, **kw):
        real(self, *args, **kw)
        self.workers = Workers(4)
        self.workers.live = 1
    VM.__init__ = with_a_worker
two = run_tier(verified, "2")
codes = {c.code.name: {"quiet": c.quiet, "source": c.t2.source if c.t2 else "",
                       "direct": c.t2 and c.t2.direct_source or ""}
         for c in two[5].prepared}
one = run_tier(verified, "1")
print(json.dumps({"same": one[:5] == two[:5], "one": repr(one[:5]), "two": repr(two[:5]),
                  "out": one[0], "error": one[1] and one[1][1], "codes": codes}))
"""


def _fresh(tmp_path, source, mode="alone") -> dict:
    """Run ``source`` on tier 2, then tier 1, in a process of its own: what both did."""
    path = tmp_path / "p.sns"
    path.write_text(source)
    done = subprocess.run([sys.executable, "-c", _RUN, TESTS, str(path), mode], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["same"], (got["one"], got["two"])
    return got


def _asserts_in_a_fresh_process(script: str) -> None:
    """Run ``script`` (Python, with provenance imported as PV) in a process of its own; its
    asserts must hold."""
    done = subprocess.run([sys.executable, "-c",
                           "from sensevm.guard import provenance as PV\n" + script],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _quiet_versions(code: dict) -> int:
    return sum(text.count(QUIET) for text in (code["source"], code["direct"]))


QUIET = "not LT and (vm.workers is None or not vm.workers.live)"


def _for_body(text: str) -> str:
    """The lines of the first Python ``for`` over items in ``text``, up to its ``else``."""
    match = re.search(r"\n( +)for s\d+ in _f\d+:\n(.*?)\n\1else:", text, re.S)
    assert match, text
    return match.group(2)


WALK = """\
def spaces(text):
    n = 0
    for c in text:
        if c == " ":
            n = n + 1
    return n
"""


TRUTHY = """\
def truthy(xs):
    n = 0
    for x in xs:
        if x:
            n = n + 1
        if not x:
            n = n + 10
        if x == nil:
            n = n + 100
        if xs[0] == x:
            n = n + 1000
    return n
"""


def test_a_quiet_walk_tests_nothing_per_item(tmp_path):
    """A walk over a String's characters, compared to a String; branches on items and on
    their negation, a comparison with nil, a read by index: on entry one test that the process is not live,
    then per item only the program's own work."""
    got = _fresh(tmp_path, WALK + TRUTHY + 'print(spaces("a b  c"), spaces(""), spaces("   "))\n'
                 'print(truthy(["a", "", 0, [], {}, [0], nil, 2.5, false]))\n')
    assert got["out"] == "3 0 3\n1163\n"
    for name in ("spaces", "truthy"):
        code = got["codes"][name]
        assert code["quiet"] and _quiet_versions(code) >= 1
        for text in (code["source"], code["direct"]):
            if QUIET in text:
                body = _for_body(text)
                for test in ("LT", "CT", "SHAPES", "decides", "negation"):
                    assert test not in body, body
                # (A constant's comparison is Python's ==; two items' has its slow path.)
                assert not re.search(r"equal\(s\d+, (' '|None)\)", body), body
                assert "loud(PREP)" in text         # (the general version's first test)


# A tool whose String is the page's (TOOL_AND_SEND's is an Int, which an Int version's own
# item test would catch).
WORD_AND_SEND = """\
untrusted tool word(k: Int) returns String requires web.read:
    return " "
irreversible action send(to: String) requires email.send:
    print("sent to", to)
policy:
    allow web.read
    allow email.send
"""

LIVE_LATER = WORD_AND_SEND + WALK + """\
print(spaces("a b c"), spaces(["a", " "]))
w = word(1)
got = spaces(["x", w, "y", w])
print(got)
s = send("team" + str(got) + "@example.com")
s.verify()
print(s.second_look != nil)
print(spaces("p q"))
"""


def test_going_live_makes_a_quiet_loop_loud(tmp_path):
    """``spaces`` is made quiet before any tool has run (its generator, and its direct form at
    its second call). Then a tool's Strings are among the
    items it walks: its guard finds the process live, tier 1 takes the loop from its header
    (and labels the count by the items that decided it), and the code is made again with no
    quiet version. The address built from the count is flagged on both tiers. (An Array's
    iterator has no origins: only the guard stands between its items and the quiet loop.)"""
    got = _fresh(tmp_path, LIVE_LATER)
    assert got["error"] is None and got["out"].splitlines() == ["2 1", "2", "true", "1"]
    code = got["codes"]["spaces"]
    assert code["quiet"] is False and _quiet_versions(code) == 0
    assert "loud(" not in code["source"] + code["direct"]


STALE = WORD_AND_SEND + """\
def run(text):
    n = 0
    print("start")
    for c in text:
        if c == " ":
            n = n + 1
    k = word(1)
    if k == " ":
        n = n + 100
    return n
got = run("a b c")
print(got)
s = send("team" + str(got) + "@example.com")
s.verify()
print(s.second_look != nil)
"""


def test_what_a_quiet_loop_stored_is_in_the_scope_when_the_frame_is_seen(tmp_path):
    """A quiet version's stores mark nothing (the cached names are marked out of date once, on
    entry): ``n``'s count, stored only in its Python local by the walk, must still reach the
    frame's scope at the tool's call after the loop (print's call had just published it), and
    so tier 1, which takes the frame at the branch on the tool's String, continues from it.
    The code after the loop (its exit, made in the same version) is not quiet: that branch
    labels the count, whose address is flagged."""
    got = _fresh(tmp_path, STALE)
    assert got["error"] is None and got["out"] == "start\n102\ntrue\n"
    code = got["codes"]["run"]
    assert code["quiet"] and _quiet_versions(code) >= 1
    body = _for_body(code["source"])
    assert "dw" not in body and "bk" not in body, body


CALLS_IN_THE_LOOP = WORD_AND_SEND + """\
def run(ks):
    n = 0
    for k in ks:
        w = word(k)
        if w == " ":
            n = n + 1
    return n
got = run([1, 2, 3])
print(got)
s = send("team" + str(got) + "@example.com")
s.verify()
print(s.second_look != nil)
"""


def test_a_loop_that_calls_is_never_quiet(tmp_path):
    """Made before any tool ran, yet its first turn's call makes the process live: its next
    comparisons are of the tool's Strings, and the count they decide is the data's."""
    got = _fresh(tmp_path, CALLS_IN_THE_LOOP)
    assert got["error"] is None and got["out"] == "3\ntrue\n"
    assert _quiet_versions(got["codes"]["run"]) == 0


def test_a_loop_made_while_live_is_never_quiet(tmp_path):
    """Made once the process is live, a quiet version could never be entered: none is made."""
    got = _fresh(tmp_path, TOOL_AND_SEND + "k = count(1)\n" + WALK + 'print(spaces("a b"), k)\n')
    assert got["error"] is None and got["out"] == "1 41\n"
    code = got["codes"]["spaces"]
    assert code["quiet"] and "_f" in code["source"] and _quiet_versions(code) == 0


def test_another_thread_running_sense_code_keeps_a_loop_loud(tmp_path):
    """With a worker running (an async tool's body or an agent, which could label what the
    loop reads meanwhile) the guard fails: the loop runs as tier 1 would, and is made again
    with no quiet version."""
    got = _fresh(tmp_path, WALK + 'print(spaces("a b c"))\nprint(spaces("a  b"))\n', "workers")
    assert got["out"] == "2\n2\n"
    code = got["codes"]["spaces"]
    assert code["quiet"] is False and _quiet_versions(code) == 0


PYTHON_LATER = TOOL_AND_SEND + """\
policy:
    allow python.import
def hits(d, keys):
    n = 0
    for k in keys:
        if d[k] == "b":
            n = n + 1
    return n
print(hits({"a": "b", "c": "d"}, ["a", "c", "a"]))
import python "json"
d = json.loads("{\\"a\\": \\"b\\", \\"c\\": \\"d\\"}")
got = hits(d, ["a", "c", "a"])
print(got)
s = send("team" + str(got) + "@example.com")
s.verify()
print(s.second_look != nil)
"""


def test_a_python_object_under_the_second_look_makes_the_process_live(tmp_path):
    """A Python dict stays a wrapped object, unlabelled itself, yet what an index read of it
    gives is labelled: made, it makes the process live (provenance.go_live), so the loop
    made quiet before reading it goes loud, and the count its items decided is the data's."""
    got = _fresh(tmp_path, PYTHON_LATER)
    assert got["error"] is None and got["out"].splitlines() == ["2", "2", "true"]
    assert got["codes"]["hits"]["quiet"] is False


PYTHON_MODULE = """\
irreversible action send(to: String) requires email.send:
    print("sent to", to)
policy:
    allow email.send
def walk(xs, o):
    n = 0
    for x in xs:
        if f"{o}" != x:
            n = n + 1
    return n
print(walk(["a", "b"], "b"), walk(["a", "b"], "b"))
policy:
    allow python.import
import python "json"
r = walk(["a", "b"], json)
s = send("t" + str(r) + "@x.com")
s.verify()
print(r, s.second_look != nil)
"""


def test_a_python_module_under_the_second_look_is_live_before_a_loop_reads_it(tmp_path):
    """(Found by review.) The module object is the only Python value here: formatted in the
    loop, its text is Python's (untrusted), and the count it decides is the data's. Were the
    process not live from the import on, the quiet version would take it, and the first
    labelled text made in its turn would decide a branch with no label."""
    got = _fresh(tmp_path, PYTHON_MODULE)
    assert got["error"] is None and got["out"].splitlines() == ["1 1", "2 true"]


def test_restored_origins_make_the_process_live():
    """A saved state's origins (an Error's, an iterator's, a pc label's) mean the process
    that saved them was live: the one restoring them is from then on."""
    _asserts_in_a_fresh_process("from sensevm.world import persist\n"
                                "assert persist._unorigins([]) == frozenset() and not PV.live\n"
                                "assert persist._unorigins([['untrusted', 'web']])\n"
                                "assert PV.live and PV.LABELLED\n")


def test_making_a_python_object_under_the_second_look_goes_live():
    """In a process of its own (this one went live long ago)."""
    _asserts_in_a_fresh_process("from sensevm.world.interop import PyObject\n"
                                "PyObject({}, 'dict')\n"
                                "assert not PV.live and not PV.LABELLED\n"
                                "PyObject({}, 'dict', look=object())\n"
                                "assert PV.live and PV.LABELLED\n")


@settings(max_examples=30, deadline=None)
@given(items=st.lists(st.sampled_from(["a", "b", " ", "ab", 1, 2, 7]), max_size=8),
       want=st.sampled_from(["a", "b", " ", 1, 7]),
       tainted=st.integers(-1, 7), op=st.sampled_from(["==", "!="]),
       nil_test=st.booleans(), index=st.booleans())
def test_random_quiet_loops_match_tier_one(tmp_path_factory, items, want, tainted, op,
                                           nil_test, index):
    """A loop made quiet (its first runs are before any tool's), then run again over the same
    items with one replaced by a tool's (or none): comparisons with a String, an Int or nil,
    reads by index, the count it returns sent as an address. Both tiers print and audit the
    same."""
    literal = "[" + ", ".join(repr(x) if isinstance(x, int) else f'"{x}"' for x in items) + "]"
    want_text = repr(want) if isinstance(want, int) else f'"{want}"'
    read = "xs[j]" if index else "x"
    nil_line = "        if x == nil:\n            n = n + 100\n" if nil_test else ""
    source = TOOL_AND_SEND + f"""\
def run(xs):
    n = 0
    j = 0
    for x in xs:
{nil_line}        if {read} {op} {want_text}:
            n = n + 1
        j = j + 1
    return n
xs = {literal}
print(run(xs), run(xs))
if {tainted} >= 0 and {tainted} < len(xs):
    k = count(0) - 40
    if type_of(xs[{tainted}]) == "Int":
        xs[{tainted}] = k + xs[{tainted}]
    else:
        xs[{tainted}] = str(k) + xs[{tainted}]
got = run(xs)
print(got)
s = send("team" + str(got) + "@example.com")
s.verify()
print(s.second_look != nil)
"""
    got = _fresh(tmp_path_factory.mktemp("quiet"), source)
    assert got["error"] is None, got["error"]
