"""Every method of a String, Array or Map, called with any arguments of any types and counts
(labelled ones too), gives a value or a Sense error: never a Python exception, on either tier."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings, strategies as st

from sensevm.runtime.methods import ARRAY_METHODS, MAP_METHODS, STRING_METHODS
from test_tiers import _run_source

HEAD = '''tool page() returns String:
    return " Mallory <m@evil.example>\\n"
tool count() returns Int:
    return 3
def same(x):
    return x
def pair(a, b):
    return [a, b]
'''
ARGS = st.sampled_from([
    "0", "1", "-1", "3", "100", "10000000000000000000000", "1.5", '""', '" "', '"a"', '"ab"',
    '","', "nil", "true", "false", "[]", "[1, 2]", '["b", "a"]', '[1, "a"]', "{}",
    '{"a": 1}', "same", "pair", "print", "len", "page()", "count()", '[page(), "x"]',
    '{page(): count()}', "page().trim()", "[[1], [2]]", "[nil, nil]"])
RECEIVERS = {
    "String": ['"a b,c\\n d"', '""', "page()", '"straße"'],
    "Array": ["[3, 1, 2]", "[]", '["b", "a", "c"]', "[1, \"x\", nil]", "[page(), count()]",
              "[[1], {}]", "[1.5, 2, -3]"],
    "Map": ['{"a": 1, 2: [3]}', "{}", "{page(): 1, \"k\": page()}"],
}
TABLES = {"String": STRING_METHODS, "Array": ARRAY_METHODS, "Map": MAP_METHODS}


@st.composite
def calls(draw):
    kind = draw(st.sampled_from(sorted(TABLES)))
    name = draw(st.sampled_from(sorted(TABLES[kind])))
    receiver = draw(st.sampled_from(RECEIVERS[kind]))
    args = draw(st.lists(ARGS, max_size=3))
    return f"{receiver}.{name}({', '.join(args)})"


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(calls(), min_size=1, max_size=6))
# (Found by this test: a count past Python's index range reached s * n for an empty String,
# whose size, 0, passed the limit; so did any negative one. Its twin: a negative width past
# that range reached str.rjust / ljust on the fast paths of pad_start and pad_end.)
@example(['"".repeat(10000000000000000000000)', '"ab".repeat(-10000000000000000000000)',
          'page().replace(page(), "").repeat(10000000000000000000000)'])
@example(['"ab".pad_end(-10000000000000000000000, "x")',
          '"ab".pad_start(-10000000000000000000000, "x")', '"ab".pad_start(-1, "x")'])
def test_any_call_is_a_value_or_a_sense_error(tmp_path, exprs):
    body = "".join(f'test "{i}":\n    print({e})\n' for i, e in enumerate(exprs))
    for tier in ("1", "2"):
        # (A Python exception would leave run() itself; _run_source catches Sense errors only.
        # A test block catches every Sense error but a limit's, which ends the run.)
        out, error, *_ = _run_source(tmp_path, HEAD + body, tier)
        assert error is None or error[0] == "SenseLimitError", (tier, error)
