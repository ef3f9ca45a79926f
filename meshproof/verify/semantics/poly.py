"""Exponential polynomials: sums of monomials ``c · exp(L) · prod(x^k)``.

A monomial has an exact rational coefficient, a *unit* ``exp(L)`` (L a linear form of
atoms with a rational constant: units are invertible, so a common factor such as a running
max cancels) and powers of *variables*: atoms, and two atoms defined here,

- `RowSum`: ``sum_{b in [lo, hi)} body(b)``, a sum over key rows of a monomial in the
  bound row b (``exp(c·QK(t,h,b,g))``, or that times ``V[b,g,e]``). A partial ℓ of shard
  [0, 16) is ``exp(-m) · RowSum(exp(c·QK(..b..)), 0, 16)``: the reference point is a
  unit outside the sum, so sums of different shards and reference points compare;
- `Log`: the logarithm of a positive polynomial (normalised, so ``log(2·exp(-m)·X)`` is
  ``log 2 - m + log X``).

Row sums of one body over different intervals are different variables; before two
polynomials meet they are *refined* to common intervals (``Σ[0,16) = Σ[0,8) + Σ[8,16)``),
and every result is *coarsened* back: adjacent intervals become one wherever the polynomial
depends on their sum only (equal partial derivatives). So a merged window is one variable
and forms stay the same size whatever the number of ranks.
"""

from __future__ import annotations

import itertools
import math
import zlib
from collections.abc import Iterable, Iterator
from fractions import Fraction

from meshproof.verify.semantics.atoms import (
    ONE,
    ZERO,
    Atom,
    Lin,
    _set,
    fkey,
    frame_parts,
    merge_spans,
)
from meshproof.verify.semantics.guards import Guard, Ind, conjunction
from meshproof.verify.semantics.index import BOUND, Subst

NO_UNIT = Lin(ZERO)
Powers = tuple[tuple[Atom, int], ...]


def _powers(items: Iterable[tuple[Atom, int]]) -> Powers:
    merged: dict[Atom, int] = {}
    for a, k in items:
        merged[a] = merged.get(a, 0) + k
    return tuple(sorted(((a, k) for a, k in merged.items() if k), key=lambda p: p[0].key))


