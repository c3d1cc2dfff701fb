"""Limits that threads, the network and single builtins used to get around (issue 20): each
hostile program below ends in a clean Sense error, on both tiers, instead of running on.

Recursion through async tools and agents meets --max-depth; async bodies running at once meet
--max-workers; a model server or MCP server that answers slowly meets its own timeout and
--timeout; every builtin that makes a String or an Array meets --max-string / --max-array;
`for c in s` walks a String without copying it; an Int <-> String conversion too large for the
time given is refused before it starts.
"""

from __future__ import annotations

import time

import pytest

from test_limits import run_vm, sensevm, write

TIERS = ("1", "2")


# ----------------------------------------------------------------------------- async depth

ASYNC_DOWN = ("async tool down(n: Int) returns Int:\n    if n == 0:\n        return 0\n"
              "    return await(down(n - 1)) + 1\n")


@pytest.mark.parametrize("tier", TIERS)
def test_recursion_through_async_tools_meets_the_depth_limit(tmp_path, tier):
    # Each level's body runs on a thread of its own; its depth goes on from its caller's.
    out, err, _ = run_vm(ASYNC_DOWN + "print(await(down(200)))\n", tmp_path, tier, max_depth=50)
    assert out == ""
    assert err.kind == "SenseRuntimeError" and err.message == "maximum recursion depth exceeded"
    out, err, _ = run_vm(ASYNC_DOWN + "print(await(down(40)))\n", tmp_path, tier, max_depth=50)
    assert (out, err) == ("40\n", None)


@pytest.mark.parametrize("tier", TIERS)
def test_recursion_through_async_agents_meets_the_depth_limit(tmp_path, tier):
    source = ("def spawn(n):\n    async agent a:\n        if n > 0:\n            spawn(n - 1)\n"
              "    start(a)\n    await(a)\n    return n\nprint(spawn(N))\n")
    out, err, _ = run_vm(source.replace("N", "200"), tmp_path, tier, max_depth=50)
    assert err.kind == "SenseRuntimeError" and err.message == "maximum recursion depth exceeded"
    assert err.pos.line == 5                       # the start() that would go too deep
    out, err, _ = run_vm(source.replace("N", "10"), tmp_path, tier, max_depth=50)
    assert (out, err) == ("10\n", None)


def test_the_depth_error_of_an_async_body_reaches_the_caller_test_blocks_catch_it(tmp_path):
    # Still the reference's recursion error: catchable, and the program goes on.
    source = ASYNC_DOWN + 'test "deep":\n    print(await(down(100)))\nprint("after")\n'
    out, err, vm = run_vm(source, tmp_path, "1", max_depth=30)
    assert (out, err) == ("after\n", None)
    assert [t.passed for t in vm.tests] == [False]


def test_cli_async_recursion_exits_1_with_the_recursion_error(tmp_path):
    src = write(tmp_path, "deep.sns", ASYNC_DOWN + "print(await(down(100000)))\n")
    started = time.monotonic()
    proc = sensevm(["run", src, "--max-depth", "100"], tmp_path, timeout=120)
    assert time.monotonic() - started < 60
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith(f"{src}:4:22: SenseRuntimeError: maximum recursion depth "
                                  "exceeded\n")
    assert "Traceback" not in proc.stderr


# ----------------------------------------------------------------------------- live workers

# Each body waits until the program lets it go, so every one started is running at once.
HOLD = ("agent gate:\n    pause()\n"
        "async tool hold(n: Int) returns Int:\n    while gate.status != \"completed\":\n"
        "        x = 1\n    return n\n")


@pytest.mark.parametrize("tier", TIERS)
def test_async_calls_running_at_once_meet_the_worker_limit(tmp_path, tier):
    source = HOLD + ("start(gate)\nfutures = []\nfor i in range(50):\n    push(futures, hold(i))\n"
                     'print("not reached")\n')
    out, err, vm = run_vm(source, tmp_path, tier, max_workers=8)
    assert out == ""
    assert err.kind == "SenseLimitError" and err.limit == "workers"
    assert err.message == "worker limit exceeded (8 async tools and agents running at once)"
    assert err.pos.line == 10                      # the call of the ninth
    vm.agents[0].status = "completed"              # let the eight go


@pytest.mark.parametrize("tier", TIERS)
def test_workers_that_have_finished_do_not_count(tmp_path, tier):
    source = HOLD + ("start(gate)\nresume(gate)\ntotal = 0\nfor i in range(30):\n"
                     "    total = total + await(hold(i))\nprint(total)\n")
    out, err, _ = run_vm(source, tmp_path, tier, max_workers=2)
    assert (out, err) == ("435\n", None)


