"""Kernels for numeric_safety's rounding bound: inputs cast to bf16, divisions by
constants, exp2, scores kept in f16, reference points far above the max, outputs through
f32 subnormals, tiles with 16-bit state; and a few of groups and outputs (another user's
Q or V, a rank that reads no KV, a late store over half the output).

Every kernel runs on a line of PEs (`pe_line`, two by default) with the signature of
tests/kernels/online_softmax_variants.py (S_q, S_kv_per_rank, h_q, h_kv, d_head, n_ranks).
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
               n_ranks: int = 2, *, tl: Any) -> None:
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


def _merge(a: Triplet, b: Triplet, tl: Any) -> Triplet:
    m_new = tl.maximum(a[0], b[0])
    x, y = tl.exp(a[0] - m_new), tl.exp(b[0] - m_new)
    return m_new, a[1] * x + b[1] * y, a[2] * x + b[2] * y


def _line(state: Triplet, rank: int, n: int, tl: Any) -> Triplet:
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
            got_w = tuple(tl.recv(dir="W", shape=x.shape, dtype="f32")
                          for x in state)
            state = _merge(state, got_w, tl)
        if rank + step < n:
            got_e = tuple(tl.recv(dir="E", shape=x.shape, dtype="f32")
                          for x in state)
            state = _merge(state, got_e, tl)
        to_e, to_w = got_w, got_e
    return state


def _store(o_ptr: Any, out: T, S_q: int, h_q: int, h_kv: int, d_head: int, tl: Any,
           dtype: str = "f32") -> None:
    """Store a normalised (h_kv, S_q * group, d) value as O (S_q, h_q, d)."""
    out = tl.reshape(out, (h_kv, S_q, h_q // h_kv, d_head))
    out = tl.trans(out, (1, 0, 2, 3))
    tl.store(o_ptr, out if dtype == "f32" else tl.cast(out, dtype))


def _partial(q_ptr: Any, k_ptr: Any, v_ptr: Any, S_q: int, S_kv: int, h_q: int, h_kv: int,
             d_head: int, tl: Any, variant: str = "") -> Triplet:
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    if variant == "v_bf16":
        v = tl.cast(v, "bf16")
    if variant == "qk_bf16":
        q, k_t = tl.cast(q, "bf16"), tl.cast(k_t, "bf16")
    s = tl.dot(q, k_t, out_dtype="f32")
    if variant == "div_scale":
        s = s / math.sqrt(d_head)
    elif variant == "f16_scores":
        s = tl.cast(tl.cast(s * _c(d_head), "f16"), "f32")
    elif variant == "undo_prescale":
        # scores kept in f16 at 1/4096 of their size, scaled back up in f32 (exact: 2^-12)
        s = tl.cast(tl.cast(s * (_c(d_head) / 4096.0), "f16"), "f32") / (1.0 / 4096.0)
    else:
        s = s * _c(d_head)
    m = tl.max(s, axis=-1)
    if variant.startswith("headroom_"):
        m = m + float(variant[9:])   # a reference point above the max
    p = tl.exp2((s - m) / math.log(2.0)) if variant == "exp2_div_ln2" else tl.exp(s - m)
    return m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")


def _variant(name: str, out_dtype: str = "f32") -> Sig:
    def body(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
             h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
        st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl, name)
        _, ell, o = _line(st, rank, n, tl)
        _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl, out_dtype)
    body.__name__ = "_" + (name or "plain")
    return _kernel(body)


plain = _variant("")
v_bf16 = _variant("v_bf16")
qk_bf16 = _variant("qk_bf16")
div_scale = _variant("div_scale")
exp2_div_ln2 = _variant("exp2_div_ln2")
headroom_90 = _variant("headroom_90")
headroom_100 = _variant("headroom_100")
undo_prescale = _variant("undo_prescale")
f16_scores = _variant("f16_scores")


def _qk_load_bf16(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                  h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """CORRECT: Q and K loaded as bf16 (the same values as qk_bf16's casts)."""
    g = h_q // h_kv
    q = tl.reshape(tl.trans(tl.load(q_ptr, shape=(S_q, h_kv, g, d_head), dtype="bf16"),
                            (1, 0, 2, 3)), (h_kv, S_q * g, d_head))
    k = tl.load(k_ptr, shape=(S_kv, h_kv, d_head), dtype="bf16")
    v = tl.load(v_ptr, shape=(S_kv, h_kv, d_head), dtype="f16")
    s = tl.dot(q, tl.trans(k, (1, 2, 0)), out_dtype="f32") * _c(d_head)
    m = tl.max(s, axis=-1)
    p = tl.exp(s - m)
    st = (m, tl.sum(p, axis=-1), tl.dot(p, tl.trans(v, (1, 0, 2)), out_dtype="f32"))
    _, ell, o = _line(st, rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


qk_load_bf16 = _kernel(_qk_load_bf16)


def _reciprocal(out: str) -> Sig:
    def body(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
             h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
        st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl, "")
        _, ell, o = _line(st, rank, n, tl)
        inv = 1.0 / (tl.cast(tl.cast(ell, "bf16"), "f32") if out == "bf16" else ell)
        _store(o_ptr, o * inv, S_q, h_q, h_kv, d_head, tl)
    body.__name__ = "_reciprocal" + ("_bf16" if out == "bf16" else "")
    return _kernel(body)


# CORRECT: o times the reciprocal of ℓ, one division per row instead of per element
reciprocal = _reciprocal("f32")
# MISTAKE (numerics, for a tolerance below bf16's 2^-9): ℓ rounded to bf16 first
reciprocal_bf16 = _reciprocal("bf16")


def _two_ranks_differ(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                      h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: rank 0 stores the merged output, rank 1 its local partial (same o_ptr)."""
    st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    _, ell, o = _line(st, rank, n, tl)
    if rank == 0:
        _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)
    else:
        _store(o_ptr, st[2] / st[1], S_q, h_q, h_kv, d_head, tl)


two_ranks_differ = _kernel(_two_ranks_differ)


def _skips_last(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE (4 ranks launched): the last rank's KV slice is never read; the others
    all-reduce among themselves (a snake that skips its last cube, in one dimension)."""
    if rank == n - 1:
        return
    st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    _, ell, o = _line(st, rank, n - 1, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


skips_last = _kernel(_skips_last)


def _through_subnormals(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                        h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: the output is scaled by 2^-155 (two f32 constants) and back by 2^155: below
    the smallest f32 subnormal (2^-149) every |o/ℓ| < 2^6 is 0 on the machine."""
    st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    _, ell, o = _line(st, rank, n, tl)
    out = ((o / ell) * 2.0 ** -100) * 2.0 ** -55
    _store(o_ptr, (out * 2.0 ** 100) * 2.0 ** 55, S_q, h_q, h_kv, d_head, tl)


through_subnormals = _kernel(_through_subnormals)


def _peer_q(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
            h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE under --groups pe (each PE its own user): rank 1 attends with rank 0's
    query (another user's Q) over its own KV."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    if rank == 0:
        tl.send(dir="E", src=q)
    if rank == 1:
        q = tl.recv(dir="W", shape=q.shape, dtype="f16")
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = tl.dot(q, k_t, out_dtype="f32") * _c(d_head)
    p = tl.exp(s - tl.max(s, axis=-1))
    o = tl.dot(p, v, out_dtype="f32") / tl.sum(p, axis=-1)
    _store(o_ptr, o, S_q, h_q, h_kv, d_head, tl)


peer_q = _kernel(_peer_q)


def _peer_v(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
            h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE under --groups pe: rank 1 uses its own K but rank 0's V."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    if rank == 0:
        tl.send(dir="E", src=v)
    if rank == 1:
        v = tl.recv(dir="W", shape=v.shape, dtype="f16")
    s = tl.dot(q, k_t, out_dtype="f32") * _c(d_head)
    p = tl.exp(s - tl.max(s, axis=-1))
    o = tl.dot(p, v, out_dtype="f32") / tl.sum(p, axis=-1)
    _store(o_ptr, o, S_q, h_q, h_kv, d_head, tl)


peer_v = _kernel(_peer_v)


def _tiles(q_ptr: Any, k_ptr: Any, v_ptr: Any, S_q: int, S_kv: int, h_q: int, h_kv: int,
           d_head: int, tl: Any, n_tiles: int, how: str) -> Triplet:
    """Flash-decoding over tiles of the rank's slice; `how` picks 16-bit state."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    rows, g = S_kv // n_tiles, h_q // h_kv
    acc = "bf16" if how == "o_bf16" else "f32"
    m = tl.full((h_kv, S_q * g, 1), float("-inf"), "f32")
    ell = tl.zeros((h_kv, S_q * g, 1), "f32")
    o = tl.zeros((h_kv, S_q * g, d_head), acc)
    for i in range(n_tiles):
        k = tl.load(k_ptr + i * rows * h_kv * d_head, shape=(rows, h_kv, d_head), dtype="f16")
        v = tl.load(v_ptr + i * rows * h_kv * d_head, shape=(rows, h_kv, d_head), dtype="f16")
        s = tl.dot(q, tl.trans(k, (1, 2, 0)), out_dtype="f32") * _c(d_head)
        m_new = tl.maximum(m, tl.max(s, axis=-1))
        diff = m - m_new
        alpha = tl.exp(tl.cast(diff, "f16")) if how == "alpha_f16" else tl.exp(diff)
        p = tl.exp(s - m_new)
        ell = ell * alpha + tl.sum(p, axis=-1)
        pv = tl.dot(tl.cast(p, "f16"), tl.trans(v, (1, 0, 2)), out_dtype=acc)
        o = o * (tl.cast(alpha, "bf16") if acc == "bf16" else alpha) + pv
        m = m_new
    return m, ell, o


def _tiled(how: str, n_tiles: int = 8) -> Sig:
    def body(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
             h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
        st = _tiles(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl, n_tiles, how)
        _, ell, o = _line(st, rank, n, tl)
        if how == "o_f16_before_div":
            o = tl.cast(o, "f16")
        _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)
    body.__name__ = "_tiled_" + how
    return _kernel(body)


tiled_alpha_f16 = _tiled("alpha_f16")
tiled_o_bf16 = _tiled("o_bf16")
tiled_o_f16_before_div = _tiled("o_f16_before_div")



def _overwrite_half(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                    h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE (h_q = 2, h_kv = 1, S_q = 1): the merged output is stored, then its second
    half (q head 1) is overwritten with q head 0 of the rank's local partial."""
    st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    _, ell, o = _line(st, rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)
    q0 = tl.reshape(tl.load(q_ptr, shape=(1, d_head), dtype="f16"), (1, 1, d_head))
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = tl.dot(q0, k_t, out_dtype="f32") * _c(d_head)
    p = tl.exp(s - tl.max(s, axis=-1))
    local = tl.dot(p, v, out_dtype="f32") / tl.sum(p, axis=-1)
    tl.store(o_ptr + d_head, tl.reshape(local, (1, 1, d_head)))


overwrite_half = _kernel(_overwrite_half)
