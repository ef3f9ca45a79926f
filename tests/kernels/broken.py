"""Kernels that meshproof must refuse, each with one clear line naming where and why."""
from __future__ import annotations

from typing import Any


def raises_kernel(x_ptr: Any, *, tl: Any) -> None:
    """Raises on rank 2 only, from a helper in this file."""
    x = tl.load(x_ptr, shape=(4,), dtype="f16")
    _check(tl.program_id(axis=0))
    tl.store(x_ptr, x)


def _check(rank: int) -> None:
    if rank == 2:
        raise ValueError(f"rank {rank} has no KV slice")  # RAISE-LINE


def data_if_kernel(x_ptr: Any, *, tl: Any) -> None:
    """Branches on tensor data."""
    x = tl.load(x_ptr, shape=(1, 4), dtype="f32")
    m = tl.max(x, axis=-1)
    if m:  # DATA-IF-LINE
        tl.send(dir="E", src=m)


def data_compare_kernel(x_ptr: Any, *, tl: Any) -> None:
    """Compares tensor data with a number in a condition."""
    x = tl.load(x_ptr, shape=(4,), dtype="f32")
    while x > 0:  # DATA-COMPARE-LINE
        x = x - 1.0


def data_shape_kernel(x_ptr: Any, *, tl: Any) -> None:
    """Uses a tensor as a shape."""
    n = tl.sum(tl.load(x_ptr, shape=(4,), dtype="f32"), axis=0)
    tl.load(x_ptr, shape=(n,), dtype="f32")  # DATA-SHAPE-LINE


def unsupported_op_kernel(x_ptr: Any, *, tl: Any) -> None:
    """Calls an op meshproof does not model."""
    x = tl.load(x_ptr, shape=(4,), dtype="f32")
    idx = tl.cumsum(x)  # UNSUPPORTED-LINE
    tl.store(x_ptr, x + idx)


def indexing_kernel(x_ptr: Any, *, tl: Any) -> None:
    """Slices a tensor."""
    x = tl.load(x_ptr, shape=(4, 4), dtype="f32")
    tl.store(x_ptr, x[0])  # INDEX-LINE


def bad_shape_kernel(x_ptr: Any, *, tl: Any) -> None:
    """Passes a float dimension."""
    tl.load(x_ptr, shape=(1.5, 4), dtype="f32")  # BAD-SHAPE-LINE


def bad_dtype_kernel(x_ptr: Any, *, tl: Any) -> None:
    """Asks for a dtype meshproof does not model."""
    tl.load(x_ptr, shape=(4,), dtype="f64")  # BAD-DTYPE-LINE


def dot_mismatch_kernel(a_ptr: Any, b_ptr: Any, *, tl: Any) -> None:
    """Inner dimensions differ."""
    a = tl.load(a_ptr, shape=(2, 3), dtype="f16")
    b = tl.load(b_ptr, shape=(4, 5), dtype="f16")
    tl.dot(a, b)  # DOT-MISMATCH-LINE


def negative_offset_kernel(x_ptr: Any, *, tl: Any) -> None:
    """Loads before the start of its buffer."""
    tl.load(x_ptr + (-4), shape=(4,), dtype="f32")  # NEG-OFFSET-LINE


def mutate_handle_kernel(x_ptr: Any, *, tl: Any) -> None:
    """Edits a handle's shape in place instead of building a view."""
    x = tl.load(x_ptr, shape=(2, 4), dtype="f32")
    x.shape = (8,)  # MUTATE-LINE


def multiline_message_kernel(x_ptr: Any, *, tl: Any) -> None:
    """Raises an exception whose message spans lines."""
    raise RuntimeError("first line\nsecond line")  # MULTILINE-LINE


def needs_arg_kernel(x_ptr: Any, width: int, *, tl: Any) -> None:
    """Has a scalar parameter without a default."""
    tl.load(x_ptr, shape=(width,), dtype="f32")


def no_tl_function(x_ptr: Any) -> None:
    """Not a kernel: takes no tl."""


def runaway_kernel(x_ptr: Any, *, tl: Any) -> None:
    """Never stops sending."""
    x = tl.load(x_ptr, shape=(1,), dtype="f32")
    while True:
        tl.send(dir="E", src=x)  # RUNAWAY-LINE
