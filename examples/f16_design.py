"""Decode attention over a cube sub-mesh in the style of the study's f16 design: scores
q·kᵀ computed and kept in f16, the partial (m, ℓ, o) in f16, and the partials reduced
towards cube 0 along the rows (W), then along column 0 (N).

At |inputs| <= 16 the f16 scores (up to 724, spacing 0.5) tilt the weights by up to
e^±0.25 and the output is off by tens of percent of max|V|: numeric_safety is violated
with a witness. With the merge state and messages in f32 (msg_dtype="f32") and |inputs|
<= 1, the bound is about 6e-3·max|V|: proved at the default tolerance 1e-2 (README,
"Numeric verdicts").
"""

import math


def _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl):
    g = h_q // h_kv
    q = tl.load(q_ptr, shape=(S_q, h_kv, g, d_head), dtype="f16")
    q = tl.reshape(tl.trans(q, (1, 0, 2, 3)), (h_kv, S_q * g, d_head))
    k = tl.load(k_ptr, shape=(S_kv_per_rank, h_kv, d_head), dtype="f16")
    v = tl.load(v_ptr, shape=(S_kv_per_rank, h_kv, d_head), dtype="f16")
    s = tl.dot(q, tl.trans(k, (1, 2, 0))) * (1.0 / math.sqrt(d_head))     # f16 scores
    m = tl.max(s, axis=-1)
    p = tl.exp(s - m)
    return m, tl.sum(p, axis=-1), tl.dot(p, tl.trans(v, (1, 0, 2)))


def _merge(state, direction, msg_dtype, tl):
    m, ell, o = state
    m_in = tl.recv(dir=direction, shape=m.shape, dtype=msg_dtype)
    ell_in = tl.recv(dir=direction, shape=ell.shape, dtype=msg_dtype)
    o_in = tl.recv(dir=direction, shape=o.shape, dtype=msg_dtype)
    m_new = tl.maximum(m, m_in)
    a, b = tl.exp(m - m_new), tl.exp(m_in - m_new)
    return m_new, ell * a + ell_in * b, o * a + o_in * b


def _send(state, direction, msg_dtype, tl):
    for x in state:
        tl.send(dir=direction, src=tl.cast(x, msg_dtype))


def mesh_f16_design(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head,
                    mesh_rows, mesh_cols, cube_start=0, msg_dtype="f16", *, tl):
    if tl.program_id(axis=0) != 0:
        return
    rank = tl.program_id(axis=1) - cube_start
    if not 0 <= rank < mesh_rows * mesh_cols:
        return
    row, col = divmod(rank, mesh_cols)
    state = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, tl)
    if col < mesh_cols - 1:
        state = _merge(state, "E", msg_dtype, tl)
    if col > 0:
        _send(state, "W", msg_dtype, tl)
        return
    if row < mesh_rows - 1:
        state = _merge(state, "S", msg_dtype, tl)
    if row > 0:
        _send(state, "N", msg_dtype, tl)
        return
    _m, ell, o = state
    out = tl.reshape(o / ell, (h_kv, S_q, h_q // h_kv, d_head))
    tl.store(o_ptr, tl.cast(tl.trans(out, (1, 0, 2, 3)), "f16"))
