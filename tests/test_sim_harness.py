"""The simulator's harness and evaluator on small hand-written kernels."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import trace_kernel

from meshproof.errors import HarnessError
from meshproof.model.channels import derive_channels
from meshproof.model.schedule import DType, GroupMode
from meshproof.sim.api import SimConfig, simulate
from meshproof.sim.checking import tolerance_for
from meshproof.sim.groups import find_groups
from meshproof.sim.harness import Buffer
from meshproof.sim.numerics import GroupEvaluator, plan_group

Run = Callable[[Sequence[str]], Any]
NO_TIMING = SimConfig(timing=False)

KERNELS = '''
from meshproof.kernels.attention_parts import (load_kv, load_q, partial_attention,
                                               store_output)


def local(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, skip_pe=-1,
          dtype="f16", *, tl):
    """Every PE attends to its own KV alone: each PE is a group of its own."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv_per_rank, h_kv, d_head, tl)
    q = tl.cast(q, dtype)
    _m, ell, o = partial_attention(q, k_t, v, d_head ** -0.5, tl)
    if tl.program_id(axis=0) != skip_pe:
        store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)


def overread(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, d_head, *, tl):
    tl.load(k_ptr, shape=(S_kv_per_rank + 1, 1, d_head), dtype="f16")


def scratch(q_ptr, k_ptr, v_ptr, o_ptr, tmp_ptr, S_q, S_kv_per_rank, d_head, *, tl):
    q = tl.load(q_ptr, shape=(S_q, d_head), dtype="f16")
    tl.store(tmp_ptr + 4, q * 2.0)
    back = tl.load(tmp_ptr + 4, shape=(S_q * d_head,), dtype="f32")
    tl.store(o_ptr, tl.reshape(back, (S_q, d_head)))
'''
SHAPES = (("S_q", 2), ("S_kv_per_rank", 16), ("d_head", 8))


@pytest.fixture
def kernels(tmp_path: Path) -> Path:
    path = tmp_path / "sim_kernels.py"
    path.write_text(KERNELS, encoding="utf-8")
    return path


def test_each_pe_can_be_its_own_attention_problem(kernels: Path) -> None:
    # three PEs that never communicate, each computing attention over its own KV
    schedule = trace_kernel(f"{kernels}::local", pes=3, wiring="cube_mesh", groups=GroupMode.PE,
                            args=(*SHAPES, ("h_q", 4), ("h_kv", 2)))
    result = simulate(schedule, NO_TIMING)
    assert result.numeric is not None
    assert result.numeric.ok, result.numeric.message
    assert result.numeric.groups == 3 and result.numeric.classes == 1
    assert result.timing is None and result.op_log.ipcq_send == 0


def test_by_default_independent_ranks_are_one_problem_and_fail(kernels: Path) -> None:
    """Groups come from the launch: three local attentions are not attention over the
    launch's KV, in the simulator's reference as in the verifier."""
    schedule = trace_kernel(f"{kernels}::local", pes=3, wiring="cube_mesh",
                            args=(*SHAPES, ("h_q", 4), ("h_kv", 2)))
    result = simulate(schedule, NO_TIMING)
    assert result.numeric is not None and not result.numeric.ok
    assert result.numeric.groups == 1


def test_a_problem_whose_rank_never_stores_fails(kernels: Path) -> None:
    schedule = trace_kernel(f"{kernels}::local", pes=3, wiring="cube_mesh", groups=GroupMode.PE,
                            args=(*SHAPES, ("h_q", 1), ("h_kv", 1), ("skip_pe", 1)))
    result = simulate(schedule, NO_TIMING)
    assert result.numeric is not None and not result.ok
    bad = [r for r in result.numeric.per_rank if not r.ok]
    assert [r.endpoint.pe for r in bad] == [1]
    assert bad[0].rel_err is None and "stores o_ptr" in bad[0].note
    assert result.numeric.rel_err is None
    assert "(cube 0, pe 1)" in result.numeric.message


def test_linked_ranks_that_do_not_communicate_are_one_group(kernels: Path) -> None:
    # on pe_line the three PEs are wired together: their outputs must merge all 3 shards
    schedule = trace_kernel(f"{kernels}::local", pes=3,
                            args=(*SHAPES, ("h_q", 1), ("h_kv", 1)))
    result = simulate(schedule, NO_TIMING)
    assert result.numeric is not None and result.numeric.groups == 1
    assert not result.numeric.ok


def test_bf16_widens_the_tolerance(kernels: Path) -> None:
    schedule = trace_kernel(f"{kernels}::local", pes=1,
                            args=(*SHAPES, ("h_q", 1), ("h_kv", 1), ("dtype", "bf16")))
    assert tolerance_for(schedule)[0] == 5e-2
    result = simulate(schedule, NO_TIMING)
    assert result.numeric is not None and result.numeric.ok
    assert result.numeric.dtypes == ("bf16", "f16", "f32")
    f16 = simulate(trace_kernel(f"{kernels}::local", pes=1,
                                args=(*SHAPES, ("h_q", 1), ("h_kv", 1))), NO_TIMING)
    assert f16.numeric is not None and f16.numeric.rel_err is not None
    assert result.numeric.rel_err is not None
    assert result.numeric.rel_err > f16.numeric.rel_err  # bf16 has 3 fewer mantissa bits


def test_load_past_the_harness_buffer_is_bad_input(kernels: Path, run_cli: Run) -> None:
    with pytest.raises(HarnessError, match=r"sim_kernels.py:\d+: rank \(cube 0, pe 0\)"):
        simulate(trace_kernel(f"{kernels}::overread", pes=1, args=SHAPES), NO_TIMING)
    res = run_cli(["simulate", f"{kernels}::overread", "--pes", "1",
                   *[f"--arg={k}={v}" for k, v in SHAPES]])
    assert res.code == 2
    assert "reads past the harness buffer" in res.err


def test_scratch_buffers_are_written_then_read_back(kernels: Path) -> None:
    schedule = trace_kernel(f"{kernels}::scratch", pes=1, args=SHAPES)
    group = find_groups(schedule, derive_channels(schedule))[0]
    q = np.arange(2 * 16, dtype=np.float32).reshape(2, 16)   # a batch of two
    memory = {"q_ptr": Buffer(q, DType.F16),
              "o_ptr": Buffer(np.full((2, 16), np.nan, np.float32), DType.F32, shared=False)}
    GroupEvaluator(plan_group(schedule, derive_channels(schedule), group), [memory], 2).run()
    assert np.array_equal(memory["o_ptr"].data, 2 * q)
    tmp = memory["tmp_ptr"].data
    assert tmp.shape == (2, 20) and np.isnan(tmp[:, :4]).all()
    assert np.array_equal(q, np.arange(32, dtype=np.float32).reshape(2, 16))  # input intact
