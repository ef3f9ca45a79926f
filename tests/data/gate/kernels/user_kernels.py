"""User kernels for the gate tests, written as a kernel team would: a two-PE decode that
swaps partial (m, l, o) triplets, the same with the receive first (a deadlock), and one
that merges its own partial twice (not exactly-once)."""

from typing import Any

from meshproof.kernels.attention_parts import (
    load_kv,
    load_q,
    merge,
    partial_attention,
    softmax_scale,
    store_output,
)


def _partial(q_ptr: Any, k_ptr: Any, v_ptr: Any, S_q: int, S_kv_per_rank: int, h_q: int,
             h_kv: int, d_head: int, tl: Any) -> tuple[Any, Any, Any]:
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv_per_rank, h_kv, d_head, tl)
    return partial_attention(q, k_t, v, softmax_scale(d_head, None), tl)


def pair_decode(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv_per_rank: int,
                h_q: int, h_kv: int, d_head: int, *, tl: Any) -> None:
    """PE 0 and PE 1 send their partial to each other, then receive and merge."""
    state = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    toward = "E" if tl.program_id(axis=0) == 0 else "W"
    for part in state:
        tl.send(dir=toward, src=part)
    other = tuple(tl.recv(dir=toward, shape=p.shape, dtype="f32") for p in state)
    _m, ell, o = merge(state, other, tl)
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)


def pair_decode_recv_first(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                           S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, *,
                           tl: Any) -> None:
    """Both PEs receive before sending: each waits for the other forever."""
    state = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    toward = "E" if tl.program_id(axis=0) == 0 else "W"
    other = tuple(tl.recv(dir=toward, shape=p.shape, dtype="f32") for p in state)
    for part in state:
        tl.send(dir=toward, src=part)
    _m, ell, o = merge(state, other, tl)
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)


def pair_decode_double_merge(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                             S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, *,
                             tl: Any) -> None:
    """Merges the received partial, then its own partial a second time."""
    state = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    toward = "E" if tl.program_id(axis=0) == 0 else "W"
    for part in state:
        tl.send(dir=toward, src=part)
    other = tuple(tl.recv(dir=toward, shape=p.shape, dtype="f32") for p in state)
    _m, ell, o = merge(merge(state, other, tl), state, tl)
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)
