"""Exact arithmetic on element forms (`Poly`), elementwise and over axes.

Every function returns the exact form of the result, or raises `NotModelled` with the
reason in words; the interpreter then makes the value opaque at the op's line (an opaque
output is never proved). Identities used: exp(a)·exp(b) = exp(a + b); exp(k·log X) = X^k;
max is associative, commutative and idempotent, and max(-inf, x) = x; exp(-inf) = 0; a
sum over key rows with one body merges its row ranges; sum_f Q[.., f]·K[.., f] over every
feature is the score atom QK.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from meshproof.verify.semantics.index import BOUND, Aff, Subst, mixed_radix
from meshproof.verify.semantics.scalars import ONE, ZERO, Pieces, Ranges, Weight
from meshproof.verify.semantics.terms import (
    QK,
    Atom,
    Body,
    Elem,
    Input,
    Lin,
    Log,
    Max,
    Poly,
    Pos,
    Scrambled,
    TermWeight,
    rows_of,
)


class NotModelled(Exception):
    """The exact form of a result is outside the algebra; the message says why."""


class Scramble(NotModelled):
    """A dot whose contraction pairs the wrong indices: the caller substitutes a fresh
    symbol (terms.Scrambled) and carries on, so later mistakes are still found."""


ZERO_POLY = Poly()
NEG_INF = Poly((), -1)
POS_INF = Poly((), 1)


def add(a: Poly, b: Poly) -> Poly:
    if a.inf or b.inf:
        if a.inf and b.inf and a.inf != b.inf:
            raise NotModelled("adds +inf and -inf (undefined)")
        if (a.inf and b.as_const() is None) or (b.inf and a.as_const() is None):
            return Poly((), a.inf or b.inf)
        return Poly((), a.inf or b.inf)
    return Poly.make(a.terms + b.terms)


def _scale_weight(w: TermWeight, k: Weight) -> TermWeight:
    return w.times(k) if isinstance(w, Pieces) else w * k


def scale(a: Poly, k: Fraction) -> Poly:
    if a.inf:
        if k == 0:
            raise NotModelled("multiplies an infinite value by 0 (undefined)")
        return Poly((), a.inf if k > 0 else -a.inf)
    if k == 0:
        return ZERO_POLY
    kw = Weight.of(k)
    return Poly(tuple((b, _scale_weight(w, kw)) for b, w in a.terms))


def neg(a: Poly) -> Poly:
    return scale(a, Fraction(-1))


def sub(a: Poly, b: Poly) -> Poly:
    if a.inf and b.inf and a.inf == b.inf:
        raise NotModelled("subtracts an infinite value from itself (inf - inf is undefined; "
                          "this is exp(-inf - (-inf)) for an empty partial)")
    return add(a, neg(b))


def positive_weights(p: Poly) -> bool:
    """Every term's weight is positive: a sum of such terms cannot cancel."""
    return all(all(pw.positive for _, _, pw in w.parts) if isinstance(w, Pieces)
               else w.positive for _, w in p.terms)


def positive(p: Poly) -> bool:
    """Provably > 0 for every input: positive weights, only positive factors."""
    if p.inf or not p.terms:
        return p.inf > 0
    return positive_weights(p) and all(isinstance(a, Pos) for body, _ in p.terms
                                       for a, _ in body.factors)


def _bound_terms(p: Poly) -> bool:
    return any(isinstance(w, Pieces) for _, w in p.terms)


