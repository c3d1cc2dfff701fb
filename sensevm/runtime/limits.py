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

from sensevm.base.errors import SenseLimitError

DEFAULT_MAX_DEPTH = 20_000
DEFAULT_MAX_WORKERS = 1_000     # async tool and agent threads alive at once (docs/limits.md)
DEFAULT_MAX_STRING = 100_000_000
DEFAULT_MAX_ARRAY = 10_000_000
LIMIT_EXIT = 4                  # `sensevm run` exit status when a SenseLimitError stops it
UNLIMITED = 1 << 62             # steps left when only the clock is limited
RECHECK = 0.05                  # seconds between repeated alarms once the time is up
# Converting an Int of up to FREE_DIGITS digits to or from its text takes a fraction of a
# millisecond: nothing is asked. Beyond, conversions.check_conversion decides before it starts.
FREE_DIGITS = 5_000

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


def map_limit(length: int, limit: int, located: bool = True) -> SenseLimitError:
    """A Map's entries count against --max-array, as an Array's elements do."""
    return SenseLimitError(f"map size limit exceeded (a Map of {count(length)} entries; "
                           f"the limit is {limit})", "array", located=located)


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
