"""Compare a stored output's exact form with attention over its group's KV.

The reference at output coordinates (t, h, e) of group G is

    Σ_b exp(c·QK_G(t, h, b, h // gqa)) · V_G[b, h // gqa, e]  /  Σ_b exp(c·QK_G(...))

over every key row b of G. A kernel's form N / D is accepted when ``N · D_ref = N_ref · D``
as polynomials (over common row intervals): an identity of rational functions, so it holds
for every input and "proved" needs no sampling. Any reference point, any common positive
factor, any merge formula (log-sum-exp, lerp, sigmoid) has long cancelled in the normal
form (rational.py). When the identity fails, the form's partials say why, as typed
mismatches with their words.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction

from meshproof.model.problem import Problem
from meshproof.verify.semantics import poly as P
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.guards import Ind
from meshproof.verify.semantics.index import BOUND, Aff
from meshproof.verify.semantics.masked_ref import masked_sums, restrict
from meshproof.verify.semantics.poly_atoms import RowSum
from meshproof.verify.semantics.poly_intervals import common
from meshproof.verify.semantics.poly_terms import ZERO_POLY, Monomial, Poly
from meshproof.verify.semantics.rational import Rat
from meshproof.verify.semantics.tensor_atoms import Input, Score, Scrambled
from meshproof.verify.semantics.views import Piece, describe, linear_terms, pieces, split_value

SCALE_RTOL = 2.0 ** -20   # the scale is compared to float32 precision (documented)
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
class Verdict:
    equal: bool
    reasons: tuple[Reason, ...]

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(r.text for r in self.reasons)


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


# --- the identity ------------------------------------------------------------------------


def reference(problem: Problem, group: int, coords: tuple[Aff, Aff, Aff], g: Aff,
              scale: Fraction, sizes: dict[int, int] | None = None
              ) -> tuple[Poly, Poly] | None:
    """Numerator and denominator of attention at (t, h, e), scores scaled by `scale`; with
    the launch's mask, over the keys it allows at the query's position (masked_ref.py).
    None: not expressible (a query position not affine in the output's digits)."""
    t, h, e = coords
    n = problem.kv_rows(group)
    score = Score.make(group, t, h, B_ROW, g, Aff(0), problem.d_head)
    weight = Lin(Fraction(0), ((score, scale),))
    v = Input.make("V", group, (B_ROW, g, e))
    if n == 0:
        return ZERO_POLY, ZERO_POLY
    if problem.mask is not None:
        return masked_sums(problem, group, t, sizes or {}, Monomial(weight),
                           Monomial(weight, ((v, 1),)))
    den = Poly.var(RowSum.make(Monomial(weight), 0, n))
    num = Poly.var(RowSum.make(Monomial(weight, ((v, 1),)), 0, n))
    return num, den


def kernel_scale(form: Rat, problem: Problem) -> Fraction:
    """The kernel's score scale when it matches the reference's to float32 precision
    (the constant is a float, the machine computes in f32), else the reference's."""
    found = {c for a in _sums_of(form) for s, c in a.body.unit.coeffs if isinstance(s, Score)}
    close = [c for c in found if math.isclose(float(c), problem.scale, rel_tol=SCALE_RTOL)]
    return close[0] if len(close) == 1 else Fraction(problem.scale)


def _sums_of(form: Rat) -> list[RowSum]:
    out = [a for a in form.num.variables() if isinstance(a, RowSum)]
    for f, _ in form.den:
        out.extend(a for a in f.variables() if isinstance(a, RowSum))
    return out


def is_attention(form: Rat, problem: Problem, group: int, coords: tuple[Aff, Aff, Aff],
                 g: Aff | None, sizes: dict[int, int] | None = None) -> bool:
    """num · D_ref == N_ref · den exactly (the den factors are positive by construction;
    under a mask, D_ref must be positive at every query too: a query that sees no key is
    not proved by the identity, which reads 0 = 0 there)."""
    if g is None or form.inf or not form.den:
        return False
    ref = reference(problem, group, coords, g, kernel_scale(form, problem), sizes)
    if ref is None:
        return False
    num_ref, den_ref = ref
    if den_ref.is_zero or (problem.mask is not None and not P.positive(den_ref)):
        return False
    num, den = form.num, form.expanded_den()
    if problem.mask is not None:
        num, den = restrict(num, sizes or {}), restrict(den, sizes or {})
    left = P.mul(num, den_ref)
    right = P.mul(num_ref, den)
    a, b = common(left, right)
    return a == b


# --- why not -----------------------------------------------------------------------------


def compare(form: Rat, problem: Problem, group: int, coords: tuple[Aff, Aff, Aff],
            sizes: dict[int, int]) -> Verdict:
    g = floordiv(coords[1], problem.gqa, sizes)
    if is_attention(form, problem, group, coords, g, sizes):
        return Verdict(True, ())
    shape = decompose(form)
    reasons: list[Reason] = []
    if shape.normalised_twice:
        reasons.append(Reason(Mismatch.NORMALISED_TWICE,
                              "the output is divided by more than one softmax denominator "
                              "(a value normalised twice, or partials normalised separately "
                              "and then merged)"))
    if not form.den and not shape.normalised_twice:
        reasons.append(Reason(Mismatch.NEVER_DIVIDED,
                              "the output is never divided by the softmax denominator ℓ"))
    strays = list(dict.fromkeys(shape.stray))
    if not shape.num and all(r.kind is Mismatch.NOT_A_PARTIAL and r.text in
                             (_NO_SUM.text, _NO_SCORE.text) for r in strays):
        strays = [Reason(Mismatch.NOT_A_MERGE,
                         f"the output holds {describe(form)}, not a merge of partials of any "
                         "key")]
    texts = {r.text for r in strays}
    reasons.extend(r for r in strays
                   if not (r.text.startswith("denominator: ") and r.text[13:] in texts))
    parts = shape.num + (shape.den or [])
    if not parts:
        parts, more = _every_partial(form)
        reasons.extend(more)
    for p in parts:
        reasons.extend(_part_reasons(p, problem, group, coords, g))
    if len({p.scale for p in parts}) > 1:
        reasons.append(Reason(Mismatch.SCALES_DIFFER,
                              "numerator and denominator scale the scores differently"))
    if len({p.rest for p in parts}) > 1:
        reasons.append(Reason(Mismatch.REFERENCE_POINTS,
                              "the partials are scaled by different reference points exp(-m): "
                              "some term is not rescaled by exp(m_old - m_new)"))
    if problem.mask is None:     # under a mask the crossing reader counts (crossings.py)
        reasons.extend(_weight_reasons(shape, problem.kv_rows(group)))
    if not reasons:
        reasons.append(Reason(Mismatch.DIFFERS, "the output's normal form is not attention's "
                              "(its numerator and denominator are not the reference's)"))
    return Verdict(False, tuple(dict.fromkeys(reasons)))


def _every_partial(form: Rat) -> tuple[list[Partial], list[Reason]]:
    """Every row sum of a form that is not one ratio of sums (its partials multiplied,
    or divided separately), read as a partial: what is wrong inside each still shows."""
    parts: list[Partial] = []
    reasons: list[Reason] = []
    polys = [form.num, *(f for f, _ in form.den)]
    for s in dict.fromkeys(a for p in polys for a in p.variables() if isinstance(a, RowSum)):
        with_value = bool(s.body.vars)
        piece = Piece(Fraction(1), Lin(Fraction(0)), s.lo, s.hi, s.body, Monomial())
        part = _partial(piece, with_value)
        (parts.append(part) if isinstance(part, Partial) else reasons.append(part))
    return parts, reasons


def _part_reasons(p: Partial, problem: Problem, group: int, coords: tuple[Aff, Aff, Aff],
                  g: Aff | None) -> list[Reason]:
    t, h, e = coords
    out = []
    if p.score.group != group or (p.value is not None and p.value.group != group):
        out.append(Reason(Mismatch.FOREIGN,
                          "the output uses the inputs of another attention problem"))
    if p.score.t != t or p.score.h != h:
        out.append(Reason(Mismatch.WRONG_QUERY, "the scores belong to another query row or q "
                          "head than the output element"))
    if g is None or p.score.g != g:
        out.append(Reason(Mismatch.WRONG_KV_HEAD,
                          f"q head h reads a kv head other than h // {problem.gqa} (the "
                          "harness's blocked GQA mapping)"))
    if p.value is not None and (p.value.row != B_ROW or p.value.coords[1] != p.score.g or
                                p.value.coords[2] != e):
        out.append(Reason(Mismatch.MIXED_ROWS, "the weights of one key row are applied to V "
                          "of another row, head or feature"))
    if not p.score.full(problem.d_head):
        out.append(Reason(Mismatch.NOT_A_PARTIAL, "the scores sum over part of the features "
                          "only (a split contraction that is never completed)"))
    if not math.isclose(float(p.scale), problem.scale, rel_tol=SCALE_RTOL):
        out.append(Reason(Mismatch.SCALE,
                          f"the scores are scaled by {float(p.scale):.6g}, the reference by "
                          f"{problem.scale:.6g} ({problem.scale_source})"))
    return out


Runs = list[tuple[int, int, tuple[Fraction, Fraction]]]


def runs(parts: list[Partial]) -> Runs:
    """Per row interval, the total weight of the partials (merged where equal)."""
    cuts = sorted({x for p in parts for x in (p.lo, p.hi)})
    out: Runs = []
    for lo, hi in itertools.pairwise(cuts):
        w = [p.weight for p in parts if p.lo <= lo and hi <= p.hi]
        if not w:
            continue
        total = _weight_sum(w)
        if out and out[-1][1] == lo and out[-1][2] == total:
            out[-1] = (out[-1][0], hi, total)
        else:
            out.append((lo, hi, total))
    return out


def _weight_sum(ws: list[tuple[Fraction, Fraction]]) -> tuple[Fraction, Fraction]:
    """Σ c_i·exp(e_i) as one (c, e) (exact when the exponents agree)."""
    if all(e == ws[0][1] for _, e in ws):
        return sum((c for c, _ in ws), Fraction(0)), ws[0][1]
    top = max(e for _, e in ws)
    total = sum(float(c) * math.exp(float(e - top)) for c, e in ws)
    return Fraction(total), top


def ratio(a: tuple[Fraction, Fraction], b: tuple[Fraction, Fraction]) -> float:
    if not b[0]:
        return math.inf
    try:
        return float(a[0] / b[0]) * math.exp(float(a[1] - b[1]))
    except OverflowError:
        return math.inf


def _weight_reasons(shape: Shape, n: int) -> list[Reason]:
    if not shape.num:
        return []
    out = []
    num_w = runs(shape.num)
    if not _uniform(num_w, n):
        out.append(Reason(Mismatch.UNEVEN, "the numerator weighs the key rows unevenly: "
                          f"{_describe(num_w, n)}"))
    if shape.den is not None:
        den_w = runs(shape.den)
        if not _uniform(den_w, n):
            out.append(Reason(Mismatch.UNEVEN, "the denominator weighs the key rows unevenly: "
                              f"{_describe(den_w, n)}"))
        elif _uniform(num_w, n) and not math.isclose(ratio(num_w[0][2], den_w[0][2]), 1.0):
            out.append(Reason(Mismatch.NUM_DEN_DIFFER,
                              "numerator and denominator weigh the key rows differently"))
    return out


def _uniform(w: Runs, n: int) -> bool:
    return len(w) == 1 and w[0][0] == 0 and w[0][1] == n and w[0][2][0] > 0


def lightest(w: Runs) -> tuple[Fraction, Fraction] | None:
    ref: tuple[Fraction, Fraction] | None = None
    for _, _, pw in w:
        if pw[0] > 0 and (ref is None or ratio(pw, ref) < 1):
            ref = pw
    return ref


def _describe(w: Runs, n: int) -> str:
    if not w:
        return "every key row is missing"
    ref = lightest(w)
    out = []
    covered = 0
    for lo, hi, pw in w:
        covered += hi - lo
        r = ratio(pw, ref) if ref is not None else 0.0
        if abs(r - 1) > 1e-9:
            out.append(f"rows {lo}..{hi - 1} weigh {r:g}")
    if covered < n:
        out.append(f"{n - covered} of {n} rows are missing")
    return "; ".join(out) or "rows outside the group are included"
