"""Row sums over residue classes (verify/semantics/strided.py): a chain of guarded row sums
shifted by a period is one atom only where the polynomial depends on their sum, the
pieces it expands to are the sums it replaced, and the striped ring past 14 ranks gets
verdicts that agree with the exact masked reference."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from test_semantics_masks import AE, EO, SEMANTIC_ONLY, _launch, _oracle

from meshproof.verify.api import verify
from meshproof.verify.result import Status
from meshproof.verify.semantics.guards import Ind
from meshproof.verify.semantics.index import BOUND, Aff
from meshproof.verify.semantics.inequalities import Guard
from meshproof.verify.semantics.poly_atoms import RowSum
from meshproof.verify.semantics.poly_terms import NO_UNIT, Monomial, Poly
from meshproof.verify.semantics.rat import Rat
from meshproof.verify.semantics.strided import (
    EXPANDED_KEPT,
    StridedSum,
    expand,
    expand_form,
    stride,
)

T = 0                  # the query digit
C = 4                  # rows per shard (the period)
ONE = Fraction(1)


def _shard(j: int, lead: int = 0) -> RowSum:
    """Shard j's guarded sum Σ_{b∈[jC, jC+C)} [b - t - jC + lead <= 0] (a striped causal
    guard divided by the stride; lead 1: a shard after the query's rank)."""
    g = Guard.make([Aff.of(-j * C + lead, {BOUND: 1, T: -1})], {T: (0, C - 1)})
    assert isinstance(g, Guard)
    s = RowSum.guarded(Monomial(NO_UNIT, ((Ind.make(g), 1),)), j * C, j * C + C)
    assert s is not None
    return s


def _poly(weights: dict[RowSum, Fraction]) -> Poly:
    return Poly.make((Monomial(NO_UNIT, ((s, 1),)), w) for s, w in weights.items())


def _strided(p: Poly) -> list[StridedSum]:
    return [a for a in p.variables() if isinstance(a, StridedSum)]


def test_shards_whose_guards_are_shifts_and_weigh_alike_become_one_strided_sum() -> None:
    shards = [_shard(j) for j in range(6)]
    p = _poly(dict.fromkeys(shards, ONE))
    q = stride(p)
    (s,) = _strided(q)
    assert (s.lo, s.length, s.period, s.count) == (0, C, C, 6)
    assert s.pieces() == shards and expand(q) == p
    assert s.positive     # every query sees its diagonal row: ℓ may be divided by


def test_a_shard_counted_twice_or_off_by_one_stays_a_row_sum_of_its_own() -> None:
    shards = [_shard(j) for j in range(6)]
    twice = _poly({s: Fraction(2) if j == 3 else ONE for j, s in enumerate(shards)})
    q = stride(twice)
    assert shards[3] in q.variables() and expand(q) == twice
    assert all(3 * C not in range(s.lo, s.lo + s.count * s.period) for s in _strided(q))
    off = [_shard(j, lead=int(j == 2)) for j in range(6)]   # one guard not a shift
    q = stride(_poly(dict.fromkeys(off, ONE)))
    assert off[2] in q.variables() and expand(q) == _poly(dict.fromkeys(off, ONE))


@pytest.mark.parametrize("seed", range(30))
def test_striding_and_expanding_is_an_identity_on_random_polynomials(seed: int) -> None:
    rng = random.Random(seed)
    shards = [_shard(j, lead=rng.choice([0, 0, 0, 1])) for j in range(rng.randint(2, 9))]
    terms: list[tuple[Monomial, Fraction]] = []
    for _ in range(rng.randint(1, 4)):
        w = Fraction(rng.choice([1, 1, 2, -1]))
        chosen = rng.sample(shards, rng.randint(1, len(shards)))
        other = (Monomial(NO_UNIT, ((rng.choice(shards), 1),)), ONE) if rng.random() < .3 \
            else (Monomial(), ONE)
        terms.extend((Monomial(NO_UNIT, ((s, 1),)) * other[0], w) for s in chosen)
    p = Poly.make(terms)
    q = stride(p)
    assert expand(q) == p
    for s in _strided(q):      # a strided sum stands for its pieces only where p allows
        assert all(x in shards for x in s.pieces())


def test_kept_expansions_are_the_expansion_of_that_form_only() -> None:
    """Mistake caught: two forms that differ in one weight (or in a shard) must not share a
    kept expansion; correct idiom: a form expanded again is the same expansion, also once
    the cache has started again."""
    shards = [_shard(j) for j in range(6)]
    forms = []
    for w in range(1, 2 * EXPANDED_KEPT + 3):
        p = _poly({s: Fraction(w if j == 0 else 1) for j, s in enumerate(shards)})
        forms.append((Rat(stride(p)), Rat(p)))
    for _ in range(2):
        for strided, plain in forms:
            assert expand_form(strided) == plain
    bare = Rat(_poly({shards[0]: ONE}))
    assert expand_form(bare) is bare


def test_a_frame_moves_every_piece_alike() -> None:
    s = _strided(stride(_poly(dict.fromkeys((_shard(j) for j in range(5)), ONE))))[0]
    moved = s.shift(3 * C)
    assert isinstance(moved, StridedSum)
    assert moved.pieces() == [x.shift(3 * C) for x in s.pieces()]


@pytest.mark.scale
def test_the_striped_ring_past_14_ranks_is_proved_and_agrees_with_the_reference() -> None:
    schedule = _launch(16, 2, "causal@striped", striped=1)
    r = {p.name: p for p in verify(schedule, SEMANTIC_ONLY).properties}
    assert r[AE].status is Status.PROVED, r[AE].message
    assert r[EO].status is Status.PROVED, r[EO].message
    assert _oracle(schedule)


@pytest.mark.scale
def test_a_striped_ring_off_by_one_past_14_ranks_is_violated_with_a_witness() -> None:
    schedule = _launch(16, 2, "causal@striped", striped=1, lead=1)
    r = {p.name: p for p in verify(schedule, SEMANTIC_ONLY).properties}
    assert r[AE].status is Status.VIOLATED
    assert r[EO].status is Status.VIOLATED
    assert not _oracle(schedule)
    w = r[AE].counterexample.details.witness  # type: ignore[union-attr]
    assert w is not None and w.precision == "40-digit"
