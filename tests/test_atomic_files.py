"""No half-written files (issue 9): every file the toolchain writes is replaced atomically or
appended to with fsync, a crash in the middle of a write leaves the previous version readable,
and a damaged file of every kind the toolchain reads back is a clean error naming it.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import subprocess
import sys

import pytest

from conftest import ROOT

from sensevm.base import files

ENV = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")


# ----------------------------------------------------------------------------- atomic_write

def _leftovers(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(".tmp"))


@pytest.mark.parametrize("fail_in", ["write", "fsync", "replace"])
def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch, fail_in):
    path = tmp_path / "out.snb"
    path.write_bytes(b"old contents")

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")
    if fail_in == "replace":
        monkeypatch.setattr(os, "replace", boom)
    elif fail_in == "fsync":
        monkeypatch.setattr(os, "fsync", boom)
    else:
        real_fdopen = os.fdopen

        class Failing(io.BufferedWriter):
            def write(self, data):
                super().write(data[:3])          # a short write, then the disk is full
                self.flush()
                boom()

        def fdopen(fd, *args, **kwargs):
            return Failing(real_fdopen(fd, "wb", buffering=0))
        monkeypatch.setattr(os, "fdopen", fdopen)
    with pytest.raises(OSError, match="No space"):
        files.atomic_write(str(path), b"new contents, longer than the old ones")
    monkeypatch.undo()
    assert path.read_bytes() == b"old contents"
    assert _leftovers(tmp_path) == []


def test_the_new_file_appears_whole(tmp_path):
    path = tmp_path / "out.bin"
    files.atomic_write(str(path), b"x" * 100_000)
    assert path.read_bytes() == b"x" * 100_000 and _leftovers(tmp_path) == []
    files.atomic_write(str(path), b"short")
    assert path.read_bytes() == b"short" and _leftovers(tmp_path) == []


def test_permissions_are_kept_and_the_umask_is_honoured(tmp_path):
    # mkstemp made every written file 0600: `sensec fmt --write` took a script's execute and
    # read bits away, and `sensec build` made .snb files no one else could read.
    script = tmp_path / "tool.sns"
    script.write_text("print(1)\n")
    script.chmod(0o750)
    files.atomic_write(str(script), b"print(2)\n")
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    old = os.umask(0o027)
    try:
        files.atomic_write(str(tmp_path / "new.snb"), b"data")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.snb").stat().st_mode) == 0o640


def test_a_symbolic_link_keeps_pointing_at_the_rewritten_file(tmp_path):
    target = tmp_path / "real.sns"
    target.write_text("old\n")
    link = tmp_path / "link.sns"
    link.symlink_to(target)
    files.atomic_write(str(link), b"new\n")
    assert link.is_symlink() and target.read_text() == "new\n"


KILL_AT = """
import os, signal, sys
point = sys.argv[1]
real = getattr(os, point)
def crash(*args, **kwargs):
    if point == "fsync":
        real(*args, **kwargs)          # the data is durable, the rename never happens
    os.kill(os.getpid(), signal.SIGKILL)
