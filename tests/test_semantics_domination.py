"""domination.py: max-domination through its per-max indexes and its kept answers decides
what the plain search over every member decides."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from meshproof.verify.semantics import rational as R
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.domination import (
    _covered,
    _implies,
    _nonpositive,
    _shape,
    _shifted_up,
    nonpositive,
)
from meshproof.verify.semantics.guards import Pen, pens, without_pens
from meshproof.verify.semantics.index import BOUND, Aff
from meshproof.verify.semantics.inequalities import Guard
from meshproof.verify.semantics.maxima import Elem, Max, Ranges
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


# --- a striped ring's running max: members of one shape, each over its shard's rows ------

C = 8
T = 1   # the query digit of the guards below


def _striped_member(j: int, lead: int, rows: Ranges, const: int = 0) -> Elem:
    """s(t, b) + Pen(b - t - jC + lead <= 0) over `rows`: shard j of a striped ring."""
    g = Guard.make([Aff.of(-j * C + lead, {BOUND: 1, T: -1})], {T: (0, C - 1)})
    assert isinstance(g, Guard)
    s = Score.make(0, Aff.of(0, {T: 1}), Aff(0), Aff.of(0, {BOUND: 1}), Aff(0), Aff(0), 8)
    return Elem(Lin.make(Fraction(const), ((s, Fraction(1, 2)), (Pen.make(g), Fraction(1)))),
                rows)


def _rows(rng: random.Random) -> Ranges:
    lo = rng.randrange(0, 8 * C)
    out = Ranges.interval(lo, lo + rng.randint(1, 2 * C))
    if rng.random() < 0.3:
        lo2 = lo + rng.randint(2 * C + 1, 4 * C)
        out = out | Ranges.interval(lo2, lo2 + rng.randint(1, C))
    return out


def _plain_covered(e: Elem, m: Max) -> bool:
    """The search over every member of e's shape (what the bucket's bisection narrows)."""
    for member in m.elems:
        if _shape(member.body) != _shape(e.body):
            continue
        if (e.rows is None) != (member.rows is None) or \
                (e.rows is not None and member.rows is not None and
                 not member.rows.covers(e.rows)):
            continue
        if member.body != e.body and not _shifted_up(e.body, member.body):
            held = pens(member.body)
            bare = without_pens(e.body)
            mine = bare if not held or _implies(pens(e.body), held) else None
            if mine is None or (without_pens(member.body) != mine and
                                not _shifted_up(mine, without_pens(member.body))):
                continue
        return True
    return False


@pytest.mark.parametrize("seed", range(30))
def test_a_members_rows_found_by_bisection_decide_as_the_plain_search(seed: int) -> None:
    rng = random.Random(seed)
    members = [_striped_member(j, rng.choice([0, 0, 1]), _rows(rng), rng.choice([0, 0, 1]))
               for j in rng.sample(range(8), rng.randint(1, 8))]
    m = Max.make(members)
    for _ in range(40):
        e = _striped_member(rng.randrange(8), rng.choice([0, 1]), _rows(rng),
                            rng.choice([0, 1]))
        assert _covered(e, m) is _plain_covered(e, m), (e.key, m.key)
    for e in members:
        assert _covered(e, m)


def test_an_older_running_max_is_below_the_newer_not_the_other_way() -> None:
    """Correct idiom: m_old - m_new <= 0 when m_new holds every member of m_old (found by
    key); mistake caught: m_new - m_old, whose new shard m_old never saw."""
    old = [_striped_member(j, 0, Ranges.interval(j * C, j * C + C)) for j in range(6)]
    new = [*old, _striped_member(6, 1, Ranges.interval(6 * C, 7 * C))]
    m_old, m_new = Max.make(old), Max.make(new)
    gap = Lin.make(Fraction(0), ((m_old, Fraction(1)), (m_new, Fraction(-1))))
    assert nonpositive(gap, {T: C})
    assert not nonpositive(gap.scale(Fraction(-1)), {T: C})
