"""Kernels whose trace could silently differ from what the machine runs (tests/
test_tracer.py). Each is a one-rank or line decode kernel with the signature of
tests/kernels/normalisation_cases.py; the attention body is correct, so a kernel that traces
"as if" the trouble were not there comes out proved.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np

from meshproof.kernels.attention_parts import load_kv, load_q

T = Any


def _attention(q_ptr: Any, k_ptr: Any, v_ptr: Any, S_q: int, S_kv: int, h_q: int,
               h_kv: int, d_head: int, tl: Any) -> tuple[T, T, T]:
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv, h_kv, d_head, tl)
    s = tl.dot(q, k_t, out_dtype="f32") * (1.0 / math.sqrt(d_head))
    m = tl.max(s, axis=-1)
    p = tl.exp(s - m)
    return m, tl.sum(p, axis=-1), tl.dot(p, v, out_dtype="f32")


def _store(o_ptr: Any, out: T, S_q: int, h_q: int, h_kv: int, d_head: int, tl: Any) -> None:
    out = tl.reshape(out, (h_kv, S_q, h_q // h_kv, d_head))
    tl.store(o_ptr, tl.cast(tl.trans(out, (1, 0, 2, 3)), "f16"))


# --- exceptions swallowed ---------------------------------------------------------------


def masked_store_fallback(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                          S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1,
                          d_head: int = 8, *, tl: Any) -> None:
    """MISTAKE: a masked store (mask=False: nothing is written on the machine) wrapped in
    a portability fallback; meshproof refuses mask= and the kernel's `except` stores
    unconditionally instead, so the trace holds a store the machine never does."""
    _, ell, o = _attention(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    out = tl.cast(tl.trans(tl.reshape(o / ell, (h_kv, S_q, h_q // h_kv, d_head)),
                           (1, 0, 2, 3)), "f16")
    try:
        tl.store(o_ptr, out, mask=False)
    except Exception:
        tl.store(o_ptr, out)


def data_branch_swallowed(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                          S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1,
                          d_head: int = 8, *, tl: Any) -> None:
    """MISTAKE: a branch on tensor data inside try/except: meshproof raises
    DataDependentControlFlow, the kernel swallows it and takes the "safe" path, so the
    trace is one path of a data-dependent program."""
    m, ell, o = _attention(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    try:
        skip = bool(m > 100.0)       # on the machine: depends on the scores
    except Exception:
        skip = False
    if skip:
        o = o * 0.0
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def unsupported_op_swallowed(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                             S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1,
                             d_head: int = 8, *, tl: Any) -> None:
    """MISTAKE: the kernel zeroes o where the scores are masked, via tl.where; meshproof
    has no tl.where, the kernel's fallback silently keeps the unmasked o."""
    m, ell, o = _attention(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    with contextlib.suppress(Exception):
        o = tl.where(m > 0.0, o, 0.0)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


# --- numpy and Python builtins on handles ----------------------------------------------


def numpy_sum_of_handle(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                        S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1,
                        d_head: int = 8, *, tl: Any) -> None:
    """MISTAKE: numpy on a handle (np.asarray(m).sum()) as a Python number, used to
    decide whether to store."""
    m, ell, o = _attention(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    total = float(np.asarray(tl.reshape(m, (h_kv * S_q * (h_q // h_kv),))).sum())
    if total < 1e30:
        _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def python_max_of_handles(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                          S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1,
                          d_head: int = 8, *, tl: Any) -> None:
    """MISTAKE: Python's max() of two handles (compares data)."""
    m, ell, o = _attention(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    _ = max(m, m * 2.0)
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def len_of_scalar_handle(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                         S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1,
                         d_head: int = 8, *, tl: Any) -> None:
    """MISTAKE: len() of a 0-d tensor (numpy and Triton raise; a loop over it would run
    zero times)."""
    m, ell, o = _attention(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    one = tl.reshape(tl.max(m, axis=1), ())
    for _ in range(len(one)):
        o = o * 2.0
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def handle_in_list(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                   S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1, d_head: int = 8,
                   *, tl: Any) -> None:
    """CORRECT: a handle kept in a dict and found again (hashing uses the value id)."""
    _m, ell, o = _attention(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    named = {ell: "ell"}
    assert named[ell] == "ell"
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


# --- state shared between ranks ---------------------------------------------------------

_HEAD: list[int] = []


def cached_program_id(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                      S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1,
                      d_head: int = 8, n_ranks: int = 2, *, tl: Any) -> None:
    """MISTAKE: the line's head is cached in a module global on the first call. On the
    machine every PE runs its own copy (each is "first", so each thinks it is the head
    and waits for a message nobody sends); meshproof traces the ranks one after another
    in one interpreter, so only rank 0 is the head and the trace is a correct 2-rank
    reduction."""
    rank = tl.program_id(axis=0)
    if rank >= n_ranks:
        return
    if not _HEAD:
        _HEAD.append(rank)
    st = _attention(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    if rank != _HEAD[0]:
        for x in st:
            tl.send(dir="W", src=x)
        return
    got = tuple(tl.recv(dir="E", shape=x.shape, dtype="f32") for x in st)
    m_new = tl.maximum(st[0], got[0])
    a, b = tl.exp(st[0] - m_new), tl.exp(got[0] - m_new)
    _store(o_ptr, (st[2] * a + got[2] * b) / (st[1] * a + got[1] * b), S_q, h_q, h_kv,
           d_head, tl)


def program_id_2(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                 S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1, d_head: int = 8,
                 *, tl: Any) -> None:
    """MISTAKE: program_id(2) (a third grid axis the machine does not have)."""
    if tl.program_id(2) == 0:
        _m, ell, o = _attention(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head,
                               tl)
        _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def keyword_hint_load(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                      S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1,
                      d_head: int = 8, *, tl: Any) -> None:
    """CORRECT: eviction_policy= and cache_modifier= hints on loads and stores."""
    q = tl.load(q_ptr, shape=(S_q, h_kv, h_q // h_kv, d_head), dtype="f16",
                eviction_policy="evict_last")
    q = tl.reshape(tl.trans(q, (1, 0, 2, 3)), (h_kv, S_q * (h_q // h_kv), d_head))
    k = tl.load(k_ptr, shape=(S_kv_per_rank, h_kv, d_head), dtype="f16", cache_modifier=".cg")
    v = tl.load(v_ptr, shape=(S_kv_per_rank, h_kv, d_head), dtype="f16")
    s = tl.dot(q, tl.trans(k, (1, 2, 0)), out_dtype="f32") * (1.0 / math.sqrt(d_head))
    m = tl.max(s, axis=-1)
    p = tl.exp(s - m)
    o = tl.dot(p, tl.trans(v, (1, 0, 2)), out_dtype="f32") / tl.sum(p, axis=-1)
    out = tl.reshape(o, (h_kv, S_q, h_q // h_kv, d_head))
    tl.store(o_ptr, tl.cast(tl.trans(out, (1, 0, 2, 3)), "f16"), eviction_policy="evict_first")


def negative_step_shape(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                        S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1,
                        d_head: int = 8, *, tl: Any) -> None:
    """MISTAKE: a negative-step slice of a handle (reverse the keys)."""
    _m, ell, o = _attention(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    o = o[..., ::-1]
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def while_on_data(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                  S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1, d_head: int = 8,
                  *, tl: Any) -> None:
    """MISTAKE: a while loop on tensor data."""
    _m, ell, o = _attention(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    while ell > 1.0:
        ell = ell * 0.5
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def range_over_tensor(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                      S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1,
                      d_head: int = 8, *, tl: Any) -> None:
    """MISTAKE: range() over a tensor."""
    m, ell, o = _attention(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    for _ in range(m):
        pass
    _store(o_ptr, o / ell, S_q, h_q, h_kv, d_head, tl)


def float_of_tensor(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                    S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1, d_head: int = 8,
                    *, tl: Any) -> None:
    """MISTAKE: math on float(tensor)."""
    m, ell, o = _attention(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    scale = math.exp(-float(m))
    _store(o_ptr, o / ell * scale, S_q, h_q, h_kv, d_head, tl)


def numpy_ufunc_on_handle(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                          S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1,
                          d_head: int = 8, *, tl: Any) -> None:
    """MISTAKE: np.exp on a handle."""
    _m, ell, o = _attention(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    _store(o_ptr, o / np.exp(np.log(ell)), S_q, h_q, h_kv, d_head, tl)
