"""poly_atoms.py: a row sum's base (its body's key without the mask), made once and kept
on the interned atom, is what refinement shares cuts by: two masks of one body share it,
two bodies do not."""

from __future__ import annotations

from fractions import Fraction

from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.guards import Ind
from meshproof.verify.semantics.index import BOUND, Aff
from meshproof.verify.semantics.inequalities import Guard
from meshproof.verify.semantics.poly_atoms import RowSum
from meshproof.verify.semantics.poly_terms import Monomial
from meshproof.verify.semantics.tensor_atoms import Score

T = 0


def _sum(j: int, lead: int, weight: Fraction) -> RowSum:
    s = Score.make(0, Aff.of(0, {T: 1}), Aff(0), Aff.of(0, {BOUND: 1}), Aff(0), Aff(0), 8)
    g = Guard.make([Aff.of(-8 * j + lead, {BOUND: 1, T: -1})], {T: (0, 7)})
    assert isinstance(g, Guard)
    out = RowSum.make(Monomial(Lin.make(Fraction(0), ((s, weight),)), ((Ind.make(g), 1),)),
                      8 * j, 8 * j + 8)
    return out


def test_two_masks_of_one_body_share_a_base_asked_again() -> None:
    """Correct idiom: the kept base is the unmasked body's key, the same on every ask."""
    a, b = _sum(0, 0, Fraction(1, 2)), _sum(1, 1, Fraction(1, 2))
    bare = Monomial(a.body.unit).key
    assert a.base == bare and b.base == bare and a.base is a.base


def test_two_bodies_keep_apart_bases() -> None:
    """Mistake caught: a sum of another weight must not read the first one's kept base."""
    a, c = _sum(0, 0, Fraction(1, 2)), _sum(0, 0, Fraction(1, 3))
    assert a.base == Monomial(a.body.unit).key
    assert c.base == Monomial(c.body.unit).key != a.base
