"""The one pipeline: trace a launch, verify it, simulate it — for the gate, the report,
the pytest helpers and the CLI alike.

The stages are passed in (`resolver`, `tracer`, `verifier`, `simulator`, bundled as a
`Pipeline` by the callers above), so a child-process tracer (model/isolation.py, what the
commands use), a fake verifier in a test, or a tool's own simulator plugs in without
touching this module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from meshproof.errors import SimulationRefused
from meshproof.gate.outcome import CaseOutcome
from meshproof.model.launch import Launch
from meshproof.model.loader import KernelRef, resolve_kernel
from meshproof.model.schedule import Schedule
from meshproof.model.trace import trace
from meshproof.sim.config import SimConfig
from meshproof.verify.api import verify as verify_schedule
from meshproof.verify.properties import VerifyConfig
from meshproof.verify.result import Verdict

if TYPE_CHECKING:
    from meshproof.gate.cache import GateCache
    from meshproof.sim.result import SimResult

Resolver = Callable[[str], KernelRef]
Tracer = Callable[[KernelRef, Launch], Schedule]
Verifier = Callable[[Schedule, VerifyConfig], Verdict]
Simulator = Callable[[Schedule, SimConfig], "SimResult"]


def simulate_schedule(schedule: Schedule, config: SimConfig) -> SimResult:
    """The numpy reference simulator (`sim.api.simulate`), imported when a case is first
    simulated: a `verify` run never loads the simulator, a fifth of its start-up."""
    from meshproof.sim.api import simulate

    return simulate(schedule, config)


@dataclass(frozen=True, slots=True)
class Pipeline:
    """The stages a case runs through (module-level functions or frozen records, so worker
    processes can receive them). `resolver` finds a kernel by its name or
    `path::function` (importing its file); the defaults run everything in-process."""

    resolver: Resolver = resolve_kernel
    tracer: Tracer = trace
    verifier: Verifier = verify_schedule
    simulator: Simulator = simulate_schedule


def run_case(kernel: KernelRef, launch: Launch, *, simulate: bool, verify: bool = True,
             verify_config: VerifyConfig = VerifyConfig(),
             sim_config: SimConfig = SimConfig(), cache: GateCache | None = None,
             tracer: Tracer = trace, verifier: Verifier = verify_schedule,
             simulator: Simulator = simulate_schedule) -> CaseOutcome:
    """Trace `kernel` on `launch`, then verify and/or simulate the schedule.

    A schedule the simulator refuses (it deadlocks) is recorded in `refused`, not raised;
    every other error (bad input, a kernel that raises, an internal error) propagates.
    With a cache, an outcome of the same schedule is reused; only decided outcomes are
    stored (an unknown depends on machine load).
    """
    schedule = tracer(kernel, launch)
    key = cache.key(kernel, launch, schedule, simulate=simulate, config=verify_config) \
        if cache is not None else ""
    if cache is not None:
        stored = cache.get(key)
        if stored is not None:
            try:
                return replace(CaseOutcome.from_json(stored), cached=True, schedule=schedule)
            except (KeyError, TypeError, ValueError):
                pass  # an entry from an incompatible build: prove again
    verdict = verifier(schedule, verify_config) if verify else None
    simulation, refused = None, ""
    if simulate:
        try:
            simulation = simulator(schedule, sim_config)
        except SimulationRefused as exc:  # e.g. it deadlocks: there are no numbers to check
            refused = str(exc)
    outcome = CaseOutcome.of(schedule, verdict, simulation, refused,
                             numerics=simulate and sim_config.numerics)
    if cache is not None and outcome.decided:
        cache.put(key, outcome.to_json())
    return outcome
