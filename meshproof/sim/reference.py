"""The float64 reference: dense GQA attention, as a streaming online-softmax reduction.

For q head h (kv head `h // (h_q / h_kv)`), every query row's output is
`sum_r softmax(scale * q.k_r)_r v_r` over all the group's key rows, in float64. K and V
are tiles of the input generator's pool (model/inputs.py): key row r of kv head j is
`±pool[src + i]`, so

- the score of every key against a query is read from `U = (scale q) @ pool^T`, one
  float64 GEMV of the query with every pool row (each score is the float64 dot product
  of q with that key: the same number a dense float64 `q @ K^T` gives, up to the order
  of its d additions);
- the keys are reduced block by block (blocks of `REF_BLOCK_TILES` tiles, in key order)
  with the online softmax in float64: running max m, ℓ ← ℓ·e^(m−m') + Σ e^(s−m'), and the
  weights `W[pool row] += ±e^(s−m')` of V's pool rows (rescaled by e^(m−m') when m
  grows); at the end `o = (W @ pool) / ℓ`.

No K or V value is converted to float64 or even read: the reference costs one GEMV of
the pool per query and a few float64 operations per key, which is what lets a 1M-context
panel simulate at memory speed. It pays off when the group has more keys than the pool
has rows and few queries (U and W hold `queries x pool rows` numbers); otherwise
(`_uses_pool` false: short contexts, many query rows) the same online softmax runs over
blocks of K and V rows made by the generator and converted to float64. Both are dense
float64 attention; `dense_reference` is the textbook computation on whole arrays, which
the tests hold both to (1e-12).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from meshproof.model.inputs import pool64, pool_rows, tile_sources, tile_vectors
from meshproof.sim.inputs import GroupInput

F64 = npt.NDArray[np.float64]
# tiles of keys per step of the online softmax
REF_BLOCK_TILES = 64
# K/V elements per block of the direct (not pool) reduction
REF_BLOCK_ELEMENTS = 1 << 18
# float64 numbers U and W may hold per kv head (queries x pool rows, twice)
POOL_PATH_NUMBERS = 1 << 24


def reference(inputs: Sequence[GroupInput], scale: float) -> F64:
    """Each group's reference output, stacked: (batch, q_rows, h_q, d)."""
    return np.stack([group_reference(gi, scale) for gi in inputs])


def uses_pool(queries: int, kv_rows: int, d: int) -> bool:
    """Whether the reference of `queries` query rows per kv head reads the pool (long
    context, few queries) or blocks of K/V rows."""
    rows = pool_rows(d)
    return kv_rows > rows and 2 * queries * rows <= POOL_PATH_NUMBERS


