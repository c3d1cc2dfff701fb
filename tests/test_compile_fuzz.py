"""Whatever the input, compiling ends in a Program or a positioned SenseError: never another exception."""

from __future__ import annotations

import glob
import os

from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import TESTS

CORPUS = sorted(glob.glob(os.path.join(TESTS, "programs", "*", "*.sns")))
SAMPLES = []
for path in CORPUS[::7]:
    with open(path, encoding="utf-8", newline="") as fh:
        SAMPLES.append(fh.read())


def compile_or_error(source: str):
    from sensec.driver import compile_source
    from sensevm.base.errors import SenseError
    from sensevm.bytecode.snb import dump
    from sensevm.bytecode.verify import load_verified
    try:
        program = compile_source(source, "<fuzz>")
    except SenseError as err:
        errors = getattr(err, "errors", None) or [err]
        for e in errors:
            assert e.pos is not None and e.pos.line >= 1, e
            assert e.pos.line <= source.count("\n") + source.count("\r") + 2, (e, e.pos)
        return
    # Everything the compiler accepts, the verifier accepts.
    load_verified(dump(program))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("abx1 .:=()[],+-*/<>\"#\n    \tif else while for def return not and ")), max_size=120))
def test_random_token_soup(source):
    compile_or_error(source)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SAMPLES), st.data())
def test_mutated_corpus_programs(source, data):
    ops = data.draw(st.lists(st.tuples(st.integers(0, max(len(source), 1)),
                                       st.sampled_from(["delete", "insert", "swap"]),
                                       st.text(max_size=3)), max_size=4))
    for at, op, text in ops:
        at = min(at, len(source))
        if op == "delete":
            source = source[:at] + source[at + 1:]
        elif op == "insert":
            source = source[:at] + text + source[at:]
        else:
            source = source[:at] + text + source[at + len(text):]
    compile_or_error(source)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_unicode(source):
    compile_or_error(source)
