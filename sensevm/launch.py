"""Starts ``sensevm``: ``sensevm run FILE`` goes straight to the VM; everything else to the click CLI.

Start-up time is part of every run, and importing click (and building the command tree) costs
more than loading, verifying and running a small program. So the console script and
``python -m sensevm`` enter here, and the invocations that matter for speed, ``run FILE`` with
at most the limit options, ``--second-look`` and ``--dry-run`` (the benchmarks' command lines),
are handled without click. They behave exactly as the click command would; any other command
line (other options, ``--help``, a missing argument, a path click would refuse, shell
completion) goes to :mod:`sensevm.cli`, which prints click's own usage and error messages.

``run_file`` and its helpers live here, not in :mod:`sensevm.cli`, so that the fast path never
imports click; the click commands use them from here.
"""

from __future__ import annotations

import os
import sys

from .errors import SenseError, SnbFormatError, VerifyError


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
    from .digest import sha256
    if text.startswith("\ufeff"):
        text = text[1:]
    return None if sha256(text.encode("utf-8")).digest() == source_hash else source


def run_limits(stderr, given: dict | None = None) -> dict | None:
    """The run's resource limits (docs/limits.md): the environment's, overridden by ``given``
    (the command line's); None, after saying why, when the environment has a bad one."""
    from .limits import from_env
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
             import_root: str | None = None) -> int:
    """Run ``path`` as ``sensevm run`` does; return the exit status.

    With ``audit_log``, every audit record is also appended durably to that file (see
    sensevm.audit.AuditFile); a log that cannot be opened stops the run before it starts.
    ``limits`` are VM keywords (max_steps, max_depth, max_string, max_array, timeout) over
    the environment's; a program stopped by one exits with status 4.
    """
    from .diagnostics import report
    from .loader import load_path
    from .vm import VM
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    limits = run_limits(stderr, limits)
    if limits is None:
        return 2
    try:
        verified, sources = load_path(path, import_root)
    except SenseError as err:
        report(err, {}, stderr)
        return 1
    except (SnbFormatError, VerifyError) as exc:
        from .diagnostics import report_file_error
        report_file_error(path, exc, stderr)
        return 1
    stale = stale_source(path, verified.program.source_hash)
    if stale:
        stderr.write(f"warning: {path} is older than {stale}, which has changed since it was "
                     f"built (rebuild with: sensec build {stale})\n")
    audit = _open_audit(audit_log, stderr)
    if audit is None:
        return 1
    vm = VM(verified, stdout=stdout, dry_run=dry_run, audit=audit, state_dir=state_dir,
            second_look=second_look, dry_run_allow=dry_run_allow, **limits)
    vm.set_request(request)
    _session_host(vm, path, approve, session_log, stdin, stderr)
    return _guarded(vm.run, audit, sources, stdout, stderr)


def _session_host(vm, path: str, approve, session_log, stdin, stderr) -> None:
    """How this run decides a session its program left undecided, and where sessions log."""
    vm.session_log_path = session_log or os.path.join(
        os.path.dirname(os.path.abspath(path)), ".sense", "sessions.wal")
    stdin = stdin if stdin is not None else sys.stdin

    def approver(session, manifest, shown):
        if approve is not None:
            return approve                  # confirm() refuses it unless it is this manifest
        if not (hasattr(stdin, "isatty") and stdin.isatty()):
            return None                     # no one to ask: fail closed
        stderr.write(shown + f"Run exactly these {len(manifest.entries)} irreversible "
                             "action(s)? Type yes to approve, anything else aborts: ")
        stderr.flush()
        return manifest.hash if stdin.readline().strip().lower() == "yes" else None

    vm.session_approver = approver


def _open_audit(audit_log, stderr):
    """The run's audit log, durable if asked; None (after saying why) if it cannot be opened."""
    from .audit import AuditLog
    if audit_log is None:
        return AuditLog()
    from .audit import AuditFile, AuditLogError
    try:
        return AuditLog(sink=AuditFile(audit_log))
    except AuditLogError as exc:
        stderr.write(f"{exc}\n")
        return None


def _guarded(body, audit, sources, stdout, stderr, error_path=None) -> int:
    """Run ``body``; render a Sense error, stop on an audit failure; always close the log."""
    from .audit import AuditLogError
    try:
        body()
    except SenseError as err:
        from .diagnostics import report
        err.path = err.path or error_path
        stdout.flush()
        report(err, sources, stderr)
        if err.kind == "SenseLimitError":
            from .limits import LIMIT_EXIT
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


