"""Batch-on-batch variants with one user wrong, to show every user's output is checked."""

from __future__ import annotations

from typing import Any

from meshproof.kernels.attention_parts import store_output
from meshproof.kernels.mesh_mlo import _fanout, _partial


def user_three_skips_the_columns(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                                 S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int,
                                 mesh_rows: int, mesh_cols: int, cube_start: int = 0, *,
                                 tl: Any) -> None:
    """mesh_mlo_2d_batch, except that user 3 (PE 3) forgets the column stage, so its
    outputs hold only its own row's shards."""
    user = tl.program_id(axis=0)
    rank = tl.program_id(axis=1) - cube_start
    if not 0 <= rank < mesh_rows * mesh_cols:
        return
    row, col = divmod(rank, mesh_cols)
    state = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, None, tl)
    state = _fanout(state, col, mesh_cols, "E", "W", tl)
    if user != 3:
        state = _fanout(state, row, mesh_rows, "S", "N", tl)
    _m, ell, o = state
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)
