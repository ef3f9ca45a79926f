"""The normal form of a value: a rational function of exponential polynomials.

Every element of every value is one `Rat`: ``num / prod(F_i^k_i)`` with `num` a polynomial
(poly.py) and each denominator factor F_i a polynomial that is positive for every input,
*primitive* (no rational content, no common unit: those move to the numerator) and
coarsened. Operations keep it that way and cancel what they can:

- a sum over a common denominator, ``P/Q + R/S = (P·S + R·Q)/(Q·S)`` over the least common
  multiple of the factors, then every factor that divides the numerator exactly is
  divided out (``(o·ℓ_b + ...)/ℓ_b``: the lerp and sigmoid merges);
- ``exp(a + k·log X) = exp(a) · X^k`` (k an integer), ``exp(-inf) = 0``;
- ``log(c · exp(u) · X·Y) = log c + u + log X + log Y`` for positive X, Y, so a
  log-sum-exp is ``log Σ_b exp(c·QK_b)`` whatever reference point it was computed with;
- max is associative, commutative and idempotent, ``max(-inf, x) = x``; a max of members
  over key rows keeps one member per body.

Anything else raises `NotModelled` (outside the algebra) or `Undefined` (0/0, inf - inf,
log 0) with the reason in words.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from fractions import Fraction

from meshproof.verify.semantics import poly as P
from meshproof.verify.semantics.atom_base import ONE, ZERO, Atom
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.guards import Ind, Pen, may_be_neg_inf
from meshproof.verify.semantics.index import Subst
from meshproof.verify.semantics.maxima import Elem, Max, Ranges
from meshproof.verify.semantics.poly_atoms import Log, RowSum
from meshproof.verify.semantics.poly_divide import divide
from meshproof.verify.semantics.poly_intervals import coarsen
from meshproof.verify.semantics.poly_terms import (
    NO_UNIT,
    ONE_POLY,
    ZERO_POLY,
    Monomial,
    Poly,
    shift,
    subst,
)
from meshproof.verify.semantics.reasons import NotModelled, Undefined, UndefinedKind

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


# --- arithmetic ------------------------------------------------------------------------


def _inf_pair(a: Rat, b: Rat, what: str) -> Rat:
    if a.inf and b.inf and a.inf != b.inf:
        raise Undefined(UndefinedKind.INF_MINUS_INF,
                        f"{what} +inf and -inf (inf - inf is undefined; this is "
                        "exp(-inf - (-inf)) for an empty partial)")
    return a if a.inf else b


def add(a: Rat, b: Rat) -> Rat:
    if a.inf or b.inf:
        return _inf_pair(a, b, "adds")
    if b.is_zero:
        return a
    if a.is_zero:
        return b
    if a.den == b.den:
        return Rat.make(P.add(a.num, b.num), a.den)
    need: dict[Poly, int] = {}
    for f, k in a.den + b.den:
        need[f] = max(need.get(f, 0), k)
    num = P.add(_times(a.num, need, dict(a.den)), _times(b.num, need, dict(b.den)))
    return Rat.make(num, need.items())


def _times(num: Poly, need: dict[Poly, int], have: dict[Poly, int]) -> Poly:
    for f, k in need.items():
        missing = k - have.get(f, 0)
        if missing:
            num = P.mul(num, P.power(f, missing))
    return num


def neg(a: Rat) -> Rat:
    if a.inf:
        return Rat(ZERO_POLY, (), -a.inf)
    return Rat(P.neg(a.num), a.den)


def sub(a: Rat, b: Rat) -> Rat:
    if a.inf and b.inf and a.inf == b.inf:
        raise Undefined(UndefinedKind.INF_MINUS_INF,
                        "subtracts an infinite value from itself (inf - inf is undefined; "
                        "this is exp(-inf - (-inf)) for an empty partial)")
    return add(a, neg(b))


def scale(a: Rat, k: Fraction) -> Rat:
    if a.inf:
        if not k:
            raise Undefined(UndefinedKind.ZERO_TIMES_INF,
                            "multiplies an infinite value by 0 (undefined)")
        return Rat(ZERO_POLY, (), a.inf if k > 0 else -a.inf)
    if not k:
        return ZERO_RAT
    return Rat(P.scale(a.num, k), a.den)


def sign(a: Rat) -> int:
    """+1 / -1 when the value has that sign for every input, 0 when unknown."""
    if a.inf:
        return a.inf
    if P.positive(a.num):
        return 1
    if P.positive(P.neg(a.num)):
        return -1
    return 0


def mul(a: Rat, b: Rat) -> Rat:
    ca, cb = a.as_const(), b.as_const()
    if isinstance(ca, Fraction) and not b.inf:
        return scale(b, ca)
    if isinstance(cb, Fraction) and not a.inf:
        return scale(a, cb)
    if a.inf and b.inf:
        return Rat(ZERO_POLY, (), a.inf * b.inf)
    if a.inf or b.inf:
        inf, other = (a, b) if a.inf else (b, a)
        s = sign(other)
        if not s:
            raise NotModelled("multiplies an infinite value by a value of unknown sign")
        return Rat(ZERO_POLY, (), inf.inf * s)
    num, den = _logs_out(P.mul(a.num, b.num))
    return Rat.make(num, a.den + b.den + tuple(den))


def div(a: Rat, b: Rat) -> Rat:
    cb = b.as_const()
    if isinstance(cb, Fraction):
        if not cb:
            if a.is_zero:
                raise Undefined(UndefinedKind.ZERO_OVER_ZERO, "divides 0 by 0 (undefined)")
            raise Undefined(UndefinedKind.DIVIDE_BY_ZERO, "divides by zero")
        return scale(a, 1 / cb)
    if b.inf:
        if a.inf:
            raise Undefined(UndefinedKind.INF_OVER_INF,
                            "divides an infinite value by an infinite value (undefined)")
        return ZERO_RAT
    s = sign(b)
    if not s:
        raise NotModelled("divides by a value that may be zero or negative")
    if a.inf:
        return Rat(ZERO_POLY, (), a.inf * s)
    return Rat.make(P.mul(a.num, b.expanded_den()), (*a.den, (b.num, 1)))


def reciprocal(b: Rat) -> Rat:
    return div(ONE_RAT, b)


# --- exp and log -----------------------------------------------------------------------


def exp(a: Rat) -> Rat:
    lin = a.as_lin()
    if lin is None:
        raise NotModelled("takes exp of a value that is not a linear form of scores, maxima "
                          "and logarithms (e.g. exp of a sum of exponentials)")
    if lin.infinite:
        if lin.infinite < 0:
            return ZERO_RAT
        raise Undefined(UndefinedKind.EXP_OF_INF, "takes exp(+inf)")
    return exp_lin(lin)


def exp_lin(lin: Lin) -> Rat:
    """exp(L): logarithms with integer coefficients become powers of their arguments; a
    mask's penalty becomes its indicator (exp(L + Pen(G)) = Ind(G)·exp(L)). A running max
    that can be -inf (every key it covers masked at some query) is refused: exp(-inf -
    (-inf)) is undefined there."""
    unit: list[tuple[Atom, Fraction]] = []
    num = ONE_POLY
    den: list[tuple[Poly, int]] = []
    for atom, c in lin.coeffs:
        if isinstance(atom, Pen):
            if c <= 0:
                raise Undefined(UndefinedKind.INF_MINUS_INF, "takes exp of a masked score "
                                "with a negative sign (+inf where the mask hides the key)")
            num = P.mul(num, Poly.var(Ind.make(atom.guard)))
        elif isinstance(atom, Max) and may_be_neg_inf(atom):
            raise NotModelled("takes exp of a running max that is -inf for a query whose "
                              "keys are all masked (exp(-inf - (-inf)) is undefined there): "
                              "fold a block that leaves every query a key first")
        elif isinstance(atom, Log) and c.denominator == 1:
            k = int(c)
            if k > 0:
                num = P.mul(num, P.power(atom.arg, k))
            else:
                den.append((atom.arg, -k))
        else:
            unit.append((atom, c))
    assert isinstance(lin.const, Fraction)
    num = P.times_unit(num, Lin.make(lin.const, unit))
    return Rat.make(num, den)


def _logs_out(num: Poly) -> tuple[Poly, list[tuple[Poly, int]]]:
    """A product of units exp(k/2 · log X) · exp(k/2 · log X) is X^k: units whose log
    atoms reach integer coefficients become powers again."""
    if not any(isinstance(a, Log) and c.denominator == 1 for m, _ in num.terms
               for a, c in m.unit.coeffs):
        return num, []
    out = ZERO_RAT
    for m, c in num.terms:
        term = exp_lin(m.unit)
        rest = Rat(Poly(((Monomial(NO_UNIT, m.vars), c),)))
        out = add(out, Rat.make(P.mul(term.num, rest.num), term.den))
    return out.num, list(out.den)


def log(a: Rat) -> Rat:
    if a.inf:
        if a.inf > 0:
            raise Undefined(UndefinedKind.EXP_OF_INF, "takes log(+inf)")
        raise Undefined(UndefinedKind.LOG_OF_NEGATIVE, "takes log(-inf)")
    c = a.as_const()
    if isinstance(c, Fraction):
        if c == 0:
            raise Undefined(UndefinedKind.LOG_OF_ZERO, "takes log 0 (-inf)")
        if c < 0:
            raise Undefined(UndefinedKind.LOG_OF_NEGATIVE, "takes log of a negative constant")
        return Rat.const(Fraction(math.log(c)))   # a constant: folded to the machine's f32
    if sign(a) <= 0:
        if sign(a) < 0:
            raise Undefined(UndefinedKind.LOG_OF_NEGATIVE, "takes log of a negative value")
        raise NotModelled("takes log of a value that may be zero or negative")
    out = log_poly(a.num)
    for f, k in a.den:
        out = out + log_poly(f).scale(Fraction(-k))
    return Rat.of_lin(out)


def log_poly(p: Poly) -> Lin:
    """log of a positive polynomial as a linear form: log c + u + sum of log atoms."""
    content, unit, prim = P.primitive(p)
    items: list[tuple[Atom, Fraction]] = list(unit.coeffs)
    if content != 1:
        items.append((Log.make(Poly.const(content)), ONE))
    if len(prim.terms) == 1:
        mono = prim.terms[0][0]
        items.extend((Log.make(Poly.var(x)), Fraction(k)) for x, k in mono.vars)
        items.extend(mono.unit.coeffs)
        extra = mono.unit.const
    else:
        items.append((Log.make(prim), ONE))
        extra = ZERO
    assert isinstance(unit.const, Fraction) and isinstance(extra, Fraction)
    return Lin.make(unit.const + extra, items)


# --- maxima ----------------------------------------------------------------------------


def _elems(lin: Lin, is_min: bool) -> list[Elem] | None:
    """The members a linear form contributes to a max; None if it is the absorbing
    infinity (+inf for max, -inf for min)."""
    if lin.infinite:
        neutral = -1 if not is_min else 1
        return [] if lin.infinite == neutral else None
    for atom, c in lin.coeffs:
        if isinstance(atom, Max) and atom.is_min == is_min and c == 1:
            rest = Lin(lin.const, tuple((a, k) for a, k in lin.coeffs if a is not atom))
            return [Elem(e.body + rest, e.rows) for e in atom.elems]
    return [Elem(lin)]


def maximum(a: Rat, b: Rat, is_min: bool = False) -> Rat:
    la, lb = a.as_lin(), b.as_lin()
    if la is None or lb is None:
        raise NotModelled(f"takes the {'minimum' if is_min else 'maximum'} of values that are "
                          "not linear forms of scores and maxima (e.g. of sums of "
                          "exponentials)")
    ea, eb = _elems(la, is_min), _elems(lb, is_min)
    if ea is None or eb is None:
        return POS_INF if not is_min else NEG_INF
    return make_max(ea + eb, is_min)


def make_max(elems: Iterable[Elem], is_min: bool) -> Rat:
    ranged: dict[Lin, Ranges] = {}
    plain: dict[str, Lin] = {}
    best: Fraction | None = None
    for e in elems:
        if e.rows is not None:
            if e.rows.empty:
                continue
            ranged[e.body] = ranged[e.body] | e.rows if e.body in ranged else e.rows
        elif not e.body.coeffs:
            assert isinstance(e.body.const, Fraction)
            c = e.body.const
            if best is None or (c < best if is_min else c > best):
                best = c
        else:
            plain[e.body.key] = e.body
    out = [Elem(b, r) for b, r in ranged.items()] + [Elem(b) for b in plain.values()]
    if best is not None:
        out.append(Elem(Lin(best)))
    if not out:
        return NEG_INF if not is_min else POS_INF
    if len(out) == 1 and out[0].rows is None:
        return Rat.of_lin(out[0].body)
    return Rat.atom(Max.make(out, is_min))


__all__ = ["NEG_INF", "ONE_RAT", "POS_INF", "ZERO", "ZERO_RAT", "Rat", "RowSum", "add", "div",
           "exp", "log", "maximum", "mul", "neg", "scale", "sub"]
