"""Magnitude bounds of exact forms under the assumption |every input element| <= B.

|QK over a span of w features| <= w·B²; a maximum lies between its members' bounds; the
logarithm of a sum of exponentials lies between its largest exponent and that plus log of
the number of terms (computed in log space: a sum of exp(2896) has no float bound, its log
does); a term exp(L)·Σ_b exp(g(b)) with L + g(b) <= 0 by max-domination is at most its
number of rows; a convex combination of V rows (a normalised output) is at most B. With a score
assumption (`--score-bound S`: |scale·q·kᵀ| <= S), B is an `InputBound` that carries it and
a whole score (every feature) is at most min(d·B², S/|scale|); a split contraction's part
keeps w·B² (the assumption bounds the sum, not its parts).
"""

from __future__ import annotations

import math
from fractions import Fraction
from weakref import WeakKeyDictionary

from meshproof.verify.semantics.atom_base import Atom
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.domination import nonpositive
from meshproof.verify.semantics.guards import may_be_neg_inf, pens, without_pens
from meshproof.verify.semantics.maxima import Max, Ranges
from meshproof.verify.semantics.order import log_exponent, lower_bound, ratio_at_most_one
from meshproof.verify.semantics.poly_atoms import Log, RowSum
from meshproof.verify.semantics.poly_terms import Monomial, Poly
from meshproof.verify.semantics.rat import Rat
from meshproof.verify.semantics.strided import expand_form
from meshproof.verify.semantics.tensor_atoms import Input, Score, Scrambled

Interval = tuple[float, float]
DEPTH = 8
EXP_LIMIT = 700.0


class InputBound(float):
    """B (|every input element| <= B) with the user's score assumption, when there is one:
    `score` is S in |scale·q·kᵀ| <= S, `qk` the bound it puts on a whole raw score
    |q·kᵀ| (S / |scale|). Every interval of this module reads `qk` where it bounds a score;
    arithmetic on B gives plain floats (which only loses the assumption: still sound)."""

    __slots__ = ("qk", "score")
    score: float
    qk: float

    def __new__(cls, b: float, score: float, scale: float) -> InputBound:
        out = float.__new__(cls, b)
        out.score = score
        out.qk = score / abs(scale) if scale else math.inf
        return out


def assume(b: float, score_bound: float | None, scale: float) -> float:
    """B with the score assumption |scale·q·kᵀ| <= score_bound attached (if any)."""
    return float(b) if score_bound is None else InputBound(float(b), score_bound, scale)


def assumption_text(b: float) -> str:
    """The assumption in words, as every verdict states it."""
    text = f"|inputs| <= {b:g}"
    return text + (f", |scale·q·kᵀ| <= {b.score:g}" if isinstance(b, InputBound) else "")


def score_cap(b: float) -> float:
    """The bound the score assumption puts on a whole raw score |q·kᵀ| (inf: none)."""
    return b.qk if isinstance(b, InputBound) else math.inf


def lin_interval(lin: Lin, b: float, d: int, depth: int = 0) -> Interval | None:
    """[lo, hi] of a linear form for every input with |x| <= b (None: unbounded)."""
    if lin.infinite:
        return None
    lo = hi = float(lin.const)
    for atom, c in lin.coeffs:
        iv = _atom_interval(atom, b, d, depth)
        if iv is None:
            return None
        k = float(c)
        lo, hi = (lo + k * iv[0], hi + k * iv[1]) if k >= 0 else \
            (lo + k * iv[1], hi + k * iv[0])
    return lo, hi


def _lin_bound(lin: Lin, b: float, d: int, depth: int = 0) -> float | None:
    iv = lin_interval(lin, b, d, depth)
    return None if iv is None else max(abs(iv[0]), abs(iv[1]))


def _atom_interval(atom: Atom, b: float, d: int, depth: int) -> Interval | None:
    if depth > DEPTH:
        return None
    if isinstance(atom, Input):
        return -b, b
    if isinstance(atom, Score):
        w = atom.flen or d
        top = w * b * b
        if w >= d:   # a whole score: the user's score assumption bounds it too
            top = min(top, score_cap(b))
        return -top, top
    if isinstance(atom, Scrambled):
        return None if atom.bound is None else (-atom.bound * b * b, atom.bound * b * b)
    if isinstance(atom, Max):
        return _max_interval(atom, b, d, depth)
    if isinstance(atom, Log):
        return log_interval(atom.arg, b, d, depth + 1)
    if isinstance(atom, RowSum):
        hi = _sum_bound(Monomial(), atom, b, d, depth + 1)
        return None if hi is None else (-hi, hi)
    return None


