"""The one pipeline: trace a deployment of N >= 1 launches, verify it, simulate it — for
the gate, the report, the pytest helpers and the CLI alike (`run_case`).

The stages are passed in (`resolver`, `tracer`, `verifier`, `simulator`, bundled as a
`Pipeline`, which callers pass whole), so a child-process tracer (model/isolation.py, what the
commands use), a fake verifier in a test, or a tool's own simulator plugs in without
touching this module.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from meshproof.deploy.deployment import build_deployment
from meshproof.deploy.launches import LaunchList
from meshproof.deploy.verify import verify_deployment
from meshproof.errors import SimulationRefused
from meshproof.gate.outcome import CaseOutcome
from meshproof.kernels import resolve_kernel
from meshproof.model.launch import Launch
from meshproof.model.loader import KernelRef
from meshproof.model.schedule import Schedule
from meshproof.model.trace import trace
from meshproof.verify.api import verify as verify_schedule
from meshproof.verify.properties import VerifyConfig
from meshproof.verify.result import Verdict

if TYPE_CHECKING:
    from meshproof.gate.cache import GateCache
    from meshproof.sim.config import SimConfig
    from meshproof.sim.result import SimResult

Resolver = Callable[[str], KernelRef]
Tracer = Callable[[KernelRef, Launch], Schedule]
Verifier = Callable[[Schedule, VerifyConfig], Verdict]
Simulator = Callable[[Schedule, "SimConfig"], "SimResult"]


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


def one_launch(kernel: KernelRef, launch: Launch) -> LaunchList:
    """A deployment of one launch, as `run_case` takes it."""
    return LaunchList(launch.spec.kernel, ((kernel, launch),))


def run_case(launches: LaunchList, *, simulate: bool, verify: bool = True,
             verify_config: VerifyConfig = VerifyConfig(),
             sim_config: SimConfig | None = None, cache: GateCache | None = None,
             pipeline: Pipeline = Pipeline()) -> CaseOutcome:
    """Trace the deployment's N >= 1 launches, then verify and/or simulate them: every
    caller (the commands, the gate, the report, the pytest helpers) runs through here,
    one launch (`one_launch`) or several (`--launches FILE`, a panel of kv groups) alike.

    Every launch's properties plus launch_separation (deploy/verify.py), numerics per
    launch and one timing run of all of them (deploy/simulate.py); the outcome's
    properties are each property's worst status over the launches.

    A schedule the simulator refuses (it deadlocks, or the launches are not separated) is
    recorded in `refused`, not raised; every other error (bad input, a kernel that raises,
    an internal error) propagates. With a cache, an outcome of the same schedules is
    reused; only decided outcomes are stored (an unknown depends on machine load).
    """
    built = build_deployment(launches.name, launches.launches, pipeline.tracer)
    key = _cache_key(cache, launches, built.schedules, simulate, verify_config)
    if cache is not None:
        stored = cache.get(key)
        if stored is not None:
            try:
                return replace(CaseOutcome.from_json(stored), cached=True,
                               schedule=built.schedules[0])
            except (KeyError, TypeError, ValueError):
                pass  # an entry from an incompatible build: prove again
    verdict = verify_deployment(built, verify_config, pipeline.verifier) if verify else None
    simulation, refused = None, ""
    if simulate:
        from meshproof.deploy.simulate import simulate_deployment  # loads the simulator
        from meshproof.sim.config import SimConfig  # with its inputs: a verify needs neither

        sim_config = SimConfig() if sim_config is None else sim_config
        try:
            simulation = simulate_deployment(built, sim_config, pipeline.simulator)
        except SimulationRefused as exc:  # it deadlocks, or the launches are not separated
            refused = str(exc)
    outcome = CaseOutcome.of(built, verdict, simulation, refused,
                             numerics=simulate and sim_config is not None and sim_config.numerics)
    if cache is not None and outcome.decided:
        cache.put(key, outcome.to_json())
    return outcome


def _cache_key(cache: GateCache | None, launches: LaunchList, schedules: tuple[Schedule, ...],
               simulate: bool, config: VerifyConfig) -> str:
    if cache is None:
        return ""
    keys = [cache.key(kernel, launch, schedule, simulate=simulate, config=config)
            for (kernel, launch), schedule in zip(launches.launches, schedules, strict=True)]
    if len(keys) == 1:
        return keys[0]
    return hashlib.sha256(("deployment:" + ",".join(keys)).encode()).hexdigest()
