"""The atoms of attention's inputs: an element of Q, K or V (`Input`), a score over a span of
features (`Score`) and the fresh symbol of a scrambled contraction (`Scrambled`).
"""

from __future__ import annotations

from collections.abc import Iterable

from meshproof.verify.semantics.atom_base import Atom, _set, aff_key, digits_of, frame_parts
from meshproof.verify.semantics.index import BOUND, Aff, Subst

KV_TENSORS = ("K", "V", "Kx", "Vx")   # x: an empty slice (numeric_safety's --empty-shard)


class Input(Atom):
    """One element of an attention input: Q[t, h, f], K[j, g, f] or V[j, g, e]."""

    __slots__ = ("coords", "group", "tensor")
    kind = "input"
    tensor: str
    group: int
    coords: tuple[Aff, Aff, Aff]

    @staticmethod
    def make(tensor: str, group: int, coords: tuple[Aff, Aff, Aff]) -> Input:
        key = f"{tensor}{group}[{';'.join(aff_key(c) for c in coords)}]"
        return Input._intern(key, lambda a: _set(a, tensor=tensor, group=group, coords=coords),
                             digits_of(coords))

    def _subst(self, s: Subst) -> Input:
        c0, c1, c2 = (c.substitute(s) for c in self.coords)
        return Input.make(self.tensor, self.group, (c0, c1, c2))

    @property
    def is_kv(self) -> bool:
        return self.tensor in KV_TENSORS

    @property
    def row(self) -> Aff:
        return self.coords[0]

    def _shift(self, delta: int) -> Input:
        dk, dq, dg = frame_parts(delta)
        c0, c1, c2 = self.coords
        # a bound row is relative to the sum it is bound by
        move = (dk if BOUND not in c0.digits else 0) if self.is_kv else dq
        if not move and not dg:
            return self
        return Input.make(self.tensor, self.group + dg, (c0.shift(move), c1, c2))

    def rows(self) -> Iterable[int]:
        return (self.coords[0].const,) if self.is_kv and BOUND not in self.coords[0].digits \
            else ()

    def qrows(self) -> Iterable[int]:
        return () if self.is_kv else (self.coords[0].const,)

    def groups(self) -> Iterable[int]:
        return (self.group,)


class Score(Atom):
    """sum_f Q[t, h, f] * K[j, g, f] over the features f in [fbase, fbase + flen) (both of
    one group). The whole score has fbase 0 and flen d_head; a span is a split
    contraction whose parts add up (two halves are one score)."""

    __slots__ = ("fbase", "flen", "g", "group", "h", "j", "t")
    kind = "qk"
    group: int
    t: Aff
    h: Aff
    j: Aff
    g: Aff
    fbase: Aff
    flen: int

    @staticmethod
    def make(group: int, t: Aff, h: Aff, j: Aff, g: Aff, fbase: Aff,
             flen: int) -> Score:
        span = f"@{aff_key(fbase)}:{flen}"
        key = f"QK{group}[{aff_key(t)};{aff_key(h)}|{aff_key(j)};{aff_key(g)}]{span}"
        return Score._intern(key, lambda a: _set(a, group=group, t=t, h=h, j=j, g=g,
                                                 fbase=fbase, flen=flen),
                             digits_of((t, h, j, g, fbase)))

    def _subst(self, s: Subst) -> Score:
        return Score.make(self.group, self.t.substitute(s), self.h.substitute(s),
                          self.j.substitute(s), self.g.substitute(s),
                          self.fbase.substitute(s), self.flen)

    @property
    def row(self) -> Aff:
        return self.j

    def with_row(self, j: Aff) -> Score:
        return Score.make(self.group, self.t, self.h, j, self.g, self.fbase, self.flen)

    def with_span(self, fbase: Aff, flen: int) -> Score:
        return Score.make(self.group, self.t, self.h, self.j, self.g, fbase, flen)

    def full(self, d_head: int) -> bool:
        return self.fbase == Aff(0) and self.flen == d_head

    def _shift(self, delta: int) -> Score:
        dk, dq, dg = frame_parts(delta)
        if BOUND in self.j.digits:
            dk = 0   # a bound row is relative to the sum it is bound by
        if not dk and not dq and not dg:
            return self
        return Score.make(self.group + dg, self.t.shift(dq), self.h, self.j.shift(dk), self.g,
                          self.fbase, self.flen)

    def rows(self) -> Iterable[int]:
        return () if BOUND in self.j.digits else (self.j.const,)

    def qrows(self) -> Iterable[int]:
        return (self.t.const,)

    def groups(self) -> Iterable[int]:
        return (self.group,)


class Scrambled(Atom):
    """The result of a dot that does not contract Q's features with K's (K reshaped
    instead of transposed): a fresh symbol per op and rank, indexed like scores (a
    synthetic key row plus the other coordinates), so the rest of the kernel is judged."""

    __slots__ = ("bound", "label", "others", "row")
    kind = "scrambled"
    label: str
    row: Aff
    others: tuple[Aff, ...]
    bound: float | None      # |value| <= bound for |inputs| <= 1 (scaled by B^2)

    @staticmethod
    def make(label: str, row: Aff, others: tuple[Aff, ...],
             bound: float | None = None) -> Scrambled:
        key = f"S<{label}>[{aff_key(row)}|{';'.join(aff_key(c) for c in others)}]"
        return Scrambled._intern(key, lambda a: _set(a, label=label, row=row, others=others,
                                                     bound=bound),
                                 digits_of((row, *others)))

    def _subst(self, s: Subst) -> Scrambled:
        return Scrambled.make(self.label, self.row.substitute(s),
                              tuple(c.substitute(s) for c in self.others), self.bound)


def row_of(atom: Atom) -> Aff | None:
    """The key-row coordinate of a score, a scrambled dot or a K/V element."""
    if isinstance(atom, (Score, Scrambled)):
        return atom.row
    if isinstance(atom, Input) and atom.is_kv:
        return atom.row
    return None
