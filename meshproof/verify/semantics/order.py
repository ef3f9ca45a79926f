"""Order facts that hold for every input: max-domination.

`nonpositive(L)`: L <= 0, proved when L = P - M with M a maximum and P one of M's members
(or a maximum over a subset of them, or a row of a ranged member): every exp argument of
an online softmax is of this form. `lower_bound(X)`: a positive X >= L, because where a
member of a max M attains it, X holds a term that is at least a known constant (the
member's own exp(0), a log-sum-exp's exp(log ℓ - log ℓ)).

This module holds the lower bounds; `nonpositive` and the domination of logarithms are
domination.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from fractions import Fraction
from itertools import pairwise

from meshproof.verify.semantics import poly as P
from meshproof.verify.semantics.atom_base import ZERO, Atom
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.domination import _log_bound, _termwise_le
from meshproof.verify.semantics.guards import Ind, Pen, may_be_neg_inf, pens
from meshproof.verify.semantics.maxima import Elem, Max, Ranges
from meshproof.verify.semantics.poly_atoms import Log, RowSum
from meshproof.verify.semantics.poly_intervals import common
from meshproof.verify.semantics.poly_terms import Monomial, Poly
from meshproof.verify.semantics.rat import Rat
from meshproof.verify.semantics.rational import sign
from meshproof.verify.semantics.strided import expand_form


def _exp(x: float) -> float:
    return math.inf if x > 700 else math.exp(x)


LowOf = Callable[[Lin], "float | None"]


def at_least_one(x: Rat) -> bool:
    """x >= 1 for every input (x a positive sum of exp(member - M) terms)."""
    return lower_bound(x) >= 1


def log_exponent(m: Monomial) -> Lin:
    """A monomial exp(u) · prod(x^k) of positive variables as one linear form
    u + sum k·log x."""
    return Lin.make(ZERO, [*m.unit.coeffs, *((Log.make(Poly.var(a)), Fraction(k))
                                            for a, k in m.vars)])


def lower_bound(x: Rat, low_of: LowOf | None = None) -> float:
    """A positive L with x >= L for every input, by max-domination (0 if none is shown)."""
    if x.den or sign(x) <= 0:
        return 0.0
    x = expand_form(x)           # strided sums read as their pieces (an identity)
    best = 0.0
    seen: set[tuple[Max, Fraction]] = set()
    for m, c in x.num.terms:
        if not m.unit.coeffs and not m.vars:
            best = max(best, float(c) * _exp(float(m.unit.const)))
        for atom, k in m.unit.coeffs:
            # exp(k·(P - M)) with k = 1, or ln 2 and a scale for exp2 (any k > 0); a max
            # that several terms hold is read once (its floor reads all of x, not the term)
            if isinstance(atom, Max) and k < 0 and not atom.is_min and (atom, k) not in seen:
                seen.add((atom, k))
                best = max(best, _dominated_floor(x.num, atom, -k, low_of))
    return best


def _dominated_floor(x: Poly, m: Max, k: Fraction, low_of: LowOf | None) -> float:
    """min over the members e of m of what x holds where e attains the max (0 when some
    member is not matched by a term). With `low_of` (a lower bound of a linear form under
    the input bound), a constant member below another member's lower bound never attains
    the max and needs no term (maximum(m, -1e30) guards). A masked member (one holding
    Pen(G)) attains a finite max only where G holds: there Pen(G) is 0 and Ind(G) is 1, so
    its term is the masked row sum's; the max must be finite at every point (some member
    sees a row everywhere: guards.may_be_neg_inf), else nothing is shown."""
    if any(pens(e.body) for e in m.elems) and may_be_neg_inf(m):
        return 0.0
    lows = [low_of(e.body) for e in m.elems if e.body.coeffs] if low_of else []
    above = max((v for v in lows if v is not None), default=-math.inf)
    low = math.inf
    index: _SumIndex | None = None      # x's row sums by body, for the ranged members
    for member in m.elems:
        opened = _opened(member, k)
        if opened is None:
            return 0.0
        whole, lit, unit, key = opened
        if isinstance(whole.body.const, float):
            continue
        if not whole.body.coeffs and float(whole.body.const) < above:
            continue
        # a member ranged over several intervals attains the max on one of them: each
        # interval needs a term of its own
        if whole.rows is not None and index is None:
            index = _SumIndex(x, m, k)
        parts = [Elem(whole.body, Ranges((part,))) for part in index.pieces(whole, key)] \
            if whole.rows is not None and index is not None else [whole]
        for e in parts:
            # the pieces share the member's body, hence its unit (once per member, not
            # once per term)
            if e.rows is not None and index is not None:
                floor = index.floor(e, k, key)
            else:
                floor = max((_term_floor(mono, c, m, k, e, unit, lit) for mono, c in x.terms),
                            default=0.0)
            if not lit:
                floor = max(floor, _sum_floor(x, m, k, e))
            if floor <= 0:
                return 0.0
            low = min(low, floor)
    return 0.0 if low == math.inf else low


BodyKey = tuple[str, frozenset[str]]


def _body_key(unit: Lin, lit: Iterable[Atom]) -> BodyKey:
    return unit.key, frozenset(a.key for a in lit)


class _SumIndex:
    """x's row sums by body (unit and indicators: what `_is_body` compares), built once per
    max: a ranged member then finds its cuts and its terms in one lookup instead of a pass
    over every term (a striped ring's maxima have a member per shard)."""

    def __init__(self, x: Poly, m: Max, k: Fraction) -> None:
        self.cuts: dict[BodyKey, set[int]] = {}
        self.terms: dict[BodyKey, list[tuple[int, int, Fraction, Fraction]]] = {}
        for mono, c in x.terms:
            for a, _ in mono.vars:
                key = _sum_key(a)
                if key is not None and isinstance(a, RowSum):
                    self.cuts.setdefault(key, set()).update((a.lo, a.hi))
            # the terms c·exp(const - k·M)·Σ exp(k·g(b)) a ranged member's floor reads
            if c <= 0 or len(mono.vars) != 1 or len(mono.unit.coeffs) != 1 or \
                    mono.unit.coeff(m) != -k or mono.vars[0][1] != 1:
                continue
            a = mono.vars[0][0]
            key = _sum_key(a)
            if key is not None:
                assert isinstance(a, RowSum) and isinstance(mono.unit.const, Fraction)
                self.terms.setdefault(key, []).append((a.lo, a.hi, c, mono.unit.const))

    def pieces(self, e: Elem, key: BodyKey) -> list[tuple[int, int]]:
        """`_pieces`: e's intervals cut where x's row sums of its body (`key`: its unit's
        and indicators') start or end."""
        assert e.rows is not None
        cuts = self.cuts.get(key, set())
        out: list[tuple[int, int]] = []
        for lo, hi in e.rows.parts:
            out.extend(pairwise([lo, *sorted(c for c in cuts if lo < c < hi), hi]))
        return out

    def floor(self, e: Elem, k: Fraction, key: BodyKey) -> float:
        """`_term_floor` over every term for a ranged member: the largest term holding a
        row sum of its body over rows covering e's."""
        assert e.rows is not None and isinstance(e.body.const, Fraction)
        first, last = e.rows.parts[0][0], e.rows.parts[-1][1]
        return max((float(c) * math.exp(float(const - k * e.body.const))
                    for lo, hi, c, const in self.terms.get(key, ())
                    if lo <= first and last <= hi), default=0.0)


def _sum_key(a: Atom) -> BodyKey | None:
    """A row sum's body key when its body is exp(unit) times indicators only."""
    if not isinstance(a, RowSum) or \
            not all(p == 1 and isinstance(v, Ind) for v, p in a.body.vars):
        return None
    return _body_key(a.body.unit, (v for v, _ in a.body.vars))


OPENED_KEPT = 1 << 14      # members kept opened (then the cache starts again)
Opened = tuple[Elem, frozenset[Ind], Lin, BodyKey]
_OPENED: dict[tuple[str, Fraction], Opened | None] = {}


def _opened(member: Elem, k: Fraction) -> Opened | None:
    """`_unmasked(member)` with the unit k·e of its body and their body key: a function of
    the member (by its key) and k, kept because a running max's members come back in
    every later max."""
    slot = (member.key, k)
    if slot in _OPENED:
        return _OPENED[slot]
    if len(_OPENED) >= OPENED_KEPT:
        _OPENED.clear()
    opened = _unmasked(member)
    out: Opened | None = None
    if opened is not None:
        whole, lit = opened
        unit = _member_unit(whole, k)
        out = (whole, lit, unit, _body_key(unit, lit))
    _OPENED[slot] = out
    return out


def _unmasked(e: Elem) -> tuple[Elem, frozenset[Ind]] | None:
    """A member where it attains a finite max: its body without its penalties (each is 0
    there) and the indicators that are 1 there. None: a penalty not of coefficient 1."""
    held = [(a, c) for a, c in e.body.coeffs if isinstance(a, Pen)]
    if not held:
        return e, frozenset()
    if any(c != 1 for _, c in held):
        return None
    body = Lin(e.body.const, tuple((a, c) for a, c in e.body.coeffs if not isinstance(a, Pen)))
    return Elem(body, e.rows), frozenset(Ind.make(p.guard) for p, _ in held
                                         if isinstance(p, Pen))


def _member_unit(e: Elem, k: Fraction) -> Lin:
    """The unit k·e (without its constant) that a row sum of member e's body holds."""
    return Lin.make(ZERO, ((a, q * k) for a, q in e.body.coeffs))


def _is_body(s: RowSum, unit: Lin, lit: frozenset[Ind]) -> bool:
    """s sums exp(unit) (a member's `_member_unit`) times exactly the indicators `lit`
    (none for an unmasked member)."""
    if s.body.unit != unit or len(s.body.vars) != len(lit):
        return False
    return all(p == 1 and a in lit for a, p in s.body.vars)


def _pieces(e: Elem, x: Poly, k: Fraction, lit: frozenset[Ind] = frozenset()
            ) -> list[tuple[int, int]]:
    """The intervals of a ranged member cut where x's row sums of its body start or end
    (rows merged once and twice are two sums: each piece needs a term of its own)."""
    assert e.rows is not None
    unit = _member_unit(e, k)
    cuts = {p for mono, _ in x.terms for a, _ in mono.vars
            if isinstance(a, RowSum) and _is_body(a, unit, lit) for p in (a.lo, a.hi)}
    out: list[tuple[int, int]] = []
    for lo, hi in e.rows.parts:
        out.extend(pairwise([lo, *sorted(c for c in cuts if lo < c < hi), hi]))
    return out


def _sum_floor(x: Poly, m: Max, k: Fraction, e: Elem) -> float:
    """x = exp(-M) · Y with a member log P of M and every term of P one of Y: where log P
    attains M, x >= P · exp(-log P) = 1 (the terms of a log-sum-exp merge's ℓ together)."""
    if k != 1 or e.rows is not None or len(e.body.coeffs) != 1 or e.body.coeffs[0][1] != 1:
        return 0.0
    atom = e.body.coeffs[0][0]
    if not isinstance(atom, Log):
        return 0.0
    y: list[tuple[Monomial, Fraction]] = []
    for mono, c in x.terms:
        if mono.unit.coeffs != ((m, Fraction(-1)),) or mono.unit.const:
            return 0.0
        y.append((Monomial(Lin(ZERO), mono.vars), c))
    if not _termwise_le(atom.arg, Poly.make(y)):
        return 0.0
    assert isinstance(e.body.const, Fraction)
    return _exp(float(-e.body.const))


def _term_floor(mono: Monomial, c: Fraction, m: Max, k: Fraction, e: Elem, unit: Lin,
                lit: frozenset[Ind] = frozenset()) -> float:
    """A lower bound of one term c·exp(u)·prod(x) where member e attains m (0: none);
    `unit`: `_member_unit(e, k)`; `lit`: the indicators that are 1 there (a masked
    member's)."""
    if c <= 0 or mono.unit.coeff(m) != -k:
        return 0.0
    assert isinstance(e.body.const, Fraction)
    if e.rows is not None:
        # a row sum exp(k·g(b)) over rows covering e's: it holds e's maximiser (the unit
        # is exp(-k·M + const) alone: m is its only atom)
        if len(mono.vars) != 1 or len(mono.unit.coeffs) != 1:
            return 0.0
        a, p = mono.vars[0]
        if isinstance(a, RowSum) and p == 1 and _is_body(a, unit, lit) and \
                a.lo <= e.rows.parts[0][0] and e.rows.parts[-1][1] <= a.hi:
            assert isinstance(mono.unit.const, Fraction)
            return float(c) * math.exp(float(mono.unit.const - k * e.body.const))
        return 0.0
    if lit:
        mono = Monomial(mono.unit, tuple((a, p) for a, p in mono.vars if a not in lit))
    if any(not (isinstance(a, RowSum) and a.positive) for a, _ in mono.vars):
        return 0.0
    # the term as exp(L) with L = u + sum log x; L + k·M - k·e >= a constant
    gap = log_exponent(mono) + Lin.make(ZERO, ((m, k),)) + e.body.scale(-k)
    assert isinstance(gap.const, Fraction) and isinstance(mono.unit.const, Fraction)
    bound = _log_bound(Lin(gap.const + mono.unit.const, gap.coeffs))
    return 0.0 if bound is None else float(c) * _exp(float(bound))


def ratio_at_most_one(r: Rat) -> bool:
    """r = N / Y with every term of N also a term of Y (coefficients no larger): <= 1."""
    if len(r.den) != 1 or r.den[0][1] != 1:
        return False
    r = expand_form(r)
    y = r.den[0][0]
    if not P.positive(y):
        return False
    num, den = common(r.num, y)
    terms = dict(den.terms)
    return all(m in terms and c <= terms[m] for m, c in num.terms)
