"""What a form is, in the words of an online softmax, and its partials.

Readers of the normal form (the departure recorder, the judge, the rounding analysis) ask
the same questions of a `Rat`: is it a constant, scores, a running max, a log-sum-exp, ℓ,
o, a normalised o; which row sums ("partials") does its numerator hold, with which weight
and reference point. They are answered here once.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.guards import Ind
from meshproof.verify.semantics.maxima import Max
from meshproof.verify.semantics.poly_atoms import Log, RowSum
from meshproof.verify.semantics.poly_terms import NO_UNIT, Monomial
from meshproof.verify.semantics.rational import Rat
from meshproof.verify.semantics.strided import expand_form
from meshproof.verify.semantics.tensor_atoms import Input, Score


@dataclass(frozen=True, slots=True)
class Term:
    """One term ``coef · exp(unit) · RowSum · rest`` of a numerator linear in row sums."""

    coef: Fraction
    unit: Lin
    sum: RowSum
    rest: Monomial          # the other variables (none for a plain partial)


def has_value(r: Rat) -> bool:
    """The numerator holds V (through a row sum or a V element)."""
    r = expand_form(r)     # strided sums read as their pieces
    for m, _ in r.num.terms:
        for a, _ in m.vars:
            if isinstance(a, RowSum) and any(isinstance(x, Input) and x.tensor in ("V", "Vx")
                                             for x, _ in a.body.vars):
                return True
            if isinstance(a, Input) and a.tensor in ("V", "Vx"):
                return True
    return False


def sums(r: Rat) -> Iterator[RowSum]:
    r = expand_form(r)     # strided sums read as their pieces
    for m, _ in r.num.terms:
        for a, _ in m.vars:
            if isinstance(a, RowSum):
                yield a


def linear_terms(r: Rat) -> list[Term] | None:
    """The numerator's terms if each holds exactly one row sum to the power 1."""
    r = expand_form(r)     # strided sums read as their pieces
    out = []
    for m, c in r.num.terms:
        rs = [(a, k) for a, k in m.vars if isinstance(a, RowSum)]
        if len(rs) != 1 or rs[0][1] != 1:
            return None
        s = rs[0][0]
        assert isinstance(s, RowSum)
        out.append(Term(c, m.unit, s, Monomial(NO_UNIT, tuple((a, k) for a, k in m.vars
                                                               if a is not s))))
    return out


def describe(form: Rat) -> str:
    """What a value is, in the words of an online softmax."""
    form = expand_form(form)     # strided sums read as their pieces
    if form.inf:
        return "an infinite constant"
    if form.as_const() is not None:
        return "a constant"
    lin = form.as_lin()
    if lin is not None:
        atoms = [a for a, _ in lin.coeffs]
        if any(isinstance(a, Max) for a in atoms):
            return "a running max (m)"
        if any(isinstance(a, Log) for a in atoms):
            return "a log-sum-exp value"
        if any(isinstance(a, Score) for a in atoms):
            return "scores"
        kinds = {a.tensor for a in atoms if isinstance(a, Input)}
        if kinds:
            return "/".join(sorted(kinds))
        return "a log-sum-exp value"
    normalised = bool(form.den)
    if has_value(form):
        return "o (normalised)" if normalised else "o"
    if any(True for _ in sums(form)):
        return "ℓ" if not normalised else "a normalised sum of exponentials"
    if normalised:
        return "softmax probabilities"
    return "exponential weights"


def short(form: Rat) -> str:
    """ℓ, o or what else a value is, without the normalisation remark."""
    what = describe(form)
    return "o" if what.startswith("o ") else what


def partial_rows(form: Rat) -> dict[str, list[tuple[int, int, Fraction]]]:
    """Per partial shape (the body of a row sum of scores, without the reference point),
    its row intervals with their coefficients, for numerators linear in row sums."""
    form = expand_form(form)     # strided sums read as their pieces
    terms = linear_terms(form)
    out: dict[str, list[tuple[int, int, Fraction]]] = {}
    if terms is None:
        return out
    for t in terms:
        if not any(isinstance(a, Score) for a, _ in t.sum.body.unit.coeffs):
            continue   # only true scores have key rows (a scrambled dot's are synthetic)
        key = t.sum.body.key + "|" + t.rest.key
        out.setdefault(key, []).append((t.sum.lo, t.sum.hi, t.coef))
    return out


