"""std.time and std.env through the real commands on both tiers: clocks against Python's,
sleep within --timeout, iso/today, the program's arguments (both command-line paths, .sns and
.snb) labelled user, and env.get's explicit allow and trusted:env label."""

from __future__ import annotations

import datetime
import subprocess
import sys
import time

import pytest

from stdlib_helpers import SINKS as SINKS_OF_A_TOOL, TIERS, clean_failure, env, run_file, sense_run

tiers = pytest.mark.parametrize("tier", TIERS)

SINKS = SINKS_OF_A_TOOL


def utc_iso(t: float) -> str:
    d = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    text = d.strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{d.microsecond:06d}".rstrip("0") if d.microsecond else "") + "Z"


# ----------------------------------------------------------------------------- std.time

@tiers
def test_clocks_agree_with_pythons(tmp_path, tier):
    before = time.time()
    done = sense_run(tmp_path, "import std.time\nt = time.now()\nm = time.monotonic()\n"
                               "time.sleep(0.2)\nprint(t, time.monotonic() - m, type_of(t))\n"
                               "print(time.today())\n", tier=tier)
    after = time.time()
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    t, waited, kind = first.split()
    assert before <= float(t) <= after and kind == "Float"
    assert 0.2 <= float(waited) < 5
    assert second in {time.strftime("%Y-%m-%d", time.gmtime(x)) for x in (before, after)}


@tiers
def test_iso_is_utc_with_a_fraction_only_when_there_is_one(tmp_path, tier):
    values = [0, 1.5, 1700000000, 1700000000.25, 1e9 + 0.000001, 253402300799, -1]
    done = sense_run(tmp_path, "import std.time\n" + "".join(f"print(time.iso({v!r}))\n"
                                                             for v in values), tier=tier)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [utc_iso(v) for v in values]


@tiers
@pytest.mark.parametrize("call,message", [
    ("time.sleep(-1)", "time.sleep(): negative duration (-1)"),
    ('time.sleep("1")', "time.sleep() expects seconds (Int or Float), got String"),
    ("time.iso(100000000000000000000.0)", "time.iso(): 1e+20 is out of range"),
    ("time.iso(true)", "time.iso() expects seconds (Int or Float), got Bool"),
    ("time.iso(math.inf)", "time.iso(): inf is not a number of seconds"),
])
def test_bad_arguments_are_positioned_errors(tmp_path, tier, call, message):
    done = sense_run(tmp_path, f"import std.time\nimport std.math\nprint(1)\nx = {call}\n", tier=tier)
    clean_failure(done)
    assert message in done.stderr and "main.sns:4:" in done.stderr, done.stderr
    assert done.stdout == "1\n"


@tiers
def test_sleep_longer_than_the_timeout_ends_the_run_at_the_timeout(tmp_path, tier):
    started = time.monotonic()
    done = sense_run(tmp_path, 'import std.time\nprint("a")\ntime.sleep(30)\nprint("b")\n',
                     "--timeout", "1", tier=tier)
    took = time.monotonic() - started
    assert done.returncode == 4, done.stderr
    assert "time limit exceeded (1 second) waiting for sleep(30)" in done.stderr and "sleep(30)" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == "a\n"
    assert took < 15           # not 30: the build and start-up, and the second of the limit


@tiers
def test_a_sleep_within_the_timeout_finishes(tmp_path, tier):
    done = sense_run(tmp_path, 'import std.time\ntime.sleep(0.1)\ntime.sleep(0)\nprint("done")\n',
                     "--timeout", "20", tier=tier)
    assert done.returncode == 0 and done.stdout == "done\n", done.stderr


# ----------------------------------------------------------------------------- std.env.args

ARGS = SINKS + "import std.env\na = env.args()\nprint(len(a), a)\nfor w in a:\n    print(asks(w))\n" \
               'print(asks("literal"))\n'


@tiers
@pytest.mark.parametrize("source_file", [False, True])
def test_args_after_the_double_dash_on_the_fast_path(tmp_path, tier, source_file):
    done = sense_run(tmp_path, ARGS, "--max-steps", "100000", build=not source_file, tier=tier)
    assert done.returncode == 0 and done.stdout == "0 []\nfalse\n", done.stderr
    target = str(tmp_path / ("main.sns" if source_file else "main.snb"))
    done = run_file(tmp_path, target, "--timeout", "30", tier=tier)
    assert done.stdout == "0 []\nfalse\n", done.stderr
    cmd = [sys.executable, "-m", "sensevm", "run", target, "--second-look", "on", "--",
           "ann@x.example", "--dry-run", "two words"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env(tier))
    # The user's own words: labelled user, which the second look trusts (they are evidence).
    assert done.returncode == 0, done.stderr
    assert done.stdout == "3 [ann@x.example, --dry-run, two words]\nfalse\nfalse\nfalse\nfalse\n"


