"""Compare a stored output's exact form with attention over its group's KV.

The reference at output coordinates (t, h, e) of group G is

    sum_j exp(c * QK_G(t, h, j, h // gqa)) * V_G[j, h // gqa, e]  /  sum_j exp(c * QK_G(...))

over every key row j of G. A kernel's form is accepted when it is ``P * pos(Y)^-1`` where
P and Y are that numerator and denominator both multiplied by one common factor exp(R)
(any R: a running max, a max that is not the true max, a log-sum-exp) and by one common
positive constant: a ratio is invariant under a common factor. That is an identity for
every input, so "proved" needs no sampling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from meshproof.model.problem import Problem
from meshproof.verify.semantics import algebra as alg
from meshproof.verify.semantics.algebra import NotModelled
from meshproof.verify.semantics.index import BOUND, Aff
from meshproof.verify.semantics.scalars import Pieces, Weight
from meshproof.verify.semantics.terms import QK, Body, Input, Lin, Poly, Pos, Scrambled, TermWeight

SCALE_RTOL = 2.0 ** -20   # the scale is compared to float32 precision (documented)
B_ROW = Aff(0, ((BOUND, 1),))


@dataclass(frozen=True, slots=True)
class Partial:
    """One term sum_j w(j) * exp(c * QK(j) + R) [* V(j)] of a numerator or denominator."""

    scale: Fraction
    score: QK
    value: Input | None
    rest: Lin
    weights: Pieces


@dataclass(slots=True)
class Shape:
    """A stored form split into numerator, denominator (if any) and what does not fit."""

    num: list[Partial] = field(default_factory=list)
    den: list[Partial] | None = None
    stray: list[str] = field(default_factory=list)      # terms that are not partials
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


_NO_SUM = "a term that does not sum over key rows (no partial of any KV)"
_NO_SCORE = "a term with no score in its exponent"
_NOT_PARTIALS = (_NO_SUM, _NO_SCORE)


def _partial(body: Body, w: TermWeight, with_value: bool) -> Partial | str:
    if not isinstance(w, Pieces):
        return _NO_SUM
    scores = [(a, c) for a, c in body.expo if isinstance(a, QK)]
    if any(isinstance(a, Scrambled) for a, _ in body.expo):
        return "an exponent whose scores are not q·kᵀ"
    if len(scores) != 1:
        return ("an exponent with the scores of several key rows added together"
                if len(scores) > 1 else _NO_SCORE)
    score, c = scores[0]
    assert isinstance(score, QK)
    if score.j != B_ROW:
        return "scores of key rows that do not match the rows summed over"
    rest = [(a, k) for a, k in body.expo if a != score]
    if any(BOUND in a.digits for a, _ in rest):
        return "an exponent that mixes the key row into more than the score"
    values = [(a, k) for a, k in body.factors]
    value: Input | None = None
    if with_value:
        if any(isinstance(a, Pos) and k < 0 for a, k in values):
            return "partials already divided by their own softmax denominator"
        if len(values) != 1 or not isinstance(values[0][0], Input) or \
                values[0][0].tensor != "V" or values[0][1] != 1:
            return "a numerator term that is not one element of V times a weight"
        value = values[0][0]
    elif values:
        return "a denominator term with extra factors"
    return Partial(c, score, value, Lin(Fraction(0), tuple(rest)), w)


def expand(p: Poly) -> Poly:
    """Multiply out positive powers of whole polynomials (pos(X)^k, k > 0)."""
    items: list[Poly] = []
    for body, w in p.terms:
        ups = [(a, k) for a, k in body.factors if isinstance(a, Pos) and k > 0]
        if not ups:
            items.append(Poly.make([(body, w)]))
            continue
        rest = Body(body.expo, tuple((a, k) for a, k in body.factors
                                     if not (isinstance(a, Pos) and k > 0)))
        term = Poly.make([(rest, w)])
        for a, k in ups:
            assert isinstance(a, Pos)
            for _ in range(k):
                term = alg.mul(term, expand(a.arg))
        items.append(term)
    out = Poly()
    for t in items:
        out = alg.add(out, t)
    return out


def decompose(form: Poly) -> Shape:
    shape = Shape()
    negs: set[Pos] = set()
    for body, _ in form.terms:
        negs.update(a for a, k in body.factors if isinstance(a, Pos) and k < 0)
    den: Pos | None = None
    if negs:
        common = [a for a in negs if all(b.power(a) == -1 for b, _ in form.terms)]
        if len(common) != 1 or len(negs) != 1:
            shape.normalised_twice = True
        den = common[0] if common else None
    num = form
    if den is not None:
        num = Poly.make((Body(b.expo, tuple((a, k) for a, k in b.factors if a != den)), w)
                        for b, w in form.terms)
    try:
        num = expand(num)
        den_form = expand(den.arg) if den is not None else None
    except NotModelled as exc:
        shape.stray.append(str(exc))
        return shape
    for body, w in num.terms:
        part = _partial(body, w, True)
        (shape.num.append(part) if isinstance(part, Partial) else shape.stray.append(part))
    if den_form is not None:
        shape.den = []
        for body, w in den_form.terms:
            part = _partial(body, w, False)
            (shape.den.append(part) if isinstance(part, Partial)
             else shape.stray.append("denominator: " + part))
    return shape


def _total(parts: list[Partial]) -> Pieces:
    out = Pieces(())
    for p in parts:
        out = out + p.weights
    return out


@dataclass(frozen=True, slots=True)
class Verdict:
    equal: bool
    reasons: tuple[str, ...]


def compare(form: Poly, problem: Problem, group: int, coords: tuple[Aff, Aff, Aff],
            sizes: dict[int, int]) -> Verdict:
    shape = decompose(form)
    reasons: list[str] = []
    if shape.normalised_twice:
        reasons.append("the output is divided by more than one softmax denominator "
                       "(a value normalised twice, or partials normalised separately and "
                       "then merged)")
    if shape.den is None and not shape.normalised_twice:
        reasons.append("the output is never divided by the softmax denominator ℓ")
    strays = list(dict.fromkeys(shape.stray))
    if not shape.num and all(r in _NOT_PARTIALS for r in strays):
        from meshproof.verify.semantics.events import describe

        strays = [f"the output holds {describe(form)}, not a merge of partials of any key"]
    reasons.extend(r for r in strays
                   if not (r.startswith("denominator: ") and r[13:] in strays))
    parts = shape.num + (shape.den or [])
    g = floordiv(coords[1], problem.gqa, sizes)
    for p in parts:
        reasons.extend(_part_reasons(p, problem, group, coords, g))
    if len({p.scale for p in parts}) > 1:
        reasons.append("numerator and denominator scale the scores differently")
    if len({p.rest for p in parts}) > 1:
        reasons.append("the partials are scaled by different reference points exp(-m): "
                       "some term is not rescaled by exp(m_old - m_new)")
    reasons.extend(_weight_reasons(shape, problem.kv_rows(group)))
    return Verdict(not reasons, tuple(dict.fromkeys(reasons)))


def _part_reasons(p: Partial, problem: Problem, group: int, coords: tuple[Aff, Aff, Aff],
                  g: Aff | None) -> list[str]:
    t, h, e = coords
    out = []
    if p.score.group != group or (p.value is not None and p.value.group != group):
        out.append("the output uses the inputs of another attention problem")
    if p.score.t != t or p.score.h != h:
        out.append("the scores belong to another query row or q head than the output element")
    if g is None or p.score.g != g:
        out.append(f"q head h reads a kv head other than h // {problem.gqa} (the harness's "
                   "blocked GQA mapping)")
    if p.value is not None and (p.value.row != B_ROW or p.value.coords[1] != p.score.g or
                                p.value.coords[2] != e):
        out.append("the weights of one key row are applied to V of another row, head or "
                   "feature")
    if not math.isclose(float(p.scale), problem.scale, rel_tol=SCALE_RTOL):
        out.append(f"the scores are scaled by {float(p.scale):.6g}, the reference by "
                   f"{problem.scale:.6g} ({problem.scale_source})")
    return out


def _weight_reasons(shape: Shape, n: int) -> list[str]:
    if not shape.num:
        return []
    out = []
    num_w = _total(shape.num)
    if not _uniform(num_w, n):
        out.append(f"the numerator weighs the key rows unevenly: {_describe(num_w, n)}")
    if shape.den is not None:
        den_w = _total(shape.den)
        if not _uniform(den_w, n):
            out.append(f"the denominator weighs the key rows unevenly: {_describe(den_w, n)}")
        elif _uniform(num_w, n) and num_w != den_w:
            out.append("numerator and denominator weigh the key rows differently")
    return out


def _uniform(w: Pieces, n: int) -> bool:
    return len(w.parts) == 1 and w.parts[0][0] == 0 and w.parts[0][1] == n and \
        w.parts[0][2].positive


def _describe(w: Pieces, n: int) -> str:
    if not w.parts:
        return "every key row is missing"
    ref = _lightest(w)
    out = []
    covered = 0
    for lo, hi, pw in w.parts:
        covered += hi - lo
        ratio = pw.ratio(ref) if ref is not None else 0.0
        if abs(ratio - 1) > 1e-9:
            out.append(f"rows {lo}..{hi - 1} weigh {ratio:g}")
    if covered < n:
        out.append(f"{n - covered} of {n} rows are missing")
    return "; ".join(out) or "rows outside the group are included"


def _lightest(w: Pieces) -> Weight | None:
    """The smallest positive row weight, compared exactly (weights such as exp(±1000)
    overflow a float)."""
    ref: Weight | None = None
    for _, _, pw in w.parts:
        if pw.normalised()[0] > 0 and (ref is None or pw.ratio(ref) < 1):
            ref = pw
    return ref


__all__ = ["Partial", "Shape", "Verdict", "Weight", "compare", "decompose", "floordiv"]


@dataclass(frozen=True, slots=True)
class Counts:
    """Per key row, how often a stored output counts it (relative to its lightest row)."""

    num: tuple[tuple[int, int, float], ...]         # (lo, hi, count) over rows 0..n-1
    den: tuple[tuple[int, int, float], ...] | None
    foreign: bool            # it counts keys of another attention problem
    mixed: bool              # weights of one key row applied to V of another
    no_denominator: bool = False   # the output is not divided by one common ℓ


def _lenient(body: Body) -> QK | None:
    scores = [a for a, _ in body.expo if isinstance(a, QK)]
    if len(scores) != 1 or scores[0].j != B_ROW:
        return None
    if any(BOUND in a.digits for a, _ in body.expo if a != scores[0]):
        return None
    score = scores[0]
    return score if isinstance(score, QK) else None


def count_rows(form: Poly, problem: Problem, group: int) -> Counts:
    """Counts at key-row granularity of what the output holds, whatever it is: rescaling
    by exp(R) is not merging (ignored); a constant factor is a weight (2.0 * x counts 2)."""
    shape = decompose(form)
    n = problem.kv_rows(group)
    foreign = mixed = False

    def tally(p: Poly, with_value: bool) -> Pieces:
        nonlocal foreign, mixed
        total = Pieces(())
        for body, w in p.terms:
            score = _lenient(body)
            if score is None or not isinstance(w, Pieces):
                continue
            values = [a for a, _ in body.factors if isinstance(a, Input) and a.tensor == "V"]
            if with_value and not values:
                continue
            if score.group != group or any(v.group != group for v in values):
                foreign = True   # another problem's keys, or another problem's V
                continue
            if values and values[0].row != B_ROW:
                mixed = True
            total = total + w
        return total

    den_atom = None
    negs = [a for b, _ in form.terms for a, k in b.factors if isinstance(a, Pos) and k < 0]
    common = [a for a in dict.fromkeys(negs) if all(b.power(a) < 0 for b, _ in form.terms)]
    if common:
        den_atom = common[-1]
    num_w = tally(form, True)
    den_w = None
    if den_atom is not None:
        assert isinstance(den_atom, Pos)
        try:
            den_w = tally(expand(den_atom.arg), False)
        except NotModelled:
            den_w = tally(den_atom.arg, False)
    base = den_w if den_w is not None and den_w.parts else num_w
    ref = _lightest(base)
    del shape
    # no common denominator (never divided by ℓ, or partials divided separately): no row
    # is merged into one
    return Counts(tuple(row_counts_of(num_w, n, ref)),
                  tuple(row_counts_of(den_w if den_w is not None else Pieces(()), n, ref)),
                  foreign, mixed, den_w is None)


def row_counts_of(w: Pieces, n: int, ref: Weight | None) -> list[tuple[int, int, float]]:
    """(lo, hi, count) per run of key rows, relative to `ref` (the lightest row); rows
    0..n-1 without any partial count 0."""
    out: list[tuple[int, int, float]] = []
    pos = 0
    for lo, hi, pw in w.parts:
        if lo > pos:
            out.append((pos, min(lo, n), 0.0))
        out.append((lo, hi, pw.ratio(ref) if ref is not None else pw.value()))
        pos = max(pos, hi)
    if pos < n:
        out.append((pos, n, 0.0))
    return out
