"""The float64 reference (sim/reference.py) equals textbook dense attention, both paths;
streamed K/V evaluate as the whole arrays do (sim/numerics.py, sim/streamed.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import trace_kernel
from threadpoolctl import threadpool_limits

from meshproof.model.channels import derive_channels
from meshproof.model.inputs import InputKind
from meshproof.model.schedule import DType, GroupMode, Op, OpKind, SourceLoc, ValueRef
from meshproof.sim import numerics, reference
from meshproof.sim.api import SimConfig, simulate
from meshproof.sim.checking import plan_numerics
from meshproof.sim.inputs import group_input
from meshproof.sim.reference import (
    dense_reference,
    group_reference,
    group_references,
    stacked_heads,
    uses_pool,
)
from meshproof.sim.result import NumericResult
from meshproof.sim.stream_plan import follow_axis
from meshproof.sim.streamed import Streamed


def _one_pe(tmp_path: Path, src: str, name: str, kv_rows: int, h_q: int = 1
            ) -> NumericResult:
    """Simulate kernel `name` of source `src` on one PE, with d_head 16."""
    path = tmp_path / f"{name}.py"
    path.write_text(src, encoding="utf-8")
    schedule = trace_kernel(f"{path}::{name}", pes=1, wiring="pe_line",
                            args=(("S_q", 1), ("S_kv_per_rank", kv_rows), ("d_head", 16),
                                  ("h_q", h_q), ("h_kv", 1)))
    result = simulate(schedule, SimConfig(timing=False))
    assert result.numeric is not None
    return result.numeric


CASES = [  # q_rows, h_q, h_kv, d, kv_rows
    (2, 4, 2, 8, 300), (1, 1, 1, 128, 70000), (1, 8, 2, 64, 140000), (3, 3, 3, 5, 2000)]


@pytest.mark.parametrize("kind", list(InputKind))
@pytest.mark.parametrize("case", CASES)
def test_the_reference_is_dense_float64_attention(kind: InputKind,
                                                  case: tuple[int, ...]) -> None:
    q_rows, h_q, h_kv, d, kv_rows = case
    gi = group_input(5, 1, kind, q_rows, kv_rows, h_q, h_kv, d, d ** -0.5)
    want = dense_reference(gi.q, gi.k.block(0, kv_rows), gi.v.block(0, kv_rows), d ** -0.5)
    assert np.abs(group_reference(gi, d ** -0.5) - want).max() < 1e-12


def test_the_heads_of_several_groups_share_the_pool_products_with_their_own_numbers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Kv heads of several query rows go through the pool in one stack (one U = q·poolᵀ
    and one W·pool for all): each group's outputs are its own reference's, to the bit.
    A head of one query row stays a GEMV of its own (a GEMM's sums are ordered
    differently)."""
    scale = 128 ** -0.5
    groups = [group_input(5, g, InputKind.NORMAL, 1, 70000, 4, 1, 128, scale)
              for g in range(3)]
    stacks: list[int] = []
    real = reference._pooled_heads

    def counted(inputs: object, stack: list[object]) -> object:
        stacks.append(len(stack))
        return real(inputs, stack)  # type: ignore[arg-type]

    monkeypatch.setattr(reference, "_pooled_heads", counted)
    with threadpool_limits(limits=1, user_api="blas"):    # as the simulator runs it
        together = group_references(groups, scale)
        assert stacks == [3]
        for gi, out in zip(groups, together, strict=True):
            np.testing.assert_array_equal(group_reference(gi, scale), out)
    assert stacks == [3, 1, 1, 1]
    assert stacked_heads(1, 128) == 1 and stacked_heads(8, 128) == 8


