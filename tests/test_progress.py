"""The Kahn-network run and the communication steps (model/progress.py)."""

from __future__ import annotations

import pytest
from helpers import trace_kernel

from meshproof.model.channels import derive_channels
from meshproof.model.progress import comm_steps, hop_steps, run
from meshproof.report.messages import message_table
from meshproof.sim.api import simulate
from meshproof.sim.config import SimConfig


@pytest.mark.parametrize(("kernel", "options", "steps"), [
    ("mesh_mlo_1d", {}, 7),
    ("mesh_mlo_2d", {"mesh": "2x4", "wiring": "cube_mesh"}, 4),
    ("mesh_mlo_2d", {"mesh": "4x4", "wiring": "cube_mesh"}, 6),
    ("ring_mlo", {}, 7),
    ("mesh_kv", {}, 7),
])
def test_the_simulator_and_the_diagrams_count_the_same_steps(
        kernel: str, options: dict[str, object], steps: int) -> None:
    """One computation: the simulator's comm_steps is the diagrams' largest step."""
    schedule = trace_kernel(kernel, **options)
    table = derive_channels(schedule)
    ours = comm_steps(hop_steps(schedule, table, run(schedule, table,
                                                     schedule.launch.queue_depth)))
    timing = simulate(schedule, SimConfig(numerics=False)).timing
    assert timing is not None
    assert ours == timing.comm_steps == message_table(schedule).comm_steps == steps


def test_a_schedule_stuck_at_once_has_no_steps_and_one_that_fills_its_queues_one() -> None:
    stuck = trace_kernel("mesh_mlo_1d_recv_first")
    table = derive_channels(stuck)
    assert comm_steps(hop_steps(stuck, table, run(stuck, table, 4))) == 0
    shallow = trace_kernel("mesh_mlo_1d", queue_depth=2)  # sends 2 of 3, then blocks
    table = derive_channels(shallow)
    assert comm_steps(hop_steps(shallow, table, run(shallow, table, 2))) == 1
