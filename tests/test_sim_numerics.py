"""Numerics of the reference simulator against dense float64 GQA attention."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import trace_kernel

from meshproof.errors import HarnessError, SimulationRefused
from meshproof.model.channels import derive_channels
from meshproof.model.schedule import DType, GroupMode
from meshproof.sim.api import SimConfig, simulate
from meshproof.sim.groups import find_groups
from meshproof.sim.harness import attention_shape, group_layout, make_inputs
from meshproof.sim.inputs import InputKind
from meshproof.sim.rounding import round_to

GOOD = [
    ("mesh_mlo_1d", {}),
    ("mesh_mlo_2d", {"mesh": "2x4", "wiring": "cube_mesh"}),
    ("ring_mlo", {"wiring": "pe_ring"}),
    ("mesh_kv", {}),
]
SHAPES = [
    {"S_q": 1, "h_q": 1, "h_kv": 1},
    {"S_q": 16, "h_q": 8, "h_kv": 1},
    {"S_q": 1, "h_q": 8, "h_kv": 1},
    {"S_q": 16, "h_q": 2, "h_kv": 2},
]


@pytest.mark.parametrize("inputs", list(InputKind))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "-".join(f"{k}{v}" for k, v in s.items()))
@pytest.mark.parametrize(("kernel", "options"), GOOD, ids=[k for k, _ in GOOD])
def test_reference_kernels_are_within_tolerance(kernel: str, options: dict[str, object],
                                                shape: dict[str, int], inputs: InputKind
                                                ) -> None:
    schedule = trace_kernel(kernel, args=tuple(shape.items()), **options)
    result = simulate(schedule, SimConfig(inputs=inputs, timing=False))
    num = result.numeric
    assert num is not None
    assert num.ok, num.message
    assert num.rel_err is not None and 0.0 < num.rel_err < num.tolerance
    # every rank that holds a shard stores and is checked
    assert len(num.per_rank) == len(schedule.active)
    assert num.tolerance == 1e-2  # the kernels store f16


@pytest.mark.parametrize("kernel", ["mesh_mlo_1d_normalised_merge",
                                    "mesh_mlo_1d_forward_running_state",
                                    "mesh_kv_skip_last"])
@pytest.mark.parametrize("inputs", list(InputKind))
def test_broken_kernels_are_out_of_tolerance(kernel: str, inputs: InputKind) -> None:
    result = simulate(trace_kernel(kernel), SimConfig(inputs=inputs, timing=False))
    assert result.numeric is not None
    assert not result.ok
    assert result.exit_code == 1
    assert "OUT OF TOLERANCE" in result.numeric.message


def test_seed_kernel_is_out_of_tolerance_not_a_crash(seeds_dir: Path) -> None:
    schedule = trace_kernel(
        f"{seeds_dir / 'attention_mesh_mlo.py'}::attention_mesh_mlo_kernel",
        args=(("S_q", 1), ("S_kv_per_rank", 16), ("h_q", 1), ("h_kv", 1), ("d_head", 8)))
    result = simulate(schedule, SimConfig(timing=False))
    assert result.numeric is not None
    assert not result.numeric.ok
    assert result.numeric.rel_err is not None and result.numeric.rel_err > 0.5


def test_errors_scale_with_the_kernel_not_the_harness() -> None:
    """The reference is float64: a kernel computing in f32 end to end is far closer than
    the f16 tolerance (here: the f16 output rounding dominates its error)."""
    result = simulate(trace_kernel("mesh_mlo_1d", args=(("d_head", 32),)),
                      SimConfig(timing=False))
    assert result.numeric is not None and result.numeric.rel_err is not None
    assert result.numeric.rel_err < 2e-3


def test_softmax_scale_reaches_kernel_and_reference() -> None:
    base = simulate(trace_kernel("mesh_mlo_1d"), SimConfig(timing=False))
    scaled = simulate(trace_kernel("mesh_mlo_1d", args=(("sm_scale", 0.05),)),
                      SimConfig(timing=False))
    assert base.numeric is not None and scaled.numeric is not None
    assert scaled.numeric.ok and scaled.numeric.softmax_scale == 0.05
    assert scaled.numeric.rel_err != base.numeric.rel_err


def test_groups_get_their_own_inputs_and_batching_does_not_change_results() -> None:
    schedule = trace_kernel("mesh_mlo_1d", cubes=4, groups=GroupMode.CUBE)
    one = simulate(schedule, SimConfig(timing=False, chunk_bytes=1))        # one group a batch
    all_ = simulate(schedule, SimConfig(timing=False))                      # all in one batch
    assert one.numeric is not None and all_.numeric is not None
    assert one.numeric.groups == 4 and one.numeric.classes == 1
    assert one.to_json() == all_.to_json()
    errs = {r.group: r.rel_err for r in all_.numeric.per_rank}
    assert len(set(errs.values())) == 4  # different data per group


def test_seed_changes_inputs() -> None:
    a = simulate(trace_kernel("mesh_mlo_1d"), SimConfig(seed=1, timing=False))
    b = simulate(trace_kernel("mesh_mlo_1d"), SimConfig(seed=2, timing=False))
    assert a.numeric is not None and b.numeric is not None
    assert a.numeric.rel_err != b.numeric.rel_err


def test_deadlocked_schedule_is_refused_naming_blocked_ranks() -> None:
    with pytest.raises(SimulationRefused) as exc:
        simulate(trace_kernel("mesh_mlo_1d_recv_first"))
    text = str(exc.value)
    assert "deadlocks at every queue depth" in text
    assert "at queue depth 4, 8 rank(s) are blocked" in text
    assert "rank (cube 0, pe 0) at recv E" in text
    assert "\n" not in text


def test_queue_depth_below_three_deadlocks_the_fanout() -> None:
    with pytest.raises(SimulationRefused, match="queue depth 2"):
        simulate(trace_kernel("mesh_mlo_1d", queue_depth=2))
    assert simulate(trace_kernel("mesh_mlo_1d", queue_depth=3)).ok


def test_missing_shape_argument_is_bad_input() -> None:
    schedule = trace_kernel("mesh_mlo_1d")
    spec = replace(schedule.launch, args=tuple(a for a in schedule.launch.args
                                               if a[0] != "d_head"))
    with pytest.raises(HarnessError, match="d_head"):
        simulate(replace(schedule, launch=spec))


@pytest.mark.parametrize("dtype", [DType.F16, DType.BF16])
def test_rounding_matches_a_reference_conversion(dtype: DType) -> None:
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(1 << 17) * 10.0 ** rng.integers(-9, 7, 1 << 17)).astype(np.float32)
    x[:8] = [np.nan, np.inf, -np.inf, 65504.0, 65519.0, 65520.0, 6.0e-8, 0.0]
    got = round_to(x, dtype)
    if dtype is DType.F16:
        with np.errstate(over="ignore"):
            want = x.astype(np.float16).astype(np.float32)
    else:  # round half to even on the upper 16 bits, computed with Python integers
        bits = x.view(np.uint32).astype(np.int64)
        low, high = bits & 0xFFFF, bits >> 16
        up = (low > 0x8000) | ((low == 0x8000) & (high & 1 == 1))
        want = ((high + up) << 16).astype(np.uint32).view(np.float32)
        want = np.where(np.isnan(x), np.float32(np.nan), want)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(round_to(got, dtype), got, equal_nan=True)  # idempotent


@pytest.mark.parametrize(("kernel", "args"), [("mesh_mlo_1d", (("h_q", 8),)),
                                              ("mesh_kv", (("S_q", 16),))])
def test_peaked_inputs_concentrate_attention(kernel: str, args: tuple[tuple[str, int], ...]
                                             ) -> None:
    schedule = trace_kernel(kernel, args=args)
    shape = attention_shape(schedule)
    group = find_groups(schedule, derive_channels(schedule))[0]
    layout = group_layout(schedule, group, shape)
    for kind in InputKind:
        inp = make_inputs(layout, (0,), kind, seed=0)
        q = inp.q[0].astype(np.float64)                 # (rows, h_q, d), h_kv = 1
        k = inp.k[0, :, 0].astype(np.float64)           # (kv rows, d)
        logits = shape.scale * np.einsum("rhd,nd->rhn", q, k)
        p = np.exp(logits - logits.max(axis=-1, keepdims=True))
        top4 = np.sort(p / p.sum(axis=-1, keepdims=True), axis=-1)[..., -4:].sum(axis=-1)
        if kind is InputKind.PEAKED:
            assert np.median(top4) > 0.95 and top4.min() > 0.5
        else:
            assert np.median(top4) < 0.5


@pytest.mark.parametrize("kernel,options", [
    ("mesh_mlo_1d", {}), ("ring_mlo", {}), ("mesh_kv", {}),
    ("mesh_mlo_2d", {"mesh": "2x4", "wiring": "cube_mesh"})])
def test_correct_kernels_pass_at_s_q_16_gqa_8_on_peaked_inputs(kernel: str,
                                                               options: dict[str, Any]) -> None:
    args = (("S_q", 16), ("h_q", 8), ("h_kv", 1), ("S_kv_per_rank", 32), ("d_head", 16))
    schedule = trace_kernel(kernel, args=args, **options)
    numeric = simulate(schedule, SimConfig(inputs=InputKind.PEAKED, timing=False)).numeric
    assert numeric is not None and numeric.ok, numeric.message if numeric else ""
    assert numeric.tolerance == 1e-2 and numeric.dtypes == ("f16", "f32")
    # f16 storage lands near 3e-4: 30x inside the tolerance, not at its edge
    assert numeric.rel_err is not None and numeric.rel_err < 1e-3


def test_peaked_inputs_can_hide_a_normalised_merge_but_normal_inputs_catch_it() -> None:
    schedule = trace_kernel("mesh_mlo_1d_normalised_merge")
    peaked = [simulate(schedule, SimConfig(inputs=InputKind.PEAKED, seed=seed, timing=False))
              for seed in (0, 1)]
    assert [r.ok for r in peaked] == [False, True]          # seed 1: every ℓ ≈ 1
    for seed in range(4):
        normal = simulate(schedule, SimConfig(seed=seed, timing=False)).numeric
        assert normal is not None and normal.rel_err is not None and normal.rel_err > 0.3


def test_a_negative_softmax_scale_still_peaks() -> None:
    schedule = trace_kernel("mesh_mlo_1d", args=(("sm_scale", -0.25),))
    assert simulate(schedule, SimConfig(inputs=InputKind.PEAKED, timing=False)).ok


VIEWS = Path(__file__).parent / "kernels" / "view_cases.py"


@pytest.mark.parametrize(("name", "ok"), [("chunked", True), ("same_chunk_twice", False)])
def test_views_select_their_elements(name: str, ok: bool) -> None:
    """tl.view copies elements [offset, offset + n) of its operand: a chunked swap is
    attention; sending head 0's rows twice is not."""
    result = simulate(trace_kernel(f"{VIEWS}::{name}", pes=2), SimConfig(timing=False))
    assert result.ok is ok
