"""Merges of a pair for exactly_once_merge: two PEs swap their (m, ℓ, o) once and merge.

`good` is the correct merge. Every other kernel is numerically wrong in a way that keeps
each naive count at 1 (a partial spilled and reloaded, negated, zeroed, scaled by a factor
of unknown sign, multiplied by another partial): meshproof must never call them proved.
"""

from __future__ import annotations

from typing import Any

from meshproof.kernels.attention_parts import load_kv, load_q, partial_attention, store_output

Triplet = tuple[Any, Any, Any]


def _swap(q_ptr: Any, k_ptr: Any, v_ptr: Any,
          tl: Any) -> tuple[Triplet, Triplet, Any, Any] | None:
    """Both PEs send their partial triplet to the other; returns mine, theirs, α, β."""
    pe = tl.program_id(axis=0)
    if pe > 1:
        return None
    q = load_q(q_ptr, 1, 1, 1, 8, tl)
    k_t, v = load_kv(k_ptr, v_ptr, 16, 1, 8, tl)
    mine = partial_attention(q, k_t, v, 0.35, tl)
    d = "E" if pe == 0 else "W"
    for t in mine:
        tl.send(dir=d, src=t)
    m_in, ell_in, o_in = (tl.recv(dir=d, shape=t.shape, dtype="f32") for t in mine)
    m_new = tl.maximum(mine[0], m_in)
    return mine, (m_in, ell_in, o_in), tl.exp(mine[0] - m_new), tl.exp(m_in - m_new)


def _store(o_ptr: Any, o: Any, ell: Any, tl: Any) -> None:
    store_output(o_ptr, o, ell, 1, 1, 1, 8, tl)


