"""Small kernels that expose tracer semantics in the schedule they produce."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Tile:
    """Kernel files may define dataclasses (the module is registered while it loads)."""

    rows: int
    cols: int


def program_ids_kernel(x_ptr: Any, *, tl: Any) -> None:
    """Records program_id / num_programs as load offsets so tests can read them back."""
    tl.load(x_ptr + tl.program_id(axis=0), shape=(1,), dtype="f32")
    tl.load(x_ptr + tl.program_id(axis=1), shape=(1,), dtype="f32")
    tl.load(x_ptr + tl.num_programs(axis=0), shape=(1,), dtype="f32")
    tl.load(x_ptr + tl.num_programs(axis=1), shape=(1,), dtype="f32")


def launch_args_kernel(x_ptr: Any, n_ranks: int, cube_start: int = 0, mesh_rows: int = 0,
                       mesh_cols: int = 0, rank_axis: int = 0, *, tl: Any) -> None:
    """Records the launch-filled arguments as load offsets (each + 1, offsets >= 0)."""
    if tl.program_id(axis=0) != 0:
        return
    for value in (n_ranks, cube_start, mesh_rows, mesh_cols):
        tl.load(x_ptr + (value + 1), shape=(1,), dtype="f32")


def helper_lines_kernel(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Ops in a helper of this file are attributed to the helper's own lines."""
    x = tl.load(x_ptr, shape=(2, 4), dtype="f16")  # HELPER-CALLER-LOAD
    y = _double(x, tl)  # HELPER-CALL
    tl.store(o_ptr, y)  # HELPER-CALLER-STORE


def _double(x: Any, tl: Any) -> Any:
    return x * 2.0  # HELPER-BODY


def dataclass_kernel(x_ptr: Any, *, tl: Any) -> None:
    tile = Tile(2, 4)
    tl.load(x_ptr, shape=(tile.rows, tile.cols), dtype="f32")


def pointer_offsets_kernel(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """`ptr + k` and `k + ptr` address element k of the buffer."""
    a = tl.load(x_ptr + 8, shape=(2, 4), dtype="f16")
    b = tl.load(16 + x_ptr, shape=(2, 4), dtype="f16")
    c = tl.load((x_ptr + 4) + 4, shape=(2, 4), dtype="f16")
    tl.store(o_ptr + 3, a + b + c)


def scale_kernel(x_ptr: Any, o_ptr: Any, d_head: int, *, tl: Any) -> None:
    """Python and numpy scalars as operands; -inf fills serialise."""
    import numpy as np

    x = tl.load(x_ptr, shape=(2, 4), dtype="f16")
    y = x * (1.0 / math.sqrt(d_head))
    z = np.float32(2.0) * y
    m = tl.full((2, 1), float("-inf"), dtype="f32")
    tl.store(o_ptr, tl.maximum(z, m))
