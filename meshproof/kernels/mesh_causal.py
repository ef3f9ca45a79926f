"""Causal ring prefill: Q and KV split by sequence over a closed ring, KV circulating E.

Each rank holds query chunks and key chunks of the sequence (positions in chunks of C
rows). A (query chunk a, key chunk c) pair is decided on the host from the chunk indices,
which depend only on program ids: c < a is fully allowed (no mask), c == a is the diagonal
block (masked with `tl.where` on positions: key position <= query position), c > a is
fully masked and skipped. Every rank's first block holds its own diagonal, so every query
row has an allowed key before any block can mask a whole row, and the online-softmax
merges that follow never meet exp(-inf - (-inf)).

- `ring_prefill_causal_naive`: rank i holds chunk i (C = S_q = S_kv_per_rank). Rank i
  computes i + 1 blocks: the last ranks do almost all the work (the causal imbalance).
- `ring_prefill_causal_zigzag`: rank i holds chunks i and 2n-1-i (C = S_q / 2), the
  zigzag layout of ring-flash-attention (`--mask causal@zigzag`): every rank computes
  about the same number of blocks.
- `ring_prefill_causal_striped`: rank i holds positions i, i + n, i + 2n, ... (the
  striped layout of ring-flash-attention's stripe ring and of Striped Attention,
  `--mask causal@striped`): every block is a partial one (key rank <= query rank: key row
  <= query row; key rank > query rank: key row < query row), so every rank computes n
  blocks of the same shape, each masked with `tl.where`.
- `ring_prefill_causal_off_by_one`: KNOWN BAD, the naive ring whose diagonal mask lets
  each query see the key one position ahead (key <= query + 1).

The positions are plain traced tensors (`tl.arange(0, C) + chunk * C`, or
`tl.arange(0, C) * n + rank` striped; spec/tl.md §4). The host decides each block from the
positions a chunk holds (first position, stride): no pair allowed, skipped; every pair,
folded unmasked; else masked.

Numerics at one million tokens (a block of 131,072 x 131,072 per step on the headline
panels): the weights p = exp(s - m) stay f32 for the P·V dot (V is promoted by the dot),
because an f16 p flushes every weight below 2^-24 to 0 -- an error up to n·2^-25·max|V|
over n keys, 0.13 at max|V| = 4 and a million keys -- and a block wider than `key_tile`
keys (default 4096) accumulates ℓ and P·V per key tile, then over the tiles, as
flash-attention's BLOCK_N loop does: the f32 accumulation error then grows with
key_tile + the number of tiles, not with the 131,072 keys of the block (1.6e-2·max|V|
before). numeric_safety is proved there (0.0016·max|V| on one 8-PE ring at |inputs| <= 4;
spec/semantics.md §8).
"""

from __future__ import annotations

from typing import Any

from meshproof.kernels.attention_parts import (
    Triplet,
    fold_scores,
    gqa_group,
    load_kv,
    load_q,
    softmax_scale,
    store_output,
)

Span = tuple[int, int]                # a chunk's positions: (first, stride)
Chunk = tuple[Span, Any, Any]         # (its positions, K^T, V)


def _positions(span: Span, rows: int, tl: Any) -> Any:
    first, stride = span
    x = tl.arange(0, rows)
    return (x * stride if stride != 1 else x) + first


def _masked_scores(scores: Any, q_span: Span, k_span: Span, rows: int, group: int,
                   h_kv: int, lead: int, tl: Any) -> Any:
    """A partial block's scores with the keys after each query set to -inf. `lead`:
    how far past the query's own position a key is allowed (0 for a causal mask)."""
    q_pos = tl.reshape(_positions(q_span, rows, tl), (rows, 1, 1))
    k_pos = _positions(k_span, rows, tl)
    allowed = k_pos <= q_pos + lead if lead else k_pos <= q_pos
    s4 = tl.reshape(scores, (h_kv, rows, group, rows))
    s4 = tl.where(allowed, s4, float("-inf"))
    return tl.reshape(s4, (h_kv, rows * group, rows))


KEY_TILE = 4096   # keys per accumulation tile of a block wider than this (fold_scores)


