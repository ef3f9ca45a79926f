"""Prefill kernels: each rank owns S_q query rows and one KV slice; the KV slices circulate.

A bidirectional fan-out of the (K, V) slices along a path of ranks: at step s the slice of
the rank at position i reaches positions i ± s, and each rank folds every slice it sees
into its running (m, ℓ, o) with the online-softmax step. Two messages (K, V) per direction
per step, sent before receiving. The path is a line (E/W) for `mesh_kv`, and a snake over
a cube sub-mesh for `mesh_kv_snake` (E along row 0, S at its end, W along row 1, ...),
which keeps every hop between grid neighbours.
"""

from __future__ import annotations

from typing import Any

from meshproof.kernels.attention_parts import (
    Triplet,
    absorb_slice,
    load_kv,
    load_q,
    partial_attention,
    softmax_scale,
    store_output,
)


def _prefill(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv_per_rank: int,
             h_q: int, h_kv: int, d_head: int, n_ranks: int, rank_axis: int, cube_start: int,
             sm_scale: float | None, steps: int, tl: Any, *fold: Any) -> None:
    if rank_axis == 1:
        if tl.program_id(axis=0) != 0:
            return
        rank = tl.program_id(axis=1) - cube_start  # launch-local: program_id is physical
    elif rank_axis == 0:
        rank = tl.program_id(axis=0)
    else:
        raise ValueError(f"rank_axis must be 0 (PEs) or 1 (cubes), got {rank_axis}")
    if not 0 <= rank < n_ranks:
        return
    _attend(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, sm_scale,
            (rank, n_ranks, "E", "W"), steps, tl, *fold)


def _attend(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv_per_rank: int,
            h_q: int, h_kv: int, d_head: int, sm_scale: float | None,
            path: tuple[int, int, str, str], steps: int, tl: Any, *fold: Any) -> None:
    """This rank's Q rows against its own slice, then every slice circulating along the
    path: `(position, length, direction to the next position, to the previous one)`."""
    scale = softmax_scale(d_head, sm_scale)
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv_per_rank, h_kv, d_head, tl)
    state = partial_attention(q, k_t, v, scale, tl, *fold)
    state = _circulate(q, (k_t, v), state, path, steps, scale, tl, *fold)
    _m, ell, o = state
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)


def _circulate(q: Any, own: tuple[Any, Any], state: Triplet, path: tuple[int, int, str, str],
               steps: int, scale: float, tl: Any, *fold: Any) -> Triplet:
    index, count, up, down = path
    k_t, v = own
    has_up, has_down = index < count - 1, index > 0
    to_up: tuple[Any, Any] | None = own
    to_down: tuple[Any, Any] | None = own
    for step in range(1, steps + 1):
        if has_up and to_up is not None:
            tl.send(dir=up, src=to_up[0])
            tl.send(dir=up, src=to_up[1])
        if has_down and to_down is not None:
            tl.send(dir=down, src=to_down[0])
            tl.send(dir=down, src=to_down[1])
        from_down: tuple[Any, Any] | None = None
        from_up: tuple[Any, Any] | None = None
        if index - step >= 0:
            from_down = (tl.recv(dir=down, shape=k_t.shape, dtype="f16"),
                         tl.recv(dir=down, shape=v.shape, dtype="f16"))
            state = absorb_slice(q, from_down[0], from_down[1], state, scale, tl, *fold)
        if index + step < count:
            from_up = (tl.recv(dir=up, shape=k_t.shape, dtype="f16"),
                       tl.recv(dir=up, shape=v.shape, dtype="f16"))
            state = absorb_slice(q, from_up[0], from_up[1], state, scale, tl, *fold)
        to_up, to_down = from_down, from_up
    return state


def mesh_kv(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv_per_rank: int,
            h_q: int, h_kv: int, d_head: int, n_ranks: int, rank_axis: int = 0,
            cube_start: int = 0, sm_scale: float | None = None, p_dtype: str = "f16",
            key_tile: int | None = None, *, tl: Any) -> None:
    """Prefill: each rank's S_q rows attend to every rank's KV slice (slices circulate).

    `p_dtype`, `key_tile`: every fold's P·V weights and key tiles (fold_scores; `*fold`
    above carries them). The defaults, f16 weights and one dot per slice, are the
    validation kernel's; the headline panels (131,072 keys per slice) pass "f32" and 4096,
    which keeps the rounding bound within the default tolerance (spec/semantics.md §8)."""
    _prefill(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, n_ranks,
             rank_axis, cube_start, sm_scale, n_ranks - 1, tl, p_dtype, key_tile)


def mesh_kv_skip_last(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                      S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, n_ranks: int,
                      rank_axis: int = 0, cube_start: int = 0, sm_scale: float | None = None,
                      *, tl: Any) -> None:
    """KNOWN BAD: stops one step early, so the edge ranks never merge the farthest slice."""
    _prefill(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, n_ranks,
             rank_axis, cube_start, sm_scale, n_ranks - 2, tl)  # BUG: off by one


def snake_path(rank: int, rows: int, cols: int) -> tuple[int, int, str, str]:
    """Where row-major cell `rank` of a rows x cols grid sits on the snake: its position,
    the path's length, and the directions to the next and to the previous position. Even
    rows run E, odd rows W; the last cell of each row steps S to the next row."""
    row, col = divmod(rank, cols)
    k = col if row % 2 == 0 else cols - 1 - col       # index along the row, in path order
    along, back = ("E", "W") if row % 2 == 0 else ("W", "E")
    return row * cols + k, rows * cols, along if k < cols - 1 else "S", back if k > 0 else "N"


def mesh_kv_snake(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                  S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, mesh_rows: int,
                  mesh_cols: int, cube_start: int = 0, users: int = 1,
                  sm_scale: float | None = None, p_dtype: str = "f16",
                  key_tile: int | None = None, *, tl: Any) -> None:
    """Prefill over a mesh_rows x mesh_cols cube sub-mesh (a 2x4 KV group): the KV slices
    circulate both ways along a snake (E along row 0, S, W along row 1, ...), every hop
    between grid neighbours, rows*cols - 1 steps. PEs 0..users-1 each serve one user
    (users=1: PE 0 only, as cube_mesh links PE 0 only; more need cube_mesh_all_pes).
    `p_dtype`, `key_tile`: as mesh_kv's."""
    if tl.program_id(axis=0) >= users:
        return
    rank = tl.program_id(axis=1) - cube_start  # launch-local: program_id is physical
    if not 0 <= rank < mesh_rows * mesh_cols:
        return
    _attend(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, sm_scale,
            snake_path(rank, mesh_rows, mesh_cols), mesh_rows * mesh_cols - 1, tl, p_dtype,
            key_tile)
