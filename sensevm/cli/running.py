"""Runs a program file for a command: load, limits, audit log, session approval, exit status.

A .snb file is loaded and verified; a .sns file is compiled in memory first.

The fast path of ``sensevm run FILE`` (launch.py) and the click commands (commands.py) both run
files through here, so neither imports the other, and the fast path never imports click.
"""

from __future__ import annotations

import os
import sys

from sensevm.base.errors import SenseError, SnbFormatError, VerifyError
from sensevm.base.files import read_bytes
from sensevm.bytecode.snb import is_snb


def load_path(path: str, import_root: str | None = None):
    """Return ``(VerifiedProgram, sources)`` for a .snb or .sns file.

    A source file is compiled in memory (the compiler is imported only here, lazily) and then
    goes through exactly the same dump, load and verify as a file built by ``sensec build``
    (its imports read from under ``import_root``, default its own directory).
    A file named ``.snb`` is bytecode whatever its first bytes: a damaged magic number is an
    SnbFormatError, not an attempt to compile the bytes as source.
    """
    from sensevm.bytecode.verify import load_verified
    if path == "-":
        return _load_stdin(import_root)
    data = read_bytes(path)
    if not is_snb(data) and not path.endswith(".snb"):
        from sensec.driver import compile_file
        from sensevm.bytecode.snb import dump
        data = dump(compile_file(path, defer_import_errors=True, import_root=import_root))
    verified = load_verified(data)
    sources = {s.path: s.text for s in verified.program.sources}
    return verified, sources


STDIN_PATH = "<stdin>"
_STDIN: dict = {}       # the source read from stdin, for the caret of an error found loading it


def _load_stdin(import_root):
    """``sensevm run -``: the program (bytecode, or source compiled as ``<stdin>``, its
    imports read from under the working directory) is the standard input, read to its end."""
    from sensevm.bytecode.verify import load_verified
    data = sys.stdin.buffer.read()
    if not is_snb(data):
        from sensec.driver import compile_source, decode_source
        from sensevm.bytecode.snb import dump
        text = _STDIN[STDIN_PATH] = decode_source(data, STDIN_PATH)
        data = dump(compile_source(text, STDIN_PATH, defer_import_errors=True,
                                   import_root=import_root))
    verified = load_verified(data)
    return verified, {s.path: s.text for s in verified.program.sources}


def stale_source(path: str, source_hash: bytes):
    """The sibling .sns of a .snb file if its text no longer matches the hash in the header."""
    if not path.endswith(".snb"):
        return None
    source = path[:-4] + ".sns"
    try:
        with open(source, "rb") as fh:
            text = fh.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    from sensevm.base.digest import sha256
    if text.startswith("\ufeff"):
        text = text[1:]
    return None if sha256(text.encode("utf-8")).digest() == source_hash else source


def run_limits(stderr, given: dict | None = None) -> dict | None:
    """The run's resource limits (docs/limits.md): the environment's, overridden by ``given``
    (the command line's); None, after saying why, when the environment has a bad one."""
    from sensevm.runtime.limits import from_env
    try:
        limits = from_env(os.environ)
    except ValueError as exc:
        stderr.write(f"sensevm: {exc}\n")
        return None
    limits.update(given or {})
    return limits


def run_file(path: str, *, dry_run: bool = False, stdout=None, stderr=None,
             audit_log: str | None = None, state_dir: str | None = None,
             approve: str | None = None, session_log: str | None = None, stdin=None,
             request: str | None = None, second_look: bool = True,
             limits: dict | None = None, dry_run_allow=(),
             import_root: str | None = None, program_args=()) -> int:
    """Run ``path`` as ``sensevm run`` does; return the exit status.

    With ``audit_log``, every audit record is also appended durably to that file (see
    sensevm.guard.audit.AuditFile); a log that cannot be opened stops the run before it starts.
    ``limits`` are VM keywords (max_steps, max_depth, max_string, max_array, timeout) over
    the environment's; a program stopped by one exits with status 4. ``program_args`` are
    what std.env's args() returns (the command line's words after ``--``).
    """
    from sensevm.base.diagnostics import report
    from sensevm.runtime.vm import VM
    from sensevm.world import install
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    limits = run_limits(stderr, limits)
    if limits is None:
        return 2
    try:
        verified, sources = load_path(path, import_root)
    except SenseError as err:
        report(err, dict(_STDIN) if path == "-" else {}, stderr)
        return 1
    except (SnbFormatError, VerifyError) as exc:
        from sensevm.base.diagnostics import report_file_error
        report_file_error(STDIN_PATH if path == "-" else path, exc, stderr)
        return 1
    stale = stale_source(path, verified.program.source_hash)
    if stale:
        stderr.write(f"warning: {path} is older than {stale}, which has changed since it was "
                     f"built (rebuild with: sensec build {stale})\n")
    audit = open_audit(audit_log, stderr)
    if audit is None:
        return 1
    install()
    vm = VM(verified, stdout=stdout, dry_run=dry_run, audit=audit, state_dir=state_dir,
            second_look=second_look, dry_run_allow=dry_run_allow, **limits)
    vm.set_request(request)
    vm.set_args(program_args)
    session_host(vm, path, approve, session_log, stdin, stderr)
    status = run_guarded(vm.run, audit, sources, stdout, stderr)
    paused_note(vm, stderr, path)
    return status


