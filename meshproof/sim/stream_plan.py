"""What `plan_group` (numerics.py) decides once per class of groups, from a rank's ops
alone: which values stay *streamed* (a load of whole rows of a generated K/V buffer, and
its transposes, row-preserving or key-tiling reshapes and casts to f16/f32, which change
no f16 value), how large the arrays the rank makes whole get, and the op after which each value is
dead, and which elementwise ops may write their result over a dying operand's array.
Op kinds are looked at here and in the evaluator's dispatch, nowhere else.
"""

from __future__ import annotations

import math

from meshproof.model.schedule import (
    COMPARISONS,
    ELEMENTWISE_BINARY,
    ELEMENTWISE_UNARY,
    REDUCTIONS,
    DType,
    Op,
    OpKind,
    ValueRef,
)

# ops whose handler returns a new array that no other value, buffer or message shares
_FRESH = ELEMENTWISE_BINARY | ELEMENTWISE_UNARY | REDUCTIONS | {OpKind.DOT}
# ops that read an operand without keeping it (their result is new, or copied into memory);
# the others (trans, reshape, cast, send) may hand the operand's array on
_READS_ONLY = _FRESH | COMPARISONS | {OpKind.STORE, OpKind.VIEW, OpKind.WHERE}


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


def donors(ops: tuple[Op, ...], streamed: frozenset[int]) -> tuple[int, ...]:
    """Per op: the argument whose array an elementwise op may overwrite with its result
    (-1: none). That operand's array is new (made by an op of `_FRESH`), of the result's
    shape, used for the last time here, and never handed on (every use only reads it), so
    no other value can see the write; the numbers are those of a new array."""
    made = {op.out: op for op in ops if op.out is not None}
    last: dict[int, int] = {}
    shared: set[int] = set()
    for op in ops:
        for vid in op.value_args:
            last[vid] = op.index
            if op.kind not in _READS_ONLY:
                shared.add(vid)
    out = [-1] * len(ops)
    for op in ops:
        if op.kind not in ELEMENTWISE_BINARY | ELEMENTWISE_UNARY or \
                op.kind is OpKind.SIGMOID:        # not a ufunc: no `out=`
            continue
        for j, arg in enumerate(op.args):
            if not isinstance(arg, ValueRef) or arg.id in streamed or arg.id in shared:
                continue
            src = made.get(arg.id)
            if src is not None and src.kind in _FRESH and src.shape == op.shape and \
                    last[arg.id] == op.index:
                out[op.index] = j
                break
    return tuple(out)
