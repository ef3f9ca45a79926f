"""Maxima (verify/semantics/maxima.py): substituting a max's members atom by atom, with a
penalty substituted once per guard up to a shift of its key rows (the guard-substitution
lemma, spec/semantics.md §9), gives the members a plain substitution gives, and the
shortcut is not taken where the lemma does not hold (a substitution that brings BOUND in).
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.guards import Pen
from meshproof.verify.semantics.index import BOUND, Aff, Subst
from meshproof.verify.semantics.inequalities import Guard
from meshproof.verify.semantics.maxima import Elem, Max, Ranges, subst_members
from meshproof.verify.semantics.tensor_atoms import Score

T, U, V, W = 0, 1, 2, 3      # free digits: a query digit, two tile digits, a fresh one
C = 8                        # rows per shard
ONE = Fraction(1)


def _score() -> Score:
    return Score.make(0, Aff.of(0, {T: 1}), Aff(0), Aff.of(0, {BOUND: 1}), Aff(0), Aff(0), 4)


def _guard(rng: random.Random) -> Guard:
    """A striped-causal-like guard with a random BOUND coefficient (a gcd to divide out) and
    a second constraint on the tile digits."""
    kb = rng.choice([1, 2, 3])
    cons = [Aff.of(rng.randint(-5, 5), {BOUND: kb, T: -kb * rng.choice([1, 2]),
                                        U: rng.choice([0, kb])})]
    if rng.random() < 0.5:
        cons.append(Aff.of(rng.randint(-3, 3), {U: 1, T: rng.choice([-1, 0, 1])}))
    if rng.random() < 0.3:
        cons.append(Aff.of(rng.randint(-40, 0), {BOUND: -kb, U: rng.choice([0, 1])}))
    g = Guard.make(cons, {T: (0, C - 1), U: (0, 3)}, decide=False)
    assert isinstance(g, Guard)
    return g


def _members(rng: random.Random, n: int) -> tuple[Elem, ...]:
    """Shard j's member s(t, b) + Pen(G.shift(jC)) over [jC, jC + C): the guards are shifts
    of one another (one differs when `lead` is drawn, as for the shards after a rank)."""
    g = _guard(rng)
    out = []
    for j in range(n):
        gj = g.shift(j * C)
        if rng.random() < 0.2:
            gj = Guard(tuple(c.shift(1) if c.coeff(BOUND) else c for c in gj.constraints),
                       gj.box)
        body = Lin.make(Fraction(rng.choice([0, 0, 1])), ((_score(), Fraction(3, 7)),
                                                          (Pen.make(gj), ONE)))
        out.append(Elem(body, Ranges.interval(j * C, j * C + C)))
    return tuple(out)


def _subst(rng: random.Random) -> Subst:
    """A renaming, a split into finer digits, or a constant offset."""
    return rng.choice([
        {T: Aff.of(0, {W: 1})},
        {T: Aff.of(rng.randint(0, 3), {W: 1}), U: Aff.of(0, {V: 1})},
        {T: Aff.of(0, {W: 4, V: 1})},
        {U: Aff.of(rng.randint(0, 2), {})},
    ])


def _plain(elems: tuple[Elem, ...], s: Subst) -> list[Elem]:
    return [Elem(e.body.subst(s), e.rows) for e in elems]


@pytest.mark.parametrize("seed", range(40))
def test_members_substituted_once_per_guard_class_are_the_plain_substitution(
        seed: int) -> None:
    rng = random.Random(seed)
    elems = _members(rng, rng.randint(2, 9))
    s = _subst(rng)
    fast, plain = subst_members(elems, s), _plain(elems, s)
    assert [e.key for e in fast] == [e.key for e in plain]
    m = Max.make(elems)
    assert m.subst(s) is Max.make(plain)


def test_a_substitution_that_brings_bound_in_is_not_shifted_back() -> None:
    """The lemma needs s to leave BOUND's coefficient alone: t -> 2b makes shard j's guard
    b - t - jC <= 0 into -b - jC <= 0 (b >= -jC), while shard 0's image -b <= 0 shifted by
    jC is b >= jC: a shortcut taken there would hide the rows below jC."""
    g = Guard.make([Aff.of(0, {BOUND: 1, T: -1})], {T: (0, C - 1)})
    assert isinstance(g, Guard)
    elems = tuple(Elem(Lin.make(Fraction(0), ((_score(), ONE), (Pen.make(g.shift(j * C)), ONE))),
                       Ranges.interval(j * C, j * C + C)) for j in range(4))
    s = {T: Aff.of(0, {BOUND: 2})}
    base = Pen.make(g).subst(s)
    shortcut = [base.shift(j * C) for j in range(4)]
    plain = _plain(elems, s)
    truth = [Pen.make(g.shift(j * C)).subst(s) for j in range(4)]
    assert shortcut[1:] != truth[1:] and shortcut[0] is truth[0]   # the lemma fails here
    assert [e.key for e in subst_members(elems, s)] == [e.key for e in plain]
