"""The normal form `Rat`: a polynomial over a product of positive polynomial factors, or
+-inf; its construction (factors cancelled, content absorbed) and its views.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from fractions import Fraction

from meshproof.verify.semantics import poly as P
from meshproof.verify.semantics.atom_base import ONE, Atom
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.index import Subst
from meshproof.verify.semantics.poly_divide import divide
from meshproof.verify.semantics.poly_intervals import coarsen
from meshproof.verify.semantics.poly_terms import ONE_POLY, ZERO_POLY, Poly, shift, subst
from meshproof.verify.semantics.reasons import Undefined, UndefinedKind

Factors = tuple[tuple[Poly, int], ...]


class Rat:
    """num / prod(factor^power), or the constant +inf / -inf (`inf` = +1 / -1)."""

    __slots__ = ("_hash", "den", "digits", "inf", "key", "num")
    num: Poly
    den: Factors
    inf: int
    key: str
    digits: frozenset[int]
    _hash: int

    def __init__(self, num: Poly, den: Factors = (), inf: int = 0) -> None:
        object.__setattr__(self, "num", num)
        object.__setattr__(self, "den", den)
        object.__setattr__(self, "inf", inf)
        if inf:
            key = "+inf" if inf > 0 else "-inf"
        else:
            key = num.key + "".join(f"/{f.key}^{k}" for f, k in den)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "_hash", hash(key))
        digits = set(num.digits)
        for f, _ in den:
            digits.update(f.digits)
        object.__setattr__(self, "digits", frozenset(digits))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("forms are immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Rat) and other.key == self.key

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return self.key

    # --- construction ------------------------------------------------------------------
    @staticmethod
    def const(value: Fraction | float) -> Rat:
        if isinstance(value, float):
            if math.isnan(value):
                raise Undefined(UndefinedKind.NAN_CONSTANT, "uses a nan constant")
            return POS_INF if value > 0 else NEG_INF
        return Rat(Poly.const(value))

    @staticmethod
    def atom(a: Atom, c: Fraction = ONE) -> Rat:
        return Rat(Poly.var(a, c))

    @staticmethod
    def of_lin(lin: Lin) -> Rat:
        if lin.infinite:
            return POS_INF if lin.infinite > 0 else NEG_INF
        return Rat(P.of_lin(lin))

    @staticmethod
    def make(num: Poly, den: Iterable[tuple[Poly, int]] = ()) -> Rat:
        """The normal form of num / prod(den): factors primitive and merged, every factor
        that divides the numerator divided out."""
        if num.is_zero:
            return ZERO_RAT
        factors: dict[Poly, int] = {}
        for f, k in den:
            num = _absorb(num, f, k, factors)
        for f in list(factors):
            k = factors[f]
            while k > 0:
                q = divide(num, f)
                if q is None:
                    break
                num, k = q, k - 1
            factors[f] = k
        out = tuple(sorted(((f, k) for f, k in factors.items() if k), key=lambda p: p[0].key))
        return Rat(coarsen(num), out)

    # --- views -------------------------------------------------------------------------
    @property
    def is_zero(self) -> bool:
        return not self.inf and self.num.is_zero

    def as_lin(self) -> Lin | None:
        if self.inf:
            return Lin(float("inf") if self.inf > 0 else float("-inf"))
        if self.den:
            return None
        return P.as_lin(self.num)

    def as_const(self) -> Fraction | float | None:
        if self.inf:
            return float("inf") if self.inf > 0 else float("-inf")
        return None if self.den else self.num.as_const()

    def atoms(self) -> Iterator[Atom]:
        yield from self.num.atoms()
        for f, _ in self.den:
            yield from f.atoms()

    def subst(self, s: Subst) -> Rat:
        if self.inf or not s or not any(d in s for d in self.digits):
            return self
        return Rat.make(subst(self.num, s), ((subst(f, s), k) for f, k in self.den))

    def shift(self, delta: int) -> Rat:
        if self.inf or not delta:
            return self
        return Rat.make(shift(self.num, delta), ((shift(f, delta), k) for f, k in self.den))

    def expanded_den(self) -> Poly:
        out = ONE_POLY
        for f, k in self.den:
            out = P.mul(out, P.power(f, k))
        return out


ZERO_RAT = Rat(ZERO_POLY)
ONE_RAT = Rat(ONE_POLY)
POS_INF = Rat(ZERO_POLY, (), 1)
NEG_INF = Rat(ZERO_POLY, (), -1)


def _absorb(num: Poly, f: Poly, k: int, factors: dict[Poly, int]) -> Poly:
    """Divide num by f^k: f's content and common unit go into num (their inverse), the
    rest into `factors` (a monomial split into its variables)."""
    c = f.as_const()
    if c is not None:
        if not c:
            raise Undefined(UndefinedKind.DIVIDE_BY_ZERO, "divides by zero")
        return P.scale(num, Fraction(1) / c ** k)
    content, unit, prim = P.primitive(f)
    num = P.times_unit(P.scale(num, Fraction(1) / content ** k), unit.scale(Fraction(-k)))
    if len(prim.terms) == 1:
        mono = prim.terms[0][0]
        for x, p in mono.vars:
            var = Poly.var(x)
            factors[var] = factors.get(var, 0) + p * k
        if mono.unit.coeffs or mono.unit.const:
            num = P.times_unit(num, mono.unit.scale(Fraction(-k)))
        return num
    factors[prim] = factors.get(prim, 0) + k
    return num
