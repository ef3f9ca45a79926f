"""Maxima (and minima) over sets of linear forms: `Max`, its members (`Elem`) and the row
ranges they span (`Ranges`).
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from weakref import WeakKeyDictionary

from meshproof.verify.semantics.atom_base import Atom, _set, frame_parts
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.index import BOUND, Subst

# --- maxima ----------------------------------------------------------------------------


class Ranges:
    """A set of key rows as sorted disjoint half-open intervals."""

    __slots__ = ("key", "parts")
    parts: tuple[tuple[int, int], ...]
    key: str

    def __init__(self, parts: tuple[tuple[int, int], ...]) -> None:
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "key", ",".join(f"[{lo},{hi})" for lo, hi in parts))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("row ranges are immutable")

    @staticmethod
    def interval(lo: int, hi: int) -> Ranges:
        return Ranges(((lo, hi),)) if hi > lo else Ranges(())

    def __or__(self, other: Ranges) -> Ranges:
        out: list[tuple[int, int]] = []
        for lo, hi in sorted(self.parts + other.parts):
            if out and lo <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], hi))
            else:
                out.append((lo, hi))
        return Ranges(tuple(out))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ranges) and other.parts == self.parts

    def __hash__(self) -> int:
        return hash(self.parts)

    def covers(self, other: Ranges) -> bool:
        """Every row of other is one of self's: each part inside one of self's parts (the
        parts are sorted, disjoint and apart, so the union would add nothing)."""
        return all(any(lo <= a and b <= hi for lo, hi in self.parts) for a, b in other.parts)

    def shift(self, delta: int) -> Ranges:
        return Ranges(tuple((lo + delta, hi + delta) for lo, hi in self.parts))

    @property
    def empty(self) -> bool:
        return not self.parts

    def count(self) -> int:
        return sum(hi - lo for lo, hi in self.parts)


class Elem:
    """One member of a maximum: a linear form, or (with `rows`) that form at every key
    row in `rows` (the form then mentions BOUND)."""

    __slots__ = ("body", "key", "rows")
    body: Lin
    rows: Ranges | None
    key: str

    def __init__(self, body: Lin, rows: Ranges | None = None) -> None:
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "rows", rows)
        object.__setattr__(self, "key", body.key + (f"@{rows.key}" if rows is not None
                                                    else ""))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("members are immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Elem) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def shift(self, delta: int) -> Elem:
        rows = self.rows.shift(frame_parts(delta)[0]) if self.rows else None
        return Elem(self.body.shift(delta), rows)


def _moves_bound(s: Subst) -> bool:
    return BOUND in s or any(BOUND in img.digits for img in s.values())


_ANCHORS: WeakKeyDictionary[Atom, tuple[int, Atom]] = WeakKeyDictionary()


def _anchored(a: Atom, lo: int) -> Atom:
    """a moved back by lo key rows (a key-row frame: -lo is frame(-lo)), kept: a running
    max's members come back in every later situation."""
    hit = _ANCHORS.get(a)
    if hit is None or hit[0] != lo:
        hit = _ANCHORS[a] = (lo, a.shift(-lo))
    return hit[1]


def subst_members(elems: tuple[Elem, ...], s: Subst) -> list[Elem]:
    """Every member with digits replaced (`Elem(e.body.subst(s), e.rows)`), each atom
    substituted once: the score the members of a striped ring's running max share, and a
    penalty once per guard up to a shift of its key rows (spec/semantics.md §9, the
    guard-substitution lemma: when s neither maps BOUND nor brings it in,
    ``Pen(G.shift(k)).subst(s) = Pen(G.subst(s)).shift(k)``). A penalty is taken back to
    its member's first row, so shard j's guard, which is shard 0's moved by j·C, meets
    shard 0's there."""
    done: dict[Atom, Atom] = {}
    anchor = not _moves_bound(s)
    out: list[Elem] = []
    for e in elems:
        body = e.body
        if not body.coeffs or not any(d in s for d in body.digits):
            out.append(e)
            continue
        lo = e.rows.parts[0][0] if anchor and e.rows is not None and e.rows.parts else 0
        items: list[tuple[Atom, Fraction]] = []
        for a, c in body.coeffs:
            if lo and a.kind == "pen":
                base = _anchored(a, lo)
                hit = done.get(base)
                if hit is None:
                    hit = done[base] = base.subst(s)
                items.append((hit.shift(lo), c))
                continue
            hit = done.get(a)
            if hit is None:
                hit = done[a] = a.subst(s)
            items.append((hit, c))
        out.append(Elem(Lin.make(body.const, items), e.rows))
    return out


class Max(Atom):
    """max (or min) of a set of members; never empty, never a single unranged member."""

    __slots__ = ("elems", "is_min")
    kind = "max"
    elems: tuple[Elem, ...]
    is_min: bool

    @staticmethod
    def make(elems: Iterable[Elem], is_min: bool = False) -> Max:
        ordered = tuple(sorted(elems, key=lambda e: e.key))
        digits: set[int] = set()
        for e in ordered:
            digits.update(d for d in e.body.digits if d != BOUND)
        key = ("min{" if is_min else "max{") + ",".join(e.key for e in ordered) + "}"
        return Max._intern(key, lambda a: _set(a, elems=ordered, is_min=is_min),
                           frozenset(digits))

    def _subst(self, s: Subst) -> Max:
        return Max.make(subst_members(self.elems, s), self.is_min)

    def _shift(self, delta: int) -> Max:
        return Max.make((e.shift(delta) for e in self.elems), self.is_min)

    def rows(self) -> Iterable[int]:
        for e in self.elems:
            if e.rows is not None and e.rows.parts:
                yield e.rows.parts[0][0]
            for a, _ in e.body.coeffs:
                yield from a.rows()

    def qrows(self) -> Iterable[int]:
        for e in self.elems:
            for a, _ in e.body.coeffs:
                yield from a.qrows()

    def groups(self) -> Iterable[int]:
        for e in self.elems:
            for a, _ in e.body.coeffs:
                yield from a.groups()
