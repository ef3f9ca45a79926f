"""Masked key counts: at every query of an output, each allowed key once, each hidden key
zero times (exactly_once_merge under a mask, spec/semantics.md §6 and §8).

A stored form's partials are guarded row sums ``w · Σ_{b∈[lo,hi)} Ind(G)·exp(c·QK(b) + R)
[· V(b)]``. At a point x of the output's digits each covers the key rows
``[max(lo, L_i(x)), min(hi - 1, U_i(x))]`` (L, U the guard's bounds on BOUND, affine in x),
and the declared mask allows, on each run of key rows whose positions are ``σ·b + δ``
(masked_ref.py; σ = n for a @striped shard, its constraints divided by n), another such
interval. The counts (relative to the lightest row of the
denominator at x) must be 1 on the allowed keys and 0 elsewhere.

The count pattern at x is fixed by the order of the end points, all affine in x: between
two consecutive crossings of any two end-point functions it does not change. So for a
guard over one digit the reader checks the crossings (their floor and ceiling), the ends
of the digit's range and the first point after each -- a few hundred points
instead of every query row, and per point only the keys where a count can change. Several
digits are enumerated (up to `ENUMERATE_LIMIT` points), a non-unit coefficient of the key
row is not read (unknown): never a guess.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from meshproof.model.problem import Problem
from meshproof.verify.semantics.guards import Ind
from meshproof.verify.semantics.index import BOUND, Aff
from meshproof.verify.semantics.judge import B_ROW, ratio
from meshproof.verify.semantics.masked_ref import _positions, constraints, query_position, unit_key
from meshproof.verify.semantics.poly_atoms import RowSum
from meshproof.verify.semantics.poly_terms import Monomial
from meshproof.verify.semantics.rational import Rat
from meshproof.verify.semantics.tensor_atoms import Input, Score
from meshproof.verify.semantics.views import linear_terms, pieces, split_value

ENUMERATE_LIMIT = 1 << 16
Point = tuple[int, ...]
Bounds = list[Aff]      # constraints <= 0 over BOUND and the point's digits


@dataclass(frozen=True, slots=True)
class Span:
    """A partial: rows [lo, hi) under `cons` with weight (coefficient, exp constant)."""

    lo: int
    hi: int
    weight: tuple[Fraction, Fraction]
    cons: tuple[Aff, ...]


@dataclass(frozen=True, slots=True)
class WrongPair:
    """The first (query, key) an output counts wrong."""

    query_row: int            # the group's query row (harness row)
    query: int                # its sequence position (the row without a mask)
    key_row: int
    key: int                  # the key row's sequence position
    num: float
    den: float | None
    expected: int


@dataclass(frozen=True, slots=True)
class MaskedCounts:
    wrong: WrongPair | None
    unknown: str | None = None
    points: int = 0


def _strip(body: Monomial) -> tuple[Monomial, tuple[Aff, ...]]:
    inds = [a for a, _ in body.vars if isinstance(a, Ind)]
    cons = tuple(c for a in inds for c in a.guard.constraints)
    return Monomial(body.unit, tuple((a, k) for a, k in body.vars
                                     if not isinstance(a, Ind))), cons


def spans(form: Rat, group: int) -> tuple[list[Span], list[Span] | None] | str:
    """The numerator's and the denominator's partials, or why there are none to count."""
    if form.inf:
        return "the output is an infinite constant"
    num = linear_terms(form)
    single = len(form.den) == 1 and form.den[0][1] == 1
    den = linear_terms(Rat(form.den[0][0])) if single else None
    if num is None or (form.den and den is None):
        return "the output is not one ratio of sums of partials"
    cuts = {p for t in num + (den or []) for p in (t.sum.lo, t.sum.hi)}

    def tally(with_value: bool) -> list[Span] | str:
        out = []
        for p in pieces(num if with_value else den or [], cuts):
            body, cons = _strip(p.body)
            scores = [a for a, _ in body.unit.coeffs if isinstance(a, Score)]
            if len(scores) != 1 or scores[0].j != B_ROW or len(body.unit.coeffs) != 1 or \
                    p.rest.key:
                return "a term that is not a partial of the keys"
            value: Input | None = None
            if with_value:
                sv = split_value(body)
                if sv is None:
                    return "a numerator term that is not one element of V times a weight"
                value = sv[1]
            elif body.vars:
                return "a denominator term with extra factors"
            if scores[0].group != group or (value is not None and value.group != group):
                return "a term of another attention problem"
            assert isinstance(p.unit.const, Fraction)
            out.append(Span(p.lo, p.hi, (p.coef, p.unit.const), cons))
        return out

    n = tally(True)
    d = tally(False) if den is not None else None
    if isinstance(n, str):
        return n
    if isinstance(d, str):
        return "denominator: " + d
    return n, d


def _interval(cons: tuple[Aff, ...], lo: int, hi: int, at: dict[int, int]
              ) -> tuple[int, int] | None:
    """The rows [a, b) of [lo, hi) the constraints allow at a point (BOUND the row)."""
    for c in cons:
        cb = c.coeff(BOUND)
        rest = c.const + sum(k * at[d] for d, k in c.terms if d != BOUND)
        if cb == 1:
            hi = min(hi, -rest + 1)
        elif cb == -1:
            lo = max(lo, rest)
        elif cb == 0:
            if rest > 0:
                return None
        else:
            raise ValueError("a non-unit coefficient of the key row")
    return (lo, hi) if lo < hi else None


def _functions(cons: tuple[Aff, ...], d: int) -> list[tuple[int, int]]:
    """The end points the constraints put on BOUND, as (slope, intercept) in digit d."""
    out = []
    for c in cons:
        cb = c.coeff(BOUND)
        rest = c.without(frozenset({BOUND}))
        if cb > 0:      # the end U + 1 of b <= U = -rest
            out.append((-rest.coeff(d), -rest.const + 1))
        else:           # the start L = rest of b >= L (and rest itself for cb = 0)
            out.append((rest.coeff(d), rest.const))
    return out


def crossing_points(funcs: list[tuple[int, int]], size: int) -> list[int]:
    """Every crossing of two end-point functions (floor and ceiling), the ends of the
    digit's range and the first point after each (the pattern is the same up to the next
    crossing, so the first point of each stretch is where a wrong count first shows: the
    smallest query of the stretch when positions grow with the digit)."""
    crit = {0, size - 1}
    for (a1, c1), (a2, c2) in itertools.combinations(set(funcs), 2):
        if a1 != a2:
            x = Fraction(c2 - c1, a1 - a2)
            for v in (math.floor(x), math.ceil(x)):
                if 0 <= v < size:
                    crit.add(v)
    pts = sorted(crit)
    mids = [u + 1 for u, v in itertools.pairwise(pts) if v - u > 1]
    return sorted(crit | set(mids))


def count_masked(form: Rat, problem: Problem, group: int, t: Aff, sizes: dict[int, int],
                 exhaustive: bool = False) -> MaskedCounts:
    """Whether the output counts each allowed key once and each hidden key zero times at
    every query (t: the output's query row, affine in its digits `sizes`)."""
    got = spans(form, group)
    if isinstance(got, str):
        return MaskedCounts(None, got)
    num, den = got
    n = problem.kv_rows(group)
    queries, runs = _positions(problem, group)
    if problem.mask is not None:
        p = query_position(problem, group, t, sizes)
        if p is None:
            return MaskedCounts(None, "the output's query positions are not affine in its "
                                "rows (a store across a zigzag chunk)")
        want = [(run[0], run[1], tuple(constraints(problem, p, run))) for run in runs]
        if not all(unit_key(list(cs)) for _, _, cs in want):
            return MaskedCounts(None, "the mask's key positions are strided against the "
                                "query positions (a non-unit coefficient of the key row)")
    else:
        p = t
        want = [(0, n, ())]
    every = num + (den or [])
    digits = sorted({d for s in every for c in s.cons for d in c.digits if d != BOUND} |
                    {d for _, _, cs in want for c in cs for d in c.digits if d != BOUND} |
                    set(t.digits))
    if any(abs(c.coeff(BOUND)) > 1 for s in every for c in s.cons):
        return MaskedCounts(None, "a mask with a non-unit coefficient of the key row")
    if len(digits) == 1 and not exhaustive:
        (d,) = digits
        funcs = [f for s in every for f in _functions(s.cons, d)] + \
            [f for _, _, cs in want for f in _functions(cs, d)] + [(1, 0), (0, 0)] + \
            [(0, x) for s in every for x in (s.lo, s.hi)] + \
            [(0, x) for lo, hi, _ in want for x in (lo, hi)]
        points: list[Point] = [(x,) for x in crossing_points(funcs, sizes[d])]
    else:
        total = math.prod(sizes[d] for d in digits)
        if total > ENUMERATE_LIMIT:
            return MaskedCounts(None, f"the masks depend on {len(digits)} digits with "
                                f"{total} points: too many to read")
        points = list(itertools.product(*(range(sizes[d]) for d in digits)))
    top = max((s.weight for s in every), key=lambda w: ratio(w, every[0].weight),
              default=(Fraction(1), Fraction(0)))
    rel = {s: ratio(s.weight, top) for s in every}
    order = []
    for pt in points:
        at = dict(zip(digits, pt, strict=True))
        row = t.const + sum(k * at[d] for d, k in t.terms)
        order.append((int(queries[row]) if problem.mask is not None else row, pt))
    order.sort()
    for query, pt in order:
        at = dict(zip(digits, pt, strict=True))
        wrong = _check(num, den, want, at, rel, n)
        if wrong is not None:
            row = t.const + sum(k * at[d] for d, k in t.terms)
            b, cn, cd, exp = wrong
            key = next(step * b + delta for lo, hi, step, delta in runs if lo <= b < hi) \
                if problem.mask is not None else b
            if problem.position_rows:   # the form's rows are positions: name harness rows
                qpos, kpos = problem.positions(group)
                row = int(np.flatnonzero(qpos == query)[0])
                b = int(np.flatnonzero(kpos == key)[0])
            return MaskedCounts(WrongPair(row, query, b, key, cn, cd, exp), None, len(points))
    return MaskedCounts(None, None, len(points))


def _check(num: list[Span], den: list[Span] | None, want: list[tuple[int, int, tuple[Aff, ...]]],
           at: dict[int, int], rel: dict[Span, float], n: int
           ) -> tuple[int, float, float | None, int] | None:
    """The first key row counted wrong at this point: (row, num, den, expected)."""
    cover: list[tuple[int, int, float, int]] = []       # (lo, hi, weight, 0 num / 1 den)
    for side, spans_ in ((0, num), (1, den or [])):
        for s in spans_:
            iv = _interval(s.cons, s.lo, s.hi, at)
            if iv is not None:
                cover.append((iv[0], iv[1], rel[s], side))
    allowed = [iv for lo, hi, cs in want if (iv := _interval(cs, lo, hi, at)) is not None]
    cuts = sorted({0, n, *(x for a, b, _, _ in cover for x in (a, b)),
                   *(x for a, b in allowed for x in (a, b))})
    counts = []
    for b in cuts[:-1]:
        cn = sum(w for a, e, w, side in cover if side == 0 and a <= b < e)
        cd = sum(w for a, e, w, side in cover if side == 1 and a <= b < e)
        exp = sum(1 for a, e in allowed if a <= b < e)
        counts.append((b, cn, cd, exp))
    base = [cd if den is not None else cn for _, cn, cd, exp in counts if exp]
    every = [cd if den is not None else cn for _, cn, cd, _ in counts]
    ref: float = min((x for x in base if x > 0),
                     default=min((x for x in every if x > 0), default=1.0))
    for b, cn, cd, exp in counts:
        rn, rd = cn / ref, cd / ref
        if not math.isclose(rn, exp, abs_tol=1e-9) or \
                (den is not None and not math.isclose(rd, exp, abs_tol=1e-9)):
            return b, rn, (rd if den is not None else None), exp
    return None


def guarded(form: Rat) -> bool:
    """Whether a form holds a mask (an indicator, in a sum or outside)."""
    polys = [form.num, *(f for f, _ in form.den)] if not form.inf else []
    for p in polys:
        for a in p.variables():
            if isinstance(a, Ind) or (isinstance(a, RowSum) and
                                      any(isinstance(x, Ind) for x, _ in a.body.vars)):
                return True
    return False


def pair_words(problem: Problem, w: WrongPair) -> str:
    """The first wrong pair in words."""
    what = "position" if problem.mask is not None else "row"
    times = f"{_num(w.num)} time(s) in the numerator" + \
        (f" and {_num(w.den)} in the denominator" if w.den is not None else "")
    if problem.mask is None:
        return (f"query row {w.query_row} counts key row {w.key_row} {times} (expected "
                f"{w.expected})")
    mask = problem.mask.text
    if w.expected == 0:
        return (f"query {what} {w.query} counts key {what} {w.key} {times}, which the "
                f"{mask} mask hides (expected 0)")
    return (f"query {what} {w.query} counts key {what} {w.key} {times}, which the {mask} "
            f"mask allows (expected 1)")


def _num(x: float) -> str:
    return str(round(x)) if math.isclose(x, round(x), abs_tol=1e-9) else f"{x:.4g}"


__all__ = [
    "ENUMERATE_LIMIT",
    "MaskedCounts",
    "Span",
    "WrongPair",
    "count_masked",
    "crossing_points",
    "guarded",
    "pair_words",
    "spans",
]
