"""Masks as guards: positions, indicators and penalties over the digits of a tile.

A mask of a causal, window or padded kernel is built from `tl.arange`, host constants and
comparisons, so it depends on no input: a position is an integer affine form of the
tile's digits, and a comparison of two positions is one (or, for `==`, two) integer
affine inequalities ``Σ c_d·d + γ <= 0``. A *guard* is a conjunction of such inequalities
over free digits and BOUND (the key row a sum or max runs over, an absolute key row), with
its *box*: for every free digit, an inclusive range that is a superset of the values the
digit takes. Every decision taken here ("holds on every row and point", "holds on none",
"every point sees a row") is shown over the box, hence for more points than exist: sound.

Three atoms carry guards into the normal form (poly.py sits above this module):

- `Idx(a)`: the position ``a`` (an affine form of digits), as a value;
- `Ind(G)`: 1 where G holds, else 0 (a polynomial variable);
- `Pen(G)`: 0 where G holds, else -inf (a linear-form atom with coefficient 1:
  ``where(G, s, -inf) = s + Pen(G)`` and ``exp(L + Pen(G)) = Ind(G)·exp(L)``).

A guard on free digits never moves with a frame (it indexes tile elements, not rows); a
constraint on BOUND is a set of absolute key rows and moves with the key part of a frame:
``γ' = γ - c_BOUND·δ_k``, as a row sum's interval does (spec/semantics.md §9).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import ClassVar, Self

from meshproof.verify.semantics.atom_base import Atom, _set, aff_key, frame_parts
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.index import BOUND, Aff, Subst
from meshproof.verify.semantics.maxima import Max

Box = tuple[tuple[int, int, int], ...]        # (digit, lo, hi) inclusive, sorted by digit
POSITION_LIMIT = 1 << 24                      # f32 holds integers exactly below this


def normal(c: Aff) -> Aff | bool:
    """`c <= 0` with the gcd of its coefficients divided out (γ -> ⌈γ/g⌉); True or False
    when it has no digit."""
    if not c.terms:
        return c.const <= 0
    g = 0
    for _, k in c.terms:
        g = math.gcd(g, abs(k))
    if g == 1:
        return c
    return Aff(-((-c.const) // g), tuple((d, k // g) for d, k in c.terms))


def extremes(a: Aff, box: Mapping[int, tuple[int, int]]) -> tuple[int, int] | None:
    """min and max of `a` over the box (None if a digit has no range, BOUND included)."""
    lo = hi = a.const
    for d, k in a.terms:
        r = box.get(d)
        if r is None:
            return None
        lo += min(k * r[0], k * r[1])
        hi += max(k * r[0], k * r[1])
    return lo, hi


class Guard:
    """A conjunction of `constraints` (each ``aff <= 0``) over a `box` of free digits."""

    __slots__ = ("box", "constraints", "key")
    constraints: tuple[Aff, ...]
    box: Box
    key: str

    def __init__(self, constraints: tuple[Aff, ...], box: Box) -> None:
        object.__setattr__(self, "constraints", constraints)
        object.__setattr__(self, "box", box)
        object.__setattr__(self, "key", ",".join(aff_key(c) for c in constraints) + "|" +
                           ",".join(f"{d}:{lo}..{hi}" for d, lo, hi in box))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("guards are immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Guard) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return self.key

    @staticmethod
    def make(constraints: Iterable[Aff], box: Mapping[int, tuple[int, int]],
             decide: bool = True) -> Guard | bool:
        """The normalised conjunction: gcd-normalised, implied constraints of the same
        direction dropped, sorted; with `decide`, constraints without BOUND that hold (or
        fail) at every point of the box are dropped (or make it False). True: no
        constraint left."""
        tight: dict[tuple[tuple[int, int], ...], int] = {}
        for c in constraints:
            n = normal(c)
            if n is True:
                continue
            if n is False:
                return False
            assert isinstance(n, Aff)
            if decide and BOUND not in n.digits:
                ex = extremes(n, box)
                if ex is not None and ex[1] <= 0:
                    continue
                if ex is not None and ex[0] > 0:
                    return False
            # of two constraints with the same terms, the larger constant implies the other
            tight[n.terms] = max(tight.get(n.terms, n.const), n.const)
        if not tight:
            return True
        cons = tuple(sorted((Aff(k, t) for t, k in tight.items()), key=aff_key))
        if decide and _infeasible(cons, box):
            return False
        used = {d for c in cons for d in c.digits if d != BOUND}
        kept = tuple(sorted((d, *box[d]) for d in used if d in box))
        return Guard(cons, kept)

    @property
    def ranges(self) -> dict[int, tuple[int, int]]:
        return {d: (lo, hi) for d, lo, hi in self.box}

    @property
    def digits(self) -> frozenset[int]:
        out: set[int] = set()
        for c in self.constraints:
            out.update(c.digits)
        return frozenset(out)

    @property
    def bound(self) -> bool:
        """Whether it constrains the bound key row."""
        return any(c.coeff(BOUND) for c in self.constraints)

    def subst(self, s: Subst) -> Guard:
        """Digits replaced by affine forms of other digits; the box follows (a superset:
        a digit d in [lo, hi] replaced by Σ c_i·e_i + k with every c_i > 0 gives each e_i
        at most (hi - k) // c_i; a renaming keeps the range exactly)."""
        if not any(d in s for d in self.digits):
            return self
        box = self.ranges
        new: dict[int, tuple[int, int]] = {d: r for d, r in box.items() if d not in s}
        derived: dict[int, tuple[int, int]] = {}
        for d, (lo, hi) in box.items():
            if d not in s:
                continue
            img = s[d]
            for e, k in img.terms:
                if e == BOUND:
                    continue
                if len(img.terms) == 1 and k == 1:
                    rng = (max(0, lo - img.const), hi - img.const)
                elif all(kk > 0 for _, kk in img.terms):
                    rng = (0, (hi - img.const) // k)
                else:
                    continue
                old = derived.get(e, new.get(e))
                derived[e] = rng if old is None else (max(old[0], rng[0]),
                                                      min(old[1], rng[1]))
        new.update(derived)
        g = Guard.make((c.substitute(s) for c in self.constraints), new, decide=False)
        assert isinstance(g, Guard) or g is True or g is False
        return g if isinstance(g, Guard) else _trivial(bool(g))

    def shift(self, dk: int) -> Guard:
        """The guard with its bound key rows translated by dk."""
        if not dk or not self.bound:
            return self
        return Guard(tuple(sorted((c.shift(-c.coeff(BOUND) * dk) for c in self.constraints),
                                  key=aff_key)), self.box)

    def within(self, sizes: Mapping[int, int]) -> Guard | bool:
        """The box intersected with the exact ranges [0, size) of `sizes`, decided."""
        box = self.ranges
        for d, n in sizes.items():
            if d in box:
                lo, hi = box[d]
                box[d] = (max(lo, 0), min(hi, n - 1))
            elif d in self.digits:
                box[d] = (0, n - 1)
        return Guard.make(self.constraints, box)

    def conj(self, other: Guard) -> Guard | bool:
        box = self.ranges
        for d, lo, hi in other.box:
            old = box.get(d)
            box[d] = (lo, hi) if old is None else (max(old[0], lo), min(old[1], hi))
        return Guard.make(self.constraints + other.constraints, box)

    def negate(self) -> Guard | None:
        """¬G for a single constraint (integer negation: ¬(e <= 0) is -e + 1 <= 0); None
        for a conjunction (a disjunction is not a guard)."""
        if len(self.constraints) != 1:
            return None
        g = Guard.make((self.constraints[0].scale(-1).shift(1),), self.ranges, decide=False)
        return g if isinstance(g, Guard) else None

    def holds(self, point: Mapping[int, int]) -> bool:
        """At a point (every digit of the guard, BOUND included, given)."""
        for c in self.constraints:
            v = c.const + sum(k * point[d] for d, k in c.terms)
            if v > 0:
                return False
        return True

    # --- decisions over a row interval ---------------------------------------------------
    def _rest(self, c: Aff) -> tuple[int, int] | None:
        return extremes(c.without(frozenset({BOUND})), self.ranges)

    def cut(self, lo: int, hi: int) -> tuple[Guard | None, int, int] | None:
        """Rows [lo, hi) tightened to the rows some point allows, and the guard without the
        constraints that hold on every remaining row at every point (None: none left);
        None if no row is allowed at any point."""
        for c in self.constraints:
            cb, ex = c.coeff(BOUND), self._rest(c)
            if ex is None:
                continue
            if cb > 0:      # b <= floor(-rest / cb)
                hi = min(hi, (-ex[0]) // cb + 1)
            elif cb < 0:    # b >= ceil(rest / -cb)
                lo = max(lo, -((-ex[0]) // (-cb)))
            elif ex[0] > 0:
                return None
        if lo >= hi:
            return None
        keep = []
        for c in self.constraints:
            cb, ex = c.coeff(BOUND), self._rest(c)
            if ex is not None:
                worst = cb * (hi - 1) if cb > 0 else cb * lo
                if worst + ex[1] <= 0:
                    continue
            keep.append(c)
        if not keep:
            return None, lo, hi
        g = Guard.make(keep, self.ranges, decide=False)
        return (g if isinstance(g, Guard) else None), lo, hi

    def covers(self, lo: int, hi: int) -> bool:
        """Every point of the box sees at least one row of [lo, hi) (shown pairwise over
        the box, exact for unit coefficients of BOUND; anything else is not shown)."""
        uppers: list[Aff] = []     # b <= U(x)
        lowers: list[Aff] = []     # b >= L(x)
        box = self.ranges
        for c in self.constraints:
            cb = c.coeff(BOUND)
            rest = c.without(frozenset({BOUND}))
            if cb == 1:
                uppers.append(rest.scale(-1))
            elif cb == -1:
                lowers.append(rest)
            elif cb == 0:
                ex = extremes(rest, box)
                if ex is None or ex[1] > 0:
                    return False
            else:
                return False
        for u in uppers:
            ex = extremes(u, box)
            if ex is None or ex[0] < lo:
                return False
            for w in lowers:
                d = extremes(u + w.scale(-1), box)
                if d is None or d[0] < 0:
                    return False
        for w in lowers:
            ex = extremes(w, box)
            if ex is None or ex[1] > hi - 1:
                return False
        return True


def _infeasible(cons: tuple[Aff, ...], box: Mapping[int, tuple[int, int]]) -> bool:
    """Whether two constraints exclude each other at every point of the box: a positive
    combination of them free of BOUND (Fourier-Motzkin on the key row, or their plain sum
    when neither holds it) is positive over the box. Shown over a superset of the points,
    so sound; a real-infeasible pair is integer-infeasible."""
    for i, c in enumerate(cons):
        for e in cons[i + 1:]:
            a, b = c.coeff(BOUND), e.coeff(BOUND)
            if a * b < 0:
                comb = c.scale(abs(b)) + e.scale(abs(a))
            elif a == 0 and b == 0:
                comb = c + e
            else:
                continue
            if BOUND in comb.digits:
                continue
            ex = extremes(comb, box)
            if ex is not None and ex[0] > 0:
                return True
    return False


def _trivial(value: bool) -> Guard:
    """A guard that always holds (no constraint) or never (0 <= -1 ... kept as 1 <= 0)."""
    return Guard((), ()) if value else Guard((Aff(1),), ())


# --- atoms -----------------------------------------------------------------------------


class Idx(Atom):
    """A position: the integer affine form `aff` of digits (a value of `tl.arange`)."""

    __slots__ = ("aff", "box")
    kind = "idx"
    aff: Aff
    box: Box

    @staticmethod
    def make(aff: Aff, box: Mapping[int, tuple[int, int]]) -> Idx:
        kept = tuple(sorted((d, *box[d]) for d in aff.digits if d in box))
        key = f"I[{aff_key(aff)}|{','.join(f'{d}:{a}..{b}' for d, a, b in kept)}]"
        return Idx._intern(key, lambda a: _set(a, aff=aff, box=kept), aff.digits)

    def _subst(self, s: Subst) -> Idx:
        g = Guard(((self.aff,)), self.box).subst(s)
        return Idx.make(self.aff.substitute(s), g.ranges)


class _Guarded(Atom):
    """An atom of one guard: Ind and Pen differ only in what they are where it fails."""

    __slots__ = ("guard",)
    prefix: ClassVar[str] = ""
    guard: Guard

    @classmethod
    def make(cls, guard: Guard) -> Self:
        return cls._intern(f"{cls.prefix}[{guard.key}]", lambda a: _set(a, guard=guard),
                           guard.digits)

    def _subst(self, s: Subst) -> Self:
        return self.make(self.guard.subst(s))

    def _shift(self, delta: int) -> Self:
        dk = frame_parts(delta)[0]
        return self.make(self.guard.shift(dk)) if dk and self.guard.bound else self


class Ind(_Guarded):
    """1 where the guard holds, else 0."""

    __slots__ = ()
    kind = "ind"


class Pen(_Guarded):
    """0 where the guard holds, else -inf (in a linear form, with a positive coefficient)."""

    __slots__ = ()
    kind = "pen"
    prefix = "P"


def conjunction(guards: Iterable[Guard]) -> Guard | bool:
    out: Guard | bool = True
    for g in guards:
        if out is True:
            out = g
        elif out is False:
            return False
        else:
            assert isinstance(out, Guard)
            out = out.conj(g)
    return out


def pens(lin: Lin) -> list[Pen]:
    return [a for a, _ in lin.coeffs if isinstance(a, Pen)]


def without_pens(lin: Lin) -> Lin:
    """The linear form where its penalties are 0 (what it is wherever it is finite)."""
    return Lin(lin.const, tuple((a, c) for a, c in lin.coeffs if not isinstance(a, Pen)))


def may_be_neg_inf(m: Max) -> bool:
    """Whether a max can be -inf at some point: every member is masked there (a member
    without a penalty, or whose guard leaves a row at every point, is finite)."""
    if m.is_min:
        return any(pens(e.body) for e in m.elems)
    for e in m.elems:
        ps = pens(e.body)
        if not ps:
            return False
        g = conjunction(p.guard for p in ps)
        if g is True:
            return False
        if g is False or e.rows is None:
            continue
        assert isinstance(g, Guard)
        if any(g.covers(lo, hi) for lo, hi in e.rows.parts):
            return False
    return True


__all__ = ["POSITION_LIMIT", "Guard", "Idx", "Ind", "Pen", "conjunction", "extremes",
           "may_be_neg_inf", "normal", "pens", "without_pens"]