def good(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """The correct online-softmax merge of two partials."""
    r = _swap(q_ptr, k_ptr, v_ptr, tl)
    if r is None:
        return
    (_, ell, o), (_, ell_in, o_in), a, b = r
    _store(o_ptr, o * a + o_in * b, ell * a + ell_in * b, tl)


def spill_reload(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, tmp_ptr: Any, *,
                 tl: Any) -> None:
    """Spills the merged o to scratch, reloads it and adds it again: o counted twice."""
    r = _swap(q_ptr, k_ptr, v_ptr, tl)
    if r is None:
        return
    (_, ell, o), (_, ell_in, o_in), a, b = r
    o_new = o * a + o_in * b
    tl.store(tmp_ptr, o_new)
    spilled = tl.load(tmp_ptr, shape=o_new.shape, dtype="f32")
    _store(o_ptr, o_new + spilled, ell * a + ell_in * b, tl)  # SPILL-TWICE-STORE


def spill_reload_once(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, tmp_ptr: Any, *,
                      tl: Any) -> None:
    """Spills the merged o and reloads it (correct: the round trip keeps its counts)."""
    r = _swap(q_ptr, k_ptr, v_ptr, tl)
    if r is None:
        return
    (_, ell, o), (_, ell_in, o_in), a, b = r
    o_new = o * a + o_in * b
    tl.store(tmp_ptr + 8, o_new)
    _store(o_ptr, tl.load(tmp_ptr + 8, shape=(8,), dtype="f32"), ell * a + ell_in * b, tl)


def spill_partly(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, tmp_ptr: Any, *,
                 tl: Any) -> None:
    """Reloads a range that only partly overlaps the spilled partial."""
    r = _swap(q_ptr, k_ptr, v_ptr, tl)
    if r is None:
        return
    (_, ell, o), (_, ell_in, o_in), a, b = r
    tl.store(tmp_ptr, o * a + o_in * b)
    _store(o_ptr, tl.load(tmp_ptr + 4, shape=(1, 1, 8), dtype="f32"), ell * a + ell_in * b, tl)


def negated(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Subtracts the incoming partial through a negation: o_in has coefficient -1."""
    r = _swap(q_ptr, k_ptr, v_ptr, tl)
    if r is None:
        return
    (_, ell, o), (_, ell_in, o_in), a, b = r
    _store(o_ptr, o * a + (-o_in) * b, ell * a + (-ell_in) * b, tl)


def zeroed(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Multiplies the incoming partial by 0: it is never really merged."""
    r = _swap(q_ptr, k_ptr, v_ptr, tl)
    if r is None:
        return
    (_, ell, o), (_, ell_in, o_in), a, b = r
    _store(o_ptr, o * a + o_in * b * 0.0, ell * a + ell_in * b * 0.0, tl)


def shifted_weight(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Uses β - 1 (≤ 0) as the incoming partial's weight."""
    r = _swap(q_ptr, k_ptr, v_ptr, tl)
    if r is None:
        return
    (_, ell, o), (_, ell_in, o_in), a, b = r
    b = b - 1.0
    _store(o_ptr, o * a + o_in * b, ell * a + ell_in * b, tl)


def loaded_factor(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, mask_ptr: Any, *,
                  tl: Any) -> None:
    """Multiplies the incoming partial by a loaded tensor (zeros would drop it)."""
    r = _swap(q_ptr, k_ptr, v_ptr, tl)
    if r is None:
        return
    (_, ell, o), (_, ell_in, o_in), a, b = r
    keep = tl.load(mask_ptr, shape=(1, 1, 1), dtype="f32")
    _store(o_ptr, o * a + o_in * b * keep, ell * a + ell_in * b * keep, tl)


def positive_factors(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Rescales by positive constants (a scalar, a tl.full): still one merge each."""
    r = _swap(q_ptr, k_ptr, v_ptr, tl)
    if r is None:
        return
    (_, ell, o), (_, ell_in, o_in), a, b = r
    two = tl.cast(tl.full((1, 1, 1), 2.0, dtype="f32"), "f32")
    _store(o_ptr, o * a * two + o_in * b * two, (ell * a + ell_in * b) * 2.0, tl)


def product_of_partials(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Multiplies the two ℓ-weighted partials with a dot instead of adding them."""
    r = _swap(q_ptr, k_ptr, v_ptr, tl)
    if r is None:
        return
    (_, ell, o), (_, ell_in, o_in), a, b = r
    ell_new = ell * a + ell_in * b
    _store(o_ptr, tl.dot(ell_new, o * a + o_in * b), ell_new, tl)


def renamed_buffers(q_ptr: Any, kc_ptr: Any, vc_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """KV buffers not named k_ptr/v_ptr, and a double merge: needs --sharded kc_ptr,vc_ptr."""
    r = _swap(q_ptr, kc_ptr, vc_ptr, tl)
    if r is None:
        return
    (_, ell, o), (_, ell_in, o_in), a, b = r
    _store(o_ptr, o * a + o_in * b + o_in * b, ell * a + ell_in * b + ell_in * b, tl)


def clamped_scores(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Clamps its scores elementwise before the softmax (a mask floor): a correct merge."""
    pe = tl.program_id(axis=0)
    if pe > 1:
        return
    q = load_q(q_ptr, 1, 1, 1, 8, tl)
    k_t, v = load_kv(k_ptr, v_ptr, 16, 1, 8, tl)
    s = tl.maximum(tl.dot(q, k_t, out_dtype="f32") * 0.35, -1e4)
    m = tl.max(s, axis=-1)
    p = tl.exp(s - m)
    mine = (m, tl.sum(p, axis=-1), tl.dot(tl.cast(p, "f16"), v, out_dtype="f32"))
    d = "E" if pe == 0 else "W"
    for t in mine:
        tl.send(dir=d, src=t)
    m_in, ell_in, o_in = (tl.recv(dir=d, shape=t.shape, dtype="f32") for t in mine)
    m_new = tl.maximum(m, m_in)
    a, b = tl.exp(m - m_new), tl.exp(m_in - m_new)
    _store(o_ptr, mine[2] * a + o_in * b, mine[1] * a + ell_in * b, tl)


def from_empty_state(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Flash-attention style: starts from (m, ℓ, o) = (-inf, 0, 0) and absorbs its slice."""
    pe = tl.program_id(axis=0)
    if pe > 1:
        return
    q = load_q(q_ptr, 1, 1, 1, 8, tl)
    k_t, v = load_kv(k_ptr, v_ptr, 16, 1, 8, tl)
    m = tl.full((1, 1, 1), float("-inf"), dtype="f32")
    ell = tl.zeros((1, 1, 1), dtype="f32")
    o = tl.zeros((1, 1, 8), dtype="f32")
    s = tl.dot(q, k_t, out_dtype="f32") * 0.35
    m_new = tl.maximum(m, tl.max(s, axis=-1))
    alpha = tl.exp(m - m_new)
    p = tl.exp(s - m_new)
    ell = ell * alpha + tl.sum(p, axis=-1)
    o = o * alpha + tl.dot(tl.cast(p, "f16"), v, out_dtype="f32")
    mine = (m_new, ell, o)
    d = "E" if pe == 0 else "W"
    for t in mine:
        tl.send(dir=d, src=t)
    m_in, ell_in, o_in = (tl.recv(dir=d, shape=t.shape, dtype="f32") for t in mine)
    m2 = tl.maximum(m_new, m_in)
    a, b = tl.exp(m_new - m2), tl.exp(m_in - m2)
    _store(o_ptr, o * a + o_in * b, ell * a + ell_in * b, tl)


def overwritten_store(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Writes its own partial's output first, then overwrites it with the merged one."""
    r = _swap(q_ptr, k_ptr, v_ptr, tl)
    if r is None:
        return
    (_, ell, o), (_, ell_in, o_in), a, b = r
    _store(o_ptr, o, ell, tl)  # a provisional result, overwritten below
    _store(o_ptr, o * a + o_in * b, ell * a + ell_in * b, tl)


def partly_overwritten_store(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, *,
                             tl: Any) -> None:
    """Overwrites only half of a provisional (unmerged) output: the rest stays wrong."""
    r = _swap(q_ptr, k_ptr, v_ptr, tl)
    if r is None:
        return
    (_, ell, o), (_, _ell_in, o_in), a, b = r
    _store(o_ptr, o, ell, tl)
    tl.store(o_ptr + 4, tl.reshape(o * a + o_in * b, (2, 4)))
