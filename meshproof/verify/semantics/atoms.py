"""Atoms of the exact forms and linear forms over them.

An *atom* is an indivisible symbol of the algebra: an element of an attention input
(Q[t, h, f], K[j, g, f], V[j, g, e]), a score ``QK = sum_f Q[t,h,f] K[j,g,f]`` over a span
of features, a fresh symbol for a scrambled contraction, a maximum (or minimum) over a set
of linear forms, and -- in poly.py -- the logarithm of a positive polynomial and a sum over
key rows. Coordinates are affine forms of digits (index.py); a term that sums over a key
row names it by the canonical digit BOUND.

Atoms are *interned*: one object per structure, found by a canonical key string, so
equality is identity and equal expressions built on different ranks, or in another order,
are the same atom. That is what makes ``exp(m_old - m_new)`` telescope and what lets two
shards' partials add up to one sum over their rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import ClassVar, TypeVar
from weakref import WeakValueDictionary

from meshproof.verify.semantics.index import BOUND, Aff, Subst

ZERO = Fraction(0)
ONE = Fraction(1)

A = TypeVar("A", bound="Atom")

# A *frame* translates the three absolute coordinates an SPMD rank's values differ by: key
# rows, query rows and the attention problem (group). It is one int, key rows + query
# rows·FRAME + groups·FRAME², so frames compose by integer addition (the memo's hot path
# adds them) and each part is read back as a balanced residue; every part stays far below
# FRAME/2 (rows of a million-key context, thousands of groups).
FRAME = 1 << 40
_HALF = FRAME >> 1


def frame(rows: int, qrows: int = 0, groups: int = 0) -> int:
    """The frame that moves key rows by `rows`, query rows by `qrows`, groups by `groups`."""
    return rows + qrows * FRAME + groups * FRAME * FRAME


def frame_parts(delta: int) -> tuple[int, int, int]:
    """(key rows, query rows, groups) of a frame."""
    rows = ((delta + _HALF) % FRAME) - _HALF
    rest = (delta - rows) // FRAME
    qrows = ((rest + _HALF) % FRAME) - _HALF
    return rows, qrows, (rest - qrows) // FRAME


def fkey(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def aff_key(a: Aff) -> str:
    return str(a.const) + "".join(f"{'+' if c > 0 else ''}{c}x{d}" for d, c in a.terms)


def digits_of(affs: Iterable[Aff]) -> frozenset[int]:
    out: set[int] = set()
    for a in affs:
        out.update(a.digits)
    return frozenset(out)


_INTERNED: WeakValueDictionary[str, Atom] = WeakValueDictionary()


class Atom:
    """An interned symbol: `key` names its structure, `digits` its free digits (BOUND
    included where it sums over a key row). Equal atoms are one object."""

    __slots__ = ("__weakref__", "digits", "key")
    kind: ClassVar[str] = "atom"
    key: str
    digits: frozenset[int]

    @classmethod
    def _intern(cls: type[A], key: str, fill: Callable[[A], None],
                digits: frozenset[int]) -> A:
        hit = _INTERNED.get(key)
        if hit is not None:
            assert isinstance(hit, cls)
            return hit
        atom = object.__new__(cls)
        object.__setattr__(atom, "key", key)
        object.__setattr__(atom, "digits", digits)
        fill(atom)
        _INTERNED[key] = atom
        return atom

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("atoms are immutable")

    def __repr__(self) -> str:
        return self.key

    def __lt__(self, other: Atom) -> bool:
        return self.key < other.key

    def subst(self, s: Subst) -> Atom:
        """The atom with digits replaced by affine forms (only the digits it mentions)."""
        if not self.digits or not any(d in s for d in self.digits):
            return self
        return self._subst(s)

    def _subst(self, s: Subst) -> Atom:
        raise NotImplementedError

    def shift(self, delta: int) -> Atom:
        """The atom moved by the frame `delta`: its absolute key rows, query rows and
        groups (bound rows stay)."""
        return self if not delta else self._shift(delta)

    def _shift(self, delta: int) -> Atom:
        return self

    def rows(self) -> Iterable[int]:
        """The absolute key rows the atom names (lowest row of each coordinate)."""
        return ()

    def qrows(self) -> Iterable[int]:
        """The absolute query rows it names (lowest row of each coordinate)."""
        return ()

    def groups(self) -> Iterable[int]:
        """The attention problems (groups) it names."""
        return ()


def _set(atom: Atom, **fields: object) -> None:
    for name, value in fields.items():
        object.__setattr__(atom, name, value)


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


# --- linear forms ----------------------------------------------------------------------


def combine(items: Iterable[tuple[Atom, Fraction]]) -> tuple[tuple[Atom, Fraction], ...]:
    merged: dict[Atom, Fraction] = {}
    for a, c in items:
        merged[a] = merged.get(a, ZERO) + c
    return tuple(sorted(((a, c) for a, c in merged.items() if c), key=lambda p: p[0].key))


class Lin:
    """const + sum(coeff * atom), coefficients exact rationals. `const` may be +-inf (then
    there are no atoms). Immutable; equal by key."""

    __slots__ = ("_hash", "coeffs", "const", "digits", "key")
    const: Fraction | float
    coeffs: tuple[tuple[Atom, Fraction], ...]
    key: str
    digits: frozenset[int]
    _hash: int

    def __init__(self, const: Fraction | float,
                 coeffs: tuple[tuple[Atom, Fraction], ...] = ()) -> None:
        object.__setattr__(self, "const", const)
        object.__setattr__(self, "coeffs", coeffs)
        text = f"{const}" if isinstance(const, float) else fkey(const)
        key = text + "".join(f"{'+' if c > 0 else ''}{fkey(c)}*{a.key}" for a, c in coeffs)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "_hash", hash(key))
        digits: set[int] = set()
        for a, _ in coeffs:
            digits.update(a.digits)
        object.__setattr__(self, "digits", frozenset(digits))

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
        return self._hash

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
        return (self | other) == self

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
        return Max.make((Elem(e.body.subst(s), e.rows) for e in self.elems), self.is_min)

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


def row_of(atom: Atom) -> Aff | None:
    """The key-row coordinate of a score, a scrambled dot or a K/V element."""
    if isinstance(atom, (Score, Scrambled)):
        return atom.row
    if isinstance(atom, Input) and atom.is_kv:
        return atom.row
    return None
