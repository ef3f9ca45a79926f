"""Masked kernels other than causal prefill: a sliding-window decode and a padded prefill.

- `line_decode_window`: decode over a line of ranks, rank i holding keys
  [i·S, (i+1)·S) of the KV cache; the S_q queries are the sequence's last positions and
  only the last `window` keys up to each query count (`--mask window:W`, W = `window`).
  Ranks whose slice the window never reaches stay idle; the first rank the window reaches
  starts the chain, each next one folds its (masked, if the window cuts it) slice into
  the partial arriving from W and passes it E; the last rank stores o / ℓ.
- `ring_prefill_padded`: prefill of one sequence padded to n·S keys, of which the first
  `length` are real (`--mask padding:LEN`, LEN = `length`): KV circulates E over a closed
  ring; a slice wholly past the length is skipped, the slice the length cuts is masked
  with `tl.where(k_pos < length, ...)`, the others are folded unmasked. Every query row
  (padding rows included) attends to the real keys.

The mask each built-in declares is its default argument's (window:20, padding:45); with
another `--arg window=W` / `--arg length=LEN`, declare `--mask window:W` / `padding:LEN`.
"""

from __future__ import annotations

from typing import Any

from meshproof.kernels.attention_parts import (
    Triplet,
    fold_scores,
    gqa_group,
    load_kv,
    load_q,
    merge,
    softmax_scale,
    store_output,
)


def line_decode_window(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                       S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, n_ranks: int,
                       window: int = 20, sm_scale: float | None = None, *,
                       tl: Any) -> None:
    """Sliding-window decode over a line: only the last `window` keys count."""
    rank = tl.program_id(axis=0)
    if not 0 <= rank < n_ranks:
        return
    n_keys = n_ranks * S_kv_per_rank
    first_q = n_keys - S_q                     # the queries' first position
    group = gqa_group(h_q, h_kv)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv_per_rank, h_kv, d_head, tl)
    lo_key = rank * S_kv_per_rank
    hi_key = lo_key + S_kv_per_rank - 1
    start = max(0, first_q - window + 1) // S_kv_per_rank   # the first rank any query sees
    if rank < start:
        return                                 # every key of this slice is outside
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    scores = tl.dot(q, k_t, out_dtype="f32") * softmax_scale(d_head, sm_scale)
    # the slice is wholly inside every query's window: no mask
    if not (lo_key > n_keys - 1 - window and hi_key <= first_q):
        q_pos = tl.reshape(tl.arange(0, S_q) + first_q, (S_q, 1, 1))
        k_pos = tl.arange(0, S_kv_per_rank) + lo_key
        keep = (k_pos <= q_pos) * (k_pos > q_pos - window)
        s4 = tl.reshape(scores, (h_kv, S_q, group, S_kv_per_rank))
        s4 = tl.where(keep, s4, float("-inf"))
        scores = tl.reshape(s4, (h_kv, S_q * group, S_kv_per_rank))
    state = fold_scores(None, scores, v, tl)
    if rank > start:
        m_in = tl.recv(dir="W", shape=state[0].shape, dtype="f32")
        l_in = tl.recv(dir="W", shape=state[1].shape, dtype="f32")
        o_in = tl.recv(dir="W", shape=state[2].shape, dtype="f32")
        state = merge(state, (m_in, l_in, o_in), tl)
    if rank < n_ranks - 1:
        for x in state:
            tl.send(dir="E", src=x)
        return
    _m, ell, o = state
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)


def ring_prefill_padded(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                        S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, n_ranks: int,
                        length: int = 45, sm_scale: float | None = None, *,
                        tl: Any) -> None:
    """Padded prefill over a ring: keys at `length` and past it are padding."""
    rank = tl.program_id(axis=0)
    if not 0 <= rank < n_ranks:
        return
    scale = softmax_scale(d_head, sm_scale)
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv_per_rank, h_kv, d_head, tl)
    state: Triplet | None = None
    for step in range(n_ranks):
        if step:
            tl.send(dir="E", src=k_t)
            tl.send(dir="E", src=v)
            k_t = tl.recv(dir="W", shape=k_t.shape, dtype="f16")
            v = tl.recv(dir="W", shape=v.shape, dtype="f16")
        first = (rank - step) % n_ranks * S_kv_per_rank     # the slice's first key
        if first >= length:
            continue                                         # wholly padding
        scores = tl.dot(q, k_t, out_dtype="f32") * scale
        if first + S_kv_per_rank > length:                   # the slice the length cuts
            k_pos = tl.arange(0, S_kv_per_rank) + first
            scores = tl.where(k_pos < length, scores, float("-inf"))
        state = fold_scores(state, scores, v, tl)
    assert state is not None   # rank 0's slice holds key 0, a real key
    _m, ell, o = state
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)
