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


def located(err: SenseError, name: str | None = None) -> str:
    """``FILE:LINE:COL: KIND: message`` as ``sensevm run`` starts its report (one line; the
    test's name after it when ``name`` is given)."""
    from sensevm.base.diagnostics import printable
    path = printable(err.path or "<input>")
    pos = err.pos
    where = f"{path}:{pos.line}:{pos.col}" if pos is not None and pos.line > 0 else path
    text = f"{where}: {err.kind}: {printable(err.message)}"
    return text if name is None else f"{text} (in test {printable(name)!r})"


def selects(pattern: str | None, name: str) -> bool:
    """``-k PATTERN``: a test is selected when its name contains PATTERN, ignoring case."""
    return pattern is None or pattern.casefold() in name.casefold()


def run_tests(paths, *, stdout=None, stderr=None, limits: dict | None = None,
              pattern: str | None = None) -> int:
    """Run every test file under ``paths`` (one path or several: files and directories);
    print the report; return the exit status.

    stdout is the reference's ``sense test`` report, unchanged for one path and no pattern;
    stderr gains, for every failure and file error, its ``FILE:LINE:COL: KIND: message``.
    ``pattern`` (``-k``): only the test blocks whose names contain it run (selects); the others
    are skipped where they stand and counted as deselected in the summary.
    ``limits`` (VM keywords, over the environment's) apply to each file afresh.
    """
    from sensevm.cli.running import run_limits
    from sensevm.cli.running import load_path
    from sensevm.runtime.vm import VM
    from sensevm.world import install
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    if isinstance(paths, str):
        paths = [paths]
    limits = run_limits(stderr, limits)
    if limits is None:
        return 2
    missing = [path for path in paths if not os.path.exists(path)]
    if missing:
        for path in missing:
            stderr.write(f"SenseError: no such file or directory: {path}\n")
        return 1
    files: list[str] = []
    for path in paths:
        found = find_test_files(path)
        if not found:
            stdout.write(f"no test files found under {path} (looked for test_*.sns / "
                         f"*_test.sns)\n")
        files.extend(file for file in found if file not in files)
    if not files:
        return 0
    passed = failed = errored = deselected = 0
    for file in files:
        stdout.write(f"{file}\n")
        vm = None
        try:
            verified, _ = load_path(file)
            install()
            vm = VM(verified, stdout=stdout, **limits)
            if pattern is not None:
                vm.test_filter = lambda name: selects(pattern, name)
            vm.run()
        except SenseError as err:
            errored += 1
            stdout.flush()
            stderr.write(f"  ERROR  {err.text}\n")
            stderr.write(f"{located(err)}\n")
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
                stdout.flush()
                stderr.write(f"{located(result.error, result.name)}\n")
                stderr.flush()
        if vm is not None:
            deselected += vm.tests_skipped
        stdout.write("\n")
    summary = (f"{_plural(len(files), 'file')}, {_plural(passed + failed, 'test')}: "
               f"{passed} passed, {failed} failed")
    if pattern is not None:
        summary += f" ({deselected} deselected by -k {pattern!r})"
    stdout.write(summary + "\n")
    stdout.flush()
    return 1 if failed or errored else 0
