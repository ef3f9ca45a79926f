"""The masked reference in the algebra: attention over the keys a declared mask allows.

For an output element at query row t (an affine form of the output's digits) of group G,
the query's sequence position p (model/problem.py `positions`) must be affine in the same
digits: ``p = σ·t + δ_q`` over the rows t takes (σ = 1: contiguous rows, a zigzag
half-chunk, the last S_q positions of a decode; σ = n: a block of the @striped layout,
whose row t is position b + n·t). The group's key rows split into runs whose positions are
``σ_k·b + δ_k`` (one run when contiguous, two per shard under @zigzag, one per shard of
stride n under @striped). On each run, with k = σ_k·b + δ_k, the mask is one guard over
(BOUND, the output's digits):

- causal:OFF   ``k - p - OFF <= 0``
- window:W     ``k - p <= 0`` and ``p - W + 1 - k <= 0``
- padding:LEN  ``k - LEN + 1 <= 0``

each divided by the gcd of its coefficients (guards.py): under @striped σ = σ_k = n, so
``n·b - n·t + c <= 0`` is ``b - t + ⌈c/n⌉ <= 0``, a unit coefficient of the key row again
(the stride is an exact integer division, nothing is lost). A coefficient of the key row
that stays above 1 (striped keys against contiguous queries) is not read: unknown.

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
from meshproof.verify.semantics.atom_base import Atom
from meshproof.verify.semantics.guards import Ind
from meshproof.verify.semantics.index import BOUND, Aff
from meshproof.verify.semantics.inequalities import Guard, extremes, normal
from meshproof.verify.semantics.poly_atoms import RowSum
from meshproof.verify.semantics.poly_intervals import coarsen, common
from meshproof.verify.semantics.poly_terms import ZERO_POLY, Monomial, Poly, _powers

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
                cut = RowSum.guarded(Monomial(bare.unit, _powers((*bare.vars,
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
            out.append((Monomial(m.unit, _powers(vars_)), c))
    return Poly.make(out)


Run = tuple[int, int, int, int]      # (first row, end row, σ_k, δ_k): position σ_k·b + δ_k


def _runs(keys: np.ndarray) -> tuple[Run, ...]:
    """The key rows split into maximal runs of evenly spaced increasing positions, read
    from the left (one row alone is a run of stride 1)."""
    out: list[Run] = []
    a, n = 0, len(keys)
    while a < n:
        step = int(keys[a + 1] - keys[a]) if a + 1 < n else 1
        if step < 1:
            step = 1
        b = a + 1
        while b < n and int(keys[b] - keys[b - 1]) == step:
            b += 1
        if b == a + 1:
            step = 1
        out.append((a, b, step, int(keys[a]) - step * a))
        a = b
    return tuple(out)


@lru_cache(maxsize=64)
def _positions(problem: Problem, group: int) -> tuple[np.ndarray, tuple[Run, ...]]:
    """The group's query positions and its key runs."""
    queries, keys = problem.positions(group)
    if problem.position_rows:      # rows are positions already: one run, the identity
        n = len(keys)
        return np.arange(len(queries)), ((0, n, 1, 0),)
    return queries, _runs(keys)


def query_position(problem: Problem, group: int, t: Aff,
                   sizes: dict[int, int]) -> Aff | None:
    """The query position of the rows t, when it is σ·t + δ_q (σ >= 1) over every row t
    takes."""
    queries, _ = _positions(problem, group)
    ex = extremes(t, {d: (0, n - 1) for d, n in sizes.items()})
    if ex is None or ex[0] < 0 or ex[1] >= len(queries):
        return None
    lo, hi = ex
    seg = queries[lo:hi + 1]
    step = int(seg[1] - seg[0]) if hi > lo else 1
    if step < 1 or not np.array_equal(seg - seg[0], step * np.arange(hi - lo + 1)):
        return None
    return t.scale(step).shift(int(queries[lo]) - step * lo)


def constraints(problem: Problem, p: Aff, run: Run) -> list[Aff]:
    """The mask at query position p and key position σ_k·b + δ_k of a run, as constraints
    <= 0, each divided by the gcd of its coefficients."""
    mask = problem.mask
    assert mask is not None
    k = B_ROW.scale(run[2]).shift(run[3])
    if mask.kind is MaskKind.CAUSAL:
        raw = [k + p.scale(-1).shift(-mask.param)]
    elif mask.kind is MaskKind.WINDOW:
        raw = [k + p.scale(-1), p.shift(1 - mask.param) + k.scale(-1)]
    else:
        raw = [k.shift(1 - mask.param)]
    out = []
    for c in raw:
        n = normal(c)
        assert isinstance(n, Aff)       # every constraint holds the key row
        out.append(n)
    return out


def unit_key(cons: list[Aff]) -> bool:
    """Whether every constraint's key-row coefficient is -1, 0 or 1 (what is read)."""
    return all(abs(c.coeff(BOUND)) <= 1 for c in cons)


def _empty(cons: list[Aff], box: dict[int, tuple[int, int]]) -> bool:
    """Whether a lower and an upper bound on the key row never meet at any point of the
    box (their sum, free of the key row, is positive everywhere): the run holds no key
    the mask allows (a striped shard outside a window narrower than the stride)."""
    for up in cons:
        for down in cons:
            if up.coeff(BOUND) == 1 and down.coeff(BOUND) == -1:
                ex = extremes(up + down, box)
                if ex is not None and ex[0] > 0:
                    return True
    return False


def masked_sums(problem: Problem, group: int, t: Aff, sizes: dict[int, int],
                den_body: Monomial, num_body: Monomial) -> tuple[Poly, Poly] | None:
    """The reference's numerator and denominator over the allowed keys (None: the query
    position is not affine in the output's digits)."""
    p = query_position(problem, group, t, sizes)
    if p is None:
        return None
    _, runs = _positions(problem, group)
    box = {d: (0, n - 1) for d, n in sizes.items()}
    sums: tuple[list[Poly], list[Poly]] = ([], [])
    for run in runs:
        lo, hi = run[0], run[1]
        cons = constraints(problem, p, run)
        if not unit_key(cons):
            return None
        g = Guard.make(cons, box)
        if g is False or _empty(cons, box):
            continue
        for body, which in ((den_body, 0), (num_body, 1)):
            if g is True:
                total: RowSum | None = RowSum.make(body, lo, hi)
            else:
                assert isinstance(g, Guard)
                total = RowSum.guarded(Monomial(body.unit, _powers(
                    (*body.vars, (Ind.make(g), 1)))), lo, hi)
            if total is not None:
                sums[which].append(Poly.var(total))
    return _total(sums[1]), _total(sums[0])


def _total(polys: list[Poly]) -> Poly:
    """The sum of the runs' sums, refined to common intervals and coarsened once (adding
    them one at a time refined and coarsened the growing sum per run: n² for n runs)."""
    if not polys:
        return ZERO_POLY
    if len(polys) == 1:
        return polys[0]
    return coarsen(Poly.make(t for p in common(*polys) for t in p.terms))
