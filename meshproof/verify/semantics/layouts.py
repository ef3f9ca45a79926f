"""Layout operations on symbolic values: broadcasting, contraction, buffers and views.

A `Value` is a layout (the digits of each axis) and one element form over those digits.
These helpers line up the digits of two operands (renaming and splitting digits so that
both index the same elements the same way) and read buffers through offsets and views.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from meshproof.verify.semantics.index import (
    Aff,
    Digit,
    DigitSource,
    Layout,
    Subst,
    flat_slice,
    fresh_copy,
    regroup,
    unify_axis,
)
from meshproof.verify.semantics.rat import Rat
from meshproof.verify.semantics.reasons import NotModelled


@dataclass(frozen=True, slots=True)
class Value:
    layout: Layout
    form: Rat

    def subst(self, s: Subst) -> Value:
        return Value(self.layout, self.form.subst(s)) if s else self


def _aligned(layout: Layout, ndim: int) -> dict[int, tuple[int, tuple[Digit, ...]]]:
    pad = ndim - len(layout.axes)
    return {d.id: (pad + i, axis) for i, axis in enumerate(layout.axes) for d in axis}


def _consistent(a: Layout, b: Layout) -> bool:
    shared = a.digit_ids & b.digit_ids
    if not shared:
        return True
    n = max(len(a.axes), len(b.axes))
    pa, pb = _aligned(a, n), _aligned(b, n)
    return all(pa[d] == pb[d] for d in shared)


def separate(a: Layout, b: Value, src: DigitSource, *, always: bool = False) -> Value:
    """`b` with fresh digits if it shares digits with `a` in a way that does not line up."""
    if not (a.digit_ids & b.layout.digit_ids) or (not always and _consistent(a, b.layout)):
        return b
    layout, s = fresh_copy(b.layout, src)
    return Value(layout, b.form.subst(s))


def broadcast(a: Layout, b: Layout, src: DigitSource) -> tuple[Layout, Subst, Subst]:
    """The layout of an elementwise result, and substitutions for both operands."""
    n = max(len(a.axes), len(b.axes))
    axes_a = ((),) * (n - len(a.axes)) + a.axes
    axes_b = ((),) * (n - len(b.axes)) + b.axes
    shape_a = (1,) * (n - len(a.shape)) + a.shape
    shape_b = (1,) * (n - len(b.shape)) + b.shape
    sa: Subst = {}
    sb: Subst = {}
    axes: list[tuple[Digit, ...]] = []
    shape: list[int] = []
    for da, db, na, nb in zip(axes_a, axes_b, shape_a, shape_b, strict=True):
        if na == 1:
            axes.append(db)
            shape.append(nb)
        elif nb == 1 or da == db:
            axes.append(da)
            shape.append(na)
        else:
            unified = unify_axis(da, db, src)
            if unified is None:
                raise NotModelled(f"combines two operands whose axis of size {na} is split "
                                  "into factors in incompatible ways (a reshape that mixes "
                                  "indices)")
            common, ua, ub = unified
            sa.update(ua)
            sb.update(ub)
            axes.append(common)
            shape.append(na)
    return Layout(tuple(axes), tuple(shape)), sa, sb


def view(value: Value, shape: tuple[int, ...], src: DigitSource) -> Value:
    """A reshape: the same elements in flat order, read with another shape."""
    out = regroup(value.layout.flat(), shape, src)
    if out is None:
        raise NotModelled(f"reshapes {value.layout.shape} to {shape}, which mixes indices "
                          "(its axes do not split or merge the old ones)")
    layout, s = out
    return Value(layout, value.form.subst(s))


def read(value: Value, offset: int, shape: tuple[int, ...], src: DigitSource) -> Value:
    """Elements [offset, offset + prod(shape)) of `value` in flat order, as `shape`."""
    count = 1
    for n in shape:
        count *= n
    total = value.layout.size()
    if offset + count > total:
        raise NotModelled(f"reads elements {offset}..{offset + count - 1}, beyond the "
                          f"{total} the buffer holds")
    if count == total and offset == 0:
        return view(value, shape, src)
    box = flat_slice(value.layout, offset, count, src)
    if box is None:
        raise NotModelled(f"reads {count} elements at offset {offset}, which straddle the "
                          "buffer's rows (not a box of whole rows, heads or features)")
    out = regroup(box.flat, shape, src)
    if out is None:
        raise NotModelled(f"reads {count} elements at offset {offset} as {shape}, which mixes "
                          "indices")
    layout, s = out
    return Value(layout, value.form.subst(box.subst).subst(s))


def buffer(shape: tuple[int, ...], make: object, src: DigitSource,
           positions: Sequence[int] | None = None) -> Value:
    """A harness buffer of `shape`: `make(coords)` gives the element form at the affine
    coordinates of the fresh digits. With `positions` (one per row of axis 0), the row
    coordinate is the row's sequence position: contiguous, or two contiguous halves (the
    zigzag layout: the row axis is the digits (half, row) and the position
    ``p0 + row + half·jump``); anything else is outside the algebra."""
    layout = Layout.fresh(shape, src)
    coords = [Aff.digit(axis[0].id) if axis else Aff(0) for axis in layout.axes]
    if positions is not None:
        layout, coords[0] = _position_rows(layout, list(positions), src)
    assert callable(make)
    return Value(layout, make(tuple(coords)))


def _position_rows(layout: Layout, pos: list[int], src: DigitSource) -> tuple[Layout, Aff]:
    n = len(pos)
    if all(p - pos[0] == i for i, p in enumerate(pos)):
        row = layout.axes[0][0] if layout.axes[0] else None
        return layout, Aff(pos[0], ((row.id, 1),) if row is not None else ())
    h = n // 2
    if n % 2 or not all(pos[i] - pos[0] == i and pos[h + i] - pos[h] == i for i in range(h)):
        raise NotModelled("reads rows whose sequence positions are neither contiguous nor "
                          "two contiguous halves")
    half = src.fresh(2)
    inner = (src.fresh(h),) if h > 1 else ()
    axes = ((half, *inner), *layout.axes[1:])
    terms = [(half.id, pos[h] - pos[0])] + [(d.id, 1) for d in inner]
    return Layout(axes, layout.shape), Aff.of(pos[0], dict(terms))
