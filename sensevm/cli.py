"""The ``sensevm`` command: run a .snb (or .sns) program."""

from __future__ import annotations

import os
import sys

import click

from .errors import SenseError, SnbFormatError, VerifyError



def stale_source(path: str, source_hash: bytes):
    """The sibling .sns of a .snb file if its text no longer matches the hash in the header."""
    import hashlib
    if not path.endswith(".snb"):
        return None
    source = path[:-4] + ".sns"
    try:
        with open(source, "rb") as fh:
            text = fh.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if text.startswith("\ufeff"):
        text = text[1:]
    return None if hashlib.sha256(text.encode("utf-8")).digest() == source_hash else source


def run_file(path: str, *, dry_run: bool = False, stdout=None, stderr=None,
             audit_log: str | None = None, state_dir: str | None = None) -> int:
    """Run ``path`` as ``sensevm run`` does; return the exit status.

    With ``audit_log``, every audit record is also appended durably to that file (see
    sensevm.audit.AuditFile); a log that cannot be opened stops the run before it starts.
    """
    from .diagnostics import report
    from .loader import load_path
    from .vm import VM
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    try:
        verified, sources = load_path(path)
    except SenseError as err:
        report(err, {}, stderr)
        return 1
    except (SnbFormatError, VerifyError) as exc:
        stderr.write(f"{path}: {type(exc).__name__}: {exc}\n")
        return 1
    stale = stale_source(path, verified.program.source_hash)
    if stale:
        stderr.write(f"warning: {path} is older than {stale}, which has changed since it was "
                     f"built (rebuild with: sensec build {stale})\n")
    audit = _open_audit(audit_log, stderr)
    if audit is None:
        return 1
    vm = VM(verified, stdout=stdout, dry_run=dry_run, audit=audit, state_dir=state_dir)
    return _guarded(vm.run, audit, sources, stdout, stderr)


def _open_audit(audit_log, stderr):
    """The run's audit log, durable if asked; None (after saying why) if it cannot be opened."""
    from .audit import AuditFile, AuditLog, AuditLogError
    if audit_log is None:
        return AuditLog()
    try:
        return AuditLog(sink=AuditFile(audit_log))
    except AuditLogError as exc:
        stderr.write(f"{exc}\n")
        return None


def _guarded(body, audit, sources, stdout, stderr, error_path=None) -> int:
    """Run ``body``; render a Sense error, stop on an audit failure; always close the log."""
    from .audit import AuditLogError
    from .diagnostics import report
    try:
        body()
    except SenseError as err:
        err.path = err.path or error_path
        stdout.flush()
        report(err, sources, stderr)
        return 1
    except AuditLogError as exc:
        # A record that cannot be made durable stops the run: nothing more happens unaudited.
        stdout.flush()
        stderr.write(f"{exc}\n")
        return 1
    finally:
        audit.close()
    stdout.flush()
    return 0


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sense-compiled", prog_name="sensevm")
def main():
    """Run Sense programs: .snb bytecode built by sensec, or .sns source compiled in memory."""


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--dry-run", is_flag=True, help="Skip action bodies and rollbacks; print a summary.")
@click.option("--audit-log", "audit_log", type=click.Path(), default=None,
              help="Also append every audit record to this file as a hash-chained JSON line.")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              help="Save every paused agent here, to continue later with `sensevm resume`.")
@click.option("--tier", type=click.Choice(["1", "2", "auto"]), default=None,
              help="Force an execution tier: 1 = interpreter only, 2 = compile every code "
                   "object it can, auto (default) = compile hot code. Same as SENSE_TIER.")
def run(file, dry_run, audit_log, state_dir, tier):
    """Verify and run FILE (.snb, or .sns compiled in memory)."""
    if tier is not None:
        os.environ["SENSE_TIER"] = tier
    sys.exit(run_file(file, dry_run=dry_run, audit_log=audit_log, state_dir=state_dir))


