"""verify/semantics/rational.py, reduce.py and order.py: every rule is an identity, the
merge formulas real systems use reduce to one normal form, and what is outside the algebra
is refused with a reason."""

from __future__ import annotations

from fractions import Fraction

import pytest

from meshproof.verify.semantics import rational as R
from meshproof.verify.semantics.domination import nonpositive
from meshproof.verify.semantics.index import Aff
from meshproof.verify.semantics.order import at_least_one, ratio_at_most_one
from meshproof.verify.semantics.poly_atoms import RowSum
from meshproof.verify.semantics.rational import Rat
from meshproof.verify.semantics.reasons import NotModelled, Scramble, Undefined, UndefinedKind
from meshproof.verify.semantics.reduce import max_over, sum_over
from meshproof.verify.semantics.tensor_atoms import Input, Score

X = 0   # a free digit standing for the key row of the scores below
ROWS = {X: 16}
Triplet = tuple[Rat, Rat, Rat]


def _score(row_base: int = 0) -> Rat:
    s = Score.make(0, Aff(0), Aff(0), Aff(row_base, ((X, 1),)), Aff(0), Aff(0), 8)
    return Rat.atom(s, Fraction(1, 2))


def _value(row_base: int = 0) -> Rat:
    return Rat.atom(Input.make("V", 0, (Aff(row_base, ((X, 1),)), Aff(0), Aff(0))))


def _partial(base: int) -> Triplet:
    s = _score(base)
    m = max_over(s, ROWS)
    p = R.exp(R.sub(s, m))
    return m, sum_over(p, ROWS, 8), sum_over(R.mul(p, _value(base)), ROWS, 8)


def _merge(a: Triplet, b: Triplet) -> Triplet:
    m = R.maximum(a[0], b[0])
    x, y = R.exp(R.sub(a[0], m)), R.exp(R.sub(b[0], m))
    return m, R.add(R.mul(a[1], x), R.mul(b[1], y)), R.add(R.mul(a[2], x), R.mul(b[2], y))


def _sums(r: Rat) -> list[RowSum]:
    polys = [r.num, *(f for f, _ in r.den)]
    return [a for p in polys for a in p.variables() if isinstance(a, RowSum)]


def _reference() -> Rat:
    """O over rows 0..31 as the (m, ℓ, o) merge computes it."""
    _, ell, o = _merge(_partial(0), _partial(16))
    return R.div(o, ell)


def test_exp_of_a_sum_is_the_product_of_exps() -> None:
    a, b = _score(), Rat.const(Fraction(3))
    assert R.exp(R.add(a, b)) == R.mul(R.exp(a), R.exp(b))


def test_merging_two_slices_telescopes_to_one_sum_over_both() -> None:
    _, ell, o = _merge(_partial(0), _partial(16))
    assert [(s.lo, s.hi) for s in _sums(ell)] == [(0, 32)]
    assert [(s.lo, s.hi) for s in _sums(o)] == [(0, 32)]
    out = R.div(o, ell)
    assert len(out.num.terms) == 1 and len(out.den) == 1, "the reference point cancelled"


def test_a_double_merge_weighs_rows_twice() -> None:
    _, l1, _ = _partial(0)
    twice = R.add(l1, l1)
    (_, c), = twice.num.terms
    assert c == 2


def test_max_with_minus_infinity_is_the_other_operand() -> None:
    m1, _, _ = _partial(0)
    assert R.maximum(R.NEG_INF, m1) == m1
    assert R.exp(R.sub(R.NEG_INF, m1)).is_zero


def test_minus_infinity_minus_itself_is_undefined() -> None:
    with pytest.raises(Undefined, match="inf - inf is undefined") as info:
        R.sub(R.NEG_INF, R.NEG_INF)
    assert info.value.kind is UndefinedKind.INF_MINUS_INF


def test_log_of_zero_is_undefined_not_outside_the_algebra() -> None:
    with pytest.raises(Undefined) as info:
        R.log(R.ZERO_RAT)
    assert info.value.kind is UndefinedKind.LOG_OF_ZERO


def test_exp_of_a_sum_of_exponentials_is_outside_the_algebra() -> None:
    _, ell, _ = _partial(0)
    with pytest.raises(NotModelled, match="not a linear form"):
        R.exp(ell)


def test_division_by_a_value_that_may_be_zero_is_refused() -> None:
    with pytest.raises(NotModelled, match="may be zero"):
        R.div(_value(), R.add(_value(), Rat.const(Fraction(1))))


def test_division_by_a_positive_sum_cancels_against_it() -> None:
    _, ell, o = _partial(0)
    assert R.mul(R.div(o, ell), ell) == o
    assert R.mul(o, R.reciprocal(ell)) == R.div(o, ell), "o · (1/ℓ) is o / ℓ"


def test_exp_of_log_is_the_value() -> None:
    _, ell, _ = _partial(0)
    assert R.exp(R.log(ell)) == ell


def test_a_log_sum_exp_has_no_reference_point() -> None:
    m, ell, _ = _partial(0)
    lse = R.add(m, R.log(ell))
    lin = lse.as_lin()
    assert lin is not None and len(lin.coeffs) == 1 and not lin.const, \
        "log(exp(-m)·Σ) + m = log Σ"


def test_scores_minus_their_max_are_nonpositive_and_the_sum_is_at_least_one() -> None:
    m, ell, _ = _partial(0)
    arg = R.sub(_score(), m).as_lin()
    assert arg is not None and nonpositive(arg, ROWS)
    assert at_least_one(ell)