setattr(os, point, crash)
sys.argv = sys.argv[2:]
import runpy
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def killed_at(point: str, module: str, *args, cwd) -> subprocess.CompletedProcess:
    """Run ``python -m module args`` and kill it with SIGKILL at its first os.``point`` call."""
    proc = subprocess.run([sys.executable, "-c", KILL_AT, point, module, *args], cwd=cwd,
                          env=ENV, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    return proc


@pytest.mark.parametrize("point", ["fsync", "replace"])
def test_sensec_build_killed_mid_write_leaves_the_previous_snb(tmp_path, point):
    from sensevm.bytecode.verify import load_verified
    src = tmp_path / "prog.sns"
    src.write_text('print("first")\n')
    subprocess.run([sys.executable, "-m", "sensec", "build", str(src)], env=ENV, check=True)
    before = (tmp_path / "prog.snb").read_bytes()
    src.write_text('print("second, a longer program than the first")\n')
    killed_at(point, "sensec", "build", str(src), cwd=tmp_path)
    assert (tmp_path / "prog.snb").read_bytes() == before
    load_verified(before)
    run = subprocess.run([sys.executable, "-m", "sensevm", "run", str(tmp_path / "prog.snb")],
                         env=ENV, capture_output=True, text=True)
    assert run.stdout == "first\n"


@pytest.mark.parametrize("point", ["fsync", "replace"])
def test_sensec_fmt_killed_mid_write_leaves_the_source(tmp_path, point):
    src = tmp_path / "messy.sns"
    src.write_text("x  =  1\nprint( x )\n")
    killed_at(point, "sensec", "fmt", "--write", str(src), cwd=tmp_path)
    assert src.read_text() == "x  =  1\nprint( x )\n"


AGENT = '''agent clerk:
    answer = ask_human("approve?")
    print("heard", answer)
    answer = ask_human("really?")
    print("heard", answer)
start(clerk)
'''


def _save_agent(tmp_path):
    src = tmp_path / "agent.sns"
    src.write_text(AGENT)
    state = tmp_path / "state"
    subprocess.run([sys.executable, "-m", "sensevm", "run", str(src), "--state-dir", str(state)],
                   env=ENV, check=True, capture_output=True)
    return state


def test_a_saved_agent_killed_mid_save_keeps_its_previous_state(tmp_path):
    state = _save_agent(tmp_path)
    before = (state / "clerk.json").read_bytes()
    # Resuming saves the agent again at its next pause: crash in that save.
    killed_at("replace", "sensevm", "resume", str(state), "clerk", "yes", cwd=tmp_path)
    assert (state / "clerk.json").read_bytes() == before
    proc = subprocess.run([sys.executable, "-m", "sensevm", "resume", str(state), "clerk", "yes"],
                          env=ENV, capture_output=True, text=True)
    assert (proc.returncode, proc.stdout) == (0, "heard yes\n"), proc.stderr


# ----------------------------------------------------------------------------- damaged files

def test_a_truncated_snb_is_named(tmp_path):
    from sensevm.cli.running import run_file
    src = tmp_path / "prog.sns"
    src.write_text('print("hi")\n')
    subprocess.run([sys.executable, "-m", "sensec", "build", str(src)], env=ENV, check=True)
    snb = tmp_path / "prog.snb"
    data = snb.read_bytes()
    for cut in (0, 5, 30, len(data) // 2, len(data) - 1):
        snb.write_bytes(data[:cut])
        err = io.StringIO()
        assert run_file(str(snb), stdout=io.StringIO(), stderr=err) == 1
        assert err.getvalue().startswith(f"{snb}: SnbFormatError: offset "), err.getvalue()


@pytest.mark.parametrize("damage", ["truncate", "garbage", "program"])
def test_a_damaged_saved_agent_is_named(tmp_path, damage):
    state = _save_agent(tmp_path)
    target = state / ("program.snb" if damage == "program" else "clerk.json")
    data = target.read_bytes()
    target.write_bytes(data[:len(data) // 2] if damage != "garbage" else b"\x00\xff{not json")
    proc = subprocess.run([sys.executable, "-m", "sensevm", "resume", str(state), "clerk", "yes"],
                          env=ENV, capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stdout == ""
    assert str(target) in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1


def test_a_damaged_audit_log_is_named(tmp_path):
    src = tmp_path / "act.sns"
    src.write_text('irreversible action ping() requires net.ping:\n    print("ping")\n'
                   'policy:\n    allow net.ping\n'
                   'p = ping()\np.verify()\np.commit()\n')
    log = tmp_path / "audit.jsonl"
    subprocess.run([sys.executable, "-m", "sensevm", "run", str(src), "--audit-log", str(log)],
                   env=ENV, check=True, capture_output=True)
    data = log.read_bytes()
    assert data.count(b"\n") >= 3
    first = data.index(b"\n") + 1
    for damaged, line, status in (
            (data[:-5], data.count(b"\n"), 2),                        # a torn last line
            (data[:first + 3] + b"X" + data[first + 4:], 2, 1),        # a changed byte
            (data[:first] + data[2 * first:], 2, 1)):                  # a line removed
        log.write_bytes(damaged)
        proc = subprocess.run([sys.executable, "-m", "sensevm", "audit", "verify", str(log)],
                              env=ENV, capture_output=True, text=True)
        assert proc.returncode == status and "Traceback" not in proc.stderr
        assert re.match(rf"{re.escape(str(log))}:{line}: ", proc.stderr), proc.stderr


def test_a_damaged_session_log_is_named(tmp_path):
    src = tmp_path / "ses.sns"
    src.write_text('irreversible action send(x: Int) requires mail.send:\n    print("sent", x)\n'
                   'policy:\n    allow mail.send\n'
                   'session weekly as s:\n    a = send(1)\n    a.verify()\n    a.commit()\n'
                   '    m = s.manifest()\n    s.commit(m.hash)\n')
    subprocess.run([sys.executable, "-m", "sensevm", "run", str(src)], env=ENV, check=True,
                   capture_output=True, cwd=tmp_path)
    wal = tmp_path / ".sense" / "sessions.wal"
    data = wal.read_bytes()
    lines = data.split(b"\n")
    assert len(lines) >= 4
    lines[1] = lines[1][:10] + b"#" + lines[1][11:]
    wal.write_bytes(b"\n".join(lines))
    proc = subprocess.run([sys.executable, "-m", "sensevm", "recover", str(wal)], env=ENV,
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"sensevm recover: {wal}:2: "), proc.stderr


def test_a_damaged_memory_file_is_named(tmp_path):
    src = tmp_path / "mem.sns"
    src.write_text('persistent memory ledger\nledger.remember("a", 1)\nprint(ledger.recall("a"))\n')
    env = dict(ENV, SENSE_MEMORY_DIR=str(tmp_path / "mem"))
    first = subprocess.run([sys.executable, "-m", "sensevm", "run", str(src)], env=env,
                           capture_output=True, text=True)
    assert (first.returncode, first.stdout) == (0, "1\n"), first.stderr
    db = tmp_path / "mem" / "ledger.sense_memory.db"
    db.write_bytes(b"this is not an SQLite database at all" * 100)
    proc = subprocess.run([sys.executable, "-m", "sensevm", "run", str(src)], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert str(db) in proc.stderr, proc.stderr


# ----------------------------------------------------------------------------- the audit

# Every place in the toolchain that opens a file for writing, and why it is safe. A new
# writer fails this test until it uses sensevm.base.files (atomic_write, append_line) or is listed.
WRITERS = {
    ("sensevm/base/files.py", 'os.fdopen(fd, "wb")'): "atomic_write's own temporary file",
    ("sensevm/guard/audit.py", "os.open(self.path, flags | os.O_CREAT | os.O_EXCL, 0o644)"):
        "append-only (O_APPEND), each record fsync'd by files.append_line",
    ("sensevm/guard/wal.py", "os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, \"O_CLOEXEC\", 0),"):
        "append-only, each record fsync'd by files.append_line; a torn tail is cut first",
    ("sensevm/cli/repl.py", "open(path, \"a\", encoding=\"utf-8\")"):
        "creates the history file empty; entries are appended and fsync'd (make_history)",
    ("sensevm/cli/repl.py", "os.open(os.devnull, os.O_WRONLY)"):
        "the null device, put over a stdout whose reader has gone (a broken pipe): no file",
    ("sensevm/cli/temporal/segment.py", 'open(audit_path, "w", encoding="utf-8")'):
        "a Temporal segment's copy of the run's audit log, in the segment's own temporary "
        "directory, which nothing reads after the segment: nothing of it outlives a crash",
    ("sensevm/guard/keys.py", "os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)"):
        "the host key: written whole to a new temporary file, fsync'd, then linked into place "
        "(os.link never replaces a key already there)",
}
_WRITE = re.compile(r"""open\([^)]*["'](?:[wax]b?|[wa]\+b?|r\+b?)["']|\.write_(?:text|bytes)\(|"""
                    r"""os\.open\([^)]*O_(?:CREAT|WRONLY|RDWR)|json\.dump\(|shutil\.(?:copy|move)""")


def _modules(package: str):
    """The .py files of ``package`` and its subpackages, relative to it."""
    top = os.path.join(ROOT, package)
    for folder, _, files in os.walk(top):
        for name in files:
            if name.endswith(".py"):
                yield os.path.relpath(os.path.join(folder, name), top)


def test_every_writer_is_atomic_or_append_only():
    found = {}
    for package in ("sensevm", "sensec"):
        for name in sorted(_modules(package)):
            rel = f"{package}/{name}"
            with open(os.path.join(ROOT, rel), encoding="utf-8") as fh:
                for number, line in enumerate(fh, start=1):
                    if _WRITE.search(line):
                        found[(rel, line.strip().split(" = ", 1)[-1].removeprefix("with ")
                               .removeprefix("fd = ").removeprefix("return ")
                               .split(" as ")[0].rstrip(":"))] = number
    unexplained = {k: v for k, v in found.items() if k not in WRITERS}
    assert not unexplained, f"writers that are neither atomic nor listed: {unexplained}"
    assert set(WRITERS) <= set(found), f"listed writers that are gone: {set(WRITERS) - set(found)}"