def working_bytes(queries: int, kv_rows: int, h_kv: int, d: int) -> int:
    """What one group's reference holds at once beyond its output: the float64 pool, U,
    W and a block of scores (pool path), or a float64 block of K and V and its scores."""
    if uses_pool(queries, kv_rows, d):
        rows = pool_rows(d)
        return 8 * (rows * d + queries * (2 * rows + REF_BLOCK_TILES * tile_vectors(d)))
    block = min(kv_rows, max(1, REF_BLOCK_ELEMENTS // (h_kv * d)))
    return 8 * (2 * block * h_kv * d + 2 * queries * block + 2 * h_kv * queries * d)


def group_reference(gi: GroupInput, scale: float) -> F64:
    q_rows, h_q, d = gi.q.shape
    h_kv = gi.k.heads
    g = h_q // h_kv
    q64 = gi.q.astype(np.float64)
    qhs = [q64[:, h * g:(h + 1) * g, :].reshape(-1, d) * scale for h in range(h_kv)]
    pooled = uses_pool(q_rows * g, gi.k.rows, d)
    heads = [_head(gi, h, qh) for h, qh in enumerate(qhs)] if pooled else _direct(gi, qhs)
    out = np.empty((q_rows, h_q, d))
    for h, o in enumerate(heads):
        out[:, h * g:(h + 1) * g, :] = o.reshape(q_rows, g, d)
    return out


def _direct(gi: GroupInput, qhs: list[F64]) -> list[F64]:
    """The online softmax over blocks of K/V rows made by the generator, in float64."""
    k, v = gi.k, gi.v
    step = max(1, REF_BLOCK_ELEMENTS // k.row_elements)
    nq, d = qhs[0].shape
    m = [np.full(nq, -np.inf) for _ in qhs]
    ell = [np.zeros(nq) for _ in qhs]
    acc = [np.zeros((nq, d)) for _ in qhs]
    for r0 in range(0, k.rows, step):
        r1 = min(k.rows, r0 + step)
        kb = k.block(r0, r1).astype(np.float64)
        vb = v.block(r0, r1).astype(np.float64)
        for h, qh in enumerate(qhs):
            scores = qh @ kb[:, h, :].T                      # (nq, rows)
            m_new = np.maximum(m[h], scores.max(axis=1))
            alpha = np.exp(m[h] - m_new)
            p = np.exp(scores - m_new[:, None])
            ell[h] = ell[h] * alpha + p.sum(axis=1)
            acc[h] = acc[h] * alpha[:, None] + p @ vb[:, h, :]
            m[h] = m_new
    return [a / e[:, None] for a, e in zip(acc, ell, strict=True)]


def _patch_scores(gi: GroupInput, h: int, qh: F64) -> dict[int, F64]:
    """Key row -> its float64 scores (nq,) for rows the peaked inputs replaced."""
    if gi.k.patch is None:
        return {}
    return {r: qh @ value[h].astype(np.float64)
            for r, value in zip(gi.k.patch.rows, gi.k.patch.values, strict=True)}


def _head(gi: GroupInput, h: int, qh: F64) -> F64:
    """Online softmax over key blocks for kv head h and its queries qh (nq, d), scaled."""
    k = gi.k
    d, h_kv = k.d, k.heads
    seed, rows, tv = k.seed, pool_rows(d), tile_vectors(d)
    pool = pool64(seed, d)
    nq = qh.shape[0]
    u = qh @ pool.T                                   # (nq, R): every pool row's score
    n_vec = k.rows * h_kv
    n_tiles = -(-n_vec // tv)
    ksrc = tile_sources(seed, gi.group, "k", 0, n_tiles, d)
    vsrc = tile_sources(seed, gi.group, "v", 0, n_tiles, d)
    patched = _patch_scores(gi, h, qh)
    m = np.full(nq, -np.inf)
    ell = np.zeros(nq)
    w = np.zeros((nq, rows))
    buf = np.empty((nq, min(n_tiles, REF_BLOCK_TILES) * tv))
    for t0 in range(0, n_tiles, REF_BLOCK_TILES):
        spans = []
        for t in range(t0, min(n_tiles, t0 + REF_BLOCK_TILES)):
            v0, v1 = t * tv, min(n_vec, (t + 1) * tv)
            first = v0 + (h - v0) % h_kv          # this head's first vector in the tile
            if first < v1:
                spans.append((t, first - v0, (v1 - 1 - first) // h_kv + 1))
        total = sum(c for _, _, c in spans)
        scores = buf[:, :total]
        at = 0
        for t, a, cnt in spans:
            base, neg = int(ksrc[t]) % rows, int(ksrc[t]) >= rows
            src = u[:, base + a:base + a + (cnt - 1) * h_kv + 1:h_kv]
            if neg:
                np.negative(src, out=scores[:, at:at + cnt])
            else:
                scores[:, at:at + cnt] = src
            at += cnt
        if patched:
            _apply_patches(scores, spans, patched, h, h_kv, tv)
        m_new = np.maximum(m, scores.max(axis=1))
        grew = m_new > m
        if grew.any():
            alpha = np.exp(m[grew] - m_new[grew])
            ell[grew] *= alpha
            w[grew] *= alpha[:, None]
            m = m_new
        p = np.subtract(scores, m[:, None], out=scores)
        np.exp(p, out=p)
        ell += p.sum(axis=1)
        at = 0
        for t, a, cnt in spans:
            base, neg = int(vsrc[t]) % rows, int(vsrc[t]) >= rows
            dst = w[:, base + a:base + a + (cnt - 1) * h_kv + 1:h_kv]
            if neg:
                dst -= p[:, at:at + cnt]
            else:
                dst += p[:, at:at + cnt]
            at += cnt
    out: F64 = (w @ pool) / ell[:, None]
    return out


def _apply_patches(scores: F64, spans: list[tuple[int, int, int]],
                   patched: dict[int, F64], h: int, h_kv: int, tv: int) -> None:
    at = 0
    for t, a, cnt in spans:
        for r, s in patched.items():
            vec = r * h_kv + h
            j = vec - (t * tv + a)
            if 0 <= j < cnt * h_kv and j % h_kv == 0:
                scores[:, at + j // h_kv] = s
        at += cnt


def dense_reference(q: npt.NDArray[np.floating], k: npt.NDArray[np.floating],
                    v: npt.NDArray[np.floating], scale: float) -> F64:
    """Textbook dense GQA attention in float64 on whole arrays q (rows, h_q, d), k and v
    (kv_rows, h_kv, d): for tests and small checks."""
    h_q, h_kv = q.shape[1], k.shape[1]
    g = h_q // h_kv
    out = np.empty(q.shape)
    for hq in range(h_q):
        kk = k[:, hq // g, :].astype(np.float64)
        vv = v[:, hq // g, :].astype(np.float64)
        s = scale * (q[:, hq, :].astype(np.float64) @ kk.T)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out[:, hq, :] = (p @ vv) / p.sum(axis=1, keepdims=True)
    return out
