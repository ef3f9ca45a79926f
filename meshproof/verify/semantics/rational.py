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

This module is the arithmetic, exp and log; the `Rat` record, its construction and views
are rat.py, max and min rational_max.py.
"""

from __future__ import annotations

import math
from fractions import Fraction

from meshproof.verify.semantics import poly as P
from meshproof.verify.semantics.atom_base import ONE, ZERO, Atom
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.guards import Ind, Pen, may_be_neg_inf
from meshproof.verify.semantics.maxima import Max
from meshproof.verify.semantics.poly_atoms import Log, RowSum
from meshproof.verify.semantics.poly_terms import NO_UNIT, ONE_POLY, ZERO_POLY, Monomial, Poly
from meshproof.verify.semantics.rat import ONE_RAT, ZERO_RAT, Rat
from meshproof.verify.semantics.reasons import NotModelled, Undefined, UndefinedKind

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


# Rat (rat.py) stays importable from here for rounding.py; NEG_INF, POS_INF (rat.py) and
# maximum (rational_max.py) are imported from where they live
__all__ = ["ONE_RAT", "ZERO", "ZERO_RAT", "Rat", "RowSum", "add", "div", "exp", "log", "mul",
           "neg", "scale", "sub"]
