"""Monomials ``exp(unit) · prod(x^k)`` and polynomials (sums of them with exact rational
coefficients): the immutable terms poly.py computes with, their substitution and shift.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from fractions import Fraction

from meshproof.verify.semantics.atom_base import ONE, ZERO, Atom, fkey
from meshproof.verify.semantics.atoms import Lin, merge_spans
from meshproof.verify.semantics.index import Subst

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
            # most monomials come once: no Fraction addition for them (ZERO + c is c)
            old = merged.get(m)
            merged[m] = c if old is None and isinstance(c, Fraction) else (old or ZERO) + c
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


def subst(p: Poly, s: Subst) -> Poly:
    if not s or not any(d in s for d in p.digits):
        return p
    return Poly.make((m.subst(s), c) for m, c in p.terms)


def shift(p: Poly, delta: int) -> Poly:
    if not delta:
        return p
    return Poly.make((m.shift(delta), c) for m, c in p.terms)
