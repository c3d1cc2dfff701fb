"""The benchmark harness (`make bench`, `python -m benchmarks`): sensevm vs CPython vs the reference."""

from __future__ import annotations

import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Optional

import click

if __package__ in (None, ""):
    # Run as a script (python benchmarks/harness.py): make the package importable.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import chart  # noqa: E402
from benchmarks.catalog import BENCHMARKS, BY_NAME, EMPTY, PROGRAMS_DIR, Bench, sized  # noqa: E402
from benchmarks.generate import generate  # noqa: E402
from benchmarks.measure import Run, Runner, result_lines, run_once  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "benchmarks", "results")
DEFAULT_REF = os.path.join(ROOT, ".venv-ref", "bin", "sense")
SCHEMA = "sense-bench/1"
IMPLS = ("ours", "cpython", "reference")
LABEL = {"ours": "ours", "cpython": "CPython", "reference": "reference"}
PROBLEMS = ("ERROR", "MISMATCH")
# The untimed run that checks a compiled program's result gets less time than a timed run: it
# is a correctness check, and a VM that needs minutes just to load the program has a bug to show.
CHECK_TIMEOUT = 60.0


@dataclass
class Settings:
    python: str
    ref: Optional[str]           # None when the reference cannot be used
    ref_reason: str              # why not, for the n/a columns
    quick: bool
    rounds: int
    timeout: float
    workdir: str
    runner: Runner
    # Each implementation's start-up (median seconds of the empty program, this run), which
    # the compute columns subtract; None until measured (then nothing is subtracted).
    startup: Optional[dict] = None


@dataclass
class Plan:
    """How one implementation takes part in one benchmark."""
    impl: str
    state: str = "ready"         # ready | skipped | n/a | error
    reason: str = ""
    cmd: Optional[list[str]] = None
    check_cmd: Optional[list[str]] = None   # an untimed run that prints the result, if cmd does not
    env: Optional[dict] = None
    compare: bool = True         # False for a baseline that prints nothing (python -c pass)


@dataclass
class Outcome:
    plan: Plan
    status: str = "ok"           # ok | error | timeout | skipped | n/a
    reason: str = ""
    runs: list[Run] = field(default_factory=list)
    result: Optional[list[str]] = None
    check_error: str = ""        # the untimed result check failed (timings stay valid)

    def times(self) -> list[float]:
        return [r.seconds for r in self.runs if r.status == "ok"]

    def median(self) -> Optional[float]:
        t = self.times()
        return statistics.median(t) if t and self.status == "ok" else None

    def peak_mb(self) -> Optional[float]:
        rss = [r.maxrss_kb for r in self.runs if r.status == "ok" and r.maxrss_kb]
        return round(max(rss) / 1024, 1) if rss and self.status == "ok" else None


