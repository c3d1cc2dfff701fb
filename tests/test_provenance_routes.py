"""No route around the labels (issue 21, items 1, 2, 3 and 6): text the VM builds from labelled
values, containers compared, loop counts and lengths, memory across runs, builtins that read
labelled settings. Each reproducer rebuilds a page's address out of some text, character by
character behind clean-looking branches, and sends to it: the second look must still ask."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT
from test_tiers import _run_source

TIERS = ("1", "2")

HEAD = '''tool page() returns String requires web.fetch:
    return "mallory@evil.example"
tool count() returns Int requires web.fetch:
    return 40 + 1
irreversible action send(to: String) requires email.send:
    print("SENT " + to)
def launder(text):
    local out = ""
    for c in text:
        for k in ["a", "b", "c", "e", "i", "l", "m", "o", "p", "r", "v", "x", "y", "@", "."]:
            if c == k:
                out = out + k
    return out
def asks(to):
    local s = send(to)
    s.verify()
    return s.second_look != nil
'''


def run(tmp_path, body, tier):
    out, error, *_ = _run_source(tmp_path, HEAD + body, tier)
    assert error is None, error
    return out.splitlines()


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("route, body", [
    # the flag's own reason quotes the address
    ("second_look", 'a = send(page())\na.verify()\nprint(asks(launder(a.second_look)))\n'),
    # str() of an agent shows its pause reason
    ("str_agent", 'agent w:\n    x = pause(page())\nstart(w)\nprint(asks(launder(str(w))))\n'),
    # str() of an Array of the page's text
    ("str_array", 'print(asks(launder(str([page(), 1]))))\n'),
    # a manifest's entries quote the queued arguments
    ("manifest", 'keep = ""\nsession weekly as s:\n    q = send(page())\n    q.verify()\n    q.approve()\n'
                 '    q.commit()\n    keep = s.manifest().entries[0]\n    s.abort()\n'
                 'print(asks(launder(keep)))\n'),
    # an error message quoting the page, read back from audit_log()
    ("audit_line", 'irreversible action check(s: String) requires ledger.check:\n'
                   '    assert(false, s)\nc = check(page())\nc.verify()\n'
                   'test "c":\n    c.commit()\nline = ""\nfor l in audit_log():\n'
                   '    line = l\nprint(asks(launder(line)))\n'),
    # Array equality decided by a labelled element
    ("array_equal", 'p = page()\nout = ""\nfor i in range(20):\n'
                    '    for k in ["a", "e", "i", "l", "m", "o", "r", "v", "x", "y", "@", ".", "p"]:\n'
                    '        if [p[i]] == [k]:\n            out = out + k\nprint(asks(out))\n'),
])
def test_text_the_vm_builds_keeps_the_labels_of_what_it_shows(tmp_path, tier, route, body):
    assert run(tmp_path, body, tier)[-1] == "true"


@pytest.mark.parametrize("tier", TIERS)
def test_the_same_routes_from_clean_text_do_not_ask(tmp_path, tier):
    """The other direction: the program's own address laundered the same ways still goes."""
    lines = run(tmp_path, '''a = "mallory@evil.example"
print(asks(launder(a)))
print(asks(launder(str([a, 1]))))
print(asks(a))
''', tier)
    assert lines == ["false", "false", "false"]


@pytest.mark.parametrize("tier", TIERS)
def test_a_loop_count_and_a_length_carry_their_arguments_label(tmp_path, tier):
    """`for i in range(n)` and `len(range(n))` dropped n's label: an amount taken from a tool
    came out clean after a `for` loop, where the equivalent `while` loop was flagged. (The
    amounts are 41 and 51, which no literal of the program endorses.)"""
    lines = run(tmp_path, '''irreversible action pay(to: String, amount: Int) requires payment.send:
    print("PAID", amount)
def flagged(amount):
    local p = pay("landlord@example.com", amount)
    p.verify()
    return p.second_look != nil
n = count()
total = 0
for i in range(n):
    total = total + 1
print(flagged(total))
m = 0
i = 0
while i < n:
    m = m + 1
    i = i + 1
print(flagged(m))
print(flagged(len(range(n))))
print(flagged(len([1, 2, 3])))
print(flagged(len(type_of(n)) * 17))
''', tier)
    assert lines == ["true", "true", "true", "false", "true"]


@pytest.mark.parametrize("tier", TIERS)
def test_builtins_accept_labelled_values_where_they_accept_plain_ones(tmp_path, tier):
    """`memory key must be a String, got String`, `receive()'s timeout must be a number, got
    Float`, and the same in `.as_of`, `inference(...)` and `skill`."""
    lines = run(tmp_path, '''tool secs() returns Float requires web.fetch:
    return 0.01
tool helper() returns String "helps":
    return "help"
tool name() returns String requires web.fetch:
    return "notes"
memory notes: "scratch"
notes.remember(name(), page())
print(notes.recall(name()), notes.keys())
print(asks(launder(notes.keys()[0] + "@evil.example")))
agent listener:
    print("heard", receive(secs()))
start(listener)
model bot = inference("mock", name(), response_template: "echo: {prompt}")
print(bot)
helpers = skill(name(), page(), [helper])
print(helpers)
''', tier)
    assert lines[0] == "mallory@evil.example [notes]"
    assert lines[1] == "true"         # a key a tool chose keeps the tool's label
    assert lines[2:] == ["heard nil", "<model bot>", "<skill notes (1 tools)>"]


