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

This module holds the atoms; the guard itself (its inequalities, box and decisions) is
inequalities.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar, Self

from meshproof.verify.semantics.atom_base import Atom, _set, aff_key, frame_parts
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.index import Aff, Subst
from meshproof.verify.semantics.inequalities import Box, Guard
from meshproof.verify.semantics.maxima import Max

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


__all__ = ["Guard", "Idx", "Ind", "Pen", "conjunction", "may_be_neg_inf", "pens",
           "without_pens"]
