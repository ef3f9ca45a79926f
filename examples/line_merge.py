"""Decode attention over a line of PEs, the whole kernel in one file (README, "Your own
kernel"). PE i holds all of Q and KV rows [i*S_kv_per_rank, (i+1)*S_kv_per_rank): it
computes its partial (m, ℓ, o), merges into it the partial of the PEs west of it
(received from W) and passes the result east; the last PE divides by ℓ and stores O."""

import math


def line_merge(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, n_ranks,
               *, tl):
    rank = tl.program_id(axis=0)
    if rank >= n_ranks:
        return
    g = h_q // h_kv                                        # q heads per kv head (GQA)
    q = tl.load(q_ptr, shape=(S_q, h_kv, g, d_head), dtype="f16")     # buffers: (S, heads, d)
    q = tl.reshape(tl.trans(q, (1, 0, 2, 3)), (h_kv, S_q * g, d_head))
    k = tl.load(k_ptr, shape=(S_kv_per_rank, h_kv, d_head), dtype="f16")
    v = tl.load(v_ptr, shape=(S_kv_per_rank, h_kv, d_head), dtype="f16")
    s = tl.dot(q, tl.trans(k, (1, 2, 0)), out_dtype="f32") * (1.0 / math.sqrt(d_head))
    m = tl.max(s, axis=-1)                                 # partial (m, ℓ, o) of this slice
    p = tl.exp(s - m)
    ell = tl.sum(p, axis=-1)
    o = tl.dot(tl.cast(p, "f16"), tl.trans(v, (1, 0, 2)), out_dtype="f32")
    if rank > 0:                                           # merge the partial from the west
        m_w = tl.recv(dir="W", shape=m.shape, dtype="f32")
        ell_w = tl.recv(dir="W", shape=ell.shape, dtype="f32")
        o_w = tl.recv(dir="W", shape=o.shape, dtype="f32")
        m_new = tl.maximum(m, m_w)
        a, b = tl.exp(m - m_new), tl.exp(m_w - m_new)
        m, ell, o = m_new, ell * a + ell_w * b, o * a + o_w * b
    if rank < n_ranks - 1:                                 # pass the merged partial east
        for part in (m, ell, o):
            tl.send(dir="E", src=part)
        return
    out = tl.reshape(o / ell, (h_kv, S_q, g, d_head))     # O as (S_q, h_q, d), in f16
    tl.store(o_ptr, tl.cast(tl.trans(out, (1, 0, 2, 3)), "f16"))
