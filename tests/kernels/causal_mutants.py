"""Mutations of the causal ring prefill (meshproof/kernels/mesh_causal.py) as kernel
authors make them, each marked on the line it touches (tests/test_kernels_causal.py checks
that the verifier's violation names that line; the markers are comments in capitals):

- `ring_causal_swapped_comparison`: the diagonal mask written `q_pos <= k_pos` (the
  comparison's operands swapped: each query sees the keys after it) -- its where and
  compare lines;
- `ring_causal_dropped_mask`: the diagonal block folded without its `tl.where` (its
  scores unmasked) -- its dot line;
- `ring_causal_swapped_zigzag`: zigzag chunks held in the wrong order (rank i's first
  rows are chunk 2n-1-i, not i), so the host classifies blocks by the wrong chunk: the
  unmasked scores of a block it folds as fully allowed hold keys after the query --
  the dot line.

- `ring_causal_strided_v_tiles`: the blocks accumulated per key tile of 4 keys
  (fold_scores' key_tile) with p's tiles contiguous but V split into strided tiles (V's
  reshape names the tile digit inner): each tile's weights meet other keys' values -- its
  dot line.

Run on the 8-PE ring with the causal mask (`@zigzag` for the zigzag one).

`ring_causal_or_masks` writes the diagonal mask with `!=` or as an "or" (a sum of
comparisons), `style`:

- 1 `(k < q) + (k == q)`: a disjoint "or", proved;
- 2 `(k <= q + 1) * (k != q + 1)`: `!=` inside a conjunction, proved;
- 3 `tl.where((k > q) + (k < q - 100), -inf, s)`: hides an "or" whose negation is one
  conjunction (k <= q and k >= q - 100), proved;
- 4 `(k <= q) + (k == q)`: an "or" that overlaps on the diagonal (the sum is 2 there):
  unknown, with the reason;
- 5 `tl.where(k != q + 1 ..., s, -inf)` under a causal declaration: a penalty outside an
  "or" (not one conjunction): unknown, with the reason;
- 6 `(k < q) + (k == q + 1)` (BUG: the "or" keeps the key after the query, not the
  query's own): violated at that tl.where.
"""

from __future__ import annotations

from typing import Any

from meshproof.kernels.attention_parts import (
    fold_scores,
    gqa_group,
    load_kv,
    load_q,
    softmax_scale,
    store_output,
)


def _keep(q_pos: Any, k_pos: Any, swapped: bool) -> Any:
    if swapped:
        return q_pos <= k_pos  # COMPARE-LINE
    return k_pos <= q_pos


def _or_masked(s4: Any, q_pos: Any, k_pos: Any, style: int, tl: Any) -> Any:
    """The diagonal block's scores under a mask written with != or as an "or"."""
    ninf = float("-inf")
    if style == 1:
        return tl.where((k_pos < q_pos) + (k_pos == q_pos), s4, ninf)
    if style == 2:
        return tl.where((k_pos <= q_pos + 1) * (k_pos != q_pos + 1), s4, ninf)
    if style == 3:
        return tl.where((k_pos > q_pos) + (k_pos < q_pos - 100), ninf, s4)
    if style == 4:
        return tl.where((k_pos <= q_pos) + (k_pos == q_pos), s4, ninf)
    if style == 5:
        return tl.where(k_pos != q_pos + 1, s4, ninf)
    return tl.where((k_pos < q_pos) + (k_pos == q_pos + 1), s4, ninf)  # OR-LINE


def _strided_v_tiles(state: Any, scores: Any, v: Any, tl: Any) -> Any:
    """fold_scores with key_tile 4, V's tiles strided (BUG): keys t + 2·i, not 4·t + i."""
    h, rows, n = scores.shape
    tiles = n // 4
    if state is None:
        m_new = tl.max(scores, axis=-1)
    else:
        m, ell, o = state
        m_new = tl.maximum(m, tl.max(scores, axis=-1))
    p = tl.exp(scores - m_new)
    p4 = tl.reshape(p, (h, rows, tiles, 4))
    part_l = tl.reshape(tl.sum(tl.sum(p4, axis=-1), axis=-2), (h, rows, 1))
    vt = tl.trans(tl.reshape(v, (h, 4, tiles, v.shape[-1])), (0, 2, 1, 3))  # V-TILES (strided)
    pv = tl.dot(tl.trans(p4, (0, 2, 1, 3)), vt, out_dtype="f32")  # P·V over the tiles
    part_o = tl.reshape(tl.sum(pv, axis=1), (h, rows, v.shape[-1]))
    if state is None:
        return m_new, part_l, part_o
    alpha = tl.exp(m - m_new)
    return m_new, ell * alpha + part_l, o * alpha + part_o


