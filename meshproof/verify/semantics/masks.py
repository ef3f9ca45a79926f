"""The symbolic rules of masks: positions, comparisons and `tl.where` (spec/semantics.md §8).

- `tl.arange(lo, hi)` is the position ``lo + x`` (x the tile's digit, an `Idx` atom);
  adding host constants and reshaping keep positions affine in digits.
- A comparison of two positions is a guard (guards.py): ``<``, ``<=``, ``>``, ``>=`` one
  integer constraint, ``==`` two; ``!=`` is a disjunction, outside the algebra. The result
  is `Ind(G)`, or the constant 0 or 1 when the box decides it.
- ``where(G, s, -inf) = s + Pen(G)``; ``where(G, -inf, s) = s + Pen(¬G)`` for a single
  comparison; ``where(G, a, b) = Ind(G)·a + Ind(¬G)·b`` for finite a and b (``Ind(G)·a``
  when b is 0).
- A penalised value (one holding Pen) may be added to finite values, scaled by a positive
  constant, compared in a max and exponentiated; anything else (subtracting it, a product,
  a sum over keys, a dot) is outside the algebra at its op, never silently -inf - (-inf).
"""

from __future__ import annotations

import math
from fractions import Fraction

from meshproof.model.evaluate import Compare
from meshproof.verify.semantics import rational as R
from meshproof.verify.semantics.atoms import Atom, Lin
from meshproof.verify.semantics.guards import (
    POSITION_LIMIT,
    Guard,
    Idx,
    Ind,
    Pen,
    conjunction,
    extremes,
)
from meshproof.verify.semantics.index import Aff, Layout
from meshproof.verify.semantics.rational import Rat
from meshproof.verify.semantics.reasons import NotModelled


def _box(layout: Layout) -> dict[int, tuple[int, int]]:
    return {d.id: (0, d.size - 1) for d in layout.digits}


def positions(layout: Layout, start: float) -> Rat:
    """`tl.arange(start, start + n)` on a fresh one-axis layout."""
    lo = int(start)
    if not layout.axes[0]:
        return Rat.const(Fraction(lo))
    (d,) = layout.axes[0]
    idx = Idx.make(Aff.digit(d.id), _box(layout))
    return Rat.of_lin(Lin.make(Fraction(lo), ((idx, Fraction(1)),)))


def _position(form: Rat, box: dict[int, tuple[int, int]]) -> Aff:
    """A form that is an integer affine combination of positions, as an Aff (scaled to
    integer coefficients: the caller compares it with 0)."""
    lin = form.as_lin()
    if lin is None or lin.infinite:
        raise NotModelled("compares values that are not positions (tl.arange plus host "
                          "constants): a comparison with input data is outside the algebra")
    assert isinstance(lin.const, Fraction)
    scale = lin.const.denominator
    for a, c in lin.coeffs:
        if not isinstance(a, Idx):
            raise NotModelled("compares values that are not positions (tl.arange plus host "
                              "constants): a comparison with input data is outside the "
                              "algebra")
        scale = math.lcm(scale, c.denominator)
        for d, lo, hi in a.box:
            box.setdefault(d, (lo, hi))
        ex = extremes(a.aff, box)
        if ex is None or max(abs(ex[0]), abs(ex[1])) >= POSITION_LIMIT:
            raise NotModelled("compares positions at or above 2^24, which f32 does not hold "
                              "exactly")
    out = Aff(int(lin.const * scale))
    for a, c in lin.coeffs:
        assert isinstance(a, Idx)
        out = out + a.aff.scale(int(c * scale))
    return out


def compare(fn: Compare, fa: Rat, fb: Rat, layout: Layout) -> Rat:
    box = _box(layout)
    diff = _position(R.sub(fa, fb), box)     # a - b, integer coefficients
    match fn:
        case Compare.LE:
            cons = [diff]
        case Compare.LT:
            cons = [diff.shift(1)]
        case Compare.GE:
            cons = [diff.scale(-1)]
        case Compare.GT:
            cons = [diff.scale(-1).shift(1)]
        case Compare.EQ:
            cons = [diff, diff.scale(-1)]
        case Compare.NE:
            raise NotModelled("compares positions with != (a disjunction of two guards): "
                              "write the mask as a conjunction of <, <=, >, >=, ==")
    g = Guard.make(cons, box)
    if isinstance(g, bool):
        return R.ONE_RAT if g else R.ZERO_RAT
    return Rat.atom(Ind.make(g))


