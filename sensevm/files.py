"""File access shared by every command: reading with clean errors, atomic writes, durable appends."""

from __future__ import annotations

import os

from .errors import SenseError


def read_bytes(path: str) -> bytes:
    """The file's bytes; a missing or unreadable file is a SenseError naming it."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        raise SenseError(f"no such file or directory: {path}", path=path) from None
    except IsADirectoryError:
        raise SenseError(f"is a directory, not a source file: {path}", path=path) from None
    except OSError as exc:
        raise SenseError(f"cannot read {path}: {exc.strerror}", path=path) from None


def atomic_write(path: str, data: bytes) -> None:
    """Write ``data`` so that a crash leaves either the old file or the whole new one."""
    import tempfile   # here, not at the top: every `sensevm run` imports this module, few write
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)        # the rename itself must survive a crash too
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def append_line(fd: int, line: bytes, fsync: bool) -> None:
    """Append ``line`` and a newline to the file open on ``fd``, durably when ``fsync``.

    A short write is finished, so the line stays contiguous; an OSError is the caller's to
    report (for a log, it means no later record may be written).
    """
    data = line + b"\n"
    written = os.write(fd, data)
    while written < len(data):
        written += os.write(fd, data[written:])
    if fsync:
        os.fsync(fd)
