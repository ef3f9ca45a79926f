"""Row-sum intervals: before two polynomials meet they are refined to common intervals
(``Σ[0,16) = Σ[0,8) + Σ[8,16)``); every result is coarsened back wherever it depends on
the sum of adjacent intervals only.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from fractions import Fraction

from meshproof.verify.semantics.atom_base import ONE, Atom
from meshproof.verify.semantics.poly_atoms import RowSum
from meshproof.verify.semantics.poly_terms import NO_UNIT, Monomial, Poly, _powers

# --- intervals: refinement and coarsening ----------------------------------------------


def _sums(p: Poly) -> Iterator[RowSum]:
    for a in p.variables():
        if isinstance(a, RowSum):
            yield a


def cuts_of(polys: Iterable[Poly]) -> dict[str, set[int]]:
    """Per row-sum body, every interval end point the polynomials use."""
    out: dict[str, set[int]] = {}
    for p in polys:
        for r in _sums(p):
            out.setdefault(r.base, set()).update((r.lo, r.hi))
    return out


def refine(p: Poly, cuts: dict[str, set[int]]) -> Poly:
    """`p` with every row sum split at the given cut points of its body."""
    pieces: dict[RowSum, list[RowSum]] = {}
    for r in set(_sums(p)):
        inner = sorted(c for c in cuts.get(r.base, ()) if r.lo < c < r.hi)
        if inner:
            ends = [r.lo, *inner, r.hi]
            pieces[r] = [x for a, b in itertools.pairwise(ends) if (x := r.at(a, b))]
    if not pieces:
        return p
    out: list[tuple[Monomial, Fraction]] = []
    for m, c in p.terms:
        split = [(a, k) for a, k in m.vars if a in pieces]
        if not split:
            out.append((m, c))
            continue
        keep = Monomial(m.unit, tuple((a, k) for a, k in m.vars if a not in pieces))
        term = Poly(((keep, c),))
        for a, k in split:
            assert isinstance(a, RowSum)
            parts = Poly.make((Monomial(NO_UNIT, ((x, 1),)), ONE) for x in pieces[a])
            for _ in range(k):
                term = _mul_free(term, parts)
        out.extend(term.terms)
    return Poly.make(out)


def _mul_free(p: Poly, q: Poly) -> Poly:
    """A product of two polynomials already over common intervals."""
    return Poly.make((ma * mb, ca * cb) for ma, ca in p.terms for mb, cb in q.terms)


def common(*polys: Poly) -> list[Poly]:
    """The polynomials refined to common intervals (for a comparison or a division)."""
    cuts = cuts_of(polys)
    return [refine(p, cuts) for p in polys]


def derivative(p: Poly, x: Atom) -> Poly:
    return Poly.make((m.without(x), c * k) for m, c in p.terms if (k := m.power(x)))


def coarsen(p: Poly) -> Poly:
    """Merge adjacent row sums of one body wherever `p` depends on their sum only."""
    while True:
        by_body: dict[str, list[RowSum]] = {}
        for r in set(_sums(p)):
            by_body.setdefault(r.body.key, []).append(r)
        merged = False
        for rows in by_body.values():
            rows.sort(key=lambda r: r.lo)
            for a, b in itertools.pairwise(rows):
                if a.hi == b.lo and derivative(p, a) == derivative(p, b):
                    p = _merge(p, a, b)
                    merged = True
                    break
            if merged:
                break
        if not merged:
            return p


def _merge(p: Poly, a: RowSum, b: RowSum) -> Poly:
    """p(a + b, 0) with a + b one row sum: p depends on a and b through a + b only."""
    ab = a.at(a.lo, b.hi)
    assert ab is not None     # the union of two non-empty sums
    out: list[tuple[Monomial, Fraction]] = []
    for m, c in p.terms:
        if m.power(b):
            continue   # vanishes at b = 0
        k = m.power(a)
        out.append((Monomial(m.unit, _powers((*m.vars, (a, -k), (ab, k)))) if k else m, c))
    return Poly.make(out)
