"""The host's secret key, kept outside what it protects: it authenticates saved agent state and audit logs.

A saved agent (``run --state-dir``) carries a MAC over its state and its program, and every
line of a durable audit log (``--audit-log``) a MAC over the line, keyed by a secret that never
lives beside them, so that whoever can write those files cannot forge, edit, cut or re-chain
them unnoticed. The key is 32 random bytes, hex-encoded, in

    $SENSE_KEY_FILE                      if set (any path), else
    $XDG_CONFIG_HOME/sense/host.key      ($XDG_CONFIG_HOME defaults to ~/.config)

created on first use (mode 0600, its directory 0700) and refused when other users may read or
write it, as ssh refuses a private key. Each use derives its own key from it (``derive``), so one
purpose's MAC is never valid for another. See docs/durable-agents.md.
"""

from __future__ import annotations

import os

KEY_ENV = "SENSE_KEY_FILE"
KEY_BYTES = 32


class HostKeyError(Exception):
    """The host key cannot be read, created or trusted; the message says which and how to fix it."""


def key_path(environ=None) -> str:
    environ = os.environ if environ is None else environ
    given = environ.get(KEY_ENV)
    if given:
        return os.path.abspath(os.path.expanduser(given))
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(os.path.abspath(base), "sense", "host.key")


def _read(path: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise HostKeyError(f"cannot read the host key {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if info.st_mode & 0o077:
            raise HostKeyError(f"the host key {path} may be read or written by other users "
                            f"(mode {info.st_mode & 0o777:o}); run: chmod 600 {path}")
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise HostKeyError(f"the host key {path} belongs to another user")
        text = os.read(fd, 4 * KEY_BYTES)
    finally:
        os.close(fd)
    try:
        key = bytes.fromhex(text.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise HostKeyError(f"the host key {path} is not {KEY_BYTES} hex-encoded bytes; remove it "
                        "to have a new one made (saved agents made with the old key will no "
                        "longer resume)")
    return key


def _create(path: str) -> None:
    """Write a new key where none is; if another process wins the race, keep its key."""
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise HostKeyError(f"cannot create {directory} for the host key: "
                        f"{exc.strerror or exc}") from None
    # Unique to this attempt, not only to the process: two threads of one process (a
    # worker's segments) may make the first key at once.
    temp = f"{path}.{os.getpid()}.{os.urandom(6).hex()}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, os.urandom(KEY_BYTES).hex().encode("ascii") + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temp, path)          # atomic, and never replaces a key already there
        except FileExistsError:
            pass
    except OSError as exc:
        raise HostKeyError(f"cannot create the host key {path}: {exc.strerror or exc}") from None
    finally:
        try:
            os.unlink(temp)
        except OSError:
            pass


def host_key(*, outside: str | None = None, create: bool = True) -> bytes:
    """The host key, made on first use (unless ``create`` is false: then a missing key is an
    error). ``outside``: a directory the key must not be in (the directory of what it
    protects); a key inside it is refused."""
    path = key_path()
    if outside is not None:
        inside = os.path.realpath(os.path.abspath(outside))
        real = os.path.realpath(path)
        if real == inside or real.startswith(inside.rstrip(os.sep) + os.sep):
            raise HostKeyError(f"the host key {path} is inside {outside}, the directory it "
                            f"protects; set {KEY_ENV} to a path outside it")
    try:
        return _read(path)
    except FileNotFoundError:
        if not create:
            raise HostKeyError(f"there is no host key at {path} (set {KEY_ENV} to the key "
                               "it was written with)") from None
        _create(path)
    return _read(path)


def derive(purpose: str, *, outside: str | None = None, create: bool = True) -> bytes:
    """The key for one purpose (``"sense.state.v3"``, ...), derived from the host key."""
    import hashlib
    import hmac
    return hmac.new(host_key(outside=outside, create=create), purpose.encode("ascii"),
                    hashlib.sha256).digest()