def test_scores_minus_a_sum_of_maxima_are_not_known_nonpositive() -> None:
    m1, _, _ = _partial(0)
    m2, _, _ = _partial(16)
    arg = R.sub(m1, R.add(m1, m2)).as_lin()
    assert arg is not None and not nonpositive(arg, ROWS)


def test_a_contraction_of_q_features_with_k_rows_is_scrambled() -> None:
    f, j = 1, 2
    q = Rat.atom(Input.make("Q", 0, (Aff(0), Aff(0), Aff.digit(f))))
    k = Rat.atom(Input.make("K", 0, (Aff.digit(f), Aff(0), Aff.digit(j))))
    with pytest.raises(Scramble, match="reshaped, not transposed"):
        sum_over(R.mul(q, k), {f: 8}, 8)


def test_a_contraction_over_every_feature_is_the_score_atom() -> None:
    f = 1
    q = Rat.atom(Input.make("Q", 0, (Aff(0), Aff(0), Aff.digit(f))))
    k = Rat.atom(Input.make("K", 0, (Aff(5), Aff(0), Aff.digit(f))))
    s = sum_over(R.mul(q, k), {f: 8}, 8).as_lin()
    assert s is not None and isinstance(s.coeffs[0][0], Score)
    assert s.coeffs[0][0].full(8)


def test_two_halves_of_a_contraction_add_up_to_the_score() -> None:
    f = 1
    q = [Rat.atom(Input.make("Q", 0, (Aff(0), Aff(0), Aff(lo, ((f, 1),))))) for lo in (0, 4)]
    k = [Rat.atom(Input.make("K", 0, (Aff(5), Aff(0), Aff(lo, ((f, 1),))))) for lo in (0, 4)]
    halves = [sum_over(R.mul(a, b), {f: 4}, 8) for a, b in zip(q, k, strict=True)]
    whole = R.add(*halves).as_lin()
    assert whole is not None and len(whole.coeffs) == 1
    score = whole.coeffs[0][0]
    assert isinstance(score, Score) and score.full(8)


# --- the merge formulas real systems use: one normal form --------------------------------


def _lse_state(base: int) -> tuple[Rat, Rat]:
    m, ell, o = _partial(base)
    return R.add(m, R.log(ell)), R.div(o, ell)


def test_the_textbook_log_sum_exp_merge_is_the_reference() -> None:
    (la, oa), (lb, ob) = _lse_state(0), _lse_state(16)
    mx = R.maximum(la, lb)
    w1, w2 = R.exp(R.sub(la, mx)), R.exp(R.sub(lb, mx))
    out = R.div(R.add(R.mul(oa, w1), R.mul(ob, w2)), R.add(w1, w2))
    assert out == _reference()
    lse = R.add(mx, R.log(R.add(w1, w2)))
    assert lse == _lse_state_of_both(), "the merged lse is log Σ over both slices"


def _lse_state_of_both() -> Rat:
    m, ell, _ = _merge(_partial(0), _partial(16))
    return R.add(m, R.log(ell))


def test_ring_flash_attentions_log1p_update_is_the_reference() -> None:
    (la, oa), (lb, ob) = _lse_state(0), _lse_state(16)
    new = R.add(la, R.log(R.add(R.ONE_RAT, R.exp(R.sub(lb, la)))))
    out = R.add(R.mul(R.exp(R.sub(la, new)), oa), R.mul(R.exp(R.sub(lb, new)), ob))
    assert out == _reference()
    assert new == _lse_state_of_both()


def test_ring_flash_attentions_sigmoid_update_is_the_reference() -> None:
    (la, oa), (lb, ob) = _lse_state(0), _lse_state(16)
    sig = R.reciprocal(R.add(R.ONE_RAT, R.exp(R.neg(R.sub(lb, la)))))
    assert R.sub(oa, R.mul(sig, R.sub(oa, ob))) == _reference()


def test_the_lerp_merge_is_the_reference() -> None:
    a, b = _partial(0), _partial(16)
    oa, ob = R.div(a[2], a[1]), R.div(b[2], b[1])
    m = R.maximum(a[0], b[0])
    w1, w2 = R.mul(a[1], R.exp(R.sub(a[0], m))), R.mul(b[1], R.exp(R.sub(b[0], m)))
    assert R.add(oa, R.mul(R.sub(ob, oa), R.div(w2, R.add(w1, w2)))) == _reference()


def test_a_large_constant_added_and_removed_is_exact() -> None:
    _, ell, o = _merge(_partial(0), _partial(16))
    c = Rat.const(Fraction(10 ** 12))
    assert R.sub(R.div(R.add(o, R.mul(c, ell)), ell), c) == _reference()


def test_a_ratio_of_a_slice_to_the_whole_is_at_most_one() -> None:
    (la, _), _ = _lse_state(0), _lse_state(16)
    assert ratio_at_most_one(R.exp(R.sub(la, _lse_state_of_both())))


def test_form_sizes_do_not_grow_with_the_number_of_merges() -> None:
    state = _lse_state(0)
    sizes = []
    for j in range(1, 8):
        lb, ob = _lse_state(16 * j)
        la, oa = state
        mx = R.maximum(la, lb)
        w1, w2 = R.exp(R.sub(la, mx)), R.exp(R.sub(lb, mx))
        state = (R.add(mx, R.log(R.add(w1, w2))),
                 R.div(R.add(R.mul(oa, w1), R.mul(ob, w2)), R.add(w1, w2)))
        sizes.append(len(state[1].key) + len(state[0].key))
    assert len(set(sizes)) <= 2, sizes
