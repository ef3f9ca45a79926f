"""verify/semantics/index.py: digits, affine forms, reshapes, slices and axis unification."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from meshproof.verify.semantics.index import (
    Aff,
    DigitSource,
    Layout,
    flat_slice,
    mixed_radix,
    regroup,
    reshape,
    unify_axis,
)


def _flat_index(layout: Layout, subst: dict[int, Aff], values: dict[int, int]) -> int:
    """Flat position of an element given its new digits, via the old digits' strides."""
    pos = 0
    for d, stride in layout.flat():
        aff = subst.get(d.id, Aff.digit(d.id))
        v = aff.const + sum(c * values[x] for x, c in aff.terms)
        pos += v * stride
    return pos


def _elements(layout: Layout) -> list[dict[int, int]]:
    out: list[dict[int, int]] = [{}]
    for d in layout.digits:
        out = [{**e, d.id: v} for e in out for v in range(d.size)]
    return out


def _new_flat(layout: Layout, values: dict[int, int]) -> int:
    return sum(values[d.id] * s for d, s in layout.flat())


def test_a_reshape_that_splits_and_merges_axes_is_an_exact_substitution() -> None:
    src = DigitSource()
    old = Layout.fresh((16, 1, 8), src)
    out = reshape(old, (8, 16), src)
    assert out is not None
    new, subst = out
    for e in _elements(new):
        assert _flat_index(old, subst, e) == _new_flat(new, e)


def test_a_reshape_whose_axes_do_not_nest_has_no_affine_description() -> None:
    src = DigitSource()
    assert reshape(Layout.fresh((4, 6), src), (6, 4), src) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([1, 2, 3, 4]), min_size=1, max_size=4),
       st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=3))
def test_every_nested_reshape_keeps_the_flat_order(dims: list[int], split: list[int]) -> None:
    src = DigitSource()
    old = Layout.fresh(tuple(dims), src)
    total = old.size()
    # a target shape: peel factors of `split` off the total while they divide it
    shape: list[int] = []
    rest = total
    for f in split:
        if rest % f == 0:
            shape.append(f)
            rest //= f
    shape.append(rest)
    out = regroup(old.flat(), tuple(shape), src)
    if out is None:
        return
    new, subst = out
    for e in _elements(new):
        assert _flat_index(old, subst, e) == _new_flat(new, e)


def test_a_slice_of_whole_rows_is_a_box_with_an_offset_row() -> None:
    src = DigitSource()
    buf = Layout.fresh((64, 2, 8), src)
    box = flat_slice(buf, 16 * 2 * 8, 16 * 2 * 8, src)
    assert box is not None
    row = buf.axes[0][0]
    assert box.subst[row.id].const == 16
    assert [d.size for d, _ in box.flat] == [16, 2, 8]


def test_a_slice_that_straddles_rows_is_not_a_box() -> None:
    src = DigitSource()
    buf = Layout.fresh((4, 8), src)
    assert flat_slice(buf, 4, 8, src) is None


def test_unify_axis_renames_and_splits_to_a_common_refinement() -> None:
    src = DigitSource()
    a = (src.fresh(8),)
    b = (src.fresh(2), src.fresh(4))
    out = unify_axis(a, b, src)
    assert out is not None
    common, sa, sb = out
    assert [d.size for d in common] == [2, 4]
    assert a[0].id in sa and b[0].id in sb and b[1].id in sb


def test_mixed_radix_accepts_a_bijection_and_refuses_strides() -> None:
    sizes = {1: 4, 2: 2}
    assert mixed_radix(Aff.of(0, {1: 1, 2: 4}), sizes, frozenset({1, 2})) == 8
    assert mixed_radix(Aff.of(0, {1: 2}), sizes, frozenset({1})) is None