class Monomial:
    """exp(unit) · prod(var^k); immutable, equal by key."""

    __slots__ = ("_hash", "_order", "digits", "key", "unit", "vars")
    unit: Lin
    vars: Powers
    _order: tuple[float, str] | None
    key: str
    digits: frozenset[int]
    _hash: int

    def __init__(self, unit: Lin = NO_UNIT, vars: Powers = ()) -> None:
        object.__setattr__(self, "unit", unit)
        object.__setattr__(self, "vars", vars)
        key = ("e(" + unit.key + ")" if unit.coeffs or unit.const else "") + \
            "".join(f"*{a.key}^{k}" for a, k in vars)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "_hash", hash(key))
        digits = set(unit.digits)
        for a, _ in vars:
            digits.update(a.digits)
        object.__setattr__(self, "digits", frozenset(digits))
        object.__setattr__(self, "_order", None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("monomials are immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Monomial) and other.key == self.key

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return self.key or "1"

    def __mul__(self, other: Monomial) -> Monomial:
        if not other.key:
            return self
        if not self.key:
            return other
        unit = self.unit + other.unit if other.unit.coeffs or other.unit.const else self.unit
        return Monomial(unit, _powers(self.vars + other.vars) if other.vars else self.vars)

    def power(self, atom: Atom) -> int:
        for a, k in self.vars:
            if a is atom:
                return k
        return 0

    def without(self, atom: Atom, k: int = 1) -> Monomial:
        return Monomial(self.unit, _powers((*self.vars, (atom, -k))))

    def subst(self, s: Subst) -> Monomial:
        if not any(d in s for d in self.digits):
            return self
        return Monomial(self.unit.subst(s), _powers((a.subst(s), k) for a, k in self.vars))

    def shift(self, delta: int) -> Monomial:
        if not delta or not self.key:
            return self
        return Monomial(self.unit.shift(delta), _powers((a.shift(delta), k)
                                                        for a, k in self.vars))

    @property
    def degree(self) -> int:
        return sum(k for _, k in self.vars)


ONE_MONO = Monomial()
Terms = tuple[tuple[Monomial, Fraction], ...]


class Poly:
    """sum of monomials with nonzero rational coefficients, sorted by key."""

    __slots__ = ("_hash", "digits", "key", "terms")
    terms: Terms
    key: str
    digits: frozenset[int]
    _hash: int

    def __init__(self, terms: Terms = ()) -> None:
        object.__setattr__(self, "terms", terms)
        key = "{" + " + ".join(f"{fkey(c)}{m.key}" for m, c in terms) + "}"
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "_hash", hash(key))
        digits: set[int] = set()
        for m, _ in terms:
            digits.update(m.digits)
        object.__setattr__(self, "digits", frozenset(digits))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("polynomials are immutable")

    @staticmethod
    def make(items: Iterable[tuple[Monomial, Fraction]]) -> Poly:
        merged: dict[Monomial, Fraction] = {}
        for m, c in items:
            merged[m] = merged.get(m, ZERO) + c
        return Poly(_spans(tuple(sorted(((m, c) for m, c in merged.items() if c),
                                        key=lambda p: p[0].key))))

    @staticmethod
    def const(c: Fraction) -> Poly:
        return Poly(((ONE_MONO, c),)) if c else ZERO_POLY

    @staticmethod
    def var(a: Atom, c: Fraction = ONE) -> Poly:
        return Poly(((Monomial(NO_UNIT, ((a, 1),)), c),)) if c else ZERO_POLY

    @staticmethod
    def unit(lin: Lin, c: Fraction = ONE) -> Poly:
        assert not lin.infinite
        assert isinstance(lin.const, Fraction)
        return Poly(((Monomial(lin), c),))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Poly) and other.key == self.key

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return self.key

    @property
    def is_zero(self) -> bool:
        return not self.terms

    def as_const(self) -> Fraction | None:
        if not self.terms:
            return ZERO
        if len(self.terms) == 1 and not self.terms[0][0].key:
            return self.terms[0][1]
        return None

    def variables(self) -> Iterator[Atom]:
        for m, _ in self.terms:
            for a, _ in m.vars:
                yield a

    def atoms(self) -> Iterator[Atom]:
        """Every atom the polynomial names at its top level (units and variables)."""
        for m, _ in self.terms:
            for a, _ in m.unit.coeffs:
                yield a
            for a, _ in m.vars:
                yield a


ZERO_POLY = Poly()
ONE_POLY = Poly(((ONE_MONO, ONE),))


def _linear_score(m: Monomial) -> bool:
    return not m.unit.coeffs and not m.unit.const and len(m.vars) == 1 and \
        m.vars[0][1] == 1 and m.vars[0][0].kind == "qk"


def _spans(terms: Terms) -> Terms:
    """Degree-1 scores over adjacent feature spans (a split contraction) are one score."""
    lin = [(m.vars[0][0], c) for m, c in terms if _linear_score(m)]
    if len(lin) < 2:
        return terms
    merged = merge_spans(tuple(lin))
    if len(merged) == len(lin):
        return terms
    rest = [(m, c) for m, c in terms if not _linear_score(m)]
    rest.extend((Monomial(NO_UNIT, ((a, 1),)), c) for a, c in merged)
    return tuple(sorted(rest, key=lambda p: p[0].key))


