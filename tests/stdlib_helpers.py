"""Running programs that use the standard library through the real commands, on either tier."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT

TIERS = ("1", "2")

# The second look as a test reads labels: an outgoing action whose argument holds v asks about
# it exactly when v is influenced (untrusted); `fetch(k)` hands back k labelled as a tool's.
SINKS = '''tool fetch(k: String) returns String requires web.fetch:
    return k
irreversible action rotate(password: String) requires vault.write:
    nil
def asks(v):
    local s = rotate("<<" + str(v) + ">>")
    s.verify()
    return s.second_look != nil
'''


def env(tier: str) -> dict:
    e = dict(os.environ, PYTHONPATH=ROOT, SENSE_TIER=tier)
    e.pop("SENSE_DEBUG", None)
    return e


def sense_run(tmp_path, source: str, *options, tier: str = "1", name: str = "main.sns",
              build: bool = True, script: str | None = None):
    """Write ``source``, build it with ``python -m sensec build`` (when ``build``) and run the
    .snb (else the .sns) with ``python -m sensevm run``; the CompletedProcess of the run."""
    path = tmp_path / name
    path.write_text(source, encoding="utf-8")
    target = str(path)
    if build:
        done = subprocess.run([sys.executable, "-m", "sensec", "build", str(path)],
                              cwd=tmp_path, capture_output=True, text=True, env=env(tier),
                              timeout=120)
        if done.returncode != 0:
            return done
        target = str(path)[:-4] + ".snb"
    return run_file(tmp_path, target, *options, tier=tier, script=script)


def run_file(tmp_path, target: str, *options, tier: str = "1", script: str | None = None):
    """``python -m sensevm run OPTIONS TARGET`` in ``tmp_path``; with ``script``, that Python
    code runs first in the same process (to patch something), then the command."""
    argv = ["run", *options, target]
    if script is None:
        cmd = [sys.executable, "-m", "sensevm", *argv]
    else:
        launcher = (script + "\nimport sys\nfrom sensevm.cli.launch import entry\n"
                    f"sys.argv = ['sensevm'] + {argv!r}\nentry()\n")
        cmd = [sys.executable, "-c", launcher]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env(tier),
                          timeout=120)


def clean_failure(done) -> None:
    """A refusal a person can read: a Sense error, never a traceback or an internal error."""
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    assert "internal error" not in done.stderr, done.stderr
