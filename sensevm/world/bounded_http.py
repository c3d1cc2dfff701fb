"""HTTP requests with one overall deadline on every read and write, and a bound on the reply.

The model providers' requests go through here (providers.post_json), and std.http's
(world/std_net.py). urllib's own ``timeout``
is a limit per socket operation: a server that sends a byte every second never trips it and
keeps the request open for as long as it likes. Here every connection's socket is wrapped so
that each read and write may wait only for what is left of one ``deadline.Deadline``; when
that is spent, the next one raises ``socket.timeout`` at once. Everything else (proxies from the
environment, redirects, TLS) is urllib's.

Imported only when a model request is made: it brings http.client and urllib.request.
"""

from __future__ import annotations

import http.client
import socket
import urllib.error
import urllib.request


class DeadlineSocket:
    """A connected socket whose reads and writes each wait at most until the deadline.

    http.client reads a reply through ``makefile()``, whose buffered reader calls our
    ``recv_into``; the reference counting of those readers is socket.socket's own, kept here,
    so the connection closes when both it and its reply are done with it."""

    def __init__(self, sock, deadline):
        self._sock = sock
        self._deadline = deadline
        self._io_refs = 0
        self._closed = False

    def _wait(self) -> None:
        left = self._deadline.left()
        if left <= 0:
            raise socket.timeout("timed out")
        self._sock.settimeout(left)

    def recv_into(self, buffer, nbytes=0, flags=0):
        self._wait()
        return self._sock.recv_into(buffer, nbytes, flags)

    def recv(self, bufsize, flags=0):
        self._wait()
        return self._sock.recv(bufsize, flags)

    def send(self, data, flags=0):
        self._wait()
        return self._sock.send(data, flags)

    def sendall(self, data, flags=0):
        self._wait()
        return self._sock.sendall(data, flags)

    makefile = socket.socket.makefile

    def _decref_socketios(self) -> None:
        if self._io_refs > 0:
            self._io_refs -= 1
        if self._closed:
            self.close()

    def close(self) -> None:
        self._closed = True
        if self._io_refs <= 0:
            self._sock.close()

    def __getattr__(self, name):
        return getattr(self._sock, name)


class _Bounded:
    """A connection whose socket, once connected (and, for HTTPS, wrapped), waits only until
    the deadline."""

    def __init__(self, *args, deadline, **kwargs):
        super().__init__(*args, **kwargs)
        self._deadline = deadline

    def connect(self):
        super().connect()
        self.sock = DeadlineSocket(self.sock, self._deadline)


class _HTTPConnection(_Bounded, http.client.HTTPConnection):
    pass


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline):
        super().__init__()
        self._deadline = deadline

    def http_open(self, req):
        return self.do_open(_HTTPConnection, req, deadline=self._deadline)


_handlers = [_HTTPHandler]

if hasattr(http.client, "HTTPSConnection"):        # Python built with ssl
    class _HTTPSConnection(_Bounded, http.client.HTTPSConnection):
        pass

    class _HTTPSHandler(urllib.request.HTTPSHandler):
        def __init__(self, deadline):
            super().__init__()
            self._deadline = deadline

        def https_open(self, req):
            return self.do_open(_HTTPSConnection, req, context=self._context,
                                check_hostname=self._check_hostname, deadline=self._deadline)

    _handlers.append(_HTTPSHandler)


def urlopen(request, deadline, handlers=()):
    """``urllib.request.urlopen(request)`` whose every socket operation ends by ``deadline``
    (a deadline.Deadline); a connection is also given only what is left of it. ``handlers``:
    more urllib handler instances (std.http's, which follows no redirect itself)."""
    opener = urllib.request.build_opener(*(handler(deadline) for handler in _handlers),
                                         *handlers)
    return opener.open(request, timeout=max(deadline.left(), 0.001))


# What a request through urlopen can fail with, besides an HTTP status (``failure`` says why).
FAILURES = (socket.timeout, TimeoutError, urllib.error.URLError, OSError, ValueError)


def failure(exc) -> str | None:
    """Why a request failed, in words (a reset connection, a malformed URL, a refused
    connection), or None when it ran out of time: the caller says whose time it was."""
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return None
    if isinstance(exc, urllib.error.URLError):
        if isinstance(exc.reason, (socket.timeout, TimeoutError)):
            return None
        return str(exc.reason)
    return str(exc)


def read_at_most(reply, limit: int) -> bytes | None:
    """The reply's body, or None if it is longer than ``limit`` bytes (read no further)."""
    chunks = []
    size = 0
    while True:
        chunk = reply.read(1 << 16)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