def _condition(fc: Rat) -> Guard | bool:
    """A mask as one guard: a constant 0/1, or a product of indicators."""
    c = fc.as_const()
    if isinstance(c, Fraction) and c in (0, 1):
        return bool(c)
    if fc.inf or fc.den or len(fc.num.terms) != 1:
        raise NotModelled("selects with a condition that is not a mask (a conjunction of "
                          "comparisons of positions)")
    m, k = fc.num.terms[0]
    if k != 1 or m.unit.coeffs or m.unit.const or \
            not all(isinstance(a, Ind) for a, _ in m.vars):
        raise NotModelled("selects with a condition that is not a mask (a conjunction of "
                          "comparisons of positions)")
    return conjunction(a.guard for a, _ in m.vars if isinstance(a, Ind))


def _penalty(x: Rat, g: Guard) -> Rat:
    if x.inf:
        if x.inf > 0:
            raise NotModelled("selects +inf under a mask")
        return x
    lin = x.as_lin()
    if lin is None:
        raise NotModelled("selects -inf against a value that is not a linear form of scores "
                          "(mask the scores before exponentiating)")
    return Rat.of_lin(lin + Lin(Fraction(0), ((Pen.make(g), Fraction(1)),)))


def where(fc: Rat, fa: Rat, fb: Rat) -> Rat:
    g = _condition(fc)
    if g is True:
        return fa
    if g is False:
        return fb
    assert isinstance(g, Guard)
    if fb.inf < 0:
        return _penalty(fa, g)
    neg = g.negate()
    if fa.inf < 0:
        if neg is None:
            raise NotModelled("selects -inf where a conjunction of comparisons holds (its "
                              "negation is a disjunction)")
        return _penalty(fb, neg)
    if fa.inf or fb.inf:
        raise NotModelled("selects +inf under a mask")
    if penalised(fa) or penalised(fb):
        raise NotModelled("selects between masked scores under a second mask: nest the "
                          "conditions in one tl.where (a product of the masks)")
    out = R.mul(Rat.atom(Ind.make(g)), fa)
    if fb.is_zero:
        return out
    if neg is None:
        raise NotModelled("selects a nonzero value where a conjunction of comparisons fails "
                          "(its negation is a disjunction)")
    return R.add(out, R.mul(Rat.atom(Ind.make(neg)), fb))


def _pens(form: Rat) -> set[Atom]:
    return {a for a in form.num.variables() if isinstance(a, Pen)} if not form.inf else set()


def penalised(form: Rat) -> bool:
    return bool(_pens(form))


def check_binary(fn: str, fa: Rat, fb: Rat) -> None:
    """Refuse what -inf does not survive: subtracting a masked value, a product or
    quotient with anything but a positive constant, a minimum."""
    if fn == "sub" and penalised(fb):
        raise NotModelled("subtracts masked scores (-inf where the mask hides a key: "
                          "-inf - (-inf) is undefined)")
    if fn in ("mul", "div"):
        other = fb if penalised(fa) else fa
        c = other.as_const()
        if (penalised(fa) and penalised(fb)) or not isinstance(c, Fraction) or c <= 0 or \
                (fn == "div" and other is fa):
            raise NotModelled(f"{'multiplies' if fn == 'mul' else 'divides'} masked scores "
                              "(-inf where the mask hides a key) by something other than a "
                              "positive constant")
    if fn == "minimum":
        raise NotModelled("takes the minimum with masked scores")


def penalty_result(out: Rat, fa: Rat, fb: Rat) -> Rat:
    """The result of adding, scaling or dividing a masked value: every penalty of the
    operands still there with a positive coefficient, normalised to 1 (k·Pen = Pen)."""
    lin = out.as_lin()
    want = _pens(fa) | _pens(fb)
    if lin is None or lin.infinite:
        if out.inf < 0:
            return out
        raise NotModelled("combines masked scores into a value that is not a linear form")
    have = {a: c for a, c in lin.coeffs if isinstance(a, Pen)}
    if set(have) != want or any(c <= 0 for c in have.values()):
        raise NotModelled("cancels a mask's -inf against another (-inf - (-inf) is "
                          "undefined)")
    return Rat.of_lin(Lin.make(lin.const, ((a, Fraction(1) if isinstance(a, Pen) else c)
                                           for a, c in lin.coeffs)))


__all__ = ["check_binary", "compare", "penalised", "penalty_result", "positions", "where"]
