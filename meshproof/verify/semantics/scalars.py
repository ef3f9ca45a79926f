"""Exact scalars: rational weights times exponentials of rational constants, and intervals.

Weights of exponential-polynomial terms are exact: a `Weight` is sum(w_i * exp(c_i)) with
rational w_i and c_i (almost always the single pair (w, 0)). Constants of a kernel enter
as the value the machine holds (rounded to the op's dtype, see `machine_value`), converted
to fractions exactly, so cancellation such as `-m + m` is exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import pairwise

import numpy as np

from meshproof.model.schedule import DType

ZERO = Fraction(0)
ONE = Fraction(1)


def machine_value(value: float, dtype: DType) -> float:
    """A Python scalar as the machine holds it in `dtype` (round to nearest even)."""
    if not math.isfinite(value):
        return value
    if dtype is DType.F32:
        with np.errstate(over="ignore"):
            return float(np.float32(value))
    if dtype is DType.F16:
        with np.errstate(over="ignore"):
            return float(np.float16(np.float32(value)))
    bits = int(np.array(np.float32(value)).view(np.uint32))
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return float(np.array(bits, dtype=np.uint32).view(np.float32))


def fkey(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


@dataclass(frozen=True, slots=True)
class Weight:
    """sum(w * exp(c) for c, w in parts); parts sorted by c, no zero w."""

    parts: tuple[tuple[Fraction, Fraction], ...]
    _key: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_key", ";".join(
            f"{fkey(w)}e{fkey(c)}" if c else fkey(w) for c, w in self.parts))

    @staticmethod
    def of(w: Fraction | int, c: Fraction | int = 0) -> Weight:
        return Weight(((Fraction(c), Fraction(w)),)) if w else Weight(())

    @property
    def is_zero(self) -> bool:
        return not self.parts

    @property
    def rational(self) -> Fraction | None:
        """The weight as a rational, if it has no exponential part."""
        if not self.parts:
            return ZERO
        if len(self.parts) == 1 and self.parts[0][0] == 0:
            return self.parts[0][1]
        return None

    @property
    def positive(self) -> bool:
        return bool(self.parts) and all(w > 0 for _, w in self.parts)

    def value(self) -> float:
        total = 0.0
        for c, w in self.parts:
            try:
                total += float(w) * math.exp(float(c))
            except OverflowError:
                total += math.inf if w > 0 else -math.inf
        return total

    def __add__(self, other: Weight) -> Weight:
        if len(self.parts) == 1 and len(other.parts) == 1 and \
                self.parts[0][0] == other.parts[0][0]:
            w = self.parts[0][1] + other.parts[0][1]
            return Weight(((self.parts[0][0], w),)) if w else Weight(())
        merged = dict(self.parts)
        for c, w in other.parts:
            merged[c] = merged.get(c, ZERO) + w
        return Weight(tuple(sorted((c, w) for c, w in merged.items() if w)))

    def __mul__(self, other: Weight) -> Weight:
        if len(self.parts) == 1 and len(other.parts) == 1:
            (c1, w1), (c2, w2) = self.parts[0], other.parts[0]
            return Weight(((c1 + c2, w1 * w2),))
        out: dict[Fraction, Fraction] = {}
        for c1, w1 in self.parts:
            for c2, w2 in other.parts:
                out[c1 + c2] = out.get(c1 + c2, ZERO) + w1 * w2
        return Weight(tuple(sorted((c, w) for c, w in out.items() if w)))

    def scale(self, k: Fraction) -> Weight:
        if not k:
            return Weight(())
        return Weight(tuple((c, w * k) for c, w in self.parts))

    def neg(self) -> Weight:
        return self.scale(Fraction(-1))

    def inverse(self) -> Weight | None:
        if len(self.parts) != 1:
            return None
        c, w = self.parts[0]
        return Weight(((-c, 1 / w),))

    def key(self) -> str:
        return self._key

    def __str__(self) -> str:
        r = self.rational
        if r is not None:
            return _frac(r)
        return " + ".join(f"{_frac(w)}*exp({_frac(c)})" for c, w in self.parts)


def _frac(x: Fraction) -> str:
    if x.denominator == 1:
        return str(x.numerator)
    return f"{float(x):.6g}"


W1 = Weight.of(1)


@dataclass(frozen=True, slots=True)
class Pieces:
    """A weight per key row: sorted, disjoint half-open intervals [lo, hi), no zeros."""

    parts: tuple[tuple[int, int, Weight], ...]
    _key: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_key", ",".join(f"[{lo},{hi}):{w.key()}"
                                                 for lo, hi, w in self.parts))

    @staticmethod
    def interval(lo: int, hi: int, w: Weight) -> Pieces:
        return Pieces(((lo, hi, w),)) if hi > lo and not w.is_zero else Pieces(())

    @property
    def is_zero(self) -> bool:
        return not self.parts

    def __add__(self, other: Pieces) -> Pieces:
        points = sorted({p for lo, hi, _ in self.parts + other.parts for p in (lo, hi)})
        out: list[tuple[int, int, Weight]] = []
        for lo, hi in pairwise(points):
            w = _at(self, lo) + _at(other, lo)
            if w.is_zero:
                continue
            if out and out[-1][1] == lo and out[-1][2] == w:
                out[-1] = (out[-1][0], hi, w)
            else:
                out.append((lo, hi, w))
        return Pieces(tuple(out))

    def times(self, w: Weight) -> Pieces:
        if w.is_zero:
            return Pieces(())
        return Pieces(tuple((lo, hi, pw * w) for lo, hi, pw in self.parts))

    def count(self) -> int:
        return sum(hi - lo for lo, hi, _ in self.parts)

    def key(self) -> str:
        return self._key


def _at(p: Pieces, x: int) -> Weight:
    for lo, hi, w in p.parts:
        if lo <= x < hi:
            return w
    return Weight(())


@dataclass(frozen=True, slots=True)
class Ranges:
    """A set of key rows as sorted disjoint half-open intervals (for maxima)."""

    parts: tuple[tuple[int, int], ...]

    @staticmethod
    def interval(lo: int, hi: int) -> Ranges:
        return Ranges(((lo, hi),)) if hi > lo else Ranges(())

    def __or__(self, other: Ranges) -> Ranges:
        out: list[tuple[int, int]] = []
        for lo, hi in sorted(self.parts + other.parts):
            if out and lo <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], hi))
            else:
                out.append((lo, hi))
        return Ranges(tuple(out))

    def covers(self, other: Ranges) -> bool:
        return (self | other) == self

    @property
    def empty(self) -> bool:
        return not self.parts

    def key(self) -> str:
        return ",".join(f"[{lo},{hi})" for lo, hi in self.parts)


def describe_rows(parts: tuple[tuple[int, int], ...]) -> str:
    return ", ".join(f"{lo}..{hi - 1}" if hi - lo > 1 else str(lo) for lo, hi in parts)
