"""Starts ``sensec``: ``sensec build FILE [-o OUT]`` goes straight to the compiler; everything else to the click CLI.

Importing click and building its command tree is a third of a small build. So the console
script and ``python -m sensec`` enter here, and the command that is run most, ``build`` with a
file and at most an output path, is handled without click. It behaves exactly as the click
command does; any other command line (``--help``, another option, a missing or second
argument, a path click would refuse, shell completion) goes to :mod:`sensec.cli`, which prints
click's own usage and error messages.

Building a file is sensec.build's job, shared by the fast path and the click command (which this
module imports only when it hands a command line to click).
"""

from __future__ import annotations

import os
import sys

from sensevm.base.diagnostics import guarded
from .build import build_file


def _path_click_accepts(path: str) -> bool:
    """What ``click.Path(dir_okay=False)`` lets through: a path that does not exist, or an
    existing readable non-directory. Anything else (or a path that only looks like an option)
    is left to click, which refuses it with its usage message."""
    if not path or path.startswith("-"):
        return False
    try:
        st = os.stat(path)
    except OSError:
        return True
    except ValueError:
        return False            # e.g. an embedded NUL
    return (st.st_mode & 0o170000) != 0o040000 and os.access(path, os.R_OK)


def _fast_build_args(args: list[str]):
    """(FILE, OUTPUT or None) if ``args`` is ``build FILE`` with at most ``-o/--output OUT``
    (before or after FILE, ``--output=OUT`` or ``-oOUT`` too; the last one wins, as in click),
    every path one click would accept; else None."""
    if len(args) < 2 or args[0] != "build" or os.environ.get("_SENSEC_COMPLETE"):
        return None
    file = output = None
    i = 1
    while i < len(args):
        arg = args[i]
        if arg in ("-o", "--output"):
            if i + 1 == len(args):
                return None
            output = args[i + 1]
            i += 2
            continue
        if arg.startswith("--output="):
            output = arg[len("--output="):]
        elif arg.startswith("-o") and len(arg) > 2 and not arg.startswith("--"):
            output = arg[2:]
        elif arg.startswith("-") or file is not None:
            return None
        else:
            file = arg
        i += 1
    if file is None or not _path_click_accepts(file):
        return None
    if output is not None and not _path_click_accepts(output):
        return None
    return file, output


def _main() -> None:
    fast = _fast_build_args(sys.argv[1:])
    if fast is not None:
        sys.exit(build_file(*fast))
    from .cli import main
    main(prog_name="sensec")


def entry() -> None:
    """Console-script entry: ``build FILE [-o OUT]`` without click, anything else through it."""
    guarded("sensec", _main)