def _block(q: Any, q_span: Span, kv: Chunk, state: Triplet | None, scale: float,
           shape: tuple[int, int, int], lead: int, tl: Any,
           key_tile: int = KEY_TILE) -> Triplet | None:
    """Fold the (query chunk, key chunk) block into the running (m, l, o); None while no
    block has been folded. A key chunk whose every position is after every query's is
    skipped; one wholly before them all is folded unmasked (the host's causal classes)."""
    k_span, k_t, v = kv
    rows, group, h_kv = shape
    q_last = q_span[0] + q_span[1] * (rows - 1)
    if k_span[0] > q_last:
        return state
    scores = tl.dot(q, k_t, out_dtype="f32") * scale
    if k_span[0] + k_span[1] * (rows - 1) > q_span[0]:
        scores = _masked_scores(scores, q_span, k_span, rows, group, h_kv, lead, tl)
    # p stays f32 for the P·V dot: a million f16 weights would each flush to 0 below 2^-24
    return fold_scores(state, scores, v, tl, p_dtype="f32", key_tile=key_tile)


def _ring(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv_per_rank: int,
          h_q: int, h_kv: int, d_head: int, n_ranks: int, sm_scale: float | None,
          layout: str, lead: int, key_tile: int, tl: Any) -> None:
    if S_q != S_kv_per_rank:
        raise ValueError(f"causal ring prefill needs S_q == S_kv_per_rank (one sequence), "
                         f"got {S_q} and {S_kv_per_rank}")
    rank = tl.program_id(axis=0)
    if not 0 <= rank < n_ranks:
        return
    zigzag = layout == "zigzag"
    parts = 2 if zigzag else 1
    if S_q % parts:
        raise ValueError(f"the zigzag layout splits S_q={S_q} in two chunks: use an even S_q")
    rows = S_q // parts
    group = gqa_group(h_q, h_kv)
    scale = softmax_scale(d_head, sm_scale)

    def chunks_of(r: int) -> list[Span]:
        if layout == "striped":
            return [(r, n_ranks)]
        return [(c * rows, 1) for c in ([r, 2 * n_ranks - 1 - r] if zigzag else [r])]

    mine = chunks_of(rank)
    queries = [load_q(q_ptr + j * rows * h_q * d_head, rows, h_q, h_kv, d_head, tl)
               for j in range(parts)]
    held: list[Chunk] = []
    for j, c in enumerate(mine):
        k_t, v = load_kv(k_ptr + j * rows * h_kv * d_head, v_ptr + j * rows * h_kv * d_head,
                         rows, h_kv, d_head, tl)
        held.append((c, k_t, v))
    shape = (rows, group, h_kv)
    states: list[Triplet | None] = [None] * parts
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
            for kv in held:
                states[j] = _block(queries[j], a, kv, states[j], scale, shape, lead, tl,
                                   key_tile)
    for j, state in enumerate(states):
        assert state is not None   # the diagonal block is always folded
        _m, ell, o = state
        store_output(o_ptr + j * rows * h_q * d_head, o, ell, rows, h_q, h_kv, d_head, tl)


def ring_prefill_causal_naive(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                              S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int,
                              n_ranks: int, sm_scale: float | None = None,
                              key_tile: int = KEY_TILE, *, tl: Any) -> None:
    """Causal prefill over a ring: rank i holds chunk i; KV circulates E, n-1 steps."""
    _ring(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, n_ranks,
          sm_scale, "contiguous", 0, key_tile, tl)


def ring_prefill_causal_zigzag(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                               S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int,
                               n_ranks: int, sm_scale: float | None = None,
                               key_tile: int = KEY_TILE, *, tl: Any) -> None:
    """Causal prefill over a ring, zigzag layout: rank i holds chunks i and 2n-1-i."""
    _ring(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, n_ranks,
          sm_scale, "zigzag", 0, key_tile, tl)


def ring_prefill_causal_striped(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                                S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int,
                                n_ranks: int, sm_scale: float | None = None,
                                key_tile: int = KEY_TILE, *, tl: Any) -> None:
    """Causal prefill over a ring, striped layout: rank i holds positions i + n·x."""
    _ring(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, n_ranks,
          sm_scale, "striped", 0, key_tile, tl)


def ring_prefill_causal_off_by_one(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                                   S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int,
                                   n_ranks: int, sm_scale: float | None = None,
                                   key_tile: int = KEY_TILE, *, tl: Any) -> None:
    """KNOWN BAD: the naive causal ring whose diagonal mask is off by one (key <= q + 1)."""
    _ring(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, n_ranks,
          sm_scale, "contiguous", 1, key_tile, tl)  # BUG: off by one at the diagonal


