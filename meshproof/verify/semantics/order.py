"""Order facts that hold for every input: max-domination.

`nonpositive(L)`: L <= 0, proved when L = P - M with M a maximum and P one of M's members
(or a maximum over a subset of them, or a row of a ranged member): every exp argument of
an online softmax is of this form. `lower_bound(X)`: a positive X >= L, because where a
member of a max M attains it, X holds a term that is at least a known constant (the
member's own exp(0), a log-sum-exp's exp(log ℓ - log ℓ)).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from fractions import Fraction
from itertools import pairwise

from meshproof.verify.semantics import poly as P
from meshproof.verify.semantics.atom_base import ZERO, Atom
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.guards import (
    Guard,
    Ind,
    Pen,
    conjunction,
    extremes,
    may_be_neg_inf,
    pens,
    without_pens,
)
from meshproof.verify.semantics.index import BOUND, Aff
from meshproof.verify.semantics.maxima import Elem, Max, Ranges
from meshproof.verify.semantics.poly_atoms import Log, RowSum
from meshproof.verify.semantics.poly_intervals import common
from meshproof.verify.semantics.poly_terms import Monomial, Poly
from meshproof.verify.semantics.rational import Rat, sign
from meshproof.verify.semantics.strided import expand_form
from meshproof.verify.semantics.tensor_atoms import Score, Scrambled

B_ROW = Aff(0, ((BOUND, 1),))


def _as_member(p: Lin, sizes: dict[int, int]) -> Elem | None:
    """`p` (one score, at a row that is a constant or one free digit) as a ranged member
    over the rows that row takes."""
    scores = [a for a, _ in p.coeffs if isinstance(a, (Score, Scrambled))]
    if len(scores) != 1 or any(BOUND in a.digits for a, _ in p.coeffs):
        return None
    score = scores[0]
    row = score.row
    if not row.terms:
        if not isinstance(score, Score):
            return None
        bound = score.with_row(B_ROW)
        body = Lin.make(p.const, ((bound if a is score else a, c) for a, c in p.coeffs))
        return Elem(body, Ranges.interval(row.const, row.const + 1))
    if len(row.terms) != 1 or row.terms[0][1] != 1:
        return None
    d = row.terms[0][0]
    return Elem(p.subst({d: Aff(-row.const, ((BOUND, 1),))}),
                Ranges.interval(row.const, row.const + sizes.get(d, 1)))


def _covered(e: Elem, m: Max) -> bool:
    """e <= some member of m: the same linear part with a constant at least e's (s <= s +
    20, the member of a reference point above the max), over rows that cover e's. A masked
    e (s + Pen(G)) is covered by a member s + Pen(G') when G implies G' (where e is finite,
    so is the member, and they are equal), or by s."""
    bare = without_pens(e.body)
    for member in m.elems:
        if member.body != e.body and not _shifted_up(e.body, member.body):
            held = pens(member.body)
            mine = bare if not held or _implies(pens(e.body), held) else None
            if mine is None or (without_pens(member.body) != mine and
                                not _shifted_up(mine, without_pens(member.body))):
                continue
        if e.rows is None and member.rows is None:
            return True
        if e.rows is not None and member.rows is not None and member.rows.covers(e.rows):
            return True
    return False


def _implies(mine: list[Pen], theirs: list[Pen]) -> bool:
    """Every constraint of `theirs` guards follows from one of `mine` (the same terms, a
    constant at least as large)."""
    have = [c for p in mine for c in p.guard.constraints]
    return all(any(h.terms == c.terms and h.const >= c.const for h in have)
               for p in theirs for c in p.guard.constraints)


def _shifted_up(p: Lin, q: Lin) -> bool:
    """q = p + c with a rational c >= 0."""
    if isinstance(p.const, float) or isinstance(q.const, float) or q.const < p.const:
        return False
    return Lin(ZERO, p.coeffs) == Lin(ZERO, q.coeffs)


def nonpositive(lin: Lin, sizes: dict[int, int], rows: Ranges | None = None,
                narrow: bool = True) -> bool:
    """lin <= 0 for every input; `rows` is the range of BOUND when lin mentions it;
    `narrow`: a masked lin may be judged where its guard holds."""
    if lin.infinite:
        return lin.infinite < 0
    if not lin.coeffs:
        return bool(lin.const <= 0)
    maxes = [(a, c) for a, c in lin.coeffs if isinstance(a, Max) and not a.is_min and c < 0]
    for m, c in maxes:
        assert isinstance(m, Max)
        # L = P - k*M <= 0  iff  P/k <= M  (k > 0; exp2 gives k = ln 2)
        rest = Lin(lin.const, tuple((a, x) for a, x in lin.coeffs if a is not m)).scale(-1 / c)
        if _below(rest, m, sizes, rows):
            return True
    upper = _log_upper(lin)
    if upper is not None and upper <= 0:
        return True
    return narrow and _nonpositive_where_finite(lin, sizes, rows)


def _nonpositive_where_finite(lin: Lin, sizes: dict[int, int], rows: Ranges | None) -> bool:
    """s + Pen(G) - M <= 0: -inf where G fails; where G holds, the free digits lie in
    ranges G leaves them (a superset, from each constraint over the others' sizes), so the
    value is one of the rows the max holds (it may be over just those rows)."""
    held = pens(lin)
    if not held:
        return False
    guard = conjunction(p.guard for p in held)
    if guard is False:
        return True     # -inf everywhere
    if not isinstance(guard, Guard):
        return False
    narrowed = dict(sizes)
    shift: dict[int, Aff] = {}
    ranges = _digit_ranges(guard, sizes)
    if not ranges:
        return False
    for d, (lo, hi) in ranges.items():
        if lo > hi:
            return True   # the guard holds nowhere: -inf everywhere
        narrowed[d] = hi - lo + 1
        if lo:
            shift[d] = Aff(lo, ((d, 1),))
    return nonpositive(lin.subst(shift) if shift else lin, narrowed, rows, narrow=False)


def _digit_ranges(guard: Guard, sizes: dict[int, int]) -> dict[int, tuple[int, int]]:
    """The free digits' ranges where the guard holds, narrower than [0, size): from each
    constraint Σ k·x + γ <= 0, x's bound given the others' extremes over their sizes."""
    box = {d: (0, n - 1) for d, n in sizes.items()}
    out: dict[int, tuple[int, int]] = {}
    for c in guard.constraints:
        for d, k in c.terms:
            if d == BOUND or d not in sizes:
                continue
            others = extremes(c.without(frozenset({d})), box)
            if others is None:
                continue
            lo, hi = out.get(d, box[d])
            if k > 0:        # k·x <= -others: x <= floor(-min others / k)
                hi = min(hi, (-others[0]) // k)
            else:            # -k·x >= others: x >= ceil(min others / -k)
                lo = max(lo, -((-others[0]) // -k))
            out[d] = (lo, hi)
    return {d: r for d, r in out.items() if r != box[d]}


def _below(p: Lin, m: Max, sizes: dict[int, int], rows: Ranges | None = None) -> bool:
    """p <= m for every input."""
    assert not isinstance(p.const, float)
    if not p.coeffs:
        return any(_const_member_at_least(e, p.const) for e in m.elems)
    inner = [a for a, c in p.coeffs if isinstance(a, Max) and c == 1 and not a.is_min]
    for sub in inner:
        # P = M' + R <= M when every member e of M' has e + R among M's members
        assert isinstance(sub, Max)
        r = Lin(p.const, tuple((a, c) for a, c in p.coeffs if a is not sub))
        if all(_covered(Elem(e.body + r, e.rows), m) for e in sub.elems):
            return True
    candidates = [p] + ([Lin(ZERO, p.coeffs)] if p.const < 0 else [])
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
    # p = log ρ_I + c <= log ρ_J for a member log ρ_J with I inside J
    if any(e.rows is None and (d := _log_bound(e.body + p.scale(Fraction(-1))))
           is not None and d >= 0 for e in m.elems):
        return True
    return _below_a_log_sum(p, m, sizes, rows)


def _below_a_log_sum(p: Lin, m: Max, sizes: dict[int, int], rows: Ranges | None) -> bool:
    """g(b0) <= log Σ_{b in I} exp(g(b)) for b0 in I: p is one exponent of a member's sum
    (log ℓ-style members of a log-sum-exp merge's max dominate every score of their rows)."""
    if p.const and p.const > 0:
        return False
    core = Lin(ZERO, p.coeffs)
    if rows is not None and BOUND in core.digits:
        elem: Elem | None = Elem(core, rows)
    else:
        elem = _as_member(core, sizes)
    if elem is None or elem.rows is None:
        return False
    body = Monomial(core if BOUND in core.digits else elem.body)
    for e in m.elems:
        if e.rows is not None or len(e.body.coeffs) != 1 or e.body.coeffs[0][1] != 1 or \
                e.body.const:
            continue
        s = _logged_sum(e.body.coeffs[0][0])
        if s is not None and s.body == body and all(s.lo <= lo and hi <= s.hi
                                                    for lo, hi in elem.rows.parts):
            return True
    return False


def _const_member_at_least(e: Elem, c: Fraction) -> bool:
    return e.rows is None and not e.body.coeffs and not isinstance(e.body.const, float) and \
        e.body.const >= c


def _log_bound(lin: Lin) -> Fraction | None:
    """A constant L with lin >= L for every input, when lin's atoms are logarithms of
    positive polynomials that dominate each other: log Y - log X >= 0 when every term of X
    is a term of Y with no larger coefficient (Σ over I inside Σ over J, same body)."""
    assert not isinstance(lin.const, float)
    pos: list[tuple[Poly, Fraction]] = []
    neg: list[tuple[Poly, Fraction]] = []
    for a, c in lin.coeffs:
        if not isinstance(a, Log) or not P.positive(a.arg):
            return None
        (pos if c > 0 else neg).append((a.arg, abs(c)))
    # the atoms must pair up as c·(log Y - log X) with X <= Y, each >= 0; a log left over
    # has no sign (log Σ_b exp(g(b)) is as negative as g)
    free = list(pos)
    for x, c in neg:
        match = next((i for i, (y, k) in enumerate(free) if k == c and _termwise_le(x, y)),
                     None)
        if match is None:
            return None
        free.pop(match)
    return None if free else lin.const


def _termwise_le(x: Poly, y: Poly) -> bool:
    """Every term of x is a term of y with no larger coefficient (y positive)."""
    if x == y:
        return True
    a, b = common(x, y)
    terms = dict(b.terms)
    return all(m in terms and c <= terms[m] for m, c in a.terms)


def _log_upper(lin: Lin) -> Fraction | None:
    """A constant U with lin <= U (the same domination, the other way round)."""
    flipped = _log_bound(lin.scale(Fraction(-1)))
    return None if flipped is None else -flipped


def _logged_sum(a: Atom) -> RowSum | None:
    if not isinstance(a, Log) or len(a.arg.terms) != 1:
        return None
    m, c = a.arg.terms[0]
    if c != 1 or m.unit.coeffs or len(m.vars) != 1 or m.vars[0][1] != 1:
        return None
    s = m.vars[0][0]
    return s if isinstance(s, RowSum) and s.positive else None


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
    for m, c in x.num.terms:
        if not m.unit.coeffs and not m.vars:
            best = max(best, float(c) * _exp(float(m.unit.const)))
        for atom, k in m.unit.coeffs:
            # exp(k·(P - M)) with k = 1, or ln 2 and a scale for exp2 (any k > 0)
            if isinstance(atom, Max) and k < 0 and not atom.is_min:
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
        opened = _unmasked(member)
        if opened is None:
            return 0.0
        whole, lit = opened
        if isinstance(whole.body.const, float):
            continue
        if not whole.body.coeffs and float(whole.body.const) < above:
            continue
        # a member ranged over several intervals attains the max on one of them: each
        # interval needs a term of its own
        if whole.rows is not None and index is None:
            index = _SumIndex(x, m, k)
        parts = [Elem(whole.body, Ranges((part,))) for part in index.pieces(whole, k, lit)] \
            if whole.rows is not None and index is not None else [whole]
        for e in parts:
            unit = _member_unit(e, k)     # once per member piece, not once per term
            if e.rows is not None and index is not None:
                floor = index.floor(e, k, unit, lit)
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

    def pieces(self, e: Elem, k: Fraction, lit: frozenset[Ind]) -> list[tuple[int, int]]:
        """`_pieces`: e's intervals cut where x's row sums of its body start or end."""
        assert e.rows is not None
        cuts = self.cuts.get(_body_key(_member_unit(e, k), lit), set())
        out: list[tuple[int, int]] = []
        for lo, hi in e.rows.parts:
            out.extend(pairwise([lo, *sorted(c for c in cuts if lo < c < hi), hi]))
        return out

    def floor(self, e: Elem, k: Fraction, unit: Lin, lit: frozenset[Ind]) -> float:
        """`_term_floor` over every term for a ranged member: the largest term holding a
        row sum of its body over rows covering e's."""
        assert e.rows is not None and isinstance(e.body.const, Fraction)
        first, last = e.rows.parts[0][0], e.rows.parts[-1][1]
        return max((float(c) * math.exp(float(const - k * e.body.const))
                    for lo, hi, c, const in self.terms.get(_body_key(unit, lit), ())
                    if lo <= first and last <= hi), default=0.0)


def _sum_key(a: Atom) -> BodyKey | None:
    """A row sum's body key when its body is exp(unit) times indicators only."""
    if not isinstance(a, RowSum) or \
            not all(p == 1 and isinstance(v, Ind) for v, p in a.body.vars):
        return None
    return _body_key(a.body.unit, (v for v, _ in a.body.vars))


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
