"""Compare a stored output's exact form with attention over its group's KV.

The reference at output coordinates (t, h, e) of group G is

    Σ_b exp(c·QK_G(t, h, b, h // gqa)) · V_G[b, h // gqa, e]  /  Σ_b exp(c·QK_G(...))

over every key row b of G. A kernel's form N / D is accepted when ``N · D_ref = N_ref · D``
as polynomials (over common row intervals): an identity of rational functions, so it holds
for every input and "proved" needs no sampling. Any reference point, any common positive
factor, any merge formula (log-sum-exp, lerp, sigmoid) has long cancelled in the normal
form (rational.py). When the identity fails, the form's partials say why, as typed
mismatches with their words (partials.py decomposes a form into partials, partial_weights.py
reads their weights over key rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from meshproof.model.problem import Problem
from meshproof.verify.semantics import poly as P
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.index import Aff
from meshproof.verify.semantics.masked_ref import masked_sums, restrict
from meshproof.verify.semantics.partial_weights import _weight_reasons
from meshproof.verify.semantics.partials import (
    _NO_SCORE,
    _NO_SUM,
    B_ROW,
    Mismatch,
    Partial,
    Reason,
    _partial,
    decompose,
    floordiv,
)
from meshproof.verify.semantics.poly_atoms import RowSum
from meshproof.verify.semantics.poly_intervals import common
from meshproof.verify.semantics.poly_terms import ZERO_POLY, Monomial, Poly
from meshproof.verify.semantics.rat import Rat
from meshproof.verify.semantics.tensor_atoms import Input, Score
from meshproof.verify.semantics.views import Piece, describe

SCALE_RTOL = 2.0 ** -20   # the scale is compared to float32 precision (documented)


@dataclass(frozen=True, slots=True)
class Verdict:
    equal: bool
    reasons: tuple[Reason, ...]

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(r.text for r in self.reasons)


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
    if _proportional(num, den, num_ref, den_ref):
        return True
    left = P.mul(num, den_ref)
    right = P.mul(num_ref, den)
    a, b = common(left, right)
    return a == b


def _proportional(num: Poly, den: Poly, num_ref: Poly, den_ref: Poly) -> bool:
    """num = k·exp(w)·N_ref and den = k·exp(w)·D_ref for one constant k and one unit w,
    read on common intervals: then num · D_ref = N_ref · den without multiplying out (a
    striped output's sums are n terms a side, their products n²). Exact: each side is
    c·exp(u)·q with q its primitive part (poly.primitive), so equal primitive parts give
    the ratios, and equal ratios give the identity. False says nothing: the full check
    decides."""
    if not (num.terms and den.terms and num_ref.terms):
        return False
    a, b, c, d = common(num, num_ref, den, den_ref)
    if len(a.terms) != len(b.terms) or len(c.terms) != len(d.terms):
        return False
    (ka, ua, qa), (kb, ub, qb) = P.primitive(a), P.primitive(b)
    if qa != qb:
        return False
    (kc, uc, qc), (kd, ud, qd) = P.primitive(c), P.primitive(d)
    return qc == qd and ka * kd == kb * kc and ua + ud == uc + ub


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
