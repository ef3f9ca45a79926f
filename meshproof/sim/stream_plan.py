"""What `plan_group` (numerics.py) decides once per class of groups, from a rank's ops
alone: which values stay *streamed* (a load of whole rows of a generated K/V buffer, and
its transposes, row-preserving or key-tiling reshapes and casts to f16/f32, which change
no f16 value), how large the arrays the rank makes whole get, and the op after which each value is
dead. Op kinds are looked at here and in the evaluator's dispatch, nowhere else.
"""

from __future__ import annotations

import math

from meshproof.model.schedule import DType, Op, OpKind, ValueRef


def _rows_load(op: Op, row_elements: int) -> bool:
    """A load of whole rows: (rows, ...) with the rest one row's elements."""
    return (len(op.shape) >= 2 and math.prod(op.shape[1:]) == row_elements
            and op.offset % row_elements == 0)


def follow_axis(op: Op, shape: tuple[int, ...], axis: int,
                unit: int = 1) -> tuple[int, int] | None:
    """Where the streamed axis goes through a trans / reshape / cast, and its unit: the
    buffer rows per index along it (None: it cannot follow). A reshape that splits the
    rows into (tiles, key_tile) (a kernel's key tiles) streams along the tile axis, unit
    key_tile, the key_tile axis right after it; the pieces are then whole tiles."""
    if op.kind is OpKind.CAST:  # f16 values stay what they are in f16 and f32
        return (axis, unit) if op.dtype in (DType.F16, DType.F32) else None
    if op.kind is OpKind.TRANS:
        assert op.perm is not None
        perm = tuple(op.perm)
        if unit > 1 and perm.index(axis + 1) != perm.index(axis) + 1:
            return None  # the tile's rows must stay right after the tile axis
        return perm.index(axis), unit
    before = math.prod(shape[:axis])
    out = op.shape
    for j, n in enumerate(out):
        if math.prod(out[:j]) != before:
            continue
        if n == shape[axis] and (unit == 1 or out[j + 1:j + 2] == (unit,)):
            return j, unit
        if unit == 1 and j + 1 < len(out) and n > 1 and n * out[j + 1] == shape[axis]:
            return j, out[j + 1]
    return None


def stream_axes(ops: tuple[Op, ...], generated: frozenset[str],
                 row_elements: int) -> dict[int, int]:
    """Value id -> the axis of the buffer's rows, for every value that stays streamed."""
    stored = {op.ptr for op in ops if op.kind is OpKind.STORE}
    shapes = {op.out: op.shape for op in ops if op.out is not None}
    axes: dict[int, int] = {}
    units: dict[int, int] = {}
    for op in ops:
        if op.out is None:
            continue
        if op.kind is OpKind.LOAD:
            if op.ptr in generated and op.ptr not in stored and \
                    op.dtype is not DType.BF16 and _rows_load(op, row_elements):
                axes[op.out], units[op.out] = 0, 1
        elif op.kind in (OpKind.TRANS, OpKind.RESHAPE, OpKind.CAST):
            src = op.args[0]
            if isinstance(src, ValueRef) and src.id in axes:
                followed = follow_axis(op, shapes[src.id], axes[src.id], units[src.id])
                if followed is not None:
                    axes[op.out], units[op.out] = followed
    return axes


def whole_elements(ops: tuple[Op, ...], axes: dict[int, int], generated: frozenset[str],
                    row_elements: int) -> int:
    """The largest array a rank holds: any non-streamed value, a streamed value some use
    makes whole, or a generated buffer the rank writes to (copied whole first)."""
    sizes = [math.prod(op.shape) for op in ops if op.out is not None and op.out not in axes]
    streamed_sizes = {op.out: math.prod(op.shape) for op in ops if op.out in axes}
    for op in ops:
        args = [a.id for a in op.args if isinstance(a, ValueRef) and a.id in axes]
        if not args:
            continue
        if op.kind in (OpKind.TRANS, OpKind.RESHAPE, OpKind.CAST) and op.out in axes:
            continue
        if op.kind is OpKind.DOT and len(args) == 1 and len(op.shape) >= 2:
            continue  # the run decides the mode; a dot that cannot stream is counted below
        sizes += [streamed_sizes[a] for a in args]
    stored = {op.ptr for op in ops if op.kind is OpKind.STORE and op.ptr in generated}
    sizes += [max((op.offset + math.prod(op.shape) for op in ops
                   if op.kind is OpKind.LOAD and op.ptr == p), default=0) for p in stored]
    return max(sizes, default=0)


def free_points(ops: tuple[Op, ...]) -> tuple[tuple[int, ...], ...]:
    """Per op index: the values whose last use is that op (or that nobody uses)."""
    last: dict[int, int] = {}
    for op in ops:
        if op.out is not None:
            last[op.out] = op.index
        for vid in op.value_args:
            last[vid] = op.index
    frees: list[list[int]] = [[] for _ in ops]
    for vid, index in last.items():
        frees[index].append(vid)
    return tuple(tuple(f) for f in frees)
