"""Single-rank masked decode kernels for numeric_safety on masked outputs
(tests/test_semantics_masked_numeric.py): a correct one, and the mistakes its rules catch.

Keys at positions PAD and past it are padding (`--mask padding:10`, declared below).
"""

from __future__ import annotations

import math
from typing import Any

PAD = 10


def _scores(q_ptr: Any, k_ptr: Any, v_ptr: Any, n: int, d: int, tl: Any, pad: int = PAD
            ) -> tuple[Any, ...]:
    q = tl.load(q_ptr, shape=(1, d), dtype="f16")
    k = tl.load(k_ptr, shape=(n, d), dtype="f16")
    v = tl.load(v_ptr, shape=(n, d), dtype="f16")
    scores = tl.dot(q, tl.trans(k), out_dtype="f32") * (1.0 / math.sqrt(d))
    keep = tl.arange(0, n) < pad
    return scores, tl.where(keep, scores, float("-inf")), v


def padded(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
           S_kv_per_rank: int = 16, d_head: int = 8, *, tl: Any) -> None:
    """The correct idiom: the max and the exp both read the masked scores."""
    _, masked, v = _scores(q_ptr, k_ptr, v_ptr, S_kv_per_rank, d_head, tl)
    m = tl.max(masked, axis=-1)
    p = tl.exp(masked - m)
    o = tl.dot(tl.cast(p, "f16"), v, out_dtype="f32") / tl.sum(p, axis=-1)
    tl.store(o_ptr, tl.cast(o, "f16"))


def exp_of_unmasked(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                    S_kv_per_rank: int = 16, d_head: int = 8, *, tl: Any) -> None:
    """The max over the allowed keys, the exp over every key: a hidden key's score above
    the max makes exp's argument positive (it may overflow)."""
    scores, masked, v = _scores(q_ptr, k_ptr, v_ptr, S_kv_per_rank, d_head, tl)
    m = tl.max(masked, axis=-1)
    p = tl.exp(scores - m)  # EXP-LINE
    o = tl.dot(tl.cast(p, "f16"), v, out_dtype="f32") / tl.sum(p, axis=-1)
    tl.store(o_ptr, tl.cast(o, "f16"))


def huge_positions(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                   S_kv_per_rank: int = 16, d_head: int = 8, *, tl: Any) -> None:
    """Positions offset past 2^24, which f32 does not hold exactly, selected by a mask of
    constants (where(keep, 1, 0) * positions): the rounding domain cannot call it exact."""
    _, masked, v = _scores(q_ptr, k_ptr, v_ptr, S_kv_per_rank, d_head, tl)
    m = tl.max(masked, axis=-1)
    far = tl.arange(0, S_kv_per_rank) + 16777216.0  # FAR-LINE
    p = tl.exp(masked - m) + far * 0.0
    o = tl.dot(tl.cast(p, "f16"), v, out_dtype="f32") / tl.sum(p, axis=-1)
    tl.store(o_ptr, tl.cast(o, "f16"))


for _kernel in (padded, exp_of_unmasked, huge_positions):
    _kernel.meshproof_mask = f"padding:{PAD}"  # type: ignore[attr-defined]


def padded_floor(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                 S_kv_per_rank: int = 16, d_head: int = 8, pad: int = PAD, *,
                 tl: Any) -> None:
    """The max floored at -1e30 (FlashAttention's guard against exp(-inf - (-inf))): the
    floor never attains the max while the query sees a key; with `pad` 0 it sees none, ℓ
    is 0 and o / ℓ is 0/0 at the division."""
    _, masked, v = _scores(q_ptr, k_ptr, v_ptr, S_kv_per_rank, d_head, tl, pad)
    m = tl.maximum(tl.max(masked, axis=-1), -1e30)
    p = tl.exp(masked - m)
    o = tl.dot(tl.cast(p, "f16"), v, out_dtype="f32") / tl.sum(p, axis=-1)  # DIV-LINE
    tl.store(o_ptr, tl.cast(o, "f16"))


padded_floor.meshproof_mask = f"padding:{PAD}"  # type: ignore[attr-defined]
