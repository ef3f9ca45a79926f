"""judge.py: the proportional fast path answers "equal" only when num · D_ref = N_ref · den
holds (num and den the reference's sums times one constant and one exp factor, on any
intervals); an output off by a term or a factor falls through to the full check."""

from __future__ import annotations

import functools
import itertools
from fractions import Fraction

import pytest
from helpers import verify_kernel

from meshproof.verify.properties import Property
from meshproof.verify.result import Status
from meshproof.verify.semantics import judge
from meshproof.verify.semantics import poly as P
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.index import BOUND, Aff
from meshproof.verify.semantics.masked_ref import _total
from meshproof.verify.semantics.poly_atoms import RowSum
from meshproof.verify.semantics.poly_intervals import common
from meshproof.verify.semantics.poly_terms import Monomial, Poly
from meshproof.verify.semantics.tensor_atoms import Input, Score

ROW = Aff.of(0, {BOUND: 1})
SCORE = Score.make(0, Aff(0), Aff(0), ROW, Aff(0), Aff(0), 8)
M = Score.make(0, Aff(0), Aff(0), Aff(3), Aff(0), Aff(0), 8)   # a reference point exp(-m)
WEIGHT = Lin.make(Fraction(0), ((SCORE, Fraction(1, 2)),))
V = Input.make("V", 0, (ROW, Aff(0), Aff(0)))


def _sums(cuts: tuple[int, ...], value: bool) -> Poly:
    body = Monomial(WEIGHT, ((V, 1),)) if value else Monomial(WEIGHT)
    out = Poly()
    for lo, hi in itertools.pairwise(cuts):
        s = RowSum.make(body, lo, hi)
        assert s is not None
        out = P.add(out, Poly.var(s))
    return out


NUM_REF, DEN_REF = _sums((0, 16), True), _sums((0, 16), False)
SHIFT = Lin.make(Fraction(0), ((M, Fraction(-1, 2)),))


def _scaled(p: Poly, k: Fraction) -> Poly:
    return P.times_unit(P.scale(p, k), SHIFT)


def _identity(num: Poly, den: Poly) -> bool:
    a, b = common(P.mul(num, DEN_REF), P.mul(NUM_REF, den))
    return a == b


def test_the_reference_split_and_rescaled_is_proved_by_the_fast_path() -> None:
    """Correct idiom: partials over [0,4), [4,12), [12,16), each times 3·exp(-m/2), numerator
    and denominator alike (a merge that keeps one common reference point)."""
    num = _scaled(_sums((0, 4, 12, 16), True), Fraction(3))
    den = _scaled(_sums((0, 8, 16), False), Fraction(3))
    assert judge._proportional(num, den, NUM_REF, DEN_REF)
    assert _identity(num, den)   # what the full check would say


@pytest.mark.parametrize("wrong", ["extra term", "factor on num", "exp on num",
                                   "missing interval"])
def test_an_output_off_by_a_term_or_a_factor_is_not_accepted(wrong: str) -> None:
    """Mistakes caught: each differs from attention; the fast path must not say equal."""
    num, den = _sums((0, 8, 16), True), _sums((0, 16), False)
    if wrong == "extra term":
        num = P.add(num, _sums((8, 9), True))           # key 8 counted twice
    elif wrong == "factor on num":
        num = P.scale(num, Fraction(2))
    elif wrong == "exp on num":
        num = P.times_unit(num, SHIFT)                   # a partial never rescaled
    else:
        num, den = _sums((0, 8), True), _sums((0, 8), False)   # keys 8..15 dropped
    assert not judge._proportional(num, den, NUM_REF, DEN_REF)
    assert not _identity(num, den)


def test_the_striped_ring_is_proved_through_the_fast_path(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """Every stored output of the striped causal ring is the reference's sums as they are:
    the fast path proves each one, the cross-multiplication is never needed."""
    seen: list[bool] = []
    real = judge._proportional

    def spy(num: Poly, den: Poly, num_ref: Poly, den_ref: Poly) -> bool:
        seen.append(real(num, den, num_ref, den_ref))
        return seen[-1]

    monkeypatch.setattr(judge, "_proportional", spy)
    by = {r.name: r for r in verify_kernel("ring_prefill_causal_striped").properties}
    assert by[Property.ATTENTION_EQUIVALENCE].status is Status.PROVED
    assert seen and all(seen)


def test_the_masked_reference_sums_its_runs_once_as_one_at_a_time() -> None:
    """masked_ref._total (the runs' sums refined and coarsened once) is the sum P.add builds
    one run at a time, on adjacent, overlapping and repeated intervals alike."""
    runs = [_sums(c, value) for value in (False, True)
            for c in ((0, 4), (4, 12), (2, 6), (12, 16), (0, 4))]
    assert _total(runs) == functools.reduce(P.add, runs)
    assert _total(runs[:1]) == runs[0] and _total([]).is_zero
