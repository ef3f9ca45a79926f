"""Streamed K/V (sim/streamed.py): a piece of a streamed operand dots as the stacked
matmul does."""

from __future__ import annotations

import numpy as np
import pytest

from meshproof.model.inputs import signed_pool, tile_vectors
from meshproof.sim.inputs import ArraySource, KVSource
from meshproof.sim.streamed import Streamed, dot_mode, flat_dot, streamed_dot


@pytest.mark.parametrize("heads", [1, 8])
def test_a_streamed_piece_dots_as_one_flat_blas_call_like_the_stacked_one(heads: int) -> None:
    """The flat path of a streamed dot (a piece with no leading axes) gives the stacked
    matmul's result, scores (b_free) and the weighted sum (b_sum) alike."""
    rng = np.random.default_rng(0)
    k_piece = rng.standard_normal((64, 16), dtype=np.float32).T[None]     # (1, d, r)
    q = rng.standard_normal((1, heads, 16), dtype=np.float32)
    scores = np.zeros((1, heads, 96), np.float32)
    assert flat_dot("b_free", q, k_piece, scores, 32, 96)
    want = np.matmul(k_piece.swapaxes(-1, -2), q.swapaxes(-1, -2)).swapaxes(-1, -2)
    np.testing.assert_allclose(scores[..., 32:96], want, rtol=1e-5, atol=1e-5)
    assert not scores[..., :32].any()
    v_piece = rng.standard_normal((1, 64, 16), dtype=np.float32)          # (1, r, d)
    p = rng.standard_normal((1, heads, 96), dtype=np.float32)
    out = np.ones((1, heads, 16), np.float32)
    assert flat_dot("b_sum", p, v_piece, out, 32, 96)
    np.testing.assert_allclose(out, 1 + np.matmul(p[..., 32:96], v_piece), rtol=1e-5,
                               atol=1e-5)
    assert not flat_dot("a_free", q, k_piece, scores, 0, 64)
    assert not flat_dot("b_free", q, np.zeros((2, 16, 64), np.float32), scores, 0, 64)


@pytest.mark.parametrize("side", ["a", "b"])
def test_a_key_tiled_operand_dots_tile_by_tile_as_the_whole_matmul(side: str) -> None:
    """V split into key tiles streams along the tile axis (a batch axis of the dot): each
    piece is one whole tile and the product is the whole matmul's, to the bit."""
    rng = np.random.default_rng(1)
    v = rng.standard_normal((8, 2, 3), dtype=np.float32)                  # (keys, h, d)
    tiled = Streamed((ArraySource(v),), 0, 8, (8, 2, 3), (), (8, 2, 3), 0) \
        .then("T", (1, 0, 2), (2, 8, 3), 1).then("R", (2, 2, 4, 3), (2, 2, 4, 3), 1, 4)
    # the source is one piece: both tiles are one view of it
    assert [(lo, hi, p.shape) for lo, hi, p in tiled.parts(0)] == [(0, 2, (2, 2, 4, 3))]
    whole = tiled.whole()
    if side == "b":
        p = rng.standard_normal((1, 2, 2, 5, 4), dtype=np.float32)        # (h, tiles, rows, kt)
        assert dot_mode(p, tiled) == "b_batch"
        got = streamed_dot((2, 2, 5, 3), 1, p, tiled, "b_batch")
        want = np.matmul(p, whole)
    else:
        w = rng.standard_normal((1, 2, 2, 3, 5), dtype=np.float32)        # (h, tiles, d, n)
        assert dot_mode(tiled, w) == "a_batch"
        got = streamed_dot((2, 2, 4, 5), 1, tiled, w, "a_batch")
        want = np.matmul(whole, w)
    np.testing.assert_array_equal(got, want)
    assert dot_mode(np.zeros((1, 2, 1, 5, 4), np.float32), tiled) is None  # broadcast tiles


def test_key_tiles_are_views_of_the_generators_pieces_and_straddlers_are_copied() -> None:
    """The generator's tiles end mid-row here (3 heads of d 2^14: 64 vectors a tile), so
    its pieces are views of whole rows and one-row copies; a key tile inside one view is
    a view of the pool, one across pieces is gathered, and the values are the rows'."""
    d, heads, rows, unit = 1 << 14, 3, 48, 8
    assert tile_vectors(d) == 64
    v = KVSource(7, 0, "v", rows, heads, d)
    tiled = Streamed((v,), 0, rows, (rows, heads, d), (), (rows, heads, d), 0) \
        .then("T", (1, 0, 2), (heads, rows, d), 1) \
        .then("R", (heads, rows // unit, unit, d), (heads, rows // unit, unit, d), 1, unit)
    parts = list(tiled.parts(0))
    assert [(lo, hi) for lo, hi, _ in parts] == [(0, 2), (2, 3), (3, 5), (5, 6)]
    pool = signed_pool(7, d)
    assert [np.shares_memory(p, pool) for _, _, p in parts] == [True, False, True, False]
    whole = tiled.whole()[0]
    for lo, hi, p in parts:
        np.testing.assert_array_equal(p, whole[:, lo:hi])
    x = np.random.default_rng(2).standard_normal((1, heads, rows // unit, 2, unit),
                                                 dtype=np.float32)
    got = streamed_dot((heads, rows // unit, 2, d), 1, x, tiled, "b_batch")
    np.testing.assert_array_equal(got, np.matmul(x, whole[None]))
