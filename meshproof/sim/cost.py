"""What a numeric run will cost, estimated from the launch before any work: K/V bytes to
stream, floating-point work, and the seconds they take at this machine's rates.

A simulation that streams terabytes of K/V runs for hours and, without this, says nothing
until it ends (issue 28, item 4). The estimate reads only the IR: every op of every rank
(the numeric run evaluates them all, batched by group), a dot at 2·M·N·K flops, any other
op at one pass over its largest operand, and the float64 reference at two dots per query
row and key row. The rates are what the numeric run sustains on the 2-core machine the
project is measured on (benchmarks: `simulate mesh_mlo_1d` with d_head 8..65536 and
S_kv_per_rank up to 1e8): dots stream K/V from the input pool at about 6 GFLOP/s, the
elementwise ops (f16 rounding included) run at about 4e8 elements/s. It is an estimate
("about"), for telling a person what they are in for and for `--time-budget`, not a
measurement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from meshproof.model.schedule import OpKind, Schedule, ValueRef

FLOPS_PER_S = 6e9           # dots over streamed K/V, float32 BLAS on one core per batch
ELEMENTS_PER_S = 4e8        # elementwise passes (exp, max, casts with f16 rounding, ...)
ANNOUNCE_S = 10.0           # past this, the CLI states the estimate before starting

_FREE = frozenset({OpKind.SEND, OpKind.RECV})
# views of streamed K/V that stay streamed (sim/stream_plan.py: `stream_axes`)
_VIEWS = frozenset({OpKind.TRANS, OpKind.RESHAPE, OpKind.CAST})


@dataclass(frozen=True, slots=True)
class CostEstimate:
    """The numeric run's cost, from the launch alone."""

    kv_bytes: int        # K and V of every group, counted as f16 (the progress bar's unit)
    flops: float         # dots of the kernel and of the reference
    elements: float      # elementwise work: elements passed over
    seconds: float       # at this machine's rates (module docstring)

    def describe(self) -> str:
        """`about 13 TB of K/V to stream: about 20 minutes on this machine`."""
        return (f"about {bytes_text(self.kv_bytes)} of K/V to stream and "
                f"{self.flops / 1e9:,.0f} GFLOP: about {duration_text(self.seconds)} on "
                "this machine")


def estimate_cost(schedule: Schedule, kv_bytes: int) -> CostEstimate:
    """The cost of the numeric run of `schedule`, whose K/V of every group is `kv_bytes`
    (as f16, `NumericPlan.kv_bytes_f16`)."""
    flops = 0.0
    elements = 0.0
    sharded = set(schedule.launch.sharded)
    for prog in schedule.programs:
        shapes: dict[int, tuple[int, ...]] = {}
        streamed: set[int] = set()     # K/V rows as the generator streams them: no pass
        for op in prog.ops:
            if op.out is not None:
                shapes[op.out] = op.shape
            refs = [a.id for a in op.args if isinstance(a, ValueRef)]
            if (op.kind is OpKind.LOAD and op.ptr in sharded) or \
                    (op.kind in _VIEWS and refs and refs[0] in streamed):
                if op.out is not None:
                    streamed.add(op.out)
                continue
            if op.kind in _FREE:
                continue
            args = [shapes.get(r, ()) for r in refs]
            if op.kind is OpKind.DOT and args:
                inner = args[0][-1] if args[0] else 1
                flops += 2.0 * math.prod(op.shape) * inner
                continue
            largest = max([math.prod(op.shape), *(math.prod(s) for s in args)])
            elements += float(largest)
    # the float64 reference: at these sizes it weighs the generator's pool rows, not every
    # key (sim/reference.py), so a pass over the scores is what it adds
    d = _arg(schedule, "d_head")
    key_vectors = kv_bytes / 4.0 / d        # K and V as f16: 2 bytes each, half of it K
    elements += 2.0 * key_vectors * _arg(schedule, "S_q") * _arg(schedule, "h_q")
    return CostEstimate(kv_bytes, flops, elements, flops / FLOPS_PER_S +
                        elements / ELEMENTS_PER_S)


def _arg(schedule: Schedule, name: str) -> int:
    value = schedule.launch.arg(name, 1)
    return max(1, int(value)) if isinstance(value, int | float) else 1


def bytes_text(n: float) -> str:
    """Bytes in decimal units, as a person says them: 13 TB, 2.5 GB, 40 MB."""
    for unit, size in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value >= 10 else f"{value:.1f} {unit}"
    return f"{n:.0f} bytes"


def duration_text(seconds: float) -> str:
    """20 minutes, 3 hours, 2 days, 40 seconds."""
    for unit, size in (("years", 365 * 86400.0), ("days", 86400.0), ("hours", 3600.0),
                       ("minutes", 60.0)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.0f} {unit}"
    return "1 second" if seconds < 1.5 else f"{seconds:.0f} seconds"


__all__ = ["ANNOUNCE_S", "CostEstimate", "bytes_text", "duration_text", "estimate_cost"]
