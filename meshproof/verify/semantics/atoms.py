"""Atoms of the exact forms and linear forms over them.

An *atom* is an indivisible symbol of the algebra: an element of an attention input
(Q[t, h, f], K[j, g, f], V[j, g, e]), a score ``QK = sum_f Q[t,h,f] K[j,g,f]`` over a span
of features, a fresh symbol for a scrambled contraction, a maximum (or minimum) over a set
of linear forms, and -- in poly_atoms.py -- the logarithm of a positive polynomial and a sum over
key rows. Coordinates are affine forms of digits (index.py); a term that sums over a key
row names it by the canonical digit BOUND.

Atoms are *interned*: one object per structure, found by a canonical key string, so
equality is identity and equal expressions built on different ranks, or in another order,
are the same atom. That is what makes ``exp(m_old - m_new)`` telescope and what lets two
shards' partials add up to one sum over their rows.

This module is the linear forms over atoms (`Lin`); the atom machinery (interning, frames)
is atom_base.py, the atoms of the inputs (Q/K/V elements, scores, scrambled dots)
tensor_atoms.py and maxima maxima.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

from meshproof.verify.semantics.atom_base import ZERO, Atom, fkey
from meshproof.verify.semantics.index import Aff, Subst
from meshproof.verify.semantics.tensor_atoms import Score

# --- linear forms ----------------------------------------------------------------------


def combine(items: Iterable[tuple[Atom, Fraction]]) -> tuple[tuple[Atom, Fraction], ...]:
    merged: dict[Atom, Fraction] = {}
    for a, c in items:
        # most atoms come once: no Fraction addition for them (ZERO + c is c)
        old = merged.get(a)
        merged[a] = c if old is None and isinstance(c, Fraction) else (old or ZERO) + c
    return tuple(sorted(((a, c) for a, c in merged.items() if c), key=lambda p: p[0].key))


class Lin:
    """const + sum(coeff * atom), coefficients exact rationals. `const` may be +-inf (then
    there are no atoms). Immutable; equal by key."""

    __slots__ = ("_digits", "_key", "coeffs", "const")
    const: Fraction | float
    coeffs: tuple[tuple[Atom, Fraction], ...]
    _key: str | None
    _digits: frozenset[int] | None

    def __init__(self, const: Fraction | float,
                 coeffs: tuple[tuple[Atom, Fraction], ...] = ()) -> None:
        object.__setattr__(self, "const", const)
        object.__setattr__(self, "coeffs", coeffs)
        # the key and the digits on first use: most forms built on the way (a member
        # shifted to be compared, a form scaled to be bounded) are read for neither
        object.__setattr__(self, "_key", None)
        object.__setattr__(self, "_digits", None)

    @property
    def key(self) -> str:
        key = self._key
        if key is None:
            const, coeffs = self.const, self.coeffs
            text = f"{const}" if isinstance(const, float) else fkey(const)
            key = text + "".join(f"{'+' if c > 0 else ''}{fkey(c)}*{a.key}" for a, c in coeffs)
            object.__setattr__(self, "_key", key)
        return key

    @property
    def digits(self) -> frozenset[int]:
        digits = self._digits
        if digits is None:
            out: set[int] = set()
            for a, _ in self.coeffs:
                out.update(a.digits)
            digits = frozenset(out)
            object.__setattr__(self, "_digits", digits)
        return digits

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("linear forms are immutable")

    @staticmethod
    def make(const: Fraction | float, items: Iterable[tuple[Atom, Fraction]]) -> Lin:
        if isinstance(const, float):   # +-inf swallows every finite term
            return Lin(const)
        return Lin(const, merge_spans(combine(items)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lin) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return self.key

    @property
    def infinite(self) -> int:
        if isinstance(self.const, float):
            return 1 if self.const > 0 else -1
        return 0

    def __add__(self, other: Lin) -> Lin:
        if self.infinite or other.infinite:
            a, b = self.infinite, other.infinite
            if a and b and a != b:
                raise ValueError("inf - inf")
            return Lin(float("inf") if (a or b) > 0 else float("-inf"))
        assert isinstance(self.const, Fraction) and isinstance(other.const, Fraction)
        return Lin.make(self.const + other.const, self.coeffs + other.coeffs)

    def scale(self, k: Fraction) -> Lin:
        if self.infinite:
            if not k:
                raise ValueError("0 * inf")
            return Lin(float("inf") if (self.infinite > 0) == (k > 0) else float("-inf"))
        assert isinstance(self.const, Fraction)
        if not k:
            return Lin(ZERO)
        return Lin(self.const * k, tuple((a, c * k) for a, c in self.coeffs))

    def subst(self, s: Subst) -> Lin:
        if not self.coeffs or not any(d in s for d in self.digits):
            return self
        return Lin.make(self.const, ((a.subst(s), c) for a, c in self.coeffs))

    def shift(self, delta: int) -> Lin:
        if not delta or not self.coeffs:
            return self
        return Lin.make(self.const, ((a.shift(delta), c) for a, c in self.coeffs))

    def without_const(self) -> Lin:
        return Lin(ZERO, self.coeffs)

    def coeff(self, atom: Atom) -> Fraction:
        for a, c in self.coeffs:
            if a is atom:
                return c
        return ZERO

    def atoms(self) -> tuple[Atom, ...]:
        return tuple(a for a, _ in self.coeffs)


def merge_spans(items: tuple[tuple[Atom, Fraction], ...]) -> tuple[tuple[Atom, Fraction], ...]:
    """Scores over adjacent feature spans with one coefficient are one score:
    c·QK[0:4) + c·QK[4:8) = c·QK[0:8) (a contraction split in two dots)."""
    spans = [(a, c) for a, c in items if isinstance(a, Score) and a.fbase.is_const]
    if len(spans) < 2:
        return items
    by_place: dict[tuple[str, Fraction], list[Score]] = {}
    for a, c in spans:
        assert isinstance(a, Score)
        by_place.setdefault((a.with_span(Aff(0), 0).key, c), []).append(a)
    if all(len(v) < 2 for v in by_place.values()):
        return items
    merged: list[tuple[Atom, Fraction]] = [(a, c) for a, c in items
                                           if not (isinstance(a, Score) and a.fbase.is_const)]
    for (_, c), scores in by_place.items():
        scores.sort(key=lambda s: s.fbase.const)
        run = scores[0]
        for s in scores[1:]:
            if s.fbase.const == run.fbase.const + run.flen:
                run = run.with_span(run.fbase, run.flen + s.flen)
            else:
                merged.append((run, c))
                run = s
        merged.append((run, c))
    return combine(merged)