class RowSum(Atom):
    """sum over the key rows b in [lo, hi) of `body` (a monomial that mentions BOUND)."""

    __slots__ = ("body", "hi", "lo")
    kind = "rowsum"
    body: Monomial
    lo: int
    hi: int

    @staticmethod
    def make(body: Monomial, lo: int, hi: int) -> RowSum:
        assert hi > lo
        return RowSum._intern(f"Σ[{lo},{hi})({body.key})",
                              lambda a: _set(a, body=body, lo=lo, hi=hi),
                              frozenset(d for d in body.digits if d != BOUND))

    @staticmethod
    def guarded(body: Monomial, lo: int, hi: int) -> RowSum | None:
        """Σ_{b∈[lo,hi)} body(b) with the indicators of its body (masks) conjoined into
        one guard and cut (guards.Guard.cut): rows no point allows leave the interval,
        constraints that hold on every row and point leave the guard; None: an empty sum
        (0 for every input)."""
        inds = [a for a, _ in body.vars if isinstance(a, Ind)]
        if not inds:
            return RowSum.make(body, lo, hi) if hi > lo else None
        g = conjunction(a.guard for a in inds)
        if g is False or hi <= lo:
            return None
        bare = Monomial(body.unit, tuple((a, k) for a, k in body.vars
                                         if not isinstance(a, Ind)))
        if g is True:
            return RowSum.make(bare, lo, hi)
        assert isinstance(g, Guard)
        cut = g.cut(lo, hi)
        if cut is None:
            return None
        guard, lo, hi = cut
        if guard is None:
            return RowSum.make(bare, lo, hi)
        return RowSum.make(Monomial(bare.unit, _powers((*bare.vars, (Ind.make(guard), 1)))),
                           lo, hi)

    @property
    def base(self) -> str:
        """The key of the body without its mask: sums of one base share their cuts."""
        if not any(isinstance(a, Ind) for a, _ in self.body.vars):
            return self.body.key
        return Monomial(self.body.unit, tuple((a, k) for a, k in self.body.vars
                                              if not isinstance(a, Ind))).key

    @property
    def guard(self) -> Guard | None:
        inds = [a for a, _ in self.body.vars if isinstance(a, Ind)]
        return inds[0].guard if len(inds) == 1 else None

    def _subst(self, s: Subst) -> RowSum:
        return RowSum.make(self.body.subst(s), self.lo, self.hi)

    def _shift(self, delta: int) -> RowSum:
        dk = frame_parts(delta)[0]
        return RowSum.make(self.body.shift(delta), self.lo + dk, self.hi + dk)

    def rows(self) -> Iterable[int]:
        return (self.lo,)

    def _body_atoms(self) -> Iterator[Atom]:
        yield from (a for a, _ in self.body.unit.coeffs)
        yield from (a for a, _ in self.body.vars)

    def qrows(self) -> Iterable[int]:
        for a in self._body_atoms():
            yield from a.qrows()

    def groups(self) -> Iterable[int]:
        for a in self._body_atoms():
            yield from a.groups()

    def at(self, lo: int, hi: int) -> RowSum | None:
        """The same body over [lo, hi) (a masked body is cut again: None if empty)."""
        if self.base == self.body.key:
            return RowSum.make(self.body, lo, hi)
        return RowSum.guarded(self.body, lo, hi)

    @property
    def count(self) -> int:
        return self.hi - self.lo

    @property
    def nonnegative(self) -> bool:
        """A sum of exponentials, masked or not: >= 0 for every input."""
        return all(isinstance(a, Ind) for a, _ in self.body.vars)

    @property
    def positive(self) -> bool:
        """A sum of exponentials is > 0 for every input; a body with other factors
        (V[b]) has no sign. A masked sum of exponentials is > 0 when every point of its
        guard's box sees one of its rows."""
        if not self.body.vars:
            return True
        g = self.guard
        return len(self.body.vars) == 1 and g is not None and g.covers(self.lo, self.hi)


