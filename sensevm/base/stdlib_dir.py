"""Where the standard library's ``.sns`` files are: the directory ``import std.X`` reads.

An installed wheel holds them in ``sensevm/stdlib/`` (pyproject.toml maps the repository's
top-level ``stdlib/`` there); a source tree has them in ``stdlib/`` beside the ``sensevm``
package. Both are found relative to this file, never relative to a program or the working
directory, so a ``std/`` directory next to a program cannot stand in for the library.
"""

from __future__ import annotations

import os

_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))     # .../sensevm
_found = None


def stdlib_dir() -> str:
    """The real path of the standard library's directory."""
    global _found
    if _found is None:
        installed = os.path.join(_here, "stdlib")
        if os.path.isfile(os.path.join(installed, "math.sns")):
            _found = os.path.realpath(installed)
        else:
            _found = os.path.realpath(os.path.join(os.path.dirname(_here), "stdlib"))
    return _found


def in_stdlib(path) -> bool:
    """Whether ``path`` (a source file's path) is a file of the standard library."""
    if not path or path.startswith("<"):
        return False
    root = stdlib_dir()
    return os.path.realpath(path).startswith(root + os.sep)


def modules() -> list:
    """The names of the library's modules (``math`` for ``std.math``), sorted."""
    try:
        names = os.listdir(stdlib_dir())
    except OSError:
        return []
    return sorted(name[:-4] for name in names if name.endswith(".sns") and name[:-4].isidentifier())
