"""std.re through the real commands on both tiers: results against the regex module itself,
the time limit on runaway patterns, bad patterns, and the labels of what is found."""

from __future__ import annotations

import json
import time

import pytest
import regex

from stdlib_helpers import SINKS as SINKS_OF_A_TOOL, TIERS, clean_failure, sense_run

tiers = pytest.mark.parametrize("tier", TIERS)

SINKS = "import std.re\n" + SINKS_OF_A_TOOL

CASES = [(r"[0-9]+", "a12b345c"), (r"a*", "baac"), (r"(\w+)@(\w+)\.com", "x ann@ex.com, bob@ey.com"),
         (r"\s*,\s*", "a , b,c ,, d"), (r"é+", "xééy"), (r"(,)", "a,b"), (r"^$", ""), (r"z", "abc"),
         (r"(?i)HELLO", "say hello"), (r"\b", "ab cd")]


def show(v):
    """How Sense prints a value."""
    if v is None:
        return "nil"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, list):
        return "[" + ", ".join(show(x) for x in v) + "]"
    return str(v)


@tiers
def test_results_are_the_regex_modules(tmp_path, tier):
    lines = ["import std.re"]
    expected = []
    for p, s in CASES:
        lit_p, lit_s = json.dumps(p, ensure_ascii=False), json.dumps(s, ensure_ascii=False)
        lines.append(f"print(re.matches({lit_p}, {lit_s}))")
        lines.append(f"print(re.find({lit_p}, {lit_s}))")
        lines.append(f"print(re.find_all({lit_p}, {lit_s}))")
        lines.append(f"print(re.split({lit_p}, {lit_s}))")
        lines.append(f'print(re.replace({lit_p}, {lit_s}, "<\\\\g<0>>"))')
        m = regex.search(p, s)
        expected += [show(regex.fullmatch(p, s) is not None), show(m.group(0) if m else None),
                     show([x.group(0) for x in regex.finditer(p, s)]), show(regex.split(p, s)),
                     regex.sub(p, "<\\g<0>>", s)]
    done = sense_run(tmp_path, "\n".join(lines) + "\n", tier=tier)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == expected


@tiers
def test_matches_means_the_whole_string(tmp_path, tier):
    done = sense_run(tmp_path, 'import std.re\nprint(re.matches("a+", "aaa"), re.matches("a+", "aab"),'
                               ' re.matches("a", "ba"), re.find("a", "ba"))\n', tier=tier)
    assert done.stdout == "true false false a\n", done.stderr


@tiers
def test_replacement_groups(tmp_path, tier):
    done = sense_run(tmp_path, 'import std.re\nprint(re.replace("(\\\\w+)@(\\\\w+)", "ann@ex bob@ey", '
                               '"\\\\2:\\\\1"))\n', tier=tier)
    assert done.stdout == regex.sub(r"(\w+)@(\w+)", r"\2:\1", "ann@ex bob@ey") + "\n", done.stderr


@tiers
@pytest.mark.parametrize("fn", ["matches", "find", "find_all", "replace", "split"])
def test_a_runaway_pattern_is_cut_off_with_a_clean_error(tmp_path, tier, fn):
    extra = ', "x"' if fn == "replace" else ""
    source = (f'import std.re\nprint("start")\ns = "{"a" * 40}b"\n'
              f'x = re.{fn}("(a|aa)+$", s{extra})\nprint("never")\n')
    started = time.monotonic()
    done = sense_run(tmp_path, source, tier=tier)
    took = time.monotonic() - started
    clean_failure(done)
    assert f"re.{fn}: pattern '(a|aa)+$' timed out after 1s" in done.stderr, done.stderr
    assert "main.sns:4:" in done.stderr and done.stdout == "start\n"
    assert took < 20


@tiers
def test_the_runs_timeout_bounds_a_match_too(tmp_path, tier):
    source = f'import std.re\nprint("start")\nx = re.find("(a|aa)+$", "{"a" * 40}b")\n'
    started = time.monotonic()
    done = sense_run(tmp_path, source, "--timeout", "0.3", tier=tier)
    clean_failure(done)
    assert done.returncode == 4, done.stderr
    assert "time limit exceeded" in done.stderr and "re.find" in done.stderr, done.stderr
    assert time.monotonic() - started < 20


@tiers
@pytest.mark.parametrize("pattern", ["(a", "a[", "*a", "(?P<1x>a)", "a{2,1}"])
def test_a_bad_pattern_names_the_pattern_and_position(tmp_path, tier, pattern):
    done = sense_run(tmp_path, f"import std.re\nprint(1)\nx = re.find({json.dumps(pattern)}, \"abc\")\n",
                     tier=tier)
    clean_failure(done)
    with pytest.raises(regex.error) as exc:
        regex.compile(pattern)
    assert f"re.find: bad pattern {pattern!r}: {exc.value.msg}" in done.stderr, done.stderr
    if exc.value.pos is not None:
        assert f"at position {exc.value.pos}" in done.stderr
    assert "main.sns:3:" in done.stderr


@tiers
def test_non_strings_are_type_errors(tmp_path, tier):
    done = sense_run(tmp_path, "import std.re\nx = re.split(\",\", 5)\n", tier=tier)
    clean_failure(done)
    assert "SenseTypeError: re.split() expects the text to search (String), got Int" in done.stderr


@tiers
def test_results_keep_the_origins_of_their_own_characters(tmp_path, tier):
    source = SINKS + '''s = "mail ops@example.com or " + fetch("evil@x.example") + " now"
found = re.find_all("[a-z]+@[a-z.]+", s)
print(found, asks(found[0]), asks(found[1]))
print(asks(re.find("ops@[a-z.]+", s)), asks(re.find("evil", s)))
parts = re.split(" ", s)
print(asks(parts[0]), asks(parts[3]))
print(asks(re.matches("mail.*", s)), asks(re.matches("x", "x")))
r = re.replace("evil@x.example", s, "ops@example.com")
print(r, asks(re.find("ops@example.com$", re.replace(" now", r, ""))), asks(re.find("^mail", r)))
t = re.replace("ops", "ops here", fetch("x"))
print(t, asks(re.find("here", t)), asks(re.find("x", t)))
p = fetch("o+")
print(asks(re.find(p, "foo")))
'''
    done = sense_run(tmp_path, source, tier=tier)
    assert done.returncode == 0, done.stderr
    # The replacement's inserted text came from the program ("ops@example.com"), but it
    # replaced what the untrusted text chose: the insert carries the match's origins.
    assert done.stdout == ("[ops@example.com, evil@x.example] false true\nfalse true\n"
                           "false true\ntrue false\n"
                           "mail ops@example.com or ops@example.com now true false\n"
                           "x here false true\ntrue\n")
