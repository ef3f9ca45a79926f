"""The counter-based input generator (model/inputs.py): any row range regenerates alone."""

from __future__ import annotations

import numpy as np
import pytest

from meshproof.model.inputs import (
    InputKind,
    max_abs,
    normal_block,
    pieces,
    signed_pool,
    tile_vectors,
)
from meshproof.sim.inputs import group_input


@pytest.mark.parametrize("tensor", ["q", "k", "v"])
@pytest.mark.parametrize(("heads", "d"), [(1, 128), (3, 16), (2, 5)])
def test_a_row_range_equals_the_same_rows_of_a_whole_draw(tensor: str, heads: int,
                                                           d: int) -> None:
    rows = 3 * tile_vectors(d) // heads + 7
    whole = normal_block(4, 2, tensor, 0, rows, heads, d)
    for lo, hi in [(0, 1), (5, rows // 2), (rows // 3, rows), (rows - 1, rows)]:
        part = normal_block(4, 2, tensor, lo, hi, heads, d)
        assert np.array_equal(part, whole[lo:hi])
    # and a longer tensor starts with the same rows (no dependence on the length)
    longer = normal_block(4, 2, tensor, 0, 2 * rows, heads, d)
    assert np.array_equal(longer[:rows], whole)


def test_values_are_f16_normal_and_differ_by_seed_group_and_tensor() -> None:
    x = normal_block(0, 0, "k", 0, 20000, 1, 128)
    assert np.array_equal(x, x.astype(np.float16).astype(np.float32))
    assert abs(float(x.mean())) < 0.01 and abs(float(x.std()) - 1.0) < 0.01
    q = normal_block(0, 0, "q", 0, 20000, 1, 16)
    assert abs(float(q.std()) - 1.0) < 0.01
    a = normal_block(0, 0, "v", 0, 64, 1, 16)
    for other in (normal_block(1, 0, "v", 0, 64, 1, 16), normal_block(0, 1, "v", 0, 64, 1, 16),
                  normal_block(0, 0, "k", 0, 64, 1, 16)):
        assert not np.array_equal(a, other)


def test_pieces_are_pool_views_that_tile_the_rows() -> None:
    d, heads = 16, 1
    tv = tile_vectors(d)
    got = list(pieces(3, 1, "k", 10, 3 * tv + 5, heads, d))
    assert [(p.row_lo, p.row_hi) for p in got] == [(10, tv), (tv, 2 * tv), (2 * tv, 3 * tv),
                                                   (3 * tv, 3 * tv + 5)]
    assert all(p.view and p.data.base is not None for p in got)
    pool = signed_pool(3, d)
    assert all(np.shares_memory(p.data, pool) for p in got)
    whole = normal_block(3, 1, "k", 10, 3 * tv + 5, heads, d)
    assert np.array_equal(np.concatenate([p.data for p in got]), whole)


def test_a_row_straddling_two_tiles_is_copied() -> None:
    d, heads = 8, 3                      # 3 does not divide the tile's vector count
    tv = tile_vectors(d)
    got = list(pieces(0, 0, "v", 0, 2 * tv // heads + 2, heads, d))
    assert any(not p.view and p.row_hi - p.row_lo == 1 for p in got)
    whole = normal_block(0, 0, "v", 0, 2 * tv // heads + 2, heads, d)
    assert np.array_equal(np.concatenate([p.data for p in got]), whole)


def test_peaked_keys_patch_k_and_shift_q() -> None:
    gi = group_input(0, 0, InputKind.PEAKED, 2, 5000, 4, 2, 16, 0.25)
    assert gi.peaks is not None and gi.k.patch is not None
    k = gi.k.block(0, 5000)
    for r, value in zip(gi.peaks.positions, gi.peaks.keys, strict=True):
        assert np.array_equal(k[r], value)
    along = gi.q[:, :2, :].astype(np.float64) @ gi.peaks.e[0]
    assert np.allclose(along, 3.0, atol=0.05)
    uniform = group_input(0, 0, InputKind.UNIFORM, 2, 50, 4, 2, 16, 0.25)
    assert not uniform.q.any()


# 69,983 rows of 128 are 8.96M elements: past the 8.39M-element pool's wrap, over many tiles
@pytest.mark.parametrize(("lo", "hi", "heads", "d"), [(0, 5000, 3, 16), (17, 70000, 1, 128),
                                                      (100, 101, 2, 8), (0, 81923, 1, 16)])
def test_max_abs_reads_the_pool_and_equals_the_tensors_max(lo: int, hi: int, heads: int,
                                                            d: int) -> None:
    want = float(np.abs(normal_block(2, 1, "v", lo, hi, heads, d)).max())
    assert max_abs(2, 1, "v", lo, hi, heads, d) == want
