"""Row sums over residue classes: one atom for a long chain of shifted guarded row sums.

Under the striped layout shard j of n holds the key rows [jC, jC + C), at positions
j + n·x. A causal guard divided by the stride n (guards.normal) is a unit-coefficient row
constraint ``b - t - jC + [j > i] <= 0``: the guards of the shards before the query's
rank (and those of the shards after it) coincide up to a shift of their key rows by C, the
sums being the residue classes of the positions. Kept apart, a rank's state holds one sum
per shard, and past about 14 ranks its normal form passes the size bound of symbolic.py.

A `StridedSum` is the sum of `count` pieces; piece k is the guarded row sum
``Σ_{b∈[lo + k·P, lo + k·P + length)} body_k(b)`` with body_k the body whose guard has its
key rows shifted by k·P (Guard.shift; the scores and V keep their absolute rows). A
polynomial that depends on a chain of such pieces only through their sum (equal partial
derivatives, the coarsening rule of poly.py) keeps the chain as one atom, once it has at
least `STRIDE_MIN` pieces (shorter chains stay row sums, so every rule that reads row sums
keeps working at small scale). Rules that look inside row sums (the judge, the counts, the
departures) get the pieces back with `expand`, an identity; every other rule treats the
atom as a sum it cannot read (poly.Summed): no bound, no sign beyond "a sum of
exponentials is >= 0" and "> 0 when a piece is", so a rule it blocks ends in unknown,
never in a wrong verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from fractions import Fraction
from weakref import WeakKeyDictionary

from meshproof.verify.semantics.atom_base import _set, frame_parts
from meshproof.verify.semantics.guards import Ind
from meshproof.verify.semantics.index import BOUND, Subst
from meshproof.verify.semantics.poly_atoms import RowSum, Summed
from meshproof.verify.semantics.poly_intervals import derivative
from meshproof.verify.semantics.poly_terms import NO_UNIT, Monomial, Poly, _powers
from meshproof.verify.semantics.rat import Rat

STRIDE_MIN = 2     # pieces before a chain becomes one atom


def shifted(body: Monomial, dk: int) -> Monomial:
    """The body with its guards' key rows moved by dk (its other atoms unmoved)."""
    if not dk:
        return body
    return Monomial(body.unit, _powers((Ind.make(a.guard.shift(dk)) if isinstance(a, Ind)
                                        else a, k) for a, k in body.vars))


class StridedSum(Summed):
    """Σ_{k < count} of the guarded row sum of `body` shifted by k·period over
    [lo + k·period, lo + k·period + length)."""

    __slots__ = ("body", "count", "length", "lo", "period")
    kind = "strided"
    body: Monomial
    lo: int
    length: int
    period: int
    count: int

    @staticmethod
    def make(body: Monomial, lo: int, length: int, period: int, count: int) -> StridedSum:
        assert count >= 2 and period >= length > 0
        return StridedSum._intern(
            f"Σ{count}x{period}[{lo},{lo + length})({body.key})",
            lambda a: _set(a, body=body, lo=lo, length=length, period=period, count=count),
            frozenset(d for d in body.digits if d != BOUND))

    def piece(self, k: int) -> RowSum:
        start = self.lo + k * self.period
        return RowSum.make(shifted(self.body, k * self.period), start, start + self.length)

    def pieces(self) -> list[RowSum]:
        return [self.piece(k) for k in range(self.count)]

    def _subst(self, s: Subst) -> StridedSum:
        # substituting free digits commutes with shifting BOUND's constant (guards.py)
        return StridedSum.make(self.body.subst(s), self.lo, self.length, self.period,
                               self.count)

    def _shift(self, delta: int) -> StridedSum:
        dk = frame_parts(delta)[0]
        return StridedSum.make(self.body.shift(delta), self.lo + dk, self.length,
                               self.period, self.count)

    def rows(self) -> Iterable[int]:
        return (self.lo,)

    def qrows(self) -> Iterable[int]:
        return self.piece(0).qrows()

    def groups(self) -> Iterable[int]:
        return self.piece(0).groups()

    @property
    def nonnegative(self) -> bool:
        return self.piece(0).nonnegative

    @property
    def positive(self) -> bool:
        """Every piece is >= 0, so the sum is > 0 where one piece is."""
        return self.nonnegative and (self.piece(0).positive or
                                     self.piece(self.count - 1).positive)


Link = RowSum | StridedSum


def _first(a: Link) -> RowSum:
    return a if isinstance(a, RowSum) else a.piece(0)


def _count(a: Link) -> int:
    return 1 if isinstance(a, RowSum) else a.count


