"""The simulator refuses sizes that cannot fit, before allocating anything (sim/memory.py)."""

from __future__ import annotations

import json

import pytest
from helpers import RunCli, one_line_error, trace_kernel

from meshproof.errors import HarnessError
from meshproof.model.channels import derive_channels
from meshproof.model.inputs import POOL_ELEMENTS
from meshproof.model.schedule import GroupMode
from meshproof.sim import checking
from meshproof.sim.api import SimConfig, simulate
from meshproof.sim.checking import plan_numerics
from meshproof.sim.memory import estimate_batch


def test_absurd_sizes_are_refused_with_an_estimate_and_the_fix(run_cli: RunCli) -> None:
    res = run_cli(["simulate", "mesh_mlo_1d", "--arg", "S_kv_per_rank=1000000000000"])
    err = one_line_error(res)
    assert "GiB" in err and "available" in err
    assert "S_kv_per_rank=1000000000000" in err          # what was asked
    assert "lower S_kv_per_rank" in err and "--no-numerics" in err   # how to fix it
    # the JSON mode refuses the same way (nothing on stdout)
    res = run_cli(["simulate", "mesh_mlo_1d", "--arg", "S_kv_per_rank=10000000000",
                   "--json"])
    one_line_error(res)
    assert res.out == ""


def test_no_numerics_gives_timing_and_op_log_at_any_size(run_cli: RunCli) -> None:
    res = run_cli(["simulate", "mesh_mlo_1d", "--arg", "S_kv_per_rank=1000000000000",
                   "--no-numerics", "--json"])
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["numeric"] is None and doc["ok"] is True
    assert doc["timing"]["comm_steps"] == 7 and doc["op_log"]["gemm"] == 16


def test_memory_limit_shrinks_batches_before_refusing() -> None:
    # 4 cubes, each its own 8-PE line: 4 groups of one class, normally one batch
    schedule = trace_kernel("mesh_mlo_1d", cubes=4, groups=GroupMode.CUBE)
    table = derive_channels(schedule)
    whole = plan_numerics(schedule, table, 1 << 30, memory_limit=1 << 40)
    assert [c.batch for c in whole.classes] == [4]
    one = estimate_batch(whole.classes[0].plan, whole.classes[0].layout, 1)
    two = estimate_batch(whole.classes[0].plan, whole.classes[0].layout, 2)
    tight = plan_numerics(schedule, table, 1 << 30, memory_limit=two.total)
    assert [c.batch for c in tight.classes] == [2]
    # batching does not change the numbers
    free = simulate(schedule, SimConfig(timing=False))
    capped = simulate(schedule, SimConfig(timing=False, memory_limit_bytes=two.total))
    assert free.to_json() == capped.to_json()
    with pytest.raises(HarnessError, match=r"needs about .* GiB .* more than the"):
        simulate(schedule, SimConfig(timing=False, memory_limit_bytes=one.total - 1))


def test_the_estimate_counts_inputs_intermediates_and_reference() -> None:
    schedule = trace_kernel("mesh_mlo_1d", args=(("S_kv_per_rank", 1000), ("d_head", 64)))
    plan = plan_numerics(schedule, derive_channels(schedule), 1 << 30, memory_limit=1 << 40)
    m = plan.memory
    # K and V are streamed, never held: Q (1 row, 1 head) and the generator's signed pool
    pool = 2 * 4 * (POOL_ELEMENTS // 64) * 64
    assert m.inputs == 64 * 4 + pool
    assert m.intermediates >= 3 * 1000 * 4             # the scores of one rank, a few times
    assert m.intermediates < 3 * 1000 * 64 * 4         # not a whole K shard
    assert m.reference > 0 and m.total == m.inputs + m.outputs + m.intermediates + \
        m.reference


def test_running_out_of_memory_anyway_is_one_clear_line(
        run_cli: RunCli, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_memory(*_: object, **__: object) -> None:
        raise MemoryError("Unable to allocate 23.8 GiB")

    monkeypatch.setattr(checking, "batch_inputs", no_memory)
    err = one_line_error(run_cli(["simulate", "mesh_mlo_1d"]))
    assert "out of memory simulating mesh_mlo_1d" in err and "lower S_kv_per_rank" in err
