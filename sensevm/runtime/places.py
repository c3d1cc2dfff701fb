"""Where a running program's own files are: the one base that program-relative paths resolve against.

A program's files (the default and the relative persistent memory files, the scripted model's
JSON script, the sessions' write-ahead log) resolve against **the program's directory**: the
directory of the FILE given to ``sensevm run`` (a ``.snb``, or a ``.sns`` compiled in memory),
never the working directory. A module's files resolve against the module's own place under that
directory. ``sensec build`` writes the ``.snb`` beside its source, so for a built program this is
also the directory of its source.

A ``.snb`` records its source paths as they were given to ``sensec build`` (relative to the
working directory of the build, which the file does not record), so a recorded path is rebased:
its place relative to the entry source's recorded directory, joined to the program's directory.
Code with no file (the REPL, ``sensevm run -``) has the working directory as its base.
"""

from __future__ import annotations

import os


def rebase(recorded: str | None, entry: str | None, program_dir: str | None) -> str | None:
    """The real location of the source file recorded as ``recorded`` in a program whose entry
    source was recorded as ``entry`` and whose FILE is in ``program_dir``.

    Without ``program_dir`` (a program run in-process from its source) or for a pseudo-file
    (``<stdin>``) the recorded path is returned unchanged, as it is right where it was compiled.
    """
    if (recorded is None or entry is None or program_dir is None or recorded.startswith("<")
            or entry.startswith("<") or os.path.isabs(recorded) != os.path.isabs(entry)):
        return recorded
    try:
        rel = os.path.relpath(recorded, os.path.dirname(entry) or os.curdir)
    except ValueError:          # different drives (Windows)
        return recorded
    return os.path.normpath(os.path.join(program_dir, rel))


def entry_path(program) -> str | None:
    """The recorded path of ``program``'s entry source."""
    try:
        return program.sources[program.codes[program.entry].source].path
    except (AttributeError, IndexError, TypeError):
        return program.sources[0].path if getattr(program, "sources", None) else None


def source_file(vm, recorded: str | None) -> str | None:
    """Where the source ``recorded`` in ``vm``'s program really is (see the module docstring).

    ``vm.program_dir`` is set by whoever runs a FILE (sensevm.cli.running)."""
    return rebase(recorded, entry_path(vm.program), getattr(vm, "program_dir", None))


def base_dir(vm, recorded: str | None) -> str:
    """The absolute directory that paths written in the source ``recorded`` resolve against."""
    where = source_file(vm, recorded)
    if where is None or where.startswith("<"):
        return os.path.abspath(getattr(vm, "program_dir", None) or os.curdir)
    return os.path.dirname(os.path.abspath(where))


def resolve(vm, recorded: str | None, path: str) -> str:
    """``path`` as written in the source ``recorded``, made absolute against its base."""
    if os.path.isabs(path):
        return path
    return os.path.normpath(os.path.join(base_dir(vm, recorded), path))
