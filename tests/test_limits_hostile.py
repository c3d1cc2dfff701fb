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


# ----------------------------------------------------------------------------- sizes

# 10 ** 127, an Int of 128 digits.
BIG = "x = 1\ni = 0\nwhile i < 127:\n    x = x * 10\n    i = i + 1\n"


@pytest.mark.parametrize("tier", TIERS)
def test_str_of_an_int_meets_the_string_limit(tmp_path, tier):
    out, err, _ = run_vm(BIG + "print(len(str(x)))\n", tmp_path, tier, max_string=200)
    assert (out, err) == ("128\n", None)
    for use in ("s = str(x)\n", "print(x)\n", "a = [x]\nprint(a)\n"):
        out, err, _ = run_vm(BIG + use, tmp_path, tier, max_string=100)
        assert err.kind == "SenseLimitError" and err.limit == "string", use
        assert err.message == ("string size limit exceeded (a String of 128 characters; the "
                               "limit is 100)"), use
    out, err, _ = run_vm(BIG + "print(str(-x))\n", tmp_path, tier, max_string=128)
    assert "a String of 129 characters" in err.message
    out, err, _ = run_vm(BIG + "print(str(x))\n", tmp_path, tier, max_string=128)
    assert err is None and len(out) == 129


@pytest.mark.parametrize("tier", TIERS)
def test_a_huge_int_is_refused_before_its_text_is_made(tmp_path, tier):
    # 10 ** 65536: its text would be 65,537 characters; decided from its bits alone.
    source = "x = 10\nfor i in range(16):\n    x = x * x\nprint(str(x))\n"
    out, err, _ = run_vm(source, tmp_path, tier, max_string=1000)
    assert err.kind == "SenseLimitError" and err.limit == "string"
    assert err.message == ("string size limit exceeded (a String of at least 65536 characters; "
                           "the limit is 1000)")


def test_range_of_a_huge_int_is_refused_without_writing_out_its_length(tmp_path):
    # 10 ** 16384: its digits would be quick enough here, but an error message has no use for
    # a count of more than FREE_DIGITS digits.
    source = "x = 10\ni = 0\nwhile i < 14:\n    x = x * x\n    i = i + 1\na = range(x)\n"
    _, err, _ = run_vm(source, tmp_path, "1", max_array=10)
    assert err.kind == "SenseLimitError" and err.limit == "array"
    assert err.message == ("array size limit exceeded (an Array of at least 10**16383 elements; "
                           "the limit is 10)")


@pytest.mark.parametrize("tier", TIERS)
def test_audit_log_meets_the_array_limit(tmp_path, tier):
    source = ("reversible action a():\n    x = 1\nrollback:\n    x = 0\n"
              "i = 0\nwhile i < 4:\n    p = a()\n    i = i + 1\nprint(len(audit_log()))\n")
    out, err, _ = run_vm(source, tmp_path, tier, max_array=4)
    assert (out, err) == ("4\n", None)
    out, err, _ = run_vm(source.replace("i < 4", "i < 5"), tmp_path, tier, max_array=4)
    assert err.kind == "SenseLimitError" and err.limit == "array"
    assert err.message == "array size limit exceeded (an Array of 5 elements; the limit is 4)"
    assert err.pos.line == 9


@pytest.mark.parametrize("tier", TIERS)
def test_memory_keys_meet_the_array_limit(tmp_path, tier):
    source = ('memory notes: "scratch"\ni = 0\nwhile i < 6:\n    notes.remember("k" + str(i), i)\n'
              "    i = i + 1\nprint(len(notes.keys()))\n")
    out, err, _ = run_vm(source, tmp_path, tier, max_array=6)
    assert (out, err) == ("6\n", None)
    out, err, _ = run_vm(source, tmp_path, tier, max_array=5)
    assert err.kind == "SenseLimitError" and err.limit == "array" and err.pos.line == 6


