"""How the merged state is normalised and stored: one partial per rank, all-reduced over a
line, then divided by ℓ and stored. The cases: reference points above the max
("headroom"), ε-guards of ℓ, ℓ and o damped or cast to f16, guards against empty slices,
a denominator missing or counted per partial, and the store's layout (rows and heads
swapped, an offset per rank, a fix-up store, one rank storing). Some are not attention (or
count a key row twice, or can overflow) but might be accepted, some correct but might be
refused. Every kernel runs on a line of PEs (`pe_line`) with the shared signature of
tests/kernels/semantic_cases.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from meshproof.kernels.attention_parts import load_kv, load_q

T = Any
Triplet = tuple[T, T, T]


def _scores(q: T, k_t: T, d_head: int, tl: Any) -> T:
    return tl.dot(q, k_t, out_dtype="f32") * (1.0 / math.sqrt(d_head))


def _partial(q_ptr: Any, k_ptr: Any, v_ptr: Any, S_q: int, S_kv: int, h_q: int, h_kv: int,
             d_head: int, tl: Any, shift: float = 0.0) -> Triplet:
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = _scores(q, k_t, d_head, tl)
    m = tl.max(s, axis=-1)
    if shift:
        m = m + shift
    p = tl.exp(s - m)
    return m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")


def _merge(a: Triplet, b: Triplet, tl: Any) -> Triplet:
    m_new = tl.maximum(a[0], b[0])
    x, y = tl.exp(a[0] - m_new), tl.exp(b[0] - m_new)
    return m_new, a[1] * x + b[1] * y, a[2] * x + b[2] * y


Merge = Callable[[Triplet, Triplet, Any], Triplet]


def _line(state: Triplet, rank: int, n: int, tl: Any, merge: Merge = _merge,
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


def _store(o_ptr: Any, out: T, S_q: int, h_q: int, h_kv: int, d_head: int, tl: Any) -> None:
    """Store a normalised (h_kv, S_q * group, d) value as O (S_q, h_q, d) in f16."""
    out = tl.reshape(out, (h_kv, S_q, h_q // h_kv, d_head))
    tl.store(o_ptr, tl.cast(tl.trans(out, (1, 0, 2, 3)), "f16"))


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


# --- probes ------------------------------------------------------------------------------


HEADROOM = 20.0


def _headroom_eps(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                  h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: every rank's reference point is max + 20 ("headroom"), so the merged ℓ is
    only >= exp(-20); dividing by maximum(ℓ, 1e-6) then divides by 1e-6, not by ℓ."""
    st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl, shift=HEADROOM)
    _, ell, o = _line(st, rank, n, tl)
    _store(o_ptr, o / tl.maximum(ell, 1e-6), S_q, h_q, h_kv, d_head, tl)


