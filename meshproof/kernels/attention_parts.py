"""Building blocks shared by the reference kernels: partial attention, merge, finish.

Ops recorded here are attributed to the *calling* line in the kernel's own file (the
tracer keeps the innermost frame of the kernel's file), so diagnostics point at the
kernel, not at this helper.

Layouts: Q, K, V and O buffers are row-major (S, heads, d). GQA stacks the q heads of one
kv head as the rows of one GEMM: scores have shape (h_kv, S_q * group, S_kv).
"""

from __future__ import annotations

import math
from typing import Any

Tensor = Any
Triplet = tuple[Tensor, Tensor, Tensor]


def gqa_group(h_q: int, h_kv: int) -> int:
    if h_kv < 1 or h_q % h_kv:
        raise ValueError(f"h_q={h_q} must be a positive multiple of h_kv={h_kv} for GQA")
    return h_q // h_kv


def softmax_scale(d_head: int, sm_scale: float | None) -> float:
    return float(sm_scale) if sm_scale is not None else 1.0 / math.sqrt(d_head)


def load_q(q_ptr: Any, S_q: int, h_q: int, h_kv: int, d_head: int, tl: Any) -> Tensor:
    """Q as (h_kv, S_q * group, d): the q heads sharing a kv head are one GEMM's rows."""
    group = gqa_group(h_q, h_kv)
    q = tl.load(q_ptr, shape=(S_q, h_kv, group, d_head), dtype="f16")
    q = tl.trans(q, (1, 0, 2, 3))
    return tl.reshape(q, (h_kv, S_q * group, d_head))


def load_kv(k_ptr: Any, v_ptr: Any, S_kv: int, h_kv: int, d_head: int,
            tl: Any) -> tuple[Tensor, Tensor]:
    """K transposed to (h_kv, d, S_kv) and V as (h_kv, S_kv, d)."""
    k = tl.load(k_ptr, shape=(S_kv, h_kv, d_head), dtype="f16")
    v = tl.load(v_ptr, shape=(S_kv, h_kv, d_head), dtype="f16")
    return tl.trans(k, (1, 2, 0)), tl.trans(v, (1, 0, 2))


def partial_attention(q: Tensor, k_t: Tensor, v: Tensor, scale: float, tl: Any,
                      p_dtype: str = "f16", key_tile: int | None = None) -> Triplet:
    """Unnormalised partial attention of q against one KV slice: (m, ℓ, o), ℓ and o in f32.
    `p_dtype`, `key_tile`: as fold_scores (the defaults: one f16 P·V dot over the slice)."""
    scores = tl.dot(q, k_t, out_dtype="f32") * scale
    return fold_scores(None, scores, v, tl, p_dtype=p_dtype, key_tile=key_tile)


def absorb_slice(q: Tensor, k_t: Tensor, v: Tensor, state: Triplet, scale: float,
                 tl: Any, p_dtype: str = "f16", key_tile: int | None = None) -> Triplet:
    """Fold one more KV slice into a running (m, ℓ, o) (the online-softmax step)."""
    scores = tl.dot(q, k_t, out_dtype="f32") * scale
    return fold_scores(state, scores, v, tl, p_dtype=p_dtype, key_tile=key_tile)


def merge(state: Triplet, incoming: Triplet, tl: Any) -> Triplet:
    """Online-softmax merge of two partial triplets."""
    m, ell, o = state
    m_in, ell_in, o_in = incoming
    m_new = tl.maximum(m, m_in)
    alpha = tl.exp(m - m_new)
    beta = tl.exp(m_in - m_new)
    return m_new, ell * alpha + ell_in * beta, o * alpha + o_in * beta


def store_output(o_ptr: Any, o: Tensor, ell: Tensor, S_q: int, h_q: int, h_kv: int,
                 d_head: int, tl: Any) -> None:
    """Normalise and store O as (S_q, h_q, d) in f16."""
    group = gqa_group(h_q, h_kv)
    out = o / ell
    out = tl.reshape(out, (h_kv, S_q, group, d_head))
    out = tl.trans(out, (1, 0, 2, 3))
    tl.store(o_ptr, tl.cast(out, "f16"))


def row_chunk(x: Tensor, c: int, rows: int, tl: Any) -> Tensor:
    """Rows [c·rows, (c+1)·rows) of x's rows (its last axis kept) as a (rows, n) view:
    chunk c of a state's o, or the matching rows of m, ℓ or a rescale factor."""
    n = x.shape[-1]
    return tl.view(x, c * rows * n, (rows, n))


def store_row_chunk(o_ptr: Any, o_c: Tensor, ell: Tensor, c: int, rows: int,
                    tl: Any) -> None:
    """Normalise chunk c of o (rows [c·rows, ...), given as o_c) and store it in f16 at its
    offset. Only when the output's (S_q, h_q, d) order is o's (h_kv, S_q·group, d) order:
    S_q == 1 or h_kv == 1."""
    out = o_c / row_chunk(ell, c, rows, tl)
    tl.store(o_ptr + c * rows * o_c.shape[-1], tl.cast(out, "f16"))


def store_rows(o_ptr: Any, o_c: Tensor, ell_c: Tensor, c: int, tl: Any) -> None:
    """Normalise a row chunk (o_c, ell_c: chunk c of a state split by rows) and store it in
    f16 at its offset, under the same condition as store_row_chunk."""
    out = o_c / ell_c
    tl.store(o_ptr + c * o_c.shape[0] * o_c.shape[-1], tl.cast(out, "f16"))


def fold_scores(state: Triplet | None, scores: Tensor, v: Tensor, tl: Any, *,
                p_dtype: str = "f16", key_tile: int | None = None) -> Triplet:
    """Fold a tile of (possibly masked) scores into a running (m, ℓ, o); None starts it.

    `p_dtype`: the dtype of the weights p in the P·V dot ("f32": p is not cast, V is
    promoted by the dot). `key_tile`: when the tile has more keys than this (and a multiple
    of it), ℓ and P·V are accumulated per key tile of that many keys, then over the tiles
    (flash-attention's BLOCK_N), so that an f32 rounding error grows with key_tile plus the
    number of tiles rather than with every key of the block."""
    h, rows, n = scores.shape
    tiles = 1 if key_tile is None or n <= key_tile or n % key_tile else n // key_tile

    def part_l(p: Tensor) -> Tensor:
        if tiles == 1:
            return tl.sum(p, axis=-1)
        p4 = tl.reshape(p, (h, rows, tiles, n // tiles))
        return tl.reshape(tl.sum(tl.sum(p4, axis=-1), axis=-2), (h, rows, 1))

    def part_o(p: Tensor) -> Tensor:
        pv = p if p_dtype == "f32" else tl.cast(p, p_dtype)
        if tiles == 1:
            return tl.dot(pv, v, out_dtype="f32")
        pt = tl.trans(tl.reshape(pv, (h, rows, tiles, n // tiles)), (0, 2, 1, 3))
        vt = tl.reshape(v, (h, tiles, n // tiles, v.shape[-1]))
        return tl.reshape(tl.sum(tl.dot(pt, vt, out_dtype="f32"), axis=1), (h, rows, v.shape[-1]))

    if state is None:
        m = tl.max(scores, axis=-1)
        p = tl.exp(scores - m)
        return m, part_l(p), part_o(p)
    m, ell, o = state
    m_new = tl.maximum(m, tl.max(scores, axis=-1))
    alpha = tl.exp(m - m_new)
    p = tl.exp(scores - m_new)
    return m_new, ell * alpha + part_l(p), o * alpha + part_o(p)
