"""Seeded input generators: N(0,1) and peaked scores, as f16-representable float32.

Every tensor of every group draws from its own generator, seeded by (seed, group, tensor),
so a group's inputs do not depend on how many groups are evaluated together.

Large tensors (more than `DIRECT_LIMIT` elements) are assembled from tiles of a pool of
fresh N(0,1) draws (copied from random offsets, with a random sign per tile): drawing
normals runs at ~0.1 G/s here, which would make input generation at 1M context dominate
a run by minutes. Every element is still N(0,1)-distributed; tiles are not independent of
each other. spec/simulator.md states this.
"""

from __future__ import annotations

import functools
import math
from enum import Enum

import numpy as np

from meshproof.model.schedule import DType
from meshproof.sim.rounding import F32, round_to

DIRECT_LIMIT = 1 << 22
POOL_SIZE = 1 << 22
TILE = 1 << 16
PEAKED_KEYS = 4
# The common query component of peaked inputs, in units of the N(0,1) noise.
QUERY_SHIFT = 3.0
_TENSOR_CODES = {"q": 1, "k": 2, "v": 3, "peaks": 4}


class InputKind(Enum):
    NORMAL = "normal"     # Q, K, V i.i.d. N(0,1)
    PEAKED = "peaked"     # as NORMAL, plus a few keys per KV head whose scores dominate
    UNIFORM = "uniform"   # Q = 0: every score equal, so ℓ equals the number of keys


@functools.lru_cache(maxsize=2)
def _pool(seed: int) -> F32:
    rng = np.random.default_rng([seed, 0, 0])
    pool = round_to(rng.standard_normal(POOL_SIZE, dtype=np.float32), DType.F16, inplace=True)
    pool.flags.writeable = False
    return pool


def fill_normal(out: F32, seed: int, group: int, tensor: str) -> None:
    """Fill `out` (contiguous) with N(0,1) values rounded to f16."""
    flat = out.reshape(-1)
    rng = np.random.default_rng([seed, group + 1, _TENSOR_CODES[tensor]])
    if flat.size <= DIRECT_LIMIT:
        rng.standard_normal(dtype=np.float32, out=flat)
        round_to(flat, DType.F16, inplace=True)
        return
    pool = _pool(seed)
    n_tiles = -(-flat.size // TILE)
    offsets = rng.integers(0, POOL_SIZE - TILE + 1, n_tiles)
    negate = rng.integers(0, 2, n_tiles).astype(bool)
    for i in range(n_tiles):
        dst = flat[i * TILE:(i + 1) * TILE]
        src = pool[offsets[i]:offsets[i] + dst.size]
        if negate[i]:
            np.negative(src, out=dst)
        else:
            np.copyto(dst, src)


def fill_inputs(q: F32, k: F32, v: F32, kind: InputKind, seed: int, group: int,
                scale: float) -> None:
    """Fill one group's q (rows, h_q, d), k and v (kv_rows, h_kv, d)."""
    fill_normal(q, seed, group, "q")
    fill_normal(k, seed, group, "k")
    fill_normal(v, seed, group, "v")
    if kind is InputKind.PEAKED:
        _implant_peaks(q, k, seed, group, scale)
    elif kind is InputKind.UNIFORM:
        # The stress case for ℓ's range: with equal scores every exp(s - m) is 1.
        q.fill(0.0)


def _implant_peaks(q: F32, k: F32, seed: int, group: int, scale: float) -> None:
    """Make a few keys per KV head dominate every query of that head (an "attention
    sink"): every query of the head gets the same component QUERY_SHIFT along a random
    unit vector e (its own component along e is replaced), and key i is e scaled so that
    it scores ln(kv_rows) + 5 - i against every query."""
    rng = np.random.default_rng([seed, group + 1, _TENSOR_CODES["peaks"]])
    kv_rows, h_kv, d = k.shape
    n = min(PEAKED_KEYS, kv_rows)
    positions = rng.choice(kv_rows, size=n, replace=False)
    g = q.shape[1] // h_kv
    gain = math.log(kv_rows) + 5.0
    for h in range(h_kv):
        draw = rng.standard_normal(size=(int(d),))
        e = draw / float(np.linalg.norm(draw))
        heads = q[:, h * g:(h + 1) * g, :]
        along = heads.astype(np.float64) @ e
        shifted = heads + (QUERY_SHIFT - along)[..., None] * e
        heads[...] = round_to(shifted.astype(np.float32), DType.F16)
        for i, pos in enumerate(positions):
            key = e * ((gain - i) / (scale * QUERY_SHIFT))
            k[pos, h, :] = round_to(key.astype(np.float32), DType.F16)
