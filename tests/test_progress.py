"""The Kahn-network run and the communication steps (model/progress.py)."""

from __future__ import annotations

import pytest
from helpers import trace_kernel

from meshproof.model.channels import derive_channels
from meshproof.model.progress import (
    DepthSweep,
    comm_steps,
    depth_sweep,
    hop_steps,
    max_sends_per_channel,
    run,
)
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


def _free(schedule: object, table: object, d: int) -> bool:
    return not run(schedule, table, d).deadlock  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(3))
def test_the_depth_sweep_decides_every_depth_as_a_fresh_run_does(seed: int) -> None:
    """Continuing a stuck run at D + 1 reaches what a run started at D + 1 reaches: the
    sweep's verdict at each depth, and so the minimal depth, are a fresh run's."""
    import randprog

    from meshproof.model.loader import resolve_kernel

    kernel = resolve_kernel(randprog.KERNEL_SPEC)
    for ex in randprog.seeded_examples(seed, 60):
        schedule = randprog.trace_example(ex, kernel)
        table = derive_channels(schedule)
        sweep = depth_sweep(table)
        assert sweep.free == {d: _free(schedule, table, d) for d in sweep.free}
        top = max(1, max_sends_per_channel(table))
        free = [d for d in range(1, top + 1) if _free(schedule, table, d)]
        assert sweep.minimal == (free[0] if free else None)


def test_the_sweep_goes_on_from_where_the_run_stuck() -> None:
    # three sends per step before the recvs: stuck at D = 1 and 2, free at 3
    schedule = trace_kernel("mesh_mlo_1d")
    table = derive_channels(schedule)
    assert depth_sweep(table).free == {1: False, 2: False, 3: True}
    # recvs first: every rank waits at a recv, no send waits for room, so no depth helps
    stuck = trace_kernel("mesh_mlo_1d_recv_first")
    sweep = depth_sweep(derive_channels(stuck))
    assert sweep == DepthSweep(None, {1: False})


def test_stamps_order_every_executed_op_after_what_it_waits_for() -> None:
    schedule = trace_kernel("mesh_mlo_2d", mesh="2x4", wiring="cube_mesh")
    table = derive_channels(schedule)
    for d in (3, 5):
        p = run(schedule, table, d)
        cols, s = table.cols, p.stamps
        assert not p.deadlock and (s > 0).all() and len(set(s.tolist())) == cols.n
        recv = ~cols.send
        assert (s[recv] > s[cols.partner[recv]]).all()
        assert dict(p.stamp) == {cols.ref(g): int(s[g]) for g in range(cols.n)}
    # rendezvous: a send and its recv share a stamp; ranks stuck at once have none
    p = run(schedule, table, 0)
    done = p.stamps > 0
    pairs = done & table.cols.send
    assert (p.stamps[pairs] == p.stamps[table.cols.partner[pairs]]).all()
    assert len(p.stamp) == int(done.sum())
