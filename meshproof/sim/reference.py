"""The float64 reference: dense GQA attention, as a streaming online-softmax reduction.

For q head h (kv head `h // (h_q / h_kv)`), every query row's output is
`sum_r softmax(scale * q.k_r)_r v_r` over all the group's key rows, in float64. K and V
are tiles of the input generator's pool (model/inputs.py): key row r of kv head j is
`±pool[src + i]`, so

- the score of every key against a query is read from `U = (scale q) @ pool^T`, one
  float64 GEMV of the query with every pool row (each score is the float64 dot product
  of q with that key: the same number a dense float64 `q @ K^T` gives, up to the order
  of its d additions);
- the max m over the keys is found first, exactly, from the pool rows the keys use (so
  no online rescaling is needed); `e^(±U - m)` is then computed once per pool row and
  sign, the keys are reduced tile by tile (a key block) into float64 weights of V's pool
  rows, `W[V's row] += ±e^(s - m)`, ℓ is `Σ count(row) e^(s(row) - m)`, and at the end
  `o = (W @ pool) / ℓ`.

No K or V value is converted to float64 or even read: the reference costs one GEMV of
the pool per query and a few float64 operations per key, which is what lets a 1M-context
panel simulate at memory speed. Heads of several query rows (GQA decode) stack their
queries and weights so that U and `W @ pool` are one product over the pool per stack of
heads, not per head (`group_references`). It pays off when the group has at least half as many
keys as the pool has rows, and few queries (U and W hold `queries x pool rows` numbers); otherwise
(`uses_pool` false: short contexts, many query rows) an online softmax (running max,
rescaled ℓ and sum) runs over blocks of K and V rows made by the generator and converted
to float64. Both are dense
float64 attention; `dense_reference` is the textbook computation on whole arrays, which
the tests hold both to (1e-12).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from meshproof.model.inputs import pool64, pool_rows, tile_sources, tile_vectors
from meshproof.model.masks import masked_attention
from meshproof.sim.inputs import GroupInput, KVSource

F64 = npt.NDArray[np.float64]
# K/V elements per block of the direct (not pool) reduction
REF_BLOCK_ELEMENTS = 1 << 18
# bytes per K/V tile of the pool path beyond the arrays: two int64 sources and one span
# tuple of three ints in a list (about 160 bytes in CPython)
TILE_BOOKKEEPING = 2 * 8 + 160
# float64 numbers U and W may hold per kv head (queries x pool rows, twice)
POOL_PATH_NUMBERS = 1 << 24
# float64 numbers the stacked U (and W) of several heads may hold (32 MiB each; _stacks)
STACK_NUMBERS = 1 << 22


def reference(inputs: Sequence[GroupInput], scale: float,
              allowed: npt.NDArray[np.bool_] | None = None) -> F64:
    """Each group's reference output, stacked: (batch, q_rows, h_q, d). With `allowed`
    (q_rows, kv_rows), masked attention: the dense float64 softmax over the allowed keys
    (K and V made whole; a query with no allowed key is 0, as FlashAttention writes)."""
    if allowed is not None:
        return np.stack([masked_reference(gi.q, gi.k.block(0, gi.k.rows),
                                          gi.v.block(0, gi.v.rows), scale, allowed)
                         for gi in inputs])
    return np.stack(group_references(inputs, scale))


def uses_pool(queries: int, kv_rows: int, d: int) -> bool:
    """Whether the reference of `queries` query rows per kv head reads the pool (long
    context, few queries) or blocks of K/V rows."""
    rows = pool_rows(d)
    return 2 * kv_rows >= rows and 2 * queries * rows <= POOL_PATH_NUMBERS


def stacked_heads(queries: int, d: int) -> int:
    """How many kv heads of `queries` query rows each share one matrix product with the
    pool (`_stacks`): one for a single query row (a GEMV, whose sums BLAS orders unlike a
    GEMM's: stacking would change the last bits), else as many as STACK_NUMBERS holds."""
    return 1 if queries < 2 else max(1, STACK_NUMBERS // (queries * pool_rows(d)))


def working_bytes(queries: int, kv_rows: int, h_kv: int, d: int, batch: int = 1) -> int:
    """What the reference of `batch` groups holds at once beyond their outputs: the
    float64 pool, the stacked U and W of up to `stacked_heads` heads, one head's e^(±U-m)
    and its counts (pool path), or a float64 block of K and V and its scores."""
    if uses_pool(queries, kv_rows, d):
        rows = pool_rows(d)
        stacked = min(batch * h_kv, stacked_heads(queries, d))
        # per K/V tile: its two pool sources (int64) and its span, a Python tuple (_spans)
        tiles = -(-kv_rows * h_kv // tile_vectors(d))
        return 8 * (rows * d + 2 * rows + (2 * stacked + 2) * queries * rows) + \
            tiles * TILE_BOOKKEEPING
    block = min(kv_rows, max(1, REF_BLOCK_ELEMENTS // (h_kv * d)))
    return 8 * (2 * block * h_kv * d + 2 * queries * block + 2 * h_kv * queries * d)


def group_reference(gi: GroupInput, scale: float) -> F64:
    return group_references([gi], scale)[0]


# a kv head through the pool: its group's index in the inputs, the head, its scaled
# queries (nq, d)
_Head = tuple[int, int, F64]


def group_references(inputs: Sequence[GroupInput], scale: float) -> list[F64]:
    """Each group's reference output (q_rows, h_q, d). The kv heads that go through the
    pool share the two matrix products with it, `U = q @ poolᵀ` and `W @ pool`, in stacks
    of up to `stacked_heads` heads (`_stacks`): one pass over the 64 MiB float64 pool per
    stack instead of per head, and every element the same dot of the same BLAS kernel as
    a head's own product (the stacked rows change only how many rows BLAS runs)."""
    outs: list[F64] = []
    pooled: list[_Head] = []
    for index, gi in enumerate(inputs):
        q_rows, h_q, d = gi.q.shape
        g = h_q // gi.k.heads
        q64 = gi.q.astype(np.float64)
        qhs = [q64[:, h * g:(h + 1) * g, :].reshape(-1, d) * scale
               for h in range(gi.k.heads)]
        outs.append(np.empty((q_rows, h_q, d)))
        # given arrays (a witness's inputs) have no pool: blocks of their rows
        if isinstance(gi.k, KVSource) and isinstance(gi.v, KVSource) and \
                uses_pool(q_rows * g, gi.k.rows, d):
            pooled.extend((index, h, qh) for h, qh in enumerate(qhs))
        else:
            for h, o in enumerate(_direct(gi, qhs)):
                _place(outs[index], h, o)
    for stack in _stacks(inputs, pooled):
        for (index, h, _), o in zip(stack, _pooled_heads(inputs, stack), strict=True):
            _place(outs[index], h, o)
    return outs


def _place(out: F64, h: int, o: F64) -> None:
    """Kv head h's outputs o (q_rows * g, d) into the group's (q_rows, h_q, d)."""
    q_rows, _, d = out.shape
    g = o.shape[0] // q_rows
    out[:, h * g:(h + 1) * g, :] = o.reshape(q_rows, g, d)


def _stacks(inputs: Sequence[GroupInput], heads: list[_Head]) -> list[list[_Head]]:
    """Consecutive pooled heads of one pool (seed, d) and query count, up to
    `stacked_heads` a stack."""
    stacks: list[list[_Head]] = []
    for head in heads:
        pool, nq = _pool_of(inputs, head), head[2].shape[0]
        last = stacks[-1] if stacks else None
        if last is not None and len(last) < stacked_heads(nq, pool[1]) and \
                last[0][2].shape[0] == nq and _pool_of(inputs, last[0]) == pool:
            last.append(head)
        else:
            stacks.append([head])
    return stacks


def _pool_of(inputs: Sequence[GroupInput], head: _Head) -> tuple[int, int]:
    k = inputs[head[0]].k
    assert isinstance(k, KVSource)  # only generated rows have a pool
    return k.seed, k.d


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
    patch = gi.k.patch if isinstance(gi.k, KVSource) else None
    if patch is None:
        return {}
    return {r: qh @ value[h].astype(np.float64)
            for r, value in zip(patch.rows, patch.values, strict=True)}


def _spans(n_vec: int, tv: int, h: int, h_kv: int) -> list[tuple[int, int, int]]:
    """Per tile holding vectors of kv head h: (tile, first vector's offset, count)."""
    spans = []
    for t in range(-(-n_vec // tv)):
        v0, v1 = t * tv, min(n_vec, (t + 1) * tv)
        first = v0 + (h - v0) % h_kv          # this head's first vector in the tile
        if first < v1:
            spans.append((t, first - v0, (v1 - 1 - first) // h_kv + 1))
    return spans


def _pooled_heads(inputs: Sequence[GroupInput], stack: list[_Head]) -> list[F64]:
    """A stack's heads through the pool, each's outputs (nq, d): every pool row's score
    for all their queries in one product, each head's weights of V's pool rows (`_weights`)
    into its rows of W, then `W @ pool` in one product, each head's rows divided by its ℓ."""
    seed, d = _pool_of(inputs, stack[0])
    pool = pool64(seed, d)
    qs = [qh for *_, qh in stack]
    u = (qs[0] if len(qs) == 1 else np.concatenate(qs)) @ pool.T  # (Σ nq, R)
    w = np.zeros_like(u)
    ells, at = [], 0
    for index, h, qh in stack:
        nq = qh.shape[0]
        ells.append(_weights(inputs[index], h, qh, u[at:at + nq], w[at:at + nq]))
        at += nq
    acc = w @ pool
    out, at = [], 0
    for ell in ells:
        out.append(acc[at:at + ell.shape[0]] / ell[:, None])
        at += ell.shape[0]
    return out


def _weights(gi: GroupInput, h: int, qh: F64, u: F64, w: F64) -> F64:
    """Kv head h, its queries qh (nq, d), already scaled, and u = qh @ poolᵀ (nq, R): the
    exact max over the keys first (from the pool rows they use), then e^(s - m) once per
    pool row and sign, the weights of V's pool rows added into w (nq, R, zero) key block
    by key block; returns ℓ (nq,), from how often each pool row is a key."""
    k = gi.k
    assert isinstance(k, KVSource)  # group_references: only generated rows have a pool
    d, h_kv = k.d, k.heads
    seed, rows, tv = k.seed, pool_rows(d), tile_vectors(d)
    n_vec = k.rows * h_kv
    spans = _spans(n_vec, tv, h, h_kv)
    n_tiles = -(-n_vec // tv)
    ksrc = tile_sources(seed, gi.group, "k", 0, n_tiles, d)
    vsrc = tile_sources(seed, gi.group, "v", 0, n_tiles, d)
    counts = np.zeros((2, rows))                      # keys per pool row, + and - sign
    for t, a, cnt in spans:
        base, neg = int(ksrc[t]) % rows, int(ksrc[t]) >= rows
        counts[int(neg), base + a:base + a + (cnt - 1) * h_kv + 1:h_kv] += 1.0
    patched = _patched_keys(gi, h, qh, ksrc, vsrc, rows, tv)
    for kr, ks, _vr, _vs, _s in patched:              # a replaced key is not its pool row
        counts[ks, kr] -= 1.0
    # the max over the keys: of u over the pool rows used with a + sign, of -u over those
    # used with a - sign (reduced in place: no copy of the rows used)
    m = np.maximum(np.max(u, axis=1, where=counts[0] > 0, initial=-np.inf),
                   -np.min(u, axis=1, where=counts[1] > 0, initial=np.inf))
    for *_, s_p in patched:
        m = np.maximum(m, s_p)
    e_pos, e_neg = u - m[:, None], np.negative(u)
    e_neg -= m[:, None]
    e = (np.exp(e_pos, out=e_pos), np.exp(e_neg, out=e_neg))   # e^(±u - m), no temporaries
    ell: F64 = e[0] @ counts[0] + e[1] @ counts[1]
    for t, a, cnt in spans:
        kb, ks = int(ksrc[t]) % rows, int(int(ksrc[t]) >= rows)
        vb, vs = int(vsrc[t]) % rows, int(vsrc[t]) >= rows
        step = (cnt - 1) * h_kv + 1
        dst = w[:, vb + a:vb + a + step:h_kv]
        src = e[ks][:, kb + a:kb + a + step:h_kv]
        if vs:
            dst -= src
        else:
            dst += src
    for kr, ks, vr, v_neg, s_p in patched:
        p = np.exp(s_p - m)
        w[:, vr] += (-1.0 if v_neg else 1.0) * (p - e[ks][:, kr])
        ell += p
    return ell


def _patched_keys(gi: GroupInput, h: int, qh: F64, ksrc: npt.NDArray[np.int64],
                  vsrc: npt.NDArray[np.int64], rows: int, tv: int
                  ) -> list[tuple[int, int, int, int, F64]]:
    """Keys the peaked inputs replaced, for head h: (K's pool row, its sign, V's pool
    row, its sign, the key's float64 scores (nq,))."""
    patch = gi.k.patch if isinstance(gi.k, KVSource) else None
    if patch is None:
        return []
    out = []
    h_kv = gi.k.heads
    for r, value in zip(patch.rows, patch.values, strict=True):
        vec = r * h_kv + h
        t, off = divmod(vec, tv)
        kr, vr = int(ksrc[t]), int(vsrc[t])
        out.append(((kr % rows) + off, int(kr >= rows), (vr % rows) + off, int(vr >= rows),
                    qh @ value[h].astype(np.float64)))
    return out


def masked_reference(q: npt.NDArray[np.floating], k: npt.NDArray[np.floating],
                     v: npt.NDArray[np.floating], scale: float,
                     allowed: npt.NDArray[np.bool_]) -> F64:
    """Dense masked GQA attention in float64: each query row's softmax over the key rows
    `allowed` (q_rows, kv_rows) lets it see; 0 for a row that sees none (the one
    definition, model/masks.py `masked_attention`)."""
    return np.asarray(masked_attention(q.astype(np.float64), k.astype(np.float64),
                                       v.astype(np.float64), scale, allowed),
                      dtype=np.float64)


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
