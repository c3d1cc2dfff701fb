"""Starts ``sensevm``: ``sensevm run FILE`` goes straight to the VM; everything else to the click CLI.

Start-up time is part of every run, and importing click (and building the command tree) costs
more than loading, verifying and running a small program. So the console script and
``python -m sensevm`` enter here, and the invocations that matter for speed, ``run FILE`` with
at most the limit options, ``--second-look`` and ``--dry-run`` (the benchmarks' command lines),
are handled without click. They behave exactly as the click command would; any other command
line (other options, ``--help``, a missing argument, a path click would refuse, shell
completion) goes to :mod:`sensevm.cli.commands`, which prints click's own usage and error messages.

Running a file is sensevm.cli.running's job, shared by the fast path and the click commands
(which this module imports only when it hands a command line to click).
"""

from __future__ import annotations

import os
import sys

from sensevm.base.diagnostics import guarded
from sensevm.cli.running import run_file


def _fast_run_args(args: list[str]):
    """(FILE, limits, second_look, dry_run, program_args) if ``args`` is ``run FILE`` with at
    most the limit options (``--max-steps N`` or ``--max-steps=N`` ..., before or after FILE),
    ``--second-look on|off`` and the ``--dry-run`` flag, exactly as click would accept them,
    then optionally ``-- ARG...``; else None.

    Mirrors ``click.Path(dir_okay=False)`` (readable by default, need not exist): a directory or
    an existing unreadable file is left to click, which refuses it with its usage message.
    Any other argument starting with '-' ('--help', '--dry-run=yes'), a value that is not
    a valid limit, or a second argument goes to click, which says what is wrong. What follows
    the first ``--`` is the program's arguments (std.env.args()), as the click command splits.
    """
    if len(args) < 2 or args[0] != "run":
        return None
    program_args = ()
    if "--" in args:
        cut = args.index("--")
        args, program_args = args[:cut], tuple(args[cut + 1:])
        if len(args) < 2:
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
        from sensevm.runtime.limits import OPTIONS, parse
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
        return path, limits, second_look, dry_run, program_args   # click passes it on
    except ValueError:
        return None            # e.g. an embedded NUL: let click have its say
    if (st.st_mode & 0o170000) == 0o040000 or not os.access(path, os.R_OK):
        return None
    return path, limits, second_look, dry_run, program_args


def _run_as_click_would(path: str, limits: dict, second_look: bool = True,
                        dry_run: bool = False, program_args=()) -> None:
    """``run_file(path)`` with the exit handling of click's standalone mode."""
    import errno
    try:
        code = run_file(path, limits=limits, second_look=second_look, dry_run=dry_run,
                        program_args=program_args)
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
    # The run is over and its audit log closed (running.run_guarded). The interpreter's last act would be
    # a full collection over every object still alive, which for a short run costs more than
    # the run; freezing them skips that walk. Everything is still freed as usual at exit.
    import gc
    gc.freeze()
    sys.exit(code)


def _terminal() -> bool:
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):    # closed or replaced streams
        return False


def _main() -> None:
    fast = _fast_run_args(sys.argv[1:])
    if fast is not None:
        _run_as_click_would(*fast)
    if not sys.argv[1:] and _terminal() and not os.environ.get("_SENSEVM_COMPLETE"):
        # `sensevm` alone, typed in a terminal: the REPL (as `python` and `sense` do). Piped
        # or redirected, it prints the usage as before.
        from sensevm.cli.repl import main as repl_main
        sys.exit(repl_main())
    from sensevm.cli.commands import main
    main(prog_name="sensevm")


def entry() -> None:
    """Console-script entry: ``run FILE`` without click, anything else through it."""
    guarded("sensevm", _main)
