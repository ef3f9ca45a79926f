"""Masked ring prefill kernels generated from a mask, and their mutations (tests of the
masked semantics: tests/test_semantics_masks.py, tests/test_verify_masked_random.py).

`ring_masked` is the causal ring of meshproof/kernels/mesh_causal.py generalised: rank i
holds query and key chunk i (or, with `zigzag`, chunks i and 2n-1-i; with `striped`,
positions i, i+n, i+2n, ...), KV circulates E,
and each (query chunk, key chunk) block is classified on the host from the mask the
kernel believes in (`kind` 0 causal:`param`, 1 window:`param`, 2 padding:`param`):
skipped when no pair is allowed, folded unmasked when every pair is, else masked with
tl.where on positions. Mutations (each a kernel argument):

- `lead`     the kernel's mask is shifted by `lead` (off by one: key <= query + 1);
- `strict`   a strict comparison where the mask is not strict (key < query);
- `nomask`   partial blocks folded unmasked (the mask dropped);
- `swap`     the zigzag chunks swapped (rank i holds 2n-1-i, then i).

On `pe_ring` it runs on 8 PEs (n_ranks 8); with `on_cubes` on a `cube_ring` of n cubes of
one PE each, any n.
"""

from __future__ import annotations

from typing import Any

from meshproof.kernels.attention_parts import (
    gqa_group,
    load_kv,
    load_q,
    softmax_scale,
    store_output,
)


def _allowed(kind: int, param: int, lead: int, strict: int, q: int, k: int) -> bool:
    if kind == 0:
        return k < q + param + lead if strict else k <= q + param + lead
    if kind == 1:
        hi = k < q + lead if strict else k <= q + lead
        return hi and k > q - param + lead
    return k < param + lead - (1 if strict else 0)


def _mask(kind: int, param: int, lead: int, strict: int, q_pos: Any, k_pos: Any) -> Any:
    """The kernel's mask as traced comparisons of positions (MASK-LINE)."""
    if kind == 0:
        return (k_pos < q_pos + (param + lead)) if strict else \
            (k_pos <= q_pos + (param + lead))  # MASK-LINE
    if kind == 1:
        upper = (k_pos < q_pos + lead) if strict else (k_pos <= q_pos + lead)
        return upper * (k_pos > q_pos - (param - lead))
    return k_pos < q_pos * 0 + (param + lead - (1 if strict else 0))


def _arange(rows: int, step: int, tl: Any) -> Any:
    """Positions 0, step, 2·step, ... (no multiply when step is 1)."""
    return tl.arange(0, rows) * step if step != 1 else tl.arange(0, rows)


def _fold(state: Any, scores: Any, v: Any, tl: Any) -> Any:
    # attention_parts.fold_scores written out here: the masked-numeric tests name its exp
    # line in this file
    if state is None:
        m = tl.max(scores, axis=-1)
        p = tl.exp(scores - m)
        return m, tl.sum(p, axis=-1), tl.dot(tl.cast(p, "f16"), v, out_dtype="f32")
    m, ell, o = state
    m_new = tl.maximum(m, tl.max(scores, axis=-1))
    alpha = tl.exp(m - m_new)
    p = tl.exp(scores - m_new)
    return (m_new, ell * alpha + tl.sum(p, axis=-1),
            o * alpha + tl.dot(tl.cast(p, "f16"), v, out_dtype="f32"))


