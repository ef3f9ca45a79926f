"""Order facts that hold for every input: max-domination.

`nonpositive(L)`: L <= 0, proved when L = P - M with M a maximum and P one of M's members
(or a maximum over a subset of them, or a row of a ranged member): every exp argument of
an online softmax is of this form. `at_least_one(X)`: a sum of exp(e - M) over the
members e of M is >= 1, because the member that attains the max contributes exp(0).
"""

from __future__ import annotations

from fractions import Fraction

from meshproof.verify.semantics import algebra as alg
from meshproof.verify.semantics.algebra import NotModelled
from meshproof.verify.semantics.index import BOUND, Aff
from meshproof.verify.semantics.scalars import Pieces, Ranges, Weight
from meshproof.verify.semantics.terms import (
    QK,
    Body,
    Elem,
    Lin,
    Log,
    Max,
    Poly,
    Pos,
    Scrambled,
    rows_of,
)


def _as_member(p: Lin, sizes: dict[int, int]) -> Elem | None:
    """`p` (one score, at a row that is a constant or one free digit) as a ranged member
    over the rows that row takes."""
    scores = [a for a, _ in p.coeffs if isinstance(a, (QK, Scrambled))]
    if len(scores) != 1 or any(BOUND in a.digits for a, _ in p.coeffs):
        return None
    score = scores[0]
    row = rows_of(score)
    assert row is not None
    if not row.terms:
        if not isinstance(score, QK):
            return None
        bound = QK(score.group, score.t, score.h, Aff(0, ((BOUND, 1),)), score.g)
        body = Lin.make(p.const, ((bound if a == score else a, c) for a, c in p.coeffs))
        return Elem(body, Ranges.interval(row.const, row.const + 1))
    if len(row.terms) != 1 or row.terms[0][1] != 1:
        return None
    d = row.terms[0][0]
    return Elem(p.subst({d: Aff(-row.const, ((BOUND, 1),))}),
                Ranges.interval(row.const, row.const + sizes.get(d, 1)))


def _covered(e: Elem, m: Max) -> bool:
    for member in m.elems:
        if member.body != e.body:
            continue
        if e.rows is None and member.rows is None:
            return True
        if e.rows is not None and member.rows is not None and member.rows.covers(e.rows):
            return True
    return False


def nonpositive(lin: Lin, sizes: dict[int, int], rows: Ranges | None = None) -> bool:
    """lin <= 0 for every input; `rows` is the range of BOUND when lin mentions it."""
    if lin.infinite:
        return lin.infinite < 0
    maxes = [(a, c) for a, c in lin.coeffs if isinstance(a, Max) and not a.is_min and c < 0]
    if not lin.coeffs:
        return bool(lin.const <= 0)
    for m, c in maxes:
        assert isinstance(m, Max)
        # L = P - k*M <= 0  iff  P/k <= M  (k > 0; exp2 gives k = ln 2)
        rest = Lin(lin.const, tuple((a, x) for a, x in lin.coeffs if a != m)).scale(-1 / c)
        if _below(rest, m, sizes, rows):
            return True
    return False


def _below(p: Lin, m: Max, sizes: dict[int, int], rows: Ranges | None = None) -> bool:
    """p <= m for every input."""
    assert not isinstance(p.const, float)
    if not p.coeffs:
        return any(_const_member_at_least(e, p.const) for e in m.elems)
    inner = [a for a, c in p.coeffs if isinstance(a, Max) and c == 1 and not a.is_min]
    for sub in inner:
        # P = M' + R <= M when every member e of M' has e + R among M's members (R keeps
        # P's constant: max(m_a + 20, m_b + 20) dominates m_a + 20)
        assert isinstance(sub, Max)
        r = Lin(p.const, tuple((a, c) for a, c in p.coeffs if a != sub))
        if all(_covered(Elem(e.body + r, e.rows), m) for e in sub.elems):
            return True
    # P itself a member, or (when P's constant is <= 0) P minus its constant one
    candidates = [p] + ([Lin(Fraction(0), p.coeffs)] if p.const < 0 else [])
    for q in candidates:
        if rows is not None and BOUND in q.digits:
            if _covered(Elem(q, rows), m):
                return True
            continue
        if _covered(Elem(q), m):
            return True
        member = _as_member(q, sizes)
        if member is not None and _covered(member, m):
            return True
    return False


