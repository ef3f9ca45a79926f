"""How much memory the numeric run of a schedule needs, checked before anything is allocated.

Shapes come from kernel arguments, so `--arg S_kv_per_rank=100000000` is one typo away
from asking numpy for tens of GiB; without this check the run dies with a MemoryError
traceback (or the machine swaps) after tracing and timing. The estimate counts what one
batch of groups keeps alive at once:

- the batch's float32 Q (K and V are generated as the kernel streams them and are not
  held: sim/numerics.py), and the input generator's pool for the reference;
- every checked rank's float32 `o_ptr`;
- a few arrays the size of the largest array a rank holds (scores, their exponentials,
  the f16 copy of P live together in an attention kernel; a K/V value some use must see
  whole counts here too), and the scores of pool tiles the ranks share (pool_scores.py);
- the float64 reference: its output, and its working set (sim/reference.py: the float64
  pool, the stacked U and pool-row weights of up to `stacked_heads` kv heads, or a
  float64 block of K/V rows).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from meshproof.model.inputs import pool_rows
from meshproof.sim.harness import GroupLayout
from meshproof.sim.numerics import GroupPlan
from meshproof.sim.pool_scores import held_bytes
from meshproof.sim.reference import working_bytes

GIB = float(1 << 30)
# Arrays of the largest op's size alive at once in the evaluator (see the docstring).
LIVE_LARGEST = 3


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    inputs: int          # float32 Q of one batch, the generator's pools
    outputs: int         # float32 o_ptr of every rank of one batch
    intermediates: int   # LIVE_LARGEST x the largest array of one batch
    reference: int       # float64 reference working set of one batch

    @property
    def total(self) -> int:
        return self.inputs + self.outputs + self.intermediates + self.reference

    def breakdown(self) -> str:
        return (f"float32 Q and input pool {self.inputs / GIB:.2f} GiB, intermediates "
                f"{self.intermediates / GIB:.2f} GiB, outputs {self.outputs / GIB:.2f} GiB, "
                f"float64 reference {self.reference / GIB:.2f} GiB")


def estimate_batch(plan: GroupPlan, layout: GroupLayout, batch: int) -> MemoryEstimate:
    """Bytes one batch of `batch` groups laid out as `layout` keeps alive at once."""
    s = layout.shape
    outputs = sum((layout.out_rows(role).stop - layout.out_rows(role).start)
                  for role in layout.roles) * s.h_q * s.d_head * 4
    pool = pool_rows(s.d_head) * s.d_head * 2 * 4      # the signed float32 pool
    # per group its reference output, and the working set of the heads stacked at a time
    reference = batch * layout.q_rows * s.h_q * s.d_head * 8 + working_bytes(
        layout.q_rows * s.gqa, layout.kv_rows, s.h_kv, s.d_head, batch)
    shared = held_bytes(batch, s.S_q * s.gqa, s.S_kv_per_rank, s.h_kv, s.d_head)
    return MemoryEstimate(batch * layout.q_bytes + pool, batch * outputs,
                          batch * LIVE_LARGEST * plan.largest * 4 + shared, reference)


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
