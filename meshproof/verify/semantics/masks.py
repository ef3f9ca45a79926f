"""The symbolic rules of masks: positions, comparisons and `tl.where` (spec/semantics.md §8).

- `tl.arange(lo, hi)` is the position ``lo + x`` (x the tile's digit, an `Idx` atom);
  adding host constants and reshaping keep positions affine in digits.
- A comparison of two positions is a guard (guards.py): ``<``, ``<=``, ``>``, ``>=`` one
  integer constraint, ``==`` two. The result is `Ind(G)`, or the constant 0 or 1 when the
  box decides it. ``a != b`` is the sum ``Ind(a < b) + Ind(a > b)`` of two disjoint guards.
- A condition is a mask when it is one product of indicators (a conjunction) or a sum of
  such products whose guards are pairwise disjoint (shown over the box: then the sum is
  0 or 1 everywhere, an "or" written as `!=` or as a sum of comparisons); a sum whose
  guards may overlap (it may be 2) is outside the algebra at its line. Two disjoint
  guards that bound the same forms alike but one, on which their integer ranges touch,
  are one guard (``k < q`` or ``k == q`` is ``k <= q``).
- ``where(G, s, -inf) = s + Pen(G)``; ``where(G, -inf, s) = s + Pen(¬G)`` for a single
  comparison (and ``¬(G1 ∨ … ∨ Gk) = ¬G1 ∧ … ∧ ¬Gk`` for a disjoint sum of single
  comparisons); ``where(G, a, b) = Ind(G)·a + Ind(¬G)·b`` for finite a and b
  (``Ind(G)·a`` when b is 0), and ``Σ Ind(Gi)·a + (1 - Σ Ind(Gi))·b`` for a disjoint sum.
  A penalty holds one conjunction, so ``where(G1 ∨ G2, s, -inf)`` is outside the algebra
  (mask the probabilities instead: ``tl.where(mask, p, 0)``).
- A penalised value (one holding Pen) may be added to finite values, scaled by a positive
  constant, compared in a max and exponentiated; anything else (subtracting it, a product,
  a sum over keys, a dot) is outside the algebra at its op, never silently -inf - (-inf).
"""

from __future__ import annotations

import math
from fractions import Fraction

from meshproof.model.evaluate import Compare
from meshproof.verify.semantics import rational as R
from meshproof.verify.semantics.atom_base import Atom
from meshproof.verify.semantics.atoms import Lin
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
        case Compare.NE:     # a < b or a > b: two disjoint guards, summed
            parts = [Guard.make([diff.shift(1)], box), Guard.make([diff.scale(-1).shift(1)],
                                                                  box)]
            if any(g is True for g in parts):
                return R.ONE_RAT
            out = R.ZERO_RAT
            for g in parts:
                if isinstance(g, Guard):
                    out = R.add(out, Rat.atom(Ind.make(g)))
            return out
    g = Guard.make(cons, box)
    if isinstance(g, bool):
        return R.ONE_RAT if g else R.ZERO_RAT
    return Rat.atom(Ind.make(g))


_NOT_A_MASK = ("selects with a condition that is not a mask (a conjunction of comparisons "
               "of positions, or a sum of such conjunctions that never overlap)")


def _condition(fc: Rat) -> Guard | bool | tuple[Guard, ...]:
    """A mask as one guard (a constant 0/1, or a product of indicators), or as a union of
    two or more pairwise disjoint guards (a sum of products: `!=`, or an "or")."""
    c = fc.as_const()
    if isinstance(c, Fraction) and c in (0, 1):
        return bool(c)
    if fc.inf or fc.den or not fc.num.terms:
        raise NotModelled(_NOT_A_MASK)
    union: list[Guard] = []
    for m, k in fc.num.terms:
        if k != 1 or m.unit.coeffs or m.unit.const or \
                not all(isinstance(a, Ind) for a, _ in m.vars):
            raise NotModelled(_NOT_A_MASK)
        g = conjunction(a.guard for a, _ in m.vars if isinstance(a, Ind))
        if g is True:
            if len(fc.num.terms) > 1:
                raise NotModelled("selects with a sum of masks one of which always holds "
                                  "(the sum may be 2: the masks overlap)")
            return True
        if isinstance(g, Guard):
            union.append(g)
    for i, g in enumerate(union):
        for h in union[i + 1:]:
            if g.conj(h) is not False:
                raise NotModelled("selects with a sum (an \"or\") of masks that are not shown "
                                  "disjoint: where two hold the sum is 2, not a mask; write "
                                  "the cases so that they exclude each other")
    if not union:
        return False
    union = _join(union)
    return union[0] if len(union) == 1 else tuple(union)


Bounds = dict[tuple[tuple[int, int], ...], list[int | None]]   # terms T: [lo, hi] of T


