"""Kernels that look at their placement in ways a relocatable trace must notice.

Each wraps the correct 2D kernel (mesh_mlo_2d), so the truth at every cube_start is what
a normal trace there says; `meshproof placements` must report exactly that.
"""

from __future__ import annotations

from typing import Any

from meshproof.kernels.mesh_mlo import mesh_mlo_2d


def special_at_eight(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                     S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, mesh_rows: int,
                     mesh_cols: int, cube_start: int = 0, *, tl: Any) -> None:
    """Correct, except at cube_start 8, where it counts ranks from cube 4 (so ranks 4..7
    sit in row 1 and send N out of the launch)."""
    start = cube_start - 4 if cube_start == 8 else cube_start
    mesh_mlo_2d(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, mesh_rows,
                mesh_cols, cube_start=start, tl=tl)


def swallows_the_signal(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                        S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, mesh_rows: int,
                        mesh_cols: int, cube_start: int = 0, *, tl: Any) -> None:
    """special_at_eight behind a bare except that swallows everything."""
    start = cube_start
    try:
        if cube_start == 8:
            start = cube_start - 4
    except BaseException:
        pass
    mesh_mlo_2d(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, mesh_rows,
                mesh_cols, cube_start=start, tl=tl)


def int_of_program_id(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                      S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, mesh_rows: int,
                      mesh_cols: int, cube_start: int = 0, *, tl: Any) -> None:
    """Correct, but reads the cube id with int(): every placement is traced."""
    if int(tl.program_id(axis=1)) < 0:
        return
    mesh_mlo_2d(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, mesh_rows,
                mesh_cols, cube_start=cube_start, tl=tl)


def tells_types_apart(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                      S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, mesh_rows: int,
                      mesh_cols: int, cube_start: int = 0, *, tl: Any) -> None:
    """Runs nothing unless program_id(1) is an int: a relocatable trace would be empty."""
    if type(tl.program_id(axis=1)) is not int:
        return
    mesh_mlo_2d(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, mesh_rows,
                mesh_cols, cube_start=cube_start, tl=tl)


class _Exp2:
    """`tl` with exp replaced by exp2 (the log2(e) factor forgotten)."""

    def __init__(self, tl: Any) -> None:
        self._tl = tl

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tl, "exp2" if name == "exp" else name)


def exp2_at_four(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                 S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, mesh_rows: int,
                 mesh_cols: int, cube_start: int = 0, *, tl: Any) -> None:
    """Correct, except at cube_start 4, where its exp is exp2 (a fast path taken on one
    placement): the same messages over the same links, another softmax."""
    mesh_mlo_2d(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, mesh_rows,
                mesh_cols, cube_start=cube_start, tl=_Exp2(tl) if cube_start == 4 else tl)
