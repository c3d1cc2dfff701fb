"""The benchmark programs: what each measures, its files, and its full and --quick sizes."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional

PROGRAMS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")

# Sense has no command-line arguments, so a program's size is the literal on its `N = ...`
# line; the harness rewrites that line (in both files) to choose the full or --quick size.
SIZE_LINE = re.compile(r"^N = \d+$", re.MULTILINE)


@dataclass(frozen=True)
class Bench:
    name: str
    what: str
    kind: str = "program"             # program | compile | startup
    source: Optional[str] = None      # file in programs/ (Sense)
    twin: Optional[str] = None        # file in programs/ (CPython), if a twin exists
    full: int = 0                     # N (program), lines (compile); unused for startup
    quick: int = 0
    dry_run: bool = False
    needs: Optional[str] = None       # a feature sensec may not support yet
    look_off: Optional[str] = None    # ours runs with --second-look=off: the twin of this bench
    durable: bool = False             # ours writes a fresh durable audit log (--audit-log)
    opt_in: bool = False              # run only when named with --only (it takes minutes)
    rounds: Optional[int] = None      # at most this many rounds, whatever --rounds says
    extension: Optional[str] = None   # an EXTENSIONS.md feature it uses, which the reference
                                      # lacks: its column is n/a, ours is checked by CPython's

    def size(self, quick: bool) -> int:
        return self.quick if quick else self.full

    def size_label(self, quick: bool) -> str:
        if self.kind == "compile":
            return f"{self.size(quick)} lines"
        if self.kind == "startup":
            return "1 line"
        return f"n={self.size(quick)}"


BENCHMARKS: list[Bench] = [
    Bench("fib", "recursive calls: fib(n), two calls per level",
          source="fib.sns", twin="fib.py", full=32, quick=15,
          # CPython computes 0.4 s at n=32 and the reference over two minutes a round.
          rounds=3),
    Bench("loops", "while loop of Int arithmetic with a three-way branch per iteration",
          source="loops.sns", twin="loops.py", full=1_800_000, quick=5_000),
    Bench("arrays", "push, for-iteration, index reads and writes, many small arrays",
          source="arrays.sns", twin="arrays.py", full=540_000, quick=2_000),
    Bench("strings", "string building with str() and +, then a walk over every character",
          source="strings.sns", twin="strings.py", full=500_000, quick=1_000),
    Bench("closures", "calls of closures that read and update captured variables",
          source="closures.sns", twin="closures.py", full=1_000_000, quick=2_000),
    Bench("lifecycle", "actions: prepare / verify / approve / commit (and some rollbacks), 2 per iteration",
          source="lifecycle.sns", full=30_000, quick=500),
    Bench("lifecycle_dry_run", "the lifecycle loop under --dry-run: bodies skipped, summary printed",
          source="lifecycle.sns", full=30_000, quick=500, dry_run=True),
    # EXTENSIONS.md E1/E2 (the reference has neither, so only ours and CPython's twin run).
    Bench("maps", "build and read a 100,000-entry map (String, then Int keys), count with get()",
          source="maps.sns", twin="maps.py", full=250_000, quick=5_000, extension="maps"),
    Bench("string_methods", "split, join, upper, lower, replace, trim, find, pad_start ... "
                            "over the words and lines of a text",
          source="string_methods.sns", twin="string_methods.py", full=450_000, quick=1_000,
          extension="string methods"),
    Bench("callbacks", "map, filter, reduce and sorted(key) calling a Sense function per element",
          source="callbacks.sns", twin="callbacks.py", full=600_000, quick=2_000,
          extension="Array methods"),
    Bench("tool_calls", "a capability-checked, audited tool called in a loop",
          source="tool_calls.sns", full=60_000, quick=1_000, needs="tools"),
    # Provenance (the second look) on the path it was built for: an outgoing action's
    # arguments, literal; a tool's result endorsed by the program's own constant; a tool's
    # result flagged, and approved by the program after the question. No CPython twin: plain
    # Python has no lifecycle, labels or second look to do equivalent work with.
    Bench("provenance_literal", "email.send with literal arguments: prepare / verify / commit",
          source="provenance_literal.sns", full=60_000, quick=500),
    Bench("provenance_pass", "a tool's result as email.send's recipient, endorsed by a literal",
          source="provenance_pass.sns", full=60_000, quick=500, needs="tools"),
    Bench("provenance_flag", "a tool's result as email.send's recipient, flagged, approved",
          source="provenance_flag.sns", full=60_000, quick=500, needs="tools"),
    # A new verdict at every verify: the address is new each turn, vouched for by the trusted
    # record read just before (the reference has no trusted tools, and no second look).
    Bench("provenance_fresh", "a new address each turn, from a tool to email.send, vouched "
                              "for by a trusted record",
          source="provenance_fresh.sns", full=30_000, quick=500, needs="tools",
          extension="trusted tools"),
    # An untrusted page's text, new each turn, as the body of a mail to the program's own
    # address: the second look reads it for addresses, links and numbers, finds nothing to
    # vouch for, and passes (the agent that mails you a summary).
    Bench("provenance_content", "a page's new text each turn as email.send's body to a literal "
                                "address: read, nothing to vouch for",
          source="provenance_content.sns", full=30_000, quick=500, needs="tools"),
    # The cost of provenance (the second look): the same two programs with it switched off in
    # our VM (the reference runs them as always); the table's notes give on/off.
    Bench("lifecycle_look_off", "the lifecycle loop, ours with --second-look=off",
          source="lifecycle.sns", full=30_000, quick=500, look_off="lifecycle"),
    Bench("tool_calls_look_off", "the tool-call loop, ours with --second-look=off",
          source="tool_calls.sns", full=60_000, quick=1_000, needs="tools",
          look_off="tool_calls"),
    Bench("provenance_fresh_look_off", "provenance_fresh, ours with --second-look=off",
          source="provenance_fresh.sns", full=30_000, quick=500, needs="tools",
          extension="trusted tools", look_off="provenance_fresh"),
    Bench("provenance_content_look_off", "provenance_content, ours with --second-look=off",
          source="provenance_content.sns", full=30_000, quick=500, needs="tools",
          look_off="provenance_content"),
    # Issue 5's memory target: a million lifecycles (two per iteration) with every audit record
    # appended and fsync'd to a hash-chained file, in bounded memory. Ours only (the reference
    # has no durable log); one round, as each takes minutes (an fsync per record).
    Bench("lifecycle_1m", "1,000,000 action lifecycles with a durable audit log: peak memory",
          source="lifecycle_durable.sns", full=500_000, quick=2_000, durable=True,
          opt_in=True, rounds=1),
    Bench("compile", "sensec build of a generated program of small functions (reference: sense run)",
          kind="compile", full=20_000, quick=1_000),
    Bench("startup", "sensevm run hello.snb against python3 -c pass",
          kind="startup", source="hello.sns"),
]

BY_NAME = {b.name: b for b in BENCHMARKS}

# Timed in every harness run, by every implementation, to take its own start-up off the
# programs' times (the compute columns and the headline ratios).
EMPTY = Bench("empty", "start-up: a program that prints its result line and stops",
              source="empty.sns", twin="empty.py")


def sized(path: str, n: int) -> str:
    """The text of a program file with its `N = ...` line set to ``n``."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    new, count = SIZE_LINE.subn(f"N = {n}", text)
    if count != 1:
        raise ValueError(f"{path}: expected exactly one 'N = <int>' line, found {count}")
    return new


def written(name: str, ext: str, n: int, tmp: str) -> str:
    """Program ``name``'s file (.sns, or its twin's .py) at size ``n``, written under ``tmp``."""
    path = os.path.join(tmp, f"{name}_{n}.{ext}")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(sized(os.path.join(PROGRAMS_DIR, f"{name}.{ext}"), n))
    return path