@pytest.mark.parametrize("tier", TIERS)
def test_an_array_literal_meets_the_array_limit(tmp_path, tier):
    source = "def f(n):\n    return [n, n, n, n]\nt = 0\ni = 0\nwhile i < 50:\n" \
             "    t = t + len(f(i))\n    i = i + 1\nprint(t)\n"
    out, err, _ = run_vm(source, tmp_path, tier, max_array=4)
    assert (out, err) == ("200\n", None)
    out, err, _ = run_vm(source, tmp_path, tier, max_array=3)
    assert err.kind == "SenseLimitError" and err.limit == "array" and err.pos.line == 2


@pytest.mark.parametrize("tier", TIERS)
def test_strings_and_arrays_from_python_meet_the_limits(tmp_path, tier):
    head = 'policy:\n    allow python.import\nfrom python "json" import loads\n'
    _, err, _ = run_vm(head + 'a = loads("[1, 2, 3, 4, 5, 6]")\n', tmp_path, tier, max_array=5)
    assert err.kind == "SenseLimitError" and err.limit == "array" and err.pos.line == 4
    _, err, _ = run_vm(head + 'a = loads("[[\\"' + "y" * 30 + '\\"]]")\n', tmp_path, tier,
                       max_string=20)
    assert err.kind == "SenseLimitError" and err.limit == "string"
    out, err, _ = run_vm(head + 'print(loads("[1, 2, 3, 4, 5]"))\n', tmp_path, tier, max_array=5)
    assert (out, err) == ("[1, 2, 3, 4, 5]\n", None)


@pytest.mark.parametrize("tier", TIERS)
def test_a_model_answer_meets_the_string_limit(tmp_path, tier):
    source = ('model m = inference("mock", response_template: "{prompt}{prompt}{prompt}")\n'
              "set delegation = m\nprint(len(ask(PROMPT).value))\n")
    out, err, _ = run_vm(source.replace("PROMPT", '"' + "q" * 30 + '"'), tmp_path, tier,
                         max_string=90)
    assert (out, err) == ("90\n", None)
    _, err, _ = run_vm(source.replace("PROMPT", '"' + "q" * 31 + '"'), tmp_path, tier,
                       max_string=90)
    assert err.kind == "SenseLimitError" and err.limit == "string" and err.pos.line == 3


def test_a_line_of_input_meets_the_string_limit_and_is_not_read_whole(tmp_path):
    source = 'a = ask_human("name?")\nprint(len(a))\nb = ask_human("again?")\n'
    out, err, _ = run_vm(source, tmp_path, "1", stdin="x" * 50 + "\n" + "y" * 51 + "\nz\n",
                         max_string=50)
    assert out == "name?\n> 50\nagain?\n> "
    assert err.kind == "SenseLimitError" and err.limit == "string" and err.pos.line == 3
    assert err.message == "string size limit exceeded (a String of 51 characters; the limit is 50)"


