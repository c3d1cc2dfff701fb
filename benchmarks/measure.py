"""Run one child process and measure its wall time and peak memory (max RSS)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Optional


@dataclass
class Run:
    status: str                  # ok | error | timeout
    seconds: float
    maxrss_kb: Optional[int]
    exit_code: Optional[int]
    stdout: str
    stderr: str


def _rss_kb(ru_maxrss: int) -> int:
    # Linux reports kilobytes, macOS bytes.
    return ru_maxrss // 1024 if sys.platform == "darwin" else ru_maxrss


def run_once(cmd: list[str], *, env: Optional[dict] = None, cwd: Optional[str] = None,
             timeout: float = 600.0) -> Run:
    """Run ``cmd`` to completion; output goes to files so a chatty child never blocks on a pipe."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                env=env, cwd=cwd)
        timed_out = threading.Event()

        def kill():
            timed_out.set()
            proc.kill()

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            if hasattr(os, "wait4"):
                # wait4 gives this one child's own max RSS, unaffected by earlier children.
                _, status, usage = os.wait4(proc.pid, 0)
                elapsed = time.perf_counter() - start
                proc.returncode = os.waitstatus_to_exitcode(status)
                maxrss = _rss_kb(usage.ru_maxrss)
            else:
                proc.wait()
                elapsed = time.perf_counter() - start
                after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
                # RUSAGE_CHILDREN keeps the largest child ever, so a smaller child is invisible.
                maxrss = _rss_kb(after) if after > before else None
        finally:
            timer.cancel()
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", errors="replace")
        stderr = err.read().decode("utf-8", errors="replace")
    if timed_out.is_set():
        status = "timeout"
    elif proc.returncode != 0:
        status = "error"
    else:
        status = "ok"
    return Run(status, elapsed, maxrss, proc.returncode, stdout, stderr)


# A child's ru_maxrss starts at the RSS of the process it was forked from (Linux carries the
# pre-exec high-water mark across exec), so children forked straight from the harness would
# all report at least the harness's own ~25 MB. Forking them from this tiny helper instead
# (python -I -S, about 10 MB) keeps that floor below anything a Python program can use.
_HELPER = r"""
import json, os, resource, signal, sys, time
def main():
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("ping"):
            # The floor a child inherits is this process's own peak (VmHWM), not its
            # ru_maxrss, which already carries the floor of the harness that started it.
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            try:
                with open("/proc/self/status") as fh:
                    for text in fh:
                        if text.startswith("VmHWM:"):
                            rss = int(text.split()[1])
            except OSError:
                pass
            sys.stdout.write(json.dumps({"maxrss": rss}) + "\n")
            sys.stdout.flush()
            continue
        out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            try:
                if req["cwd"]:
                    os.chdir(req["cwd"])
                nul = os.open(os.devnull, os.O_RDONLY)
                os.dup2(nul, 0)
                os.dup2(out, 1)
                os.dup2(err, 2)
                os.execvpe(req["cmd"][0], req["cmd"], req["env"])
            except BaseException as exc:
                os.write(2, ("cannot run %s: %s\n" % (req["cmd"][0], exc)).encode())
            os._exit(127)
        os.close(out)
        os.close(err)
        killed = []
        def on_alarm(signum, frame):
            killed.append(True)
            os.kill(pid, signal.SIGKILL)
        signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, req["timeout"])
        _, status, usage = os.wait4(pid, 0)
        seconds = time.perf_counter() - start
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.stdout.write(json.dumps({"seconds": seconds, "exit": os.waitstatus_to_exitcode(status),
                                     "maxrss": usage.ru_maxrss, "timeout": bool(killed)}) + "\n")
        sys.stdout.flush()
main()
"""


class Runner:
    """Runs benchmark children through the helper above, or directly where it cannot start."""

    def __init__(self, python: str = sys.executable):
        self.helper: Optional[subprocess.Popen] = None
        self.floor_kb: Optional[int] = None
        self.method = "direct"
        if not hasattr(os, "fork"):
            return
        try:
            self.helper = subprocess.Popen([python, "-I", "-S", "-c", _HELPER],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           text=True, bufsize=1)
            self.floor_kb = _rss_kb(self._call({"ping": True})["maxrss"])
            self.method = "helper"
        except (OSError, ValueError, RuntimeError):
            self.close()

    def _call(self, request: dict) -> dict:
        self.helper.stdin.write(json.dumps(request) + "\n")
        self.helper.stdin.flush()
        line = self.helper.stdout.readline()
        if not line:
            raise RuntimeError("the benchmark spawner helper exited")
        return json.loads(line)

    def run(self, cmd: list[str], *, env: Optional[dict] = None, cwd: Optional[str] = None,
            timeout: float = 600.0) -> Run:
        if self.helper is None:
            return run_once(cmd, env=env, cwd=cwd, timeout=timeout)
        fd_out, out_path = tempfile.mkstemp(prefix="bench-out-")
        fd_err, err_path = tempfile.mkstemp(prefix="bench-err-")
        os.close(fd_out)
        os.close(fd_err)
        try:
            reply = self._call({"cmd": cmd, "env": dict(env if env is not None else os.environ),
                                "cwd": cwd, "timeout": timeout,
                                "stdout": out_path, "stderr": err_path})
            with open(out_path, encoding="utf-8", errors="replace") as fh:
                stdout = fh.read()
            with open(err_path, encoding="utf-8", errors="replace") as fh:
                stderr = fh.read()
        finally:
            for path in (out_path, err_path):
                try:
                    os.unlink(path)
                except OSError:
                    pass
        if reply["timeout"]:
            status = "timeout"
        elif reply["exit"] != 0:
            status = "error"
        else:
            status = "ok"
        return Run(status, reply["seconds"], _rss_kb(reply["maxrss"]), reply["exit"], stdout, stderr)

    def close(self) -> None:
        if self.helper is not None:
            try:
                self.helper.stdin.close()
                self.helper.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.helper.kill()
            self.helper = None


def result_lines(stdout: str) -> list[str]:
    """The checksum lines a benchmark prints: every line that starts with ``result:``."""
    return [line.rstrip() for line in stdout.splitlines() if line.startswith("result:")]
