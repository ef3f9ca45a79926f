"""order.py: the dominated floor of a striped ring's ℓ (a running max with a member per
shard, each masked by its shard's causal guard) reads each member's opened body once,
kept by the member's key and k, and decides as before: ℓ >= 1 when every member has its
row sum, 0 shown when one shard's sum is missing."""

from __future__ import annotations

from fractions import Fraction

import pytest

from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.guards import Ind, Pen
from meshproof.verify.semantics.index import BOUND, Aff
from meshproof.verify.semantics.inequalities import Guard
from meshproof.verify.semantics.maxima import Elem, Max, Ranges
from meshproof.verify.semantics.order import lower_bound
from meshproof.verify.semantics.poly_atoms import RowSum
from meshproof.verify.semantics.poly_terms import Monomial, Poly
from meshproof.verify.semantics.rat import Rat
from meshproof.verify.semantics.tensor_atoms import Score

C = 8
T = 1           # the query digit
HALF = Fraction(1, 2)
SCORE = Score.make(0, Aff.of(0, {T: 1}), Aff(0), Aff.of(0, {BOUND: 1}), Aff(0), Aff(0), 8)


def _guard(j: int) -> Guard:
    g = Guard.make([Aff.of(-j * C, {BOUND: 1, T: -1})], {T: (0, C - 1)})
    assert isinstance(g, Guard)
    return g


def _running_max(n: int) -> Max:
    return Max.make(Elem(Lin.make(Fraction(0), ((SCORE, HALF), (Pen.make(_guard(j)), 1))),
                         Ranges.interval(j * C, j * C + C)) for j in range(n))


def _ell(m: Max, shards: list[int], k: Fraction) -> Rat:
    """Σ_j exp(-k·M) · Σ_{b in shard j} Ind(G_j)·exp(k·s/2): ℓ of the shards given."""
    terms = []
    for j in shards:
        body = Monomial(Lin.make(Fraction(0), ((SCORE, HALF * k),)),
                        ((Ind.make(_guard(j)), 1),))
        s = RowSum.guarded(body, j * C, j * C + C)
        assert s is not None
        terms.append((Monomial(Lin.make(Fraction(0), ((m, -k),)), ((s, 1),)), Fraction(1)))
    return Rat(Poly.make(terms))


@pytest.mark.parametrize("k", [Fraction(1), Fraction(2)])
def test_every_shard_has_its_sum_so_ell_is_at_least_one(k: Fraction) -> None:
    """Correct idiom (asked twice: the second reads the kept opened members)."""
    m = _running_max(6)
    assert lower_bound(_ell(m, list(range(6)), k)) >= 1
    assert lower_bound(_ell(m, list(range(6)), k)) >= 1


def test_a_shard_without_its_sum_shows_no_floor() -> None:
    """Mistake caught: shard 3's member attains the max where no term holds its rows (the
    kept members of the full ℓ above must not answer for this one)."""
    m = _running_max(6)
    assert lower_bound(_ell(m, list(range(6)), Fraction(1))) >= 1
    assert lower_bound(_ell(m, [0, 1, 2, 4, 5], Fraction(1))) == 0.0
