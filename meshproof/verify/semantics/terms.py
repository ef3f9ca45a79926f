"""The symbolic element forms: atoms, linear forms and exponential polynomials.

Every element of every value is one `Poly`: a sum of terms ``w * exp(L) * prod(a^k)`` where
`w` is an exact weight, `L` a linear combination of atoms and `a^k` integer powers of
atoms. A term may sum over one *bound* key row (digit `BOUND`) with a weight per row
(`Pieces`). Atoms are the attention inputs (an element of Q, K or V of a group), the
score ``QK = sum_f Q[t,h,f] K[j,g,f]``, maxima over sets of linear forms, logarithms of
positive polynomials and positive polynomials used as factors (so ``o / l`` is
``o * pos(l)^-1``).

Atoms compare by a canonical key string, so equal expressions built on different ranks or
in a different order are the same atom; that is what makes ``exp(m_old - m_new)``
telescope and what lets the partials of two shards add up to one term over their rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import ClassVar

from meshproof.verify.semantics.index import BOUND, Aff, Subst
from meshproof.verify.semantics.scalars import ONE, Pieces, Ranges, Weight, fkey


def _aff_key(a: Aff) -> str:
    return str(a.const) + "".join(f"{'+' if c > 0 else ''}{c}x{d}" for d, c in a.terms)


def _digits(affs: Iterable[Aff]) -> frozenset[int]:
    out: set[int] = set()
    for a in affs:
        out.update(a.digits)
    return frozenset(out)


class Atom:
    """Base class: immutable, equal by `key`; `digits` are the free digits (and BOUND)."""

    __slots__ = ("_hash", "digits", "key")
    kind: ClassVar[str] = "atom"
    key: str
    digits: frozenset[int]
    _hash: int

    def _init(self, key: str, digits: frozenset[int]) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "digits", digits)
        object.__setattr__(self, "_hash", hash(key))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("atoms are immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Atom) and other.key == self.key

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return self.key

    def subst(self, s: Subst) -> Atom:
        relevant = tuple(sorted((d, s[d]) for d in self.digits if d in s))
        if not relevant:
            return self
        key = (self.key, relevant)
        hit = _SUBST_CACHE.get(key)
        if hit is None:
            if len(_SUBST_CACHE) > _SUBST_CACHE_MAX:
                _SUBST_CACHE.clear()
            hit = self._subst(dict(relevant))
            _SUBST_CACHE[key] = hit
        return hit

    def _subst(self, s: Subst) -> Atom:
        raise NotImplementedError


# Renaming digits rebuilds nested atoms (a max inside a log inside a sum); the same atom
# is renamed the same way many times when a received value meets local ones.
_SUBST_CACHE: dict[tuple[str, tuple[tuple[int, Aff], ...]], Atom] = {}
_SUBST_CACHE_MAX = 200_000


class Input(Atom):
    """One element of an attention input: Q[t, h, f], K[j, g, f] or V[j, g, e]."""

    __slots__ = ("coords", "group", "tensor")
    kind = "input"
    tensor: str
    group: int
    coords: tuple[Aff, Aff, Aff]

    def __init__(self, tensor: str, group: int, coords: tuple[Aff, Aff, Aff]) -> None:
        object.__setattr__(self, "tensor", tensor)
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "coords", coords)
        self._init(f"{tensor}{group}[{';'.join(_aff_key(c) for c in coords)}]",
                   _digits(coords))

    def _subst(self, s: Subst) -> Input:
        return Input(self.tensor, self.group, tuple(c.substitute(s) for c in self.coords))  # type: ignore[arg-type]

    @property
    def row(self) -> Aff:
        return self.coords[0]


class QK(Atom):
    """sum over every feature f of Q[t, h, f] * K[j, g, f] (both of one group)."""

    __slots__ = ("g", "group", "h", "j", "t")
    kind = "qk"
    group: int
    t: Aff
    h: Aff
    j: Aff
    g: Aff

    def __init__(self, group: int, t: Aff, h: Aff, j: Aff, g: Aff) -> None:
        for name, v in (("group", group), ("t", t), ("h", h), ("j", j), ("g", g)):
            object.__setattr__(self, name, v)
        self._init(f"QK{group}[{_aff_key(t)};{_aff_key(h)}|{_aff_key(j)};{_aff_key(g)}]",
                   _digits((t, h, j, g)))

    def _subst(self, s: Subst) -> QK:
        return QK(self.group, self.t.substitute(s), self.h.substitute(s), self.j.substitute(s),
                  self.g.substitute(s))

    @property
    def row(self) -> Aff:
        return self.j


class Scrambled(Atom):
    """The result of a dot that does not contract Q's features with K's (e.g. K reshaped
    instead of transposed): a fresh symbol per op, indexed like scores (a synthetic key
    row plus its other coordinates), so that the rest of the kernel can still be judged."""

    __slots__ = ("bound", "label", "others", "row")
    kind = "scrambled"
    label: str
    row: Aff
    others: tuple[Aff, ...]
    bound: float | None      # |value| <= bound for |inputs| <= 1 (scaled by B^2)

    def __init__(self, label: str, row: Aff, others: tuple[Aff, ...],
                 bound: float | None = None) -> None:
        object.__setattr__(self, "label", label)
        object.__setattr__(self, "row", row)
        object.__setattr__(self, "others", others)
        object.__setattr__(self, "bound", bound)
        self._init(f"S<{label}>[{_aff_key(row)}|{';'.join(_aff_key(c) for c in others)}]",
                   _digits((row, *others)))

    def _subst(self, s: Subst) -> Scrambled:
        return Scrambled(self.label, self.row.substitute(s),
                         tuple(c.substitute(s) for c in self.others), self.bound)


@dataclass(frozen=True, slots=True)
class Elem:
    """One member of a maximum: a linear form, or (with `rows`) that form at every key
    row in `rows` (the form then mentions BOUND)."""

    body: Lin
    rows: Ranges | None = None

    @property
    def key(self) -> str:
        return self.body.key + (f"@{self.rows.key()}" if self.rows is not None else "")


class Max(Atom):
    """max (or min) of a set of elements; never empty, never a single unranged element."""

    __slots__ = ("elems", "is_min")
    kind = "max"
    elems: tuple[Elem, ...]
    is_min: bool

    def __init__(self, elems: Iterable[Elem], is_min: bool = False) -> None:
        ordered = tuple(sorted(elems, key=lambda e: e.key))
        object.__setattr__(self, "elems", ordered)
        object.__setattr__(self, "is_min", is_min)
        digits: set[int] = set()
        for e in ordered:
            digits.update(d for d in e.body.digits if d != BOUND)
        self._init(("min{" if is_min else "max{") + ",".join(e.key for e in ordered) + "}",
                   frozenset(digits))

    def _subst(self, s: Subst) -> Max:
        return Max((Elem(e.body.subst(s), e.rows) for e in self.elems), self.is_min)


class Log(Atom):
    """log of a positive polynomial."""

    __slots__ = ("arg",)
    kind = "log"
    arg: Poly

    def __init__(self, arg: Poly) -> None:
        object.__setattr__(self, "arg", arg)
        self._init(f"log({arg.key})", frozenset(d for d in arg.digits if d != BOUND))

    def _subst(self, s: Subst) -> Log:
        return Log(self.arg.subst(s))


class Pos(Atom):
    """A positive polynomial kept whole, so that it can appear with a power (-1 for a
    division by ℓ; +1 from exp(log ℓ)) and cancel against itself."""

    __slots__ = ("arg",)
    kind = "pos"
    arg: Poly

    def __init__(self, arg: Poly) -> None:
        object.__setattr__(self, "arg", arg)
        self._init(f"pos({arg.key})", frozenset(d for d in arg.digits if d != BOUND))

    def _subst(self, s: Subst) -> Pos:
        return Pos(self.arg.subst(s))


def _combine(items: Iterable[tuple[Atom, Fraction]]) -> tuple[tuple[Atom, Fraction], ...]:
    merged: dict[Atom, Fraction] = {}
    for a, c in items:
        merged[a] = merged.get(a, Fraction(0)) + c
    return tuple(sorted(((a, c) for a, c in merged.items() if c), key=lambda p: p[0].key))


def _powers(items: Iterable[tuple[Atom, int]]) -> tuple[tuple[Atom, int], ...]:
    merged: dict[Atom, int] = {}
    for a, k in items:
        merged[a] = merged.get(a, 0) + k
    return tuple(sorted(((a, k) for a, k in merged.items() if k), key=lambda p: p[0].key))


@dataclass(frozen=True, slots=True, eq=False)
class Lin:
    """const + sum(coeff * atom). `const` may be ±inf (then there are no atoms)."""

    const: Fraction | float
    coeffs: tuple[tuple[Atom, Fraction], ...] = ()
    key: str = field(default="", init=False, repr=False)
    digits: frozenset[int] = field(default=frozenset(), init=False, repr=False)

    def __post_init__(self) -> None:
        const = self.const if isinstance(self.const, float) else fkey(self.const)
        object.__setattr__(self, "key", f"{const}" + "".join(
            f"{'+' if c > 0 else ''}{fkey(c)}*{a.key}" for a, c in self.coeffs))
        out: set[int] = set()
        for a, _ in self.coeffs:
            out.update(a.digits)
        object.__setattr__(self, "digits", frozenset(out))

    @staticmethod
    def make(const: Fraction | float, items: Iterable[tuple[Atom, Fraction]]) -> Lin:
        if isinstance(const, float):  # ±inf swallows every finite term
            return Lin(const)
        return Lin(const, _combine(items))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lin) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    @property
    def infinite(self) -> int:
        if isinstance(self.const, float):
            return 1 if self.const > 0 else -1
        return 0

    def __add__(self, other: Lin) -> Lin:
        if self.infinite or other.infinite:
            return Lin(_inf_sum(self.infinite, other.infinite))
        assert isinstance(self.const, Fraction) and isinstance(other.const, Fraction)
        return Lin.make(self.const + other.const, self.coeffs + other.coeffs)

    def scale(self, k: Fraction) -> Lin:
        if self.infinite:
            if k == 0:
                return Lin(float("nan"))
            return Lin(float("inf") if (self.infinite > 0) == (k > 0) else float("-inf"))
        assert isinstance(self.const, Fraction)
        return Lin.make(self.const * k, ((a, c * k) for a, c in self.coeffs))

    def subst(self, s: Subst) -> Lin:
        if not self.coeffs or not self.digits & s.keys():
            return self
        return Lin.make(self.const, ((a.subst(s), c) for a, c in self.coeffs))

    def without_const(self) -> Lin:
        return Lin(Fraction(0), self.coeffs)

    def coeff(self, atom: Atom) -> Fraction:
        for a, c in self.coeffs:
            if a == atom:
                return c
        return Fraction(0)


def _inf_sum(a: int, b: int) -> float:
    if a and b and a != b:
        return float("nan")
    return float("inf") if (a or b) > 0 else float("-inf")


@dataclass(frozen=True, slots=True, eq=False)
class Body:
    """exp(sum(c * atom)) * prod(atom^k): the shape of a term, without its weight."""

    expo: tuple[tuple[Atom, Fraction], ...] = ()
    factors: tuple[tuple[Atom, int], ...] = ()
    key: str = field(default="", init=False, repr=False)
    digits: frozenset[int] = field(default=frozenset(), init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", "e(" + "".join(
            f"{'+' if c > 0 else ''}{fkey(c)}*{a.key}" for a, c in self.expo) + ")" +
            "".join(f"*{a.key}^{k}" for a, k in self.factors))
        out: set[int] = set()
        for a, _ in self.expo:
            out.update(a.digits)
        for a, _ in self.factors:
            out.update(a.digits)
        object.__setattr__(self, "digits", frozenset(out))

    @staticmethod
    def make(expo: Iterable[tuple[Atom, Fraction]],
             factors: Iterable[tuple[Atom, int]]) -> Body:
        return Body(_combine(expo), _powers(factors))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Body) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    @property
    def bound(self) -> bool:
        return BOUND in self.digits

    @property
    def lin(self) -> Lin:
        return Lin(Fraction(0), self.expo)

    def __mul__(self, other: Body) -> Body:
        return Body.make(self.expo + other.expo, self.factors + other.factors)

    def subst(self, s: Subst) -> Body:
        if not self.digits & s.keys():
            return self
        return Body.make(((a.subst(s), c) for a, c in self.expo),
                         ((a.subst(s), k) for a, k in self.factors))

    def power(self, atom: Atom) -> int:
        for a, k in self.factors:
            if a == atom:
                return k
        return 0


TermWeight = Weight | Pieces


@dataclass(frozen=True, slots=True, eq=False)
class Poly:
    """sum of weighted terms; `inf` != 0 makes it the constant +inf or -inf (no terms)."""

    terms: tuple[tuple[Body, TermWeight], ...] = ()
    inf: int = 0
    key: str = field(default="", init=False, repr=False)
    digits: frozenset[int] = field(default=frozenset(), init=False, repr=False)

    def __post_init__(self) -> None:
        if self.inf:
            object.__setattr__(self, "key", "+inf" if self.inf > 0 else "-inf")
        else:
            object.__setattr__(self, "key", "{" + " + ".join(
                f"{w.key()}|{b.key}" for b, w in self.terms) + "}")
        out: set[int] = set()
        for b, _ in self.terms:
            out.update(b.digits)
        object.__setattr__(self, "digits", frozenset(out))

    @staticmethod
    def make(items: Iterable[tuple[Body, TermWeight]]) -> Poly:
        merged: dict[Body, TermWeight] = {}
        for body, w in items:
            if body in merged:
                merged[body] = merged[body] + w  # type: ignore[operator]
            else:
                merged[body] = w
        return Poly(tuple(sorted(((b, w) for b, w in merged.items() if not w.is_zero),
                                 key=lambda p: p[0].key)))

    @staticmethod
    def const(value: Fraction | float) -> Poly:
        if isinstance(value, float):
            return Poly((), 1 if value > 0 else -1)
        return Poly.make([(Body(), Weight.of(value))])

    @staticmethod
    def atom(a: Atom, coeff: Fraction = ONE) -> Poly:
        return Poly.make([(Body((), ((a, 1),)), Weight.of(coeff))])

    @staticmethod
    def of_lin(lin: Lin) -> Poly:
        if lin.infinite:
            return Poly((), lin.infinite)
        assert isinstance(lin.const, Fraction)
        return Poly.make([(Body(), Weight.of(lin.const)),
                          *((Body((), ((a, 1),)), Weight.of(c)) for a, c in lin.coeffs)])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Poly) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    @property
    def is_zero(self) -> bool:
        return not self.terms and not self.inf

    def subst(self, s: Subst) -> Poly:
        if self.inf or not self.digits & s.keys():
            return self
        return Poly.make((b.subst(s), w) for b, w in self.terms)

    def as_lin(self) -> Lin | None:
        """The polynomial as a linear form of atoms, if it is one (rational weights)."""
        if self.inf:
            return Lin(float("inf") if self.inf > 0 else float("-inf"))
        const = Fraction(0)
        items: list[tuple[Atom, Fraction]] = []
        for body, w in self.terms:
            if not isinstance(w, Weight) or w.rational is None or body.expo:
                return None
            r = w.rational
            if not body.factors:
                const += r
            elif len(body.factors) == 1 and body.factors[0][1] == 1:
                items.append((body.factors[0][0], r))
            else:
                return None
        return Lin.make(const, items)

    def as_const(self) -> Fraction | float | None:
        if self.inf:
            return float("inf") if self.inf > 0 else float("-inf")
        if not self.terms:
            return Fraction(0)
        if len(self.terms) == 1 and not self.terms[0][0].expo and \
                not self.terms[0][0].factors and isinstance(self.terms[0][1], Weight):
            return self.terms[0][1].rational
        return None

    def atoms(self) -> Iterable[Atom]:
        for body, _ in self.terms:
            for a, _ in body.expo:
                yield a
            for a, _ in body.factors:
                yield a


def rows_of(atom: Atom) -> Aff | None:
    """The key-row coordinate of a score or a K/V element (None for other atoms)."""
    if isinstance(atom, QK):
        return atom.j
    if isinstance(atom, Scrambled):
        return atom.row
    if isinstance(atom, Input) and atom.tensor in ("K", "V"):
        return atom.row
    return None


def substitute_all(mapping: Mapping[int, Aff], items: Iterable[Atom]) -> list[Atom]:
    return [a.subst(dict(mapping)) for a in items]
