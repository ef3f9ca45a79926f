"""Simulate a deployment: each launch's numerics, and one timing run of all of them.

Numerics are per launch (each launch's attention problems get their own inputs, as
`meshproof simulate` gives them). Timing runs the deployment's merged schedule
(`Deployment.merged`), so every launch's messages are in flight at once and the modelled
latency is the system's: the last launch to finish. The timing model charges every
directed link on its own (spec/timing.md), and launch_separation (checked first: the
simulator refuses launches that share endpoints or links) guarantees no two launches
write one link, so together equals the slowest launch alone — the run shows it rather
than assumes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from meshproof.deploy.deployment import Deployment
from meshproof.deploy.separation import launch_separation
from meshproof.errors import SimulationRefused
from meshproof.model.schedule import Schedule
from meshproof.sim.api import simulate
from meshproof.sim.config import SimConfig
from meshproof.sim.result import SimResult

DEPLOYMENT_SIM_SCHEMA = "meshproof/deployment-simulation-v1"

Simulator = Callable[[Schedule, SimConfig], SimResult]


@dataclass(frozen=True, slots=True)
class DeploymentSimulation:
    """N >= 1 launches simulated: per launch its numeric run (None when numerics were not
    asked for); `together` is the merged schedule's timing and op log. One launch is run
    once, whole: `together` is that run and `launches[0]` the same run when numerics were
    asked for."""

    deployment: Deployment
    launches: tuple[SimResult | None, ...]
    together: SimResult

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.launches if r is not None)

    def to_json(self) -> dict[str, Any]:
        d = self.deployment
        timing = self.together.timing
        return {"schema": DEPLOYMENT_SIM_SCHEMA, "ok": self.ok, "name": d.name,
                "system": d.system.shape_text, "endpoints": d.endpoints,
                "launches": [{"launch": s.launch.to_json(),
                              "numeric": r.numeric.to_json() if r and r.numeric else None,
                              "op_log": r.op_log.to_json() if r else None}
                             for s, r in zip(d.schedules, self.launches, strict=True)],
                "timing": timing.to_json() if timing else None,
                "op_log": self.together.op_log.to_json()}


def simulate_deployment(deployment: Deployment, config: SimConfig = SimConfig(),
                        simulator: Simulator = simulate) -> DeploymentSimulation:
    separation = launch_separation(deployment)
    if not separation.ok:
        raise SimulationRefused(f"the launches of {deployment.name} are not separated "
                                f"({separation.message}); the simulator refuses to run "
                                "them together (see `meshproof verify` for every crossing)")
    if len(deployment.schedules) == 1:
        # one launch: its own run is the system's, so it is simulated once, whole
        alone = simulator(deployment.schedules[0], config)
        return DeploymentSimulation(deployment, (alone if config.numerics else None,), alone)
    launches: list[SimResult | None] = []
    if config.numerics:
        only_numbers = replace(config, timing=False)
        launches = [simulator(s, only_numbers) for s in deployment.schedules]
    else:
        launches = [None] * len(deployment.schedules)
    together = simulator(deployment.merged(), replace(config, numerics=False))
    return DeploymentSimulation(deployment, tuple(launches), together)
