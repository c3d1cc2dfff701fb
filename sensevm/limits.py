"""Resource limits of a run: steps, call depth, live workers, String and Array sizes, wall-clock time.

See docs/limits.md. Every limit is a VM constructor argument; ``sensevm run`` and ``sensevm test``
take them as options (``--max-steps N`` ...) and every command also reads them from the
environment (``SENSE_MAX_STEPS`` ...), the option winning. The defaults let every ordinary
program run: no step or time limit, 20,000 nested calls, 1,000 async tools and agents running
at once, Strings of 100,000,000 characters, Arrays of 10,000,000 elements.

Steps and time are counted only when one of them is set, so a run without them pays nothing:
a *step* is one backward jump taken (a loop iteration) or one call instruction executed (CALL,
TOOL_CALL, ACTION_*, IMPORT, CALL_LABELED). Both tiers count exactly the same steps, so the
count of a run is the same in tier 1 and tier 2, and between two steps a frame runs at most its
own code once through: a program can run forever only by taking steps.

This module is imported at every start of ``sensevm run``: it imports nothing beyond sys, time
and errors.
"""

from __future__ import annotations

import sys
from time import monotonic

from .errors import SenseLimitError

DEFAULT_MAX_DEPTH = 20_000
DEFAULT_MAX_WORKERS = 1_000     # async tool and agent threads alive at once (docs/limits.md)
DEFAULT_MAX_STRING = 100_000_000
DEFAULT_MAX_ARRAY = 10_000_000
LIMIT_EXIT = 4                  # `sensevm run` exit status when a SenseLimitError stops it
UNLIMITED = 1 << 62             # steps left when only the clock is limited
RECHECK = 0.05                  # seconds between repeated alarms once the time is up
# Converting between an Int and its decimal text takes time quadratic in the digits in CPython
# 3.11 (a million digits: seconds; four million: minutes), all of it in one C call that neither
# the clock nor Ctrl-C can interrupt. Up to FREE_DIGITS it is a fraction of a millisecond and
# nothing is asked; beyond, check_conversion decides before it starts.
FREE_DIGITS = 5_000
UNTIMED_DIGITS = 1_000_000      # the most digits converted in a run without --timeout

# The limits: VM keyword, command-line option, environment variable.
SPECS = (
    ("max_steps", "--max-steps", "SENSE_MAX_STEPS"),
    ("max_depth", "--max-depth", "SENSE_MAX_DEPTH"),
    ("max_workers", "--max-workers", "SENSE_MAX_WORKERS"),
    ("max_string", "--max-string", "SENSE_MAX_STRING"),
    ("max_array", "--max-array", "SENSE_MAX_ARRAY"),
    ("timeout", "--timeout", "SENSE_TIMEOUT"),
)
OPTIONS = {option: name for name, option, _ in SPECS}


def parse(name: str, text: str):
    """The value of limit ``name`` written as ``text``; ValueError saying why it is not one.

    Counts are whole numbers >= 1; the timeout is a finite number of seconds > 0.
    """
    if name == "timeout":
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number of seconds") from None
        if not 0 < value < 1e9:
            raise ValueError(f"must be a positive, finite number of seconds, not {text}")
        return value
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise ValueError(f"must be at least 1, not {value}")
    return value


def from_env(environ) -> dict:
    """The limits set in the environment, by VM keyword; ValueError naming a bad variable."""
    found = {}
    for name, _, var in SPECS:
        text = environ.get(var)
        if text:
            try:
                found[name] = parse(name, text)
            except ValueError as exc:
                raise ValueError(f"{var}: {exc}") from None
    return found


def seconds(value: float) -> str:
    return f"{value:g} second" + ("" if value == 1 else "s")


def count(n: int) -> str:
    """``n`` in an error message: its digits, or for a count of more digits than are quick to
    make (``range(x)`` of a huge Int) the power of ten it is at least."""
    bits = n.bit_length()
    if bits <= FREE_DIGITS * 3321928 // 1000000:         # log2(10), rounded down
        return str(n)
    return f"at least 10**{(bits - 1) * 30102999566 // 100000000000}"


