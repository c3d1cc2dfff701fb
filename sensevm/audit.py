"""The audit log: host-side records, and the reference's one-line text view that audit_log() returns."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class AuditRecord:
    subject: str                 # "irreversible action 'ship'", "tool 'camera'", ...
    name: str
    kind: str                    # "reversible" | "irreversible" | "tool" | "model"
    event: str                   # prepared, verified, committed, denied, failed, rolled_back, called
    detail: Optional[str] = None
    line: Optional[int] = None
    lineage: tuple[str, ...] = ()
    timestamp: float = field(default_factory=time.time)
    host_only: bool = False      # kept in the host-side trail, not in audit_log()'s lines

    def describe(self) -> str:
        """``[line L] SUBJECT -> EVENT (DETAIL) (via F1 > F2)`` as spec section 13 specifies."""
        text = f"[line {self.line}] " if self.line is not None else ""
        text += f"{self.subject} -> {self.event}"
        if self.detail:
            text += f" ({self.detail})"
        if self.lineage:
            text += f" (via {' > '.join(self.lineage)})"
        return text


class AuditLog:
    """The in-memory log of one run; every record stays host-side even if no program reads it."""

    def __init__(self):
        self.records: list[AuditRecord] = []

    def append(self, record: AuditRecord) -> None:
        self.records.append(record)

    def lines(self) -> list[str]:
        return [r.describe() for r in self.records if not r.host_only]
