"""Annotation checks (values.make_checker) and the exact-type shortcut callers take before them:
a value of an annotation's exact type must be one the checker accepts, and every value the
shortcut does not settle still goes to the checker, in both tiers."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sensevm.guard import provenance as P
from sensevm.runtime.values import exact_type, make_checker

ANNOTATIONS = ("Int", "Float", "String", "Bool", "Nil", "Array<Int>", "Function", "Widget")

VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5),
    st.lists(st.integers(), max_size=3),
    st.integers().map(lambda n: P.label(n, frozenset({P.untrusted("t")}))),
    st.text(max_size=5).map(lambda s: P.label(s, frozenset({P.untrusted("t")}))),
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(ANNOTATIONS), VALUES)
def test_the_exact_type_is_only_ever_a_shortcut_to_yes(text, value):
    exact = exact_type(text)
    if exact is not None and type(value) is exact:
        assert make_checker(text)(value)


def test_exact_types():
    assert [exact_type(t) for t in ("Int", "Float", "String", "Bool", "Nil")] == \
        [int, float, str, bool, type(None)]
    assert exact_type("Array<Int>") is None and exact_type("Widget") is None


TYPED = """\
tool twice(k: Int) returns Int requires t.twice:
    return k * 2
reversible action put(x: Float) requires t.put:
    return x
rollback:
    pass
def half(x: Float) -> Float:
    return x / 2
def name(b: Bool) -> String:
    return b
policy:
    allow t.twice
    allow t.put
i = 0
while i < 30:
    i = i + 1
    print(twice(i), half(i))
    a = put(i)
print(half(1.5))
{last}
"""


@pytest.mark.parametrize("last, error", [
    ("twice(true)", "argument 'k' of 'twice' expects Int, got Bool"),
    ("half(\"x\")", "argument 'x' of 'half' expects Float, got String"),
    ("put(nil)", "argument 'x' of 'put' expects Float, got Nil"),
    ("name(true)", "'name' declared to return String, got Bool"),
])
def test_checks_past_the_shortcut_still_fail_on_both_tiers(tmp_path, last, error):
    from sensec.driver import compile_file
    from sensevm.base.errors import SenseError
    from sensevm.bytecode.snb import dump
    from sensevm.bytecode.verify import load_verified
    from sensevm.runtime.vm import VM
    path = tmp_path / "typed.sns"
    path.write_text(TYPED.format(last=last))
    verified = load_verified(dump(compile_file(str(path))))
    seen = []
    for tier in ("1", "2"):
        out = io.StringIO()
        with pytest.raises(SenseError) as info:
            VM(verified, stdout=out, tier=tier).run()
        seen.append((out.getvalue(), info.value.text))
    assert seen[0] == seen[1]
    assert seen[0][0].splitlines()[-1] == "0.75"
    assert seen[0][1].endswith(error)
