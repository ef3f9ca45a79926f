"""Entry point of verification: all five properties of a schedule, as one Verdict."""

from __future__ import annotations

import math
from dataclasses import dataclass

from meshproof.errors import LaunchError
from meshproof.model.channels import derive_channels
from meshproof.model.launch import MAX_QUEUE_DEPTH
from meshproof.model.schedule import Schedule
from meshproof.verify.deadlock import deadlock_freedom
from meshproof.verify.legality import direction_legality, launch_confinement
from meshproof.verify.matching import channel_matching
from meshproof.verify.attention import attention_equivalence
from meshproof.verify.exactly_once import exactly_once_merge
from meshproof.verify.numeric_safety import numeric_safety
from meshproof.verify.semantics import DEFAULT_INPUT_BOUND, semantic_analysis
from meshproof.verify.result import Verdict
from meshproof.verify.z3util import Budget


@dataclass(frozen=True, slots=True)
class VerifyConfig:
    queue_depth: int | None = None      # None: the launch's queue depth
    timeout_s: float = 60.0             # per solver call (wall clock, a safety net)
    rlimit: int = 200_000_000           # deterministic Z3 resource limit per call
    stuck_state_max_ops: int = 600      # full stuck-state search only up to this many comm ops
    keep_smt2: bool = False             # keep the certificate query text in the verdict
    input_bound: float = DEFAULT_INPUT_BOUND   # numeric_safety's |input| assumption


def verify(schedule: Schedule, config: VerifyConfig = VerifyConfig()) -> Verdict:
    depth = schedule.launch.queue_depth if config.queue_depth is None else config.queue_depth
    if not 0 <= depth <= MAX_QUEUE_DEPTH:
        raise LaunchError(f"queue depth {depth} is out of range 0..{MAX_QUEUE_DEPTH}")
    if not (math.isfinite(config.timeout_s) and config.timeout_s > 0):
        raise LaunchError(f"--timeout must be a positive, finite number of seconds, got "
                          f"{config.timeout_s}")
    budget = Budget(config.timeout_s, config.rlimit)
    table = derive_channels(schedule)
    deadlock = deadlock_freedom(schedule, table, depth, budget, config.stuck_state_max_ops,
                                config.keep_smt2)
    sem = semantic_analysis(schedule, table)
    properties = (
        direction_legality(schedule, table),
        launch_confinement(schedule, table),
        channel_matching(schedule, table),
        deadlock.result,
        exactly_once_merge(schedule, table, sem),
        attention_equivalence(schedule, table, sem),
        numeric_safety(schedule, table, sem, config.input_bound),
    )
    return Verdict(schedule.launch.kernel, schedule.launch, properties, deadlock.min_queue_depth,
                   deadlock.rendezvous, deadlock.smt2, depth)
