"""Scores of pool tiles shared by a batch's ranks (sim/pool_scores.py): the same float32
numbers as each piece's own dot, and only for what really is the pool's rows."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import trace_kernel

from meshproof.model.inputs import signed_pool, tile_vectors
from meshproof.sim import pool_scores
from meshproof.sim.api import SimConfig, simulate
from meshproof.sim.pool_scores import PoolScores
from meshproof.sim.streamed import flat_dot

D = 1 << 14          # 64-row tiles; the pool test_sim_streamed uses too
SEED = 7


@pytest.mark.parametrize("heads", [1, 8])
def test_whole_pool_tiles_get_the_bits_of_their_own_dot_from_shared_chunks(heads: int
                                                                           ) -> None:
    """A tile anywhere in the signed pool (across two chunks, or negated) gets exactly
    the scores flat_dot gives it, and a second tile reuses the chunks already made."""
    pool, tile = signed_pool(SEED, D), tile_vectors(D)
    x = np.random.default_rng(0).standard_normal((1, heads, D), dtype=np.float32)
    memo = PoolScores()
    for row in (tile // 2 + 5, tile + 1, pool.shape[0] - tile):
        rows = pool[row:row + tile]
        want = np.zeros((1, heads, tile), np.float32)
        assert flat_dot("b_free", x, rows.T[None], want, 0, tile)
        got = np.full((1, heads, tile), np.nan, np.float32)
        assert memo.fill(SEED, D, x, rows, got)
        np.testing.assert_array_equal(got, want)
    assert len(memo._chunks) == 4    # chunks 0 and 1, then 2 (1 reused), then the last


def test_anything_but_consecutive_pool_rows_of_a_whole_tile_takes_the_direct_path() -> None:
    """The realistic mistakes: a copy of pool rows (a patched or straddling piece), every
    other row, a partial tile, or more query rows than pay off."""
    pool, tile = signed_pool(SEED, D), tile_vectors(D)
    x = np.ones((1, 8, D), np.float32)
    memo = PoolScores()
    dest = np.full((1, 8, tile), np.nan, np.float32)
    assert not memo.fill(SEED, D, x, pool[:tile].copy(), dest)
    assert not memo.fill(SEED, D, x, pool[:2 * tile:2], dest)
    assert not memo.fill(SEED, D, x, pool[:tile - 1], dest[..., :tile - 1])
    many = pool_scores.MAX_ROWS + 1
    assert not memo.fill(SEED, D, np.ones((1, many, D), np.float32), pool[:tile],
                         np.empty((1, many, tile), np.float32))
    assert not memo.fill(SEED, D, x, pool[:tile], dest[:, :4])   # not the output's shape
    assert np.isnan(dest).all() and not memo._chunks              # untouched
    assert memo.fill(SEED, D, x, pool[:tile], dest) and memo._chunks


def test_a_decode_shares_its_groups_scores_with_the_same_outputs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rank of a decode group holds the whole Q: its K tiles' scores come from the
    shared chunks, and the outputs are those of each piece's own dot, to the bit."""
    schedule = trace_kernel("mesh_mlo_1d", args=(     # two whole tiles a rank
        ("S_kv_per_rank", 128), ("d_head", D), ("h_q", 4), ("h_kv", 1)))
    made: list[int] = []
    real = PoolScores.fill

    def counted(self: PoolScores, *args: object) -> object:
        made.append(1)
        return real(self, *args)  # type: ignore[arg-type]

    with monkeypatch.context() as m:
        m.setattr(PoolScores, "fill", counted)
        shared = simulate(schedule, SimConfig(seed=SEED, timing=False))
    assert made
    monkeypatch.setattr(PoolScores, "fill", lambda *_: False)
    own = simulate(schedule, SimConfig(seed=SEED, timing=False))
    assert shared.numeric is not None and own.numeric is not None and shared.numeric.ok
    assert [r.rel_err for r in shared.numeric.per_rank] == \
        [r.rel_err for r in own.numeric.per_rank]
