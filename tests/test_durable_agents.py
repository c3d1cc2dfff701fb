"""A paused agent survives the process: saved by `run --state-dir`, continued by `sensevm resume`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import ROOT, run_source

PROGRAM = '''irreversible action refund(amount: Int) requires billing.refund, approval:
    print("refunding", amount)
log = []
def note(x):
    push(log, x)
    return len(log)
agent clerk:
    "handles one refund"
    r = refund(120)
    r.verify()
    answer = ""
    for step in ["first", "second"]:
        answer = ask_human("approve " + step + "?")
        print("clerk heard", answer, "at step", step, "log size", note(answer))
    if answer == "yes":
        r.approve()
        r.commit()
    print("state", r.state, log)
    for e in audit_log():
        print(e)
start(clerk)
print("main done:", clerk)
'''


def sensevm(*args, cwd):
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "sensevm", *args], cwd=cwd,
                          capture_output=True, text=True, env=env)


def test_resumed_in_new_processes_prints_what_one_process_prints(tmp_path):
    (tmp_path / "clerk.sns").write_text(PROGRAM)
    first = sensevm("run", "clerk.sns", "--state-dir", "state", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout == "main done: <agent clerk status=paused (approve first?)>\n"
    assert sorted(os.listdir(tmp_path / "state")) == ["clerk.json", "program.snb"]
    second = sensevm("resume", "state", "clerk", "no", cwd=tmp_path)
    third = sensevm("resume", "state", "clerk", "yes", cwd=tmp_path)
    assert second.returncode == 0 and third.returncode == 0, second.stderr + third.stderr
    # The same conversation in one process, for comparison.
    single = run_source(PROGRAM.replace('print("main done:", clerk)\n',
                                        'resume(clerk, "no")\nresume(clerk, "yes")\n'),
                        tmp_path, "single.sns")
    assert single.error is None
    assert second.stdout + third.stdout == single.stdout
    assert "refunding 120" in third.stdout
    assert "(via agent:clerk)" in third.stdout
    # It has ended: resuming again is refused, and the state says why.
    again = sensevm("resume", "state", "clerk", "more", cwd=tmp_path)
    assert again.returncode == 1
    assert "status is 'completed', not 'paused'" in again.stderr
    assert json.loads((tmp_path / "state" / "clerk.json").read_text())["state"]["objects"]


def test_a_value_that_cannot_be_saved_is_named_and_nothing_is_written(tmp_path):
    (tmp_path / "p.sns").write_text(
        'async tool slow() returns Int:\n'
        '    return 1\n'
        'agent a:\n'
        '    f = slow()\n'
        '    pause("waiting")\n'
        'test "pausing with a pending future":\n'
        '    start(a)\n'
        'print(a.status)\n')
    proc = sensevm("run", "p.sns", "--state-dir", "state", cwd=tmp_path)
    # The future may already be done by the time pause() runs; either way nothing is
    # half-written: the agent was saved whole, or it failed and no state file exists.
    files = sorted(os.listdir(tmp_path / "state")) if (tmp_path / "state").exists() else []
    assert not [f for f in files if f.endswith(".tmp")]
    if proc.stdout == "failed\n":
        assert "a.json" not in files
    else:
        assert proc.stdout == "paused\n" and "a.json" in files


def test_pending_future_error_message(tmp_path):
    from sensevm.base.errors import SenseError
    import pytest
    from sensevm.world.persist import SaveError, _Saver
    from sensevm.runtime.values import Future

    class FakeTool:
        name = "slow"

    class FakeVM:
        builtins = None
    with pytest.raises(SaveError) as info:
        _Saver(FakeVM()).value(Future(FakeTool(), None, None), "agent 'a'")
    assert "pending Future of tool 'slow'" in info.value.message


def test_corrupt_state_is_a_clean_error(tmp_path):
    (tmp_path / "clerk.sns").write_text(PROGRAM)
    assert sensevm("run", "clerk.sns", "--state-dir", "state", cwd=tmp_path).returncode == 0
    (tmp_path / "state" / "clerk.json").write_text("{not json")
    proc = sensevm("resume", "state", "clerk", "x", cwd=tmp_path)
    assert proc.returncode == 1 and "cannot resume agent 'clerk'" in proc.stderr
    assert "refused (integrity): not a saved agent state of this format" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = sensevm("resume", "state", "nobody", "x", cwd=tmp_path)
    assert proc.returncode == 1 and "no saved agent 'nobody'" in proc.stderr


def test_audit_log_file_continues_across_processes(tmp_path):
    (tmp_path / "clerk.sns").write_text(PROGRAM)
    assert sensevm("run", "clerk.sns", "--state-dir", "s", "--audit-log", "a.jsonl",
                   cwd=tmp_path).returncode == 0
    assert sensevm("resume", "s", "clerk", "no", "--audit-log", "a.jsonl",
                   cwd=tmp_path).returncode == 0
    assert sensevm("resume", "s", "clerk", "yes", "--audit-log", "a.jsonl",
                   cwd=tmp_path).returncode == 0
    check = sensevm("audit", "verify", "a.jsonl", cwd=tmp_path)
    assert check.returncode == 0 and check.stdout.startswith("OK: ")
    entries = [json.loads(l) for l in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert [e["event"] for e in entries if e["kind"] != "audit"] == [
        "prepared", "verified", "approved", "committing", "committed"]
    # Each of the three processes opened and sealed its own run of the one chain.
    assert [e["event"] for e in entries if e["kind"] == "audit"] == ["opened", "sealed"] * 3


MODEL_AGENT = '''model planner = inference("scripted", "turns.json")
model echo = inference("mock", "echo", response_template: "echo: {prompt}", confidence: 0.8)
set delegation = planner
tool lookup(name: String) returns String "finds an address":
    return name + "@example.com"
helpers = skill("contacts", "address book", [lookup])
agent aide:
    first = ask("plan")
    ask_echo = echo.ask
    said = ask_human("go on after " + first.value + "?")
    print("heard", said, first, ask_echo(said))
    print(ask_with_tools("find ana", [helpers]))
    for e in audit_log():
        print(e)
start(aide)
'''


def test_an_agent_holding_models_answers_and_skills_resumes_in_a_new_process(tmp_path):
    (tmp_path / "turns.json").write_text(json.dumps([
        {"text": "step one", "confidence": 0.7},
        {"tool_calls": [{"name": "lookup", "arguments": {"name": "ana"}}]},
        {"text": "found {results}"}]))
    (tmp_path / "aide.sns").write_text(MODEL_AGENT)
    first = sensevm("run", "aide.sns", "--state-dir", "state", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    second = sensevm("resume", "state", "aide", "yes", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines() == [
        "heard yes answer<0.70>(step one) answer<0.80>(echo: yes)",
        "answer<?>(found ana@example.com)",
        "[line 8] model 'planner' -> called (via agent:aide)",
        "[line 12] tool 'lookup' -> called (via agent:aide)",
        "[line 12] model 'planner' -> called (via agent:aide)"]
    # The script position was saved (the resumed run did not replay turn 1), and the state
    # rewritten when the agent ended records all three turns used.
    state = json.loads((tmp_path / "state" / "aide.json").read_text())["state"]
    assert [o["provider"]["used"] for o in state["objects"]
            if o and o.get("type") == "model" and o["name"] == "planner"] == [3]


MEMORY_AGENT = '''memory notes: "scratch"
persistent memory ledger
notes.remember("first", [1, 2.0])
notes.remember("second", "two")
notes.remember("first", [3])
recall_note = notes.recall
history = ledger.history
agent clerk:
    ledger.remember("before", 1)
    answer = ask_human("go?")
    notes.remember("answer", answer)
    ledger.remember("after", answer)
    print(notes, notes.keys(), recall_note("first"), notes.kind)
    print(ledger.keys(), ledger.recall("after"), len(history("before")), ledger.path)
    set delegation = inference("mock", response_template: "{prompt}")
    print(ask_with_memory("q", notes).value)
    recall_note(7)
start(clerk)
print(clerk.status)
'''


def test_an_agent_holding_memories_resumes_in_a_new_process(tmp_path):
    # Session memory is saved with its contents (in insertion order); persistent memory by its
    # file, which the resumed run reopens; a bound method keeps the line it was read at.
    (tmp_path / "clerk.sns").write_text(MEMORY_AGENT)
    first = sensevm("run", "clerk.sns", "--state-dir", "state", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout == "paused\n"
    db = tmp_path / ".sense_memory" / "ledger.sense_memory.db"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    second = sensevm("resume", str(tmp_path / "state"), "clerk", "yes", cwd=elsewhere)
    assert second.returncode == 1
    assert second.stdout.splitlines() == [
        "<memory notes (3 entries)> [first, second, answer] [3] scratch",
        f"[before, after] yes 1 {db}",
        "Known information from memory:", "- first: [3]", "- second: two", "- answer: yes",
        "", "q"]
    assert "clerk.sns:6:21: SenseRuntimeError: memory key must be a String, got Int" \
        in second.stderr
    assert os.listdir(elsewhere) == []
