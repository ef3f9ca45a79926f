"""A broken variant of kernels/attn.py that the gate must keep catching (docs/ci.md)."""

from __future__ import annotations

from typing import Any

from attn import recv_triplet, send_triplet  # a module next to the kernel file

from meshproof.kernels.attention_parts import (
    load_kv,
    load_q,
    merge,
    partial_attention,
    softmax_scale,
    store_output,
)


def decode_recv_first(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                      S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, n_ranks: int, *,
                      tl: Any) -> None:
    """KNOWN BAD: each PE waits for its neighbours' partials before sending its own, so
    neighbours wait on each other forever (deadlock at every queue depth)."""
    rank = int(tl.program_id(axis=0))
    if rank >= n_ranks:
        return
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv_per_rank, h_kv, d_head, tl)
    mine = partial_attention(q, k_t, v, softmax_scale(d_head, None), tl)
    state = mine
    if rank > 0:
        state = merge(state, recv_triplet("W", mine, tl), tl)
    if rank < n_ranks - 1:
        state = merge(state, recv_triplet("E", mine, tl), tl)
    if rank < n_ranks - 1:
        send_triplet("E", mine, tl)
    if rank > 0:
        send_triplet("W", mine, tl)
    _m, ell, o = state
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)
