"""Errors a person can act on (issue 25): denials that name their rule, its place and the call
chain; ``sensevm test`` failures located; endings that are not silent; no internal errors.
Everything through the real command line."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIERS = ("1", "2")


def sensevm(tmp_path, *args, tier="1", stdin=None):
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1", SENSE_TIER=tier)
    env.pop("SENSE_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "sensevm", *args], cwd=tmp_path, input=stdin,
                          capture_output=True, text=True, env=env, timeout=120)


def write(tmp_path, name, text):
    (tmp_path / name).write_text(text, encoding="utf-8")
    return name


# ------------------------------------------------------------------------------ 1. denials

CHAIN = """\
tool pay(n: Int) requires payment.send:
    return n

def inner():
    return pay(3)

def locked_down():
    policy:
        deny payment.send
    return inner()

print(pay(1))
locked_down()
"""


@pytest.mark.parametrize("tier", TIERS)
def test_a_tool_denial_names_the_rule_its_place_and_the_call_chain(tmp_path, tier):
    r = sensevm(tmp_path, "run", write(tmp_path, "app.sns", CHAIN), tier=tier)
    assert r.returncode == 1 and r.stdout == "1\n"
    assert ("app.sns:5:15: SensePolicyError: tool 'pay' requires capability 'payment.send', "
            "which is denied by 'deny payment.send' at app.sns:9, in locked_down() which "
            "called inner() which called pay()\n") in r.stderr


TOP = """\
policy:
    deny payment.send
tool pay(n: Int) requires payment.send:
    return n
pay(1)
"""


def test_a_denial_by_the_top_levels_own_rule_names_the_rule_and_no_chain(tmp_path):
    r = sensevm(tmp_path, "run", write(tmp_path, "top.sns", TOP))
    assert r.returncode == 1
    assert r.stderr.splitlines()[0] == (
        "top.sns:5:4: SensePolicyError: tool 'pay' requires capability 'payment.send', which "
        "is denied by 'deny payment.send' at top.sns:2")


ACTIONS = """\
irreversible action ship(n: Int) requires warehouse.ship:
    print(n)
reversible action grab(n: Int) requires store.write:
    print(n)
rollback:
    print("undo")
def go():
    policy:
        deny warehouse.ship
    s = ship(1)
    try:
        s.verify()
    except SensePolicyError as e:
        print(e.message)
go()
a = grab(2)
a.verify()
a.commit()
def locked():
    policy:
        deny store.write
    a.rollback()
locked()
"""


@pytest.mark.parametrize("tier", TIERS)
def test_action_denials_explained_to_a_handler_and_on_stderr_and_in_the_durable_log(tmp_path,
                                                                                    tier):
    r = sensevm(tmp_path, "run", "--audit-log", "audit.jsonl",
                write(tmp_path, "acts.sns", ACTIONS), tier=tier)
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        "action 'ship' requires capability 'warehouse.ship', which is denied by "
        "'deny warehouse.ship' at acts.sns:9, in go()", "2"]
    assert r.stderr.splitlines()[0] == (
        "acts.sns:22:7: SensePolicyError: action 'grab' requires capability 'store.write', "
        "which is denied by 'deny store.write' at acts.sns:21, in locked()")
    texts = [json.loads(line)["text"] for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert ("[line 12] irreversible action 'ship' -> denied (capability 'warehouse.ship' denied "
            "by policy)") in texts
    assert ("[line 12] irreversible action 'ship' -> denial_reason (capability 'warehouse.ship' "
            "denied by 'deny warehouse.ship' at acts.sns:9, in go())") in texts
    assert ("[line 22] reversible action 'grab' -> denial_reason (capability 'store.write' "
            "denied by 'deny store.write' at acts.sns:21, in locked() (rollback))") in texts


REFERENCE_VISIBLE = """\
policy:
    deny warehouse.ship
irreversible action ship(n: Int) requires warehouse.ship:
    print(n)
tool cam() requires device.camera:
    return 1
agent kiosk:
    policy:
        deny device.camera
    test "kiosk":
        cam()
s = ship(3)
test "verify":
    s.verify()
start(kiosk)
for entry in audit_log():
    print(entry)
"""


@pytest.mark.parametrize("tier", TIERS)
def test_what_the_reference_shows_of_a_denial_keeps_its_words(tmp_path, tier):
    """audit_log() lines and `sensevm test`'s FAIL lines are the reference's text."""
    write(tmp_path, "test_k.sns", REFERENCE_VISIBLE)
    r = sensevm(tmp_path, "test", "test_k.sns", tier=tier)
    assert r.returncode == 1
    assert r.stdout == """\