def string_limit(length: int, limit: int, located: bool = True,
                 at_least: bool = False) -> SenseLimitError:
    """``at_least``: ``length`` is a lower bound (the text of an Int refused unmade)."""
    size = f"at least {length}" if at_least else count(length)
    return SenseLimitError(f"string size limit exceeded (a String of {size} characters; "
                           f"the limit is {limit})", "string", located=located)


def array_limit(length: int, limit: int, located: bool = True) -> SenseLimitError:
    return SenseLimitError(f"array size limit exceeded (an Array of {count(length)} elements; "
                           f"the limit is {limit})", "array", located=located)


def worker_limit(limit: int) -> SenseLimitError:
    return SenseLimitError(f"worker limit exceeded ({limit} async tools and agents running at "
                           "once)", "workers")


class Workers:
    """How many async tool bodies and async agents are running on threads of their own, shared
    by the VM and its workers: starting one more than ``limit`` is refused, before its thread
    exists, so a program that starts async calls in a loop (or recurses through them) without
    waiting is stopped instead of exhausting the host's threads and memory."""

    __slots__ = ("limit", "live", "_lock")

    def __init__(self, limit: int):
        from _thread import allocate_lock      # a builtin module: no threading import
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


# Seconds per squared digit of int(text) and of str(int), measured once when first needed.
_RATES = None


def _rates() -> tuple:
    global _RATES
    if _RATES is None:
        from time import perf_counter
        n = 20_000
        text = "7" * n
        best = [1.0, 1.0]
        for _ in range(2):      # the better of two: a busy machine only ever slows a run
            start = perf_counter()
            value = int(text)
            middle = perf_counter()
            str(value)
            end = perf_counter()
            best = [min(best[0], middle - start), min(best[1], end - middle)]
        _RATES = (best[0] / n / n, best[1] / n / n)
    return _RATES


def check_conversion(digits: int, what: str, budget, to_text: bool) -> None:
    """Refuse, before it starts, a conversion of a number of ``digits`` digits (``what``:
    "int() of a String", "str() of an Int") that cannot finish in the time given: with a time
    limit, when its estimated time (quadratic in the digits, at this machine's measured rate)
    is more than the run has left; without one, when it has more than UNTIMED_DIGITS digits."""
    if digits <= FREE_DIGITS:
        return
    timeout = budget.timeout if budget is not None else None
    if timeout is None:
        if digits > UNTIMED_DIGITS:
            raise SenseLimitError(f"conversion size limit exceeded ({what} of {digits} digits; "
                                  f"without --timeout the limit is {UNTIMED_DIGITS} digits)",
                                  "digits", located=False)
        return
    need = _rates()[1 if to_text else 0] * digits * digits
    left = budget.time_left()
    if need > left:
        raise SenseLimitError(f"time limit exceeded ({seconds(timeout)}): {what} of {digits} "
                              f"digits would take about {need:.2g} seconds, and "
                              f"{max(left, 0):.2g} are left", "timeout", located=False)


class Deadline:
    """When a wait for something outside must end (a model server's reply, an MCP server's):
    after its own ``timeout``, or when the run's --timeout runs out, if that comes first."""

    __slots__ = ("at", "timeout", "budget")

    def __init__(self, timeout: float, budget=None):
        self.timeout = timeout
        self.at = monotonic() + timeout
        self.budget = None          # the run's budget, when its clock ends the wait
        end = budget.deadline if budget is not None else None
        if end is not None and end <= self.at:
            self.at = end
            self.budget = budget

    def left(self) -> float:
        return self.at - monotonic()

    def run_out(self, waiting_for: str):
        """The run's time-limit error for a wait that ran out, naming what it waited for; None
        when the wait's own timeout ended it (the caller says so in its own words)."""
        return self.budget.out_of_time(waiting_for) if self.budget is not None else None


def digits_to_int(text: str) -> int:
    """``int(text)`` of a number in JSON from outside (a model server's reply, a persistent
    memory's record), refused like int() when it has too many digits to convert in the time
    given."""
    if len(text) > FREE_DIGITS:
        from . import values
        check_conversion(len(text) - text.startswith("-"), "a number read from outside",
                         values.BUDGET, to_text=False)
    return int(text)


