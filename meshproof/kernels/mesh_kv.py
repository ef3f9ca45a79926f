"""Prefill kernels: each rank owns S_q query rows and one KV slice; the KV slices circulate.

A bidirectional fan-out of the (K, V) slices: at step s the slice of rank i reaches rank
i ± s, and each rank folds every slice it sees into its running (m, ℓ, o) with the
online-softmax step. Two messages (K, V) per direction per step, sent before receiving.
"""

from __future__ import annotations

from typing import Any

from meshproof.kernels.attention_parts import (
    absorb_slice,
    load_kv,
    load_q,
    partial_attention,
    softmax_scale,
    store_output,
)


def _prefill(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv_per_rank: int,
             h_q: int, h_kv: int, d_head: int, n_ranks: int, rank_axis: int, cube_start: int,
             sm_scale: float | None, steps: int, tl: Any) -> None:
    if rank_axis == 1:
        if tl.program_id(axis=0) != 0:
            return
        rank = int(tl.program_id(axis=1)) - cube_start
    elif rank_axis == 0:
        rank = int(tl.program_id(axis=0))
    else:
        raise ValueError(f"rank_axis must be 0 (PEs) or 1 (cubes), got {rank_axis}")
    if not 0 <= rank < n_ranks:
        return
    scale = softmax_scale(d_head, sm_scale)
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv_per_rank, h_kv, d_head, tl)
    state = partial_attention(q, k_t, v, scale, tl)
    has_e, has_w = rank < n_ranks - 1, rank > 0
    to_e: tuple[Any, Any] | None = (k_t, v)
    to_w: tuple[Any, Any] | None = (k_t, v)
    for step in range(1, steps + 1):
        if has_e and to_e is not None:
            tl.send(dir="E", src=to_e[0])
            tl.send(dir="E", src=to_e[1])
        if has_w and to_w is not None:
            tl.send(dir="W", src=to_w[0])
            tl.send(dir="W", src=to_w[1])
        from_w: tuple[Any, Any] | None = None
        from_e: tuple[Any, Any] | None = None
        if rank - step >= 0:
            from_w = (tl.recv(dir="W", shape=k_t.shape, dtype="f16"),
                      tl.recv(dir="W", shape=v.shape, dtype="f16"))
            state = absorb_slice(q, from_w[0], from_w[1], state, scale, tl)
        if rank + step < n_ranks:
            from_e = (tl.recv(dir="E", shape=k_t.shape, dtype="f16"),
                      tl.recv(dir="E", shape=v.shape, dtype="f16"))
            state = absorb_slice(q, from_e[0], from_e[1], state, scale, tl)
        to_e, to_w = from_w, from_e
    _m, ell, o = state
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)


def mesh_kv(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv_per_rank: int,
            h_q: int, h_kv: int, d_head: int, n_ranks: int, rank_axis: int = 0,
            cube_start: int = 0, sm_scale: float | None = None, *, tl: Any) -> None:
    """Prefill: each rank's S_q rows attend to every rank's KV slice (slices circulate)."""
    _prefill(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, n_ranks,
             rank_axis, cube_start, sm_scale, n_ranks - 1, tl)


def mesh_kv_skip_last(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                      S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, n_ranks: int,
                      rank_axis: int = 0, cube_start: int = 0, sm_scale: float | None = None,
                      *, tl: Any) -> None:
    """KNOWN BAD: stops one step early, so the edge ranks never merge the farthest slice."""
    _prefill(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, n_ranks,
             rank_axis, cube_start, sm_scale, n_ranks - 2, tl)  # BUG: off by one
