"""Decode kernels as kernel authors write them: correct idioms and realistic mistakes.

Every kernel runs on a line of PEs (`pe_line`), shares one signature and computes (or
fails to compute) attention of the whole Q against the KV split over the ranks. The
correct ones must be proved attention; each mistake must be violated with a witness.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from meshproof.kernels.attention_parts import load_kv, load_q, store_output

LOG2E = 1.4426950408889634
T = Any
Triplet = tuple[T, T, T]


def _scores(q: T, k_t: T, d_head: int, tl: Any) -> T:
    return tl.dot(q, k_t, out_dtype="f32") * (1.0 / math.sqrt(d_head))


def _partial(q_ptr: Any, k_ptr: Any, v_ptr: Any, S_q: int, S_kv: int, h_q: int, h_kv: int,
             d_head: int, tl: Any) -> tuple[T, Triplet]:
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = _scores(q, k_t, d_head, tl)
    m = tl.max(s, axis=-1)
    p = tl.exp(s - m)
    return q, (m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32"))


def _merge(a: Triplet, b: Triplet, tl: Any) -> Triplet:
    m_new = tl.maximum(a[0], b[0])
    x, y = tl.exp(a[0] - m_new), tl.exp(b[0] - m_new)
    return m_new, a[1] * x + b[1] * y, a[2] * x + b[2] * y


def _line(state: Triplet, rank: int, n: int, tl: Any,
          merge: Callable[[Triplet, Triplet, Any], Triplet] = _merge,
          dtype: str = "f32") -> Triplet:
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
            got_w = tuple(tl.recv(dir="W", shape=x.shape, dtype=dtype) for x in state)  # type: ignore[assignment]
            state = merge(state, got_w, tl)  # type: ignore[arg-type]
        if rank + step < n:
            got_e = tuple(tl.recv(dir="E", shape=x.shape, dtype=dtype) for x in state)  # type: ignore[assignment]
            state = merge(state, got_e, tl)  # type: ignore[arg-type]
        to_e, to_w = got_w, got_e
    return state


def _finish(o_ptr: Any, state: Triplet, S_q: int, h_q: int, h_kv: int, d_head: int,
            tl: Any) -> None:
    store_output(o_ptr, state[2], state[1], S_q, h_q, h_kv, d_head, tl)


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


# --- correct idioms ------------------------------------------------------------------


def _reference_line(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                    h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """The standard (m, ℓ, o) fan-out."""
    _, st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    _finish(o_ptr, _line(st, rank, n, tl), S_q, h_q, h_kv, d_head, tl)


def _lse(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int, h_q: int,
         h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """Log-sum-exp merge: partials travel as (lse, normalised o)."""
    _, (m, ell, o) = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    lse = m + tl.log(ell)
    o = o / ell

    def merge(a: Triplet, b: Triplet, tl: Any) -> Triplet:
        mx = tl.maximum(a[0], b[0])
        new = mx + tl.log(tl.exp(a[0] - mx) + tl.exp(b[0] - mx))
        return new, a[1], a[2] * tl.exp(a[0] - new) + b[2] * tl.exp(b[0] - new)

    lse, _, o = _line((lse, lse, o), rank, n, tl, merge)
    out = tl.reshape(o, (h_kv, S_q, h_q // h_kv, d_head))
    tl.store(o_ptr, tl.cast(tl.trans(out, (1, 0, 2, 3)), "f16"))


def _exp2(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int, h_q: int,
          h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """exp2 everywhere, with scores pre-scaled by log2(e)."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = tl.dot(q, k_t, out_dtype="f32") * (LOG2E / math.sqrt(d_head))
    m = tl.max(s, axis=-1)
    p = tl.exp2(s - m)

    def merge(a: Triplet, b: Triplet, tl: Any) -> Triplet:
        m_new = tl.maximum(a[0], b[0])
        x, y = tl.exp2(a[0] - m_new), tl.exp2(b[0] - m_new)
        return m_new, a[1] * x + b[1] * y, a[2] * x + b[2] * y

    st = _line((m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")), rank, n, tl, merge)
    _finish(o_ptr, st, S_q, h_q, h_kv, d_head, tl)


def _eps(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int, h_q: int,
         h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """Divides by maximum(ℓ, eps) to guard against ℓ = 0."""
    _, st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    m, ell, o = _line(st, rank, n, tl)
    _finish(o_ptr, (m, tl.maximum(ell, 1e-6), o), S_q, h_q, h_kv, d_head, tl)


def _tiled(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int, h_q: int,
           h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """Flash-decoding: a Triton-style running state (-inf, 0, 0) over tiles of the slice."""
    tile = 4
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    rows = S_q * (h_q // h_kv)
    m = tl.full((h_kv, rows, 1), float("-inf"), "f32")
    ell = tl.zeros((h_kv, rows, 1), "f32")
    o = tl.zeros((h_kv, rows, d_head), "f32")
    for t in range(0, S_kv, tile):
        off = t * h_kv * d_head
        k = tl.load(k_ptr + off, shape=(tile, h_kv, d_head), dtype="f16")
        v = tl.load(v_ptr + off, shape=(tile, h_kv, d_head), dtype="f16")
        s = _scores(q, tl.trans(k, (1, 2, 0)), d_head, tl)
        m_new = tl.maximum(m, tl.max(s, axis=-1))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new)
        ell = ell * alpha + tl.sum(p, axis=-1)
        o = o * alpha + tl.dot(p, tl.trans(v, (1, 0, 2)), out_dtype="f32")
        m = m_new
    _finish(o_ptr, _line((m, ell, o), rank, n, tl), S_q, h_q, h_kv, d_head, tl)


def spill(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, tmp_ptr: Any, S_q: int = 1,
          S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1, d_head: int = 8,
          n_ranks: int = 4, *, tl: Any) -> None:
    """Parks the partial in a scratch buffer during the all-reduce and reloads it."""
    rank = tl.program_id(axis=0)
    if rank >= n_ranks:
        return
    _, (m, ell, o) = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    tl.store(tmp_ptr, o)
    tl.store(tmp_ptr + 1024, ell)
    o = tl.load(tmp_ptr, shape=o.shape, dtype="f32")
    ell = tl.load(tmp_ptr + 1024, shape=ell.shape, dtype="f32")
    _finish(o_ptr, _line((m, ell, o), rank, n_ranks, tl), S_q, h_q, h_kv, d_head, tl)


# --- mistakes ----------------------------------------------------------------------------


def _store_q(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int, h_q: int,
             h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: stores Q instead of the merged output."""
    _, st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    _line(st, rank, n, tl)
    tl.store(o_ptr, tl.load(q_ptr, shape=(S_q, h_q, d_head), dtype="f16"))


def _store_max(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int, h_q: int,
               h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: stores the running max m broadcast over the features."""
    _, st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    m, _, o = _line(st, rank, n, tl)
    _finish(o_ptr, (m, o * 0.0 + 1.0, o * 0.0 + m), S_q, h_q, h_kv, d_head, tl)


def _zeros_after(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                 h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: a store of zeros after the real store."""
    _reference_line(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv, h_q, h_kv, d_head, n, rank, tl)
    tl.store(o_ptr, tl.zeros((S_q, h_q, d_head), "f16"))


def _times_two(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
               h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: the peer's ℓ and o are weighted by 2.0 (a double merge by another name)."""
    _, st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)

    def merge(a: Triplet, b: Triplet, tl: Any) -> Triplet:
        return _merge(a, (b[0], b[1] * 2.0, b[2] * 2.0), tl)

    _finish(o_ptr, _line(st, rank, n, tl, merge), S_q, h_q, h_kv, d_head, tl)


def _plus_self(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
               h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: the peer's partial is added twice (x + x)."""
    _, st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)

    def merge(a: Triplet, b: Triplet, tl: Any) -> Triplet:
        return _merge(a, (b[0], b[1] + b[1], b[2] + b[2]), tl)

    _finish(o_ptr, _line(st, rank, n, tl, merge), S_q, h_q, h_kv, d_head, tl)


def _ell_only_twice(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                    h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: the peer's ℓ is scaled by 2.0, its o is not."""
    _, st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)

    def merge(a: Triplet, b: Triplet, tl: Any) -> Triplet:
        return _merge(a, (b[0], b[1] * 2.0, b[2]), tl)

    _finish(o_ptr, _line(st, rank, n, tl, merge), S_q, h_q, h_kv, d_head, tl)


def _tiny_f32(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
              h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: the peer's partial is weighted by 1e-50, which is 0 in f32."""
    _, st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)

    def merge(a: Triplet, b: Triplet, tl: Any) -> Triplet:
        return _merge(a, (b[0], b[1] * 1e-50, b[2] * 1e-50), tl)

    _finish(o_ptr, _line(st, rank, n, tl, merge), S_q, h_q, h_kv, d_head, tl)


def _tiny_f16(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
              h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: a damping factor 1e-9 cast to f16 (it is 0 there)."""
    _, st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    damp = tl.cast(tl.full((1, 1, 1), 1e-9, "f32"), "f16")

    def merge(a: Triplet, b: Triplet, tl: Any) -> Triplet:
        return _merge(a, (b[0], b[1] * damp, b[2] * damp), tl)

    _finish(o_ptr, _line(st, rank, n, tl, merge), S_q, h_q, h_kv, d_head, tl)


def _no_rescale(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: o is not rescaled by exp(m_old - m_new)."""
    _, st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)

    def merge(a: Triplet, b: Triplet, tl: Any) -> Triplet:
        m_new = tl.maximum(a[0], b[0])
        x, y = tl.exp(a[0] - m_new), tl.exp(b[0] - m_new)
        return m_new, a[1] * x + b[1] * y, a[2] + b[2] * y

    _finish(o_ptr, _line(st, rank, n, tl, merge), S_q, h_q, h_kv, d_head, tl)


def _exp2_once(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
               h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: exp2 for the partial, exp for the rescale."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = tl.dot(q, k_t, out_dtype="f32") * (LOG2E / math.sqrt(d_head))
    m = tl.max(s, axis=-1)
    p = tl.exp2(s - m)
    st = _line((m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")), rank, n, tl)
    _finish(o_ptr, st, S_q, h_q, h_kv, d_head, tl)


def _swap_m_ell(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: the receiver reads the triplet as (ℓ, m, o)."""
    _, st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)

    def merge(a: Triplet, b: Triplet, tl: Any) -> Triplet:
        return _merge(a, (b[1], b[0], b[2]), tl)

    _finish(o_ptr, _line(st, rank, n, tl, merge), S_q, h_q, h_kv, d_head, tl)


def _ell_by_max(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: ℓ is merged with a max instead of a rescaled sum."""
    _, st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)

    def merge(a: Triplet, b: Triplet, tl: Any) -> Triplet:
        m, _, o = _merge(a, b, tl)
        return m, tl.maximum(a[1], b[1]), o

    _finish(o_ptr, _line(st, rank, n, tl, merge), S_q, h_q, h_kv, d_head, tl)


def _normalise_first(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                     h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: o is softmax-normalised before the merge, then divided by ℓ again."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = _scores(q, k_t, d_head, tl)
    m = tl.max(s, axis=-1)
    ell = tl.sum(tl.exp(s - m), axis=-1)
    o = tl.dot(tl.softmax(s, axis=-1), v, out_dtype="f32")
    _finish(o_ptr, _line((m, ell, o), rank, n, tl), S_q, h_q, h_kv, d_head, tl)


def _sum_of_keys(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                 h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: keys of the first and second half of the slice are added before the dot."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    half = S_kv // 2
    k1 = tl.load(k_ptr, shape=(half, h_kv, d_head), dtype="f16")
    k2 = tl.load(k_ptr + half * h_kv * d_head, shape=(half, h_kv, d_head), dtype="f16")
    v = tl.load(v_ptr, shape=(half, h_kv, d_head), dtype="f16")
    s = _scores(q, tl.trans(k1 + k2, (1, 2, 0)), d_head, tl)
    m = tl.max(s, axis=-1)
    p = tl.exp(s - m)
    st = (m, tl.sum(p, axis=-1), tl.dot(p, tl.trans(v, (1, 0, 2)), out_dtype="f32"))
    _finish(o_ptr, _line(st, rank, n, tl), S_q, h_q, h_kv, d_head, tl)


def _interleaved_gqa(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                     h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: q head h is paired with kv head h % h_kv (interleaved, not blocked)."""
    group = h_q // h_kv
    q = tl.load(q_ptr, shape=(S_q, group, h_kv, d_head), dtype="f16")
    q = tl.reshape(tl.trans(q, (2, 0, 1, 3)), (h_kv, S_q * group, d_head))
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = _scores(q, k_t, d_head, tl)
    m = tl.max(s, axis=-1)
    p = tl.exp(s - m)
    m, ell, o = _line((m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")), rank, n, tl)
    out = tl.reshape(o / ell, (h_kv, S_q, group, d_head))
    tl.store(o_ptr, tl.cast(tl.trans(out, (1, 2, 0, 3)), "f16"))  # heads written back as read


def _no_scale(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
              h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: the scores are not scaled by 1/sqrt(d_head)."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = tl.dot(q, k_t, out_dtype="f32")
    m = tl.max(s, axis=-1)
    p = tl.exp(s - m)
    st = _line((m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")), rank, n, tl)
    _finish(o_ptr, st, S_q, h_q, h_kv, d_head, tl)


def _sum_ref_point(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                   h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE (numerics): the merge's reference point is m + m_in, not max(m, m_in)."""
    _, st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)

    def merge(a: Triplet, b: Triplet, tl: Any) -> Triplet:
        ref = a[0] + b[0]
        x, y = tl.exp(a[0] - ref), tl.exp(b[0] - ref)
        return ref, a[1] * x + b[1] * y, a[2] * x + b[2] * y

    _finish(o_ptr, _line(st, rank, n, tl, merge), S_q, h_q, h_kv, d_head, tl)


def _store_past_end(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                    h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """The right merge, stored one head too far: its last d_head elements land past the
    end of the output (a lost write, not a wrong value)."""
    _, st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    _finish(o_ptr + d_head, _line(st, rank, n, tl), S_q, h_q, h_kv, d_head, tl)


reference_line = _kernel(_reference_line)
store_past_end = _kernel(_store_past_end)
lse_merge = _kernel(_lse)
exp2_consistent = _kernel(_exp2)
eps_guard = _kernel(_eps)
tiled_flash = _kernel(_tiled)

store_q = _kernel(_store_q)
store_max = _kernel(_store_max)
zeros_after = _kernel(_zeros_after)
times_two = _kernel(_times_two)
plus_self = _kernel(_plus_self)
ell_only_twice = _kernel(_ell_only_twice)
tiny_f32 = _kernel(_tiny_f32)
tiny_f16 = _kernel(_tiny_f16)
no_rescale = _kernel(_no_rescale)
exp2_once = _kernel(_exp2_once)
swap_m_ell = _kernel(_swap_m_ell)
ell_by_max = _kernel(_ell_by_max)
normalise_first = _kernel(_normalise_first)
sum_of_keys = _kernel(_sum_of_keys)
interleaved_gqa = _kernel(_interleaved_gqa)
no_scale = _kernel(_no_scale)
sum_ref_point = _kernel(_sum_ref_point)

CORRECT = ("reference_line", "lse_merge", "exp2_consistent", "eps_guard", "tiled_flash",
           "spill")
MISTAKES = ("store_q", "store_max", "zeros_after", "times_two", "plus_self",
            "ell_only_twice", "tiny_f32", "tiny_f16", "no_rescale", "exp2_once",
            "swap_m_ell", "ell_by_max", "normalise_first", "sum_of_keys", "interleaved_gqa",
            "no_scale")
