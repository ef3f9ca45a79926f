"""A decode kernel that forgets its all-reduce: each rank stores only its own partial."""

from __future__ import annotations

from typing import Any

from meshproof.kernels.attention_parts import (
    load_kv,
    load_q,
    partial_attention,
    softmax_scale,
    store_output,
)


def no_allreduce(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv_per_rank: int,
                 h_q: int, h_kv: int, d_head: int, *, tl: Any) -> None:
    """Forgets the all-reduce: each rank stores its own partial."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv_per_rank, h_kv, d_head, tl)
    _m, ell, o = partial_attention(q, k_t, v, softmax_scale(d_head, None), tl)
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)
