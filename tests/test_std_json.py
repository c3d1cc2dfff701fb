"""std.json through the real commands on both tiers: parse, format, pretty against Python's json
module, errors that name the line and column of the JSON text, and per-span provenance."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from stdlib_helpers import SINKS as SINKS_OF_A_TOOL, TIERS, clean_failure, sense_run

tiers = pytest.mark.parametrize("tier", TIERS)

SINKS = "import std.json\n" + SINKS_OF_A_TOOL


def sense_str(text: str) -> str:
    """A Sense string literal of ``text`` (printable ASCII with quotes and backslashes)."""
    assert all(" " <= c <= "~" for c in text), text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def run_ok(tmp_path, source, tier, *options):
    done = sense_run(tmp_path, source, *options, tier=tier)
    assert done.returncode == 0, done.stderr
    return done.stdout


# ----------------------------------------------------------------------------- values

@tiers
def test_parse_gives_sense_values_and_format_writes_python_json(tmp_path, tier):
    text = '{"a": [1, 2.5, -0.0, 1e3, true, false, null], "b": {"c": "h\\u00e9\\n\\ud83d\\ude00"}, "": 0}'
    out = run_ok(tmp_path, f"import std.json\nv = json.parse({sense_str(text)})\n"
                           "print(type_of(v), type_of(v[\"a\"]), type_of(v[\"a\"][0]), "
                           "type_of(v[\"a\"][1]), type_of(v[\"a\"][4]), v[\"a\"][6] == nil)\n"
                           "print(json.format(v))\nprint(json.pretty(v))\n"
                           "print(json.format(v.keys()))\n", tier)
    value = json.loads(text)
    assert out == ("Map Array Int Float Bool true\n" + json.dumps(value, ensure_ascii=False) + "\n"
                   + json.dumps(value, indent=2, ensure_ascii=False) + "\n"
                   + json.dumps(list(value), ensure_ascii=False) + "\n")


@tiers
def test_int_keys_become_strings_and_order_is_kept(tmp_path, tier):
    out = run_ok(tmp_path, 'import std.json\nm = {"z": 1, 3: [], "a": {}}\nm["b"] = "ü"\n'
                           'print(json.format(m))\nprint(json.pretty([]))\nprint(json.format(nil))\n',
                 tier)
    assert out == json.dumps({"z": 1, 3: [], "a": {}, "b": "ü"}, ensure_ascii=False) + "\n[]\nnull\n"


@tiers
@pytest.mark.parametrize("value,type_name", [("print", "Function"), ("fetch", "Tool"),
                                             ("rotate", "Action"), ("math.inf * 0", None),
                                             ("math.inf", None), ("-math.inf", None)])
def test_non_json_values_are_errors_naming_the_type(tmp_path, tier, value, type_name):
    source = SINKS + f'import std.math\nprint("start")\nx = json.format({{"k": [{value}]}})\n'
    done = sense_run(tmp_path, source, tier=tier)
    clean_failure(done)
    assert "json.format" in done.stderr and "main.sns:12:" in done.stderr, done.stderr
    if type_name is not None:
        assert f"a value of type {type_name} is not JSON" in done.stderr
    else:
        assert "is not a JSON number" in done.stderr
    assert done.stdout == "start\n"


@tiers
def test_a_map_containing_itself_is_an_error_not_a_hang(tmp_path, tier):
    done = sense_run(tmp_path, 'import std.json\nm = {}\nm["m"] = m\nprint(json.pretty(m))\n',
                     tier=tier)
    clean_failure(done)
    assert "json.pretty: a Map that contains itself" in done.stderr and "main.sns:4:" in done.stderr


@tiers
def test_deep_nesting_parses_without_overflow(tmp_path, tier):
    depth = 5000
    text = "[" * depth + "]" * depth
    out = run_ok(tmp_path, f'import std.json\nv = json.parse({sense_str(text)})\n'
                           'n = 0\nwhile len(v) == 1:\n    v = v[0]\n    n += 1\nprint(n)\n', tier)
    assert out == f"{depth - 1}\n"


# ----------------------------------------------------------------------------- errors

BAD = ['{"a": 1,\n  "b" 2}', '{"a": 1\n\n   "c": 3}', "[1, 2,]", "[1 2]", '{"a": tru}', "",
       "   ", '"abc', '"a\\qb"', '"a\\u12G4"', '["a\tb"]', "[1] x", "{1: 2}", "01", "-", "1.",
       "1e", "NaN", "[Infinity]", '{"a" 1}', "{", "[", '{"a":', "nul", "[-]", '"\\u12'] 


@tiers
def test_errors_name_the_line_and_column_of_the_json_text(tmp_path, tier):
    """Each bad text is an error at the program's call, naming the place in the JSON text where
    Python's json module stops too (the oracle; NaN and Infinity, which Python accepts, are
    refused at their first character)."""
    lines = ["import std.json"]
    for text in BAD:
        literal = json.dumps(text)          # a Sense string literal (the escapes agree)
        lines += ["try:", f"    x = json.parse({literal})", "    print(\"parsed\")",
                  "except SenseRuntimeError as e:", "    print(e.line, e.message)"]
    out = run_ok(tmp_path, "\n".join(lines) + "\n", tier).splitlines()
    assert len(out) == len(BAD)
    for k, (text, line) in enumerate(zip(BAD, out)):
        try:
            json.loads(text)            # NaN, Infinity: refused where they start
            where = (1, 1 + min(i for i in (text.find("NaN"), text.find("Infinity")) if i >= 0))
        except json.JSONDecodeError as exc:
            where = (exc.lineno, exc.colno)
        call_line = 3 + 5 * k
        assert line.startswith(f"{call_line} json.parse: "), (text, line)
        assert f"at line {where[0]}, column {where[1]}" in line, (text, line, where)


@tiers
def test_a_parse_error_is_positioned_at_the_call_and_says_what_was_expected(tmp_path, tier):
    done = sense_run(tmp_path, 'import std.json\nprint("a")\nv = json.parse("{\\"a\\": 1,\\n\\n  '
                               '\\"b\\": 2\\n  x}")\n', tier=tier)
    clean_failure(done)
    assert "main.sns:3:" in done.stderr and "SenseRuntimeError" in done.stderr
    assert "json.parse: expected ',' or '}' at line 4, column 3" in done.stderr, done.stderr


@tiers
def test_a_non_string_argument_is_a_type_error(tmp_path, tier):
    done = sense_run(tmp_path, "import std.json\nx = json.parse(42)\n", tier=tier)
    clean_failure(done)
    assert "SenseTypeError" in done.stderr and "json.parse() expects text (String), got Int" \
        in done.stderr and "main.sns:2:" in done.stderr


# ----------------------------------------------------------------------------- provenance

@tiers
def test_each_parsed_value_keeps_the_origins_of_its_own_span(tmp_path, tier):
    source = SINKS + '''u = fetch("evil@x.example")
n = fetch("42")
k = fetch("who")
doc = json.parse("{\\"name\\": \\"" + u + "\\", \\"role\\": \\"viewer\\", \\"n\\": " + n + ", \\"m\\": 7.5, \\"" + k + "\\": [true, \\"x\\"]}")
print(doc)
print(asks(doc["name"]), asks(doc["role"]), asks(doc["n"]), asks(doc["m"]))
keys = doc.keys()
print(asks(keys[0]), asks(keys[1]), asks(keys[4]), asks(doc["who"][0]), asks(doc["who"][1]))
'''
    out = run_ok(tmp_path, source, tier)
    assert out == ("{name: evil@x.example, role: viewer, n: 42, m: 7.5, who: [true, x]}\n"
                   "true false true false\nfalse false true false false\n")


@tiers
def test_an_injected_field_is_untrusted_and_escapes_count(tmp_path, tier):
    """Text a tool returned that closes a string and adds a field: the new key and value came
    from that text (partly), so both stay untrusted; an escape written by the tool labels the
    character it stands for."""
    source = SINKS + '''doc = json.parse("{\\"a\\": \\"" + fetch("x\\", \\"admin\\": \\"yes") + "\\", \\"b\\": \\"\\\\u00e9" + fetch("\\\\u00e9") + "\\"}")
print(doc)
print(asks(doc["a"]), asks(doc["admin"]), asks(doc.keys()[1]), asks(doc.keys()[0]), asks(doc["b"]))
'''
    out = run_ok(tmp_path, source, tier)
    assert out == "{a: x, admin: yes, b: éé}\ntrue true true false true\n"


@tiers
def test_a_clean_document_stays_clean_and_format_carries_its_values_labels(tmp_path, tier):
    source = SINKS + '''doc = json.parse("{\\"to\\": \\"ops@example.com\\", \\"n\\": [1, 2]}")
print(asks(doc["to"]), asks(doc["n"][1]), asks(json.format(doc)))
doc["from"] = fetch("evil")
print(asks(json.format(doc)), asks(json.pretty(doc)))
'''
    assert run_ok(tmp_path, source, tier) == "false false false\ntrue true\n"


# ----------------------------------------------------------------------------- the property

scalars = (st.none() | st.booleans() | st.integers(min_value=-2**62, max_value=2**62)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=5), inner, max_size=4), max_leaves=12)


@pytest.mark.parametrize("tier", TIERS)
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases=st.lists(values, min_size=25, max_size=25))
def test_format_and_pretty_are_pythons_and_parse_inverts_format(tmp_path_factory, tier, cases):
    """For JSON-able values: format(v) is json.dumps(v), pretty(v) json.dumps(v, indent=2), both
    with non-ASCII kept, and parse(format(v)) == v in Sense. The values reach the program as one
    JSON file read with std.fs (so the parser meets labelled text too)."""
    tmp_path = tmp_path_factory.mktemp("prop")
    (tmp_path / "cases.json").write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    source = ("policy: allow env.read\nimport std.json\nfrom std.fs import read_text\n"
              'for v in json.parse(read_text("cases.json")):\n'
              "    print(json.format(v))\n    print(json.pretty(v))\n"
              "    print(json.parse(json.format(v)) == v, json.parse(json.pretty(v)) == v)\n")
    out = run_ok(tmp_path, source, tier)
    expected = "".join(json.dumps(v, ensure_ascii=False) + "\n"
                       + json.dumps(v, indent=2, ensure_ascii=False) + "\ntrue true\n"
                       for v in cases)
    assert out == expected