def mul(a: Poly, b: Poly) -> Poly:
    ca, cb = a.as_const(), b.as_const()
    if isinstance(ca, Fraction) and not b.inf:
        return scale(b, ca)
    if isinstance(cb, Fraction) and not a.inf:
        return scale(a, cb)
    if a.inf or b.inf:
        other = cb if a.inf else ca
        if isinstance(other, Fraction):
            return scale(a if a.inf else b, other)
        if isinstance(other, float):
            return Poly((), a.inf * b.inf)
        raise NotModelled("multiplies an infinite value by a value of unknown sign")
    if _bound_terms(a) and _bound_terms(b):
        # Keep one factor whole rather than form a double sum over key rows: o / l * l
        # then cancels through the power of pos(l).
        if positive(b):
            return _times_pos(a, b, 1)
        if positive(a):
            return _times_pos(b, a, 1)
        raise NotModelled("multiplies two sums over key rows (a product of two partials)")
    items: list[tuple[Body, TermWeight]] = []
    for ba, wa in a.terms:
        for bb, wb in b.terms:
            items.append((ba * bb, _mul_weights(wa, wb)))
    return Poly.make(items)


def _mul_weights(wa: TermWeight, wb: TermWeight) -> TermWeight:
    if isinstance(wa, Pieces):
        assert isinstance(wb, Weight)
        return wa.times(wb)
    if isinstance(wb, Pieces):
        return wb.times(wa)
    return wa * wb


def _times_pos(a: Poly, x: Poly, k: int) -> Poly:
    factor = Poly.make([(Body((), ((Pos(x), k),)), Weight.of(1))])
    return Poly.make((ba * bb, _mul_weights(wa, wb)) for ba, wa in a.terms
                     for bb, wb in factor.terms)


def div(a: Poly, b: Poly) -> Poly:
    cb = b.as_const()
    if isinstance(cb, Fraction):
        if cb == 0:
            raise NotModelled("divides by zero")
        return scale(a, 1 / cb)
    if b.inf:
        if a.inf:
            raise NotModelled("divides an infinite value by an infinite value (undefined)")
        return ZERO_POLY
    if len(b.terms) == 1 and isinstance(b.terms[0][1], Weight) and \
            all(isinstance(x, Pos) for x, _ in b.terms[0][0].factors):
        # w * exp(L) * prod(pos^k) with w != 0 is never 0: invert it exactly
        body, w = b.terms[0]
        assert isinstance(w, Weight)
        inv = w.inverse()
        if inv is not None:
            inverse = Body.make(((x, -c) for x, c in body.expo),
                                ((x, -k) for x, k in body.factors))
            return mul(a, Poly.make([(inverse, inv)]))
    if positive(b):
        if a.inf:
            return a
        return _times_pos(a, b, -1)
    raise NotModelled("divides by a value that may be zero or negative")


def exp(a: Poly) -> Poly:
    lin = a.as_lin()
    if lin is None:
        raise NotModelled("takes exp of a value that is not a linear form of scores, maxima "
                          "and logarithms (e.g. exp of a sum of exponentials)")
    if lin.infinite:
        if lin.infinite < 0:
            return ZERO_POLY
        raise NotModelled("takes exp(+inf)")
    if isinstance(lin.const, float) and math.isnan(lin.const):
        raise NotModelled("takes exp of an undefined value")
    expo: list[tuple[Atom, Fraction]] = []
    factors: list[tuple[Atom, int]] = []
    for atom, c in lin.coeffs:
        if isinstance(atom, Log) and c.denominator == 1:
            factors.append((Pos(atom.arg), int(c)))
        else:
            expo.append((atom, c))
    assert isinstance(lin.const, Fraction)
    return Poly.make([(Body.make(expo, factors), Weight.of(ONE, lin.const))])


def log(a: Poly) -> Poly:
    c = a.as_const()
    if isinstance(c, Fraction):
        if c <= 0:
            raise NotModelled("takes log of a constant <= 0")
        return Poly.const(Fraction(math.log(c)))
    if a.inf:
        if a.inf > 0:
            raise NotModelled("takes log(+inf)")
        return NEG_INF
    if len(a.terms) == 1 and isinstance(a.terms[0][1], Weight) and \
            len(a.terms[0][1].parts) == 1 and a.terms[0][1].parts[0][1] > 0 and \
            all(isinstance(x, Pos) for x, _ in a.terms[0][0].factors):
        body, w = a.terms[0]
        assert isinstance(w, Weight)
        ce, wr = w.parts[0]
        items = [*body.expo, *((Log(x.arg), Fraction(k)) for x, k in body.factors
                               if isinstance(x, Pos))]
        const = ce + (Fraction(math.log(wr)) if wr != 1 else ZERO)
        return Poly.of_lin(Lin.make(const, items))
    if positive(a):
        return Poly.atom(Log(a))
    raise NotModelled("takes log of a value that may be zero or negative")