@tiers
@pytest.mark.parametrize("source_file", [False, True])
def test_args_through_click_the_same(tmp_path, tier, source_file):
    """Options click alone handles (--request) force the click command: same split at --."""
    sense_run(tmp_path, "print(0)\n", tier=tier)
    (tmp_path / "main.sns").write_text(ARGS)
    subprocess.run([sys.executable, "-m", "sensec", "build", str(tmp_path / "main.sns")],
                   cwd=tmp_path, capture_output=True, env=env(tier), check=True)
    target = str(tmp_path / ("main.sns" if source_file else "main.snb"))
    cmd = [sys.executable, "-m", "sensevm", "run", target, "--request", "hi", "--", "x", "--",
           "-y"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env(tier))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "3 [x, --, -y]\nfalse\nfalse\nfalse\nfalse\n"
    # Without `--`, a second word is still click's usage error, as before.
    cmd = [sys.executable, "-m", "sensevm", "run", target, "extra"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env(tier))
    assert done.returncode == 2 and "unexpected extra argument" in done.stderr


@tiers
def test_args_are_the_users_words_for_the_second_look(tmp_path, tier):
    """An address the user typed endorses the same address in untrusted text (the program's
    constants hold no address, which would endorse it themselves)."""
    source = SINKS + ('import std.env\n'
                      'irreversible action send(to: String) sends(recipient: to) requires '
                      'email.send:\n    nil\n'
                      'def flagged(to):\n    local s = send(to)\n    s.verify()\n'
                      '    return s.second_look != nil\n'
                      'print(flagged(fetch("ann" + "@x.example")), '
                      'flagged(fetch("eve" + "@x.example")))\n')
    (tmp_path / "main.sns").write_text(source)
    cmd = [sys.executable, "-m", "sensevm", "run", str(tmp_path / "main.sns"), "--",
           "ann@x.example"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env(tier))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "false true\n"
    done = subprocess.run(cmd[:-2], cwd=tmp_path, capture_output=True, text=True, env=env(tier))
    assert done.stdout == "true true\n", done.stderr      # without the argument: flagged


# ----------------------------------------------------------------------------- std.env.get

GET = 'from std.env import get\nprint("start")\nprint(get("SENSE_TEST_VAR"), get("SENSE_TEST_UNSET"))\n'


@tiers
@pytest.mark.parametrize("policy", ["", "policy: allow fs.read\n", "policy: deny env.read\n"])
def test_get_needs_an_explicit_allow(tmp_path, tier, policy, monkeypatch):
    monkeypatch.setenv("SENSE_TEST_VAR", "v1")
    done = sense_run(tmp_path, policy + GET, tier=tier)
    clean_failure(done)
    assert "SensePolicyError: tool 'get' requires capability 'env.read'" in done.stderr
    # (A deny names its rule and where it is: issue 25's denials explained.)
    assert ("denied by 'deny env.read' at" if "deny" in policy
            else "add 'policy: allow env.read'") in done.stderr, done.stderr
    assert done.stdout == "start\n"


@tiers
def test_get_with_an_allow_reads_the_environment_labelled_trusted(tmp_path, tier, monkeypatch):
    monkeypatch.setenv("SENSE_TEST_VAR", "ops@example.com")
    monkeypatch.delenv("SENSE_TEST_UNSET", raising=False)
    source = (SINKS + "policy: allow env.read\n" + GET +
              'print(asks(get("SENSE_TEST_VAR")), asks(fetch("x")))\n')
    done = sense_run(tmp_path, source, tier=tier)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "start\nops@example.com nil\nfalse true\n"


@tiers
def test_an_allow_in_a_caller_is_enough(tmp_path, tier, monkeypatch):
    monkeypatch.setenv("SENSE_TEST_VAR", "v")
    source = ('from std.env import get\ndef read(n):\n    return get(n)\n'
              'def main():\n    policy: allow env.read\n    return read("SENSE_TEST_VAR")\n'
              'print(main())\nprint(read("SENSE_TEST_VAR"))\n')
    done = sense_run(tmp_path, source, tier=tier)
    assert done.stdout == "v\n", done.stderr
    assert "SensePolicyError" in done.stderr and "main.sns:3:" in done.stderr