def _bounds(g: Guard) -> Bounds:
    """A guard as inclusive bounds on linear forms: ``T + γ <= 0`` is T <= -γ, and
    ``-T + γ <= 0`` is T >= γ (T's first coefficient positive)."""
    out: Bounds = {}
    for c in g.constraints:
        neg = c.terms[0][1] < 0
        terms = tuple((d, -k) for d, k in c.terms) if neg else c.terms
        lo_hi = out.setdefault(terms, [None, None])
        if neg:
            lo_hi[0] = c.const if lo_hi[0] is None else max(lo_hi[0], c.const)
        else:
            lo_hi[1] = -c.const if lo_hi[1] is None else min(lo_hi[1], -c.const)
    return out


def _joined(g: Guard, h: Guard) -> Guard | None:
    """g ∨ h as one guard when they bound the same forms alike but one, whose two integer
    ranges touch or overlap (``k < q`` or ``k == q`` is ``k <= q``): exact, else None."""
    bg, bh = _bounds(g), _bounds(h)
    if set(bg) != set(bh) or g.box != h.box:
        return None
    differ = [t for t in bg if bg[t] != bh[t]]
    if len(differ) != 1:
        return None
    (t,) = differ
    (l1, u1), (l2, u2) = bg[t], bh[t]
    if (l1 is None) != (l2 is None) and (u1 is None) != (u2 is None):
        return None
    inf, sup = -(1 << 62), 1 << 62
    a1, b1 = (inf if l1 is None else l1), (sup if u1 is None else u1)
    a2, b2 = (inf if l2 is None else l2), (sup if u2 is None else u2)
    if max(a1, a2) > min(b1, b2) + 1:
        return None           # a gap between the two ranges: not one interval
    lo, hi = min(a1, a2), max(b1, b2)
    cons = []
    for terms, (low, high) in bg.items():
        if terms == t:
            low, high = (None if lo == inf else lo), (None if hi == sup else hi)
        if high is not None:
            cons.append(Aff(-high, terms))
        if low is not None:
            cons.append(Aff(low, tuple((d, -k) for d, k in terms)))
    out = Guard.make(cons, g.ranges)
    return out if isinstance(out, Guard) else None


def _join(union: list[Guard]) -> list[Guard]:
    """Disjoint guards joined pairwise while two make one interval of a form."""
    merged = True
    while merged and len(union) > 1:
        merged = False
        for i, g in enumerate(union):
            for j in range(i + 1, len(union)):
                one = _joined(g, union[j])
                if one is not None:
                    union = [one, *union[:i], *union[i + 1:j], *union[j + 1:]]
                    merged = True
                    break
            if merged:
                break
    return union


def _complement(union: tuple[Guard, ...]) -> Guard | bool | None:
    """¬(G1 ∨ … ∨ Gk) as one conjunction, when every Gi is a single comparison."""
    out: Guard | bool = True
    for g in union:
        neg = g.negate()
        if neg is None:
            return None
        out = neg if out is True else (out.conj(neg) if isinstance(out, Guard) else False)
    return out


def _where_union(union: tuple[Guard, ...], fa: Rat, fb: Rat) -> Rat:
    if fb.inf < 0:
        raise NotModelled("selects -inf outside an \"or\" of masks (!= or a sum of "
                          "comparisons): a penalty holds one conjunction; write the mask as "
                          "one conjunction, or mask the probabilities (tl.where(mask, p, 0))")
    if fa.inf < 0:
        neg = _complement(union)
        if neg is None or isinstance(neg, bool):
            raise NotModelled("selects -inf where an \"or\" of masks holds, whose negation "
                              "is not one conjunction of comparisons")
        return _penalty(fb, neg)
    _check_finite_unmasked(fa, fb)
    ind = R.ZERO_RAT
    for g in union:
        ind = R.add(ind, Rat.atom(Ind.make(g)))
    out = R.mul(ind, fa)
    if fb.is_zero:
        return out
    return R.add(out, R.mul(R.sub(R.ONE_RAT, ind), fb))


def _check_finite_unmasked(fa: Rat, fb: Rat) -> None:
    """The branches of a select that is a sum of indicators: finite, and not masked already."""
    if fa.inf or fb.inf:
        raise NotModelled("selects +inf under a mask")
    if penalised(fa) or penalised(fb):
        raise NotModelled("selects between masked scores under a second mask: nest the "
                          "conditions in one tl.where (a product of the masks)")


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
    if isinstance(g, tuple):
        return _where_union(g, fa, fb)
    if fb.inf < 0:
        return _penalty(fa, g)
    neg = g.negate()
    if fa.inf < 0:
        if neg is None:
            raise NotModelled("selects -inf where a conjunction of comparisons holds (its "
                              "negation is a disjunction)")
        return _penalty(fb, neg)
    _check_finite_unmasked(fa, fb)
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