def test_long_contexts_with_few_queries_read_the_pool() -> None:
    assert [uses_pool(c[0] * c[1] // c[2], c[4], c[3]) for c in CASES] == \
        [False, True, True, False]                # the cases above test both paths
    assert uses_pool(1, 1 << 20, 128) and uses_pool(8, 1 << 20, 128)
    assert not uses_pool(1, 256, 16)            # short: blocks of K/V rows
    assert not uses_pool(4096, 1 << 20, 128)    # many queries: U and W would be large


def test_streamed_kv_give_the_numbers_of_whole_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    schedule = trace_kernel("mesh_mlo_1d", args=(("S_kv_per_rank", 5000), ("d_head", 32),
                                                 ("h_q", 4), ("h_kv", 2)))
    plan = plan_numerics(schedule, derive_channels(schedule), 1 << 30)
    streamed = plan.classes[0].plan.ranks[0].streamed
    assert len(streamed) >= 4                   # the K and V loads and their transposes
    fast = simulate(schedule, SimConfig(timing=False))
    monkeypatch.setattr(numerics, "stream_axes", lambda *_: {})
    whole = simulate(schedule, SimConfig(timing=False))
    assert fast.numeric is not None and whole.numeric is not None
    assert fast.numeric.ok and whole.numeric.ok
    # the P.V products are summed piece by piece: float32 rounding differs, not more
    assert fast.numeric.rel_err == pytest.approx(whole.numeric.rel_err, rel=0.05)
    assert fast.numeric.max_abs_v == whole.numeric.max_abs_v


def test_key_tiled_v_streams_by_whole_tiles_with_the_numbers_of_whole_arrays(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """fold_scores with key_tile reshapes V to (h, tiles, key_tile, d): the plan follows
    the split, the P.V dot runs tile by tile and V is never made whole; each tile's
    product is the whole dot's, so the numbers are the same to the bit."""
    schedule = trace_kernel("mesh_mlo_1d", args=(
        ("S_kv_per_rank", 4096), ("d_head", 32), ("h_q", 4), ("h_kv", 2),
        ("p_dtype", "f32"), ("key_tile", 1024)))
    rank = plan_numerics(schedule, derive_channels(schedule), 1 << 30).classes[0].plan.ranks[0]
    tiled_v = [op.out for op in rank.ops if op.shape == (2, 4, 1024, 32)]
    assert len(tiled_v) == 1 and tiled_v[0] in rank.streamed
    assert rank.whole_elements < 4096 * 2 * 32     # neither K nor V is held whole

    def never_whole(self: Streamed) -> None:
        raise AssertionError("a streamed value was made whole")

    with monkeypatch.context() as m:
        m.setattr(Streamed, "whole", never_whole)
        fast = simulate(schedule, SimConfig(timing=False))
    monkeypatch.setattr(numerics, "stream_axes", lambda *_: {})
    whole = simulate(schedule, SimConfig(timing=False))
    assert fast.numeric is not None and whole.numeric is not None and fast.numeric.ok
    assert fast.numeric.rel_err == whole.numeric.rel_err


def _shape_op(kind: OpKind, shape: tuple[int, ...],
              perm: tuple[int, ...] | None = None) -> Op:
    return Op(1, kind, (ValueRef(0),), 1, shape, DType.F16, SourceLoc("k.py", 1), perm=perm)


def test_the_plan_follows_keys_only_into_whole_key_tiles() -> None:
    """A reshape that splits the rows into (tiles, key_tile) is followed along the tile
    axis; afterwards only steps that keep each tile's rows right after the tile axis."""
    tiled = (2, 4, 1024, 32)
    assert follow_axis(_shape_op(OpKind.RESHAPE, tiled), (2, 4096, 32), 1) == (1, 1024)
    swapped = _shape_op(OpKind.TRANS, (2, 1024, 4, 32), (0, 2, 1, 3))
    assert follow_axis(swapped, tiled, 1, 1024) is None
    tiles_first = _shape_op(OpKind.TRANS, (4, 1024, 2, 32), (1, 2, 0, 3))
    assert follow_axis(tiles_first, tiled, 1, 1024) == (0, 1024)
    assert follow_axis(_shape_op(OpKind.RESHAPE, (2, 4096, 32)), tiled, 1, 1024) is None


def test_a_kernel_that_uses_k_elementwise_still_evaluates(tmp_path: Path) -> None:
    # K scaled before the dot: the load cannot stream and is made whole
    src = '''
from meshproof.kernels.attention_parts import load_q, store_output

def scaled(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, *, tl):
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k = tl.load(k_ptr, shape=(S_kv_per_rank, h_kv, d_head), dtype="f16") * 1.0
    v = tl.load(v_ptr, shape=(S_kv_per_rank, h_kv, d_head), dtype="f16")
    s = tl.dot(q, tl.trans(k, (1, 2, 0)), out_dtype="f32") * (d_head ** -0.5)
    m = tl.max(s, axis=-1)
    p = tl.exp(s - m)
    o = tl.dot(tl.cast(p, "f16"), tl.trans(v, (1, 0, 2)), out_dtype="f32")
    store_output(o_ptr, o, tl.sum(p, axis=-1), S_q, h_q, h_kv, d_head, tl)
'''
    numeric = _one_pe(tmp_path, src, "scaled", 300, h_q=2)
    assert numeric.ok, numeric.message


def test_threads_do_not_change_the_result() -> None:
    schedule = trace_kernel("mesh_mlo_1d", cubes=4, groups=GroupMode.CUBE,
                            args=(("S_kv_per_rank", 3000),))
    one = simulate(schedule, SimConfig(timing=False, threads=1))
    two = simulate(schedule, SimConfig(timing=False, threads=2))
    assert one.numeric is not None and one.numeric.groups == 4
    assert one.to_json() == two.to_json()


def test_a_kernel_that_writes_its_k_buffer_sees_what_it_wrote(tmp_path: Path) -> None:
    src = '''
from meshproof.kernels.attention_parts import load_kv, load_q, partial_attention, store_output

def zero_k(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, *, tl):
    k = tl.load(k_ptr, shape=(S_kv_per_rank, h_kv, d_head), dtype="f16")
    tl.store(k_ptr, tl.cast(k * 0.0, "f16"))
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv_per_rank, h_kv, d_head, tl)
    _m, ell, o = partial_attention(q, k_t, v, d_head ** -0.5, tl)
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)
'''
    numeric = _one_pe(tmp_path, src, "zero_k", 400)
    assert not numeric.ok
    # with K zeroed every score is 0: the output is the mean of V, far from attention
    rel = numeric.rel_err
    assert rel is not None and rel > 0.1