test_k.sns
[line 12] irreversible action 'ship' -> prepared
[line 14] irreversible action 'ship' -> denied (capability 'warehouse.ship' denied by policy)
[line 11] tool 'cam' -> denied (capability 'device.camera' denied by policy) (via agent:kiosk)
  FAIL  verify
        [line 14] action 'ship' requires capability 'warehouse.ship', which is denied by policy
  FAIL  kiosk
        [line 11] tool 'cam' requires capability 'device.camera', which is denied by policy

1 file, 2 tests: 0 passed, 1 failed
""".replace("0 passed, 1 failed", "0 passed, 2 failed")
    ref = os.environ.get("SENSE_REF")
    if ref:
        expected = subprocess.run([ref, "test", "test_k.sns"], cwd=tmp_path,
                                  capture_output=True, text=True)
        assert r.stdout == expected.stdout


def test_an_explicit_capability_nobody_allows_still_says_which_allow_to_add(tmp_path):
    src = 'import std.env\nprint(env.get("HOME"))\n'
    r = sensevm(tmp_path, "run", write(tmp_path, "e.sns", src))
    assert r.returncode == 1
    assert "which is not allowed by any policy (add 'policy: allow env.read')" in r.stderr


# ------------------------------------------------------------------------------ 2. sensevm test

TEST_A = """\
print("a runs")
test "adds up":
    assert(1 + 1 == 2)
test "divides":
    x = 1 / 0
test "asserts":
    assert(2 > 3, "two is not more than three")
"""
TEST_B = """\
test "b adds":
    assert(1 == 1)
y = undefined_name
"""


def test_a_failing_test_is_located_on_stderr_and_stdout_is_the_references(tmp_path):
    write(tmp_path, "test_a.sns", TEST_A)
    r = sensevm(tmp_path, "test", "test_a.sns")
    assert r.returncode == 1
    assert r.stdout == ("test_a.sns\na runs\n  PASS  adds up\n  FAIL  divides\n"
                        "        [line 5] division by zero\n  FAIL  asserts\n"
                        "        two is not more than three\n\n"
                        "1 file, 3 tests: 1 passed, 2 failed\n")
    assert r.stderr.splitlines() == [
        "test_a.sns:5:11: SenseRuntimeError: division by zero (in test 'divides')",
        "test_a.sns:7:11: SenseRuntimeError: two is not more than three (in test 'asserts')"]
    ref = os.environ.get("SENSE_REF")
    if ref:
        assert r.stdout == subprocess.run([ref, "test", "test_a.sns"], cwd=tmp_path,
                                          capture_output=True, text=True).stdout


def test_several_paths_and_k_select_tests_by_name(tmp_path):
    (tmp_path / "d").mkdir()
    write(tmp_path, "d/test_a.sns", TEST_A)
    write(tmp_path, "b_test.sns", TEST_B)
    r = sensevm(tmp_path, "test", "d", "b_test.sns", "d/test_a.sns", "-k", "ADD")
    # test_a.sns's failing tests are not run; b_test.sns's top level still errs after its test.
    assert r.returncode == 1
    assert r.stdout == ("d/test_a.sns\na runs\n  PASS  adds up\n\nb_test.sns\n  PASS  b adds\n\n"
                        "2 files, 2 tests: 2 passed, 0 failed (2 deselected by -k 'ADD')\n")
    assert r.stderr.splitlines() == [
        "  ERROR  [line 3] undefined variable 'undefined_name'",
        "b_test.sns:3:5: SenseNameError: undefined variable 'undefined_name'"]
    only = sensevm(tmp_path, "test", "d", "-k", "adds")
    assert only.returncode == 0 and "1 passed, 0 failed (2 deselected" in only.stdout


def test_a_missing_path_among_several_is_an_error(tmp_path):
    write(tmp_path, "test_a.sns", TEST_A)
    r = sensevm(tmp_path, "test", "test_a.sns", "nope.sns")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == "SenseError: no such file or directory: nope.sns\n"


# ------------------------------------------------------------------------------ 3. paused endings

CLERK = """\
agent clerk:
    answer = ask_human("refund 120 to Ada? (yes/no)")
    print("clerk got", answer)
