"""When a wait for something outside must end: a model server's reply, an MCP server's.

The earlier of the wait's own timeout and the end of the run's --timeout (docs/limits.md);
imported only by the providers and MCP, when they wait.
"""

from __future__ import annotations

from time import monotonic


class Deadline:
    """A wait's end: ``timeout`` seconds from now, or the run's ``budget`` (limits.Budget) if
    its clock runs out first."""

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
