"""Decode merges as real systems write them, over a line of PEs (bidirectional fan-out).

Every kernel holds the whole Q and one KV slice per rank and stores the normalised output.
The correct ones must be proved (attention_equivalence and exactly_once_merge); the
mistakes must be violated with a witness:

- `lse_textbook`: (lse, O normalised), ``mx = max; w = exp(lse - mx); O = (O_a w_a + O_b
  w_b) / (w_a + w_b); lse = mx + log(w_a + w_b)``;
- `flashinfer_merge_state`: the same in base 2 (FlashInfer's merge_state: exp2, log2);
- `ringflash_log1p`: ring-flash-attention's update ``new = lse + log(1 + exp(b - lse));
  out = exp(lse - new)·out + exp(b - new)·b_out`` (also with tl.log1p);
- `ringflash_sigmoid`: its sigmoid form ``out - sigmoid(b - lse)·(out - b_out)`` and
  ``lse - logsigmoid(lse - b)``;
- `lerp_merge`: ``o1 + (o2 - o1)·w2 / (w1 + w2)`` with w = ℓ·exp(m_i - m);
- `alpha_beta`: normalised partials weighted by ℓ_i·exp(m_i - m);
- `shifted_normalise`: ``(o + c·ℓ)/ℓ - c`` with a large c; `times_reciprocal`: o·(1/ℓ);
- `tree_attention`: Tree Attention's two all-reduces (the max, then the rescaled sums);
- `gqa_broadcast`: GQA by broadcasting each KV head over its q heads (adding zeros);
- mistakes: `sglang_base2_into_natural` (a base-2 lse merged with natural-log formulas,
  SGLang #40903), `lse_double_weight` (one side weighted twice), `lerp_wrong_weight`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from meshproof.kernels.attention_parts import load_kv, load_q

LOG2E = 1.4426950408889634
T = Any
State = tuple[T, ...]
Merge = Callable[[State, State, Any], State]


def _scale(d_head: int) -> float:
    return 1.0 / math.sqrt(d_head)


def _line(state: State, rank: int, n: int, merge: Merge, tl: Any) -> State:
    """Bidirectional fan-out over a line: every rank merges every partial once."""
    to_e: State | None = state
    to_w: State | None = state
    for step in range(1, n):
        for d, t in (("E", to_e), ("W", to_w)):
            if t is not None and (rank < n - 1 if d == "E" else rank > 0):
                for x in t:
                    tl.send(dir=d, src=x)
        got_w: State | None = None
        got_e: State | None = None
        if rank - step >= 0:
            got_w = tuple(tl.recv(dir="W", shape=x.shape, dtype="f32") for x in state)
            state = merge(state, got_w, tl)
        if rank + step < n:
            got_e = tuple(tl.recv(dir="E", shape=x.shape, dtype="f32") for x in state)
            state = merge(state, got_e, tl)
        to_e, to_w = got_w, got_e
    return state


def _mlo(q_ptr: Any, k_ptr: Any, v_ptr: Any, S_q: int, S_kv: int, h_q: int, h_kv: int,
         d_head: int, tl: Any, base2: bool = False) -> State:
    """The partial (m, ℓ, o) of this rank's slice (m in base 2 when `base2`)."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = tl.dot(q, k_t, out_dtype="f32") * (_scale(d_head) * (LOG2E if base2 else 1.0))
    m = tl.max(s, axis=-1)
    p = tl.exp2(s - m) if base2 else tl.exp(s - m)
    return m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")


