"""Entry point of the reference simulator: `simulate(schedule, config) -> SimResult`.

Reads only the schedule IR and its launch. A schedule that deadlocks at the queue depth
is refused (SimulationRefused naming the blocked ranks): its numbers would mean nothing.
"""

from __future__ import annotations

import time

from meshproof.errors import HarnessError, SimulationRefused, TimeBudgetExceeded
from meshproof.model.blocking import blocking
from meshproof.model.channel_table import ChannelTable, OpRef, PortStatus
from meshproof.model.channels import derive_channels
from meshproof.model.hardware import HardwareProfile
from meshproof.model.progress import Progress, comm_steps, hop_steps, run
from meshproof.model.schedule import Schedule
from meshproof.sim.checking import plan_numerics, run_numerics
from meshproof.sim.config import SimConfig, numeric_workers
from meshproof.sim.cost import estimate_cost
from meshproof.sim.oplog import op_log
from meshproof.sim.result import (
    CriticalStep,
    LinkTraffic,
    RankTiming,
    SimResult,
    TimingResult,
)
from meshproof.sim.timing import TimingRun, check_profile, run_timing

__all__ = ["SimConfig", "simulate"]

# Blocked ranks named in a deadlock message before it says "and N more".
_NAMED_BLOCKED = 6


def simulate(schedule: Schedule, config: SimConfig = SimConfig()) -> SimResult:
    """Refuse a deadlocking schedule, then run the timing model and the numerics.

    Bad input (a negative seed, a hardware profile the timing model cannot use, shapes the
    harness cannot build or that do not fit in memory) is raised before any work.
    """
    if config.seed < 0:
        raise HarnessError(f"seed {config.seed} is negative; pass a seed >= 0")
    if config.timing:
        check_profile(config.hardware)
    budget = config.time_budget_s
    if budget is not None and not (budget > 0 and budget < float("inf")):
        raise HarnessError(f"--time-budget must be a positive number of seconds, got {budget}")
    phases: dict[str, float] = {}
    t0 = time.perf_counter()
    deadline = None if budget is None else time.monotonic() + budget
    table = derive_channels(schedule)
    depth = config.queue_depth if config.queue_depth is not None else \
        schedule.launch.queue_depth
    progress = run(schedule, table, depth)
    if progress.deadlock:
        raise SimulationRefused(deadlock_message(schedule, table, progress))
    workers = numeric_workers(config)
    plan = plan_numerics(schedule, table, config.chunk_bytes, config.memory_limit_bytes,
                         config.inputs, workers, config.witness) if config.numerics else None
    if plan is not None:
        cost = estimate_cost(schedule, plan.kv_bytes_f16)
        if budget is not None and cost.seconds > budget:
            raise TimeBudgetExceeded(
                f"refused: the numeric run has {cost.describe()}, past "
                f"--time-budget {budget:g} s; lower the shapes with --arg, raise "
                "--time-budget, or run the timing model alone with --no-numerics")
        if config.estimate is not None:
            config.estimate(cost)
    phases["progress"] = time.perf_counter() - t0
    timing: TimingResult | None = None
    timing_run: TimingRun | None = None
    if config.timing:
        t1 = time.perf_counter()
        timing_run = run_timing(schedule, table, config.hardware, depth)
        steps = comm_steps(hop_steps(schedule, table, progress))
        timing = summarise_timing(schedule, table, timing_run, config.hardware, depth, steps)
        phases["timing"] = time.perf_counter() - t1
    numeric = None
    if plan is not None:
        t2 = time.perf_counter()
        numeric = run_numerics(schedule, plan, config.seed, config.inputs, phases,
                               config.progress, workers, deadline, _overrun(budget))
        # wall seconds of the whole numeric run (the other phases are thread-seconds)
        phases["numerics_wall"] = time.perf_counter() - t2
    return SimResult(schedule.launch.kernel, schedule.launch, numeric, timing,
                     op_log(schedule), timing_run, tuple(sorted(phases.items())))


def _overrun(budget: float | None) -> str:
    """The line a run stopped at its --time-budget ends with (the progress is added)."""
    if budget is None:
        return ""
    return f"stopped at --time-budget {budget:g} s before the numeric run finished; no result"


def deadlock_message(schedule: Schedule, table: ChannelTable, progress: Progress) -> str:
    """Why the simulator refuses: the root cause first (the blocked op no other rank can
    release, model/blocking.py), a deeper queue suggested only when one removes the
    deadlock, then the ranks blocked at this depth."""
    b = blocking(schedule, table)
    roots = sorted({(r.rank, r.op): r for r in b.roots.values()}.items())
    if roots:
        named = "; ".join(r.describe(schedule) for _, r in roots[:_NAMED_BLOCKED])
        more = len(roots) - _NAMED_BLOCKED
        lead = (f"the schedule deadlocks at every queue depth: {named}"
                + (f"; and {more} more" if more > 0 else "")
                + "; no other rank can release "
                + ("it" if len(roots) == 1 else "them")
                + ", so fix the kernel there (a deeper queue cannot help)")
    else:
        lead = (f"the schedule deadlocks at queue depth {progress.depth} and completes from "
                f"depth {b.minimal_depth}: raise --queue-depth to {b.minimal_depth}, or send "
                "fewer messages before receiving")
    return (f"{lead}; {_blocked_ranks(schedule, table, progress)}; the simulator refuses to "
            "run it (`meshproof verify` shows the wait-for cycle)")


def _blocked_ranks(schedule: Schedule, table: ChannelTable, progress: Progress) -> str:
    parts = []
    for r, op_index in sorted(progress.stuck.items()):
        prog = schedule.programs[r]
        op = prog.ops[op_index]
        assert op.dir is not None
        use = table.port_use[OpRef(r, op_index)]
        why = {PortStatus.NO_LINK: f", the wiring has no {op.dir.value} link",
               PortStatus.OUTSIDE: ", its peer is outside the launch"}.get(use.status, "")
        parts.append(f"{op.source}: rank {prog.endpoint.describe()} at {op.kind.value} "
                     f"{op.dir.value} (op #{op_index}{why})")
    more = len(parts) - _NAMED_BLOCKED
    named = "; ".join(parts[:_NAMED_BLOCKED]) + (f"; and {more} more" if more > 0 else "")
    return f"at queue depth {progress.depth}, {len(parts)} rank(s) are blocked: {named}"


def summarise_timing(schedule: Schedule, table: ChannelTable, tr: TimingRun,
                     hw: HardwareProfile, depth: int, steps: int) -> TimingResult:
    per_rank = []
    for r, evs in enumerate(tr.events):
        if not evs:
            continue
        busy = sum(e.end - e.start for e in evs)
        wait = sum(e.start - e.ready for e in evs)
        per_rank.append(RankTiming(schedule.programs[r].endpoint, len(evs), busy, wait,
                                   evs[-1].end))
    path = tuple(
        CriticalStep(schedule.programs[e.rank].endpoint, e.op,
                     schedule.programs[e.rank].ops[e.op].kind.value,
                     str(schedule.programs[e.rank].ops[e.op].source), e.start, e.end, e.via)
        for e in tr.critical_path())
    counts: dict[int, list[int]] = {}
    for m in tr.messages:
        c = counts.setdefault(m.channel, [0, 0])
        c[0] += 1
        c[1] += m.nbytes
    links = tuple(LinkTraffic(table.channels[i].name, tr.link_class[i], c[0], c[1])
                  for i, c in sorted(counts.items()))
    return TimingResult(hw.name, depth, tr.latency_s, steps, path, tuple(per_rank),
                        links, hw.to_json())
