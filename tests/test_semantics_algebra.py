"""verify/semantics/algebra.py and order.py: every rule is an identity; what is outside is
refused with a reason."""

from __future__ import annotations

from fractions import Fraction

import pytest

from meshproof.verify.semantics import algebra as alg
from meshproof.verify.semantics.algebra import NotModelled
from meshproof.verify.semantics.index import Aff
from meshproof.verify.semantics.order import at_least_one, nonpositive
from meshproof.verify.semantics.terms import QK, Input, Poly, Pos

X = 0   # a free digit standing for the key row of the scores below
ROWS = {X: 16}


def _score(row_base: int = 0) -> Poly:
    return Poly.atom(QK(0, Aff(0), Aff(0), Aff(row_base, ((X, 1),)), Aff(0)), Fraction(1, 2))


def _value(row_base: int = 0) -> Poly:
    return Poly.atom(Input("V", 0, (Aff(row_base, ((X, 1),)), Aff(0), Aff(0))))


def _partial(base: int) -> tuple[Poly, Poly, Poly]:
    s = _score(base)
    m = alg.max_over(s, ROWS)
    p = alg.exp(alg.sub(s, m))
    return m, alg.sum_over(p, ROWS, 8), alg.sum_over(alg.mul(p, _value(base)), ROWS, 8)


def test_exp_of_a_sum_is_the_product_of_exps() -> None:
    a, b = _score(), Poly.const(Fraction(3))
    assert alg.exp(alg.add(a, b)) == alg.mul(alg.exp(a), alg.exp(b))


def test_merging_two_slices_telescopes_to_one_term_over_both() -> None:
    m1, l1, o1 = _partial(0)
    m2, l2, o2 = _partial(16)
    m = alg.maximum(m1, m2)
    x, y = alg.exp(alg.sub(m1, m)), alg.exp(alg.sub(m2, m))
    ell = alg.add(alg.mul(l1, x), alg.mul(l2, y))
    assert len(ell.terms) == 1, "both slices' partials share one body: their rows merge"
    _, w = ell.terms[0]
    assert [(lo, hi) for lo, hi, _ in w.parts] == [(0, 32)]  # type: ignore[union-attr]
    o = alg.add(alg.mul(o1, x), alg.mul(o2, y))
    assert len(o.terms) == 1


def test_a_double_merge_weighs_rows_twice() -> None:
    _, l1, _ = _partial(0)
    twice = alg.add(l1, l1)
    (_, w), = twice.terms
    assert w.parts[0][2].rational == 2  # type: ignore[union-attr]


def test_max_with_minus_infinity_is_the_other_operand() -> None:
    m1, _, _ = _partial(0)
    assert alg.maximum(alg.NEG_INF, m1) == m1
    assert alg.exp(alg.sub(alg.NEG_INF, m1)).is_zero


def test_minus_infinity_minus_itself_is_undefined() -> None:
    with pytest.raises(NotModelled, match="inf - inf is undefined"):
        alg.sub(alg.NEG_INF, alg.NEG_INF)


def test_exp_of_a_sum_of_exponentials_is_outside_the_algebra() -> None:
    _, ell, _ = _partial(0)
    with pytest.raises(NotModelled, match="not a linear form"):
        alg.exp(ell)


def test_division_by_a_value_that_may_be_zero_is_refused() -> None:
    with pytest.raises(NotModelled, match="may be zero"):
        alg.div(_value(), alg.add(_value(), Poly.const(Fraction(1))))


def test_division_by_a_positive_sum_keeps_it_whole_and_cancels() -> None:
    _, ell, o = _partial(0)
    out = alg.mul(alg.div(o, ell), ell)
    assert all(not any(isinstance(a, Pos) for a, _ in b.factors) for b, _ in out.terms)
    assert out == o


def test_exp_of_log_is_the_value() -> None:
    _, ell, _ = _partial(0)
    back = alg.exp(alg.log(ell))
    assert back == Poly.make([(b, w) for b, w in back.terms])
    assert any(isinstance(a, Pos) and k == 1 for b, _ in back.terms for a, k in b.factors)


def test_scores_minus_their_max_are_nonpositive_and_the_sum_is_at_least_one() -> None:
    m, ell, _ = _partial(0)
    arg = alg.sub(_score(), m).as_lin()
    assert arg is not None and nonpositive(arg, ROWS)
    assert at_least_one(ell)


def test_scores_minus_a_sum_of_maxima_are_not_known_nonpositive() -> None:
    m1, _, _ = _partial(0)
    m2, _, _ = _partial(16)
    arg = alg.sub(m1, alg.add(m1, m2)).as_lin()
    assert arg is not None and not nonpositive(arg, ROWS)


def test_a_contraction_of_q_features_with_k_rows_is_scrambled() -> None:
    f, j = 1, 2
    q = Poly.atom(Input("Q", 0, (Aff(0), Aff(0), Aff.digit(f))))
    k = Poly.atom(Input("K", 0, (Aff.digit(f), Aff(0), Aff.digit(j))))
    with pytest.raises(alg.Scramble, match="reshaped, not transposed"):
        alg.sum_over(alg.mul(q, k), {f: 8}, 8)


def test_a_contraction_over_every_feature_is_the_score_atom() -> None:
    f = 1
    q = Poly.atom(Input("Q", 0, (Aff(0), Aff(0), Aff.digit(f))))
    k = Poly.atom(Input("K", 0, (Aff(5), Aff(0), Aff.digit(f))))
    s = alg.sum_over(alg.mul(q, k), {f: 8}, 8).as_lin()
    assert s is not None and isinstance(s.coeffs[0][0], QK)


def test_a_partial_contraction_of_the_features_is_refused() -> None:
    f = 1
    q = Poly.atom(Input("Q", 0, (Aff(0), Aff(0), Aff.digit(f))))
    k = Poly.atom(Input("K", 0, (Aff(5), Aff(0), Aff.digit(f))))
    with pytest.raises(NotModelled, match="only part of the features"):
        alg.sum_over(alg.mul(q, k), {f: 4}, 8)