def _elems(lin: Lin, is_min: bool) -> list[Elem] | None:
    """The members of a maximum that `lin` contributes; None if it is the absorbing
    infinity (+inf for max, -inf for min)."""
    if lin.infinite:
        neutral = -1 if not is_min else 1
        return [] if lin.infinite == neutral else None
    for atom, c in lin.coeffs:
        if isinstance(atom, Max) and atom.is_min == is_min and c == 1:
            rest = Lin(lin.const, tuple((a, k) for a, k in lin.coeffs if a != atom))
            return [Elem(e.body + rest, e.rows) for e in atom.elems]
    return [Elem(lin)]


def maximum(a: Poly, b: Poly, is_min: bool = False) -> Poly:
    la, lb = a.as_lin(), b.as_lin()
    if la is None or lb is None:
        raise NotModelled(f"takes the {'minimum' if is_min else 'maximum'} of values that are "
                          "not linear forms of scores and maxima (e.g. of sums of "
                          "exponentials)")
    ea, eb = _elems(la, is_min), _elems(lb, is_min)
    if ea is None or eb is None:
        return POS_INF if not is_min else NEG_INF
    return _make_max(ea + eb, is_min)


def _make_max(elems: Iterable[Elem], is_min: bool) -> Poly:
    ranged: dict[Lin, Ranges] = {}
    plain: dict[str, Lin] = {}
    best_const: Fraction | None = None
    for e in elems:
        if e.rows is not None:
            if e.rows.empty:
                continue
            ranged[e.body] = ranged[e.body] | e.rows if e.body in ranged else e.rows
        elif not e.body.coeffs:
            assert isinstance(e.body.const, Fraction)
            c = e.body.const
            if best_const is None or (c < best_const if is_min else c > best_const):
                best_const = c
        else:
            plain[e.body.key] = e.body
    out = [Elem(b, r) for b, r in ranged.items()] + [Elem(b) for b in plain.values()]
    if best_const is not None:
        out.append(Elem(Lin(best_const)))
    if not out:
        return NEG_INF if not is_min else POS_INF
    if len(out) == 1 and out[0].rows is None:
        return Poly.of_lin(out[0].body)
    return Poly.atom(Max(out, is_min))


@dataclass(frozen=True, slots=True)
class Bound:
    subst: Subst
    lo: int
    hi: int


def bind_rows(atoms: list[Atom], over: frozenset[int], sizes: Mapping[int, int]) -> Bound:
    """Rename the summed digits `over` into the canonical bound key row: the key-row
    coordinate of the score (or of K, V) becomes BOUND itself, so that partials of
    different shards compare equal and their rows merge."""
    for a in atoms:
        if isinstance(a, (Max, Log, Pos)) and a.digits & over:
            raise NotModelled("reduces over an axis that a maximum or a sum inside the "
                              "value also depends on")
    refs = sorted((a for a in atoms if (r := rows_of(a)) is not None and r.digits & over),
                  key=lambda a: (0 if isinstance(a, (QK, Scrambled)) else 1 if
                                 getattr(a, "tensor", "") == "K" else 2, a.key))
    if not refs:
        raise NotModelled("reduces over an axis that is not the key axis (e.g. over heads, "
                          "query rows or features)")
    row = rows_of(refs[0])
    assert row is not None
    free = row.without(over)
    if free.terms:
        raise NotModelled("reduces over key rows whose range depends on another index")
    if row.digits != over:
        raise NotModelled("reduces over the key axis together with another axis")
    n = mixed_radix(row, sizes, over)
    if n is None:
        raise NotModelled("reduces over key rows that are strided or repeated")
    lead = next(d for d, c in row.terms if c == 1)
    rest = Aff(0, tuple((d, -c) for d, c in row.terms if d != lead))
    subst = {lead: Aff(-row.const, ((BOUND, 1),)) + rest}
    return Bound(subst, row.const, row.const + n)