def _ring(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, h_q: int, h_kv: int,
          d_head: int, n_ranks: int, mutation: str, tl: Any, style: int = 0) -> None:
    rank = tl.program_id(axis=0)
    if not 0 <= rank < n_ranks:
        return
    zigzag = mutation == "swapped_zigzag"
    parts = 2 if zigzag else 1
    rows = S_q // parts
    group = gqa_group(h_q, h_kv)
    scale = softmax_scale(d_head, None)

    def chunks_of(r: int) -> list[int]:
        return [2 * n_ranks - 1 - r, r] if zigzag else [r]   # BUG when zigzag: swapped

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
                if c > a:
                    continue
                scores = tl.dot(queries[j], k_t, out_dtype="f32") * scale  # DOT-LINE
                if c == a and mutation != "dropped_mask":
                    q_pos = tl.reshape(tl.arange(0, rows) + a * rows, (rows, 1, 1))
                    k_pos = tl.arange(0, rows) + c * rows
                    s4 = tl.reshape(scores, (h_kv, rows, group, rows))
                    if style:
                        s4 = _or_masked(s4, q_pos, k_pos, style, tl)
                    else:
                        keep = _keep(q_pos, k_pos, mutation == "swapped_comparison")
                        s4 = tl.where(keep, s4, float("-inf"))  # WHERE-LINE
                    scores = tl.reshape(s4, (h_kv, rows * group, rows))
                if mutation == "strided_v_tiles":
                    states[j] = _strided_v_tiles(states[j], scores, v, tl)
                else:
                    states[j] = fold_scores(states[j], scores, v, tl)
    for j, state in enumerate(states):
        _m, ell, o = state
        store_output(o_ptr + j * rows * h_q * d_head, o, ell, rows, h_q, h_kv, d_head, tl)


def ring_causal_swapped_comparison(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any,
                                   S_q: int, S_kv_per_rank: int, h_q: int, h_kv: int,
                                   d_head: int, n_ranks: int, *, tl: Any) -> None:
    _ring(q_ptr, k_ptr, v_ptr, o_ptr, S_q, h_q, h_kv, d_head, n_ranks, "swapped_comparison",
          tl)


def ring_causal_dropped_mask(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                             S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int,
                             n_ranks: int, *, tl: Any) -> None:
    _ring(q_ptr, k_ptr, v_ptr, o_ptr, S_q, h_q, h_kv, d_head, n_ranks, "dropped_mask", tl)


def ring_causal_swapped_zigzag(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                               S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int,
                               n_ranks: int, *, tl: Any) -> None:
    _ring(q_ptr, k_ptr, v_ptr, o_ptr, S_q, h_q, h_kv, d_head, n_ranks, "swapped_zigzag", tl)


def ring_causal_strided_v_tiles(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                                S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int,
                                n_ranks: int, *, tl: Any) -> None:
    _ring(q_ptr, k_ptr, v_ptr, o_ptr, S_q, h_q, h_kv, d_head, n_ranks, "strided_v_tiles", tl)


def ring_causal_correct(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                        S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, n_ranks: int,
                        *, tl: Any) -> None:
    """The unmutated ring (the mutants' control)."""
    _ring(q_ptr, k_ptr, v_ptr, o_ptr, S_q, h_q, h_kv, d_head, n_ranks, "", tl)


def ring_causal_or_masks(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                         S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, n_ranks: int,
                         style: int = 1, *, tl: Any) -> None:
    """The ring with its diagonal mask written with != or as an "or" (see the top)."""
    _ring(q_ptr, k_ptr, v_ptr, o_ptr, S_q, h_q, h_kv, d_head, n_ranks, "", tl, style)