def _chains(members: list[Link], p: Poly) -> Iterator[tuple[list[Link], int]]:
    """Maximal runs of members, in row order, that are consecutive pieces of one strided
    sum (same length and period, guards shifted alike) and on whose sum alone p depends."""
    i = 0
    while i < len(members):
        start = members[i]
        run = [start]
        head = _first(start)
        period = start.period if isinstance(start, StridedSum) else 0
        total = _count(start)
        d_head = derivative(p, start)
        j = i + 1
        while j < len(members):
            nxt = members[j]
            step = period or nxt.lo - head.lo
            if isinstance(nxt, StridedSum) and nxt.period != step:
                break
            first = _first(nxt)
            if step < head.count or first.lo != head.lo + total * step or \
                    first.count != head.count or \
                    first.body != shifted(head.body, total * step) or \
                    derivative(p, nxt) != d_head:
                break
            run.append(nxt)
            period = step
            total += _count(nxt)
            j += 1
        if len(run) > 1:
            yield run, period
        i = j


def stride(p: Poly) -> Poly:
    """p with every chain of at least STRIDE_MIN pieces (or one extending a strided sum)
    kept as one StridedSum: p(x1, ..., xk) = p(x1 + ... + xk, 0, ..., 0) when every
    partial derivative is the same."""
    links = [a for a in p.variables() if isinstance(a, StridedSum) or
             (isinstance(a, RowSum) and a.guard is not None)]
    if len(links) < 2:
        return p
    groups: dict[tuple[str, int], list[Link]] = {}
    for a in links:
        f = _first(a)
        groups.setdefault((f.base, f.count), []).append(a)
    for members in groups.values():
        if len(members) < 2:
            continue
        members.sort(key=lambda a: a.lo)
        for run, period in _chains(members, p):
            total = sum(_count(a) for a in run)
            if total < STRIDE_MIN and not any(isinstance(a, StridedSum) for a in run):
                continue
            head = _first(run[0])
            p = _collapse(p, run, StridedSum.make(head.body, head.lo, head.count, period,
                                                  total))
    return p


def _collapse(p: Poly, run: list[Link], into: StridedSum) -> Poly:
    """p(into, 0, ..., 0): terms holding a later member vanish, the first becomes `into`."""
    later = set(run[1:])
    out: list[tuple[Monomial, Fraction]] = []
    for m, c in p.terms:
        if any(a in later for a, _ in m.vars):
            continue
        k = m.power(run[0])
        out.append((Monomial(m.unit, _powers((*m.vars, (run[0], -k), (into, k)))) if k
                    else m, c))
    return Poly.make(out)


_PARTS: WeakKeyDictionary[StridedSum, Poly] = WeakKeyDictionary()


def _parts(a: StridedSum) -> Poly:
    """The sum of a's pieces, made once per atom (every interval and lower bound of a
    striped form reads them again)."""
    hit = _PARTS.get(a)
    if hit is None:
        hit = _PARTS[a] = Poly.make((Monomial(NO_UNIT, ((x, 1),)), Fraction(1))
                                    for x in a.pieces())
    return hit


def expand(p: Poly) -> Poly:
    """p with every strided sum replaced by the sum of its pieces (an identity)."""
    if not any(isinstance(a, StridedSum) for a in p.variables()):
        return p
    out: list[tuple[Monomial, Fraction]] = []
    for m, c in p.terms:
        strided = [(a, k) for a, k in m.vars if isinstance(a, StridedSum)]
        if not strided:
            out.append((m, c))
            continue
        # the products stay a list (merged once, by the Poly.make below: a product of
        # pieces is never a lone score, so no span merges in between either)
        term: list[tuple[Monomial, Fraction]] = [
            (Monomial(m.unit, tuple((a, k) for a, k in m.vars
                                    if not isinstance(a, StridedSum))), c)]
        for a, k in strided:
            assert isinstance(a, StridedSum)
            parts = _parts(a).terms
            for _ in range(k):
                term = [(ma * mb, ca * cb) for ma, ca in term for mb, cb in parts]
        out.extend(term)
    return Poly.make(out)


def stride_form(r: Rat) -> Rat:
    """The form with its numerator and each denominator factor strided (the same object
    when nothing changes)."""
    return _each_poly(r, stride)


EXPANDED_KEPT = 64          # forms kept expanded (then the cache starts again)
_EXPANDED: dict[str, Rat] = {}


def expand_form(r: Rat) -> Rat:
    """The form with every strided sum replaced by its pieces (an identity). Kept by the
    form's key for a while: the interval, the rounding bound and the judge each expand
    the value a situation has just made (half of a striped ring's expansions)."""
    if r.inf:
        return r
    hit = _EXPANDED.get(r.key)
    if hit is None:
        hit = _each_poly(r, expand)
        if hit is not r:
            if len(_EXPANDED) >= EXPANDED_KEPT:
                _EXPANDED.clear()
            _EXPANDED[r.key] = hit
    return hit


def _each_poly(r: Rat, rewrite: Callable[[Poly], Poly]) -> Rat:
    """`rewrite` applied to the numerator and each denominator factor; `r` itself when
    it changes none of them."""
    if r.inf:
        return r
    num = rewrite(r.num)
    den = tuple((rewrite(f), k) for f, k in r.den)
    if num is r.num and all(a is b for (a, _), (b, _) in zip(den, r.den, strict=True)):
        return r
    return Rat(num, den)


__all__ = ["STRIDE_MIN", "StridedSum", "expand", "expand_form", "shifted", "stride",
           "stride_form"]