def _contract(body: Body, over: frozenset[int], sizes: Mapping[int, int],
              features: int) -> Body | None:
    """sum_f Q[.., f] K[.., f] over every feature -> QK; None if the body has no Q·K pair
    on the summed digits."""
    qs = [(a, k) for a, k in body.factors if isinstance(a, Input) and a.tensor == "Q" and
          a.digits & over]
    ks = [(a, k) for a, k in body.factors if isinstance(a, Input) and a.tensor == "K" and
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
    if fq.const or mixed_radix(fq, sizes, over) != features or fq.digits != over:
        raise NotModelled("contracts only part of the features of Q and K")
    for c in (q.coords[0], q.coords[1], k.coords[0], k.coords[1]):
        if c.digits & over:
            raise Scramble("contracts Q's features against K's rows or heads")
    rest = [(a, p) for a, p in body.factors if a != q and a != k]
    if any(a.digits & over for a, _ in rest) or any(a.digits & over for a, _ in body.expo):
        raise NotModelled("contracts the features of a product with more than Q and K")
    score = QK(q.group, q.coords[0], q.coords[1], k.coords[0], k.coords[1])
    return Body.make(body.expo, [*rest, (score, 1)])


def sum_over(p: Poly, over: Mapping[int, int], features: int) -> Poly:
    """sum over the digits `over` (id -> size), e.g. a reduction or a dot's contraction."""
    if p.inf:
        return p
    digits = frozenset(over)
    items: list[tuple[Body, TermWeight]] = []
    for body, w in p.terms:
        dep = body.digits & digits
        count = math.prod(over[d] for d in digits - dep)
        w = _scale_weight(w, Weight.of(count))
        if not dep:
            items.append((body, w))
            continue
        contracted = _contract(body, dep, over, features)
        if contracted is not None:
            items.append((contracted, w))
            continue
        if isinstance(w, Pieces):
            raise NotModelled("sums over key rows a value that already sums over key rows")
        atoms = [a for a, _ in body.expo] + [a for a, _ in body.factors]
        bound = bind_rows(atoms, dep, over)
        new = body.subst(bound.subst)
        if new.digits & dep:
            raise NotModelled("sums over key rows that are mixed with another index")
        items.append((new, Pieces.interval(bound.lo, bound.hi, w)))
    return Poly.make(items)


def max_over(p: Poly, over: Mapping[int, int]) -> Poly:
    """max over the digits `over` (a max reduction)."""
    if p.inf:
        return p
    lin = p.as_lin()
    if lin is None:
        raise NotModelled("takes the max over an axis of a value that is not a linear form "
                          "of scores (e.g. of exponentials)")
    digits = frozenset(over)
    dep = [(a, c) for a, c in lin.coeffs if a.digits & digits]
    if not dep:
        return p
    rest = Lin(lin.const, tuple((a, c) for a, c in lin.coeffs if not a.digits & digits))
    used = frozenset().union(*(a.digits & digits for a, _ in dep))
    bound = bind_rows([a for a, _ in dep], used, over)
    body = Lin.make(Fraction(0), dep).subst(bound.subst)
    if body.digits & used:
        raise NotModelled("takes a max over key rows that are mixed with another index")
    elem = Elem(body, Ranges.interval(bound.lo, bound.hi))
    inner = _make_max([elem], False)
    inner_lin = inner.as_lin()
    assert inner_lin is not None
    return Poly.of_lin(inner_lin + rest)
