"""Loads a program to run: a .snb file through the loader and verifier, or a .sns file compiled in memory first."""

from __future__ import annotations

from .files import read_bytes
from .snb import MAGIC


def is_snb(data: bytes) -> bool:
    return data.startswith(MAGIC)


def load_path(path: str, import_root: str | None = None):
    """Return ``(VerifiedProgram, sources)`` for a .snb or .sns file.

    A source file is compiled in memory (the compiler is imported only here, lazily) and then
    goes through exactly the same dump, load and verify as a file built by ``sensec build``
    (its imports read from under ``import_root``, default its own directory).
    A file named ``.snb`` is bytecode whatever its first bytes: a damaged magic number is an
    SnbFormatError, not an attempt to compile the bytes as source.
    """
    from .verify import load_verified
    data = read_bytes(path)
    if not is_snb(data) and not path.endswith(".snb"):
        from sensec.driver import compile_file
        from .snb import dump
        data = dump(compile_file(path, defer_import_errors=True, import_root=import_root))
    verified = load_verified(data)
    sources = {s.path: s.text for s in verified.program.sources}
    return verified, sources