def _waiting(frame) -> bool:
    """Whether the main thread, interrupted in ``frame``, is only waiting: for a line of
    input (ask_human) or for another thread (await, join, a condition). There an exception
    is safe; anywhere else the alarm only marks the budget, and the next step raises."""
    code = frame.f_code
    if code.co_name == "b_ask_human":
        return True
    threading = sys.modules.get("threading")   # not imported: no thread to wait for
    return threading is not None and code.co_filename == threading.__file__


class Budget:
    """The steps and time a run may still take, shared by the VM and its worker threads.

    Tier 1's counting handlers and tier 2's generated code decrement ``left`` once per step and
    raise ``exceeded()`` when it drops below zero. When the clock runs out, ``expire()`` marks
    the budget and drives ``left`` far below zero, so the next step anywhere raises; the alarm
    repeats every RECHECK seconds until the run stops, so a decrement racing with it cannot
    undo it.
    """

    __slots__ = ("left", "start", "max_steps", "timeout", "expired", "_stop", "deadline")

    def __init__(self, max_steps=None, timeout=None):
        self.max_steps = max_steps
        self.timeout = timeout
        self.start = self.left = max_steps if max_steps is not None else UNLIMITED
        self.expired = False
        self._stop = None
        self.deadline = None        # time.monotonic() when the clock runs out, while it runs

    @property
    def steps(self) -> int:
        """Steps taken so far (not meaningful once the time is up)."""
        return self.start - self.left

    def exceeded(self) -> SenseLimitError:
        if self.expired:
            return SenseLimitError(f"time limit exceeded ({seconds(self.timeout)})",
                                   "timeout")
        return SenseLimitError(f"step limit exceeded ({self.max_steps} steps)", "steps")

    def reset(self) -> None:
        """A fresh budget (the REPL's next input)."""
        self.left = self.start
        self.expired = False

    def expire(self) -> None:
        self.expired = True
        self.left = -UNLIMITED

    def out_of_time(self, waiting_for: str) -> SenseLimitError:
        """The time-limit error of a wait for something outside that the clock ended."""
        self.expire()
        return SenseLimitError(f"time limit exceeded ({seconds(self.timeout)}) waiting for "
                               f"{waiting_for}", "timeout")

    def time_left(self) -> float:
        """Seconds until the clock runs out (the whole timeout before it starts)."""
        if self.expired:
            return 0.0
        if self.deadline is None:
            return self.timeout
        return self.deadline - monotonic()

    # -- the clock

    def start_clock(self) -> None:
        """Start the wall-clock limit (if any, and not already running).

        On the main thread a SIGALRM timer: its handler marks the budget, and raises at once
        when the program is only waiting (see _waiting), which also ends a blocked read of
        stdin. Elsewhere (a VM run from another thread) a watchdog thread marks the budget.
        """
        if self.timeout is None or self._stop is not None:
            return
        self.deadline = monotonic() + self.timeout
        import signal

        def alarm(signum, frame):
            self.expire()
            if frame is not None and _waiting(frame):
                raise self.exceeded()
        on_alarm = hasattr(signal, "setitimer")
        if on_alarm:
            try:
                # signal.signal refuses off the main thread: asking it spares importing threading
                previous = signal.signal(signal.SIGALRM, alarm)
            except ValueError:
                on_alarm = False
        if on_alarm:
            signal.setitimer(signal.ITIMER_REAL, self.timeout, RECHECK)

            def stop():
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
        else:
            import threading
            done = threading.Event()

            def watch():
                if done.wait(self.timeout):
                    return
                self.expire()
                while not done.wait(RECHECK):
                    self.expire()
            threading.Thread(target=watch, name="sense-timeout", daemon=True).start()
            stop = done.set
        self._stop = stop

    def stop_clock(self) -> None:
        self.deadline = None
        stop, self._stop = self._stop, None
        if stop is not None:
            stop()
