"""Line merges whose outputs are never written at any queue depth, and one that only
needs a deeper queue (tests/test_unwritten.py)."""

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


def _partial(q_ptr: Any, k_ptr: Any, v_ptr: Any, S_q: int, S_kv_per_rank: int, h_q: int,
             h_kv: int, d_head: int, tl: Any) -> tuple[Any, Any, Any]:
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv_per_rank, h_kv, d_head, tl)
    return partial_attention(q, k_t, v, softmax_scale(d_head, None), tl)


def _reduce_west(state: Any, tl: Any, n: int, rank: int, north_first: bool) -> Any:
    """Reduce westward to rank 0, then broadcast the result eastward; with north_first,
    the last PE first sends m north (pe_line has no N link)."""
    if rank == n - 1 and north_first:
        tl.send(dir="N", src=state[0])  # BLOCKS: no N link
    if rank < n - 1:
        incoming = (tl.recv(dir="E", shape=state[0].shape, dtype="f32"),
                    tl.recv(dir="E", shape=state[1].shape, dtype="f32"),
                    tl.recv(dir="E", shape=state[2].shape, dtype="f32"))
        state = merge(state, incoming, tl)
    if rank > 0:
        for t in state:
            tl.send(dir="W", src=t)
        state = (tl.recv(dir="W", shape=state[0].shape, dtype="f32"),
                 tl.recv(dir="W", shape=state[1].shape, dtype="f32"),
                 tl.recv(dir="W", shape=state[2].shape, dtype="f32"))
    if rank < n - 1:
        for t in state:
            tl.send(dir="E", src=t)
    return state


def line_merge_north_first(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
        S_kv_per_rank: int = 16, h_q: int = 1, h_kv: int = 1, d_head: int = 8, *,
        tl: Any) -> None:
    """PE 7 sends m north before its W messages: every output waits on it."""
    rank, n = tl.program_id(axis=0), tl.num_programs(axis=0)
    state = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    _m, ell, o = _reduce_west(state, tl, n, rank, north_first=True)
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)  # STORE


def line_merge(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
               S_kv_per_rank: int = 16, h_q: int = 1, h_kv: int = 1, d_head: int = 8, *,
               tl: Any) -> None:
    """The same merge without the stray send: attention at every queue depth >= 1."""
    rank, n = tl.program_id(axis=0), tl.num_programs(axis=0)
    state = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    _m, ell, o = _reduce_west(state, tl, n, rank, north_first=False)
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)


def store_then_block(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
        S_kv_per_rank: int = 16, h_q: int = 1, h_kv: int = 1, d_head: int = 8, *,
        tl: Any) -> None:
    """Every rank stores its partial, then PE 7 blocks on a send N: the outputs are
    written (wrong ones: no all-reduce), so the semantic verdicts judge them."""
    rank, n = tl.program_id(axis=0), tl.num_programs(axis=0)
    _m, ell, o = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)
    if rank == n - 1:
        tl.send(dir="N", src=ell)