def _const_member_at_least(e: Elem, c: Fraction) -> bool:
    return e.rows is None and not e.body.coeffs and not isinstance(e.body.const, float) and \
        e.body.const >= c


def at_least_one(x: Poly) -> bool:
    """x >= 1 for every input (x a positive sum of exp(member - M) terms)."""
    if not alg.positive(x):
        return False
    for body, _ in x.terms:
        for atom, c in body.expo:
            if isinstance(atom, Max) and c == -1 and not atom.is_min and \
                    _dominates(x, atom):
                return True
    return False


def log_exponent(body: Body) -> Lin:
    """The exponent of exp(L) * prod(pos(X)^k) read as one linear form L + sum k log X."""
    return Lin.make(Fraction(0), [*body.expo,
                                  *((Log(a.arg), Fraction(k)) for a, k in body.factors
                                    if isinstance(a, Pos))])


def _dominated_by_a_term(x: Poly, m: Max, e: Elem) -> bool:
    """Some single term w * exp(P - M) of x with w >= 1 has P >= e (e.g. the log-sum-exp
    merge: exp(m_a + log l_a - mx) dominates every member of mx that comes from side a)."""
    for body, w in x.terms:
        if not isinstance(w, Weight) or w.value() < 1 or \
                any(not isinstance(a, Pos) for a, _ in body.factors):
            continue
        p = log_exponent(body) + Lin.make(Fraction(0), ((m, Fraction(1)),))
        if nonpositive(e.body + p.scale(Fraction(-1)), {}, e.rows):
            return True
    return False


def _dominates(x: Poly, m: Max) -> bool:
    minus = ((m, Fraction(-1)),)
    for e in m.elems:
        if isinstance(e.body.const, float):
            continue
        want = Body.make(e.body.coeffs + minus, ())
        w = dict(x.terms).get(want)
        if w is None:
            if _dominated_by_a_term(x, m, e):
                continue
            return False
        # at the member that attains the max, the term is w * exp(-const): it reaches 1
        # when w >= exp(const)
        floor = Weight.of(1, e.body.const)
        if e.rows is None:
            if not isinstance(w, Weight) or w.value() < floor.value():
                return False
        elif not isinstance(w, Pieces) or not _covers(w, e.rows, floor.value()):
            return False
    return True


def _covers(w: Pieces, rows: Ranges, floor: float) -> bool:
    for lo, hi in rows.parts:
        need = lo
        for plo, phi, pw in w.parts:
            if plo <= need < phi and pw.value() >= floor:
                need = phi
            if need >= hi:
                break
        if need < hi:
            return False
    return True


def ratio_at_most_one(p: Poly) -> bool:
    """p = N * pos(Y)^-1 with every term of N also a term of Y (weights no larger)."""
    if len(p.terms) != 1:
        return False
    body, w = p.terms[0]
    negs = [(a, k) for a, k in body.factors if isinstance(a, Pos) and k < 0]
    if len(negs) != 1 or negs[0][1] != -1:
        return False
    y = negs[0][0]
    assert isinstance(y, Pos)
    num_body = Body(body.expo, tuple((a, k) for a, k in body.factors if a != y))
    try:
        from meshproof.verify.semantics.judge import expand

        num = expand(Poly.make([(num_body, w)]))
        den = expand(y.arg)
    except NotModelled:
        return False
    terms = dict(den.terms)
    for b, nw in num.terms:
        dw = terms.get(b)
        if dw is None or not _weight_le(nw, dw):
            return False
    return alg.positive(den)


def _weight_le(a: Weight | Pieces, b: Weight | Pieces) -> bool:
    if isinstance(a, Weight) and isinstance(b, Weight):
        return a.value() <= b.value() * (1 + 1e-12)
    if isinstance(a, Pieces) and isinstance(b, Pieces):
        diff = b + a.times(Weight.of(-1))
        return all(pw.value() >= -1e-12 for _, _, pw in diff.parts)
    return False