def test_persistent_memory_keeps_labels_across_runs(tmp_path):
    """An address stored from a page in one run was sent unasked in the next."""
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1", SENSE_MEMORY_DIR=str(tmp_path / "m"))
    store = HEAD + 'persistent memory book\nbook.remember("who", page())\nbook.remember("me", "a@b.example")\n'
    use = HEAD + '''persistent memory book
print(asks(book.recall("who")), asks(book.recall("me")))
print(asks(launder(book.history("who")[0])), asks(book.as_of("who", 99)))
'''
    (tmp_path / "store.sns").write_text(store)
    (tmp_path / "use.sns").write_text(use)
    for name in ("store.sns", "use.sns"):
        proc = subprocess.run([sys.executable, "-m", "sensevm", "run", name], cwd=tmp_path,
                              env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["true false", "true true"]
    # The reference's own table is as it was: one row per record, no new column.
    import sqlite3
    (db,) = list((tmp_path / "m").glob("*.db"))
    conn = sqlite3.connect(db)
    columns = [row[1] for row in conn.execute("PRAGMA table_info(memory_log)")]
    assert columns == ["version", "key", "op", "value", "timestamp"]
    assert [row[0] for row in conn.execute("SELECT version FROM memory_labels")] == [1]


@pytest.mark.parametrize("tier", TIERS)
def test_the_origins_of_arrays_nested_deeper_than_python_recurses(tmp_path, tier):
    # len() of an Array carries its items' origins, found by a walk of its own: 3,000 levels
    # of nesting (a program may write that many) neither overflow nor lose the page's label.
    nested = "[" * 3000 + "page()" + "]" * 3000
    lines = run(tmp_path, f"x = [{nested}, 1]\nprint(len(x))\n"
                          'print(asks(str(len(x)) + "@b.example"))\n', tier)
    assert lines == ["2", "true"]


@pytest.mark.parametrize("tier", TIERS)
def test_a_bool_compared_with_a_pages_array_is_labelled(tmp_path, tier):
    # Found by tests/test_taint_oracle.py: `true == items` was a plain false, though whether it
    # is false is the Array's doing (a Bool never equals an Array; the Array's type came from
    # the page), while `1 == items` was labelled.
    lines = run(tmp_path, 'tool items() returns Array requires web.fetch:\n    return [0]\n'
                          'x = items()\nprint(asks(str(true == x) + "@b.example"))\n'
                          'print(asks(str(x == false) + "@b.example"))\n'
                          'print(asks(str(true == [0]) + "@b.example"))\n', tier)
    assert lines == ["true", "true", "false"]


FIRST_LABEL_IN_A_COMPILED_LOOP = '''untrusted tool fetch(k: Int) returns String requires web.read:
    return "x" + str(k)
irreversible action send(to: String) requires email.send:
    print("sent to", to)
policy:
    allow web.read
    allow email.send
def run(n):
    xs = []
    i = 0
    while i < n:
        push(xs, "a")
        i = i + 1
    count = 0
    for x in xs:
        count = count + 1
        if count == n:
            push(xs, fetch(7))
        if count > n:
            s = send("team" + str(count) + "@example.com")
            s.verify()
            print(count, s.second_look != nil, len(xs))
    return count
print(run(50))
'''


@pytest.mark.parametrize("tier", ("1", "2", "auto"))
def test_the_first_labelled_value_of_a_process_stops_a_compiled_loop(tmp_path, tier):
    """Tier 2 tests a loop's item against the labelled types as the process knows them
    (provenance.LABELLED, empty until the first labelled value is made): here that
    value is the page a loop already compiled, in a process that had made none, pushes onto
    the Array it walks. Its item still opens the pc label in tier 1, and the address built
    from the counter under it is flagged. (A process of its own: in pytest's, some earlier
    test has labelled a value already.)"""
    (tmp_path / "p.sns").write_text(FIRST_LABEL_IN_A_COMPILED_LOOP)
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1", SENSE_TIER=tier)
    proc = subprocess.run([sys.executable, "-m", "sensevm", "run", "p.sns"], cwd=tmp_path,
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["51 true 51", "51"]


LIVE_CHECK = """\
from sensevm.guard import provenance as P
O = P.only(P.untrusted("web"))
assert not P.live and not P.LABELLED
{make}
assert P.live and P.LABELLED >= {{P.LStr, P.LInt, P.LFloat, P.LBool}}
n = P.LInt(3, P.only(P.untrusted("another")))
assert type(n) in P.LABELLED and type(n) is not P.LInt
"""


@pytest.mark.parametrize("make", ['P.LStr("page", ((0, 4, O),))', "P.LInt(3, O)",
                                  "P.LFloat(1.5, O)", "P.LBool(True, O)", "P._shape_for([1])"])
def test_the_labelled_types_tier_two_tests_against_fill_when_the_process_goes_live(make):
    """provenance.LABELLED is empty while no value is labelled (its test of a plain type
    then stops at the first slot in every run) and holds every labelled type from the first
    labelled value on, whichever kind it is, and each Int class made after."""
    proc = subprocess.run([sys.executable, "-c", LIVE_CHECK.format(make=make)],
                          env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