_MAX_IVS: WeakKeyDictionary[Max, dict[tuple[float, float, int, int], Interval | None]] = \
    WeakKeyDictionary()


def _max_interval(atom: Max, b: float, d: int, depth: int) -> Interval | None:
    """`_members_interval`, kept per max: a running max (a member per shard in a striped
    ring) is an atom of every later form whose interval is asked."""
    kept = _MAX_IVS.get(atom)
    if kept is None:
        kept = _MAX_IVS[atom] = {}
    slot = (float(b), score_cap(b), d, depth)
    if slot not in kept:
        kept[slot] = _members_interval(atom, b, d, depth)
    return kept[slot]


def _members_interval(atom: Max, b: float, d: int, depth: int) -> Interval | None:
    """A max lies between its members' largest lower and largest upper bound (so a floor
    member of -1e30 does not widen it). A masked member (s + Pen(G)) is at most s and may
    be -inf: it raises the upper bound like s, and the lower bound only when every member
    is masked but the max is finite at every point (then it is at least the least s)."""
    los: list[float] = []
    masked_los: list[float] = []
    his: list[float] = []
    for e in atom.elems:
        held = pens(e.body)
        body = without_pens(e.body) if held else e.body
        iv = lin_interval(body, b, d, depth + 1)
        if iv is None:
            return None
        (masked_los if held else los).append(iv[0])
        his.append(iv[1])
    if atom.is_min:
        return None if masked_los else (min(los), min(his))
    if not los:
        if may_be_neg_inf(atom):
            return None
        los = [min(masked_los)]
    return max(los), max(his)


def log_interval(p: Poly, b: float, d: int, depth: int = 0) -> Interval | None:
    """[lo, hi] of log p for a positive polynomial p, in log space."""
    c = p.as_const()
    if c is not None:
        return (math.log(c), math.log(c)) if c > 0 else None
    los, his = [], []
    for m, coef in p.terms:
        if coef <= 0:
            return None
        iv = _log_term(m, b, d, depth)
        if iv is None:
            return None
        los.append(math.log(coef) + iv[0])
        his.append(math.log(coef) + iv[1])
    return max(los), max(his) + math.log(len(his))


def _log_term(m: Monomial, b: float, d: int, depth: int) -> Interval | None:
    """[lo, hi] of the log of one positive monomial exp(u)·prod(Σ exp(g)^k)."""
    iv = lin_interval(m.unit, b, d, depth)
    if iv is None:
        return None
    lo, hi = iv
    for a, k in m.vars:
        if not isinstance(a, RowSum) or not a.positive:
            return None
        g = lin_interval(a.body.unit, b, d, depth)
        if g is None:
            return None
        # log Σ_b exp(g(b)) lies in [min g, max g + log n]
        lo += k * g[0]
        hi += k * (g[1] + math.log(a.count))
    return lo, hi


def _exp(x: float) -> float | None:
    return None if x > EXP_LIMIT else math.exp(x)


def _exp_sup(lin: Lin, b: float, d: int, depth: int, sizes: dict[int, int],
             rows: Ranges | None = None, interval: bool = True) -> float | None:
    """sup exp(lin): 1 by max-domination (exp(c) when only lin - c is dominated: a
    reference point above the max keeps its constant inside), else from lin's interval."""
    if not lin.coeffs:
        return _exp(float(lin.const))
    if nonpositive(lin, sizes, rows):
        return 1.0
    if lin.const and nonpositive(lin.without_const(), sizes, rows):
        return _exp(float(lin.const))
    if not interval:
        return None
    iv = lin_interval(lin, b, d, depth)
    return None if iv is None else _exp(iv[1])


def _sum_bound(outer: Monomial, s: RowSum, b: float, d: int, depth: int,
               rows_ok: bool = True) -> float | None:
    """|exp(outer.unit) · Σ_b body(b)|: max-domination when outer.unit + g(b) <= 0 over
    the rows, else the interval of the exponent."""
    sup = _exp_sup(outer.unit + s.body.unit, b, d, depth, {}, Ranges.interval(s.lo, s.hi))
    if sup is None:
        return None
    for a, k in s.body.vars:
        ab = _atom_bound(a, b, d, depth)
        if ab is None:
            return None
        sup *= ab ** k
    return sup * s.count