class Summed(Atom):
    """A sum over key rows that is not one interval (strided.py's sums over residue
    classes). Rules that read row sums expand it first; every other rule sees a variable
    with no bound, >= 0 and > 0 only as the subclass shows."""

    __slots__ = ()

    @property
    def nonnegative(self) -> bool:
        return False

    @property
    def positive(self) -> bool:
        return False


class Log(Atom):
    """log of a positive polynomial (primitive: no rational content, no common unit) or
    of a positive rational constant."""

    __slots__ = ("arg",)
    kind = "log"
    arg: Poly

    @staticmethod
    def make(arg: Poly) -> Log:
        return Log._intern(f"log{arg.key}", lambda a: _set(a, arg=arg),
                           frozenset(d for d in arg.digits if d != BOUND))

    def _subst(self, s: Subst) -> Log:
        return Log.make(subst(self.arg, s))

    def _shift(self, delta: int) -> Log:
        return Log.make(shift(self.arg, delta))

    def rows(self) -> Iterable[int]:
        for a in self.arg.atoms():
            yield from a.rows()

    def qrows(self) -> Iterable[int]:
        for a in self.arg.atoms():
            yield from a.qrows()

    def groups(self) -> Iterable[int]:
        for a in self.arg.atoms():
            yield from a.groups()


# --- arithmetic ------------------------------------------------------------------------


def add(p: Poly, q: Poly) -> Poly:
    if not q.terms:
        return p
    if not p.terms:
        return q
    rp, rq = common(p, q)
    return coarsen(Poly.make(rp.terms + rq.terms))


def scale(p: Poly, c: Fraction) -> Poly:
    if not c:
        return ZERO_POLY
    if c == 1:
        return p
    return Poly(tuple((m, k * c) for m, k in p.terms))


def times_unit(p: Poly, unit: Lin) -> Poly:
    if not unit.coeffs and not unit.const:
        return p
    return Poly.make((Monomial(m.unit + unit, m.vars), c) for m, c in p.terms)


def neg(p: Poly) -> Poly:
    return scale(p, Fraction(-1))


def sub(p: Poly, q: Poly) -> Poly:
    return add(p, neg(q))


def mul(p: Poly, q: Poly) -> Poly:
    if not p.terms or not q.terms:
        return ZERO_POLY
    cp, cq = p.as_const(), q.as_const()
    if cp is not None:
        return scale(q, cp)
    if cq is not None:
        return scale(p, cq)
    rp, rq = common(p, q)
    return coarsen(Poly.make((ma * mb, ca * cb) for ma, ca in rp.terms for mb, cb in rq.terms))


def power(p: Poly, k: int) -> Poly:
    out = ONE_POLY
    for _ in range(k):
        out = mul(out, p)
    return out


def subst(p: Poly, s: Subst) -> Poly:
    if not s or not any(d in s for d in p.digits):
        return p
    return Poly.make((m.subst(s), c) for m, c in p.terms)


def shift(p: Poly, delta: int) -> Poly:
    if not delta:
        return p
    return Poly.make((m.shift(delta), c) for m, c in p.terms)


# --- intervals: refinement and coarsening ----------------------------------------------


def _sums(p: Poly) -> Iterator[RowSum]:
    for a in p.variables():
        if isinstance(a, RowSum):
            yield a


def cuts_of(polys: Iterable[Poly]) -> dict[str, set[int]]:
    """Per row-sum body, every interval end point the polynomials use."""
    out: dict[str, set[int]] = {}
    for p in polys:
        for r in _sums(p):
            out.setdefault(r.base, set()).update((r.lo, r.hi))
    return out


