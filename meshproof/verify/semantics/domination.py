"""Max-domination: `nonpositive(L)`, L <= 0 for every input, proved when L = P - M with M a
maximum and P one of M's members (or a maximum over a subset of them, or a row of a ranged
member), and the domination of logarithms of positive sums (log Y - log X >= 0 when every
term of X is a term of Y with no larger coefficient).
"""

from __future__ import annotations

from bisect import bisect_right
from fractions import Fraction
from weakref import WeakKeyDictionary

from meshproof.verify.semantics import poly as P
from meshproof.verify.semantics.atom_base import ZERO, Atom
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.guards import Pen, conjunction, pens, without_pens
from meshproof.verify.semantics.index import BOUND, Aff
from meshproof.verify.semantics.inequalities import Guard, extremes
from meshproof.verify.semantics.maxima import Elem, Max, Ranges
from meshproof.verify.semantics.poly_atoms import Log, RowSum
from meshproof.verify.semantics.poly_intervals import common
from meshproof.verify.semantics.poly_terms import Monomial, Poly
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


Shape = tuple[tuple[Atom, Fraction], ...]


class _Bucket:
    """The members of one shape: unranged ones, and ranged ones by their first row with
    the furthest row reached so far (`reach`), so a row range finds the members that can
    cover it by bisection (a striped ring's running max has a member per shard, all of
    one shape, each over its own rows)."""

    __slots__ = ("hollow", "los", "plain", "ranged", "reach")

    def __init__(self, members: list[Elem]) -> None:
        self.plain = [e for e in members if e.rows is None]
        self.hollow = [e for e in members if e.rows is not None and not e.rows.parts]
        self.ranged = sorted((e for e in members if e.rows is not None and e.rows.parts),
                             key=lambda e: e.rows.parts[0][0] if e.rows else 0)
        self.los = [e.rows.parts[0][0] for e in self.ranged if e.rows]
        self.reach: list[int] = []
        for e in self.ranged:
            assert e.rows is not None
            self.reach.append(max(self.reach[-1] if self.reach else e.rows.parts[-1][1],
                                  e.rows.parts[-1][1]))

    def candidates(self, rows: Ranges | None) -> list[Elem]:
        """The members whose rows may cover `rows` (every ranged one for no row)."""
        if rows is None:
            return self.plain
        if not rows.parts:
            return self.ranged + self.hollow
        lo, hi = rows.parts[0][0], rows.parts[-1][1]
        i = bisect_right(self.los, lo)
        if not i or self.reach[i - 1] < hi:
            return []
        return self.ranged[i - 1::-1]     # the nearest first: it covers when one does


_SHAPES: WeakKeyDictionary[Max, dict[Shape, _Bucket]] = WeakKeyDictionary()


def _shape(lin: Lin) -> Shape:
    """lin's atoms and coefficients without its penalties and constant: every member
    `_covered` can match has e's shape (equal bodies, a constant above, or a penalty
    dropped or implied all leave the rest of the linear form as it is)."""
    return tuple((a, c) for a, c in lin.coeffs if not isinstance(a, Pen))


def _by_shape(m: Max) -> dict[Shape, _Bucket]:
    """m's members by shape, built once per max (a striped ring's running max has a
    member per shard, and every exp argument asks which of them covers a row)."""
    hit = _SHAPES.get(m)
    if hit is None:
        groups: dict[Shape, list[Elem]] = {}
        for member in m.elems:
            groups.setdefault(_shape(member.body), []).append(member)
        hit = _SHAPES[m] = {shape: _Bucket(members) for shape, members in groups.items()}
    return hit


