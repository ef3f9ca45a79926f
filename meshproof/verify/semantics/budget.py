"""The semantic analysis's budget: wall time (`--timeout`) and memory (what the machine has).

A form that keeps growing (a merge whose normal form does not simplify) must end in
"unknown", never in an out-of-memory kill: the symbolic domain ticks the budget at every
op, and past the deadline or the memory limit the analysis stops with `OutOfBudget`, naming
where the largest form grew. The other properties keep what they proved.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from meshproof.model.budget import available_bytes, resident_bytes, size_text
from meshproof.model.schedule import Op

# share of the memory available when the analysis starts that it may use
MEMORY_SHARE = 0.75
CHECK_EVERY = 256


class OutOfBudget(Exception):
    """The semantic analysis ran out of time or memory; the message says where."""


@dataclass(slots=True)
class Budget:
    deadline: float               # time.perf_counter() past which the analysis stops
    rss_limit: int                # resident bytes past which it stops
    timeout_s: float
    count: int = 0
    largest: int = 0
    largest_at: Op | None = None

    @staticmethod
    def start(timeout_s: float, available: int | None = None) -> Budget:
        avail = available_bytes() if available is None else available
        return Budget(time.perf_counter() + timeout_s,
                      resident_bytes() + int(MEMORY_SHARE * avail), timeout_s)

    def tick(self, op: Op, size: int) -> None:
        if size > self.largest:
            self.largest, self.largest_at = size, op
        self.count += 1
        if self.count % CHECK_EVERY:
            return
        if time.perf_counter() > self.deadline:
            raise OutOfBudget(f"the semantic analysis ran past --timeout "
                              f"{self.timeout_s:g} s{self._where()}")
        rss = resident_bytes()
        if rss > self.rss_limit:
            raise OutOfBudget(f"the semantic analysis used {size_text(rss)}, past its memory "
                              f"budget of {size_text(self.rss_limit)}{self._where()}")

    def _where(self) -> str:
        if self.largest_at is None:
            return ""
        return (f" after {self.count} ops; its largest form ({self.largest} characters) grew "
                f"at {self.largest_at.source} (tl.{self.largest_at.kind.value})")


def unbounded() -> Budget:
    """No deadline and no memory limit (tests and tools that bound themselves)."""
    return Budget(float("inf"), 1 << 62, float("inf"))
