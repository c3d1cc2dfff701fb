"""Program-relative files resolve against the program's directory, not the working directory
(issue 26; sensevm/runtime/places.py, docs/memory.md "Where the file is", docs/models.md).

Everything runs through the real CLI in subprocesses, from two different working directories."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

from conftest import ROOT

MAILER = '''persistent memory sent
persistent memory outbox: "data/outbox.db"
if sent.recall("welcome") == nil:
    print("sending welcome")
    sent.remember("welcome", true)
else:
    print("already sent")
outbox.remember("n", len(outbox.keys()))
print(outbox)
'''


def run(*args, cwd, env=None):
    full = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    full.pop("SENSE_MEMORY_DIR", None)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True,
                          text=True, env=full, timeout=120)


def project(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "mailer.sns").write_text(MAILER)
    one, two = tmp_path / "one", tmp_path / "two" / "deeper"
    one.mkdir()
    two.mkdir(parents=True)
    return proj, one, two


def test_a_built_program_uses_one_memory_from_any_directory(tmp_path):
    proj, one, two = project(tmp_path)
    # Built with a relative path, from the project's parent: the .snb records "proj/mailer.sns".
    built = run("sensec", "build", "proj/mailer.sns", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    first = run("sensevm", "run", str(proj / "mailer.snb"), cwd=one)
    second = run("sensevm", "run", os.path.relpath(proj / "mailer.snb", two), cwd=two)
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert first.stdout.split("\n")[0] == "sending welcome"
    assert second.stdout.split("\n")[0] == "already sent"     # the same memory: no re-send
    # `.path` and the printed form show an explicit path as written.
    assert second.stdout.split("\n")[1] == "<memory outbox (persistent, data/outbox.db)>"
    db = proj / ".sense_memory" / "sent.sense_memory.db"
    assert db.is_file()
    conn = sqlite3.connect(str(proj / "data" / "outbox.db"))
    assert conn.execute("SELECT count(*) FROM memory_log").fetchone() == (2,)
    conn.close()
    # Nothing was created where the program was run from.
    assert os.listdir(one) == [] and os.listdir(two) == []
    assert not (tmp_path / "data").exists() and not (tmp_path / ".sense_memory").exists()


def test_source_and_bytecode_share_the_memory(tmp_path):
    proj, one, _ = project(tmp_path)
    assert run("sensec", "build", str(proj / "mailer.sns"), cwd=one).returncode == 0
    assert run("sensevm", "run", str(proj / "mailer.sns"), cwd=one).stdout.startswith("sending")
    assert run("sensevm", "run", "mailer.snb", cwd=proj).stdout.startswith("already sent")
    assert os.listdir(one) == []


def test_a_module_memory_stays_next_to_the_module(tmp_path):
    proj = tmp_path / "proj"
    (proj / "lib").mkdir(parents=True)
    (proj / "lib" / "store.sns").write_text('persistent memory kept\npersistent memory '
                                            'named: "here.db"\n')
    (proj / "main.sns").write_text('import "lib/store.sns"\nprint(store.kept.path)\n'
                                   'store.named.remember("k", 1)\n')
    assert run("sensec", "build", "proj/main.sns", cwd=tmp_path).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = run("sensevm", "run", "../proj/main.snb", cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == str(proj / "lib" / ".sense_memory" / "kept.sense_memory.db") + "\n"
    assert (proj / "lib" / "here.db").is_file()
    assert os.listdir(elsewhere) == []


def test_the_scripted_model_is_found_from_any_directory(tmp_path):
    proj, one, two = project(tmp_path)
    (proj / "script.json").write_text(json.dumps([{"text": "scripted hello"}]))
    (proj / "ask.sns").write_text('model m = inference("scripted", "script.json")\n'
                                  'print(m.ask("hi").value)\n')
    assert run("sensec", "build", "proj/ask.sns", cwd=tmp_path).returncode == 0
    for cwd in (one, two, tmp_path):
        proc = run("sensevm", "run", str(proj / "ask.snb"), cwd=cwd)
        assert (proc.returncode, proc.stdout) == (0, "scripted hello\n"), proc.stderr


def test_memory_path_names_the_base_and_agrees_with_a_run(tmp_path):
    proj, one, _ = project(tmp_path)
    assert run("sensec", "build", "proj/mailer.sns", cwd=tmp_path).returncode == 0
    proc = run("sensevm", "memory-path", str(proj / "mailer.snb"), cwd=one)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split("\n")
    assert lines[0] == (f"The program's directory (the directory of {proj / 'mailer.snb'}, "
                        f"beside its source mailer.sns): {proj}")
    assert lines[1] == (f"sent: {proj / '.sense_memory' / 'sent.sense_memory.db'}  "
                        "(default -- next to this file)")
    assert lines[2] == (f"outbox: {proj / 'data' / 'outbox.db'}  (explicit path data/outbox.db, "
                        "relative to the program's directory)")
    run("sensevm", "run", str(proj / "mailer.snb"), cwd=one)
    assert (proj / ".sense_memory" / "sent.sense_memory.db").is_file()
    assert (proj / "data" / "outbox.db").is_file()


def test_memory_path_gives_this_shells_instructions(tmp_path):
    proc = run("sensevm", "memory-path", cwd=tmp_path)
    assert proc.returncode == 0
    if os.name == "nt":
        assert "(PowerShell)" in proc.stdout
    else:
        assert "$env:" not in proc.stdout and "PowerShell" not in proc.stdout
        assert "  export SENSE_MEMORY_DIR=/path/to/wherever" in proc.stdout