def reference_points(form: Rat) -> dict[str, set[str]]:
    """Per partial shape, the distinct reference points exp(R) its terms carry."""
    form = expand_form(form)     # strided sums read as their pieces
    terms = linear_terms(form)
    out: dict[str, set[str]] = {}
    for t in terms or ():
        out.setdefault(t.sum.body.key + "|" + t.rest.key, set()).add(t.unit.without_const().key)
    return out


@dataclass(frozen=True, slots=True)
class Piece:
    """A term of a linear numerator on one interval of a common partition."""

    coef: Fraction
    unit: Lin
    lo: int
    hi: int
    body: Monomial
    rest: Monomial


def pieces(terms: list[Term], cuts: set[int]) -> list[Piece]:
    """The terms split at every cut point (of any body: numerator and denominator partials
    have different bodies but are compared row by row)."""
    out = []
    for t in terms:
        ends = [t.sum.lo, *sorted(c for c in cuts if t.sum.lo < c < t.sum.hi), t.sum.hi]
        for lo, hi in itertools.pairwise(ends):
            out.append(Piece(t.coef, t.unit, lo, hi, t.sum.body, t.rest))
    return out


def split_value(body: Monomial) -> tuple[Monomial, Input] | None:
    """A body exp(g(b)) · V[..] as (exp(g(b)), the V element)."""
    values = [(a, k) for a, k in body.vars if isinstance(a, Input) and a.tensor in ("V", "Vx")]
    if len(values) != 1 or values[0][1] != 1 or len(body.vars) != 1:
        return None
    v = values[0][0]
    assert isinstance(v, Input)
    return Monomial(body.unit), v


def _weighted_value(body: Monomial) -> tuple[Monomial, Input] | None:
    """A body exp(g(b))·V[..]·prod Ind(G) as (exp(g(b))·prod Ind(G), the V element): a
    masked row's weight is the indicator times its exp, still >= 0."""
    values = [(a, k) for a, k in body.vars if isinstance(a, Input) and a.tensor in ("V", "Vx")]
    if len(values) != 1 or values[0][1] != 1:
        return None
    rest = tuple((a, k) for a, k in body.vars if a is not values[0][0])
    if any(not isinstance(a, Ind) for a, _ in rest):
        return None
    v = values[0][0]
    assert isinstance(v, Input)
    return Monomial(body.unit, rest), v


def numerator_and_denominator(form: Rat) -> tuple[list[Piece], list[Piece]] | None:
    """Numerator and (single) denominator partials on a common partition, when both are
    linear in row sums."""
    form = expand_form(form)     # strided sums read as their pieces
    if len(form.den) != 1 or form.den[0][1] != 1:
        return None
    num, den = linear_terms(form), linear_terms(Rat(form.den[0][0]))
    if num is None or den is None:
        return None
    cuts = {p for t in num + den for p in (t.sum.lo, t.sum.hi)}
    return pieces(num, cuts), pieces(den, cuts)


def convex_output(form: Rat) -> bool:
    """The form is a convex combination of V rows (numerator = the common denominator's
    partials times V), normalised once: what an attention output is, whatever its rows."""
    form = expand_form(form)     # strided sums read as their pieces
    split = numerator_and_denominator(form)
    if split is None:
        return False
    num, den = split
    if not num or any(p.coef <= 0 or p.rest.key for p in num + den):
        return False
    want = sorted((p.coef, p.unit.key, p.lo, p.hi, p.body.key) for p in den)
    got = []
    for p in num:
        sv = _weighted_value(p.body)
        if sv is None:
            return False
        got.append((p.coef, p.unit.key, p.lo, p.hi, sv[0].key))
    return sorted(got) == want
