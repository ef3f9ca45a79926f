"""Reductions over axes of a value: sums (and contractions), maxima.

A sum over digits that enter a monomial only through one key-row coordinate becomes a row
sum (poly.RowSum): the coordinate is renamed to the canonical bound row b, so that the
partials of different shards have one body and their intervals merge. A sum of Q[.., f]
times K[.., f] over features is the score atom (a span of features: a contraction split in
two dots gives two spans that add up to one score). A max over key rows of a linear form is
a maximum with one member ranged over those rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from meshproof.verify.semantics.atom_base import Atom
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.guards import Ind, Pen, conjunction, pens
from meshproof.verify.semantics.index import BOUND, Aff, Subst, mixed_radix
from meshproof.verify.semantics.inequalities import Guard
from meshproof.verify.semantics.maxima import Elem, Max, Ranges
from meshproof.verify.semantics.poly_atoms import Log, RowSum, Summed
from meshproof.verify.semantics.poly_terms import Monomial, Poly, _powers
from meshproof.verify.semantics.rat import NEG_INF, Rat
from meshproof.verify.semantics.rational_max import make_max
from meshproof.verify.semantics.reasons import NotModelled, Scramble
from meshproof.verify.semantics.tensor_atoms import Input, Score, Scrambled, row_of
from meshproof.verify.semantics.tiles import tile_guard, tile_union

Sizes = Mapping[int, int]


@dataclass(frozen=True, slots=True)
class Bound:
    subst: Subst
    lo: int
    hi: int
    tile: Guard | None = None      # the rows of the tile a free digit picks (tiles.py)


def bind_rows(atoms: list[Atom], over: frozenset[int], sizes: Sizes,
              tiles: Sizes | None = None) -> Bound:
    """Rename the summed digits `over` into the canonical bound key row: the key-row
    coordinate of the score (or of K, V) becomes BOUND itself. With `tiles` (the sizes of
    the value's other digits), rows that also move with one of them by the summed extent
    are one key tile of it (tiles.py)."""
    for a in atoms:
        if isinstance(a, (Max, Log, RowSum, Summed)) and a.digits & over:
            raise NotModelled("reduces over an axis that a maximum or a sum inside the "
                              "value also depends on")
    refs = sorted((a for a in atoms if (r := row_of(a)) is not None and r.digits & over),
                  key=lambda a: (0 if isinstance(a, (Score, Scrambled)) else 1 if
                                 getattr(a, "tensor", "") in ("K", "Kx") else 2, a.key))
    if not refs:
        raise NotModelled("reduces over an axis that is not the key axis (e.g. over heads, "
                          "query rows or features)")
    row = row_of(refs[0])
    assert row is not None
    tiled = bool(row.without(over).terms)
    n = mixed_radix(row, sizes, over) if over <= row.digits else None
    tile = None if not tiled or tiles is None or n is None else \
        tile_guard(row, over, n, tiles)
    if tiled and tile is None:
        raise NotModelled("reduces over key rows whose range depends on another index")
    if row.digits - row.without(over).digits != over:
        raise NotModelled("reduces over the key axis together with another axis")
    if n is None:
        raise NotModelled("reduces over key rows that are strided or repeated")
    lead = next(d for d, c in row.terms if c == 1 and d in over)
    rest = Aff(0, tuple((d, -c) for d, c in row.terms if d != lead))
    subst = {lead: Aff(-row.const, ((BOUND, 1),)) + rest}
    if tile is None:
        return Bound(subst, row.const, row.const + n)
    return Bound(subst, tile[1], tile[2], tile[0])


def _contract(m: Monomial, over: frozenset[int], sizes: Sizes) -> Monomial | None:
    """sum_f Q[.., f] K[.., f] over features -> a score; None if m has no Q·K pair on the
    summed digits."""
    qs = [(a, k) for a, k in m.vars if isinstance(a, Input) and a.tensor == "Q" and
          a.digits & over]
    ks = [(a, k) for a, k in m.vars if isinstance(a, Input) and a.tensor in ("K", "Kx") and
          a.digits & over]
    if not qs and not ks:
        return None
    if len(qs) != 1 or len(ks) != 1 or qs[0][1] != 1 or ks[0][1] != 1:
        raise NotModelled("contracts an axis that is not a product of Q with K over the "
                          "features")
    q, k = qs[0][0], ks[0][0]
    assert isinstance(q, Input) and isinstance(k, Input)
    fq, fk = q.coords[2], k.coords[2]
    if q.group != k.group:
        raise NotModelled("multiplies the Q of one attention problem with the K of another")
    if fq != fk:
        raise Scramble("contracts Q's feature index with a different index of K (its rows "
                       "or another feature): K is reshaped, not transposed")
    n = mixed_radix(fq, sizes, over)
    if n is None:
        raise NotModelled("contracts the features of Q and K in a strided or repeated order")
    for c in (q.coords[0], q.coords[1], k.coords[0], k.coords[1]):
        if c.digits & over:
            raise Scramble("contracts Q's features against K's rows or heads")
    rest = [(a, p) for a, p in m.vars if a is not q and a is not k]
    if any(a.digits & over for a, _ in rest) or m.unit.digits & over:
        raise NotModelled("contracts the features of a product with more than Q and K")
    score = Score.make(q.group, q.coords[0], q.coords[1], k.coords[0], k.coords[1],
                       fq.without(over), n)
    return Monomial(m.unit, _powers([*rest, (score, 1)]))


def _span_sum(m: Monomial, over: frozenset[int], sizes: Sizes) -> Monomial | None:
    """c · QK[f0 + w·x : w] summed over x in [0, n) is c · QK[f0 : w·n]: the parts of a
    split contraction added up."""
    if m.unit.coeffs or m.unit.const or len(m.vars) != 1 or m.vars[0][1] != 1:
        return None
    s = m.vars[0][0]
    if not isinstance(s, Score) or not s.fbase.digits & over or \
            (s.t.digits | s.h.digits | s.j.digits | s.g.digits) & over:
        return None
    width = s.flen
    span = Aff(0, tuple((d, c) for d, c in s.fbase.terms if d in over))
    total = 1
    for c, d in sorted((c, d) for d, c in span.terms):
        if c != width * total:
            return None
        total *= sizes[d]
    if len(span.terms) != len(over & s.fbase.digits):
        return None
    return Monomial(m.unit, ((s.with_span(s.fbase.without(over), width * total), 1),))


def sum_over(r: Rat, over: Mapping[int, int], features: int,
             sizes: Sizes | None = None) -> Rat:
    """sum over the digits `over` (id -> size): a reduction or a dot's contraction.
    `sizes`: every digit of the value (a key tile's digit among them, tiles.py)."""
    del features   # a span of features is a score; the judge asks for all of them
    if r.inf:
        return r
    digits = frozenset(over)
    if any(f.digits & digits for f, _ in r.den):
        raise NotModelled("sums over key rows a value divided by something that depends on "
                          "those rows")
    items: list[tuple[Monomial, Fraction]] = []
    for m, c in r.num.terms:
        if any(isinstance(a, Pen) for a, _ in m.vars):
            raise NotModelled("sums masked scores (-inf where the mask hides a key) without "
                              "exponentiating them")
        dep = m.digits & digits
        count = math.prod(over[d] for d in digits - dep)
        c = c * count
        if not dep:
            items.append((m, c))
            continue
        contracted = _contract(m, dep, over)
        if contracted is not None:
            items.append((contracted, c))
            continue
        spans = _span_sum(m, dep, over)
        if spans is not None:
            items.append((spans, c))
            continue
        tiled, union = tile_union(m, dep, over)
        if tiled:
            if union is not None:   # None: no row of any tile survives the mask
                items.append((union, c))
            continue
        summed = _row_sum(m, dep, over, sizes)
        if summed is not None:      # None: a masked sum that no row survives
            items.append((summed, c))
    return Rat.make(Poly.make(items), r.den)


def _row_sum(m: Monomial, dep: frozenset[int], sizes: Sizes,
             tiles: Sizes | None = None) -> Monomial | None:
    if any(isinstance(a, (RowSum, Summed)) and a.digits & dep for a, _ in m.vars):
        raise NotModelled("sums over key rows a value that already sums over key rows")
    unit_b = [(a, c) for a, c in m.unit.coeffs if a.digits & dep]
    vars_b = [(a, k) for a, k in m.vars if a.digits & dep]
    bound = bind_rows([a for a, _ in unit_b] + [a for a, _ in vars_b], dep, sizes, tiles)
    tile = [] if bound.tile is None else [(Ind.make(bound.tile), 1)]
    body = Monomial(Lin.make(Fraction(0), unit_b).subst(bound.subst),
                    _powers([*((a.subst(bound.subst), k) for a, k in vars_b), *tile]))
    if body.digits & dep:
        raise NotModelled("sums over key rows that are mixed with another index")
    rest_unit = Lin(m.unit.const, tuple((a, c) for a, c in m.unit.coeffs
                                        if not a.digits & dep))
    rest_vars = [(a, k) for a, k in m.vars if not a.digits & dep]
    total = RowSum.guarded(body, bound.lo, bound.hi)
    if total is None:
        return None
    return Monomial(rest_unit, _powers([*rest_vars, (total, 1)]))


def max_over(r: Rat, over: Mapping[int, int]) -> Rat:
    """max over the digits `over` (a max reduction)."""
    if r.inf:
        return r
    lin = r.as_lin()
    if lin is None:
        raise NotModelled("takes the max over an axis of a value that is not a linear form "
                          "of scores (e.g. of exponentials)")
    digits = frozenset(over)
    dep = [(a, c) for a, c in lin.coeffs if a.digits & digits]
    if not dep:
        return r
    rest = Lin(lin.const, tuple((a, c) for a, c in lin.coeffs if not a.digits & digits))
    used = frozenset().union(*(a.digits & digits for a, _ in dep))
    bound = bind_rows([a for a, _ in dep], used, over)
    body = Lin.make(Fraction(0), dep).subst(bound.subst)
    if body.digits & used:
        raise NotModelled("takes a max over key rows that are mixed with another index")
    lo, hi = bound.lo, bound.hi
    masks = pens(body)
    if masks:      # a masked member: cut to the rows some query sees (-inf if none)
        g = conjunction(p.guard for p in masks)
        bare = Lin(body.const, tuple((a, c) for a, c in body.coeffs if not isinstance(a, Pen)))
        cut = g.cut(lo, hi) if isinstance(g, Guard) else None if g is False else (None, lo, hi)
        if cut is None:
            return NEG_INF
        guard, lo, hi = cut
        body = bare if guard is None else bare + Lin(Fraction(0), ((Pen.make(guard),
                                                                     Fraction(1)),))
    inner = make_max([Elem(body, Ranges.interval(lo, hi))], False)
    inner_lin = inner.as_lin()
    assert inner_lin is not None
    return Rat.of_lin(inner_lin + rest)
