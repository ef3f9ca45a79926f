"""The masked reference in the algebra: attention over the keys a declared mask allows.

For an output element at query row t (an affine form of the output's digits) of group G,
the query's sequence position p (model/problem.py `positions`) must be affine in the same
digits: ``p = t + δ_q`` over the rows t takes (contiguous rows, a zigzag half-chunk, the
last S_q positions of a decode). The group's key rows split into runs whose positions are
``b + δ_k`` (one run when contiguous, two per shard under @zigzag). On each run the mask
is one guard over (BOUND, the output's digits):

- causal:OFF   ``b + δ_k - p - OFF <= 0``
- window:W     ``b + δ_k - p <= 0`` and ``p - W + 1 - b - δ_k <= 0``
- padding:LEN  ``b + δ_k - LEN + 1 <= 0``

and the reference's numerator and denominator are the guarded row sums of the runs
(each cut: rows no query sees leave it, constraints that always hold leave the guard).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from functools import lru_cache

import numpy as np

from meshproof.model.masks import MaskKind
from meshproof.model.problem import Problem
from meshproof.verify.semantics import poly as P
from meshproof.verify.semantics.atoms import Atom
from meshproof.verify.semantics.guards import Guard, Ind, extremes
from meshproof.verify.semantics.index import BOUND, Aff
from meshproof.verify.semantics.poly import Monomial, Poly, RowSum

B_ROW = Aff(0, ((BOUND, 1),))


def restrict(p: Poly, sizes: Mapping[int, int]) -> Poly:
    """`p` with the box of every mask cut to the exact digit ranges `sizes` (each [0, n))
    and its masked sums cut again: what the judge compares, whatever superset of the
    ranges the kernel's masks carried through reshapes."""
    mapping: dict[Atom, Atom | int] = {}
    for a in set(p.variables()):
        if isinstance(a, RowSum) and a.guard is not None:
            g = a.guard.within(sizes)
            bare = Monomial(a.body.unit, tuple((x, k) for x, k in a.body.vars
                                               if not isinstance(x, Ind)))
            if g is False:
                mapping[a] = 0
            elif g is True:
                mapping[a] = RowSum.make(bare, a.lo, a.hi)
            else:
                assert isinstance(g, Guard)
                cut = RowSum.guarded(Monomial(bare.unit, P._powers((*bare.vars,
                                                                  (Ind.make(g), 1)))),
                                     a.lo, a.hi)
                mapping[a] = 0 if cut is None else cut
        elif isinstance(a, Ind):
            g = a.guard.within(sizes)
            mapping[a] = int(g) if isinstance(g, bool) else Ind.make(g)
    if not mapping:
        return p
    out: list[tuple[Monomial, Fraction]] = []
    for m, c in p.terms:
        vars_: list[tuple[Atom, int]] = []
        zero = False
        for a, k in m.vars:
            new = mapping.get(a, a)
            if new == 0:
                zero = True
                break
            if new != 1:
                assert isinstance(new, Atom)
                vars_.append((new, k))
        if not zero:
            out.append((Monomial(m.unit, P._powers(vars_)), c))
    return Poly.make(out)


@lru_cache(maxsize=64)
def _positions(problem: Problem, group: int) -> tuple[np.ndarray, tuple[tuple[int, int, int],
                                                                        ...]]:
    """The group's query positions and its key runs (first row, end row, δ_k)."""
    queries, keys = problem.positions(group)
    if problem.position_rows:      # rows are positions already: one run, the identity
        n = len(keys)
        return np.arange(len(queries)), ((0, n, 0),)
    breaks = np.flatnonzero(np.diff(keys) != 1) + 1
    starts = [0, *breaks.tolist()]
    ends = [*breaks.tolist(), len(keys)]
    runs = tuple((a, b, int(keys[a]) - a) for a, b in zip(starts, ends, strict=True))
    return queries, runs


def query_position(problem: Problem, group: int, t: Aff,
                   sizes: dict[int, int]) -> Aff | None:
    """The query position of the rows t, when it is t + δ_q over every row t takes."""
    queries, _ = _positions(problem, group)
    ex = extremes(t, {d: (0, n - 1) for d, n in sizes.items()})
    if ex is None or ex[0] < 0 or ex[1] >= len(queries):
        return None
    lo, hi = ex
    seg = queries[lo:hi + 1]
    if not np.array_equal(seg - seg[0], np.arange(hi - lo + 1)):
        return None
    return t.shift(int(queries[lo]) - lo)


def constraints(problem: Problem, p: Aff, delta: int) -> list[Aff]:
    """The mask at query position p and key position b + delta, as constraints <= 0."""
    mask = problem.mask
    assert mask is not None
    k = B_ROW.shift(delta)
    if mask.kind is MaskKind.CAUSAL:
        return [k + p.scale(-1).shift(-mask.param)]
    if mask.kind is MaskKind.WINDOW:
        return [k + p.scale(-1), p.shift(1 - mask.param) + k.scale(-1)]
    return [k.shift(1 - mask.param)]


def masked_sums(problem: Problem, group: int, t: Aff, sizes: dict[int, int],
                den_body: Monomial, num_body: Monomial) -> tuple[Poly, Poly] | None:
    """The reference's numerator and denominator over the allowed keys (None: the query
    position is not affine in the output's digits)."""
    p = query_position(problem, group, t, sizes)
    if p is None:
        return None
    _, runs = _positions(problem, group)
    box = {d: (0, n - 1) for d, n in sizes.items()}
    num, den = P.ZERO_POLY, P.ZERO_POLY
    for lo, hi, delta in runs:
        g = Guard.make(constraints(problem, p, delta), box)
        if g is False:
            continue
        for body, which in ((den_body, 0), (num_body, 1)):
            if g is True:
                total: RowSum | None = RowSum.make(body, lo, hi)
            else:
                assert isinstance(g, Guard)
                total = RowSum.guarded(Monomial(body.unit, P._powers(
                    (*body.vars, (Ind.make(g), 1)))), lo, hi)
            if total is None:
                continue
            if which:
                num = P.add(num, Poly.var(total))
            else:
                den = P.add(den, Poly.var(total))
    return num, den
