"""How many ops a launch may trace: a memory budget, not a fixed cap.

Tracing and verifying cost memory in proportion to the ops traced (the IR holds one
pointer per op, the analyses a few words per op and value). A launch may trace as many
ops as fit in the memory available when its trace starts, at `BYTES_PER_OP` each; past
that it is refused at the op that crossed the line, with what the whole launch would need
(extrapolated from the ranks traced so far), instead of exhausting the machine.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

# Peak resident memory of a whole `meshproof verify` per traced op, with headroom: the
# 64x64 mesh (8.9M ops) peaks at ~2.6 GiB, ~300 bytes an op (benchmarks/verify_scale.py).
BYTES_PER_OP = 400
_MEMINFO = Path("/proc/meminfo")
_STATM = Path("/proc/self/statm")


def available_bytes() -> int:
    """Memory this process can still use: the system's available memory, and below an
    address-space limit (a traced child's `TraceLimits.memory_mb`) what is left of it."""
    avail = _meminfo_available()
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        avail = min(avail, soft - _address_space())
    return max(avail, 0)


def _meminfo_available() -> int:
    try:
        for line in _MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 1 << 40  # nothing to go by: no budget beyond the machine's own limits


def _address_space() -> int:
    try:
        return int(_STATM.read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def resident_bytes() -> int:
    """This process's resident memory (0 where /proc does not tell)."""
    try:
        return int(_STATM.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def size_text(n: float) -> str:
    """Bytes in words: GiB, MiB or KiB."""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n / 1024:.0f} KiB"


@dataclass(slots=True)
class OpBudget:
    """The op budget of one launch's trace, shared by its ranks."""

    limit: int          # ops the whole launch may trace
    available: int      # bytes available when the trace started
    ranks: int          # ranks the launch traces
    traced: int = 0     # ops of the ranks traced so far
    ranks_done: int = 0

    @staticmethod
    def for_launch(ranks: int, available: int | None = None) -> OpBudget:
        avail = available_bytes() if available is None else available
        return OpBudget(max(1, avail // BYTES_PER_OP), avail, max(1, ranks))

    @property
    def remaining(self) -> int:
        return self.limit - self.traced

    def finished_rank(self, ops: int) -> None:
        self.traced += ops
        self.ranks_done += 1

    def exceeded(self, rank_ops: int) -> str:
        """Why the rank tracing its `rank_ops`-th op stops (text after "error: ")."""
        done = self.traced + rank_ops
        # the rank being traced has at least the ops it traced so far
        need = max(done, round(done / (self.ranks_done + 1) * self.ranks))
        return (f"the launch traced more than {self.limit} ops, all that fit in the "
                f"{size_text(self.available)} of memory available ({BYTES_PER_OP} bytes per "
                f"op to trace and verify); at that rate its {self.ranks} rank(s) need at least "
                f"{need} ops, {size_text(need * BYTES_PER_OP)}; shrink the launch (--system, "
                "--cubes, --pes) or the kernel's shapes and loop counts, or free memory")
