"""The benchmark harness: a --quick end-to-end run, the JSON shape, and loud result mismatches."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# benchmarks/ is not an installed package; the repository root makes it importable.
sys.path.insert(0, ROOT)

from benchmarks import harness  # noqa: E402
from benchmarks.catalog import BENCHMARKS, PROGRAMS_DIR, sized  # noqa: E402
from benchmarks.generate import generate  # noqa: E402
from benchmarks.measure import Run  # noqa: E402

IMPL_KEYS = {"status", "reason", "command", "times_s", "median_s", "peak_rss_mb", "result",
             "check_error"}


def test_quick_run_without_reference_writes_agreeing_results(tmp_path):
    out = tmp_path / "results"
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("SENSE_REF", None)
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--rounds", "1", "--only", "fib,loops",
         "--ref", str(tmp_path / "no-such-sense"), "--out", str(out), "--timeout", "60"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    report = json.loads((out / "latest.json").read_text(encoding="utf-8"))
    assert report["schema"] == "sense-bench/1"
    assert {"platform", "cpu_model", "cores", "python"} <= set(report["machine"])
    assert report["settings"]["rounds"] == 1 and report["settings"]["quick"] is True
    assert report["reference"]["available"] is False
    assert "no-such-sense" in report["reference"]["reason"]
    assert report["problems"] == []
    assert set(report["settings"]["startup_s"]) == {"ours", "cpython", "reference"}
    assert report["settings"]["startup_s"]["ours"] > 0
    assert [row["name"] for row in report["benchmarks"]] == ["fib", "loops"]
    for row in report["benchmarks"]:
        assert set(row["impls"]) == {"ours", "cpython", "reference"}
        for impl in row["impls"].values():
            assert IMPL_KEYS <= set(impl)
        ours, cpy, ref = (row["impls"][k] for k in ("ours", "cpython", "reference"))
        assert ours["status"] == cpy["status"] == "ok", row
        assert ours["result"] == cpy["result"] and ours["result"][0].startswith("result:")
        assert len(ours["times_s"]) == 1 and ours["median_s"] > 0
        assert ref["status"] == "n/a" and ref["median_s"] is None
        assert row["check"] == "ok"
        assert row["ratios"]["ours_over_cpython_whole"] > 0
        assert row["impls"]["ours"]["compute_s"] is None or row["impls"]["ours"]["compute_s"] > 0
        assert row["ratios"]["reference_over_ours"] is None
    assert report["benchmarks"][0]["impls"]["ours"]["result"] == ["result: 610"]

    assert "machine:" in proc.stdout and "n/a" in proc.stdout and "fib" in proc.stdout
    assert (out / "latest.svg").read_text(encoding="utf-8").startswith("<svg")
    assert "round 1/1" in proc.stderr                    # progress goes to stderr


def _outcome(status="ok", result=None, seconds=1.0, compare=True):
    o = harness.Outcome(harness.Plan("x", compare=compare), status=status)
    if status == "ok":
        o.runs.append(Run("ok", seconds, 20_000, 0, "", ""))
        o.result = result
    return o


def test_mismatch_is_reported_loudly_and_not_compared():
    outcomes = {"ours": _outcome(result=["result: 1"]),
                "cpython": _outcome(result=["result: 2"], seconds=0.1),
                "reference": _outcome(result=["result: 1"], seconds=3.0)}
    bench = BENCHMARKS[0]
    s = harness.Settings(python=sys.executable, ref=None, ref_reason="", quick=True, rounds=1,
                         timeout=1, workdir="/nonexistent", runner=None)
    row = harness.row_for(bench, s, outcomes, {})
    assert row["check"] == "MISMATCH"
    assert row["ratios"]["ours_over_cpython"] is None           # different work: no ratio
    assert row["ratios"]["reference_over_ours"] == 3.0          # these two agree
    report = {"machine": harness.machine_info(sys.executable),
              "settings": {"rounds": 1, "quick": True},
              "reference": {"available": True, "version": "sense 0.20.0", "path": "sense",
                            "reason": ""},
              "benchmarks": [row]}
    table = harness.render_table(report)
    assert "!! MISMATCH !!" in table
    assert "result: 2" in table


def test_reference_only_and_skipped_programs_are_marked():
    outcomes = {"ours": _outcome(status="skipped"), "cpython": _outcome(status="n/a"),
                "reference": _outcome(result=["result: 5"])}
    outcomes["ours"].reason = "needs tools"
    assert harness._check(outcomes) == "reference only"
    row_cell = harness._cell({"status": "skipped", "reason": "needs tools (sensec: ...)"}, False)
    assert row_cell == "skipped: needs tools"


def test_generated_program_is_deterministic_and_exact():
    sense, python = generate(20_000)
    assert sense.count("\n") == python.count("\n") == 20_000
    assert generate(20_000) == (sense, python)
    assert sense.splitlines()[-1] == python.splitlines()[-1] == 'print("result:", total)'


def test_every_program_has_one_size_line():
    for bench in BENCHMARKS:
        for name in (bench.source, bench.twin):
            if name and bench.kind == "program":
                assert "N = 7\n" in sized(os.path.join(PROGRAMS_DIR, name), 7)


class _RefusingRunner:
    """Stands in for measure.Runner: every command fails the way sensec refuses a feature."""

    def run(self, cmd, **kwargs):
        return Run("error", 0.1, 1, 1, "", "p.sns:4:1: SenseSyntaxError: tools are not supported "
                                             "by this version of sensec yet\n")


def test_a_program_sensec_refuses_is_skipped_not_failed(tmp_path):
    bench = next(b for b in BENCHMARKS if b.needs == "tools")
    s = harness.Settings(python=sys.executable, ref=None, ref_reason="no reference", quick=True,
                         rounds=1, timeout=5, workdir=str(tmp_path), runner=_RefusingRunner())
    plans, _ = harness.prepare(bench, s)
    assert plans["ours"].state == "skipped"
    assert plans["ours"].reason.startswith("needs tools (sensec: tools are not supported")
    assert plans["cpython"].state == "n/a" and plans["reference"].state == "n/a"


class _CountingRunner:
    """Stands in for measure.Runner: records each command, succeeds with a result line."""

    def __init__(self):
        self.commands = []

    def run(self, cmd, **kwargs):
        self.commands.append(cmd)
        return Run("ok", 0.1, 20_000, 0, "result: 1\n", "")


def test_the_durable_log_memory_row_is_opt_in_one_round_and_ours_only(tmp_path):
    """lifecycle_1m (issue 5's memory target) runs only when named, once whatever --rounds
    says, with a fresh --audit-log each run, and reports ours' peak memory in the notes."""
    assert "lifecycle_1m" not in [b.name for b in harness._names(())]
    bench, = harness._names(("lifecycle_1m",))
    runner = _CountingRunner()
    s = harness.Settings(python=sys.executable, ref="/bin/false", ref_reason="", quick=True,
                         rounds=5, timeout=5, workdir=str(tmp_path), runner=runner)
    plans, info = harness.prepare(bench, s)
    ours = plans["ours"].cmd
    log = os.path.join(str(tmp_path), "lifecycle_1m", "audit.jsonl")
    assert ours[:4] == ["/bin/sh", "-c", 'rm -f -- "$0" && exec "$@"', log]
    assert ours[4:] == [sys.executable, "-m", "sensevm", "run", "--audit-log", log,
                        os.path.join(str(tmp_path), "lifecycle_1m", "lifecycle_1m.snb")]
    assert plans["reference"].state == "n/a" and plans["cpython"].state == "n/a"
    runner.commands.clear()
    outcomes = harness.measure(bench, plans, s, lambda text: None)
    assert runner.commands == [ours]                     # one round, ours only
    row = harness.row_for(bench, s, outcomes, info)
    report = {"machine": {"platform": "p", "cpu_model": "c", "cores": 2, "python": "3",
                          "python_implementation": "CPython", "load_average_1m": 0},
              "settings": {"rounds": 5, "quick": True},
              "reference": {"available": True, "version": "sense", "path": "/bin/false"},
              "benchmarks": [row]}
    assert "lifecycle_1m: peak RSS 19.5 MB writing a durable audit log" in \
        harness.render_table(report)


def test_the_extension_rows_run_ours_and_cpython_but_never_the_reference(tmp_path):
    """maps and string_methods use what the reference lacks (EXTENSIONS.md E1/E2): its column
    says why it is n/a, and CPython's twin checks ours."""
    for name in ("maps", "string_methods"):
        bench, = harness._names((name,))
        assert bench.twin and bench.extension
        runner = _CountingRunner()
        s = harness.Settings(python=sys.executable, ref="/bin/false", ref_reason="", quick=True,
                             rounds=1, timeout=5, workdir=str(tmp_path), runner=runner)
        plans, _ = harness.prepare(bench, s)
        assert plans["reference"].state == "n/a"
        assert plans["reference"].reason == f"the reference has no {bench.extension}"
        assert plans["ours"].state == plans["cpython"].state == "ready"
        runner.commands.clear()
        outcomes = harness.measure(bench, plans, s, lambda text: None)
        assert len(runner.commands) == 2 and not any("/bin/false" in c for c in runner.commands)
        assert harness.row_for(bench, s, outcomes, {})["check"] == "ok"


def test_the_headline_ratios_are_of_compute_and_the_whole_process_is_beside():
    """Each implementation's start-up (the empty program, timed in the same run) is taken off
    its times; a run no longer than its start-up has no compute ratio."""
    bench, = harness._names(("loops",))
    s = harness.Settings(python=sys.executable, ref=None, ref_reason="", quick=True, rounds=1,
                         timeout=1, workdir="/nonexistent", runner=None,
                         startup={"ours": 0.1, "cpython": 0.05, "reference": 0.3})
    outcomes = {"ours": _outcome(result=["result: 1"], seconds=2.1),
                "cpython": _outcome(result=["result: 1"], seconds=0.45),
                "reference": _outcome(result=["result: 1"], seconds=4.3)}
    for impl, o in outcomes.items():
        o.plan.impl = impl
    row = harness.row_for(bench, s, outcomes, {})
    assert row["impls"]["ours"]["compute_s"] == 2.0
    assert row["impls"]["cpython"]["compute_s"] == 0.4
    assert row["ratios"]["ours_over_cpython"] == 5.0                # (2.1 - 0.1) / (0.45 - 0.05)
    assert row["ratios"]["reference_over_ours"] == 2.0              # (4.3 - 0.3) / (2.1 - 0.1)
    assert row["ratios"]["ours_over_cpython_whole"] == round(2.1 / 0.45, 3)
    assert row["ratios"]["reference_over_ours_whole"] == round(4.3 / 2.1, 3)
    short = {"ours": _outcome(result=["result: 1"], seconds=0.09),
             "cpython": _outcome(result=["result: 1"], seconds=0.45),
             "reference": _outcome(result=["result: 1"], seconds=4.3)}
    for impl, o in short.items():
        o.plan.impl = impl
    row = harness.row_for(bench, s, short, {})
    assert row["impls"]["ours"]["compute_s"] is None
    assert row["ratios"]["ours_over_cpython"] is None
    assert row["ratios"]["ours_over_cpython_whole"] == 0.2
    report = {"machine": harness.machine_info(sys.executable),
              "settings": {"rounds": 1, "quick": True, "startup_s": s.startup},
              "reference": {"available": True, "version": "sense", "path": "sense", "reason": ""},
              "benchmarks": [harness.row_for(bench, s, outcomes, {})]}
    table = harness.render_table(report)
    assert "start-up (empty program, this run, median): ours 0.100s" in table
    assert "2.100s =2.000s" in table and "(whole)" in table
    assert "spread" not in table                    # one round: nothing to spread
    # More rounds: each implementation's fastest and slowest, under the table.
    for impl, o in outcomes.items():
        o.runs.append(Run("ok", {"ours": 2.5, "cpython": 0.4, "reference": 4.0}[impl],
                          20_000, 0, "", ""))
        o.runs.append(Run("ok", {"ours": 1.9, "cpython": 0.47, "reference": 4.4}[impl],
                          20_000, 0, "", ""))
    report["benchmarks"] = [harness.row_for(bench, s, outcomes, {})]
    table = harness.render_table(report)
    assert "spread (whole process, fastest-slowest round" in table
    assert "  loops: ours 1.900s-2.500s, CPython 0.400s-0.470s, reference 4.000s-4.400s" in table


def test_the_provenance_and_callback_rows():
    names = {b.name: b for b in BENCHMARKS}
    for name in ("provenance_literal", "provenance_pass", "provenance_flag", "provenance_fresh",
                 "provenance_content"):
        assert names[name].twin is None                 # n/a: no CPython twin
    # The reference has no trusted tools: the row of new verdicts is ours, on and off.
    assert names["provenance_fresh"].extension == "trusted tools"
    assert names["provenance_fresh_look_off"].look_off == "provenance_fresh"
    assert names["provenance_fresh_look_off"].full == names["provenance_fresh"].full
    # A page's text read for what it holds: the reference runs it too.
    assert names["provenance_content"].extension is None
    assert names["provenance_content_look_off"].look_off == "provenance_content"
    assert names["provenance_content_look_off"].full == names["provenance_content"].full
    assert names["callbacks"].twin == "callbacks.py" and names["callbacks"].extension


def test_the_cost_of_the_second_look_a_turn_is_noted():
    """A row run with the second look off notes on / off against the row with it on, and
    what one turn of the loop costs more with it: (on - off) / n."""
    report = {"machine": harness.machine_info(sys.executable),
              "settings": {"rounds": 1, "quick": False,
                           "startup_s": {"ours": 0.03, "cpython": 0.01, "reference": 0.1}},
              "reference": {"available": False, "version": "", "path": "", "reason": "none"},
              "benchmarks": []}
    s = harness.Settings(python=sys.executable, ref=None, ref_reason="", quick=False, rounds=1,
                         timeout=1, workdir="/nonexistent", runner=None,
                         startup={"ours": 0.03, "cpython": 0.01, "reference": 0.1})
    for name, seconds in (("provenance_fresh", 0.93), ("provenance_fresh_look_off", 0.33)):
        bench, = harness._names((name,))
        outcomes = {"ours": _outcome(result=["result: 1"], seconds=seconds),
                    "cpython": harness.Outcome(harness.Plan("cpython"), status="n/a"),
                    "reference": harness.Outcome(harness.Plan("reference"), status="n/a")}
        report["benchmarks"].append(harness.row_for(bench, s, outcomes, {}))
    table = harness.render_table(report)
    assert ("provenance_fresh: provenance cost (ours with the second look on / off) = 2.818, "
            "(on - off) / n = 20.0 us a turn") in table          # 0.6 s over 30,000 turns


def test_callgrind_sizes_make_a_loop_again_in_both_runs_or_in_neither():
    """benchmarks/callgrind.py's compute is count(2S) - count(S): what both runs do once
    cancels. Code is made again for a loop after tier2.HOT_TURNS turns: the loop rows' main
    loops run N turns, so their S is at least that (both runs pay for it), and the agent rows'
    2S at most that (neither does); fib has no loop."""
    from benchmarks import callgrind
    from sensevm.runtime.tier2 import HOT_TURNS
    agents = {"lifecycle", "provenance_pass", "provenance_flag", "provenance_literal",
              "provenance_fresh", "provenance_content", "tool_calls"}
    assert set(callgrind.STEPS) <= {b.name for b in BENCHMARKS}
    for name, steps in callgrind.STEPS.items():
        if name in agents:
            assert 2 * steps <= HOT_TURNS, name
        elif name != "fib":
            assert steps >= HOT_TURNS, name


def test_check_time_counts_every_check_of_each_stage(tmp_path):
    """benchmarks/check_time.py times the second look's check alone: one timed check per turn
    at verify and one at commit, from a run of the program itself, less the timer's own cost;
    and it prints a line per program and checkout."""
    from benchmarks import check_time
    built = check_time.build("provenance_fresh", 30, ROOT, sys.executable, str(tmp_path))
    got = check_time.run_once(built, ROOT, sys.executable)
    assert {stage: checks for stage, (checks, _, _) in got["stages"].items()} == \
        {"verify": 30, "commit": 30}
    assert all(seconds > 0 for _, seconds, _ in got["stages"].values())
    # (Each check found something: its evaluation and its record, two timed calls.)
    assert {stage: calls for stage, (_, _, calls) in got["stages"].items()} == \
        {"verify": 60, "commit": 60}
    assert got["timer"] > 0
    # A page's text with nothing in it to vouch for is read at verify, and commit does not
    # look again (it would find nothing either).
    built = check_time.build("provenance_content", 30, ROOT, sys.executable, str(tmp_path))
    got = check_time.run_once(built, ROOT, sys.executable)
    assert {stage: checks for stage, (checks, _, _) in got["stages"].items()} == {"verify": 30}
    proc = subprocess.run([sys.executable, "-m", "benchmarks.check_time", "--turns", "20",
                           "--runs", "1", "provenance_pass"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.splitlines()[-1]
    assert line.startswith("provenance_pass") and "verify" in line and "commit" in line
