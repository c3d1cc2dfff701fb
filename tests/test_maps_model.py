"""Maps against a model (EXTENSIONS.md E1): random sequences of map operations, run as a Sense
program on both tiers, print exactly what the same operations on a Python dict (insertion
order kept, an update keeping its key's place) say they should, and fail exactly where the
model raises KeyError."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings, strategies as st

from test_tiers import _run_source

# 1 and "1" are different keys; an Int key may be negative or beyond 64 bits.
KEYS = ["a", "b", "1", "ü ", 1, 2, -3, 10 ** 20]
VALUES = st.one_of(st.integers(-5, 5), st.sampled_from(["x", "y", "", "a b"]), st.booleans(),
                   st.none())


def literal(v) -> str:
    """``v`` as Sense source."""
    if v is None:
        return "nil"
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    return str(v)


def shown(v) -> str:
    """``v`` as Sense prints it (values.to_str)."""
    if v is None:
        return "nil"
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(shown(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{shown(k)}: {shown(x)}" for k, x in v.items()) + "}"
    return str(v)


key = st.sampled_from(KEYS)
OPS = st.one_of(
    st.tuples(st.just("set"), key, VALUES),
    st.tuples(st.just("get"), key),
    st.tuples(st.just("get_default"), key),
    st.tuples(st.just("remove"), key),
    st.tuples(st.just("has"), key),
    st.tuples(st.sampled_from(["len", "keys", "values", "items", "print", "truthy",
                               "move_all", "copy_changes_nothing", "reordered_equal"])),
    st.tuples(st.just("merge"), st.lists(st.tuples(key, VALUES), max_size=3)),
)


def program_and_model(ops):
    """The Sense program, and the lines and test failures the model expects of it."""
    src = ["m = {}"]
    lines, failures = [], []
    model: dict = {}
    for n, op in enumerate(ops):
        kind = op[0]
        if kind == "set":
            src.append(f"m[{literal(op[1])}] = {literal(op[2])}")
            model[op[1]] = op[2]
        elif kind in ("get", "remove"):
            call = f"m[{literal(op[1])}]" if kind == "get" else f"m.remove({literal(op[1])})"
            src += [f'test "{n}":', f"    print({call})"]
            if op[1] in model:
                lines.append(shown(model.pop(op[1]) if kind == "remove" else model[op[1]]))
            else:
                failures.append((str(n), f"key {op[1]!r} not found"))
        elif kind == "get_default":
            src.append(f'print(m.get({literal(op[1])}, "none"), m.get({literal(op[1])}))')
            lines.append(f"{shown(model.get(op[1], 'none'))} {shown(model.get(op[1]))}")
        elif kind == "has":
            src.append(f"print(m.has({literal(op[1])}))")
            lines.append(shown(op[1] in model))
        elif kind == "len":
            src.append("print(len(m))")
            lines.append(str(len(model)))
        elif kind in ("keys", "values", "items"):
            src.append(f"print(m.{kind}())")
            lines.append(shown({"keys": list(model), "values": list(model.values()),
                                "items": [[k, v] for k, v in model.items()]}[kind]))
        elif kind == "print":
            src.append("print(m, str(m) == str(m.copy()))")
            lines.append(f"{shown(model)} true")
        elif kind == "truthy":
            src += ["if m:", '    print("some")', "else:", '    print("none")']
            lines.append("some" if model else "none")
        elif kind == "move_all":
            # The walk is over the keys as they were: each goes to the end, in order.
            src += ["for k in m:", "    v = m.remove(k)", "    m[k] = v"]
            for k in list(model):
                model[k] = model.pop(k)
        elif kind == "copy_changes_nothing":
            src += ["c = m.copy()", 'c["new key"] = 1', "print(c == m, len(c) - len(m))"]
            lines.append(f"{shown('new key' in model and model['new key'] == 1)} "
                         f"{0 if 'new key' in model else 1}")
        elif kind == "reordered_equal":
            pairs = ", ".join(f"{literal(k)}: {literal(v)}" for k, v in reversed(model.items()))
            src.append(f"print(m == {{{pairs}}}, m != {{{pairs}}})")
            lines.append("true false")
        else:                                               # merge: the other map wins
            pairs = ", ".join(f"{literal(k)}: {literal(v)}" for k, v in op[1])
            src.append(f"m = m.merged({{{pairs}}})")
            model = {**model, **dict(op[1])}
    src.append("print(m)")
    lines.append(shown(model))
    return "\n".join(src) + "\n", lines, failures


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=st.lists(OPS, max_size=25))
def test_maps_behave_as_the_model_on_both_tiers(tmp_path, ops):
    source, lines, failures = program_and_model(ops)
    for tier in ("1", "2"):
        out, error, _, _, tests, _ = _run_source(tmp_path, source, tier)
        assert error is None, (tier, error, source)
        assert out.splitlines() == lines, (tier, source)
        assert [(name, text.split("] ", 1)[1]) for name, passed, text, _ in tests
                if not passed] == failures, (tier, source)
