"""Persistent memory: the SQLite log across runs and processes, locations, concurrency, broken files, and the reference's behaviour."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import ROOT, reference_binary, run_source

REF = reference_binary()
needs_ref = pytest.mark.skipif(REF is None, reason="reference interpreter not installed")

# time.ctime() as the reference shows it in history() lines.
CTIME = re.compile(r"\((Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|"
                   r"Nov|Dec) [ \d]\d \d\d:\d\d:\d\d \d{4}\)")


def sensevm(*args, cwd, env=None):
    full = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    full.pop("SENSE_MEMORY_DIR", None)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "sensevm", *args], cwd=cwd,
                          capture_output=True, text=True, env=full, timeout=120)


def log_rows(path) -> list:
    conn = sqlite3.connect(str(path))
    try:
        return conn.execute("SELECT version, key, op, value FROM memory_log ORDER BY version"
                            ).fetchall()
    finally:
        conn.close()


@pytest.fixture
def memdir(tmp_path, monkeypatch):
    d = tmp_path / "memdir"
    monkeypatch.setenv("SENSE_MEMORY_DIR", str(d))
    return d


# ----------------------------------------------------------------------------- the operations

OPERATIONS = '''persistent memory pm
print(pm)
print(type_of(pm), pm.name)
print(pm.remember("a", 1))
pm.remember("b", [1, 2.0, nil, [true, "x"]])
pm.remember("a", 1.0)
pm.remember("c", 100000000000000000000.0)
pm.remember("d", -0.0)
print(pm.keys())
print(pm.recall("a"), pm.recall("b"), pm.recall("c"), pm.recall("d"), pm.recall("zz"))
pm.forget("a")
pm.forget("zz")
print(pm.keys())
pm.remember("a", "back")
print(pm.keys())
for line in pm.history("a"):
    print(line)
print(pm.history("nothing"))
print(pm.as_of("a", 0), pm.as_of("a", 1), pm.as_of("a", 3), pm.as_of("a", 6), pm.as_of("a", 8))
print(pm.as_of("a", -1), pm.as_of("a", 100))
print(pm == pm, pm.recall, pm.as_of)
f = pm.history
print(len(f("b")), type_of(f))
'''


def test_operations(memdir):
    out = run_source(OPERATIONS, memdir.parent)
    assert out.error is None, out.error
    db = memdir / "pm.sense_memory.db"
    lines = CTIME.sub("(T)", out.stdout).split("\n")
    assert lines == [
        f"<memory pm (persistent, {db})>",
        "Memory pm",
        "nil",
        "[b, a, c, d]",
        "1.0 [1, 2.0, nil, [true, x]] 1e+20 -0.0 nil",
        "[b, c, d]",
        "[b, c, d, a]",
        "[v1] remember 'a' = 1 (T)",
        "[v3] remember 'a' = 1.0 (T)",
        "[v6] forget 'a' (T)",
        "[v8] remember 'a' = back (T)",
        "[]",
        "nil 1 1.0 nil back",
        "nil back",
        "true <builtin pm.recall> <builtin pm.as_of>",
        "1 Function",
        "",
    ]
    # An Int stays an Int and a Float a Float through the JSON text.
    assert [r[3] for r in log_rows(db) if r[1] == "a"] == ["1", "1.0", None, '"back"']


def test_history_timestamps_are_the_records_ctime(memdir):
    out = run_source('persistent memory pm\npm.remember("k", 1)\npm.forget("k")\n'
                     'for line in pm.history("k"):\n    print(line)\n', memdir.parent)
    conn = sqlite3.connect(str(memdir / "pm.sense_memory.db"))
    stamps = [r[0] for r in conn.execute("SELECT timestamp FROM memory_log ORDER BY version")]
    conn.close()
    assert out.stdout == (f"[v1] remember 'k' = 1 ({time.ctime(stamps[0])})\n"
                          f"[v2] forget 'k' ({time.ctime(stamps[1])})\n")
    assert abs(stamps[1] - time.time()) < 60


@pytest.mark.parametrize("line, message", [
    ('pm.remember(1, 2)', "[line 2] memory key must be a String, got Int"),
    ('pm.recall(nil)', "[line 2] memory key must be a String, got Nil"),
    ('pm.history([1])', "[line 2] memory key must be a String, got Array"),
    ('pm.as_of(1, 1.5)', "[line 2] memory key must be a String, got Int"),
    ('pm.as_of("k", 1.0)', "[line 2] as_of() expects an Int version, got Float"),
    ('pm.as_of("k", true)', "[line 2] as_of() expects an Int version, got Bool"),
    ('pm.as_of("k")', "[line 2] 'pm.as_of' expects 2 argument(s), got 1"),
    ('pm.keys(1)', "[line 2] 'pm.keys' expects 0 argument(s), got 1"),
    ('print(pm.kind)', "[line 2] memory 'pm' has no member 'kind'"),
    ('pm.remember("k", pm)',
     "[line 2] persistent memory can only store JSON-serializable values "
     "(Int/Float/String/Bool/Nil/Array of those): TypeError: Object of type "
     "SensePersistentMemory is not JSON serializable"),
    ('memory s\npm.remember("k", [1, [s]])',
     "[line 3] persistent memory can only store JSON-serializable values "
     "(Int/Float/String/Bool/Nil/Array of those): TypeError: Object of type SenseMemory is "
     "not JSON serializable"),
    ('def f():\n    return 1\npm.remember("k", [f, print])',
     "[line 4] persistent memory can only store JSON-serializable values "
     "(Int/Float/String/Bool/Nil/Array of those): TypeError: Object of type SenseFunction is "
     "not JSON serializable"),
    ('pm.remember("k", pm.recall)',
     "[line 2] persistent memory can only store JSON-serializable values "
     "(Int/Float/String/Bool/Nil/Array of those): TypeError: Object of type BuiltinFunction is "
     "not JSON serializable"),
    ('pm.remember("k", inference("mock"))',
     "[line 2] persistent memory can only store JSON-serializable values "
     "(Int/Float/String/Bool/Nil/Array of those): TypeError: Object of type SenseModel is "
     "not JSON serializable"),
    ('irreversible action a():\n    return 1\npm.remember("k", [a, a()])',
     "[line 4] persistent memory can only store JSON-serializable values "
     "(Int/Float/String/Bool/Nil/Array of those): TypeError: Object of type SenseActionDef is "
     "not JSON serializable"),
    # The reference crashes with a host ValueError here; the message keeps its form.
    ('x = [1]\nx[0] = x\npm.remember("k", x)',
     "[line 4] persistent memory can only store JSON-serializable values "
     "(Int/Float/String/Bool/Nil/Array of those): ValueError: Circular reference detected"),
])
def test_errors(memdir, line, message):
    out = run_source(f"persistent memory pm\n{line}\n", memdir.parent)
    assert out.error is not None and out.error.kind == "SenseRuntimeError"
    assert out.error.text == message
    # A refused value writes nothing: each record is whole or absent.
    assert log_rows(memdir / "pm.sense_memory.db") == []


def test_as_of_beyond_sqlite_integers(memdir):
    # The reference crashes with a host OverflowError; a version past every record sees the
    # latest one, and one before every record sees nothing.
    out = run_source('persistent memory pm\npm.remember("a", 1)\n'
                     'print(pm.as_of("a", 10000000000000000000000), '
                     'pm.as_of("a", -10000000000000000000000))\n', memdir.parent)
    assert out.error is None and out.stdout == "1 nil\n"


def test_infinite_float_round_trips(memdir):
    big = "1" + "0" * 308 + ".0"
    out = run_source(f'persistent memory pm\nx = {big} * 10.0\npm.remember("inf", x)\n'
                     'print(pm.recall("inf") == x)\n', memdir.parent)
    assert out.error is None and out.stdout == "true\n"


def test_bound_method_errors_at_the_line_it_was_read(memdir):
    out = run_source('persistent memory pm\nf = pm.as_of\nprint(1)\nf("k", "v")\n',
                     memdir.parent)
    assert out.error.text == "[line 2] as_of() expects an Int version, got String"


def test_two_values_on_one_file_share_the_log(tmp_path):
    db = tmp_path / "shared.db"
    out = run_source(f'persistent memory p1: "{db}"\npersistent memory p2: "{db}"\n'
                     'print(p1 == p2, p1 == p1, p1.path)\np1.remember("z", 1)\n'
                     'print(p2.recall("z"), p2.keys())\n', tmp_path)
    assert out.error is None
    assert out.stdout == f"false true {db}\n1 [z]\n"


def test_ask_with_memory_reads_the_log(memdir):
    out = run_source('set delegation = inference("mock", response_template: "{prompt}")\n'
                     'persistent memory pm\nprint(ask_with_memory("q", pm).value)\n'
                     'pm.remember("z", [1.0, 2])\npm.remember("y", "yy")\npm.remember("z", 3)\n'
                     'pm.forget("y")\npm.remember("w", nil)\n'
                     'print(ask_with_memory("q", pm).value)\n', memdir.parent)
    assert out.error is None
    assert out.stdout == "q\nKnown information from memory:\n- z: 3\n- w: nil\n\nq\n"


def test_dry_run_still_writes(memdir):
    # Dry runs skip action bodies; memory is not an action, so it is written as in the
    # reference.
    from conftest import run_program
    path = memdir.parent / "d.sns"
    path.write_text('persistent memory pm\npm.remember("k", 1)\nprint(pm.keys())\n')
    out = run_program(str(path), dry_run=True)
    assert out.error is None and "[k]" in out.stdout
    assert len(log_rows(memdir / "pm.sense_memory.db")) == 1


# ----------------------------------------------------------------------------- locations

def test_default_location_is_next_to_the_declaring_file(tmp_path):
    proj = tmp_path / "proj"
    (proj / "lib").mkdir(parents=True)
    (proj / "lib" / "store.sns").write_text(
        'persistent memory inlib\ndef make():\n    persistent memory infn\n    return infn\n')
    (proj / "main.sns").write_text(
        'import "lib/store.sns"\npersistent memory top\nprint(top.path)\n'
        'print(store.inlib.path)\nprint(store.make().path)\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = sensevm("run", str(proj / "main.sns"), cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n") == [
        str(proj / ".sense_memory" / "top.sense_memory.db"),
        str(proj / "lib" / ".sense_memory" / "inlib.sense_memory.db"),
        # In a function body too (the reference uses the working directory there).
        str(proj / "lib" / ".sense_memory" / "infn.sense_memory.db"),
        ""]
    assert sorted(os.listdir(proj / ".sense_memory")) == ["top.sense_memory.db"]
    assert os.listdir(elsewhere) == []


def test_sense_memory_dir_and_explicit_paths(tmp_path):
    (tmp_path / "p.sns").write_text(
        'persistent memory a\npersistent memory b: "rel/dir/b.db"\nprint(a.path)\nprint(b.path)\n')
    proc = sensevm("run", "p.sns", cwd=tmp_path, env={"SENSE_MEMORY_DIR": "store"})
    assert proc.returncode == 0, proc.stderr
    # Both as written, relative to the working directory, directories created.
    assert proc.stdout == "store/a.sense_memory.db\nrel/dir/b.db\n"
    assert (tmp_path / "store" / "a.sense_memory.db").is_file()
    assert (tmp_path / "rel" / "dir" / "b.db").is_file()
    assert not (tmp_path / ".sense_memory").exists()
    # An empty SENSE_MEMORY_DIR counts as unset.
    proc = sensevm("run", "p.sns", cwd=tmp_path, env={"SENSE_MEMORY_DIR": ""})
    assert proc.stdout.split("\n")[0] == str(tmp_path / ".sense_memory" / "a.sense_memory.db")


def test_repl_default_is_the_working_directory(tmp_path, monkeypatch):
    from sensevm.cli.interactive import Interactive
    import io
    monkeypatch.delenv("SENSE_MEMORY_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    session = Interactive(stdout=out)
    assert session.execute('persistent memory r\nr.remember("k", 1)\n') is None
    assert session.execute('print(r.path, r.recall("k"))\n') is None
    assert out.getvalue() == "r.sense_memory.db 1\n"
    assert (tmp_path / "r.sense_memory.db").is_file()


# ----------------------------------------------------------------------------- across runs

def test_data_persists_across_runs_and_versions_continue(tmp_path):
    (tmp_path / "count.sns").write_text(
        'persistent memory visits\nn = visits.recall("n")\nif n == nil:\n    n = 0\n'
        'visits.remember("n", n + 1)\nprint(visits.recall("n"), len(visits.history("n")))\n'
        'print(visits.as_of("n", 1))\n')
    outs = [sensevm("run", "count.sns", cwd=tmp_path) for _ in range(3)]
    assert [o.stdout for o in outs] == ["1 1\n1\n", "2 2\n1\n", "3 3\n1\n"]
    rows = log_rows(tmp_path / ".sense_memory" / "visits.sense_memory.db")
    assert [r[0] for r in rows] == [1, 2, 3]


# Each writer announces itself and waits for the others, so all three write at the same time.
WRITER = '''persistent memory shared: "{db}"
shared.remember("ready-{who}", true)
spins = 0
while (shared.recall("ready-a") == nil or shared.recall("ready-b") == nil or shared.recall("ready-c") == nil) and spins < 200000:
    spins = spins + 1
for i in range(150):
    shared.remember("{who}-" + str(i), i)
    if i % 10 == 0:
        shared.forget("{who}-gone")
print("{who} done", len(shared.keys()) >= 150)
'''


def test_concurrent_writers_lose_nothing(tmp_path):
    # (The wait for the others is bounded: a writer that failed to start must not leave the
    # other two spinning after the test has given up on them.)
    db = tmp_path / "shared.db"
    procs = []
    for who in ("a", "b", "c"):
        (tmp_path / f"{who}.sns").write_text(WRITER.format(db=db, who=who))
    env = dict(os.environ, PYTHONPATH=ROOT)
    for who in ("a", "b", "c"):
        procs.append(subprocess.Popen([sys.executable, "-m", "sensevm", "run", f"{who}.sns"],
                                      cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    results = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
    for (out, err, code), who in zip(results, "abc"):
        assert code == 0, err
        assert out == f"{who} done true\n"
    rows = log_rows(db)
    per_writer = 1 + 150 + 15
    assert len(rows) == 3 * per_writer
    # Versions are unique and gap-free across the three processes.
    assert [r[0] for r in rows] == list(range(1, 3 * per_writer + 1))
    for who in "abc":
        mine = [r for r in rows if r[1].startswith(who + "-")]
        assert [r[3] for r in mine if r[2] == "remember"] == [str(i) for i in range(150)]
    conn = sqlite3.connect(str(db))
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()


# ----------------------------------------------------------------------------- broken files

def test_a_file_that_is_not_a_database(tmp_path):
    bad = tmp_path / "notes.db"
    bad.write_text("this is not SQLite, just text that happens to be long enough " * 20)
    before = bad.read_bytes()
    (tmp_path / "p.sns").write_text(f'print("start")\npersistent memory notes: "{bad}"\n'
                                    'notes.remember("k", 1)\n')
    proc = sensevm("run", "p.sns", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout == "start\n"
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(
        f"p.sns:2:1: SenseRuntimeError: cannot open persistent memory 'notes' at {bad}: "
        "file is not a database")
    assert bad.read_bytes() == before


def test_a_directory_where_the_file_should_be(tmp_path):
    (tmp_path / "x.db").mkdir()
    out = run_source(f'persistent memory m: "{tmp_path / "x.db"}"\n', tmp_path)
    assert out.error.kind == "SenseRuntimeError"
    assert out.error.text.startswith(f"[line 1] cannot open persistent memory 'm' at "
                                     f"{tmp_path / 'x.db'}: ")


def test_a_log_with_another_shape(tmp_path):
    db = tmp_path / "other.db"
    conn = sqlite3.connect(str(db))
    conn.execute("CREATE TABLE memory_log (id INTEGER PRIMARY KEY, stuff TEXT)")
    conn.commit()
    conn.close()
    out = run_source(f'print("before")\npersistent memory m: "{db}"\nprint("opened")\n',
                     tmp_path)
    assert out.stdout == "before\n"
    assert out.error.text == (f"[line 2] cannot open persistent memory 'm' at {db}: its "
                              "memory_log table is not a memory log (columns: id, stuff)")
    assert out.error.kind == "SenseRuntimeError"


def test_a_damaged_record_fails_cleanly(tmp_path):
    db = tmp_path / "damaged.db"
    run_source(f'persistent memory m: "{db}"\nm.remember("k", 1)\n', tmp_path)
    conn = sqlite3.connect(str(db))
    conn.execute("UPDATE memory_log SET value = '[1, oops' WHERE key = 'k'")
    conn.commit()
    conn.close()
    out = run_source(f'persistent memory m: "{db}"\nprint(m.keys())\nprint(m.recall("k"))\n',
                     tmp_path)
    assert out.stdout == "[k]\n"
    assert out.error.text.startswith(f"[line 3] persistent memory 'm' ({db}): Expecting")


@pytest.mark.parametrize("stamp", ["'garbage'", "x'00ff'", "1e300", "-1e20", "9e18"],
                         ids=["text", "blob", "past the host's range", "before it",
                              "past time_t"])
def test_a_damaged_timestamp_fails_cleanly_naming_the_file_and_the_key(tmp_path, stamp):
    db = tmp_path / "damaged.db"
    run_source(f'persistent memory m: "{db}"\nm.remember("k", 1)\nm.remember("j", 2)\n',
               tmp_path)
    conn = sqlite3.connect(str(db))
    conn.execute(f"UPDATE memory_log SET timestamp = {stamp} WHERE key = 'k'")
    conn.commit()
    shown = conn.execute("SELECT timestamp FROM memory_log WHERE key = 'k'").fetchone()[0]
    conn.close()
    out = run_source(f'persistent memory m: "{db}"\nprint(m.recall("k"), len(m.history("j")))\n'
                     'print(m.history("k"))\n', tmp_path)
    assert out.stdout == "1 1\n"           # only the damaged record's own time is refused
    assert (out.error.kind, out.error.text) == (
        "SenseRuntimeError", f"[line 3] persistent memory 'm' ({db}): record v1 of key 'k' "
                             f"has a timestamp that is not a time: {shown!r}")


@pytest.mark.parametrize("value", ["'[' || replace(hex(zeroblob(100000)), '00', '[')", "NULL"],
                         ids=["arrays nested 200,000 deep", "no text at all"])
def test_a_value_json_cannot_read_fails_cleanly(tmp_path, value):
    db = tmp_path / "damaged.db"
    run_source(f'persistent memory m: "{db}"\nm.remember("k", 1)\n', tmp_path)
    conn = sqlite3.connect(str(db))
    conn.execute(f"UPDATE memory_log SET value = {value} WHERE key = 'k'")
    conn.commit()
    conn.close()
    out = run_source(f'persistent memory m: "{db}"\nprint(m.recall("k"))\n', tmp_path)
    assert out.error.kind == "SenseRuntimeError"
    assert out.error.text.startswith(f"[line 2] persistent memory 'm' ({db}): ")


def test_a_locked_database_fails_cleanly_and_writes_nothing(tmp_path, monkeypatch):
    import sensevm.world.memory as M
    monkeypatch.setattr(M, "BUSY_TIMEOUT", 0.2)
    db = tmp_path / "locked.db"
    run_source(f'persistent memory m: "{db}"\nm.remember("first", 1)\n', tmp_path)
    holder = sqlite3.connect(str(db), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        out = run_source(f'persistent memory m: "{db}"\nm.remember("second", 2)\n', tmp_path)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert out.error is not None and out.error.kind == "SenseRuntimeError"
    assert f"({db})" in out.error.text and "locked" in out.error.text
    assert [r[1] for r in log_rows(db)] == ["first"]


# ----------------------------------------------------------------------------- the reference

def _normalize(text: str, directory) -> str:
    return CTIME.sub("(T)", text.replace(str(directory), "{DIR}"))


REFERENCE_PROGRAMS = {
    "operations": OPERATIONS,
    "floats_and_nesting": 'persistent memory pm\n'
                          'pm.remember("k", [[1, [2, [nil, "s"]]], 1.5, -0.0, 0.1, 3.0])\n'
                          'print(pm.recall("k"))\nx = [1]\npm.remember("twice", [x, x])\n'
                          'print(pm.recall("twice"), pm.keys())\n'
                          'print(pm.history("twice"))\n',
    "ask": 'set delegation = inference("mock", response_template: "{prompt}")\n'
           'persistent memory pm\npm.remember("a", [1, "two"])\npm.remember("b", true)\n'
           'pm.remember("a", 2.5)\nprint(ask_with_memory("q", pm).value)\n',
    "default_path": 'persistent memory here\nprint(here)\nprint(here.path)\n',
    "explicit_relative": 'persistent memory e: "sub/e.db"\nprint(e, e.path)\n'
                         'e.remember("k", "v")\nprint(e.recall("k"))\n',
}


@needs_ref
@pytest.mark.parametrize("name", sorted(REFERENCE_PROGRAMS))
@pytest.mark.parametrize("memory_dir", [False, True], ids=["next_to_file", "SENSE_MEMORY_DIR"])
def test_same_output_as_the_reference(tmp_path, name, memory_dir):
    outputs = []
    for who in ("ours", "ref"):
        d = tmp_path / who
        d.mkdir()
        (d / "p.sns").write_text(REFERENCE_PROGRAMS[name])
        env = dict(os.environ, PYTHONPATH=ROOT)
        env.pop("SENSE_MEMORY_DIR", None)
        if memory_dir:
            env["SENSE_MEMORY_DIR"] = str(d / "memdir")
        cmd = ([sys.executable, "-m", "sensevm", "run", "p.sns"] if who == "ours"
               else [REF, "run", "p.sns"])
        proc = subprocess.run(cmd, cwd=d, capture_output=True, text=True, env=env, timeout=60)
        outputs.append((_normalize(proc.stdout, d), proc.returncode))
        files = sorted(str(p.relative_to(d)) for p in d.rglob("*.db"))
        outputs.append(files)
    assert outputs[0] == outputs[2]
    assert outputs[1] == outputs[3]


@needs_ref
def test_each_reads_what_the_other_wrote(tmp_path):
    db = tmp_path / "both.db"
    write = f'persistent memory m: "{db}"\nm.remember(WHO, [1, 2.5, "s", nil, true])\n' \
            'm.forget("none")\n'
    read = f'persistent memory m: "{db}"\nprint(m.keys(), m.recall("ref"), m.recall("ours"))\n' \
           'print(len(m.history("none")))\n'
    (tmp_path / "w_ref.sns").write_text(write.replace("WHO", '"ref"'))
    (tmp_path / "w_ours.sns").write_text(write.replace("WHO", '"ours"'))
    (tmp_path / "r.sns").write_text(read)
    env = dict(os.environ, PYTHONPATH=ROOT)
    subprocess.run([REF, "run", "w_ref.sns"], cwd=tmp_path, check=True, env=env)
    assert sensevm("run", "w_ours.sns", cwd=tmp_path).returncode == 0
    ours = sensevm("run", "r.sns", cwd=tmp_path)
    ref = subprocess.run([REF, "run", "r.sns"], cwd=tmp_path, capture_output=True, text=True,
                         env=env)
    expected = "[ref, ours] [1, 2.5, s, nil, true] [1, 2.5, s, nil, true]\n2\n"
    assert ours.stdout == expected and ref.stdout == expected


# ----------------------------------------------------------------------------- memory-path

DECLARES = '''print("this must not run")
def f():
    persistent memory inner
persistent memory top
persistent memory ex: "rel/x.db"
if true:
    agent a:
        persistent memory deep
memory not_persistent
'''


def test_memory_path_lists_declarations_without_running(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f.sns").write_text(DECLARES)
    proc = sensevm("memory-path", "sub/f.sns", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == ""
    mem = tmp_path / "sub" / ".sense_memory"
    assert proc.stdout == (
        f"The program's directory (the directory of sub/f.sns): {tmp_path / 'sub'}\n"
        f"inner: {mem / 'inner.sense_memory.db'}  (default -- next to this file)\n"
        f"top: {mem / 'top.sense_memory.db'}  (default -- next to this file)\n"
        f"ex: {tmp_path / 'sub' / 'rel' / 'x.db'}  (explicit path rel/x.db, relative to the "
        "program's directory)\n"
        f"deep: {mem / 'deep.sense_memory.db'}  (default -- next to this file)\n")
    assert not mem.exists() and not (tmp_path / "rel").exists()
    proc = sensevm("memory-path", "sub/f.sns", cwd=tmp_path, env={"SENSE_MEMORY_DIR": "d"})
    assert proc.stdout.split("\n")[1:4] == [
        "inner: d/inner.sense_memory.db  (default -- via SENSE_MEMORY_DIR)",
        "top: d/top.sense_memory.db  (default -- via SENSE_MEMORY_DIR)",
        f"ex: {tmp_path / 'sub' / 'rel' / 'x.db'}  (explicit path rel/x.db, relative to the "
        "program's directory)"]


def test_memory_path_of_a_built_file_uses_its_source(tmp_path):
    (tmp_path / "f.sns").write_text(DECLARES)
    env = dict(os.environ, PYTHONPATH=ROOT)
    subprocess.run([sys.executable, "-m", "sensec", "build", "f.sns", "-o", "f.snb"],
                   cwd=tmp_path, check=True, env=env)
    from_snb = sensevm("memory-path", "f.snb", cwd=tmp_path)
    from_sns = sensevm("memory-path", "f.sns", cwd=tmp_path)
    # The same places; only the first line's account of the base differs.
    assert from_snb.returncode == 0
    assert from_snb.stdout.split("\n")[1:] == from_sns.stdout.split("\n")[1:]
    assert from_snb.stdout.startswith(
        f"The program's directory (the directory of f.snb, beside its source f.sns): {tmp_path}\n")


def test_memory_path_without_declarations_and_without_file(tmp_path):
    (tmp_path / "none.sns").write_text('memory m\nprint(1)\n')
    proc = sensevm("memory-path", "none.sns", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "none.sns declares no 'persistent memory'.\n")
    unset = sensevm("memory-path", cwd=tmp_path)
    assert unset.returncode == 0
    assert unset.stdout.startswith("SENSE_MEMORY_DIR is not set.\n")
    assert "  sensevm memory-path <file.sns>\n" in unset.stdout
    set_ = sensevm("memory-path", cwd=tmp_path, env={"SENSE_MEMORY_DIR": "/data/mem"})
    assert set_.stdout.split("\n")[:3] == [
        "SENSE_MEMORY_DIR is set: /data/mem",
        "Every persistent memory declared with no explicit path resolves",
        "flat under this directory: /data/mem/<name>.sense_memory.db"]


@pytest.mark.parametrize("setup, arg, message", [
    (None, "missing.sns", "missing.sns: SenseError: no such file or directory: missing.sns\n"),
    ("dir", "adir", "adir: SenseError: is a directory, not a source file: adir\n"),
    ("bad", "bad.sns", "bad.sns:2:10: SenseSyntaxError: unexpected token RPAREN ')'\n"),
])
def test_memory_path_errors_exit_1(tmp_path, setup, arg, message):
    if setup == "dir":
        (tmp_path / "adir").mkdir()
    if setup == "bad":
        (tmp_path / "bad.sns").write_text('persistent memory x\nprint(1 +)\n')
    proc = sensevm("memory-path", arg, cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith(message)


def test_memory_path_usage_error_exits_2(tmp_path):
    assert sensevm("memory-path", "a.sns", "b.sns", cwd=tmp_path).returncode == 2


@needs_ref
@pytest.mark.parametrize("memory_dir", [None, "", "rel2", "/abs/dir"])
@pytest.mark.parametrize("arg", [None, "sub/f.sns", "sub/none.sns"])
def test_memory_path_as_the_reference(tmp_path, memory_dir, arg):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f.sns").write_text(DECLARES)
    (tmp_path / "sub" / "none.sns").write_text('memory m\n')
    env = {} if memory_dir is None else {"SENSE_MEMORY_DIR": memory_dir}
    ours = sensevm("memory-path", *([arg] if arg else []), cwd=tmp_path, env=env)
    full = dict(os.environ, **env)
    if memory_dir is None:
        full.pop("SENSE_MEMORY_DIR", None)
    ref = subprocess.run([REF, "memory-path", *([arg] if arg else [])], cwd=tmp_path,
                         capture_output=True, text=True, env=full)
    # Deliberate differences (sensevm/cli/memorypath.py): the command to run is ours; a first
    # line names the program's directory; an explicit path is shown resolved against it; the
    # overview says so in two more lines; the SENSE_MEMORY_DIR instructions are this system's
    # shell's. Every other line is the reference's.
    def kept(text):
        lines = text.split("\n")
        if "To change the default, set SENSE_MEMORY_DIR (PowerShell):" in lines:
            lines = lines[:lines.index("To change the default, set SENSE_MEMORY_DIR (PowerShell):")]
        lines = [line for line in lines
                 if not line.startswith(("The program's directory (", "ex: ", "(for a .snb",
                                         "relative path resolves", "To change the default",
                                         "  export ", "  echo ", "     "))]
        return "\n".join(lines).strip("\n")
    assert kept(ours.stdout) == kept(ref.stdout.replace("  sense memory-path",
                                                         "  sensevm memory-path"))
    assert ours.returncode == ref.returncode == 0
