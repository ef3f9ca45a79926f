"""How much memory the numeric run of a schedule needs, checked before anything is allocated.

Shapes come from kernel arguments, so `--arg S_kv_per_rank=100000000` is one typo away
from asking numpy for tens of GiB; without this check the run dies with a MemoryError
traceback (or the machine swaps) after tracing and timing. The estimate counts what one
batch of groups keeps alive at once (measured: within 20% of the peak RSS growth of the
reference kernels at 0.2 to 1.5 GiB):

- the batch's float32 Q, K and V (the harness inputs);
- every checked rank's float32 `o_ptr`;
- a few arrays the size of the largest op result (scores, their exponentials, the f16
  copy of P live together in an attention kernel);
- the float64 reference: Q, the running output, one chunk of K/V rows and the scores and
  probabilities of that chunk.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from meshproof.model.schedule import Schedule
from meshproof.sim.groups import Group
from meshproof.sim.harness import GroupLayout, reference_chunk_rows

GIB = float(1 << 30)
# Arrays of the largest op's size alive at once in the evaluator (see the docstring).
LIVE_LARGEST = 3


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    inputs: int          # float32 Q, K, V of one batch
    outputs: int         # float32 o_ptr of every rank of one batch
    intermediates: int   # LIVE_LARGEST x the largest op result of one batch
    reference: int       # float64 reference working set of one batch

    @property
    def total(self) -> int:
        return self.inputs + self.outputs + self.intermediates + self.reference

    def breakdown(self) -> str:
        return (f"float32 Q/K/V {self.inputs / GIB:.2f} GiB, intermediates "
                f"{self.intermediates / GIB:.2f} GiB, outputs {self.outputs / GIB:.2f} GiB, "
                f"float64 reference {self.reference / GIB:.2f} GiB")


def estimate_batch(schedule: Schedule, group: Group, layout: GroupLayout,
                   batch: int) -> MemoryEstimate:
    """Bytes one batch of `batch` groups shaped like `group` keeps alive at once."""
    s = layout.shape
    largest = max((math.prod(op.shape) for r in group.ranks
                   for op in schedule.programs[r].ops), default=0)
    outputs = sum((layout.out_rows(role).stop - layout.out_rows(role).start)
                  for role in layout.roles) * s.h_q * s.d_head * 4
    q64 = layout.q_rows * s.h_q * s.d_head * 8
    chunk = min(reference_chunk_rows(batch, s), layout.kv_rows)
    # Q scaled, the running output and its returned copy; the K and V chunk buffers; the
    # chunk's scores and exp(scores - m)
    reference = batch * (3 * q64 + 2 * chunk * s.h_kv * s.d_head * 8
                         + 2 * layout.q_rows * s.h_q * chunk * 8)
    return MemoryEstimate(batch * layout.input_bytes, batch * outputs,
                          batch * LIVE_LARGEST * largest * 4, reference)


def available_bytes() -> int | None:
    """Memory this process may still use: MemAvailable, capped by `ulimit -v` if set.
    None when neither can be read (the check is then skipped)."""
    found = [n for n in (_mem_available(), _address_space_limit()) if n is not None]
    return min(found) if found else None


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:  # not Linux: free physical pages
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def _address_space_limit() -> int | None:
    try:
        import resource
    except ImportError:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else int(soft)
