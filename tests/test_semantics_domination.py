"""domination.py: max-domination through its per-max indexes and its kept answers decides
what the plain search over every member decides."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from meshproof.verify.semantics import rational as R
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.domination import _nonpositive, nonpositive
from meshproof.verify.semantics.index import Aff
from meshproof.verify.semantics.maxima import Ranges
from meshproof.verify.semantics.rat import Rat
from meshproof.verify.semantics.rational_max import maximum
from meshproof.verify.semantics.reduce import max_over
from meshproof.verify.semantics.tensor_atoms import Score

X = 0   # a free digit standing for the key row of the scores below


def _score(row_base: int) -> Rat:
    s = Score.make(0, Aff(0), Aff(0), Aff(row_base, ((X, 1),)), Aff(0), Aff(0), 8)
    return Rat.atom(s, Fraction(1, 2))


def _max(*bases: int) -> Rat:
    """The running max of shards of 16 rows starting at each base (one member of one
    body, ranged over their rows)."""
    out = max_over(_score(bases[0]), {X: 16})
    for base in bases[1:]:
        out = maximum(out, max_over(_score(base), {X: 16}))
    return out


def _gap(base: int, m: Rat) -> Lin:
    lin = R.sub(_score(base), m).as_lin()
    assert lin is not None
    return lin


def test_a_score_of_a_shard_the_max_never_saw_is_not_dominated() -> None:
    """Mistake caught: rows [8, 24) straddle a gap of a max over [0, 16) and [32, 48)."""
    m = _max(0, 32)
    assert nonpositive(_gap(32, m), {X: 16})
    assert not nonpositive(_gap(8, m), {X: 16})
    assert not _nonpositive(_gap(8, m), {X: 16}, None, True)


def test_a_kept_answer_is_not_reused_for_wider_rows() -> None:
    """Mistake caught: the same form over 32 rows reaches past the max's 16."""
    m = _max(0)
    assert nonpositive(_gap(0, m), {X: 16})
    assert not nonpositive(_gap(0, m), {X: 32})
    assert nonpositive(_gap(0, m), {X: 16})     # asked again: the kept answer


def test_kept_answers_are_the_searchs() -> None:
    """Correct idiom: every question over a four-shard max, asked twice, is answered as
    the uncached search answers it."""
    m = _max(0, 16, 48, 80)
    for base in (0, 8, 16, 40, 48, 80, 96):
        for size in (8, 16, 32):
            want = _nonpositive(_gap(base, m), {X: size}, None, True)
            assert nonpositive(_gap(base, m), {X: size}) == want
            assert nonpositive(_gap(base, m), {X: size}) == want


@pytest.mark.parametrize("seed", range(4))
def test_covers_is_the_union_test(seed: int) -> None:
    """Ranges.covers (each part inside one of self's) agrees with `self | other == self`."""
    rng = random.Random(seed)

    def ranges() -> Ranges:
        out = Ranges(())
        for _ in range(rng.randrange(4)):
            lo = rng.randrange(40)
            out = out | Ranges.interval(lo, lo + rng.randrange(1, 12))
        return out

    for _ in range(200):
        a, b = ranges(), ranges()
        assert a.covers(b) == ((a | b) == a)
