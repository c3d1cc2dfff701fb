"""The first cases of String methods that hot loops call most (methods.py: starts_with,
ends_with, contains, find, replace, pad_start, pad_end), which answer plain Strings without
the general helpers: for any arguments they give what the general code gives (its value, or its
error with the same message), and for plain Strings the general helpers are not called."""

from __future__ import annotations

import types

import pytest
from hypothesis import given, settings, strategies as st

from sensevm.base.errors import SenseError
from sensevm.guard import provenance as PV
from sensevm.guard.provenance import LStr
from sensevm.runtime import methods as M
from sensevm.runtime import values as V

TESTS = {"starts_with": str.startswith, "ends_with": str.endswith,
         "contains": str.__contains__, "find": str.find}


def outcome(fn, *args):
    try:
        return ("value", fn(*args))
    except SenseError as exc:
        return ("error", str(exc))


TEXT = st.text(alphabet="ab4. ß", max_size=6)
VALUE = st.one_of(TEXT, st.integers(-3, 12), st.booleans(), st.none(), st.floats(0, 3))


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(TESTS)), s=TEXT, sub=VALUE)
def test_the_tests_agree_with_the_general_case(name, s, sub):
    fast = getattr(M, f"s_{name}")
    assert outcome(fast, s, None, [sub]) == outcome(M._test, name, s, [sub], TESTS[name])


def general_replace(s, old, new):
    """s_replace without its first case: the general code, run on a copy of ``old`` that is
    an LStr whose one span has no origins (so only the general code can answer)."""
    live = PV.live      # (making an LStr marks the run as having labelled data)
    try:
        if type(old) is str:
            old = LStr(old, ((0, len(old), PV.EMPTY),))
        return M.s_replace(s, None, [old, new])
    finally:
        PV.live = live


@settings(max_examples=300, deadline=None)
@given(s=TEXT, old=st.one_of(TEXT, st.integers(0, 2)), new=st.one_of(TEXT, st.none()))
def test_replace_agrees_with_the_general_case(s, old, new):
    fast = outcome(M.s_replace, s, None, [old, new])
    slow = outcome(general_replace, s, old, new)
    assert fast[0] == slow[0] and (fast[0] == "error" or str(fast[1]) == str(slow[1]))


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(["pad_start", "pad_end"]), s=TEXT,
       args=st.lists(st.one_of(st.integers(-2, 12), TEXT, st.booleans()), max_size=3))
def test_padding_agrees_with_the_general_case(name, s, args):
    fast = getattr(M, f"s_{name}")
    assert outcome(fast, s, None, args) == outcome(M._pad, name, s, args, name == "pad_start")


def test_a_pad_wider_than_max_string_is_the_general_error(monkeypatch):
    monkeypatch.setattr(V, "MAX_STRING", 8)
    assert outcome(M.s_pad_start, "ab", None, [9, "."])[0] == "error"
    assert M.s_pad_start("ab", None, [8, "."]) == "......ab"


def test_plain_strings_skip_the_general_helpers(monkeypatch):
    def refuse(*args):
        raise AssertionError("general helper called")
    for helper in ("_test", "_pad", "_string_arg", "_text"):
        monkeypatch.setattr(M, helper, refuse)
    assert M.s_starts_with("alpha", None, ["al"]) is True
    assert M.s_ends_with("alpha", None, ["a"]) is True
    assert M.s_contains("alpha", None, ["ph"]) is True
    assert M.s_find("alpha", None, ["p"]) == 2
    assert M.s_replace("banana", None, ["a", "4"]) == "b4n4n4"
    assert M.s_pad_start("ab", None, [5, "."]) == "...ab"
    assert M.s_pad_end("ab", None, [5, "."]) == "ab..."
    with pytest.raises(AssertionError):
        M.s_replace("banana", None, ["a", "44"])       # (it may grow: the general case)


class _VM:
    max_array = 5


def _inline(kind, key, r, args, quiet=False):
    """What tier 2's in-place form of method ``key`` of type ``kind``
    (methods.INLINE_METHODS) gives for the receiver ``r`` and ``args``: ("value", the value
    of its expression, the receiver after it) when they pass its test, else None (the method
    is called). ``quiet``: as in a process that has met no labelled value or shaped
    container yet."""
    test, expr = M.INLINE_METHODS[kind][key]
    names = [f"a{k}" for k in range(key[1])]
    env = {"V": V, "PV": PV, "SHAPES": PV.SHAPES, "vm": _VM, "r": r, **dict(zip(names, args))}
    if quiet:
        env.update(PV=types.SimpleNamespace(live=False), SHAPES=set())
    if test and not eval(test.format(*names, r="r"), env):
        return None
    return ("value", eval(expr.format(*names, r="r"), env), r)


def _called(kind, key, r, args):
    fn = M.PURE_BY_TYPE[kind][key[0]][0]
    got = outcome(fn, r, _VM, args)
    return got + (r,) if got[0] == "value" else got


ARGUMENT = st.one_of(TEXT, st.integers(-3, 12), st.booleans(), st.none(),
                     st.sampled_from(["", "a", "ab", "ß", "."]))
RECEIVERS = {str: TEXT, list: st.lists(ARGUMENT, max_size=6),
             dict: st.dictionaries(st.one_of(TEXT, st.integers(-3, 3)), ARGUMENT, max_size=5)}
FORMS = sorted((kind.__name__, key) for kind in M.INLINE_METHODS for key in M.INLINE_METHODS[kind])
KINDS = {"str": str, "list": list, "dict": dict}


@settings(max_examples=800, deadline=None)
@given(form=st.sampled_from(FORMS), data=st.data(),
       args=st.lists(ARGUMENT, min_size=2, max_size=2))
def test_the_forms_tier_two_writes_in_place_answer_as_the_methods_do(form, data, args):
    """Every in-place form, wherever its test lets it answer, gives what the method gives for
    the same receiver and arguments, and leaves the receiver as the method does (never a
    Python error: a test that let a wrong argument through would raise one or answer
    differently)."""
    kind, key = KINDS[form[0]], form[1]
    r = data.draw(RECEIVERS[kind])
    fn, arity, _ = M.PURE_BY_TYPE[kind][key[0]]
    assert arity is None or arity == key[1]
    copy = type(r)(r) if kind is not str else r
    got = _inline(kind, key, copy, args[:key[1]])
    if got is not None:
        assert got == _called(kind, key, type(r)(r) if kind is not str else r, args[:key[1]])


def test_the_in_place_forms_answer_the_common_case():
    """The tests let the common case through (else the forms would never be used)."""
    common = {"starts_with": ["al"], "ends_with": ["a"], "contains": ["9"], "find": ["a"],
              "replace": ["a", "4"], "pad_start": [12, "."], "pad_end": [12, "."],
              "push": [3], "has": ["a"], "get": ["a", 0]}
    receivers = {str: "alpha9", list: [1, 2], dict: {"a": 1}}
    for kind, forms in M.INLINE_METHODS.items():
        for key in forms:
            args = common.get(key[0], [])[:key[1]]
            assert _inline(kind, key, type(receivers[kind])(receivers[kind]), args, True), key
