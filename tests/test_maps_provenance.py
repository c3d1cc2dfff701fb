"""No route around the labels through Maps and the methods of EXTENSIONS.md E1/E2: a page's
address put into a Map (as a value or a key), taken apart and put together again by String
methods, passed through map/filter/reduce/sorted, or chosen by a lookup, a search or an order
that labelled data decided, must still make the second look ask; the second look looks into
Maps passed to outgoing actions. Each runs on both tiers (tests/test_provenance_routes.py)."""

from __future__ import annotations

import pytest

from test_provenance_routes import HEAD, TIERS
from test_tiers import _run_source

MORE = '''irreversible action pay(to: String, amount: Int) requires payment.send:
    print("PAID", amount)
irreversible action mail_all(people: Map) requires email.send:
    print("MAILED", len(people))
def flagged(amount):
    local p = pay("landlord@example.com", amount)
    p.verify()
    return p.second_look != nil
def batch_asks(people):
    local s = mail_all(people)
    s.verify()
    return s.second_look != nil
def same(x):
    return x
def shout(x):
    return x.upper()
def glue(acc, x):
    return acc + x
CHARS = ["a", "b", "c", "e", "i", "l", "m", "o", "p", "r", "v", "x", "y", "@", "."]
'''


def run(tmp_path, body, tier):
    out, error, *_ = _run_source(tmp_path, HEAD + MORE + body, tier)
    assert error is None, error
    return out.splitlines()


ROUTES = [
    # Maps: a value, a key, the lists of them, a copy, a merge, what is removed.
    ("map_value", 'm = {"to": page()}\nprint(asks(m["to"]))\n'),
    ("map_key", 'm = {}\nm[page()] = 1\nprint(asks(m.keys()[0]))\n'),
    ("map_items", 'm = {page(): 1}\nprint(asks(m.items()[0][0]))\n'),
    ("map_values", 'm = {1: page()}\nprint(asks(m.values()[0]))\n'),
    ("map_copy_merged", 'm = {}.merged({"to": page()}).copy()\nprint(asks(m.remove("to")))\n'),
    ("map_for", 'm = {page(): 1}\nwho = ""\nfor k in m:\n    who = k\nprint(asks(who))\n'),
    ("map_str", 'print(asks(launder(str({"to": page()}))))\n'),
    # A lookup table of clean characters, read through the page's characters.
    ("map_lookup", 'table = {}\nfor k in CHARS:\n    table[k] = k\nout = ""\n'
                   'for c in page():\n    out = out + table[c]\nprint(asks(out))\n'),
    ("map_get", 'table = {}\nfor k in CHARS:\n    table[k] = k\nout = ""\n'
                'for c in page():\n    out = out + table.get(c, "?")\nprint(asks(out))\n'),
    ("map_equal", 'p = page()\nout = ""\nfor i in range(20):\n    for k in CHARS:\n'
                  '        if {"c": p[i]} == {"c": k}:\n            out = out + k\n'
                  'print(asks(out))\n'),
    # String methods keep each character's origins.
    ("upper_lower", 'print(asks(page().upper().lower()))\n'),
    ("trim", 'print(asks(("  " + page() + "\\n").trim()))\n'),
    ("trim_sides", 'print(asks((" " + page()).trim_start().trim_end()))\n'),
    ("split_words", 'print(asks(("mail " + page() + " now").split()[1]))\n'),
    ("split_join", 'print(asks(page().split("@").join("@")))\n'),
    ("lines", 'print(asks(("x\\n" + page()).lines()[1]))\n'),
    ("replace_same", 'print(asks(page().replace("a", "a").replace("@", "@")))\n'),
    ("replace_each", 'out = page()\nfor k in CHARS:\n    out = out.replace(k, k)\n'
                     'print(asks(out))\n'),
    ("chars_upper", 'out = ""\nfor c in page():\n    out = out + c.upper().lower()\n'
                    'print(asks(out))\n'),
    ("repeat_pad", 'print(asks(page().repeat(1).pad_start(3, " ").trim()))\n'),
    ("chars_pad", 'out = ""\nfor c in page():\n    out = out + c.pad_end(1, "_")\n'
                  'print(asks(out))\n'),
    # A decision made by a search of the page picks clean text: the choice is the page's.
    ("contains_choice", 'p = page()\nout = ""\nfor i in range(20):\n    for k in CHARS:\n'
                        '        if p[i].contains(k) and k.contains(p[i]):\n'
                        '            out = out + k\nprint(asks(out))\n'),
    ("find_choice", 'p = page()\nout = ""\nfor i in range(20):\n    for k in CHARS:\n'
                    '        if p[i].find(k) == 0:\n            out = out + k\nprint(asks(out))\n'),
    ("starts_with_choice", 'p = page()\nout = ""\nfor i in range(20):\n    for k in CHARS:\n'
                           '        if p[i].starts_with(k):\n            out = out + k\n'
                           'print(asks(out))\n'),
    # Arrays: callbacks, order, search.
    ("map_callback", 'print(asks([page()].map(shout)[0].lower()))\n'),
    ("filter_callback", 'print(asks([page(), "x"].filter(same)[0]))\n'),
    ("reduce_callback", 'print(asks(page().split("@").reduce(glue, "").replace("evil", '
                        '"@evil")))\n'),
    ("sorted_key", 'print(asks([page()].sorted(same)[0]))\n'),
    ("index_of_choice", 'p = page()\nout = ""\nfor i in range(20):\n'
                        '    at = CHARS.index_of(p[i])\n    if at >= 0:\n'
                        '        out = out + CHARS[at]\nprint(asks(out))\n'),
    ("slice_join", 'print(asks([page()].slice(0, 1).reversed().copy().join("")))\n'),
    ("min_choice", 'print(asks([page(), page() + "z"].min()))\n'),
]


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("route, body", ROUTES, ids=[r for r, _ in ROUTES])
def test_the_page_stays_the_pages(tmp_path, tier, route, body):
    assert run(tmp_path, body, tier)[-1] == "true"


