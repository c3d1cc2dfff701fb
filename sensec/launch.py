"""Starts ``sensec``: ``sensec build FILE [-o OUT]`` goes straight to the compiler; everything else to the click CLI.

Importing click and building its command tree is a third of a small build. So the console
script and ``python -m sensec`` enter here, and the command that is run most, ``build`` with a
file and at most an output path, is handled without click. It behaves exactly as the click
command does; any other command line (``--help``, another option, a missing or second
argument, a path click would refuse, shell completion) goes to :mod:`sensec.cli`, which prints
click's own usage and error messages.

``build_file`` lives here, not in :mod:`sensec.cli`, so that the fast path never imports click;
the click command calls it from here.
"""

from __future__ import annotations

import os
import sys

from sensevm.errors import SenseError
from sensevm.launch import guarded


def build_file(file: str, output: str | None, import_root: str | None = None) -> int:
    """Compile ``file`` (and its imports) to ``output`` (default: FILE with .snb), verified
    before it is written and written atomically; errors reported on stderr. Returns the exit
    status."""
    from sensevm.diagnostics import report
    from sensevm.files import atomic_write
    from sensevm.snb import dump
    from sensevm.verify import load_verified
    from .driver import compile_file, gc_paused
    with gc_paused(freeze=True):     # see gc_paused: collections here would free nothing
        try:
            program = compile_file(file, import_root=import_root)
        except SenseError as err:
            report(err, {})          # report() reads each error's source file for the caret
            return 1
        data = dump(program)
        del program                  # a large program's memory is not held twice while loading
        load_verified(data)          # never write a file the VM would refuse
    out = output or (file[:-4] if file.endswith(".sns") else file) + ".snb"
    try:
        atomic_write(out, data)
    except OSError as exc:
        sys.stderr.write(f"sensec: cannot write {out}: {exc.strerror}\n")
        return 1
    return 0


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
