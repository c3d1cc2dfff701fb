"""``sensevm test``: runs the test blocks of Sense files and reports like the reference's ``sense test``."""

from __future__ import annotations

import os
import sys

from sensevm.base.errors import SenseError, SnbFormatError, VerifyError


def find_test_files(path: str) -> list[str]:
    """A file is always a test file; a directory is searched for test_*.sns and *_test.sns."""
    if os.path.isfile(path):
        return [path]
    found = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in files:
            if name.endswith(".sns") and (name.startswith("test_") or name.endswith("_test.sns")):
                found.append(os.path.normpath(os.path.join(root, name)))
    return sorted(found)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def run_tests(path: str, *, stdout=None, stderr=None, limits: dict | None = None) -> int:
    """Run every test file under ``path``; print the report; return the exit status.

    ``limits`` (VM keywords, over the environment's) apply to each file afresh.
    """
    from sensevm.cli.running import run_limits
    from sensevm.cli.running import load_path
    from sensevm.runtime.vm import VM
    from sensevm.world import install
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    limits = run_limits(stderr, limits)
    if limits is None:
        return 2
    if not os.path.exists(path):
        stderr.write(f"SenseError: no such file or directory: {path}\n")
        return 1
    files = find_test_files(path)
    if not files:
        stdout.write(f"no test files found under {path} (looked for test_*.sns / *_test.sns)\n")
        return 0
    passed = failed = errored = 0
    for file in files:
        stdout.write(f"{file}\n")
        vm = None
        try:
            verified, _ = load_path(file)
            install()
            vm = VM(verified, stdout=stdout, **limits)
            vm.run()
        except SenseError as err:
            errored += 1
            stdout.flush()
            stderr.write(f"  ERROR  {err.text}\n")
            stderr.flush()
        except (SnbFormatError, VerifyError) as exc:
            errored += 1
            stdout.flush()
            from sensevm.base.diagnostics import printable
            stderr.write(f"  ERROR  {type(exc).__name__}: {printable(str(exc))}\n")
        for result in (vm.tests if vm is not None else ()):
            if result.passed:
                passed += 1
                stdout.write(f"  PASS  {result.name}\n")
            else:
                failed += 1
                stdout.write(f"  FAIL  {result.name}\n        {result.error.text}\n")
        stdout.write("\n")
    stdout.write(f"{_plural(len(files), 'file')}, {_plural(passed + failed, 'test')}: "
                 f"{passed} passed, {failed} failed\n")
    stdout.flush()
    return 1 if failed or errored else 0