def internal_error(prog: str, exc: BaseException) -> None:
    if os.environ.get("SENSE_DEBUG"):
        raise exc
    sys.stderr.write(f"{prog}: internal error: {type(exc).__name__}: {exc}\n"
                     f"(this is a bug in {prog}; set SENSE_DEBUG=1 to see where)\n")
    sys.exit(70)


def _fast_run_args(args: list[str]):
    """(FILE, limits, second_look, dry_run) if ``args`` is ``run FILE`` with at most the limit
    options (``--max-steps N`` or ``--max-steps=N`` ..., before or after FILE), ``--second-look
    on|off`` and the ``--dry-run`` flag, exactly as click would accept them, else None.

    Mirrors ``click.Path(dir_okay=False)`` (readable by default, need not exist): a directory or
    an existing unreadable file is left to click, which refuses it with its usage message.
    Any other argument starting with '-' ('--help', '--dry-run=yes', '--'), a value that is not
    a valid limit, or a second argument goes to click, which says what is wrong.
    """
    if len(args) < 2 or args[0] != "run":
        return None
    # click answers shell-completion requests before parsing anything.
    if os.environ.get("_SENSEVM_COMPLETE"):
        return None
    path = None
    limits = {}
    second_look = True
    dry_run = False
    if len(args) == 2:
        path = args[1]
    else:
        from .limits import OPTIONS, parse
        i = 1
        while i < len(args):
            arg = args[i]
            if arg == "--dry-run":              # a flag: click refuses "--dry-run=..."
                dry_run = True
            elif arg.startswith("-"):
                option, eq, value = arg.partition("=")
                name = OPTIONS.get(option)
                if name is None and option != "--second-look":
                    return None
                if not eq:
                    i += 1
                    if i == len(args):
                        return None
                    value = args[i]
                if name is None:                # click.Choice(["on", "off"]): exact words
                    if value not in ("on", "off"):
                        return None
                    second_look = value == "on"     # the last one wins, as in click
                    i += 1
                    continue
                try:
                    limits[name] = parse(name, value)     # the last one wins, as in click
                except ValueError:
                    return None
            elif path is None:
                path = arg
            else:
                return None
            i += 1
        if path is None:
            return None
    if not path or path.startswith("-"):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return path, limits, second_look, dry_run   # click passes a missing path on
    except ValueError:
        return None            # e.g. an embedded NUL: let click have its say
    if (st.st_mode & 0o170000) == 0o040000 or not os.access(path, os.R_OK):
        return None
    return path, limits, second_look, dry_run


def _run_as_click_would(path: str, limits: dict, second_look: bool = True,
                        dry_run: bool = False) -> None:
    """``run_file(path)`` with the exit handling of click's standalone mode."""
    import errno
    try:
        code = run_file(path, limits=limits, second_look=second_look, dry_run=dry_run)
    except (EOFError, KeyboardInterrupt):
        # click: echo() a newline, raise Abort, which prints "Aborted!" and exits 1.
        sys.stderr.write("\n")
        sys.stderr.flush()
        sys.stderr.write("Aborted!\n")
        sys.stderr.flush()
        sys.exit(1)
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        # What click does on a broken pipe: silence the flush at exit, exit 1.
        from click.utils import PacifyFlushWrapper
        sys.stdout = PacifyFlushWrapper(sys.stdout)
        sys.stderr = PacifyFlushWrapper(sys.stderr)
        sys.exit(1)
    # The run is over and its audit log closed (_guarded). The interpreter's last act would be
    # a full collection over every object still alive, which for a short run costs more than
    # the run; freezing them skips that walk. Everything is still freed as usual at exit.
    import gc
    gc.freeze()
    sys.exit(code)


def guarded(prog: str, main) -> None:
    """Run ``main()`` as a console script's whole body: no Python traceback ever reaches the
    user (Ctrl-C exits 130 saying so; an exception is a bug in ``prog``, exit 70)."""
    try:
        main()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except Exception as exc:  # a bug in prog itself: say so plainly, exit 70 (EX_SOFTWARE)
        internal_error(prog, exc)


def _main() -> None:
    fast = _fast_run_args(sys.argv[1:])
    if fast is not None:
        _run_as_click_would(*fast)
    from .cli import main
    main(prog_name="sensevm")


def entry() -> None:
    """Console-script entry: ``run FILE`` without click, anything else through it."""
    guarded("sensevm", _main)