def _progress(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


def ours_env() -> dict:
    """The environment for sensec/sensevm: this working tree first on the import path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def precompile(python: str) -> str:
    """Byte-compile sensec and sensevm once, untimed, as installing them does; say what happened.

    Every timed run includes interpreter start-up, and CPython's own modules always load from
    their installed .pyc files. Without this step, an environment that sets
    PYTHONDONTWRITEBYTECODE (or a read-only checkout) would recompile every module of ours from
    source on every run, which no installed copy does; the start-up row would then measure
    the bytecode compiler, not sensevm. The .pyc files go to the usual __pycache__ directories
    and are checked against the sources on import, as always, so they can never be stale.
    """
    try:
        proc = subprocess.run([python, "-m", "compileall", "-q",
                               os.path.join(ROOT, "sensevm"), os.path.join(ROOT, "sensec")],
                              capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"not precompiled ({exc})"
    if proc.returncode != 0:
        return f"not precompiled (compileall: exit {proc.returncode})"
    return "precompiled with compileall, as an install does"


def _first_line(run: Run) -> str:
    for line in (run.stderr + "\n" + run.stdout).splitlines():
        if line.strip():
            return line.strip()[:200]
    return f"exit status {run.exit_code}"


def _describe_failure(run: Run, timeout: float) -> str:
    if run.status == "timeout":
        return f"timed out after {timeout:g}s"
    return f"exit {run.exit_code}: {_first_line(run)}"


def _write(directory: str, name: str, text: str) -> str:
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


def _build(s: Settings, sns: str, snb: str, bench: Bench, plan: Plan) -> None:
    """Build the .snb once, untimed; a program sensec cannot compile yet is skipped, not failed."""
    run = s.runner.run([s.python, "-m", "sensec", "build", sns, "-o", snb], env=ours_env(),
                       timeout=s.timeout)
    if run.status == "ok":
        return
    text = run.stderr + run.stdout
    if run.status == "error" and "not supported" in text:
        plan.state = "skipped"
        plan.reason = f"needs {bench.needs}" if bench.needs else "uses a feature sensec lacks"
        detail = next((ln for ln in text.splitlines() if "not supported" in ln), "")
        plan.reason += f" (sensec: {detail.split(': ', 2)[-1].strip()})" if detail else ""
    else:
        plan.state = "error"
        plan.reason = "sensec build failed: " + _describe_failure(run, s.timeout)


def prepare(bench: Bench, s: Settings) -> tuple[dict[str, Plan], dict]:
    """Write the sized sources into the work dir, build what needs building, plan each run."""
    d = os.path.join(s.workdir, bench.name)
    os.makedirs(d)
    n = bench.size(s.quick)
    plans = {i: Plan(i) for i in IMPLS}
    info: dict = {}
    py, ref = s.python, s.ref
    ours, cpy, rf = plans["ours"], plans["cpython"], plans["reference"]
    if bench.kind == "program":
        text = os.path.join(PROGRAMS_DIR, bench.source)
        sns = _write(d, bench.name + ".sns", sized(text, n) if bench is not EMPTY
                     else open(text, encoding="utf-8").read())
        snb = sns[:-4] + ".snb"
        flag = ["--dry-run"] if bench.dry_run else []
        look = ["--second-look=off"] if bench.look_off else []
        ours.cmd = [py, "-m", "sensevm", "run", *flag, *look, snb]
        if bench.durable:
            # A fresh log per run (an existing one is verified whole before it is extended);
            # the shell execs, so the measured process is sensevm itself.
            log = os.path.join(d, "audit.jsonl")
            ours.cmd = ["/bin/sh", "-c", 'rm -f -- "$0" && exec "$@"', log,
                        py, "-m", "sensevm", "run", "--audit-log", log, snb]
        _build(s, sns, snb, bench, ours)
        if bench.twin:
            twin = os.path.join(PROGRAMS_DIR, bench.twin)
            cpy.cmd = [py, _write(d, bench.name + ".py", sized(twin, n) if bench is not EMPTY
                                  else open(twin, encoding="utf-8").read())]
        else:
            cpy.state, cpy.reason = "n/a", "no CPython twin"
        rf.cmd = [ref or "sense", "run", *flag, sns]
        if bench.durable:
            rf.state, rf.reason = "n/a", "no durable audit log (this row measures ours' memory)"
        if bench.extension:
            rf.state, rf.reason = "n/a", f"the reference has no {bench.extension}"
    elif bench.kind == "compile":
        sense_text, python_text = generate(n)
        sns = _write(d, "generated.sns", sense_text)
        pyf = _write(d, "generated.py", python_text)
        snb = sns[:-4] + ".snb"
        ours.cmd = [py, "-m", "sensec", "build", sns, "-o", snb]
        ours.check_cmd = [py, "-m", "sensevm", "run", snb]
        # CPython's counterpart of `sensec build` is byte-compiling the twin; running it checks it.
        cpy.cmd = [py, "-m", "py_compile", pyf]
        cpy.check_cmd = [py, pyf]
        rf.cmd = [ref or "sense", "run", sns]
        info["lines"] = n
    elif bench.kind == "startup":
        with open(os.path.join(PROGRAMS_DIR, bench.source), encoding="utf-8") as fh:
            sns = _write(d, "hello.sns", fh.read())
        snb = sns[:-4] + ".snb"
        ours.cmd = [py, "-m", "sensevm", "run", snb]
        _build(s, sns, snb, bench, ours)
        cpy.cmd = [py, "-c", "pass"]
        cpy.compare = False
        rf.cmd = [ref or "sense", "run", sns]
    else:
        raise ValueError(f"unknown benchmark kind {bench.kind!r}")
    ours.env = ours_env()
    if ref is None and rf.state == "ready":
        rf.state, rf.reason = "n/a", s.ref_reason
    return plans, info


def _record_result(o: Outcome, lines: list[str]) -> None:
    if not lines:
        o.status, o.reason = "error", "printed no 'result:' line"
    elif o.result is None:
        o.result = lines
    elif lines != o.result:
        o.status = "error"
        o.reason = f"result changed between rounds: {o.result!r} then {lines!r}"


def _disagree(outcomes: dict[str, Outcome]) -> bool:
    results = {tuple(o.result) for o in outcomes.values()
               if o.status == "ok" and o.plan.compare and o.result is not None}
    return len(results) > 1


def measure(bench: Bench, plans: dict[str, Plan], s: Settings,
            progress: Callable[[str], None]) -> dict[str, Outcome]:
    """Run the ready implementations round by round, rotating who goes first each round."""
    outcomes = {i: Outcome(p, status="ok" if p.state == "ready" else p.state, reason=p.reason)
                for i, p in plans.items()}
    cwd = os.path.join(s.workdir, bench.name)
    live = [i for i in IMPLS if outcomes[i].status == "ok"]
    rounds = min(s.rounds, bench.rounds) if bench.rounds else s.rounds
    for r in range(rounds):
        if not live:
            break
        # Rotation spreads warm-cache and thermal effects evenly over the implementations.
        k = r % len(live)
        progress(f"    round {r + 1}/{rounds}:")
        for i in live[k:] + live[:k]:
            o = outcomes[i]
            run = s.runner.run(o.plan.cmd, env=o.plan.env, cwd=cwd, timeout=s.timeout)
            o.runs.append(run)
            if run.status != "ok":
                o.status, o.reason = run.status, _describe_failure(run, s.timeout)
                progress(f"  {LABEL[i]} {run.status.upper()}")
                continue
            if o.plan.compare and o.plan.check_cmd is None:
                _record_result(o, result_lines(run.stdout))
            progress(f"  {LABEL[i]} {run.seconds:.3f}s")
            run.stdout = ""          # a dry-run summary can be megabytes; the result is kept
        progress("\n")
        live = [i for i in live if outcomes[i].status == "ok"]
        if _disagree(outcomes):
            # Timing programs that compute different things would only hide the bug.
            progress("    results differ: not timing this benchmark any further\n")
            break
    for i in IMPLS:
        o = outcomes[i]
        if o.status == "ok" and o.plan.check_cmd is not None and o.plan.compare:
            progress(f"    checking the {LABEL[i]} result (untimed)\n")
            limit = min(s.timeout, CHECK_TIMEOUT)
            run = s.runner.run(o.plan.check_cmd, env=o.plan.env, cwd=cwd, timeout=limit)
            if run.status != "ok":
                o.check_error = "result check run failed: " + _describe_failure(run, limit)
                progress(f"    {o.check_error}\n")
            else:
                _record_result(o, result_lines(run.stdout))
    return outcomes


def _check(outcomes: dict[str, Outcome]) -> str:
    # A mismatch outranks an error: its details are printed under the table.
    if _disagree(outcomes):
        return "MISMATCH"
    if any(o.status in ("error", "timeout") or o.check_error for o in outcomes.values()):
        return "ERROR"
    compared = [i for i, o in outcomes.items() if o.status == "ok" and o.plan.compare]
    if len(compared) >= 2:
        return "ok"
    if outcomes["ours"].status != "ok" and compared == ["reference"]:
        return "reference only"
    if len(compared) == 1:
        return f"unchecked ({LABEL[compared[0]]} only)"
    return "-"


def _compute(o: Outcome, bench: Bench, s: Settings) -> Optional[float]:
    """A program's median time minus its implementation's start-up (this run's empty
    program); the whole time when start-up was not measured; None for the rows that time
    something else (start-up itself, compiling) or when start-up is as long as the run."""
    m = o.median()
    if m is None or bench.kind != "program" or bench is EMPTY:
        return None
    base = (s.startup or {}).get(o.plan.impl)
    if s.startup is None:
        return m
    if base is None or m <= base:
        return None
    return m - base


_MEDIANS = object()


def _ratio(a: Outcome, b: Outcome, ma=_MEDIANS, mb=_MEDIANS) -> Optional[float]:
    """a's median time over b's (or the times given: compute), only when both ran and
    computed the same thing."""
    if ma is _MEDIANS:
        ma, mb = a.median(), b.median()
    if ma is None or mb is None or mb == 0:
        return None
    if a.plan.compare and b.plan.compare and a.result != b.result:
        return None
    return round(ma / mb, 3)


def row_for(bench: Bench, s: Settings, outcomes: dict[str, Outcome], info: dict) -> dict:
    impls = {}
    computed = {i: _compute(o, bench, s) for i, o in outcomes.items()}
    for i, o in outcomes.items():
        cmd = o.plan.cmd
        impls[i] = {
            "status": o.status,
            "reason": o.reason,
            "command": [c.replace(s.workdir, "$WORK") for c in cmd] if cmd else None,
            "times_s": [round(t, 4) for t in o.times()],
            "median_s": round(o.median(), 4) if o.median() is not None else None,
            "peak_rss_mb": o.peak_mb(),
            "compute_s": (round(computed[i], 4) if computed[i] is not None else None),
            "result": o.result,
            "check_error": o.check_error or None,
        }
    row = {
        "name": bench.name,
        "what": bench.what,
        "kind": bench.kind,
        "size": bench.size_label(s.quick),
        "check": _check(outcomes),
        "impls": impls,
        # The headline ratios are of compute (each time minus that implementation's start-up);
        # the *_whole ones are of the whole processes, start-up included.
        "ratios": {
            "ours_over_cpython": (_ratio(outcomes["ours"], outcomes["cpython"],
                                         computed["ours"], computed["cpython"])
                                  if bench.kind == "program" else
                                  _ratio(outcomes["ours"], outcomes["cpython"])),
            "reference_over_ours": (_ratio(outcomes["reference"], outcomes["ours"],
                                           computed["reference"], computed["ours"])
                                    if bench.kind == "program" else
                                    _ratio(outcomes["reference"], outcomes["ours"])),
            "ours_over_cpython_whole": _ratio(outcomes["ours"], outcomes["cpython"]),
            "reference_over_ours_whole": _ratio(outcomes["reference"], outcomes["ours"]),
        },
    }
    if bench.look_off:
        row["look_off"] = bench.look_off
        row["steps"] = bench.size(s.quick)       # (turns of its loop: the cost a turn)
    if bench.durable:
        row["durable"] = True
    if "lines" in info:
        row["lines"] = info["lines"]
        row["lines_per_s"] = {i: (round(info["lines"] / impls[i]["median_s"])
                                  if impls[i]["median_s"] else None) for i in IMPLS}
    return row


def machine_info(python: str) -> dict:
    cpu = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info = {
        "platform": platform.platform(),
        "cpu_model": cpu or platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "python_executable": python,
    }
    try:
        # Benchmarks on a busy machine are noisy; the load says how busy it was.
        info["load_average_1m"] = round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        info["load_average_1m"] = None
    return info


def revision() -> dict:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit or None, "dirty": bool(dirty) if commit else None}


def find_reference(path: Optional[str]) -> tuple[Optional[str], Optional[str], str]:
    """(usable path or None, version or None, reason when unusable)."""
    # Children run in their own work directories, so a relative path would stop resolving.
    path = os.path.abspath(path or DEFAULT_REF)
    if not os.path.isfile(path):
        return None, None, f"reference interpreter not found at {path} (run `make ref` or set SENSE_REF)"
    if not os.access(path, os.X_OK):
        return None, None, f"reference interpreter at {path} is not executable"
    run = run_once([path, "--version"], timeout=60)
    if run.status != "ok":
        return None, None, f"reference interpreter at {path} does not run: {_first_line(run)}"
    return path, run.stdout.strip() or None, ""


# ---------------------------------------------------------------------------- output

def _secs(v: float) -> str:
    return f"{v:.3f}s" if v < 10 else f"{v:.2f}s"


def _ratio_text(v: Optional[float]) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}x" if v < 10 else f"{v:.1f}x"


def _cell(impl: dict, ref_missing: bool) -> str:
    st = impl["status"]
    if st == "ok":
        mb = impl["peak_rss_mb"]
        c = impl.get("compute_s")
        return (_secs(impl["median_s"]) + (f" ={_secs(c)}" if c is not None else "")
                + (f" {mb:6.1f} MB" if mb is not None else ""))
    if st == "n/a":
        if ref_missing or impl["reason"] == "":
            return "n/a"
        return "n/a: no twin" if impl["reason"] == "no CPython twin" else "n/a"
    if st == "skipped":
        return "skipped: " + impl["reason"].split(" (")[0]
    return st.upper()


def render_table(report: dict) -> str:
    m, st, ref = report["machine"], report["settings"], report["reference"]
    lines = [
        f"Sense benchmarks: {st['rounds']} round(s), {'--quick' if st['quick'] else 'full'} sizes;"
        f" median wall time of the whole process, =compute (minus that implementation's"
        f" start-up), and peak RSS",
        f"machine:   {m['platform']} | {m['cpu_model']} | {m['cores']} cores | "
        f"Python {m['python']} ({m['python_implementation']}) | load {m['load_average_1m']}",
        "reference: " + (f"{ref['version'] or 'sense'} at {ref['path']}" if ref["available"]
                         else f"n/a: {ref['reason']}"),
    ]
    startup = st.get("startup_s")
    if startup:
        lines.append("start-up (empty program, this run, median): " + ", ".join(
            f"{LABEL[i]} {_secs(startup[i])}" if startup.get(i) is not None else f"{LABEL[i]} n/a"
            for i in IMPLS) + "; ratios are of compute, (whole process) beside")
    lines.append("")
    header = ["benchmark", "size", "ours (sensevm)", "CPython", "reference",
              "ours/CPython", "(whole)", "ref/ours", "(whole)", "check"]
    body = []
    for row in report["benchmarks"]:
        check = row["check"]
        body.append([
            row["name"], row["size"],
            *(_cell(row["impls"][i], not ref["available"]) for i in IMPLS),
            _ratio_text(row["ratios"]["ours_over_cpython"]),
            _ratio_text(row["ratios"].get("ours_over_cpython_whole")),
            _ratio_text(row["ratios"]["reference_over_ours"]),
            _ratio_text(row["ratios"].get("reference_over_ours_whole")),
            f"!! {check} !!" if check in PROBLEMS else check,
        ])
    widths = [max(len(r[c]) for r in [header] + body) for c in range(len(header))]
    right = {5, 6, 7, 8}

    def fmt(cells):
        return "  ".join(c.rjust(w) if j in right else c.ljust(w)
                         for j, (c, w) in enumerate(zip(cells, widths))).rstrip()

    lines.append(fmt(header))
    lines.append("  ".join("-" * w for w in widths))
    lines += [fmt(r) for r in body]

    notes = []
    for row in report["benchmarks"]:
        if row.get("lines_per_s"):
            lps = row["lines_per_s"]
            parts = [f"{LABEL[i]} {lps[i]:,} lines/s" for i in IMPLS if lps.get(i)]
            notes.append(f"{row['name']}: {row['lines']:,} lines; "
                         + (", ".join(parts) or "no timings")
                         + " (ours: sensec build; CPython: py_compile; reference: sense run)")
        if row.get("look_off"):
            on = next((r for r in report["benchmarks"] if r["name"] == row["look_off"]), None)
            t_on = on and on["impls"]["ours"].get("median_s")
            t_off = row["impls"]["ours"].get("median_s")
            if t_on and t_off:
                text = (f"{row['look_off']}: provenance cost (ours with the second look on / off)"
                        f" = {t_on / t_off:.3f}, (on - off) / n = "
                        f"{(t_on - t_off) / row['steps'] * 1e6:.1f} us a turn")
                # The two rows run minutes apart; the reference runs the same program in both,
                # interleaved with ours, so its times say how much the machine itself drifted.
                r_on = on["impls"]["reference"].get("median_s")
                r_off = row["impls"]["reference"].get("median_s")
                if r_on and r_off:
                    text += (f"; normalised by the reference's time in each row = "
                             f"{(t_on / r_on) / (t_off / r_off):.3f}")
                notes.append(text)
        if row.get("durable") and row["impls"]["ours"].get("peak_rss_mb") is not None:
            notes.append(f"{row['name']}: peak RSS {row['impls']['ours']['peak_rss_mb']} MB "
                         f"writing a durable audit log ({row['size']}, 2 lifecycles per "
                         "iteration; target under 100 MiB)")
        if row["kind"] == "startup" and row["ratios"]["ours_over_cpython"] is not None:
            notes.append(f"{row['name']}: start-up ratio (sensevm run hello.snb / python3 -c pass)"
                         f" = {_ratio_text(row['ratios']['ours_over_cpython'])}")
        for i in IMPLS:
            impl = row["impls"][i]
            if impl["status"] == "ok" or (i == "reference" and not ref["available"]) \
                    or impl["reason"] == "no CPython twin":
                continue
            notes.append(f"{row['name']}: {LABEL[i]} {impl['status']}: {impl['reason']}")
        for i in IMPLS:
            if row["impls"][i].get("check_error"):
                notes.append(f"{row['name']}: {LABEL[i]} {row['impls'][i]['check_error']}")
    if notes:
        lines += ["", "notes:"] + [f"  {n}" for n in notes]
    spread = [_spread(row) for row in report["benchmarks"]]
    spread = [text for text in spread if text]
    if spread:
        lines += ["", "spread (whole process, fastest-slowest round; the medians above are "
                      "of these):"] + [f"  {text}" for text in spread]

    for row in report["benchmarks"]:
        if row["check"] == "MISMATCH":
            lines += ["", f"!! MISMATCH in {row['name']}: the implementations printed different"
                          f" results, so it was not timed further:"]
            for i in IMPLS:
                if row["impls"][i]["result"] is not None:
                    lines.append(f"     {LABEL[i]:<10} {' | '.join(row['impls'][i]['result'])}")
    return "\n".join(lines) + "\n"


def _spread(row: dict) -> str:
    """``NAME: ours A-B, CPython C-D, ...``: each implementation's fastest and slowest round,
    for the rows timed more than once."""
    parts = []
    for i in IMPLS:
        times = row["impls"][i].get("times_s") or []
        if row["impls"][i]["status"] == "ok" and len(times) > 1:
            parts.append(f"{LABEL[i]} {_secs(min(times)).strip()}-{_secs(max(times)).strip()}")
    return f"{row['name']}: " + ", ".join(parts) if parts else ""


def write_atomically(path: str, text: str) -> None:
    from sensevm.base.files import atomic_write
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_write(path, text.encode("utf-8"))


def measure_startup(s: Settings, progress: Callable[[str], None]) -> dict:
    """Each implementation's start-up in this run: the median time of the empty program
    (programs/empty.*), timed round by round like any benchmark."""
    progress(f"[start-up] {EMPTY.name}: each implementation's start-up, to subtract\n")
    plans, _ = prepare(EMPTY, s)
    outcomes = measure(EMPTY, plans, s, progress)
    return {i: (round(o.median(), 4) if o.median() is not None else None)
            for i, o in outcomes.items()}


def run_all(benches: list[Bench], s: Settings, progress: Callable[[str], None]) -> list[dict]:
    rows = []
    if any(b.kind == "program" for b in benches):
        s.startup = measure_startup(s, progress)
    for k, bench in enumerate(benches, 1):
        progress(f"[{k}/{len(benches)}] {bench.name} ({bench.size_label(s.quick)})\n")
        plans, info = prepare(bench, s)
        for i in IMPLS:
            if plans[i].state != "ready" and not (i == "reference" and s.ref is None):
                progress(f"    {LABEL[i]}: {plans[i].state}: {plans[i].reason}\n")
        outcomes = measure(bench, plans, s, progress)
        rows.append(row_for(bench, s, outcomes, info))
    return rows


def _names(only: tuple[str, ...]) -> list[Bench]:
    if not only:
        return [b for b in BENCHMARKS if not b.opt_in]
    wanted = [n.strip() for item in only for n in item.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in BY_NAME]
    if unknown:
        raise click.BadParameter(f"unknown benchmark(s) {', '.join(unknown)}; choose from "
                                 + ", ".join(BY_NAME), param_hint="--only")
    return [b for b in BENCHMARKS if b.name in wanted]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--rounds", type=click.IntRange(min=1), default=None,
              help="Timed runs per implementation per benchmark (default 5; 3 with --quick).")
@click.option("--quick", is_flag=True, help="CI-sized inputs: the whole run takes well under a minute.")
@click.option("--only", multiple=True, metavar="NAME",
              help="Run only this benchmark (repeatable, or comma-separated).")
@click.option("--ref", "ref", envvar="SENSE_REF", default=None, metavar="PATH",
              help="The reference interpreter's `sense` (default: $SENSE_REF, else .venv-ref/bin/sense).")
@click.option("--python", "python", default=sys.executable, show_default=True,
              help="The Python that runs sensec, sensevm and the CPython twins.")
@click.option("--out", "out", default=DEFAULT_OUT, type=click.Path(file_okay=False),
              help="Directory for latest.json and latest.svg (default benchmarks/results).")
@click.option("--timeout", type=float, default=600.0, show_default=True,
              help="Seconds before a single run is killed and reported as a timeout.")
@click.option("--list", "list_only", is_flag=True, help="List the benchmarks and exit.")
def main(rounds, quick, only, ref, python, out, timeout, list_only):
    """Time sensevm against CPython and the reference interpreter on benchmarks/programs."""
    benches = _names(only)
    if list_only:
        for b in (benches if only else BENCHMARKS):
            click.echo(f"{b.name:<19} {b.size_label(False):>12}  {b.what}"
                       + ("  (opt-in: --only)" if b.opt_in else ""))
        return
    rounds = rounds or (3 if quick else 5)
    if os.sep in python:
        python = os.path.abspath(python)
    ref_path, ref_version, ref_reason = find_reference(ref)
    started = datetime.datetime.now(datetime.timezone.utc)
    workdir = tempfile.mkdtemp(prefix="sense-bench-")
    runner = Runner(python)
    s = Settings(python=python, ref=ref_path, ref_reason=ref_reason, quick=quick,
                 rounds=rounds, timeout=timeout, workdir=workdir, runner=runner)
    _progress(f"benchmarking {len(benches)} program(s), {rounds} round(s) each"
              f"{' (--quick sizes)' if quick else ''}\n")
    if ref_path is None:
        _progress(f"note: {ref_reason}; its columns will show n/a\n")
    bytecode = precompile(python)
    try:
        rows = run_all(benches, s, _progress)
    finally:
        runner.close()
        shutil.rmtree(workdir, ignore_errors=True)
    finished = datetime.datetime.now(datetime.timezone.utc)
    problems = [f"{r['name']}: {r['check']}" for r in rows if r["check"] in PROBLEMS]
    report = {
        "schema": SCHEMA,
        "started": started.isoformat(timespec="seconds"),
        "finished": finished.isoformat(timespec="seconds"),
        "machine": machine_info(python),
        "revision": revision(),
        "settings": {"rounds": rounds, "quick": quick, "only": [b.name for b in benches],
                     "timeout_s": timeout, "python": python, "bytecode": bytecode,
                     "startup_s": s.startup,
                     # Peak RSS cannot read below the RSS of the process that forked the child.
                     "rss_method": "fork from a small helper, os.wait4" if runner.method == "helper"
                     else "os.wait4 (floor: the harness's own RSS)",
                     "rss_floor_mb": round(runner.floor_kb / 1024, 1) if runner.floor_kb else None},
        "reference": {"path": ref_path or (ref or DEFAULT_REF), "available": ref_path is not None,
                      "version": ref_version, "reason": ref_reason},
        "benchmarks": rows,
        "problems": problems,
    }
    json_path = os.path.join(out, "latest.json")
    svg_path = os.path.join(out, "latest.svg")
    write_atomically(json_path, json.dumps(report, indent=2) + "\n")
    m = report["machine"]
    write_atomically(svg_path, chart.render(
        rows, "Sense benchmarks: time ratios (log scale)",
        f"{'--quick' if quick else 'full'} sizes, median of {rounds}; {m['cpu_model']}, "
        f"{m['cores']} cores, Python {m['python']}; {started.date().isoformat()}"))
    click.echo(render_table(report), nl=False)
    _progress(f"wrote {json_path} and {svg_path}\n")
    if problems:
        _progress("!! problems: " + "; ".join(problems) + "\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
