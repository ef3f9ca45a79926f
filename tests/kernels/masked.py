"""Single-rank decode kernels that mask their scores with tl.where (tests/test_tl_where.py,
tests/test_masks.py): positions from tl.arange, comparisons, -inf fills."""

from __future__ import annotations

import math
from typing import Any

PAD = 10      # keys at positions PAD.. are padding
WINDOW = 5    # the query (the last position) sees the last WINDOW keys


def _attend(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_kv_per_rank: int, d_head: int,
            keep: Any, tl: Any) -> None:
    q = tl.load(q_ptr, shape=(1, d_head), dtype="f16")
    k = tl.load(k_ptr, shape=(S_kv_per_rank, d_head), dtype="f16")
    v = tl.load(v_ptr, shape=(S_kv_per_rank, d_head), dtype="f16")
    scores = tl.dot(q, tl.trans(k), out_dtype="f32") * (1.0 / math.sqrt(d_head))
    k_pos = tl.arange(0, S_kv_per_rank) + tl.program_id(axis=0) * S_kv_per_rank
    scores = tl.where(keep(k_pos), scores, float("-inf"))  # WHERE-LINE
    m = tl.max(scores, axis=-1)
    p = tl.exp(scores - m)
    o = tl.dot(tl.cast(p, "f16"), v, out_dtype="f32") / tl.sum(p, axis=-1)
    tl.store(o_ptr, tl.cast(o, "f16"))


def decode_padding(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                   S_kv_per_rank: int = 16, d_head: int = 8, pad: int = PAD, *,
                   tl: Any) -> None:
    """Decode on one rank; keys at positions `pad` and past it are padding."""
    _attend(q_ptr, k_ptr, v_ptr, o_ptr, S_kv_per_rank, d_head, lambda p: p < pad, tl)


decode_padding.meshproof_mask = f"padding:{PAD}"  # type: ignore[attr-defined]


def decode_window(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                  S_kv_per_rank: int = 16, d_head: int = 8, window: int = WINDOW, *,
                  tl: Any) -> None:
    """Decode on one rank; the query (position S_kv - 1) sees the last `window` keys."""
    q_pos = S_kv_per_rank - 1
    _attend(q_ptr, k_ptr, v_ptr, o_ptr, S_kv_per_rank, d_head,
            lambda p: p > q_pos - window, tl)


def decode_mask_times_scores(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                             S_kv_per_rank: int = 16, d_head: int = 8, *, tl: Any) -> None:
    """Uses a mask as numbers (scores * mask) instead of through tl.where."""
    q = tl.load(q_ptr, shape=(1, d_head), dtype="f16")
    k = tl.load(k_ptr, shape=(S_kv_per_rank, d_head), dtype="f16")
    v = tl.load(v_ptr, shape=(S_kv_per_rank, d_head), dtype="f16")
    scores = tl.dot(q, tl.trans(k), out_dtype="f32")
    scores = scores * (tl.arange(0, S_kv_per_rank) >= 0.0)  # MASK-MUL-LINE
    p = tl.softmax(scores, axis=-1)
    tl.store(o_ptr, tl.cast(tl.dot(tl.cast(p, "f16"), v, out_dtype="f32"), "f16"))


def decode_not_equal(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                     S_kv_per_rank: int = 16, d_head: int = 8, *, tl: Any) -> None:
    """Hides one key with != (a sum of two disjoint guards; -inf outside that union is
    not one penalty: outside the algebra)."""
    _attend(q_ptr, k_ptr, v_ptr, o_ptr, S_kv_per_rank, d_head,
            lambda p: p != 3, tl)
