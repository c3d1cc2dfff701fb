"""The async tool bodies and async agents running at once, each on a thread of its own.

``--max-workers`` (docs/limits.md) bounds them, so that a program starting async calls in a
loop (or recursing through them) without waiting is stopped instead of exhausting the host's
threads and memory. Imported at a run's first worker (VM.worker).
"""

from __future__ import annotations

from _thread import allocate_lock

from sensevm.base.errors import SenseLimitError


def worker_limit(limit: int) -> SenseLimitError:
    return SenseLimitError(f"worker limit exceeded ({limit} async tools and agents running at "
                           "once)", "workers")


class Workers:
    """``live`` bodies running, shared by a VM and its copies; one more than ``limit`` is
    refused before its thread is started."""

    __slots__ = ("limit", "live", "_lock")

    def __init__(self, limit: int):
        self.limit = limit
        self.live = 0
        self._lock = allocate_lock()

    def enter(self) -> None:
        with self._lock:
            if self.live >= self.limit:
                raise worker_limit(self.limit)
            self.live += 1

    def leave(self) -> None:
        with self._lock:
            self.live -= 1

    def start(self, thread) -> None:
        """Count ``thread`` in and start it (its body calls leave() as it ends); a host that
        cannot start another thread is the same limit, reached early."""
        self.enter()
        try:
            thread.start()
        except RuntimeError:            # "can't start new thread"
            self.leave()
            raise SenseLimitError(f"worker limit exceeded (the host could not start another "
                                  f"thread with {self.live} running)", "workers") from None
