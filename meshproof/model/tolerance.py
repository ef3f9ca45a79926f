"""The error a run may show: one table that the simulator's check and numeric_safety's
verdict share (neither back-end imports the other).

By the narrowest dtype the schedule uses: 5e-2 if it uses bf16, else 1e-2 if it uses f16,
else 1e-5 (all f32). The simulator compares the norm-relative error of each checked rank
with it (spec/simulator.md); numeric_safety proves its elementwise bound
`|computed - exact| <= η·max|V| + τ` within `T·max|V|` (spec/semantics.md §7), with T
the same number unless `--tolerance` says otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable

from meshproof.model.schedule import DType, Schedule

TOLERANCE = {DType.BF16: 5e-2, DType.F16: 1e-2, DType.F32: 1e-5}
TOLERANCE_RULE = ("rel_err = ||o - ref||2 / ||ref||2 per checked rank; allowed: 5e-2 if the "
                  "schedule uses bf16, else 1e-2 if it uses f16, else 1e-5 (all f32)")


def tolerance_for(schedule: Schedule) -> tuple[float, tuple[str, ...]]:
    """The tolerance of the narrowest dtype `schedule` uses, and the dtypes it uses."""
    # by identity: an Enum hashes in Python, and a large launch has ~10^5 ops
    seen = {id(op.dtype) for prog in schedule.programs for op in prog.ops}
    return tolerance_of(d for d in DType if id(d) in seen)


def tolerance_of(used: Iterable[DType]) -> tuple[float, tuple[str, ...]]:
    """tolerance_for's answer from the dtypes a schedule uses (for a caller that walks the
    ops anyway: numeric_safety)."""
    have = set(used)
    names = tuple(sorted(d.value for d in have))
    for dt in (DType.BF16, DType.F16):
        if dt in have:
            return TOLERANCE[dt], names
    return TOLERANCE[DType.F32], names


def tolerance_source(schedule: Schedule) -> str:
    """Where the default tolerance of `schedule` comes from, in words."""
    return source_of(tolerance_for(schedule)[1])


def source_of(used: tuple[str, ...]) -> str:
    """tolerance_source's answer from the dtypes used (tolerance_of's second item)."""
    narrow = next((d for d in ("bf16", "f16") if d in used), "f32")
    return f"the simulator's for a schedule using {narrow}"


__all__ = ["TOLERANCE", "TOLERANCE_RULE", "source_of", "tolerance_for", "tolerance_of",
           "tolerance_source"]