class _Folder:
    """A cube's queries and running state over a 2D sub-mesh: `fold` takes chunk c's
    slice (skipped when after the query chunk) and keeps it to pass on."""

    def __init__(self, q: Any, mine: Span, shape: tuple[int, int, int], scale: float,
                 own: tuple[Any, Any], tl: Any) -> None:
        self.q, self.mine, self.shape, self.scale, self.tl = q, mine, shape, scale, tl
        self.k_shape, self.v_shape = own[0].shape, own[1].shape
        chunk: Chunk = (mine, own[0], own[1])
        # the diagonal block first: every query row has a key before anything is merged
        self.state = _block(q, mine, chunk, None, scale, shape, 0, tl)
        self.held: list[Chunk] = [chunk]

    def recv(self, d: str, c: int) -> Chunk:
        tl = self.tl
        chunk: Chunk = ((c * self.shape[0], 1), tl.recv(dir=d, shape=self.k_shape, dtype="f16"),
                        tl.recv(dir=d, shape=self.v_shape, dtype="f16"))
        self.held.append(chunk)
        self.state = _block(self.q, self.mine, chunk, self.state, self.scale, self.shape, 0,
                            tl)
        return chunk


def _send(tl: Any, d: str, chunk: Chunk) -> None:
    tl.send(dir=d, src=chunk[1])
    tl.send(dir=d, src=chunk[2])


def _along_row(f: _Folder, rank: int, col: int, cols: int) -> None:
    """The slice of column c reaches columns c ± s at step s (sent before received)."""
    to_e: Chunk | None = f.held[0]
    to_w: Chunk | None = f.held[0]
    for step in range(1, cols):
        if to_e is not None and col < cols - 1:
            _send(f.tl, "E", to_e)
        if to_w is not None and col > 0:
            _send(f.tl, "W", to_w)
        to_e = f.recv("W", rank - step) if col - step >= 0 else None
        to_w = f.recv("E", rank + step) if col + step < cols else None


def _along_column(f: _Folder, row: int, rows: int, cols: int) -> None:
    """A row's slices, in column order, reach rows r ± s at step s, one slice at a time
    (send one, receive one: a queue of depth 2 is enough)."""
    line = sorted(f.held, key=lambda c: c[0][0])
    to_s, to_n = line, line
    for step in range(1, rows):
        got_n: list[Chunk] = []
        got_s: list[Chunk] = []
        for i in range(cols):
            if to_s and row < rows - 1:
                _send(f.tl, "S", to_s[i])
            if to_n and row > 0:
                _send(f.tl, "N", to_n[i])
            if row - step >= 0:
                got_n.append(f.recv("N", (row - step) * cols + i))
            if row + step < rows:
                got_s.append(f.recv("S", (row + step) * cols + i))
        to_s, to_n = got_n, got_s


def mesh_prefill_causal_2d(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                           S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int,
                           mesh_rows: int, mesh_cols: int, cube_start: int = 0,
                           sm_scale: float | None = None, *, tl: Any) -> None:
    """Causal prefill over a mesh_rows x mesh_cols cube sub-mesh (PE 0 of each cube):
    cube r (row-major) holds chunk r of the sequence. The KV slices first fan out both
    ways along each row (every cube then holds its row's slices), then along each column,
    so every cube sees every slice. The own (diagonal) block is folded first; a slice
    after the query chunk is skipped, one before it folded unmasked."""
    if tl.program_id(axis=0) != 0:
        return
    rank = tl.program_id(axis=1) - cube_start  # launch-local: program_id is physical
    if not 0 <= rank < mesh_rows * mesh_cols:
        return
    if S_q != S_kv_per_rank:
        raise ValueError(f"causal prefill needs S_q == S_kv_per_rank (one sequence), got "
                         f"{S_q} and {S_kv_per_rank}")
    row, col = divmod(rank, mesh_cols)
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    own = load_kv(k_ptr, v_ptr, S_kv_per_rank, h_kv, d_head, tl)
    f = _Folder(q, (rank * S_q, 1), (S_q, gqa_group(h_q, h_kv), h_kv),
                softmax_scale(d_head, sm_scale), own, tl)
    _along_row(f, rank, col, mesh_cols)
    _along_column(f, row, mesh_rows, mesh_cols)
    assert f.state is not None   # the diagonal block is always folded
    _m, ell, o = f.state
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)
