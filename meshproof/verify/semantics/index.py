"""Index algebra: digits, affine index forms and mixed-radix layouts.

A tensor of shape (n0, ..., nk) is described by *digits*: symbolic index variables with a
size. Each axis is a mixed-radix number of its digits (outer digit first), so element
``[a0, ..., ak]`` fixes every digit. Coordinates into the attention inputs (a key row, a
head, a feature) are affine forms over digits. Reshapes and buffer slices that split or
merge axes are exact substitutions of digits by affine forms of finer digits; a reshape
whose axis boundaries do not nest (e.g. (4, 6) -> (6, 4)) has no such description and is
refused (the caller makes the value opaque, with the op's line).

None of this depends on how big a dimension is: the cost follows the number of ops.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise

# A term's bound digit (the key row a sum or a max runs over) has this canonical id, so
# that two terms that differ only in the name of their summation variable compare equal.
BOUND = -1


@dataclass(frozen=True, slots=True)
class Aff:
    """const + sum(coeff * digit); `terms` sorted by digit id, no zero coefficients."""

    const: int
    terms: tuple[tuple[int, int], ...] = ()

    @staticmethod
    def digit(d: int, coeff: int = 1) -> Aff:
        return Aff(0, ((d, coeff),)) if coeff else Aff(0)

    @staticmethod
    def of(const: int, terms: Mapping[int, int]) -> Aff:
        return Aff(const, tuple(sorted((d, c) for d, c in terms.items() if c)))

    def __add__(self, other: Aff) -> Aff:
        merged = dict(self.terms)
        for d, c in other.terms:
            merged[d] = merged.get(d, 0) + c
        return Aff.of(self.const + other.const, merged)

    def shift(self, c: int) -> Aff:
        return Aff(self.const + c, self.terms)

    def scale(self, k: int) -> Aff:
        return Aff.of(self.const * k, {d: c * k for d, c in self.terms})

    def coeff(self, d: int) -> int:
        for dd, c in self.terms:
            if dd == d:
                return c
        return 0

    @property
    def digits(self) -> frozenset[int]:
        return frozenset(d for d, _ in self.terms)

    @property
    def is_const(self) -> bool:
        return not self.terms

    def substitute(self, mapping: Mapping[int, Aff]) -> Aff:
        if not any(d in mapping for d, _ in self.terms):
            return self
        out = Aff(self.const)
        for d, c in self.terms:
            out = out + (mapping[d].scale(c) if d in mapping else Aff.digit(d, c))
        return out

    def without(self, digits: frozenset[int]) -> Aff:
        return Aff(self.const, tuple((d, c) for d, c in self.terms if d not in digits))

    def __str__(self) -> str:
        parts = [f"{c}*x{d}" if c != 1 else f"x{d}" for d, c in self.terms]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)


Subst = dict[int, Aff]


@dataclass(frozen=True, slots=True)
class Digit:
    id: int
    size: int


class DigitSource:
    """Fresh digit ids for one analysis, from `start` on (canonical values number their
    digits from 0, so an interpreter's fresh digits start above every canonical id)."""

    def __init__(self, start: int = 0) -> None:
        self._next = start

    def fresh(self, size: int) -> Digit:
        d = Digit(self._next, size)
        self._next += 1
        return d


@dataclass(frozen=True, slots=True)
class Layout:
    """Per axis, its digits outer to inner. Size-1 axes have no digit; no digit has size 1."""

    axes: tuple[tuple[Digit, ...], ...]
    shape: tuple[int, ...]

    @staticmethod
    def fresh(shape: tuple[int, ...], src: DigitSource) -> Layout:
        return Layout(tuple((src.fresh(n),) if n > 1 else () for n in shape), shape)

    @property
    def digits(self) -> tuple[Digit, ...]:
        return tuple(d for axis in self.axes for d in axis)

    @property
    def digit_ids(self) -> frozenset[int]:
        return frozenset(d.id for axis in self.axes for d in axis)

    def flat(self) -> list[tuple[Digit, int]]:
        """Every digit with its stride in the row-major flat order, outer first."""
        out: list[tuple[Digit, int]] = []
        stride = 1
        for axis in reversed(self.axes):
            for d in reversed(axis):
                out.append((d, stride))
                stride *= d.size
        out.reverse()
        return out

    def size(self) -> int:
        return math.prod(self.shape)


def _cuts(sizes: Iterable[int]) -> list[int]:
    """Cumulative products from the inner end: the boundaries of a mixed-radix number."""
    out = [1]
    for n in reversed(list(sizes)):
        out.append(out[-1] * n)
    return out


def _nested(points: set[int]) -> list[int] | None:
    ordered = sorted(points)
    for a, b in pairwise(ordered):
        if b % a:
            return None
    return ordered


def _split(digit: Digit, stride: int, chain: list[int],
           src: DigitSource) -> tuple[list[tuple[Digit, int]], Aff]:
    """Split `digit` (flat stride `stride`) at the chain points inside its span."""
    lo, hi = stride, stride * digit.size
    inner = [c for c in chain if lo < c < hi]
    if not inner:
        return [(digit, stride)], Aff.digit(digit.id)
    bounds = [lo, *inner, hi]
    parts: list[tuple[Digit, int]] = []
    aff = Aff(0)
    for a, b in pairwise(bounds):
        part = src.fresh(b // a)
        parts.append((part, a))
        aff = aff + Aff.digit(part.id, a // stride)
    parts.reverse()  # outer first
    return parts, aff


def regroup(flat: list[tuple[Digit, int]], shape: tuple[int, ...], src: DigitSource
            ) -> tuple[Layout, Subst] | None:
    """Re-read a flat mixed-radix digit list as `shape`: split digits at the new axis
    boundaries. None when the boundaries do not nest (no affine description)."""
    total = math.prod(shape)
    old_points = {s * d.size for d, s in flat} | {s for _, s in flat} | {1, total}
    chain = _nested(old_points | set(_cuts(shape)))
    if chain is None:
        return None
    subst: Subst = {}
    fine: list[tuple[Digit, int]] = []
    for d, s in flat:
        parts, aff = _split(d, s, chain, src)
        fine.extend(parts)
        if parts[0][0] is not d:
            subst[d.id] = aff
    cuts = _cuts(shape)  # cuts[i] = stride of axis len(shape)-1-i... from the inner end
    axes: list[tuple[Digit, ...]] = []
    for i, n in enumerate(shape):
        lo = cuts[len(shape) - 1 - i]
        hi = lo * n
        axes.append(tuple(d for d, s in fine if lo <= s < hi))
    return Layout(tuple(axes), shape), subst


def reshape(layout: Layout, shape: tuple[int, ...], src: DigitSource
            ) -> tuple[Layout, Subst] | None:
    return regroup(layout.flat(), shape, src)


def permute(layout: Layout, perm: tuple[int, ...]) -> Layout:
    return Layout(tuple(layout.axes[i] for i in perm), tuple(layout.shape[i] for i in perm))


@dataclass(frozen=True, slots=True)
class Box:
    """A contiguous flat range of a layout, as a flat list of (kept or new) digits and the
    substitution that expresses the layout's digits in them (constants where fixed)."""

    flat: list[tuple[Digit, int]]
    subst: Subst


def flat_slice(layout: Layout, offset: int, count: int, src: DigitSource) -> Box | None:
    """Elements [offset, offset + count) of `layout` in flat order, if they form a box:
    full inner digits, one partly covered digit, fixed outer digits."""
    flat = layout.flat()
    total = layout.size()
    if count <= 0 or offset < 0 or offset + count > total:
        return None
    subst: Subst = {}
    kept: list[tuple[Digit, int]] = []
    i = len(flat) - 1
    while i >= 0:
        d, s = flat[i]
        block = s * d.size
        if count % block == 0 and offset % block == 0:
            kept.append((d, s))
            i -= 1
            continue
        lo = (offset // s) % d.size
        n = count // s
        if count % s or offset % s or lo + n > d.size:
            return None
        if n > 1:
            part = src.fresh(n)
            kept.append((part, s))
            subst[d.id] = Aff(lo, ((part.id, 1),))
        else:
            subst[d.id] = Aff(lo)
        i -= 1
        break
    while i >= 0:
        d, s = flat[i]
        subst[d.id] = Aff((offset // s) % d.size)
        i -= 1
    kept.reverse()
    # the strides of a slice restart at 1: re-stride the kept digits
    out: list[tuple[Digit, int]] = []
    stride = 1
    for d, _ in reversed(kept):
        out.append((d, stride))
        stride *= d.size
    out.reverse()
    return Box(out, subst)


def unify_axis(a: tuple[Digit, ...], b: tuple[Digit, ...], src: DigitSource
               ) -> tuple[tuple[Digit, ...], Subst, Subst] | None:
    """Digits for an axis both operands index the same way: a common refinement of both
    mixed-radix decompositions. Returns the common digits (taken from `a` where possible)
    and substitutions for `a` and `b` (b's digits renamed onto a's)."""
    n = math.prod(d.size for d in a)
    fa = Layout((a,), (n,)).flat()
    fb = Layout((b,), (n,)).flat()
    chain = _nested({s for _, s in fa} | {s * d.size for d, s in fa} |
                    {s for _, s in fb} | {s * d.size for d, s in fb} | {1, n})
    if chain is None:
        return None
    sub_a: Subst = {}
    fine: list[tuple[Digit, int]] = []
    for d, s in fa:
        parts, aff = _split(d, s, chain, src)
        fine.extend(parts)
        if parts[0][0] is not d:
            sub_a[d.id] = aff
    by_stride = {s: d for d, s in fine}
    sub_b: Subst = {}
    for d, s in fb:
        lo, hi = s, s * d.size
        aff = Aff(0)
        for fs in sorted(by_stride):
            if lo <= fs < hi:
                aff = aff + Aff.digit(by_stride[fs].id, fs // s)
        if aff != Aff.digit(d.id):
            sub_b[d.id] = aff
    return tuple(d for d, _ in fine), sub_a, sub_b


def compose(first: Subst, then: Subst) -> Subst:
    """The substitution `then ∘ first` (apply `first`, then `then`)."""
    out = {d: aff.substitute(then) for d, aff in first.items()}
    for d, aff in then.items():
        out.setdefault(d, aff)
    return out


def fresh_copy(layout: Layout, src: DigitSource) -> tuple[Layout, Subst]:
    """The same layout with fresh digit ids (to combine a value with itself)."""
    subst: Subst = {}
    axes = []
    for axis in layout.axes:
        new = []
        for d in axis:
            nd = src.fresh(d.size)
            subst[d.id] = Aff.digit(nd.id)
            new.append(nd)
        axes.append(tuple(new))
    return Layout(tuple(axes), layout.shape), subst


def mixed_radix(aff: Aff, sizes: Mapping[int, int], digits: frozenset[int]) -> int | None:
    """If the part of `aff` over `digits` enumerates [0, N) exactly once as the digits
    range over their sizes (coefficients 1, s1, s1*s2, ...), N; else None."""
    terms = sorted(((c, d) for d, c in aff.terms if d in digits))
    if len(terms) != len(digits):
        return None
    expect = 1
    for c, d in terms:
        if c != expect:
            return None
        expect *= sizes[d]
    return expect
