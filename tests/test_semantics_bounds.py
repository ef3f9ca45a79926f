"""bounds.py: a max's interval is kept per max and per input bound (B, the score
assumption, d_head): asked again it is the same, asked under another bound it is that
bound's."""

from __future__ import annotations

from fractions import Fraction

from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.bounds import assume, lin_interval
from meshproof.verify.semantics.index import BOUND, Aff
from meshproof.verify.semantics.maxima import Elem, Max, Ranges
from meshproof.verify.semantics.tensor_atoms import Score

D = 8


def _max() -> Max:
    s = Score.make(0, Aff(0), Aff(0), Aff.of(0, {BOUND: 1}), Aff(0), Aff(0), D)
    return Max.make(Elem(Lin.make(Fraction(j), ((s, Fraction(1, 2)),)),
                         Ranges.interval(8 * j, 8 * j + 8)) for j in range(4))


def test_a_max_asked_again_has_the_same_interval() -> None:
    """Correct idiom: the members' largest bounds, 1/2·d·B² + 3."""
    m = Lin.make(Fraction(0), ((_max(), Fraction(1)),))
    first = lin_interval(m, 2.0, D)
    assert first == (-16.0 + 3, 16.0 + 3) and lin_interval(m, 2.0, D) == first


def test_a_kept_interval_is_not_reused_under_another_bound() -> None:
    """Mistake caught: the same max under B = 4, or under a score assumption at B = 2,
    must not read B = 2's interval."""
    m = Lin.make(Fraction(0), ((_max(), Fraction(1)),))
    assert lin_interval(m, 2.0, D) == (-13.0, 19.0)
    assert lin_interval(m, 4.0, D) == (-64.0 + 3, 64.0 + 3)
    capped = lin_interval(m, assume(2.0, 1.0, 0.5), D)    # |q·kᵀ| <= 2
    assert capped == (-1.0 + 3, 1.0 + 3)