def _headroom_plain(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                    h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """CORRECT: a reference point above the max (max + 20) is still a common factor."""
    st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl, shift=HEADROOM)
    _, ell, o = _line(st, rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def _headroom_inv_f16(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                      h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE (numerics): 1/ℓ kept in f16 when ℓ can be as small as exp(-20): 1/ℓ
    reaches 4.8e8, far above 65504."""
    st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl, shift=HEADROOM)
    _, ell, o = _line(st, rank, n, tl)
    inv = tl.cast(1.0 / ell, "f16")
    _store(o_ptr, o * inv, S_q, h_q, h_kv, d_head, tl)


headroom_eps = _kernel(_headroom_eps)
headroom_plain = _kernel(_headroom_plain)
headroom_inv_f16 = _kernel(_headroom_inv_f16)


def _twin_max(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int, h_q: int,
              h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE (numerics): the reference point is max(m, m + 20), so ℓ >= exp(-20) only;
    1/ℓ kept in f16 reaches e^20/64 = 7.6e6 > 65504 (inf in the output)."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = _scores(q, k_t, d_head, tl)
    mx = tl.max(s, axis=-1)
    m = tl.maximum(mx, mx + HEADROOM)
    p = tl.exp(s - m)
    _, ell, o = _line((m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")), rank, n, tl)
    inv = tl.cast(1.0 / ell, "f16")
    _store(o_ptr, o * inv, S_q, h_q, h_kv, d_head, tl)


def _twin_max_eps(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                  h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: reference point max(m, m + 20) on one rank, then o / maximum(ℓ, 1e-6):
    ℓ <= 16·e^-20 < 1e-6, so the guard replaces ℓ."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = _scores(q, k_t, d_head, tl)
    mx = tl.max(s, axis=-1)
    m = tl.maximum(mx, mx + HEADROOM)
    p = tl.exp(s - m)
    _, ell, o = _line((m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")), rank, n, tl)
    _store(o_ptr, o / tl.maximum(ell, 1e-6), S_q, h_q, h_kv, d_head, tl)


def _log_small(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int, h_q: int,
               h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE (numerics): log(ℓ·1e-3)·20000 kept in f16: log(ℓ·1e-3) is about -4..-7, so
    the value reaches -1.4e5, beyond 65504."""
    st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    _, ell, o = _line(st, rank, n, tl)
    tag = tl.cast(tl.log(ell * 1e-3) * 20000.0, "f16")
    _store(o_ptr, o / ell + tag * 0.0, S_q, h_q, h_kv, d_head, tl)


def _underflow_pair(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                    h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: ℓ and o are damped twice by 1e-30 before the merge; each factor is a
    normal f32, but their product underflows to 0 in f32, so o/ℓ is 0/0."""
    m, ell, o = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    ell = ell * 1e-30 * 1e-30
    o = o * 1e-30 * 1e-30
    _, ell, o = _line((m, ell, o), rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


DAMP = 1e-7


def _subnormal_f16_send(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                        h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE (numerics): the partial is scaled by 1e-7 "to avoid overflow" and sent in
    f16, where values near 1e-7 are subnormal (a few bits of precision)."""
    m, ell, o = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    st = (m, tl.cast(ell * DAMP, "f16"), tl.cast(o * DAMP, "f16"))

    def merge(a: Triplet, b: Triplet, tl: Any) -> Triplet:
        m_new = tl.maximum(a[0], b[0])
        x, y = tl.exp(a[0] - m_new), tl.exp(b[0] - m_new)
        return m_new, tl.cast(a[1] * x + b[1] * y, "f16"), tl.cast(a[2] * x + b[2] * y, "f16")

    dts = ("f32", "f16", "f16")

    def recv_all(d: str) -> Triplet:
        m_, ell_, o_ = (tl.recv(dir=d, shape=x.shape, dtype=dt)
                        for x, dt in zip(st, dts, strict=True))
        return m_, ell_, o_

    to_e: Triplet | None = st
    to_w: Triplet | None = st
    for step in range(1, n):
        for d, t in (("E", to_e), ("W", to_w)):
            if t is not None and (rank < n - 1 if d == "E" else rank > 0):
                for x in t:
                    tl.send(dir=d, src=x)
        got_w: Triplet | None = None
        got_e: Triplet | None = None
        if rank - step >= 0:
            got_w = recv_all("W")
            st = merge(st, got_w, tl)
        if rank + step < n:
            got_e = recv_all("E")
            st = merge(st, got_e, tl)
        to_e, to_w = got_w, got_e
    _store(o_ptr, st[2] / st[1], S_q, h_q, h_kv, d_head, tl)


twin_max = _kernel(_twin_max)
twin_max_eps = _kernel(_twin_max_eps)
log_small = _kernel(_log_small)
underflow_pair = _kernel(_underflow_pair)
subnormal_f16_send = _kernel(_subnormal_f16_send)


FLOOR = -1e30


def _guarded_merge(a: Triplet, b: Triplet, tl: Any) -> Triplet:
    """The online-softmax merge with its max floored, so two empty partials stay finite."""
    m_new = tl.maximum(tl.maximum(a[0], b[0]), FLOOR)
    x, y = tl.exp(a[0] - m_new), tl.exp(b[0] - m_new)
    return m_new, a[1] * x + b[1] * y, a[2] * x + b[2] * y


def _guarded_partial(q_ptr: Any, k_ptr: Any, v_ptr: Any, S_q: int, S_kv: int, h_q: int,
                     h_kv: int, d_head: int, tl: Any) -> Triplet:
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = _scores(q, k_t, d_head, tl)
    m = tl.maximum(tl.max(s, axis=-1), FLOOR)
    p = tl.exp(s - m)
    return m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")


def _guarded(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int, h_q: int,
             h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """CORRECT: every max is floored (FlashInfer #4051 guard); one division at the end."""
    st = _guarded_partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    _, ell, o = _line(st, rank, n, tl, _guarded_merge)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def _guarded_local_norm(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                        h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE (empty partials): the max is guarded, but each rank normalises its own
    partial (o/ℓ, an LSE merge): an empty slice gives ℓ = 0, so o/ℓ = 0/0 = nan and
    log(ℓ) = -inf before the merge."""
    m, ell, o = _guarded_partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    lse = m + tl.log(ell)
    o = o / ell

    def merge(a: Triplet, b: Triplet, tl: Any) -> Triplet:
        mx = tl.maximum(tl.maximum(a[0], b[0]), FLOOR)
        new = mx + tl.log(tl.exp(a[0] - mx) + tl.exp(b[0] - mx))
        return new, a[1], a[2] * tl.exp(a[0] - new) + b[2] * tl.exp(b[0] - new)

    _, _, o = _line((lse, lse, o), rank, n, tl, merge)
    _store(o_ptr, o, S_q, h_q, h_kv, d_head, tl)


def _guarded_final_norm(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                        h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE (empty partials): no all-reduce guard problem, but an empty rank also
    divides its own (empty) partial to report a local result: 0/0 on that rank."""
    m, ell, o = _guarded_partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    local = o / ell
    _, ell, o = _line((m, ell, o), rank, n, tl, _guarded_merge)
    _store(o_ptr, o / ell + local * 0.0, S_q, h_q, h_kv, d_head, tl)


guarded = _kernel(_guarded)
guarded_local_norm = _kernel(_guarded_local_norm)
guarded_final_norm = _kernel(_guarded_final_norm)


def _local_check_f32(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                     h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE (empty partials): guarded merge, but every rank also normalises its own
    partial o/ℓ (0/0 = nan on an empty slice) and folds it in with weight 0; the output
    is kept in f32, so nan reaches it on the empty rank."""
    m, ell, o = _guarded_partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    local = o / ell
    _, ell, o = _line((m, ell, o), rank, n, tl, _guarded_merge)
    out = tl.reshape(o / ell + local * 0.0, (h_kv, S_q, h_q // h_kv, d_head))
    tl.store(o_ptr, tl.trans(out, (1, 0, 2, 3)))


local_check_f32 = _kernel(_local_check_f32)


def _root_only(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
               h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """CORRECT (a design choice): the all-reduce runs everywhere, only rank 0 stores O."""
    st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    _, ell, o = _line(st, rank, n, tl)
    if rank == 0:
        _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


root_only = _kernel(_root_only)


def _rows_heads_swapped(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                        h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: the store's transpose swaps query rows and q heads; with S_q = h_q the
    shape still matches the output's."""
    st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    _, ell, o = _line(st, rank, n, tl)
    out = tl.reshape(o / ell, (h_kv, S_q, h_q // h_kv, d_head))
    tl.store(o_ptr, tl.cast(tl.trans(out, (2, 0, 1, 3)), "f16"))


def _reshape_not_trans_out(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                           S_kv: int, h_q: int, h_kv: int, d_head: int, n: int, rank: int,
                           tl: Any) -> None:
    """MISTAKE: (h_kv, S_q * group, d) is reshaped straight to (S_q, h_q, d); with h_kv > 1
    and S_q > 1 that puts kv-head blocks where query rows belong."""
    st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    _, ell, o = _line(st, rank, n, tl)
    tl.store(o_ptr, tl.cast(tl.reshape(o / ell, (S_q, h_q, d_head)), "f16"))


def _global_offset(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                   h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: every rank writes its output at a "global" offset rank * S_q * h_q * d,
    as if o_ptr were one buffer shared by the ranks (it is per rank)."""
    st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    _, ell, o = _line(st, rank, n, tl)
    out = tl.reshape(o / ell, (h_kv, S_q, h_q // h_kv, d_head))
    tl.store(o_ptr + rank * S_q * h_q * d_head, tl.cast(tl.trans(out, (1, 0, 2, 3)), "f16"))


def _fixup_store(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                 h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """CORRECT (judged on what the output finally holds): a first store writes q head 0's
    result into every head; a second store then rewrites q head 1 with its own result.
    Run with S_q = 1, h_q = 2, h_kv = 1."""
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)

    def head(h: int) -> T:
        q = tl.reshape(tl.load(q_ptr + h * d_head, shape=(1, 1, d_head), dtype="f16"),
                       (1, 1, d_head))
        s = _scores(q, k_t, d_head, tl)
        m = tl.max(s, axis=-1)
        p = tl.exp(s - m)
        _, ell, o = _line((m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")), rank, n,
                          tl)
        return o / ell                                   # (1, 1, d)

    first = head(0) + tl.zeros((1, h_q, d_head), "f32")  # head 0 broadcast to every head
    tl.store(o_ptr, tl.cast(first, "f16"))
    tl.store(o_ptr + d_head, tl.cast(head(1), "f16"))   # the fix-up of q head 1


rows_heads_swapped = _kernel(_rows_heads_swapped)
reshape_not_trans_out = _kernel(_reshape_not_trans_out)
global_offset = _kernel(_global_offset)
fixup_store = _kernel(_fixup_store)


def _split_scale(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                 h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE (tiny): the numerator's scores use the scale (1 + 2^-21)·c and the
    denominator's (1 - 2^-21)·c: each is within the 2^-20 tolerance of c, but they are
    not the same scale, so o/ℓ is not a ratio with a common factor."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    c = 1.0 / math.sqrt(d_head)
    raw = tl.dot(q, k_t, out_dtype="f32")
    s_num = raw * (c * (1.0 + 2.0 ** -21))
    s_den = raw * (c * (1.0 - 2.0 ** -21))
    m = tl.max(s_num, axis=-1)
    st = (m, tl.sum(tl.exp(s_den - m), axis=-1), tl.dot(tl.exp(s_num - m), v, out_dtype="f32"))
    _, ell, o = _line(st, rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def _unnormalised(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                  h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: the merged o is stored without dividing by ℓ."""
    st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    _, _, o = _line(st, rank, n, tl)
    _store(o_ptr, o, S_q, h_q, h_kv, d_head, tl)


def _sum_of_normalised(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                       h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: every partial is normalised (o/ℓ) and the normalised partials are added:
    each key row appears once, but under the wrong denominator."""
    m, ell, o = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)

    def merge(a: Triplet, b: Triplet, tl: Any) -> Triplet:
        return a[0], a[1], a[2] + b[2]

    _, _, o = _line((m, ell, o / ell), rank, n, tl, merge)
    _store(o_ptr, o * (1.0 / n), S_q, h_q, h_kv, d_head, tl)


split_scale = _kernel(_split_scale)
unnormalised = _kernel(_unnormalised)
sum_of_normalised = _kernel(_sum_of_normalised)


def _trans_send(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: o is sent transposed, (h_kv, d, rows), and received as (h_kv, rows, d): the
    receiver reads the bytes row-major, a scrambled o."""
    st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    m, ell, o = st
    if rank == 0:
        tl.send(dir="E", src=m)
        tl.send(dir="E", src=ell)
        tl.send(dir="E", src=tl.trans(o, (0, 2, 1)))
        return
    if rank == 1:
        got = (tl.recv(dir="W", shape=m.shape, dtype="f32"),
               tl.recv(dir="W", shape=ell.shape, dtype="f32"),
               tl.recv(dir="W", shape=o.shape, dtype="f32"))
        _, ell, o = _merge(st, got, tl)
        _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


trans_send = _kernel(_trans_send)


def _exp_const_zero(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int,
                    h_q: int, h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """MISTAKE: a damping factor exp(-200) (0 in f32: e^-200 < 1.4e-45) scales ℓ and o
    of every partial, so the machine divides 0 by 0."""
    m, ell, o = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    damp = tl.exp(tl.full((1, 1, 1), -200.0, "f32"))
    _, ell, o = _line((m, ell * damp, o * damp), rank, n, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


exp_const_zero = _kernel(_exp_const_zero)