@pytest.mark.parametrize("tier", TIERS)
def test_async_agents_count_as_workers(tmp_path, tier):
    source = ("async agent a:\n    pause()\nasync agent b:\n    x = 1\nstart(a)\nawait(a)\n"
              "PROGRAM\nprint(await(b).status)\n")
    out, err, vm = run_vm(source.replace("PROGRAM", "start(b)"), tmp_path, tier, max_workers=1)
    assert err.kind == "SenseLimitError" and err.limit == "workers" and err.pos.line == 7
    vm.agents[0].status = "running"                # (let a's thread end)
    with vm.agents[0].cond:
        vm.agents[0].cond.notify_all()
    out, err, vm = run_vm(source.replace("PROGRAM", "resume(a)\nawait(a)\nstart(b)"), tmp_path,
                          tier, max_workers=1)
    assert (out, err) == ("completed\n", None)


def test_an_async_agent_refused_for_depth_has_not_started(tmp_path):
    source = ("def f(n):\n    if n > 0:\n        return f(n - 1)\n    async agent a:\n"
              "        x = 1\n    test \"deep\":\n        start(a)\n    print(a.status)\n"
              "    return 0\nf(40)\n")
    out, err, _ = run_vm(source, tmp_path, "1", max_depth=42)
    assert (out, err) == ("created\n", None)


def test_cli_worker_limit_reached_inside_a_worker_ends_the_run_with_exit_4(tmp_path):
    # The limit is met on a worker thread, two levels down; its error surfaces at the awaits
    # up the chain and the run ends cleanly instead of waiting on the other workers.
    source = ("async tool fan(n: Int) returns Int:\n    if n == 0:\n        return 0\n"
              "    a = fan(n - 1)\n    b = fan(n - 1)\n    return await(a) + await(b)\n"
              "print(await(fan(12)))\n")
    src = write(tmp_path, "fan.sns", source)
    proc = sensevm(["run", src, "--max-workers", "20"], tmp_path, timeout=120)
    assert proc.returncode == 4 and proc.stdout == ""
    assert "SenseLimitError: worker limit exceeded (20 async tools and agents running at once)" \
        in proc.stderr.splitlines()[0]
    assert "Traceback" not in proc.stderr
    proc = sensevm(["run", src], tmp_path, env={"SENSE_MAX_WORKERS": "20"}, timeout=120)
    assert proc.returncode == 4
    proc = sensevm(["run", src, "--max-workers", "0"], tmp_path)
    assert proc.returncode == 2 and "must be at least 1" in proc.stderr


# ----------------------------------------------------------------------------- for c in s

@pytest.mark.parametrize("tier", TIERS)
def test_for_over_a_string_copies_nothing(tmp_path, tier):
    # 4,194,304 characters; a list of them would be 32 MB of references.
    import tracemalloc
    source = ('s = "ab"\nfor i in range(21):\n    s = s + s\nn = 0\nfor c in s:\n    n = n + 1\n'
              '    if n == 3:\n        print(n, c)\n        break\n')
    tracemalloc.start()
    try:
        out, err, _ = run_vm(source, tmp_path, tier)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (out, err) == ("3 a\n", None)
    assert peak < 12_000_000                 # the String itself, twice over while doubling


@pytest.mark.parametrize("tier", TIERS)
def test_for_over_a_string_prints_what_it_printed(tmp_path, tier):
    source = ('out = ""\nfor c in "héllo, wörld":\n    if c != "o":\n        out = c + out\n'
              'print(out)\nfor c in "":\n    print("never")\nfor x in ["a", "bc"]:\n'
              "    for c in x:\n        print(c)\n")
    out, err, _ = run_vm(source, tmp_path, tier)
    assert (out, err) == ("dlröw ,lléh\na\nb\nc\n", None)


def test_a_labelled_strings_characters_keep_their_spans_origins():
    from sensevm import provenance as PV
    from sensevm.values import StringIterator
    page, user = frozenset({PV.untrusted("page")}), frozenset({"user"})
    text = PV.LStr("abcdef", ((0, 2, page), (2, 3, PV.EMPTY), (3, 6, user)))
    it = StringIterator(text)
    chars = [it.items[i] for i in range(len(it.items))]
    assert "".join(chars) == "abcdef"
    assert [PV.origins_of(c) for c in chars] == [page, page, PV.EMPTY, user, user, user]
    assert type(chars[2]) is str
    # Read out of order too (a restored iterator starts anywhere).
    assert [PV.origins_of(it.items[i]) for i in (5, 0, 3, 1)] == [user, page, user, page]


def test_an_agent_paused_in_a_loop_over_a_string_is_saved_and_resumed(tmp_path):
    import os
    import subprocess
    import sys
    from conftest import ROOT
    (tmp_path / "spell.sns").write_text(
        'agent speller:\n    for c in "abc":\n        print("letter", c)\n'
        '        pause("next?")\n    print("done")\nstart(speller)\n')
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")

    def sensevm_cli(*args):
        return subprocess.run([sys.executable, "-m", "sensevm", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
    outs = [sensevm_cli("run", "spell.sns", "--state-dir", "state")]
    for _ in range(3):
        outs.append(sensevm_cli("resume", "state", "speller", "go"))
    assert [p.returncode for p in outs] == [0, 0, 0, 0], [p.stderr for p in outs]
    assert "".join(p.stdout for p in outs) == "letter a\nletter b\nletter c\ndone\n"
