"""Guards (verify/semantics/guards.py) against brute force over small boxes: gcd
normalisation, cutting a row interval, covering, shifting with the key rows, and the box
through substitutions (a superset)."""

from __future__ import annotations

import itertools
import random

import pytest

from meshproof.verify.semantics.index import BOUND, Aff
from meshproof.verify.semantics.inequalities import Guard

X, Y = 0, 1


def _aff(const: int, **terms: int) -> Aff:
    ids = {"b": BOUND, "x": X, "y": Y}
    return Aff.of(const, {ids[k]: v for k, v in terms.items()})


def _random_guard(rng: random.Random) -> Guard | bool:
    cons = []
    for _ in range(rng.randint(1, 3)):
        cons.append(_aff(rng.randint(-8, 8), b=rng.choice([-1, 0, 1]),
                         x=rng.randint(-2, 2), y=rng.randint(-1, 1)))
    return Guard.make(cons, {X: (0, rng.randint(0, 4)), Y: (0, rng.randint(0, 2))})


def _points(g: Guard) -> list[dict[int, int]]:
    box = g.ranges
    digits = sorted(box)
    return [dict(zip(digits, p, strict=True))
            for p in itertools.product(*(range(box[d][0], box[d][1] + 1) for d in digits))]


def test_constraints_are_gcd_normalised_and_the_tighter_of_two_kept() -> None:
    g = Guard.make([_aff(-3, b=2, x=-2), _aff(-4, b=2, x=-2)], {X: (0, 7)})
    assert isinstance(g, Guard)
    assert g.constraints == (_aff(-1, b=1, x=-1),)     # 2b - 2x - 3 <= 0: b - x - 1 <= 0


def test_a_constraint_on_free_digits_is_decided_over_the_box() -> None:
    assert Guard.make([_aff(-10, x=1)], {X: (0, 7)}) is True
    assert Guard.make([_aff(1, x=1)], {X: (0, 7)}) is False


@pytest.mark.parametrize("seed", range(40))
def test_cut_keeps_every_allowed_row_and_decides_like_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    g = _random_guard(rng)
    if isinstance(g, bool):
        return
    lo, hi = rng.randint(-4, 4), rng.randint(5, 12)
    allowed = {(tuple(sorted(p.items())), b) for p in _points(g) for b in range(lo, hi)
               if g.holds({**p, BOUND: b})}
    cut = g.cut(lo, hi)
    if cut is None:
        assert not allowed
        return
    guard, a, z = cut
    got = {(tuple(sorted(p.items())), b) for p in _points(g) for b in range(a, z)
           if guard is None or guard.holds({**p, BOUND: b})}
    assert got == allowed


@pytest.mark.parametrize("seed", range(40))
def test_covers_is_shown_only_when_every_point_sees_a_row(seed: int) -> None:
    rng = random.Random(100 + seed)
    g = _random_guard(rng)
    if isinstance(g, bool):
        return
    lo, hi = rng.randint(-2, 2), rng.randint(3, 9)
    every = all(any(g.holds({**p, BOUND: b}) for b in range(lo, hi)) for p in _points(g))
    if g.covers(lo, hi):
        assert every


@pytest.mark.parametrize("dk", [-5, 3, 17])
def test_shifting_moves_the_bound_rows_with_the_key_frame(dk: int) -> None:
    g = Guard.make([_aff(-2, b=1, x=-1), _aff(1, b=-1, x=1)], {X: (0, 5)})
    assert isinstance(g, Guard)
    moved = g.shift(dk)
    for p in _points(g):
        for b in range(-10, 30):
            assert g.holds({**p, BOUND: b}) == moved.holds({**p, BOUND: b + dk})


def test_a_substitution_keeps_the_box_a_superset() -> None:
    g = Guard.make([_aff(-3, b=1, x=-1)], {X: (0, 7)})
    assert isinstance(g, Guard)
    split = g.subst({X: Aff.of(0, {10: 4, 11: 1})})      # x = 4·x10 + x11 (mixed radix)
    box = split.ranges
    assert box[10] == (0, 1) and box[11][0] == 0 and box[11][1] >= 3
    renamed = g.subst({X: Aff.digit(12)})
    assert renamed.ranges == {12: (0, 7)}


def test_two_constraints_that_exclude_each_other_make_no_guard() -> None:
    # b <= x and b >= x + 1: empty at every point (Fourier-Motzkin on the key row)
    assert Guard.make([_aff(0, b=1, x=-1), _aff(1, b=-1, x=1)], {X: (0, 7)}) is False
    # x <= y and x >= y + 2 on free digits
    assert Guard.make([_aff(0, x=1, y=-1), _aff(2, x=-1, y=1)], {X: (0, 7), Y: (0, 3)}) \
        is False
    # b <= x and b >= x: the diagonal, not empty
    assert isinstance(Guard.make([_aff(0, b=1, x=-1), _aff(0, b=-1, x=1)], {X: (0, 7)}),
                      Guard)


@pytest.mark.parametrize("seed", range(40))
def test_a_guard_found_empty_holds_at_no_point(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(30):
        cons = [_aff(rng.randint(-4, 4), b=rng.choice([-1, 0, 1]), x=rng.randint(-2, 2),
                     y=rng.randint(-1, 1)) for _ in range(rng.randint(2, 3))]
        box = {X: (0, rng.randint(0, 4)), Y: (0, rng.randint(0, 2)), BOUND: (0, 6)}
        if Guard.make(cons, box) is not False:
            continue
        for x, y, b in itertools.product(range(box[X][1] + 1), range(box[Y][1] + 1),
                                         range(7)):
            at = {X: x, Y: y, BOUND: b}
            assert any(c.const + sum(k * at[d] for d, k in c.terms) > 0 for c in cons)