def test_the_text_of_an_array_that_is_too_long_is_never_held_whole(tmp_path):
    # A thousand references to one String of 10,000 characters: its text would be 10 MB.
    import tracemalloc
    source = ('s = "x"\nfor i in range(13):\n    s = s + s\na = []\nfor i in range(1000):\n'
              "    push(a, s)\nprint(a)\n")
    tracemalloc.start()
    try:
        _, err, _ = run_vm(source, tmp_path, "1", max_string=100_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert err.kind == "SenseLimitError" and err.message.startswith(
        "string size limit exceeded (a String of 8194000 characters; the limit is 100000)")
    assert peak < 2_000_000


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
    # Short Strings (copied) and one walked in place, labels aside.
    source = ('out = ""\nfor c in "héllo, wörld":\n    if c != "o":\n        out = c + out\n'
              'print(out)\nfor c in "":\n    print("never")\nfor x in ["a", "bc"]:\n'
              "    for c in x:\n        print(c)\n"
              's = "hé"\nfor i in range(17):\n    s = s + s\nn = 0\nlast = ""\nfor c in s:\n'
              '    if c == "é":\n        n = n + 1\n    last = c\nprint(n, last)\n')
    out, err, _ = run_vm(source, tmp_path, tier)
    assert (out, err) == ("dlröw ,lléh\na\nb\nc\n131072 é\n", None)


def test_a_labelled_strings_characters_keep_their_spans_origins():
    from sensevm.guard import provenance as PV
    from sensevm.runtime.values import StringIterator
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
    # Long enough to be walked in place (values.COPIED_CHARS): the saved iterator is that.
    (tmp_path / "spell.sns").write_text(
        'agent speller:\n    s = "abc"\n    for i in range(16):\n        s = s + s\n'
        '    n = 0\n    for c in s:\n        print("letter", c)\n        n = n + 1\n'
        '        if n == 3:\n            break\n        pause("next?")\n'
        '    print("done")\nstart(speller)\n')
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")

    def sensevm_cli(*args):
        return subprocess.run([sys.executable, "-m", "sensevm", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
    outs = [sensevm_cli("run", "spell.sns", "--state-dir", "state")]
    saved = (tmp_path / "state" / "speller.json").read_text()
    for _ in range(2):
        outs.append(sensevm_cli("resume", "state", "speller", "go"))
    assert [p.returncode for p in outs] == [0, 0, 0], [p.stderr for p in outs]
    assert "".join(p.stdout for p in outs) == "letter a\nletter b\nletter c\ndone\n"
    assert '"str_iter"' in saved and len(saved) < 600_000      # (the String twice, no list)


# ----------------------------------------------------------------------------- conversions

# A String of 4,194,304 digits, made quickly by doubling.
DIGITS = 's = "7"\nfor i in range(22):\n    s = s + s\n'
# An Int of 1,048,577 digits (10 ** 2 ** 20), made by squaring in well under a second.
HUGE = "x = 10\nfor i in range(20):\n    x = x * x\n"


@pytest.mark.parametrize("tier", TIERS)
def test_int_of_millions_of_digits_is_refused_before_it_starts(tmp_path, tier):
    started = time.monotonic()
    _, err, _ = run_vm(DIGITS + "n = int(s)\n", tmp_path, tier, timeout=2.0)
    assert time.monotonic() - started < 1.5          # (it would take minutes)
    assert err.kind == "SenseLimitError" and err.limit == "timeout" and err.pos.line == 4
    assert err.message.startswith("time limit exceeded (2 seconds): int() of a String of "
                                  "4194304 digits would take about ")
    # Without --timeout: a fixed limit on digits.
    _, err, _ = run_vm(DIGITS + "n = int(s)\n", tmp_path, tier)
    assert err.kind == "SenseLimitError" and err.limit == "digits"
    assert err.message == ("conversion size limit exceeded (int() of a String of 4194304 "
                           "digits; without --timeout the limit is 1000000 digits)")


@pytest.mark.parametrize("tier", TIERS)
def test_str_of_an_int_of_a_million_digits_is_refused_before_it_starts(tmp_path, tier):
    started = time.monotonic()
    _, err, _ = run_vm(HUGE + "t = str(x)\n", tmp_path, tier, timeout=3.0)
    assert time.monotonic() - started < 2.5
    assert err.kind == "SenseLimitError" and err.limit == "timeout" and err.pos.line == 4
    assert "str() of an Int of 1048576 digits would take about" in err.message
    _, err, _ = run_vm(HUGE + "print(x)\n", tmp_path, tier)
    assert err.kind == "SenseLimitError" and err.limit == "digits"


@pytest.mark.parametrize("tier", TIERS)
def test_conversions_that_fit_still_convert(tmp_path, tier):
    source = ('s = "12345"\nfor i in range(11):\n    s = s + s\nn = int(s)\nt = str(n)\n'
              'print(len(t), t == s, int(" -1_000 "), int("x" + s) == 0)\n')
    out, err, _ = run_vm(source, tmp_path, tier, timeout=60.0)
    assert err is not None and err.message.startswith("cannot convert 'x1234512345")
    out, err, _ = run_vm(source.replace(', int("x" + s) == 0', ""), tmp_path, tier, timeout=60.0)
    assert (out, err) == ("10240 true -1000\n", None)


def test_cli_int_of_millions_of_digits_exits_4(tmp_path):
    src = write(tmp_path, "digits.sns", DIGITS + "n = int(s)\nprint(n)\n")
    started = time.monotonic()
    proc = sensevm(["run", src, "--timeout", "2"], tmp_path, timeout=120)
    assert time.monotonic() - started < 30
    assert proc.returncode == 4
    assert proc.stderr.startswith(f"{src}:4:8: SenseLimitError: time limit exceeded (2 seconds): "
                                  "int() of a String of 4194304 digits would take about ")


# ----------------------------------------------------------------------------- the network

class DripServer:
    """An HTTP server on 127.0.0.1 that reads a request, then sends its reply one byte every
    ``interval`` seconds: from the status line on (``headers``), or after the headers."""

    def __init__(self, body: bytes, interval: float = 0.5, headers: bool = False):
        import socket
        import threading
        self.body = body
        self.interval = interval
        self.drip_headers = headers
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        import threading
        while not self.closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._reply, args=(conn,), daemon=True).start()

    def _reply(self, conn):
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, rest = data.partition(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            while len(rest) < length:
                rest += conn.recv(65536)
            head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(self.body))
            if not self.drip_headers:
                conn.sendall(head)
            for byte in (head if self.drip_headers else b"") + self.body:
                if self.closed.wait(self.interval):
                    return
                conn.sendall(bytes([byte]))
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.closed.set()
        self.sock.close()


@pytest.fixture
def drip():
    servers = []

    def make(*args, **kwargs):
        servers.append(DripServer(*args, **kwargs))
        return servers[-1]
    yield make
    for s in servers:
        s.close()


ANSWER = b'{"choices": [{"message": {"role": "assistant", "content": "eventually"}}]}'


def model(url, extra=""):
    return (f'model gpt = inference("openai", "m", base_url: "{url}/v1"{extra})\n'
            "set delegation = gpt\n")


@pytest.mark.parametrize("headers", [False, True], ids=["body", "headers"])
def test_a_dripping_model_server_meets_the_models_timeout(tmp_path, drip, headers):
    server = drip(ANSWER, headers=headers)
    started = time.monotonic()
    out, err, _ = run_vm(model(server.url, ", timeout: 1") + 'print(ask("x"))\n', tmp_path, "1")
    assert time.monotonic() - started < 10            # the drip would take 37 s or more
    assert err.kind == "SenseRuntimeError"
    assert err.message == (f"model 'gpt' failed: no reply from {server.url}/v1/chat/completions "
                           "within 1s")


@pytest.mark.parametrize("tier", TIERS)
def test_a_dripping_model_server_meets_the_runs_timeout(tmp_path, drip, tier):
    server = drip(ANSWER)
    started = time.monotonic()
    out, err, _ = run_vm(model(server.url) + 'print("asking")\nprint(ask("x"))\n', tmp_path,
                         tier, timeout=1.0)
    assert time.monotonic() - started < 10
    assert out == "asking\n"
    assert err.kind == "SenseLimitError" and err.limit == "timeout" and err.pos.line == 4
    assert err.message == ("time limit exceeded (1 second) waiting for a reply from "
                           f"{server.url}/v1/chat/completions")


def test_a_dripping_model_server_meets_the_runs_timeout_on_a_worker_thread(tmp_path, drip):
    # The program, waiting at await, stops at once; no alarm reaches the worker thread, whose
    # request ends at the same deadline instead of when the drip would.
    import threading
    server = drip(ANSWER)
    started = time.monotonic()
    out, err, _ = run_vm(model(server.url) + "async tool t() returns String:\n"
                         '    return ask("x").value\nprint(await(t()))\n', tmp_path, "1",
                         timeout=1.0)
    assert time.monotonic() - started < 10
    assert err.kind == "SenseLimitError" and err.limit == "timeout"
    while any(t.name == "sense-tool-t" for t in threading.enumerate()):
        assert time.monotonic() - started < 10
        time.sleep(0.05)


def test_a_model_reply_larger_than_the_string_limit_allows_is_not_read_whole(tmp_path, drip):
    body = b'{"choices": [{"message": {"content": "' + b"z" * 1_200_000 + b'"}}]}'
    server = drip(body, interval=0)
    _, err, _ = run_vm(model(server.url) + 'print(ask("x"))\n', tmp_path, "1", max_string=10)
    assert err.kind == "SenseLimitError" and err.limit == "string"
    assert err.message == (f"string size limit exceeded (a reply of more than 1048696 bytes "
                           f"from {server.url}/v1/chat/completions; the limit is 10 characters)")


def test_cli_a_dripping_model_server_exits_4_naming_the_server(tmp_path, drip):
    server = drip(ANSWER)
    src = write(tmp_path, "m.sns", model(server.url) + 'print(ask("x"))\n')
    started = time.monotonic()
    proc = sensevm(["run", src, "--timeout", "1.5"], tmp_path, timeout=120)
    assert time.monotonic() - started < 30
    assert proc.returncode == 4
    assert proc.stderr.startswith(f"{src}:3:10: SenseLimitError: time limit exceeded "
                                  f"(1.5 seconds) waiting for a reply from {server.url}/v1/")


# ----------------------------------------------------------------------------- MCP

def _mcp():
    from test_mcp import CONNECT, HEAD, PY, calls, needs_mcp
    return CONNECT, HEAD, PY, calls, needs_mcp


CONNECT, MCP_HEAD, PY, calls, needs_mcp = _mcp()
ALLOW_MCP = "policy: allow mcp.connect\n"      # starting a server needs an explicit allow


@needs_mcp
def test_an_mcp_server_that_never_answers_meets_the_runs_timeout(tmp_path):
    # It never even completes the handshake (connect_mcp waits 30 s at least by itself).
    import glob
    source = (f'policy: allow mcp.connect\nprint("connecting")\n'
              f's = connect_mcp("mute", "{PY}", ["-c", '
              f'"import time; time.sleep(600)", "{tmp_path}"])\nprint("connected")\n')
    started = time.monotonic()
    out, err, vm = run_vm(source, tmp_path, "1", timeout=1.0)
    assert time.monotonic() - started < 15
    assert out == "connecting\n"
    assert err.kind == "SenseLimitError" and err.limit == "timeout" and err.pos.line == 3
    assert err.message == "time limit exceeded (1 second) waiting for MCP server 'mute'"
    assert [r.event for r in vm.audit.records if r.kind == "mcp"] == ["failed"]

    def running():          # the server process (its command line names tmp_path)
        found = []
        for name in glob.glob("/proc/[0-9]*/cmdline"):
            try:
                with open(name, "rb") as f:
                    if str(tmp_path).encode() in f.read():
                        found.append(name)
            except OSError:
                pass
        return found
    while running():
        assert time.monotonic() - started < 20, "the server was left running"
        time.sleep(0.1)


@needs_mcp
@pytest.mark.parametrize("tier", TIERS)
def test_a_slow_mcp_tool_meets_the_runs_timeout_and_is_not_told_to_the_model(tmp_path, tier):
    import json
    (tmp_path / "s.json").write_text(json.dumps(
        [calls(("demo.slow", {"seconds": 120})), {"text": "the model went on"}]))
    source = (ALLOW_MCP + MCP_HEAD + f"s = {CONNECT})\n"
              + 'print(ask_with_tools("x", s.tools).value)\n')
    started = time.monotonic()
    out, err, vm = run_vm(source, tmp_path, tier, timeout=8.0)
    assert time.monotonic() - started < 30           # (the connection's own timeout is 30 s)
    assert out == ""
    assert err.kind == "SenseLimitError" and err.limit == "timeout" and err.pos.line == 5
    assert err.message == "time limit exceeded (8 seconds) waiting for MCP server 'demo'"
    assert [(r.name, r.event) for r in vm.audit.records if r.kind == "tool"] == [
        ("demo.slow", "failed")]


@needs_mcp
def test_an_mcp_result_meets_the_string_limit(tmp_path):
    import json
    (tmp_path / "s.json").write_text(json.dumps(
        [calls(("demo.echo", {"text": "w" * 300})), {"text": "{results}"}]))
    source = (ALLOW_MCP + MCP_HEAD + f"s = {CONNECT})\n"
              + 'print(ask_with_tools("x", s.tools).value)\n')
    out, err, _ = run_vm(source, tmp_path, "1", max_string=200)
    assert err.kind == "SenseLimitError" and err.limit == "string"
    assert err.message == "string size limit exceeded (a String of 300 characters; the limit is 200)"
