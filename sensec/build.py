"""``sensec build FILE``: compile, verify, write the .snb atomically (fast path and click alike)."""

from __future__ import annotations

import sys

from sensevm.base.errors import SenseError


def build_file(file: str, output: str | None, import_root: str | None = None) -> int:
    """Compile ``file`` (and its imports) to ``output`` (default: FILE with .snb), verified
    before it is written and written atomically; errors reported on stderr. Returns the exit
    status."""
    from sensevm.base.diagnostics import report
    from sensevm.base.files import atomic_write
    from sensevm.bytecode.snb import dump
    from sensevm.bytecode.verify import load_verified
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
