"""String methods and provenance, character by character (EXTENSIONS.md E2, provenance.py's
spans): for random Strings with random labelled spans, every character a method's result takes
from its receiver has exactly that character's origins, and every character it puts in place
of others carries theirs. So a labelled character never comes out clean."""

from __future__ import annotations

import io

from hypothesis import given, settings, strategies as st

from sensevm.guard import provenance as PV
from sensevm.runtime import methods as M

A = PV.only(PV.untrusted("a"))
B = PV.only(PV.untrusted("b"))
ORIGINS = st.sampled_from([PV.EMPTY, A, B, A | B])
TEXT = st.text(alphabet="ab c-\n\t", max_size=14)


@st.composite
def labelled(draw):
    """A String whose characters are cut into spans, each with its own origins."""
    text = draw(TEXT)
    cuts = sorted(set(draw(st.lists(st.integers(0, len(text)), max_size=4))) | {0, len(text)})
    spans = [(a, b, draw(ORIGINS)) for a, b in zip(cuts, cuts[1:])]
    return PV.make_str(text, spans)


def per_char(s) -> list:
    """The origins of each character of ``s``."""
    out = []
    for a, b, o in PV.spans_of(s):
        out += [o] * (b - a)
    return out[:len(s)] + [PV.EMPTY] * (len(s) - len(out))


class _VM:
    max_array = 10 ** 7


def call(name, s, *args):
    return M.STRING_METHODS[name][0](s, _VM(), list(args))


def located(s, piece: str, start: int) -> None:
    """``piece`` is ``s[start:...]`` with each character's origins."""
    assert str(piece) == str(s)[start:start + len(piece)]
    assert per_char(piece) == per_char(s)[start:start + len(piece)]


@settings(max_examples=300, deadline=None)
@given(labelled())
def test_case_and_trim_keep_each_characters_origins(s):
    for name in ("upper", "lower"):
        assert per_char(call(name, s)) == per_char(s)        # (ASCII: one character each)
    text = str(s)
    located(s, call("trim", s), len(text) - len(text.lstrip()))
    located(s, call("trim_start", s), len(text) - len(text.lstrip()))
    located(s, call("trim_end", s), 0)
    located(s, call("repeat", s, 1), 0)
    padded = call("pad_start", s, len(s) + 2, "x")
    assert per_char(padded)[:2] == [PV.EMPTY, PV.EMPTY]      # the padding: the program's
    located(s, M._cut(padded, 2, len(padded)), 0)


@settings(max_examples=300, deadline=None)
@given(labelled(), st.sampled_from([" ", "-", "a", "ab", "\n"]))
def test_pieces_keep_the_origins_they_were_cut_from(s, sep):
    text = str(s)
    at = 0
    for piece in call("split", s, sep):
        located(s, piece, at)
        at += len(piece) + len(sep)
    at = 0
    for piece in call("split", s):
        at = text.index(str(piece), at)
        located(s, piece, at)
        at += len(piece)
    at = 0
    for line, raw in zip(call("lines", s), text.splitlines(True)):
        located(s, line, at)
        at += len(raw)


@settings(max_examples=300, deadline=None)
@given(labelled(), st.sampled_from(["a", "b", " ", "ab", "-"]), labelled())
def test_what_replace_puts_in_carries_what_it_replaced(s, old, new):
    out = call("replace", s, old, new)
    text, chars, got = str(s), per_char(s), per_char(out)
    at, k = 0, 0
    while True:
        found = text.find(old, at)
        end = len(text) if found < 0 else found
        assert got[k:k + end - at] == chars[at:end]          # kept as it was
        k += end - at
        if found < 0:
            break
        replaced = PV.EMPTY
        for o in chars[found:found + len(old)]:
            replaced = replaced | o
        for j, o in enumerate(per_char(new)):
            assert got[k + j] == o | replaced                 # its own, and what it replaced
        k += len(new)
        at = found + len(old)
    assert k == len(out)


@settings(max_examples=200, deadline=None)
@given(st.lists(labelled(), max_size=4), labelled())
def test_join_keeps_every_items_and_separators_origins(items, sep):
    out = M.ARRAY_METHODS["join"][0](items, _VM(), [sep])
    expected = []
    for i, item in enumerate(items):
        if i:
            expected += per_char(sep)
        expected += per_char(item)
    assert str(out) == str(sep).join(str(x) for x in items)
    assert per_char(out) == expected


def test_a_labelled_character_changing_case_stays_labelled():
    # ß (the only labelled character) becomes SS: both are the page's.
    s = PV.make_str("straße", [(0, 4, PV.EMPTY), (4, 5, A), (5, 6, PV.EMPTY)])
    up = call("upper", s)
    assert str(up) == "STRASSE" and per_char(up) == [PV.EMPTY] * 4 + [A, A, PV.EMPTY]
