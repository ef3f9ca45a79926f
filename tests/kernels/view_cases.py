"""tl.view (spec/tl.md §4): a pair of PEs swaps m and ℓ whole and o in row chunks (one
view per query head), merges chunk by chunk and stores each head's rows at its offset.

`chunked` is correct. The mistakes keep every op count of the correct kernel: a view at
the wrong offset sends head 0's rows twice (`same_chunk_twice`), or rescales head 1's rows
by head 0's factor (`factor_of_other_row`); meshproof must never call them proved.

Sizes (the defaults; fixed in the body): S_q 1, S_kv_per_rank 16, h_q 2, h_kv 1,
d_head 8 (o is (1, 2, 8): two rows of 8).
"""

from __future__ import annotations

from typing import Any

from meshproof.kernels.attention_parts import load_kv, load_q, partial_attention, softmax_scale

D = 8
ROWS = 2


def _pair(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, tl: Any, sent_row: Any,
          factor_row: Any) -> None:
    pe = tl.program_id(axis=0)
    if pe > 1:
        return
    q = load_q(q_ptr, 1, ROWS, 1, D, tl)
    k_t, v = load_kv(k_ptr, v_ptr, 16, 1, D, tl)
    m, ell, o = partial_attention(q, k_t, v, softmax_scale(D, None), tl)
    d = "E" if pe == 0 else "W"
    tl.send(dir=d, src=m)
    tl.send(dir=d, src=ell)
    for c in range(ROWS):
        tl.send(dir=d, src=tl.view(o, sent_row(c) * D, (1, 1, D)))   # SEND-CHUNK
    m_in = tl.recv(dir=d, shape=m.shape, dtype="f32")
    ell_in = tl.recv(dir=d, shape=ell.shape, dtype="f32")
    m_new = tl.maximum(m, m_in)
    alpha = tl.exp(m - m_new)
    beta = tl.exp(m_in - m_new)
    ell_new = ell * alpha + ell_in * beta
    for c in range(ROWS):
        o_in = tl.recv(dir=d, shape=(1, 1, D), dtype="f32")
        a = tl.view(alpha, factor_row(c), (1, 1, 1))                    # FACTOR-VIEW
        b = tl.view(beta, factor_row(c), (1, 1, 1))
        o_c = tl.view(o, c * D, (1, 1, D)) * a + o_in * b
        out = o_c / tl.view(ell_new, c, (1, 1, 1))
        tl.store(o_ptr + c * D, tl.cast(out, "f16"))


def chunked(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
            S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1, d_head: int = 8, *,
            tl: Any) -> None:
    """The correct chunked swap: head c's rows travel in their own message."""
    _pair(q_ptr, k_ptr, v_ptr, o_ptr, tl, lambda c: c, lambda c: c)


def same_chunk_twice(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                     S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1, d_head: int = 8,
                     *, tl: Any) -> None:
    """Every chunk message is a view at offset 0: head 1 merges head 0's rows."""
    _pair(q_ptr, k_ptr, v_ptr, o_ptr, tl, lambda c: 0, lambda c: c)


def factor_of_other_row(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int = 1,
                        S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1,
                        d_head: int = 8, *, tl: Any) -> None:
    """Head 1's rows are rescaled by head 0's factors."""
    _pair(q_ptr, k_ptr, v_ptr, o_ptr, tl, lambda c: c, lambda c: 0)