start(clerk)
print("done")
"""


def test_a_run_ending_with_a_paused_agent_says_how_to_keep_and_answer_it(tmp_path):
    r = sensevm(tmp_path, "run", write(tmp_path, "clerk.sns", CLERK))
    assert r.returncode == 0 and r.stdout == "done\n"
    assert r.stderr == (
        "note: the run ended with 1 agent paused, waiting for an answer:\n"
        "  agent 'clerk' asks: refund 120 to Ada? (yes/no)\n"
        "  nothing was saved: to keep paused agents and answer later, run 'sensevm run "
        "clerk.sns --state-dir DIR', then 'sensevm resume DIR clerk ANSWER'\n")


def test_with_a_state_dir_the_note_says_where_and_the_resume_command_works(tmp_path):
    write(tmp_path, "clerk.sns", CLERK)
    r = sensevm(tmp_path, "run", "clerk.sns", "--state-dir", "state")
    assert r.returncode == 0 and r.stdout == "done\n"
    assert r.stderr.splitlines()[-1] == (
        "  saved in state/clerk.json; answer it with: sensevm resume state clerk ANSWER")
    again = sensevm(tmp_path, "resume", "state", "clerk", "yes")
    assert again.returncode == 0 and again.stdout == "clerk got yes\n" and again.stderr == ""


# ------------------------------------------------------------------------------ 4. no internal errors

def _clean(r):
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("tier", TIERS)
def test_literals_700_deep_are_normal_values(tmp_path, tier):
    src = ("x = " + "[" * 700 + "]" * 700 + "\nprint(len(x))\n"
           + "m = " + '{"a": ' * 700 + "1" + "}" * 700 + "\nprint(len(m))\n")
    r = sensevm(tmp_path, "run", write(tmp_path, "deep.sns", src), tier=tier)
    _clean(r)
    assert r.returncode == 0 and r.stdout == "1\n1\n"


@pytest.mark.parametrize("tier", TIERS)
def test_printing_a_map_700_deep_is_a_clean_error(tmp_path, tier):
    src = "m = " + '{"a": ' * 700 + "1" + "}" * 700 + "\nprint(m)\n"
    r = sensevm(tmp_path, "run", write(tmp_path, "deep.sns", src), tier=tier)
    _clean(r)
    assert r.returncode == 1 and "SenseRuntimeError: maximum recursion depth exceeded" in r.stderr


@pytest.mark.parametrize("tier", TIERS)
def test_cyclic_values_print_with_an_ellipsis(tmp_path, tier):
    src = 'a = [1]\na.push(a)\nprint(a)\nm = {"k": 1}\nm["self"] = m\nprint(m)\n'
    r = sensevm(tmp_path, "run", write(tmp_path, "cyc.sns", src), tier=tier)
    _clean(r)
    assert r.returncode == 0 and r.stdout == "[1, [...]]\n{k: 1, self: {...}}\n"


def test_repl_into_a_closed_pipe_ends_quietly(tmp_path):
    inputs = "".join(f"print({i})\n" for i in range(5000))
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    proc = subprocess.Popen([sys.executable, "-m", "sensevm", "repl"], cwd=tmp_path,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    proc.stdin.write(inputs.encode())
    proc.stdin.close()
    assert proc.stdout.readline() == b"0\n"
    proc.stdout.close()                 # what `| head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 1
    assert err == ""


def test_storing_a_function_in_persistent_memory_is_a_clean_error(tmp_path):
    src = 'persistent memory notes\ndef f():\n    return 1\nnotes.remember("f", f)\n'
    env_dir = tmp_path / "mem"
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1", SENSE_MEMORY_DIR=str(env_dir))
    write(tmp_path, "mem.sns", src)
    r = subprocess.run([sys.executable, "-m", "sensevm", "run", "mem.sns"], cwd=tmp_path,
                       capture_output=True, text=True, env=env)
    _clean(r)
    assert r.returncode == 1
    assert ("mem.sns:4:7: SenseRuntimeError: persistent memory can only store JSON-serializable "
            "values") in r.stderr and "SenseFunction" in r.stderr


# ----------------------------------------------------------------------------- the reference's words

@pytest.mark.parametrize("call, message, note", [
    ('inference("llama")', "inference(): unknown provider 'llama' -- supported: anthropic, mock, "
     "openai", "this VM also has the provider 'scripted'"),
    ('inference("openai", "gpt", colour: 1)', "inference(): unknown option(s) colour -- "
     "supported: api_key_env, max_tokens, temperature", "this VM also takes base_url, timeout"),
])
def test_model_errors_keep_the_reference_text_and_note_our_additions(tmp_path, call, message,
                                                                     note):
    """A program sees the reference's text (e.message); the person at the terminal also sees
    what this VM adds, in a note under it."""
    import subprocess
    import sys
    from conftest import ROOT
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    (tmp_path / "caught.sns").write_text(
        f"try:\n    model m = {call}\nexcept SenseError as e:\n    print(e.message)\n")
    (tmp_path / "uncaught.sns").write_text(f"model m = {call}\n")
    caught = subprocess.run([sys.executable, "-m", "sensevm", "run", "caught.sns"],
                            cwd=tmp_path, capture_output=True, text=True, env=env)
    assert caught.stdout == message + "\n"
    uncaught = subprocess.run([sys.executable, "-m", "sensevm", "run", "uncaught.sns"],
                              cwd=tmp_path, capture_output=True, text=True, env=env)
    assert uncaught.returncode == 1 and message in uncaught.stderr
    assert f"  note: {note}" in uncaught.stderr
