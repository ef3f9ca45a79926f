"""Decode attention over a line of PEs, written as a user's kernel (docs/ci.md).

Every PE holds the whole Q and one slice of the KV cache, computes its partial (m, ℓ, o)
and all-reduces the partials along the line with a bidirectional fan-out: at step s the
partial that started on PE i reaches PEs i ± s. Each PE forwards what it received, never
its running state, so every partial is merged exactly once.
"""

from __future__ import annotations

from typing import Any

from meshproof.kernels.attention_parts import (
    load_kv,
    load_q,
    merge,
    partial_attention,
    softmax_scale,
    store_output,
)


def send_triplet(direction: str, triplet: Any, tl: Any) -> None:
    for part in triplet:
        tl.send(dir=direction, src=part)


def recv_triplet(direction: str, like: Any, tl: Any) -> Any:
    return tuple(tl.recv(dir=direction, shape=part.shape, dtype="f32") for part in like)


def decode_allreduce(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                     S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, n_ranks: int, *,
                     tl: Any) -> None:
    """Fan-out all-reduce of the partial attention triplets over n_ranks PEs (E/W)."""
    rank = int(tl.program_id(axis=0))
    if rank >= n_ranks:
        return
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv_per_rank, h_kv, d_head, tl)
    state = partial_attention(q, k_t, v, softmax_scale(d_head, None), tl)
    to_east, to_west = state, state
    for step in range(1, n_ranks):
        if rank < n_ranks - 1 and to_east is not None:
            send_triplet("E", to_east, tl)
        if rank > 0 and to_west is not None:
            send_triplet("W", to_west, tl)
        from_west = from_east = None
        if rank - step >= 0:
            from_west = recv_triplet("W", state, tl)
            state = merge(state, from_west, tl)
        if rank + step < n_ranks:
            from_east = recv_triplet("E", state, tl)
            state = merge(state, from_east, tl)
        to_east, to_west = from_west, from_east
    _m, ell, o = state
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)