def _atom_bound(atom: Atom, b: float, d: int, depth: int) -> float | None:
    iv = _atom_interval(atom, b, d, depth)
    return None if iv is None else max(abs(iv[0]), abs(iv[1]))


def magnitude(form: Rat, b: float, d: int, depth: int = 0,
              sizes: dict[int, int] | None = None) -> float | None:
    """An upper bound on |value| for every input with |x| <= b (None: none found)."""
    if form.inf:
        return None
    form = expand_form(form)     # strided sums read as their pieces (an identity)
    lin = form.as_lin()
    if lin is not None:
        return _lin_bound(lin, b, d, depth)
    from meshproof.verify.semantics.views import convex_output

    if convex_output(form):
        return b
    if ratio_at_most_one(form):
        return 1.0
    share = _row_share(form, b, d, depth, sizes or {})
    if share is not None:
        return share
    scale = 1.0
    for f, k in form.den:
        low = lower_bound(Rat(f))
        if low <= 0:
            return None
        scale /= low ** k
    total = 0.0
    for m, c in form.num.terms:
        term = _term_bound(m, b, d, depth, sizes or {})
        if term is None:
            return None
        total += abs(float(c)) * term
    return total * scale


def _term_bound(m: Monomial, b: float, d: int, depth: int,
                sizes: dict[int, int]) -> float | None:
    """|exp(u) · prod(x^k)| for one monomial (its coefficient left out)."""
    assert isinstance(m.unit.const, Fraction)
    positive = all(isinstance(a, RowSum) and a.positive for a, _ in m.vars)
    if m.vars and positive:
        # exp(u) · X^k <= 1 when u + k log X <= 0 (e.g. exp(log ℓ_a - mx) in a log-sum-exp
        # merge): the powers are inside the bound
        inside = _exp_sup(log_exponent(m) + Lin(m.unit.const), b, d, depth, sizes,
                          interval=False)
        if inside is not None:
            return inside
    sums = [(a, k) for a, k in m.vars if isinstance(a, RowSum)]
    others = [(a, k) for a, k in m.vars if not isinstance(a, RowSum)]
    if len(sums) == 1 and sums[0][1] == 1:
        only = sums[0][0]
        assert isinstance(only, RowSum)
        sup = _sum_bound(m, only, b, d, depth)
    else:
        sup = _exp_sup(m.unit, b, d, depth, sizes)
        for rs, k in sums:
            ab = _atom_bound(rs, b, d, depth)
            sup = None if ab is None or sup is None else sup * ab ** k
    if sup is None:
        return None
    for a, k in others:
        ab = _atom_bound(a, b, d, depth)
        if ab is None:
            return None
        sup *= ab ** k
    return sup


def _row_share(form: Rat, b: float, d: int, depth: int, sizes: dict[int, int]
               ) -> float | None:
    """num / Y where every numerator term is one row of a term of Y (softmax
    probabilities exp(g(j)) / Σ_b exp(g(b))): each is at most 1 over that term's weight.
    A V factor in the numerator multiplies it by B."""
    if len(form.den) != 1 or form.den[0][1] != 1:
        return None
    y = form.den[0][0]
    if not y.terms or any(c <= 0 for _, c in y.terms):
        return None
    total = 0.0
    for m, c in form.num.terms:
        share = _one_row(m, y, sizes)
        if share is None:
            return None
        value = 1.0
        for a, k in m.vars:
            ab = _atom_bound(a, b, d, depth)
            if ab is None:
                return None
            value *= ab ** k
        total += abs(float(c)) * share * value
    return total


def _one_row(m: Monomial, y: Poly, sizes: dict[int, int]) -> float | None:
    """1 / w when exp(m.unit) is row j of a term w·Σ_b exp(g(b)) of y (j within the
    term's rows), else None."""
    from meshproof.verify.semantics.domination import _as_member

    if m.unit.const or not m.unit.coeffs:
        return None
    elem = _as_member(m.unit, sizes)
    if elem is None or elem.rows is None:
        return None
    for ym, yc in y.terms:
        if len(ym.vars) != 1 or ym.vars[0][1] != 1 or ym.unit.coeffs or ym.unit.const:
            continue
        s = ym.vars[0][0]
        if isinstance(s, RowSum) and Monomial(elem.body) == s.body and \
                all(s.lo <= lo and hi <= s.hi for lo, hi in elem.rows.parts):
            return 1.0 / float(yc)
    return None
