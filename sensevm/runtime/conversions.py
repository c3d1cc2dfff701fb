"""Conversions between an Int and its decimal text, decided before they start (docs/limits.md).

CPython 3.11 converts in time quadratic in the digits (a million digits: seconds; four million:
minutes), all of it in one C call that neither the clock nor Ctrl-C can interrupt. A conversion
of up to limits.FREE_DIGITS digits is made at once by its caller; a larger one asks
check_conversion first, which refuses what cannot finish in the time given. Imported only by a
program that converts such a number.
"""

from __future__ import annotations

from sensevm.base.errors import SenseLimitError
from sensevm.runtime.limits import FREE_DIGITS, seconds

UNTIMED_DIGITS = 1_000_000      # the most digits converted in a run without --timeout

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


def int_reader(budget):
    """``json.loads``'s ``parse_int`` for JSON from outside (a model server's reply, a persistent
    memory's record) in a run with ``budget``: int(), refused like int() of a String when the
    number has too many digits to convert in the time given."""
    def read(text: str) -> int:
        if len(text) > FREE_DIGITS:
            check_conversion(len(text) - text.startswith("-"), "a number read from outside",
                             budget, to_text=False)
        return int(text)
    return read
