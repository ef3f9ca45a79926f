"""Scores against the generator's pool, computed once per pool chunk and shared by the
ranks that dot the same queries with it.

Every K row the generator makes is a row of its signed pool (model/inputs.py), and a
decode step's ranks all hold the group's whole Q: across a group's ranks the scores
`q · kᵀ` of 1M keys are the scores of q against the pool's 131,072 signed rows, each
computed many times over. `PoolScores` computes them once per chunk of
`tile_vectors(d)` pool rows (one BLAS call of a whole generator tile's shape, as
`flat_dot` makes per piece, so every score is the same float32 number to the bit) and
writes each piece of K's slice into the dot's output. A piece of whole tile length reads
at most two chunks; queries of more rows than `MAX_ROWS`, pieces of other lengths and
memory past `MAX_BYTES` take the direct path.
"""

from __future__ import annotations

import numpy as np

from meshproof.model.inputs import pool_rows, signed_pool, tile_vectors
from meshproof.sim.rounding import F32

MAX_ROWS = 16               # query rows (a decode step's GQA heads) worth a chunk's cost
MAX_BYTES = 64 << 20        # chunks held at once, per evaluated batch


def held_bytes(batch: int, queries: int, kv_rows_per_rank: int, h_kv: int, d: int) -> int:
    """The most a batch's `PoolScores` holds: every chunk of the signed pool per group,
    when its ranks have whole tiles of one kv head to share, up to MAX_BYTES."""
    if h_kv != 1 or queries > MAX_ROWS or kv_rows_per_rank < tile_vectors(d):
        return 0
    return min(MAX_BYTES, batch * queries * 2 * pool_rows(d) * 4)


class PoolScores:
    """Chunks of `x · poolᵀ` per (seed, d, queries x), for one evaluated batch."""

    def __init__(self) -> None:
        self._chunks: dict[tuple[int, int, bytes, int], F32] = {}
        self._bytes = 0

    def fill(self, seed: int, d: int, x: F32, rows: F32, dest: F32) -> bool:
        """Write `x` (..., d) dotted with `rows` (n, d) into `dest` (..., n) when `rows` is
        a whole tile's length of consecutive rows of the signed pool of (seed, d) as they
        lie in it (checked on the array itself), and True; False otherwise, or past the
        limits, with `dest` untouched (the caller dots the piece). The scores go from the
        chunks straight into `dest`: one copy of them, not two."""
        x2 = x.reshape(-1, x.shape[-1])
        tile = tile_vectors(d)
        n = rows.shape[0]
        if n != tile or x2.shape[0] > MAX_ROWS or x2.shape[1] != d or \
                dest.shape != (*x.shape[:-1], n):
            return False
        pool = signed_pool(seed, d)
        offset = rows.ctypes.data - pool.ctypes.data
        if rows.shape != (n, d) or rows.strides != (4 * d, 4) or offset % (4 * d) or \
                not 0 <= offset // (4 * d) <= pool.shape[0] - n:
            return False
        row = offset // (4 * d)
        key = x2.tobytes()
        spans = range(row // tile, (row + n - 1) // tile + 1)
        chunks = []
        for c in spans:
            chunk = self._chunks.get((seed, d, key, c))
            if chunk is None:
                if self._bytes + x2.shape[0] * tile * 4 > MAX_BYTES:
                    return False
                # flat_dot's call; kept row-major, so that each piece's slice of it is
                # copied row by row, not gathered a column at a time (3x slower)
                chunk = np.ascontiguousarray((pool[c * tile:(c + 1) * tile] @ x2.T).T)
                self._chunks[(seed, d, key, c)] = chunk
                self._bytes += chunk.nbytes
            chunks.append(chunk)
        for c, chunk in zip(spans, chunks, strict=True):
            lo, hi = max(row, c * tile), min(row + n, (c + 1) * tile)
            dest[..., lo - row:hi - row] = \
                chunk[:, lo - c * tile:hi - c * tile].reshape(*dest.shape[:-1], hi - lo)
        return True
