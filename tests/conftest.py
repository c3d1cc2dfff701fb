"""Shared helpers for the test suite: run a Sense program in-process the way `sensevm run` does."""

from __future__ import annotations

import io
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from typing import Optional

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Saved agents are authenticated with the host key (sensevm/guard/keys.py): the suite, and every
# process it starts, uses a key of its own instead of the user's.
os.environ["SENSE_KEY_FILE"] = os.path.join(tempfile.mkdtemp(prefix="sense-key-"), "host.key")
TESTS = os.path.join(ROOT, "tests")
sys.path.insert(0, TESTS)

# The tests make VMs directly, as a program embedding the VM does: with the world's builtins and
# services (agents, models, memory, MCP, Python, saved state) installed, as the commands do.
from sensevm.world import install  # noqa: E402

install()


@dataclass
class Outcome:
    stdout: str
    error: Optional[BaseException]
    exit_code: int


def run_script(script: str, args, cwd, completion_var: str, *, no_site: bool = False):
    """``python -c script args...`` in ``cwd`` with this checkout importable, colour off and
    the shell-completion variable ``completion_var`` unset (so click never answers it).

    ``no_site``: run with ``-S``, the installed packages on PYTHONPATH instead, so that no site
    ``.pth`` file (some machines' import certifi, hence threading) loads modules at start-up."""
    import subprocess
    import sysconfig
    path = [ROOT]
    if no_site:
        paths = sysconfig.get_paths()
        path += dict.fromkeys((paths["purelib"], paths["platlib"]))
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=os.pathsep.join(path))
    env.pop(completion_var, None)
    flags = ["-S"] if no_site else []
    return subprocess.run([sys.executable, *flags, "-c", script, *args], capture_output=True,
                          text=True, cwd=cwd, env=env)


def run_program(path: str, *, dry_run: bool = False, tier: Optional[str] = None) -> Outcome:
    """Compile (in memory), dump, load, verify and run ``path``; capture stdout and the error.

    ``tier`` forces an execution tier ("1", "2"); None leaves the VM's default (SENSE_TIER)."""
    from sensec.driver import compile_file
    from sensevm.bytecode.snb import dump
    from sensevm.bytecode.verify import load_verified
    from sensevm.runtime.vm import VM
    from sensevm.base.errors import SenseError
    out = io.StringIO()
    try:
        verified = load_verified(dump(compile_file(path, defer_import_errors=True)))
        VM(verified, stdout=out, dry_run=dry_run, tier=tier).run()
    except SenseError as err:
        return Outcome(out.getvalue(), err, 1)
    return Outcome(out.getvalue(), None, 0)


def run_source(source: str, tmp_path, name: str = "main.sns") -> Outcome:
    path = tmp_path / name
    path.write_text(source, encoding="utf-8")
    return run_program(str(path))


def reference_binary() -> Optional[str]:
    """The reference interpreter (`sense`, sense-lang 0.20.0), if the Makefile could install it."""
    candidates = [os.environ.get("SENSE_REF"), os.path.join(ROOT, ".venv-ref", "bin", "sense")]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


@pytest.fixture
def run(tmp_path):
    return lambda source, **kw: run_source(source, tmp_path, **kw)
