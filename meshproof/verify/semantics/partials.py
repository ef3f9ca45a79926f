"""A stored form as partials: each term ``Σ_b w · exp(c·QK(b) + R) [· V(b)]`` of its
numerator and denominator on the rows of a common partition (`decompose`), and the typed
mismatches (`Mismatch`, `Reason`) that say why an output is not attention.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction

from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.guards import Ind
from meshproof.verify.semantics.index import BOUND, Aff
from meshproof.verify.semantics.poly_atoms import RowSum
from meshproof.verify.semantics.poly_terms import Monomial
from meshproof.verify.semantics.rat import Rat
from meshproof.verify.semantics.tensor_atoms import Input, Score, Scrambled
from meshproof.verify.semantics.views import Piece, linear_terms, pieces, split_value

B_ROW = Aff(0, ((BOUND, 1),))


class Mismatch(Enum):
    """Why an output is not attention (each with its words in `Reason.text`)."""

    NORMALISED_TWICE = "normalised_twice"
    NEVER_DIVIDED = "never_divided"
    NOT_A_MERGE = "not_a_merge"          # it holds Q, a max, a constant: no partial
    NOT_A_PARTIAL = "not_a_partial"      # a term that is not a partial of any key
    NOT_LINEAR = "not_linear"            # products of partials, no single ratio of sums
    FOREIGN = "foreign"                  # another attention problem's inputs
    WRONG_QUERY = "wrong_query"
    WRONG_KV_HEAD = "wrong_kv_head"
    MIXED_ROWS = "mixed_rows"            # the weights of one row applied to V of another
    SCALE = "scale"
    SCALES_DIFFER = "scales_differ"
    REFERENCE_POINTS = "reference_points"
    UNEVEN = "uneven"                    # rows weigh unevenly (double or missing merges)
    NUM_DEN_DIFFER = "num_den_differ"
    MASK = "mask"                        # a (query, key) pair counted against the mask
    DIFFERS = "differs"                  # none of the above names it


@dataclass(frozen=True, slots=True)
class Reason:
    kind: Mismatch
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class Partial:
    """One term Σ_b w · exp(c·QK(b) + R) [· V(b)] of a numerator or denominator, on the
    rows [lo, hi) of a common partition."""

    scale: Fraction
    score: Score
    value: Input | None
    rest: Lin                   # the reference point R (no key row)
    weight: tuple[Fraction, Fraction]    # w = coef · exp(const)
    lo: int
    hi: int


@dataclass(slots=True)
class Shape:
    """A stored form split into numerator, denominator (if any) and what does not fit."""

    num: list[Partial] = field(default_factory=list)
    den: list[Partial] | None = None
    stray: list[Reason] = field(default_factory=list)
    normalised_twice: bool = False


def floordiv(a: Aff, k: int, sizes: dict[int, int]) -> Aff | None:
    """a // k as an affine form, when no carry crosses a multiple of k."""
    if k == 1:
        return a
    high = {d: c // k for d, c in a.terms if c % k == 0}
    low = [(d, c) for d, c in a.terms if c % k]
    span = a.const % k + sum(c * (sizes.get(d, 1) - 1) for d, c in low if c > 0)
    if any(c < 0 for _, c in low) or span >= k:
        return None
    return Aff.of(a.const // k, high)


_NO_SUM = Reason(Mismatch.NOT_A_PARTIAL, "a term that does not sum over key rows (no partial "
                 "of any KV)")
_NO_SCORE = Reason(Mismatch.NOT_A_PARTIAL, "a term with no score in its exponent")


def _partial(piece: Piece, with_value: bool) -> Partial | Reason:
    body = piece.body
    if any(isinstance(a, Ind) for a, _ in body.vars):   # a masked partial: read its body
        body = Monomial(body.unit, tuple((a, k) for a, k in body.vars
                                         if not isinstance(a, Ind)))
    if piece.rest.key:
        return Reason(Mismatch.NOT_LINEAR, "a term that multiplies a partial by another value")
    if any(isinstance(a, Scrambled) for a, _ in body.unit.coeffs):
        return Reason(Mismatch.NOT_A_PARTIAL, "an exponent whose scores are not q·kᵀ")
    scores = [(a, c) for a, c in body.unit.coeffs if isinstance(a, Score)]
    if len(scores) != 1:
        return (Reason(Mismatch.NOT_A_PARTIAL, "an exponent with the scores of several key "
                       "rows added together") if len(scores) > 1 else _NO_SCORE)
    score, c = scores[0]
    assert isinstance(score, Score)
    if score.j != B_ROW:
        return Reason(Mismatch.NOT_A_PARTIAL, "scores of key rows that do not match the rows "
                      "summed over")
    if len(body.unit.coeffs) > 1:
        return Reason(Mismatch.NOT_A_PARTIAL, "an exponent that mixes the key row into more "
                      "than the score")
    value: Input | None = None
    if with_value:
        sv = split_value(body)
        if sv is None:
            return Reason(Mismatch.NOT_A_PARTIAL, "a numerator term that is not one element "
                          "of V times a weight")
        value = sv[1]
    elif body.vars:
        return Reason(Mismatch.NOT_A_PARTIAL, "a denominator term with extra factors")
    unit = piece.unit
    assert isinstance(unit.const, Fraction)
    return Partial(c, score, value, unit.without_const(), (piece.coef, unit.const),
                   piece.lo, piece.hi)


def decompose(form: Rat) -> Shape:
    shape = Shape()
    if form.inf:
        shape.stray.append(_NO_SUM)
        return shape
    if len(form.den) > 1 or any(k != 1 for _, k in form.den):
        shape.normalised_twice = True
    num = linear_terms(form)
    den = linear_terms(Rat(form.den[0][0])) if len(form.den) == 1 else None
    if num is None or (form.den and len(form.den) == 1 and den is None):
        if not any(isinstance(a, RowSum) for a in form.num.variables()):
            shape.stray.append(_NO_SUM)
        else:
            shape.stray.append(Reason(Mismatch.NOT_LINEAR, "the output is not one ratio of "
                                      "sums of partials (it multiplies partials together)"))
        return shape
    cuts = {p for t in num + (den or []) for p in (t.sum.lo, t.sum.hi)}
    for piece in pieces(num, cuts):
        part = _partial(piece, True)
        (shape.num.append(part) if isinstance(part, Partial) else shape.stray.append(part))
    if den is not None:
        shape.den = []
        for piece in pieces(den, cuts):
            part = _partial(piece, False)
            if isinstance(part, Partial):
                shape.den.append(part)
            else:
                shape.stray.append(Reason(part.kind, "denominator: " + part.text))
    return shape
