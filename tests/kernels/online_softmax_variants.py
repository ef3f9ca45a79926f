"""Variants of the online softmax, correct and mistaken: multi-tile running state,
merges that mix peers, reference points other than the max, split features, offsets,
stores before and after the merge, elementwise ops on the scores, scales at the
tolerance, 16-bit state, GQA head handling, constants added and removed, scratch outputs
and a two-rank prefill.

Every kernel runs on a line of PEs (`pe_line`) with the signature of
tests/kernels/normalisation_cases.py (S_q, S_kv_per_rank, h_q, h_kv, d_head, n_ranks).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from meshproof.kernels.attention_parts import load_kv, load_q

T = Any
Triplet = tuple[T, T, T]
Sig = Callable[..., None]


def _kernel(body: Callable[..., None]) -> Sig:
    def kernel(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
               S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1, d_head: int = 8,
               n_ranks: int = 4, *, tl: Any) -> None:
        rank = tl.program_id(axis=0)
        if rank >= n_ranks:
            return
        body(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, n_ranks,
             rank, tl)
    kernel.__doc__ = body.__doc__
    kernel.__name__ = kernel.__qualname__ = body.__name__.lstrip("_")
    return kernel


def _c(d_head: int) -> float:
    return 1.0 / math.sqrt(d_head)


def _scores(q: T, k_t: T, d_head: int, tl: Any) -> T:
    return tl.dot(q, k_t, out_dtype="f32") * _c(d_head)


def _merge(a: Triplet, b: Triplet, tl: Any) -> Triplet:
    m_new = tl.maximum(a[0], b[0])
    x, y = tl.exp(a[0] - m_new), tl.exp(b[0] - m_new)
    return m_new, a[1] * x + b[1] * y, a[2] * x + b[2] * y


Merge = Callable[[Triplet, Triplet, Any], Triplet]


def _line(state: Triplet, rank: int, n: int, tl: Any, merge: Merge = _merge,
          dtypes: tuple[str, str, str] = ("f32", "f32", "f32")) -> Triplet:
    """Bidirectional fan-out over a line: every rank merges every partial once."""
    to_e: Triplet | None = state
    to_w: Triplet | None = state
    for step in range(1, n):
        for d, t in (("E", to_e), ("W", to_w)):
            if t is not None and (rank < n - 1 if d == "E" else rank > 0):
                for x in t:
                    tl.send(dir=d, src=x)
        got_w: Triplet | None = None
        got_e: Triplet | None = None
        if rank - step >= 0:
            got_w = tuple(tl.recv(dir="W", shape=x.shape, dtype=dt)  # type: ignore[assignment]
                          for x, dt in zip(state, dtypes, strict=True))
            state = merge(state, got_w, tl)  # type: ignore[arg-type]
        if rank + step < n:
            got_e = tuple(tl.recv(dir="E", shape=x.shape, dtype=dt)  # type: ignore[assignment]
                          for x, dt in zip(state, dtypes, strict=True))
            state = merge(state, got_e, tl)  # type: ignore[arg-type]
        to_e, to_w = got_w, got_e
    return state


def _store(o_ptr: Any, out: T, S_q: int, h_q: int, h_kv: int, d_head: int, tl: Any) -> None:
    """Store a normalised (h_kv, S_q * group, d) value as O (S_q, h_q, d) in f16."""
    out = tl.reshape(out, (h_kv, S_q, h_q // h_kv, d_head))
    tl.store(o_ptr, tl.cast(tl.trans(out, (1, 0, 2, 3)), "f16"))


def _tile(ptr: Any, row: int, rows: int, h_kv: int, d_head: int, tl: Any) -> T:
    return tl.load(ptr + row * h_kv * d_head, shape=(rows, h_kv, d_head), dtype="f16")


def _tiles(q_ptr: Any, k_ptr: Any, v_ptr: Any, S_q: int, S_kv: int, h_q: int, h_kv: int,
           d_head: int, tl: Any, n_tiles: int = 2, bad: str = "") -> Triplet:
    """Flash-decoding over `n_tiles` tiles of the rank's slice, started at -inf / 0."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    rows = S_kv // n_tiles
    g = h_q // h_kv
    m = tl.full((h_kv, S_q * g, 1), float("-inf"), "f32")
    ell = tl.zeros((h_kv, S_q * g, 1), "f32")
    o = tl.zeros((h_kv, S_q * g, d_head), "f32")
    for i in range(n_tiles):
        k = _tile(k_ptr, i * rows, rows, h_kv, d_head, tl)
        v = _tile(v_ptr, i * rows, rows, h_kv, d_head, tl)
        s = _scores(q, tl.trans(k, (1, 2, 0)), d_head, tl)
        m_tile = tl.max(s, axis=-1)
        m_new = tl.maximum(m, m_tile)
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - (m_tile if bad == "p_tile_max" and i == 1 else m_new))
        o_alpha = tl.exp(m_tile - m_new) if bad == "o_wrong_alpha" and i == 1 else alpha
        ell = ell * alpha + tl.sum(p, axis=-1)
        o = o * o_alpha + tl.dot(p, tl.trans(v, (1, 0, 2)), out_dtype="f32")
        m = m_new
    return m, ell, o