def refine(p: Poly, cuts: dict[str, set[int]]) -> Poly:
    """`p` with every row sum split at the given cut points of its body."""
    pieces: dict[RowSum, list[RowSum]] = {}
    for r in set(_sums(p)):
        inner = sorted(c for c in cuts.get(r.base, ()) if r.lo < c < r.hi)
        if inner:
            ends = [r.lo, *inner, r.hi]
            pieces[r] = [x for a, b in itertools.pairwise(ends) if (x := r.at(a, b))]
    if not pieces:
        return p
    out: list[tuple[Monomial, Fraction]] = []
    for m, c in p.terms:
        split = [(a, k) for a, k in m.vars if a in pieces]
        if not split:
            out.append((m, c))
            continue
        keep = Monomial(m.unit, tuple((a, k) for a, k in m.vars if a not in pieces))
        term = Poly(((keep, c),))
        for a, k in split:
            assert isinstance(a, RowSum)
            parts = Poly.make((Monomial(NO_UNIT, ((x, 1),)), ONE) for x in pieces[a])
            for _ in range(k):
                term = _mul_free(term, parts)
        out.extend(term.terms)
    return Poly.make(out)


def _mul_free(p: Poly, q: Poly) -> Poly:
    """A product of two polynomials already over common intervals."""
    return Poly.make((ma * mb, ca * cb) for ma, ca in p.terms for mb, cb in q.terms)


def common(*polys: Poly) -> list[Poly]:
    """The polynomials refined to common intervals (for a comparison or a division)."""
    cuts = cuts_of(polys)
    return [refine(p, cuts) for p in polys]


def derivative(p: Poly, x: Atom) -> Poly:
    return Poly.make((m.without(x), c * k) for m, c in p.terms if (k := m.power(x)))


def coarsen(p: Poly) -> Poly:
    """Merge adjacent row sums of one body wherever `p` depends on their sum only."""
    while True:
        by_body: dict[str, list[RowSum]] = {}
        for r in set(_sums(p)):
            by_body.setdefault(r.body.key, []).append(r)
        merged = False
        for rows in by_body.values():
            rows.sort(key=lambda r: r.lo)
            for a, b in itertools.pairwise(rows):
                if a.hi == b.lo and derivative(p, a) == derivative(p, b):
                    p = _merge(p, a, b)
                    merged = True
                    break
            if merged:
                break
        if not merged:
            return p


def _merge(p: Poly, a: RowSum, b: RowSum) -> Poly:
    """p(a + b, 0) with a + b one row sum: p depends on a and b through a + b only."""
    ab = a.at(a.lo, b.hi)
    assert ab is not None     # the union of two non-empty sums
    out: list[tuple[Monomial, Fraction]] = []
    for m, c in p.terms:
        if m.power(b):
            continue   # vanishes at b = 0
        k = m.power(a)
        out.append((Monomial(m.unit, _powers((*m.vars, (a, -k), (ab, k)))) if k else m, c))
    return Poly.make(out)


# --- exact division --------------------------------------------------------------------


def _weight(key: str) -> float:
    """A fixed pseudo-random weight per symbol (crc32: the same in every process)."""
    w = _WEIGHTS.get(key)
    if w is None:
        w = _WEIGHTS[key] = 1.0 + zlib.crc32(key.encode()) / 2 ** 32
    return w


_WEIGHTS: dict[str, float] = {}


def _order(m: Monomial) -> tuple[float, str]:
    """A monomial order compatible with multiplication: exponents weighed by a fixed
    weight per symbol (a linear functional, so order(a·b) = order(a) + order(b)); ties,
    which only equal weights can make, fall back to the key and at worst leave a factor
    undivided, never a wrong quotient."""
    cached = m._order
    if cached is not None:
        return cached
    total = sum(k * _weight(a.key) for a, k in m.vars)
    total += sum(float(c) * _weight("e:" + a.key) for a, c in m.unit.coeffs)
    assert isinstance(m.unit.const, Fraction)
    out = (total + float(m.unit.const) * 1e-3, m.key)
    object.__setattr__(m, "_order", out)
    return out


def _lead(terms: dict[Monomial, Fraction]) -> tuple[Monomial, Fraction]:
    m = max(terms, key=_order)
    return m, terms[m]


