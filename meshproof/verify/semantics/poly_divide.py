"""Exact division of polynomials over common intervals, by a fixed monomial order.
"""

from __future__ import annotations

import zlib
from fractions import Fraction

from meshproof.verify.semantics.atom_base import ZERO
from meshproof.verify.semantics.poly_intervals import coarsen, common
from meshproof.verify.semantics.poly_terms import ZERO_POLY, Monomial, Poly, _powers

# --- exact division --------------------------------------------------------------------


def _weight(key: str) -> float:
    """A fixed pseudo-random weight per symbol (crc32: the same in every process)."""
    w = _WEIGHTS.get(key)
    if w is None:
        w = _WEIGHTS[key] = 1.0 + zlib.crc32(key.encode()) / 2 ** 32
    return w


_WEIGHTS: dict[str, float] = {}


def _order(m: Monomial) -> tuple[float, str]:
    """A monomial order compatible with multiplication: exponents weighed by a fixed
    weight per symbol (a linear functional, so order(a·b) = order(a) + order(b)); ties,
    which only equal weights can make, fall back to the key and at worst leave a factor
    undivided, never a wrong quotient."""
    cached = m._order
    if cached is not None:
        return cached
    total = sum(k * _weight(a.key) for a, k in m.vars)
    total += sum(float(c) * _weight("e:" + a.key) for a, c in m.unit.coeffs)
    assert isinstance(m.unit.const, Fraction)
    out = (total + float(m.unit.const) * 1e-3, m.key)
    object.__setattr__(m, "_order", out)
    return out


def _lead(terms: dict[Monomial, Fraction]) -> tuple[Monomial, Fraction]:
    m = max(terms, key=_order)
    return m, terms[m]


def _divide_monomial(a: Monomial, b: Monomial) -> Monomial | None:
    vars_ = dict(a.vars)
    for x, k in b.vars:
        if vars_.get(x, 0) < k:
            return None
        vars_[x] -= k
    return Monomial(a.unit + b.unit.scale(Fraction(-1)), _powers(vars_.items()))


def divide(p: Poly, f: Poly) -> Poly | None:
    """p / f when f divides p exactly (as polynomials over common intervals), else None."""
    if not p.terms:
        return ZERO_POLY
    rp, rf = common(p, f)
    lm, lc = _lead(dict(rf.terms))
    rest = dict(rp.terms)
    quotient: list[tuple[Monomial, Fraction]] = []
    for _ in range(8 * (len(rp.terms) + len(rf.terms)) + 32):
        if not rest:
            return coarsen(Poly.make(quotient))
        tm, tc = _lead(rest)
        q = _divide_monomial(tm, lm)
        if q is None:
            return None
        qc = tc / lc
        quotient.append((q, qc))
        for m, c in rf.terms:
            key = q * m
            left = rest.get(key, ZERO) - qc * c
            if left:
                rest[key] = left
            else:
                rest.pop(key, None)
    return None
