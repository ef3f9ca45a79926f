"""What a simulation is asked to do besides reading the IR: `SimConfig`.

Kept apart from `sim/api.py` so that code which only passes a configuration along (the
pipeline, a `verify` run) does not import the simulator itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from meshproof.model.hardware import DEFAULT_PROFILE, HardwareProfile
from meshproof.model.inputs import InputKind

if TYPE_CHECKING:  # annotations only: `verify` passes a SimConfig and never reads a witness
    from meshproof.model.witness_file import Witness
    from meshproof.sim.cost import CostEstimate


@dataclass(frozen=True, slots=True)
class NumericProgress:
    """How far a numeric run is: K/V bytes (counted as f16) and groups done, of all."""

    done_bytes: int
    total_bytes: int
    groups_done: int
    groups_total: int


@dataclass(frozen=True, slots=True)
class SimConfig:
    """How `simulate` runs: inputs and seed (or a witness's inputs), hardware profile,
    which parts, memory bounds."""

    seed: int = 0
    inputs: InputKind = InputKind.NORMAL
    # a rounding witness to replay (`--witness FILE`): its Q, K and V replace the seeded
    # inputs (seed and inputs are then unused)
    witness: Witness | None = None
    hardware: HardwareProfile = DEFAULT_PROFILE
    queue_depth: int | None = None      # None: the launch's queue depth
    numerics: bool = True
    timing: bool = True
    # working set (float32 Q, outputs, intermediates; K/V are streamed) of one batch
    chunk_bytes: int = 1 << 30
    # bytes the numeric run may use at once (None: what the machine has available); a
    # run that needs more is refused before anything is allocated
    memory_limit_bytes: int | None = None
    # batches of groups evaluated at once, in threads (None: min(2, the CPUs this
    # process may use)); results do not depend on it
    threads: int | None = None
    # told how far the numeric run is, after every streamed dot and every batch
    # (the CLI's progress bar); not part of the result
    progress: Callable[[NumericProgress], None] | None = field(
        default=None, compare=False, hash=False, repr=False)
    # wall seconds the whole simulation may take: refused up front when the cost estimate
    # (sim/cost.py) already passes it, stopped when it runs past (TimeBudgetExceeded)
    time_budget_s: float | None = None
    # told the numeric run's cost estimate before it starts (the CLI states a long one)
    estimate: Callable[[CostEstimate], None] | None = field(
        default=None, compare=False, hash=False, repr=False)


def numeric_workers(config: SimConfig) -> int:
    """How many batches the numeric run evaluates at once."""
    if config.threads is not None:
        return max(1, config.threads)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(2, cpus))
