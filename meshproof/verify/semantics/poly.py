"""Exponential polynomials: sums of monomials ``c · exp(L) · prod(x^k)``.

A monomial has an exact rational coefficient, a *unit* ``exp(L)`` (L a linear form of
atoms with a rational constant: units are invertible, so a common factor such as a running
max cancels) and powers of *variables*: atoms, and two atoms defined here,

- `RowSum`: ``sum_{b in [lo, hi)} body(b)``, a sum over key rows of a monomial in the
  bound row b (``exp(c·QK(t,h,b,g))``, or that times ``V[b,g,e]``). A partial ℓ of shard
  [0, 16) is ``exp(-m) · RowSum(exp(c·QK(..b..)), 0, 16)``: the reference point is a
  unit outside the sum, so sums of different shards and reference points compare;
- `Log`: the logarithm of a positive polynomial (normalised, so ``log(2·exp(-m)·X)`` is
  ``log 2 - m + log X``).

Row sums of one body over different intervals are different variables; before two
polynomials meet they are *refined* to common intervals (``Σ[0,16) = Σ[0,8) + Σ[8,16)``),
and every result is *coarsened* back: adjacent intervals become one wherever the polynomial
depends on their sum only (equal partial derivatives). So a merged window is one variable
and forms stay the same size whatever the number of ranks.

This module is the arithmetic and the normalisation; the terms live in poly_terms.py, the
atoms `RowSum`, `Summed` and `Log` in poly_atoms.py, refinement and coarsening in
poly_intervals.py and exact division in poly_divide.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction

from meshproof.verify.semantics.atom_base import ZERO, Atom
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.poly_atoms import RowSum, Summed
from meshproof.verify.semantics.poly_intervals import coarsen, common
from meshproof.verify.semantics.poly_terms import (
    NO_UNIT,
    ONE_MONO,
    ONE_POLY,
    ZERO_POLY,
    Monomial,
    Poly,
)

# --- arithmetic ------------------------------------------------------------------------


def add(p: Poly, q: Poly) -> Poly:
    if not q.terms:
        return p
    if not p.terms:
        return q
    rp, rq = common(p, q)
    return coarsen(Poly.make(rp.terms + rq.terms))


def scale(p: Poly, c: Fraction) -> Poly:
    if not c:
        return ZERO_POLY
    if c == 1:
        return p
    return Poly(tuple((m, k * c) for m, k in p.terms))


def times_unit(p: Poly, unit: Lin) -> Poly:
    if not unit.coeffs and not unit.const:
        return p
    return Poly.make((Monomial(m.unit + unit, m.vars), c) for m, c in p.terms)


def neg(p: Poly) -> Poly:
    return scale(p, Fraction(-1))


def sub(p: Poly, q: Poly) -> Poly:
    return add(p, neg(q))


def mul(p: Poly, q: Poly) -> Poly:
    if not p.terms or not q.terms:
        return ZERO_POLY
    cp, cq = p.as_const(), q.as_const()
    if cp is not None:
        return scale(q, cp)
    if cq is not None:
        return scale(p, cq)
    rp, rq = common(p, q)
    return coarsen(Poly.make((ma * mb, ca * cb) for ma, ca in rp.terms for mb, cb in rq.terms))


def power(p: Poly, k: int) -> Poly:
    out = ONE_POLY
    for _ in range(k):
        out = mul(out, p)
    return out


# --- normalisation ---------------------------------------------------------------------


def _content(coeffs: Iterable[Fraction]) -> Fraction:
    num = den = 0
    for c in coeffs:
        num = math.gcd(num, c.numerator)
        den = den * c.denominator // math.gcd(den, c.denominator) if den else c.denominator
    return Fraction(num, den or 1)


def primitive(p: Poly) -> tuple[Fraction, Lin, Poly]:
    """(c, u, q) with p = c · exp(u) · q, q free of rational content and of a common unit:
    c is the positive content (its sign that of the first term) and u the mean of the
    terms' units, so that q does not depend on how p was scaled."""
    c = _content(k for _, k in p.terms)
    if p.terms[0][1] < 0:
        c = -c
    units = [m.unit for m, _ in p.terms]
    if all(u is units[0] or u == units[0] for u in units):
        mean = units[0]
    else:
        total = units[0]
        for u in units[1:]:
            total = total + u
        mean = total.scale(Fraction(1, len(units)))
    if not mean.coeffs and not mean.const and c == 1:
        return c, mean, p
    minus = mean.scale(Fraction(-1))
    return c, mean, Poly.make((Monomial(m.unit + minus, m.vars), k / c) for m, k in p.terms)


def positive(p: Poly) -> bool:
    """> 0 for every input: positive coefficients and positive variables only -- or, with
    masks, sums of exponentials that are >= 0 (a masked sum may be empty at some query)
    as long as one term is positive everywhere."""
    if not p.terms or any(c <= 0 for _, c in p.terms):
        return False
    if not all(isinstance(a, (RowSum, Summed)) and a.nonnegative
               for m, _ in p.terms for a, _ in m.vars):
        return False
    return any(all(isinstance(a, (RowSum, Summed)) and a.positive for a, _ in m.vars)
               for m, _ in p.terms)


def as_lin(p: Poly) -> Lin | None:
    """The polynomial as a linear form of atoms, if it is one."""
    const = ZERO
    items: list[tuple[Atom, Fraction]] = []
    for m, c in p.terms:
        if m.unit.coeffs or m.unit.const:
            return None
        if not m.vars:
            const += c
        elif len(m.vars) == 1 and m.vars[0][1] == 1 and \
                not isinstance(m.vars[0][0], (RowSum, Summed)):
            items.append((m.vars[0][0], c))
        else:
            return None
    return Lin.make(const, items)


def of_lin(lin: Lin) -> Poly:
    assert not lin.infinite and isinstance(lin.const, Fraction)
    return Poly.make([(ONE_MONO, lin.const),
                      *((Monomial(NO_UNIT, ((a, 1),)), c) for a, c in lin.coeffs)])