def resume_agent(directory: str, name: str, answer: str, *, stdout=None, stderr=None,
                 audit_log: str | None = None) -> int:
    """Continue the agent saved in ``directory`` with ``answer``; return the exit status."""
    import json
    import os
    from .persist import load_agent
    from .verify import load_verified
    from .vm import VM
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    state_path = os.path.join(directory, f"{name}.json")
    try:
        with open(os.path.join(directory, "program.snb"), "rb") as fh:
            verified = load_verified(fh.read())
        with open(state_path, encoding="utf-8") as fh:
            state = json.load(fh)
    except FileNotFoundError as exc:
        stderr.write(f"sensevm: no saved agent '{name}' in {directory} ({exc.filename} is missing)\n")
        return 1
    except (OSError, ValueError) as exc:
        stderr.write(f"sensevm: cannot read the saved agent '{name}': {exc}\n")
        return 1
    except (SnbFormatError, VerifyError) as exc:
        stderr.write(f"{directory}/program.snb: {type(exc).__name__}: {exc}\n")
        return 1
    audit = _open_audit(audit_log, stderr)
    if audit is None:
        return 1
    sources = {s.path: s.text for s in verified.program.sources}
    vm = VM(verified, stdout=stdout, audit=audit, state_dir=directory)

    def body():
        try:
            agent = load_agent(vm, state)
        except (KeyError, ValueError, IndexError, TypeError, AttributeError) as exc:
            raise SenseError(f"the saved agent '{name}' is malformed "
                             f"({type(exc).__name__}: {exc})", located=False) from None
        vm.resume_saved(agent, answer)
    return _guarded(body, audit, sources, stdout, stderr, error_path=state_path)


@main.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.argument("agent")
@click.argument("answer")
@click.option("--audit-log", "audit_log", type=click.Path(), default=None,
              help="Append the audit records of this continuation to this log.")
def resume(directory, agent, answer, audit_log):
    """Continue AGENT, saved in DIRECTORY by `run --state-dir`, with ANSWER as pause()'s result."""
    sys.exit(resume_agent(directory, agent, answer, audit_log=audit_log))


def verify_audit_file(path: str, *, stdout=None, stderr=None) -> int:
    """Check the hash chain of the audit log at ``path`` as ``sensevm audit verify`` does."""
    from .audit import AuditLogError, verify_chain
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    try:
        result = verify_chain(path)
    except AuditLogError as exc:
        stderr.write(f"{exc}\n")
        return 1
    (stdout if result.ok else stderr).write(result.message() + "\n")
    return 0 if result.ok else 1


@main.group()
def audit():
    """Inspect durable audit logs written by `sensevm run --audit-log`."""


@audit.command("verify")
@click.argument("file", type=click.Path(dir_okay=False))
def audit_verify(file):
    """Check FILE's hash chain; name the first broken line."""
    sys.exit(verify_audit_file(file))


@main.command("test")
@click.argument("path", type=click.Path())
def test_command(path):
    """Run the test blocks of PATH (a file, or test_*.sns / *_test.sns under a directory)."""
    from .testrunner import run_tests
    sys.exit(run_tests(path))


def entry() -> None:
    """Console-script entry: no Python traceback ever reaches the user."""
    try:
        main(prog_name="sensevm")
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except Exception as exc:  # a bug in sensevm itself: say so plainly, exit 70 (EX_SOFTWARE)
        internal_error("sensevm", exc)


def internal_error(prog: str, exc: BaseException) -> None:
    import os
    if os.environ.get("SENSE_DEBUG"):
        raise exc
    sys.stderr.write(f"{prog}: internal error: {type(exc).__name__}: {exc}\n"
                     f"(this is a bug in {prog}; set SENSE_DEBUG=1 to see where)\n")
    sys.exit(70)


@main.command()
@click.option("--dry-run", is_flag=True,
              help="Skip action bodies and rollbacks, as `run --dry-run` does.")
def repl(dry_run):
    """Start an interactive Sense session (or run piped input line by line).

    When stdin or stdout is not a terminal, reads the input to the end without prompts or
    colour, errors on stderr; exit status 1 if any input failed, else 0.
    """
    from .repl import main as repl_main
    sys.exit(repl_main(dry_run=dry_run))
