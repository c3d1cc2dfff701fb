"""File access shared by every command: reading with clean errors, atomic writes, durable appends."""

from __future__ import annotations

import os

from sensevm.base.errors import SenseError


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
    """Write ``data`` so that a crash leaves either the old file or the whole new one.

    The bytes go to a temporary file in the same directory, which is fsync'd, renamed over
    ``path`` (os.replace: atomic), and then the directory is fsync'd so that the rename
    survives a crash too. A failure before the rename removes the temporary file and leaves
    ``path`` as it was. A file that is rewritten keeps its permission bits, a new one gets what
    ``open()`` would give it (0o666 less the umask), and a symbolic link is followed, so that
    its target is replaced, not the link.
    """
    path = os.path.realpath(path) if os.path.islink(path) else path
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = os.stat(path).st_mode & 0o7777
    except OSError:
        mode = None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.urandom(6).hex()}.tmp")
        try:
            fd = os.open(tmp, flags, 0o666)         # the umask applies, as it does to open()
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as fh:
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
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
    fsync_directory(directory)


def fsync_directory(directory: str) -> None:
    """Make a rename or a new directory entry in ``directory`` durable (best effort)."""
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
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
