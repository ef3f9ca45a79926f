"""The atoms defined over polynomials: `RowSum` (a sum over one interval of key rows),
`Summed` (a sum over key rows that is not one interval) and `Log` (the logarithm of a
positive polynomial).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from meshproof.verify.semantics.atom_base import Atom, _set, frame_parts
from meshproof.verify.semantics.guards import Ind, conjunction
from meshproof.verify.semantics.index import BOUND, Subst
from meshproof.verify.semantics.inequalities import Guard
from meshproof.verify.semantics.poly_terms import Monomial, Poly, _powers, shift, subst


class RowSum(Atom):
    """sum over the key rows b in [lo, hi) of `body` (a monomial that mentions BOUND)."""

    __slots__ = ("_base", "body", "hi", "lo")
    kind = "rowsum"
    body: Monomial
    lo: int
    hi: int
    _base: str | None

    @staticmethod
    def make(body: Monomial, lo: int, hi: int) -> RowSum:
        assert hi > lo
        return RowSum._intern(f"Σ[{lo},{hi})({body.key})",
                              lambda a: _set(a, body=body, lo=lo, hi=hi, _base=None),
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
        """The key of the body without its mask: sums of one base share their cuts. Made
        on first use (every refinement and coarsening asks it of every sum again)."""
        base = self._base
        if base is None:
            base = self.body.key if not any(isinstance(a, Ind) for a, _ in self.body.vars) \
                else Monomial(self.body.unit, tuple((a, k) for a, k in self.body.vars
                                                    if not isinstance(a, Ind))).key
            object.__setattr__(self, "_base", base)
        return base

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