def _divide_monomial(a: Monomial, b: Monomial) -> Monomial | None:
    vars_ = dict(a.vars)
    for x, k in b.vars:
        if vars_.get(x, 0) < k:
            return None
        vars_[x] -= k
    return Monomial(a.unit + b.unit.scale(Fraction(-1)), _powers(vars_.items()))


def divide(p: Poly, f: Poly) -> Poly | None:
    """p / f when f divides p exactly (as polynomials over common intervals), else None."""
    if not p.terms:
        return ZERO_POLY
    rp, rf = common(p, f)
    lm, lc = _lead(dict(rf.terms))
    rest = dict(rp.terms)
    quotient: list[tuple[Monomial, Fraction]] = []
    for _ in range(8 * (len(rp.terms) + len(rf.terms)) + 32):
        if not rest:
            return coarsen(Poly.make(quotient))
        tm, tc = _lead(rest)
        q = _divide_monomial(tm, lm)
        if q is None:
            return None
        qc = tc / lc
        quotient.append((q, qc))
        for m, c in rf.terms:
            key = q * m
            left = rest.get(key, ZERO) - qc * c
            if left:
                rest[key] = left
            else:
                rest.pop(key, None)
    return None


# --- normalisation ---------------------------------------------------------------------


def _content(coeffs: Iterable[Fraction]) -> Fraction:
    num = den = 0
    for c in coeffs:
        num = math.gcd(num, c.numerator)
        den = den * c.denominator // math.gcd(den, c.denominator) if den else c.denominator
    return Fraction(num, den or 1)


def primitive(p: Poly) -> tuple[Fraction, Lin, Poly]:
    """(c, u, q) with p = c · exp(u) · q, q free of rational content and of a common unit:
    c is the positive content (its sign that of the first term) and u the mean of the
    terms' units, so that q does not depend on how p was scaled."""
    c = _content(k for _, k in p.terms)
    if p.terms[0][1] < 0:
        c = -c
    units = [m.unit for m, _ in p.terms]
    if all(u is units[0] or u == units[0] for u in units):
        mean = units[0]
    else:
        total = units[0]
        for u in units[1:]:
            total = total + u
        mean = total.scale(Fraction(1, len(units)))
    if not mean.coeffs and not mean.const and c == 1:
        return c, mean, p
    minus = mean.scale(Fraction(-1))
    return c, mean, Poly.make((Monomial(m.unit + minus, m.vars), k / c) for m, k in p.terms)


def positive(p: Poly) -> bool:
    """> 0 for every input: positive coefficients and positive variables only -- or, with
    masks, sums of exponentials that are >= 0 (a masked sum may be empty at some query)
    as long as one term is positive everywhere."""
    if not p.terms or any(c <= 0 for _, c in p.terms):
        return False
    if not all(isinstance(a, (RowSum, Summed)) and a.nonnegative
               for m, _ in p.terms for a, _ in m.vars):
        return False
    return any(all(isinstance(a, (RowSum, Summed)) and a.positive for a, _ in m.vars)
               for m, _ in p.terms)


def as_lin(p: Poly) -> Lin | None:
    """The polynomial as a linear form of atoms, if it is one."""
    const = ZERO
    items: list[tuple[Atom, Fraction]] = []
    for m, c in p.terms:
        if m.unit.coeffs or m.unit.const:
            return None
        if not m.vars:
            const += c
        elif len(m.vars) == 1 and m.vars[0][1] == 1 and \
                not isinstance(m.vars[0][0], (RowSum, Summed)):
            items.append((m.vars[0][0], c))
        else:
            return None
    return Lin.make(const, items)


def of_lin(lin: Lin) -> Poly:
    assert not lin.infinite and isinstance(lin.const, Fraction)
    return Poly.make([(ONE_MONO, lin.const),
                      *((Monomial(NO_UNIT, ((a, 1),)), c) for a, c in lin.coeffs)])