def _store(o_ptr: Any, out: T, S_q: int, h_q: int, h_kv: int, d_head: int, tl: Any) -> None:
    out = tl.reshape(out, (h_kv, S_q, h_q // h_kv, d_head))
    tl.store(o_ptr, tl.cast(tl.trans(out, (1, 0, 2, 3)), "f16"))


def _kernel(body: Callable[..., None]) -> Callable[..., None]:
    def kernel(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
               S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1, d_head: int = 8,
               n_ranks: int = 8, rank_axis: int = 0, *, tl: Any) -> None:
        # rank_axis 1: one rank per cube (PE 0), for lines longer than a cube
        if rank_axis == 1 and tl.program_id(axis=0) != 0:
            return
        rank = tl.program_id(axis=rank_axis)
        if rank >= n_ranks:
            return
        body(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, n_ranks,
             rank, tl)
    kernel.__doc__ = body.__doc__
    kernel.__name__ = kernel.__qualname__ = body.__name__.lstrip("_")
    return kernel


Args = tuple[Any, Any, Any, Any, int, int, int, int, int, int, int, Any]


def _lse_kernel(merge: Merge, base2: bool = False, log1p: bool = False
                ) -> Callable[..., None]:
    """(lse, O normalised) partials merged along the line with `merge`."""
    def body(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int, h_q: int,
             h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
        m, ell, o = _mlo(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl, base2)
        lse = m + (tl.log2(ell) if base2 else tl.log(ell))
        lse, out = _line((lse, o / ell), rank, n, merge, tl)
        _store(o_ptr, out, S_q, h_q, h_kv, d_head, tl)
    del log1p
    return body


def _textbook(a: State, b: State, tl: Any) -> State:
    mx = tl.maximum(a[0], b[0])
    w1, w2 = tl.exp(a[0] - mx), tl.exp(b[0] - mx)
    return mx + tl.log(w1 + w2), (a[1] * w1 + b[1] * w2) / (w1 + w2)


def _flashinfer(a: State, b: State, tl: Any) -> State:
    s_max = tl.maximum(a[0], b[0])
    wa, wb = tl.exp2(a[0] - s_max), tl.exp2(b[0] - s_max)
    return s_max + tl.log2(wa + wb), (a[1] * wa + b[1] * wb) / (wa + wb)


def _ringflash_log1p(a: State, b: State, tl: Any) -> State:
    new = a[0] + tl.log(1.0 + tl.exp(b[0] - a[0]))
    return new, tl.exp(a[0] - new) * a[1] + tl.exp(b[0] - new) * b[1]


def _ringflash_log1p_op(a: State, b: State, tl: Any) -> State:
    new = a[0] + tl.log1p(tl.exp(b[0] - a[0]))
    return new, tl.exp(a[0] - new) * a[1] + tl.exp(b[0] - new) * b[1]


def _ringflash_sigmoid(a: State, b: State, tl: Any) -> State:
    out = a[1] - tl.sigmoid(b[0] - a[0]) * (a[1] - b[1])
    return a[0] - tl.log(tl.sigmoid(a[0] - b[0])), out


def _sglang_natural(a: State, b: State, tl: Any) -> State:
    # MISTAKE: the lse is base 2 (FlashInfer's) but the merge uses natural exp and log
    return _textbook(a, b, tl)


def _double_weight(a: State, b: State, tl: Any) -> State:
    # MISTAKE: the incoming side is weighted twice in the numerator and denominator
    mx = tl.maximum(a[0], b[0])
    w1, w2 = tl.exp(a[0] - mx), tl.exp(b[0] - mx) * 2.0
    return mx + tl.log(w1 + w2), (a[1] * w1 + b[1] * w2) / (w1 + w2)


def _sigmoid_pair(a: State, b: State, tl: Any) -> State:
    mx = tl.maximum(a[0], b[0])
    new = mx + tl.log(tl.exp(a[0] - mx) + tl.exp(b[0] - mx))
    return new, a[1] * tl.sigmoid(a[0] - b[0]) + b[1] * tl.sigmoid(b[0] - a[0])


def _sigmoid_pair_f16(a: State, b: State, tl: Any) -> State:
    # MISTAKE (numerics): the lse difference taken in f16, where |lse| ~ 700 has spacing 0.5
    d = tl.cast(a[0], "f16") - tl.cast(b[0], "f16")
    new, _ = _sigmoid_pair(a, b, tl)
    return new, a[1] * tl.sigmoid(d) + b[1] * tl.sigmoid(-d)


sigmoid_pair = _kernel(_lse_kernel(_sigmoid_pair))
sigmoid_pair_f16 = _kernel(_lse_kernel(_sigmoid_pair_f16))
sigmoid_pair.__doc__ = "CORRECT: each side weighted by sigmoid(lse_self - lse_other)."
sigmoid_pair_f16.__doc__ = "MISTAKE (numerics): the lse difference taken in f16."

lse_textbook = _kernel(_lse_kernel(_textbook))
flashinfer_merge_state = _kernel(_lse_kernel(_flashinfer, base2=True))
ringflash_log1p = _kernel(_lse_kernel(_ringflash_log1p))
ringflash_log1p_op = _kernel(_lse_kernel(_ringflash_log1p_op))
ringflash_sigmoid = _kernel(_lse_kernel(_ringflash_sigmoid))
sglang_base2_into_natural = _kernel(_lse_kernel(_sglang_natural, base2=True))
lse_double_weight = _kernel(_lse_kernel(_double_weight))
for _k, _doc in ((lse_textbook, "CORRECT: the textbook log-sum-exp merge."),
                 (flashinfer_merge_state, "CORRECT: FlashInfer's merge_state (base 2)."),
                 (ringflash_log1p, "CORRECT: ring-flash-attention's log(1 + exp) update."),
                 (ringflash_log1p_op, "CORRECT: the same update with tl.log1p."),
                 (ringflash_sigmoid, "CORRECT: ring-flash-attention's sigmoid update."),
                 (sglang_base2_into_natural, "MISTAKE: a base-2 lse merged with natural-log "
                  "formulas (SGLang #40903)."),
                 (lse_double_weight, "MISTAKE: the incoming partial weighted twice.")):
    _k.__doc__ = _doc


def _lerp(wrong: bool) -> Merge:
    def merge(a: State, b: State, tl: Any) -> State:
        m = tl.maximum(a[0], b[0])
        w1, w2 = a[1] * tl.exp(a[0] - m), b[1] * tl.exp(b[0] - m)
        share = w2 / (w1 + w1) if wrong else w2 / (w1 + w2)
        return m, w1 + w2, a[2] + (b[2] - a[2]) * share
    return merge


def _alpha_beta(a: State, b: State, tl: Any) -> State:
    m = tl.maximum(a[0], b[0])
    alpha, beta = a[1] * tl.exp(a[0] - m), b[1] * tl.exp(b[0] - m)
    return m, alpha + beta, (a[2] * alpha + b[2] * beta) / (alpha + beta)


def _normalised_kernel(merge: Merge) -> Callable[..., None]:
    """(m, ℓ, O normalised) partials merged along the line with `merge`."""
    def body(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int, h_q: int,
             h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
        m, ell, o = _mlo(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
        _, _, out = _line((m, ell, o / ell), rank, n, merge, tl)
        _store(o_ptr, out, S_q, h_q, h_kv, d_head, tl)
    return body


lerp_merge = _kernel(_normalised_kernel(_lerp(False)))
lerp_wrong_weight = _kernel(_normalised_kernel(_lerp(True)))
alpha_beta = _kernel(_normalised_kernel(_alpha_beta))
lerp_merge.__doc__ = "CORRECT: the lerp merge o1 + (o2 - o1)·w2/(w1 + w2)."
lerp_wrong_weight.__doc__ = "MISTAKE: the lerp share divides by w1 + w1."
alpha_beta.__doc__ = "CORRECT: normalised partials weighted by ℓ_i·exp(m_i - m)."


def _mlo_merge(a: State, b: State, tl: Any) -> State:
    m = tl.maximum(a[0], b[0])
    x, y = tl.exp(a[0] - m), tl.exp(b[0] - m)
    return m, a[1] * x + b[1] * y, a[2] * x + b[2] * y


def _finish_kernel(finish: Callable[[T, T, Any], T]) -> Callable[..., None]:
    def body(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int, h_q: int,
             h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
        st = _mlo(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
        _, ell, o = _line(st, rank, n, _mlo_merge, tl)
        _store(o_ptr, finish(o, ell, tl), S_q, h_q, h_kv, d_head, tl)
    return body


shifted_normalise = _kernel(_finish_kernel(lambda o, ell, tl: (o + 1e12 * ell) / ell - 1e12))
times_reciprocal = _kernel(_finish_kernel(lambda o, ell, tl: o * (1.0 / ell)))
shifted_normalise.__doc__ = "CORRECT in exact arithmetic: (o + c·ℓ)/ℓ - c, c = 1e12."
times_reciprocal.__doc__ = "CORRECT: o · (1/ℓ)."


def _sum_merge(a: State, b: State, tl: Any) -> State:
    return tuple(x + y for x, y in zip(a, b, strict=True))


def _max_merge(a: State, b: State, tl: Any) -> State:
    return (tl.maximum(a[0], b[0]),)


def _tree(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int, h_q: int,
          h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """CORRECT: Tree Attention: all-reduce the max, then the rescaled (ℓ, o) by sums."""
    m, ell, o = _mlo(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, tl)
    (big,) = _line((m,), rank, n, _max_merge, tl)
    w = tl.exp(m - big)
    ell, o = _line((ell * w, o * w), rank, n, _sum_merge, tl)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


tree_attention = _kernel(_tree)


def _gqa(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv: int, h_q: int,
         h_kv: int, d_head: int, n: int, rank: int, tl: Any) -> None:
    """CORRECT: GQA by broadcasting each KV head over its q heads (adding zeros), then one
    dot per q head."""
    g = h_q // h_kv
    q = tl.trans(tl.load(q_ptr, shape=(S_q, h_q, d_head), dtype="f16"), (1, 0, 2))
    k = tl.load(k_ptr, shape=(S_kv, h_kv, 1, d_head), dtype="f16") + \
        tl.zeros((1, 1, g, d_head), "f16")
    v = tl.load(v_ptr, shape=(S_kv, h_kv, 1, d_head), dtype="f16") + \
        tl.zeros((1, 1, g, d_head), "f16")
    k_t = tl.trans(tl.reshape(k, (S_kv, h_q, d_head)), (1, 2, 0))     # (h_q, d, S_kv)
    v_h = tl.trans(tl.reshape(v, (S_kv, h_q, d_head)), (1, 0, 2))     # (h_q, S_kv, d)
    s = tl.dot(q, k_t, out_dtype="f32") * _scale(d_head)               # (h_q, S_q, S_kv)
    m = tl.max(s, axis=-1)
    p = tl.exp(s - m)
    _, ell, o = _line((m, tl.sum(p, axis=-1), tl.dot(p, v_h, out_dtype="f32")), rank, n,
                      _mlo_merge, tl)
    out = tl.trans(o / ell, (1, 0, 2))                                 # (S_q, h_q, d)
    tl.store(o_ptr, tl.cast(out, "f16"))


gqa_broadcast = _kernel(_gqa)

CORRECT: Sequence[str] = ("lse_textbook", "flashinfer_merge_state", "ringflash_log1p",
                          "ringflash_log1p_op", "ringflash_sigmoid", "lerp_merge",
                          "alpha_beta", "shifted_normalise", "times_reciprocal",
                          "tree_attention", "gqa_broadcast")
MISTAKES: Sequence[str] = ("sglang_base2_into_natural", "lse_double_weight",
                           "lerp_wrong_weight")