def _covered(e: Elem, m: Max) -> bool:
    """e <= some member of m: the same linear part with a constant at least e's (s <= s +
    20, the member of a reference point above the max), over rows that cover e's. A masked
    e (s + Pen(G)) is covered by a member s + Pen(G') when G implies G' (where e is finite,
    so is the member, and they are equal), or by s. Only members of e's shape can, and of
    those only the ranged ones that start at or before e's first row and reach its last."""
    bucket = _by_shape(m).get(_shape(e.body))
    if bucket is None:
        return False
    bare: Lin | None = None
    for member in bucket.candidates(e.rows):
        # the rows first: they are cheaper than the bodies, and most members fail them
        if e.rows is not None and (member.rows is None or not member.rows.covers(e.rows)):
            continue
        if member.body != e.body and not _shifted_up(e.body, member.body):
            held = pens(member.body)
            if bare is None:
                bare = without_pens(e.body)
            mine = bare if not held or _implies(pens(e.body), held) else None
            if mine is None or (without_pens(member.body) != mine and
                                not _shifted_up(mine, without_pens(member.body))):
                continue
        return True
    return False


_MEMBERS: WeakKeyDictionary[Max, frozenset[Elem]] = WeakKeyDictionary()


def _members(m: Max) -> frozenset[Elem]:
    """m's members as a set (equal by key), once per max."""
    hit = _MEMBERS.get(m)
    if hit is None:
        hit = _MEMBERS[m] = frozenset(m.elems)
    return hit


_CANON: WeakKeyDictionary[Max, tuple[Lin, ...]] = WeakKeyDictionary()


def _canonical(m: Max) -> tuple[Lin, ...]:
    """m's member bodies as `Lin.make` writes them (what `body + r` starts from), once per
    max."""
    hit = _CANON.get(m)
    if hit is None:
        hit = _CANON[m] = tuple(e.body if e.body.infinite else Lin.make(e.body.const,
                                                                       e.body.coeffs)
                                for e in m.elems)
    return hit


def _plus(raw: Lin, body: Lin, r: Lin) -> Lin:
    """raw + r, `body` being raw as Lin.make writes it: a constant r only moves the
    constant of the atoms Lin.make would merge again (the same Lin, without the work)."""
    if r.coeffs or r.infinite or body.infinite:
        return raw + r
    assert isinstance(body.const, Fraction) and isinstance(r.const, Fraction)
    return Lin(body.const + r.const, body.coeffs)


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
    return p.coeffs == q.coeffs


NONPOSITIVE_CACHE = 1 << 14     # answers kept (then the cache starts again)
Question = tuple[Fraction | float, Shape, tuple[tuple[int, int], ...], str | None, bool]
_ANSWERS: dict[Question, bool] = {}


def nonpositive(lin: Lin, sizes: dict[int, int], rows: Ranges | None = None,
                narrow: bool = True) -> bool:
    """lin <= 0 for every input; `rows` is the range of BOUND when lin mentions it;
    `narrow`: a masked lin may be judged where its guard holds. A function of lin's
    atoms (interned: one object per structure) and coefficients, the digits' sizes and
    the rows: about half of a zigzag ring's questions are asked again by later
    situations (the key holds the atoms, not their long key strings)."""
    if lin.infinite or not lin.coeffs:
        return _nonpositive(lin, sizes, rows, narrow)
    key = (lin.const, lin.coeffs, tuple(sorted(sizes.items())),
           None if rows is None else rows.key, narrow)
    hit = _ANSWERS.get(key)
    if hit is None:
        if len(_ANSWERS) >= NONPOSITIVE_CACHE:
            _ANSWERS.clear()
        hit = _ANSWERS[key] = _nonpositive(lin, sizes, rows, narrow)
    return hit


def _nonpositive(lin: Lin, sizes: dict[int, int], rows: Ranges | None,
                 narrow: bool) -> bool:
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
        # R = 0 (m_old - m_new): a member of M' that is one of M's is covered by itself,
        # found by its key (a striped ring's running maxima share all but one member)
        have = _members(m) if not r.coeffs and not r.const else frozenset()
        if all(e in have or _covered(Elem(_plus(e.body, body, r), e.rows), m)
               for e, body in zip(sub.elems, _canonical(sub), strict=True)):
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