def paused_note(vm, stderr, path: str | None = None) -> None:
    """A run that ends with agents paused (on ask_human or pause) says so on stderr: each agent
    and its question, and how to keep and answer it; stdout and the exit status are the run's.
    With --state-dir, where each was saved and the command that answers it; without, the
    command that would have kept it (``path``: the program run)."""
    paused = [a for a in getattr(vm, "agents", ()) if a.status == "paused"]
    if not paused:
        return
    from shlex import quote     # (only now: every run ends here, most with no agent paused)
    from sensevm.base.diagnostics import printable
    lines = [f"note: the run ended with {len(paused)} agent{'s' if len(paused) != 1 else ''} "
             "paused, waiting for an answer:"]
    for agent in paused:
        reason = agent.pause_reason
        asks = f"asks: {printable(str(reason))}" if reason not in (None, "") else "paused"
        lines.append(f"  agent '{printable(agent.name)}' {asks}")
    kept = [a for a in paused if not a.decl.is_async]
    if vm.state_dir is not None:
        for agent in kept:
            saved = os.path.join(vm.state_dir, f"{agent.name}.json")
            lines.append(f"  saved in {printable(saved)}; answer it with: sensevm resume "
                         f"{quote(vm.state_dir)} {quote(agent.name)} ANSWER")
    elif kept:
        program = quote(path) if path else "FILE"
        lines.append(f"  nothing was saved: to keep paused agents and answer later, run "
                     f"'sensevm run {program} --state-dir DIR', then "
                     f"'sensevm resume DIR {quote(kept[0].name)} ANSWER'")
    if len(kept) < len(paused):
        lines.append("  (an async agent is not saved: it can be answered only in its own run)")
    stderr.write("\n".join(lines) + "\n")
    stderr.flush()


def program_dir(path: str) -> str | None:
    """The program's directory for FILE ``path`` (for ``-``, the standard input, the working
    directory)."""
    return os.getcwd() if path == "-" else os.path.dirname(os.path.abspath(path))


def session_host(vm, path: str, approve, session_log, stdin, stderr) -> None:
    """How this run decides a session its program left undecided, where sessions log, and
    the program's directory."""
    # The base of the program's own relative files (sensevm.runtime.places): FILE's directory,
    # whatever the working directory; the sessions' log defaults to a place under it too.
    vm.program_dir = program_dir(path)
    vm.session_log_path = session_log or os.path.join(
        vm.program_dir, ".sense", "sessions.wal")
    stdin = stdin if stdin is not None else sys.stdin

    def approver(session, manifest, shown):
        if approve is not None:
            return approve                  # confirm() refuses it unless it is this manifest
        if not (hasattr(stdin, "isatty") and stdin.isatty()):
            return None                     # no one to ask: fail closed
        return ask_at_terminal(manifest, shown, stdin, stderr)

    vm.session_approver = approver


_TRIES = 3      # a mistyped hash is said so and asked again, this many times in all


def ask_at_terminal(manifest, shown, stdin, stderr):
    """Show the manifest and ask: ``yes`` or the whole hash approves (the hash returned),
    anything else declines (False). A hash typed short, or without its ``sha256:`` prefix, or
    another manifest's, is said so and asked again; only an exact answer approves."""
    import re
    whole = len(manifest.hash)
    stderr.write(shown)
    for _ in range(_TRIES):
        stderr.write(f"Run exactly these {len(manifest.entries)} irreversible action(s)? "
                     "Type yes (or the whole hash) to approve, anything else declines: ")
        stderr.flush()
        answer = stdin.readline().strip()
        if answer.lower() == "yes" or answer == manifest.hash:
            return manifest.hash
        if not re.fullmatch(r"(?:sha256:)?[0-9a-fA-F]{4,}|sha256:.*", answer):
            break
        if answer.startswith("sha256:") and len(answer) == whole:
            stderr.write("that is another manifest's hash, not this one's: nothing was "
                         "approved\n")
        elif not answer.startswith("sha256:"):
            stderr.write(f"that hash has no prefix: type all {whole} characters, starting "
                         "with sha256:\n")
        else:
            stderr.write(f"that is not the whole hash: type all {whole} characters, starting "
                         "with sha256:\n")
    stderr.write("declined: nothing irreversible ran\n")
    stderr.flush()
    return False


def open_audit(audit_log, stderr):
    """The run's audit log, durable if asked; None (after saying why) if it cannot be opened."""
    from sensevm.guard.audit import AuditLog
    if audit_log is None:
        return AuditLog()
    from sensevm.guard.audit import AuditFile, AuditLogError
    try:
        return AuditLog(sink=AuditFile(audit_log))
    except AuditLogError as exc:
        stderr.write(f"{exc}\n")
        return None


def run_guarded(body, audit, sources, stdout, stderr, error_path=None) -> int:
    """Run ``body``; render a Sense error, stop on an audit failure; always close the log."""
    from sensevm.guard.audit import AuditLogError
    try:
        body()
    except SenseError as err:
        from sensevm.base.diagnostics import report
        err.path = err.path or error_path
        stdout.flush()
        report(err, sources, stderr)
        if err.kind == "SenseLimitError":
            from sensevm.runtime.limits import LIMIT_EXIT
            return LIMIT_EXIT
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