# --- multi-tile online softmax --------------------------------------------------------


def _tiled_ok(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
              h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """CORRECT: two tiles per rank (running state from -inf / 0), then the all-reduce."""
    _, ell, o = _line(_tiles(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl), rank,
                      n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def _tiled_p_tile_max(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                      h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: the second tile's p uses the tile's own max, ℓ and o are rescaled to the
    running max."""
    st = _tiles(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl, bad="p_tile_max")
    _, ell, o = _line(st, rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def _tiled_o_wrong_alpha(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                         S_kv: int, h_q: int, h_kv: int, d_head: int, n: int, rank: int,
                         tl: Any) -> None:
    """MISTAKE: the second tile rescales o by exp(m_tile - m_new) (the wrong m), ℓ by
    exp(m_old - m_new)."""
    st = _tiles(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl, bad="o_wrong_alpha")
    _, ell, o = _line(st, rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def _tiled_four(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """CORRECT: four tiles per rank."""
    st = _tiles(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl, n_tiles=4)
    _, ell, o = _line(st, rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


tiled_ok = _kernel(_tiled_ok)
tiled_p_tile_max = _kernel(_tiled_p_tile_max)
tiled_o_wrong_alpha = _kernel(_tiled_o_wrong_alpha)
tiled_four = _kernel(_tiled_four)


def _partial(q_ptr: Any, k_ptr: Any, v_ptr: Any, S_q: int, S_kv: int, h_q: int, h_kv: int,
             d_head: int, tl: Any) -> Triplet:
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = _scores(q, k_t, d_head, tl)
    m = tl.max(s, axis=-1)
    p = tl.exp(s - m)
    return m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")


# --- merges that mix peers -----------------------------------------------------------


def _mixed_peers(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                 h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE (3 ranks): rank 1 takes m from its W peer but ℓ and o from its E peer, and
    merges them as one partial; it also merges the W peer's ℓ, o with the E peer's m."""
    st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    if rank != 1:
        for x in st:
            tl.send(dir="E" if rank == 0 else "W", src=x)
        return
    w = tuple(tl.recv(dir="W", shape=x.shape, dtype="f32") for x in st)
    e = tuple(tl.recv(dir="E", shape=x.shape, dtype="f32") for x in st)
    a = _merge(st, (w[0], e[1], e[2]), tl)
    _, ell, o = _merge(a, (e[0], w[1], w[2]), tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


mixed_peers = _kernel(_mixed_peers)


def _subset_max(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """CORRECT (attention; numerically unsafe): the reference point is the max over the
    first half of the rank's keys only."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = _scores(q, k_t, d_head, tl)
    half = _tile(k_ptr, 0, S_kv // 2, h_kv, d_head, tl)
    m = tl.max(_scores(q, tl.trans(half, (1, 2, 0)), d_head, tl), axis=-1)
    p = tl.exp(s - m)
    _, ell, o = _line((m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")), rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def _max_of_v(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
              h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: the "max" is taken per key row over V's features: exp(s_j - max_e V[j, e])
    weighs every key row differently."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = _scores(q, k_t, d_head, tl)
    mv = tl.trans(tl.max(v, axis=-1), (0, 2, 1))            # (h_kv, 1, S_kv)
    m = tl.max(s, axis=-1)
    p = tl.exp(s - mv)
    _, ell, o = _line((m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")), rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def _sum_of_maxima(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                   h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """CORRECT attention, unsafe numerics: the reference point is max(s) + max(s of the
    first half), a common factor that can be far below the max (exp overflows)."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = _scores(q, k_t, d_head, tl)
    half = _tile(k_ptr, 0, S_kv // 2, h_kv, d_head, tl)
    m = tl.max(s, axis=-1) + tl.max(_scores(q, tl.trans(half, (1, 2, 0)), d_head, tl),
                                    axis=-1)
    p = tl.exp(s - m)
    _, ell, o = _line((m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")), rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


subset_max = _kernel(_subset_max)
max_of_v = _kernel(_max_of_v)
sum_of_maxima = _kernel(_sum_of_maxima)


# --- split features, offsets --------------------------------------------------------


def _split_d(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int, h_q: int,
             h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """CORRECT: the scores are two dots over the halves of d_head, added (a split
    contraction; h_q = h_kv = 1, S_q = 1)."""
    hd = d_head // 2
    q = tl.load(q_ptr, shape=(1, 1, d_head), dtype="f16")
    k = tl.load(k_ptr, shape=(S_kv, 1, d_head), dtype="f16")
    q2 = tl.reshape(q, (1, 2, hd))                       # (1, halves, hd)
    k2 = tl.trans(tl.reshape(k, (S_kv, 2, hd)), (1, 2, 0))   # (halves, hd, S_kv)
    qa = tl.trans(q2, (1, 0, 2))                         # (halves, 1, hd)
    parts = tl.dot(qa, k2, out_dtype="f32")             # (halves, 1, S_kv)
    s = tl.sum(parts, axis=0) * _c(d_head)              # (1, S_kv)
    s = tl.reshape(s, (1, 1, S_kv))
    v = tl.trans(tl.load(v_ptr, shape=(S_kv, 1, d_head), dtype="f16"), (1, 0, 2))
    m = tl.max(s, axis=-1)
    p = tl.exp(s - m)
    _, ell, o = _line((m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")), rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def _split_d_bad(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                 h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: the scores are the first half of the features counted twice."""
    hd = d_head // 2
    q = tl.load(q_ptr, shape=(1, 1, hd), dtype="f16")
    k = tl.load(k_ptr, shape=(S_kv, 1, d_head), dtype="f16")
    k2 = tl.trans(tl.reshape(k, (S_kv, 2, hd)), (1, 2, 0))   # (halves, hd, S_kv)
    qa = tl.reshape(q, (1, 1, hd)) + tl.zeros((2, 1, hd), "f32")
    parts = tl.dot(qa, k2, out_dtype="f32")
    s = tl.reshape(tl.sum(parts, axis=0) * _c(d_head), (1, 1, S_kv))
    v = tl.trans(tl.load(v_ptr, shape=(S_kv, 1, d_head), dtype="f16"), (1, 0, 2))
    m = tl.max(s, axis=-1)
    p = tl.exp(s - m)
    _, ell, o = _line((m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")), rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def _k_off_by_one(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                  h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: K and V of rows 1.. of the slice (the first row skipped), S_kv - 1 rows."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k = _tile(k_ptr, 1, S_kv - 1, h_kv, d_head, tl)
    v = _tile(v_ptr, 1, S_kv - 1, h_kv, d_head, tl)
    s = _scores(q, tl.trans(k, (1, 2, 0)), d_head, tl)
    m = tl.max(s, axis=-1)
    p = tl.exp(s - m)
    st = (m, tl.sum(p, axis=-1), tl.dot(p, tl.trans(v, (1, 0, 2)), out_dtype="f32"))
    _, ell, o = _line(st, rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def _kv_rows_shifted(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                     h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: the slice is processed as two tiles, but the second V tile is loaded at
    the first tile's offset (K tile 2 is weighted with V tile 1)."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    half = S_kv // 2
    k = tl.load(k_ptr, shape=(S_kv, h_kv, d_head), dtype="f16")
    v1 = _tile(v_ptr, 0, half, h_kv, d_head, tl)
    s = _scores(q, tl.trans(k, (1, 2, 0)), d_head, tl)
    m = tl.max(s, axis=-1)
    p = tl.exp(s - m)
    # both halves of p are weighted with V rows 0..half-1
    p1 = tl.exp(_scores(q, tl.trans(_tile(k_ptr, 0, half, h_kv, d_head, tl), (1, 2, 0)),
                        d_head, tl) - m)
    p2 = tl.exp(_scores(q, tl.trans(_tile(k_ptr, half, half, h_kv, d_head, tl), (1, 2, 0)),
                        d_head, tl) - m)
    vv = tl.trans(v1, (1, 0, 2))
    o = tl.dot(p1, vv, out_dtype="f32") + tl.dot(p2, vv, out_dtype="f32")
    _, ell, o = _line((m, tl.sum(p, axis=-1), o), rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


split_d = _kernel(_split_d)
split_d_bad = _kernel(_split_d_bad)
k_off_by_one = _kernel(_k_off_by_one)
kv_rows_shifted = _kernel(_kv_rows_shifted)


# --- stores before and after the merge -----------------------------------------------


def _store_then_final(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                      h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """CORRECT: the local o/ℓ is stored first (a debugging aid), the merged one after."""
    st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    _store(o_ptr, st[2] / st[1], S_q, h_q, h_kv, d_head, tl)
    _, ell, o = _line(st, rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def _final_then_local(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                      h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: the merged output is stored, then overwritten by the local partial's o/ℓ
    (the stores are in the wrong order)."""
    st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    _, ell, o = _line(st, rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)
    _store(o_ptr, st[2] / st[1], S_q, h_q, h_kv, d_head, tl)


store_then_final = _kernel(_store_then_final)
final_then_local = _kernel(_final_then_local)


# --- elementwise ops on inputs --------------------------------------------------------


def _clamped_scores(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                    h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE (for large inputs): the scores are clamped to [-4, 4] before the softmax."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = tl.maximum(tl.minimum(_scores(q, k_t, d_head, tl), 4.0), -4.0)
    m = tl.max(s, axis=-1)
    p = tl.exp(s - m)
    _, ell, o = _line((m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")), rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def _log_exp_scores(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                    h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """CORRECT: the scores go through log(exp(s)) (an identity in exact arithmetic)."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = tl.log(tl.exp(_scores(q, k_t, d_head, tl)))
    m = tl.max(s, axis=-1)
    p = tl.exp(s - m)
    _, ell, o = _line((m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")), rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def _neg_neg_max(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                 h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE (numerics): the reference point is the *minimum* of the scores
    (-max(-s)): a common factor, so attention, but exp(s - min s) overflows."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = _scores(q, k_t, d_head, tl)
    m = -tl.max(-s, axis=-1)
    p = tl.exp(s - m)
    _, ell, o = _line((m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")), rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def _guard_tile_ell(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                    h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: the second half's ℓ (with the max over the whole slice) is guarded with
    maximum(ℓ2, 1.0) - but ℓ2 may be far below 1 when the max lies in the first half."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    half = S_kv // 2
    k_t, _v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    m = tl.max(_scores(q, k_t, d_head, tl), axis=-1)
    k1 = tl.trans(_tile(k_ptr, 0, half, h_kv, d_head, tl), (1, 2, 0))
    k2 = tl.trans(_tile(k_ptr, half, half, h_kv, d_head, tl), (1, 2, 0))
    v1 = tl.trans(_tile(v_ptr, 0, half, h_kv, d_head, tl), (1, 0, 2))
    v2 = tl.trans(_tile(v_ptr, half, half, h_kv, d_head, tl), (1, 0, 2))
    p1 = tl.exp(_scores(q, k1, d_head, tl) - m)
    p2 = tl.exp(_scores(q, k2, d_head, tl) - m)
    ell = tl.sum(p1, axis=-1) + tl.maximum(tl.sum(p2, axis=-1), 1.0)
    o = tl.dot(p1, v1, out_dtype="f32") + tl.dot(p2, v2, out_dtype="f32")
    _, ell, o = _line((m, ell, o), rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


clamped_scores = _kernel(_clamped_scores)
log_exp_scores = _kernel(_log_exp_scores)
neg_neg_max = _kernel(_neg_neg_max)
guard_tile_ell = _kernel(_guard_tile_ell)


# --- scale at the tolerance -----------------------------------------------------------


def _scale_off(factor: float) -> Sig:
    def body(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int, h_q: int,
             h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
        q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
        k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
        s = tl.dot(q, k_t, out_dtype="f32") * (_c(d_head) * factor)
        m = tl.max(s, axis=-1)
        p = tl.exp(s - m)
        _, ell, o = _line((m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")), rank, n,
                          tl)
        _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)
    return body


scale_2m19 = _kernel(_scale_off(1.0 + 2.0 ** -19))
scale_2m21 = _kernel(_scale_off(1.0 + 2.0 ** -21))
scale_1e3 = _kernel(_scale_off(1.001))


# --- 16-bit state ---------------------------------------------------------------------


def _f16_state(dtypes: tuple[str, str, str], casts: bool = True) -> Sig:
    def body(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int, h_q: int,
             h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
        m, ell, o = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
        st = (tl.cast(m, dtypes[0]), tl.cast(ell, dtypes[1]), tl.cast(o, dtypes[2]))
        _, ell, o = _line(st, rank, n, tl, dtypes=dtypes)
        _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)
    return body


o_f16 = _kernel(_f16_state(("f32", "f32", "f16")))
ell_bf16 = _kernel(_f16_state(("f32", "bf16", "f32")))
all_bf16 = _kernel(_f16_state(("bf16", "bf16", "bf16")))


def _recv_f16_of_f32(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                     h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: ℓ and o are sent in f32 but received as f16 (the bytes are read as f16)."""
    st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    _, ell, o = _line(st, rank, n, tl, dtypes=("f32", "f16", "f16"))
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


recv_f16_of_f32 = _kernel(_recv_f16_of_f32)


# --- GQA head handling ----------------------------------------------------------------


def _q_no_trans(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: Q (S_q, h_q, d) reshaped straight to (h_kv, S_q * group, d); with S_q = 2,
    h_q = h_kv = 2 the query rows are used as heads."""
    q = tl.reshape(tl.load(q_ptr, shape=(S_q, h_q, d_head), dtype="f16"),
                   (h_kv, S_q * (h_q // h_kv), d_head))
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = _scores(q, k_t, d_head, tl)
    m = tl.max(s, axis=-1)
    p = tl.exp(s - m)
    _, ell, o = _line((m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")), rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


q_no_trans = _kernel(_q_no_trans)


# --- cancellation: exact in real arithmetic, not on the machine ------------------------


def _shifted(shift: float) -> Sig:
    def body(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int, h_q: int,
             h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
        q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
        k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
        s = _scores(q, k_t, d_head, tl) + shift           # a "bias" for the max
        m = tl.max(s, axis=-1)
        p = tl.exp(s - m)
        _, ell, o = _line((m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")), rank, n,
                          tl)
        _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)
    return body


shift_1e6 = _kernel(_shifted(1e6))
shift_1e3 = _kernel(_shifted(1e3))
shift_1e7 = _kernel(_shifted(1e7))
shift_neg_1e3 = _kernel(_shifted(-1e3))


def _bias_cancel(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                 h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: o is offset by 1e30 and the offset removed again: (o + 1e30) - 1e30 is o in
    real arithmetic and 0 in f32."""
    m, ell, o = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    _, ell, o = _line((m, ell, o), rank, n, tl)
    _store(o_ptr, ((o + 1e30) - 1e30) / ell, S_q, h_q, h_kv, d_head, tl)


def _bias_cancel_f16(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                     h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: ℓ is sent in f16 as ℓ + 2048 (a "positive floor"), the receiver subtracts
    2048: in f16 the spacing at 2048 is 2, so ℓ loses its fraction."""
    m, ell, o = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    st = (m, tl.cast(ell + 2048.0, "f16"), o)
    if rank == 0:
        for x in st:
            tl.send(dir="E", src=x)
        return
    if rank == 1:
        got = (tl.recv(dir="W", shape=m.shape, dtype="f32"),
               tl.recv(dir="W", shape=ell.shape, dtype="f16") - 2048.0,
               tl.recv(dir="W", shape=o.shape, dtype="f32"))
        _, ell2, o2 = _merge((m, ell, o), got, tl)
        _store(o_ptr, o2 / ell2, S_q, h_q, h_kv, d_head, tl)


bias_cancel = _kernel(_bias_cancel)
bias_cancel_f16 = _kernel(_bias_cancel_f16)


# --- outputs and scratch --------------------------------------------------------------


def _scratch_partial(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                     h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any,
                     scratch_ptr: Any) -> None:
    """CORRECT for o_ptr; the rank's own normalised partial is kept in scratch_ptr (not
    attention over the group: `--outputs scratch_ptr` must be violated)."""
    st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    _store(scratch_ptr, st[2] / st[1], S_q, h_q, h_kv, d_head, tl)
    _, ell, o = _line(st, rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def scratch_partial(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, scratch_ptr: Any,
                    S_q: int = 1, S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1,
                    d_head: int = 8, n_ranks: int = 4, *, tl: Any) -> None:
    rank = tl.program_id(axis=0)
    if rank < n_ranks:
        _scratch_partial(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head,
                         n_ranks, rank, tl, scratch_ptr)


# --- prefill (Q split by sequence) ----------------------------------------------------


def _prefill(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int, h_q: int,
             h_kv: int, d_head: int, rank: int, tl: Any, bad: str) -> None:
    """Two ranks: each sends its Q block and its KV shard to the other, and computes its
    own query rows against both shards."""
    peer = "E" if rank == 0 else "W"
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    for x in (q, k_t, v):
        tl.send(dir=peer, src=x)
    q_in = tl.recv(dir=peer, shape=q.shape, dtype="f16")
    k_in = tl.recv(dir=peer, shape=k_t.shape, dtype="f16")
    v_in = tl.recv(dir=peer, shape=v.shape, dtype="f16")
    mine = q_in if bad == "peer_rows" and rank == 1 else q
    c = _c(d_head)
    s1 = tl.dot(mine, k_t, out_dtype="f32") * c
    s2 = tl.dot(mine, k_in, out_dtype="f32") * c
    m = tl.maximum(tl.max(s1, axis=-1), tl.max(s2, axis=-1))
    p1, p2 = tl.exp(s1 - m), tl.exp(s2 - m)
    ell = tl.sum(p1, axis=-1) + tl.sum(p2, axis=-1)
    o = tl.dot(p1, v, out_dtype="f32") + tl.dot(p2, v_in, out_dtype="f32")
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def prefill_pair(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 2,
                 S_kv_per_rank: int = 8, h_q: int = 2, h_kv: int = 1, d_head: int = 8, *,
                 tl: Any) -> None:
    """CORRECT prefill over two ranks."""
    _prefill(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head,
             tl.program_id(axis=0), tl, "")


def prefill_peer_rows(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 2,
                      S_kv_per_rank: int = 8, h_q: int = 2, h_kv: int = 1, d_head: int = 8,
                      *, tl: Any) -> None:
    """MISTAKE: rank 1 computes the rows of rank 0's Q block and stores them as its own."""
    _prefill(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head,
             tl.program_id(axis=0), tl, "peer_rows")


prefill_pair.meshproof_harness = "prefill"  # type: ignore[attr-defined]
prefill_peer_rows.meshproof_harness = "prefill"  # type: ignore[attr-defined]
