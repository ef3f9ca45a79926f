"""Several launches simulated together: numerics per launch (every user of every group
checked), one timing run of all launches at once."""

from __future__ import annotations

import pytest

from meshproof.deploy.deployment import Deployment, build_deployment
from meshproof.deploy.simulate import simulate_deployment
from meshproof.errors import SimulationRefused
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.trace import trace
from meshproof.sim.api import simulate
from meshproof.sim.config import SimConfig

SHAPES = (("S_kv_per_rank", 16), ("d_head", 8), ("h_q", 2), ("h_kv", 1), ("S_q", 1))


def _deploy(kernel: str, starts: tuple[int, ...]) -> Deployment:
    ref = resolve_kernel(kernel)
    return build_deployment("test", [
        (ref, build_launch(ref, LaunchOptions(mesh="2x4", cube_start=k, args=SHAPES)))
        for k in starts], trace)


def test_two_batch_groups_every_users_output_is_checked() -> None:
    result = simulate_deployment(_deploy("mesh_mlo_2d_batch", (0, 8)))
    assert result.ok
    for launch in result.launches:
        assert launch is not None and launch.numeric is not None
        assert launch.numeric.groups == 8                  # one problem per user (PE)
        assert len(launch.numeric.per_rank) == 64          # every rank of every user
        assert {r.endpoint.pe for r in launch.numeric.per_rank} == set(range(8))
        assert launch.timing is None                       # timing is the together run's
    doc = result.to_json()
    assert doc["schema"] == "meshproof/deployment-simulation-v1" and doc["endpoints"] == 128


def test_timing_runs_all_launches_at_once() -> None:
    deployment = _deploy("mesh_kv_snake", (0, 8))
    together = simulate_deployment(deployment, SimConfig(numerics=False)).together
    alone = [simulate(s, SimConfig(numerics=False)) for s in deployment.schedules]
    assert together.timing is not None and all(a.timing is not None for a in alone)
    # separated launches share no link: together, the system takes as long as the slowest
    assert together.timing.latency_s == max(a.timing.latency_s for a in alone
                                            if a.timing is not None)
    assert together.timing.comm_steps == 7
    assert together.op_log.gemm == sum(a.op_log.gemm for a in alone)
    ranks = {r.endpoint.cube for r in together.timing.per_rank}
    assert ranks == set(range(16))


def test_launches_that_are_not_separated_are_not_simulated() -> None:
    with pytest.raises(SimulationRefused, match=r"are not separated .* both launch cube"):
        simulate_deployment(_deploy("mesh_mlo_2d", (0, 4)))
