"""Approving a session at a terminal (issue 26; sensevm/cli/running.py ask_at_terminal,
docs/sessions.md): through a real pseudo-terminal, a hash typed short or without its prefix
is said so and asked again, declining says "declined", and the manifest, the prompt and
`sensevm recover` quote arguments alike."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

import pytest

from conftest import ROOT

pytestmark = pytest.mark.skipif(os.name != "posix", reason="needs a pseudo-terminal")

PROGRAM = '''irreversible action send(to: String) requires email.send:
    print("SENT", to)
def run(a):
    a.verify()
    return a.commit()
session weekly as s:
    run(send("a@x.example"))
print("after")
'''


def env():
    return dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")


def dry_hash(tmp_path):
    dry = subprocess.run([sys.executable, "-m", "sensevm", "run", "--dry-run", "p.sns"],
                         cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=120)
    return next(line.split()[1] for line in dry.stdout.splitlines()
                if line.strip().startswith("hash "))


def at_terminal(tmp_path, answers):
    """Run p.sns with a pseudo-terminal as stdin; type each answer when prompted."""
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "sensevm", "run", "p.sns"], cwd=tmp_path,
                            env=env(), stdin=slave, stdout=subprocess.PIPE,
                            stderr=slave, text=False)
    os.close(slave)
    seen, pending = b"", list(answers)
    deadline = time.time() + 60
    try:
        while time.time() < deadline:
            ready, _, _ = select.select([master], [], [], 1)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
                if seen.count(b"anything else declines: ") > len(answers) - len(pending):
                    os.write(master, pending.pop(0).encode() + b"\n")
            elif proc.poll() is not None:
                break
        out = proc.stdout.read()
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return code, out.decode(), seen.decode().replace("\r\n", "\n")


def test_short_and_prefixless_hashes_are_said_so_then_the_whole_hash_approves(tmp_path):
    (tmp_path / "p.sns").write_text(PROGRAM)
    digest = dry_hash(tmp_path)
    code, out, err = at_terminal(tmp_path, [digest[:15], digest[len("sha256:"):], digest])
    assert code == 0, err
    assert out == "SENT a@x.example\nafter\n"
    assert '#1 send("a@x.example") requires email.send' in err
    assert ("that is not the whole hash: type all 71 characters, starting with sha256:"
            in err)
    assert "that hash has no prefix: type all 71 characters, starting with sha256:" in err
    assert err.count("anything else declines: ") == 3


def test_declining_says_declined(tmp_path):
    (tmp_path / "p.sns").write_text(PROGRAM)
    code, out, err = at_terminal(tmp_path, ["no"])
    assert code == 1 and "SENT" not in out
    assert "declined: nothing irreversible ran" in err
    assert "session 'weekly' was declined at the terminal and aborted" in err
    assert "without a verdict" not in err


def test_yes_approves_and_recover_quotes_as_the_manifest(tmp_path):
    (tmp_path / "p.sns").write_text(PROGRAM)
    code, out, err = at_terminal(tmp_path, ["yes"])
    assert code == 0 and out == "SENT a@x.example\nafter\n", err
    rec = subprocess.run([sys.executable, "-m", "sensevm", "recover", ".sense/sessions.wal"],
                         cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=120)
    assert rec.returncode == 0, rec.stderr
    assert '  fired: #1 send("a@x.example")' in rec.stdout
