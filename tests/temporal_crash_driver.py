"""The crash matrix of test_temporal.py, driven from one process: ``python temporal_crash_driver.py
ADDRESS WORK`` reads WORK/cases.json (case name -> the environment of its first worker) and
WORK/settle.json (case name -> how to settle a commit its run reports in flight), starts each
case's first worker on a task queue of its own, submits WORK/clerk.sns once per case, answers,
approves and settles each run as it comes to wait (a settlement of the wrong effect first, which
must be refused), starts a second worker for each case whose first one died, and prints, as
JSON, what every run came to (its record, the effects its bodies wrote, how its first worker
ended, and how `sensevm runs` showed it waiting for its settlement).

One client in one process polls every run at once: the test's 2 cores go to the workers."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time


async def drive(address: str, work: str) -> dict:
    from sensevm.cli.temporal import client as cl
    from sensevm.cli.temporal.cli import load_program
    with open(os.path.join(work, "cases.json")) as fh:
        cases = json.load(fh)
    with open(os.path.join(work, "settle.json")) as fh:
        settle = json.load(fh)
    program = load_program(os.path.join(work, "clerk.sns"))
    client = await cl.connect(address, "default")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    workers: dict[str, list] = {}

    def start_worker(name: str, extra: dict) -> None:
        case = os.path.join(work, name)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, work]), NO_COLOR="1",
                   SENSE_TEMPORAL=address, SENSE_TEMPORAL_QUEUE=f"crash-{name}",
                   SENSE_TEST_EFFECTS=os.path.join(case, "effects.log"), **extra)
        log = open(os.path.join(case, f"worker{len(workers[name])}.log"), "wb")
        workers[name].append(subprocess.Popen(
            [sys.executable, "-m", "sensevm", "worker"], cwd=case, env=env,
            stdout=subprocess.DEVNULL, stderr=log))

    try:
        for name, extra in cases.items():
            os.makedirs(os.path.join(work, name))
            workers[name] = []
            start_worker(name, extra)
        for name in cases:
            await cl.submit(client, program, name, f"crash-{name}", heartbeat=5)
        done: dict[str, dict] = {}
        answered, approved, settled = set(), set(), {}
        end = time.monotonic() + 200
        while len(done) < len(cases) and time.monotonic() < end:
            found = {r["id"]: r for r in await cl.runs(client)}
            for name in cases:
                run = found.get(name)
                if name in done or run is None:
                    continue
                first = workers[name][0]
                if len(workers[name]) == 1 and first.poll() is not None:
                    start_worker(name, {})          # the dead one's replacement
                if run["state"] in ("completed", "failed"):
                    done[name] = run
                elif run["state"] == "waiting" and name not in answered:
                    await cl.answer(client, name, "clerk", "bob")
                    answered.add(name)
                elif run["state"] == "waiting for approval" and name not in approved:
                    await cl.approve(client, name, run["approval"]["hash"])
                    approved.add(name)
                elif run["state"] == "waiting for a settlement" and name not in settled:
                    effect = run["settlement"]["effect"]
                    try:
                        await cl.settle(client, name, effect + 1, settle[name])
                        wrong = None
                    except cl.RunError as exc:
                        wrong = str(exc)
                    await cl.settle(client, name, effect, settle[name])
                    settled[name] = {"shown": cl.describe_state(run), "wrong": wrong}
            await asyncio.sleep(0.5)
        results = {}
        for name in cases:
            record = await cl.record(client, name) if name in done else None
            effects = os.path.join(work, name, "effects.log")
            results[name] = {
                "run": done.get(name), "record": record,
                "effects": open(effects).read().splitlines() if os.path.exists(effects) else [],
                "crashed": workers[name][0].poll() if cases[name] else None,
                "settled": settled.get(name)}
        return results
    finally:
        for procs in workers.values():
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()


def main() -> None:
    address, work = sys.argv[1:3]
    results = asyncio.run(drive(address, work))
    sys.stdout.write(json.dumps(results))
    sys.stdout.flush()
    os._exit(0)         # temporalio's threads must not meet the interpreter's finalization


if __name__ == "__main__":
    main()