@pytest.mark.parametrize("tier", TIERS)
def test_a_clean_address_through_the_same_routes_does_not_ask(tmp_path, tier):
    lines = run(tmp_path, '''a = "mallory@evil.example"
table = {}
for k in CHARS:
    table[k] = k
out = ""
for c in a:
    out = out + table[c].upper().lower()
print(asks(out), asks({"to": a}["to"]), asks(a.split("@").join("@")), asks([a].map(shout)[0].lower()))
print(asks([a, "b"].sorted()[1]), batch_asks({"to": a}), batch_asks({a: 1}))
''', tier)
    assert lines == ["false false false false", "false false false"]


@pytest.mark.parametrize("tier", TIERS)
def test_a_length_and_a_membership_carry_the_maps_labels(tmp_path, tier):
    # (Each amount is n * K + n, which no literal of the program holds: the program's own
    # numbers vouch for an amount.)
    lines = run(tmp_path, '''m = {}
m[page()] = 1
n = len(m)
h = int(m.has(page()))
c = len({"a": 1})
print(flagged(n * 52 + n), flagged(h * 70 + h), flagged(c * 90 + c))
s = len(page().split("@"))
f = page().find("@")
print(flagged(s * 30 + s), flagged(f * 10 + f))
''', tier)
    assert lines == ["true true false", "true true"]


@pytest.mark.parametrize("tier", TIERS)
def test_clean_values_chosen_by_the_page_are_the_pages(tmp_path, tier):
    """A clean value read through the page's key, kept by a predicate the page decided, or put
    first by an order the page decided, is the page's choice (each amount n * 12 + n)."""
    lines = run(tmp_path, '''prices = {"mallory@evil.example": 7}
v = prices[page()]
g = prices.get(page(), 0)
print(flagged(v * 12 + v), flagged(g * 12 + g), flagged(prices["mallory@evil.example"] * 12 + 7))
def by_page(x):
    return page().find("@") - x
def evil(x):
    return page().contains("evil")
first = [5, 9].sorted(by_page)[0]
kept = [5, 9].filter(evil)[0]
low = [count(), 3].sorted()[0]
least = [count(), 3].min()
print(flagged(first * 12 + first), flagged(kept * 12 + kept), flagged(low * 12 + low), flagged(least * 12 + least))
''', tier)
    assert lines == ["true true false", "true true true true"]


@pytest.mark.parametrize("tier", TIERS)
def test_the_second_look_looks_into_maps_passed_out(tmp_path, tier):
    """A Map argument's values (a key naming a role gives the value that role) and its keys
    (``{address: amount}`` sends to the keys) are checked as an Array's elements are."""
    lines = run(tmp_path, '''print(batch_asks({"to": page()}))
print(batch_asks({page(): "hello"}))
print(batch_asks({"team": [{"to": page()}]}))
print(batch_asks({"to": "ann@corp.example", "cc": ["bob@corp.example"]}))
''', tier)
    assert lines == ["true", "true", "true", "false"]
