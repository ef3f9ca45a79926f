"""Kernels for the verdicts issue 17 names, each a mistake beside its correct idiom.

All run over a line of PEs (decode, the whole Q per rank, one KV slice per rank):

- `far_reference` (correct in exact arithmetic): a reference point 738 above the max; its
  weights are float64 subnormals, so only a high-precision re-check tells it is attention;
- `floor_zero` (mistake): the reference point maximum(m, 0) -- every weight exp(-724) is 0
  in f32 for |inputs| <= 16, so o / ℓ is 0/0; `floor_guard` (correct): maximum(m, -1e30);
- `own_max_against_peer` (mistake): a rank rescales the partial it receives by its own
  max, not the merged one (positive exp arguments on some ranks only); `peer_max` (correct);
- `store_q`, `store_nan` (mistakes): no K/V is ever loaded;
- `idle_slice` (mistake): the last rank forwards messages but never loads its KV slice;
  `every_slice` (correct): the same line where every rank loads it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from meshproof.kernels.attention_parts import load_kv, load_q

T = Any
State = tuple[T, T, T]


def _scale(d_head: int) -> float:
    return 1.0 / math.sqrt(d_head)


def _partial(q_ptr: Any, k_ptr: Any, v_ptr: Any, S_q: int, S_kv: int, h_q: int, h_kv: int,
             d_head: int, tl: Any, reference: Callable[[T, Any], T] | None = None) -> State:
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = tl.dot(q, k_t, out_dtype="f32") * _scale(d_head)
    m = tl.max(s, axis=-1)
    if reference is not None:
        m = reference(m, tl)
    p = tl.exp(s - m)
    return m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")


def _merge(a: State, b: State, tl: Any) -> State:
    m = tl.maximum(a[0], b[0])
    x, y = tl.exp(a[0] - m), tl.exp(b[0] - m)
    return m, a[1] * x + b[1] * y, a[2] * x + b[2] * y


def _own_max(a: State, b: State, tl: Any) -> State:
    # MISTAKE: the incoming partial is rescaled by this rank's own max, not the merged one
    m = tl.maximum(a[0], b[0])
    x, y = tl.exp(a[0] - m), tl.exp(b[0] - a[0])
    return m, a[1] * x + b[1] * y, a[2] * x + b[2] * y


def _line(state: State, rank: int, n: int, tl: Any,
          merge: Callable[[State, State, Any], State] = _merge) -> State:
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
            got_w = tuple(tl.recv(dir="W", shape=x.shape, dtype="f32") for x in state)  # type: ignore[assignment]
            state = merge(state, got_w, tl)  # type: ignore[arg-type]
        if rank + step < n:
            got_e = tuple(tl.recv(dir="E", shape=x.shape, dtype="f32") for x in state)  # type: ignore[assignment]
            state = merge(state, got_e, tl)  # type: ignore[arg-type]
        to_e, to_w = got_w, got_e
    return state


def _store(o_ptr: Any, out: T, S_q: int, h_q: int, h_kv: int, d_head: int, tl: Any) -> None:
    out = tl.reshape(out, (h_kv, S_q, h_q // h_kv, d_head))
    tl.store(o_ptr, tl.cast(tl.trans(out, (1, 0, 2, 3)), "f16"))


def _kernel(reference: Callable[[T, Any], T] | None = None,
            merge: Callable[[State, State, Any], State] = _merge) -> Callable[..., None]:
    def kernel(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
               S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1, d_head: int = 8,
               n_ranks: int = 4, *, tl: Any) -> None:
        rank = tl.program_id(axis=0)
        if rank >= n_ranks:
            return
        st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl,
                      reference)
        _, ell, o = _line(st, rank, n_ranks, tl, merge)
        _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)
    return kernel


far_reference = _kernel(lambda m, tl: m + 738.0)
floor_zero = _kernel(lambda m, tl: tl.maximum(m, 0.0))
floor_guard = _kernel(lambda m, tl: tl.maximum(m, -1e30))
own_max_against_peer = _kernel(merge=_own_max)
peer_max = _kernel()


def store_q(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
            S_kv_per_rank: int = 16, h_q: int = 1, h_kv: int = 1, d_head: int = 8, *,
            tl: Any) -> None:
    """MISTAKE: stores Q; no rank ever loads K or V."""
    tl.store(o_ptr, tl.load(q_ptr, shape=(S_q, h_q, d_head), dtype="f16"))


def store_nan(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
              S_kv_per_rank: int = 16, h_q: int = 1, h_kv: int = 1, d_head: int = 8, *,
              tl: Any) -> None:
    """MISTAKE: stores a constant nan."""
    tl.store(o_ptr, tl.full((S_q, h_q, d_head), float("nan"), "f16"))


def _slices(skip_last: bool) -> Callable[..., None]:
    def kernel(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
               S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1, d_head: int = 8,
               n_ranks: int = 4, *, tl: Any) -> None:
        rank = tl.program_id(axis=0)
        if rank >= n_ranks:
            return
        if skip_last and rank == n_ranks - 1:
            # MISTAKE: this rank relays an empty partial and never loads its KV slice
            rows = S_q * (h_q // h_kv)
            st: State = (tl.full((h_kv, rows, 1), float("-inf"), "f32"),
                         tl.zeros((h_kv, rows, 1), "f32"), tl.zeros((h_kv, rows, d_head), "f32"))
        else:
            st = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
        _, ell, o = _line(st, rank, n_ranks, tl)
        _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)
    return kernel


idle_slice = _slices(True)
every_slice = _slices(False)
