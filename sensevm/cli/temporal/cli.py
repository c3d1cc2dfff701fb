"""What the Temporal commands do (``sensevm worker|submit|runs|answer|approve|settle|output``), each a
function returning the exit status; commands.py gives them their command lines.

temporalio is imported here, inside each function: without the ``[temporal]`` extra the
commands say how to install it, and nothing else of sensevm ever imports it."""

from __future__ import annotations

import asyncio
import os
import sys

DEFAULT_ADDRESS = "127.0.0.1:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_QUEUE = "sense"

MISSING = ("sensevm: the Temporal commands need the temporal extra: "
           "pip install 'sense-compiled[temporal]' (temporalio is not installed)\n")


def settings(address, namespace, task_queue):
    """The options, else SENSE_TEMPORAL, SENSE_TEMPORAL_NAMESPACE, SENSE_TEMPORAL_QUEUE,
    else the defaults (a dev server on this machine)."""
    return (address or os.environ.get("SENSE_TEMPORAL") or DEFAULT_ADDRESS,
            namespace or os.environ.get("SENSE_TEMPORAL_NAMESPACE") or DEFAULT_NAMESPACE,
            task_queue or os.environ.get("SENSE_TEMPORAL_QUEUE") or DEFAULT_QUEUE)


def _client_call(address, namespace, body) -> int:
    """Run ``body(client)`` against the server; a RunError is said on stderr, exit 1."""
    try:
        from sensevm.cli.temporal import client as cl
    except ImportError:
        sys.stderr.write(MISSING)
        return 1

    async def go():
        return await body(cl, await cl.connect(address, namespace))
    try:
        status = asyncio.run(go()) or 0
    except cl.RunError as exc:
        sys.stderr.write(f"sensevm: {exc}\n")
        status = 1
    return _leave(status)


def _leave(status: int):
    """Exit now, the streams flushed. temporalio's core runtime keeps threads of its own that
    may call into Python while the interpreter finalizes, which aborts the process ("Fatal
    Python error: PyGILState_Release") after the command has done its work; a command that
    has nothing left to clean up leaves without finalizing."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def worker(address, namespace, task_queue, concurrency=None) -> int:
    try:
        from sensevm.cli.temporal.worker import DEFAULT_CONCURRENCY, serve
    except ImportError:
        sys.stderr.write(MISSING)
        return 1
    slots = concurrency or DEFAULT_CONCURRENCY

    def ready():
        sys.stderr.write(f"sensevm worker: polling task queue '{task_queue}' on {address} "
                         f"(namespace {namespace}; up to {slots} segments at once)\n")
        sys.stderr.flush()
    status = 0
    try:
        asyncio.run(serve(address, namespace, task_queue, ready=ready, concurrency=slots))
    except KeyboardInterrupt:
        pass
    except RuntimeError as exc:         # the connection (the bridge's errors)
        sys.stderr.write(f"sensevm worker: cannot reach the Temporal server at {address}: "
                         f"{exc}\n")
        status = 1
    return _leave(status)


def load_program(path: str, import_root=None):
    """The verified .snb bytes of FILE (a .sns compiled first), or None after the error was
    reported as `sensevm run` reports it."""
    from sensevm.base.errors import SenseError, SnbFormatError, VerifyError
    from sensevm.base.files import read_bytes
    from sensevm.bytecode.snb import is_snb
    from sensevm.bytecode.verify import load_verified
    try:
        data = read_bytes(path)
        if not is_snb(data) and not path.endswith(".snb"):
            from sensec.driver import compile_file
            from sensevm.bytecode.snb import dump
            data = dump(compile_file(path, defer_import_errors=True, import_root=import_root))
        load_verified(data)
    except SenseError as err:
        from sensevm.base.diagnostics import report
        report(err, {}, sys.stderr)
        return None
    except (SnbFormatError, VerifyError) as exc:
        from sensevm.base.diagnostics import report_file_error
        report_file_error(path, exc, sys.stderr)
        return None
    except OSError as exc:
        sys.stderr.write(f"sensevm: cannot read {path}: {exc.strerror or exc}\n")
        return None
    return data


def submit(path, run_id, address, namespace, task_queue, args=(), request=None,
           import_root=None, heartbeat=10, history_events=None) -> int:
    program = load_program(path, import_root)
    if program is None:
        return 1

    async def body(cl, client):
        print(await cl.submit(client, program, run_id or cl.new_run_id(), task_queue,
                              args=args, request=request, heartbeat=heartbeat,
                              history_events=history_events))
    return _client_call(address, namespace, body)


def runs(address, namespace, as_json=False) -> int:
    async def body(cl, client):
        found = await cl.runs(client)
        if as_json:
            import json
            print(json.dumps(found, indent=2))
            return
        for run in found:
            print(f"{run['id']}  {cl.describe_state(run)}")
        if not found:
            print("no runs")
    return _client_call(address, namespace, body)


def answer(run_id, agent, text, address, namespace) -> int:
    async def body(cl, client):
        await cl.answer(client, run_id, agent, text)
        sys.stderr.write(f"answered agent '{agent}' of run '{run_id}'\n")
    return _client_call(address, namespace, body)


def approve(run_id, digest, address, namespace, decline=False) -> int:
    async def body(cl, client):
        await cl.approve(client, run_id, digest, decline)
        sys.stderr.write(f"{'declined' if decline else 'approved'} the session run "
                         f"'{run_id}' waits on\n")
    return _client_call(address, namespace, body)


def settle(run_id, effect, outcome, address, namespace) -> int:
    async def body(cl, client):
        await cl.settle(client, run_id, effect, outcome)
        said = "happened" if outcome == "happened" else "did not happen"
        sys.stderr.write(f"settled effect #{effect} of run '{run_id}': it {said}\n")
    return _client_call(address, namespace, body)


def output(run_id, address, namespace, audit=False) -> int:
    async def body(cl, client):
        record = await cl.record(client, run_id)
        sys.stdout.write(record["audit"] if audit else record["output"])
        if not audit and record.get("errors"):
            sys.stderr.write(record["errors"])
        return 1 if record["state"] == "failed" else 0
    return _client_call(address, namespace, body)