def ring_masked(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, n_ranks: int,
                kind: int = 0, param: int = 0, zigzag: int = 0, lead: int = 0,
                strict: int = 0, nomask: int = 0, swap: int = 0, on_cubes: int = 0,
                striped: int = 0, *, tl: Any) -> None:
    rank = tl.program_id(axis=1 if on_cubes else 0)   # on_cubes: a cube_ring of n cubes
    if not 0 <= rank < n_ranks:
        return
    parts = 2 if zigzag else 1
    rows = S_q // parts
    group = gqa_group(h_q, h_kv)
    scale = softmax_scale(d_head, None)

    def chunks_of(r: int) -> list[int]:
        if not zigzag:
            return [r]
        pair = [r, 2 * n_ranks - 1 - r]
        return pair[::-1] if swap else pair

    def first(c: int) -> int:            # a chunk's first position (then every `stride`)
        return c if striped else c * rows

    stride = n_ranks if striped else 1

    mine = chunks_of(rank)
    queries = [load_q(q_ptr + j * rows * h_q * d_head, rows, h_q, h_kv, d_head, tl)
               for j in range(parts)]
    held = []
    for j, c in enumerate(mine):
        k_t, v = load_kv(k_ptr + j * rows * h_kv * d_head, v_ptr + j * rows * h_kv * d_head,
                         rows, h_kv, d_head, tl)
        held.append((c, k_t, v))
    states: list[Any] = [None] * parts
    for step in range(n_ranks):
        if step:
            for _, k_t, v in held:
                tl.send(dir="E", src=k_t)
                tl.send(dir="E", src=v)
            source = (rank - step) % n_ranks
            held = [(c, tl.recv(dir="W", shape=k_t.shape, dtype="f16"),
                     tl.recv(dir="W", shape=v.shape, dtype="f16"))
                    for c, (_, k_t, v) in zip(chunks_of(source), held, strict=True)]
        for j, a in enumerate(mine):
            for c, k_t, v in held:
                pairs = [_allowed(kind, param, lead, strict, first(a) + stride * x,
                                  first(c) + stride * y)
                         for x in range(rows) for y in range(rows)]
                if not any(pairs):
                    continue
                scores = tl.dot(queries[j], k_t, out_dtype="f32") * scale
                if not all(pairs) and not nomask:
                    q_pos = tl.reshape(_arange(rows, stride, tl) + first(a), (rows, 1, 1))
                    k_pos = _arange(rows, stride, tl) + first(c)
                    s4 = tl.reshape(scores, (h_kv, rows, group, rows))
                    keep = _mask(kind, param, lead, strict, q_pos, k_pos)
                    s4 = tl.where(keep, s4, float("-inf"))  # WHERE-LINE
                    scores = tl.reshape(s4, (h_kv, rows * group, rows))
                states[j] = _fold(states[j], scores, v, tl)  # FOLD-LINE
    for j, state in enumerate(states):
        if state is None:
            continue
        _m, ell, o = state
        store_output(o_ptr + j * rows * h_q * d_head, o, ell, rows, h_q, h_kv, d_head, tl)


def decode_window_chain(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                        S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, n_ranks: int,
                        window: int, *, tl: Any) -> None:
    """Sliding-window decode over a line: rank i holds keys [i·S, (i+1)·S) of the KV cache
    and the S_q queries are the sequence's last positions; only the last `window` keys up to
    each query count (--mask window:W). Ranks whose slice the window never reaches load it
    and stay idle; the others fold their (masked) slice into the partial arriving from W
    and pass it E; the last rank stores o / ℓ."""
    rank = tl.program_id(axis=0)
    if not 0 <= rank < n_ranks:
        return
    n_keys = n_ranks * S_kv_per_rank
    first_q = n_keys - S_q
    group = gqa_group(h_q, h_kv)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv_per_rank, h_kv, d_head, tl)
    lo_key = rank * S_kv_per_rank
    hi_key = lo_key + S_kv_per_rank - 1
    first_seen = first_q - window + 1          # the smallest key any query sees
    start = max(0, first_seen) // S_kv_per_rank
    if rank < start:
        return                                 # every key of this slice is outside
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    scores = tl.dot(q, k_t, out_dtype="f32") * softmax_scale(d_head, None)
    full = lo_key > n_keys - 1 - window and hi_key <= first_q
    if not full:
        q_pos = tl.reshape(tl.arange(0, S_q) + first_q, (S_q, 1, 1))
        k_pos = tl.arange(0, S_kv_per_rank) + lo_key
        keep = (k_pos <= q_pos) * (k_pos > q_pos - window)
        s4 = tl.reshape(scores, (h_kv, S_q, group, S_kv_per_rank))
        s4 = tl.where(keep, s4, float("-inf"))  # WINDOW-LINE
        scores = tl.reshape(s4, (h_kv, S_q * group, S_kv_per_rank))
    state = _fold(None, scores, v, tl)
    if rank > start:
        m_in = tl.recv(dir="W", shape=state[0].shape, dtype="f32")
        l_in = tl.recv(dir="W", shape=state[1].shape, dtype="f32")
        o_in = tl.recv(dir="W", shape=state[2].shape, dtype="f32")
        m, ell, o = state
        m_new = tl.maximum(m, m_in)
        alpha, beta = tl.exp(m - m_new), tl.exp(m_in - m_new)
        state = (m_new, ell * alpha + l_in * beta, o * alpha + o_in * beta)
    if rank < n_ranks - 1:
        for x in state:
            tl.send(dir="E", src=x)
        return
    _m, ell, o = state
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)
