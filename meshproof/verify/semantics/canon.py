"""Canonical values: forms up to a shift of key rows, with canonical digit names.

The interpreter (interp.py) keeps every value as a *canonical value* plus an offset δ: the
value's form is `shift(cv.form, δ)`, its layout `cv.layout`. A canonical value has digits
numbered 0, 1, ... in layout order, and its key rows moved so that the smallest one it
mentions (a K/V row, a score's key row, a row range of a sum or a max) is 0.

Why this is exact. Key rows enter a form only as the row coordinate of K and V elements
and of scores, and as the row ranges of sums and maxima; no rule of the algebra reads an
absolute row number, only differences and coincidences of rows (ranges merge when they
touch, overlap is a double merge). Renaming every key row j to j + δ is therefore an
automorphism of the algebra: if the rules turn operands a, b into c, they turn shift(a, δ),
shift(b, δ) into shift(c, δ). Digits are bound index variables, so renaming them is
equally harmless. Two values whose canonical forms are equal are the same value up to
such renamings, and an op applied to operands equal up to one common shift has results
equal up to that shift — which is what lets the interpreter evaluate each distinct
situation once (spec/semantics.md §9).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from meshproof.verify.semantics.index import BOUND, Aff, Digit, Layout
from meshproof.verify.semantics.layouts import Value
from meshproof.verify.semantics.scalars import Pieces, Ranges, Weight
from meshproof.verify.semantics.terms import (
    QK,
    Atom,
    Body,
    Elem,
    Input,
    Lin,
    Log,
    Max,
    Poly,
    Pos,
    Scrambled,
    TermWeight,
)

ROW_TENSORS = frozenset({"K", "V", "Kx", "Vx"})   # tensors indexed by key rows first
T = TypeVar("T")


def _free_row(a: Aff) -> bool:
    """A key-row coordinate that is absolute (not relative to a bound row of a sum)."""
    return all(d != BOUND for d, _ in a.terms)


class _Shift:
    """shift(·, δ) over one form, each shared sub-term shifted once."""

    def __init__(self, delta: int) -> None:
        self.delta = delta
        self.done: dict[int, Any] = {}

    def _once(self, obj: T, make: Callable[[T], T]) -> T:
        hit = self.done.get(id(obj))
        if hit is None:
            hit = self.done[id(obj)] = (obj, make(obj))
        return cast(T, hit[1])

    def row(self, a: Aff) -> Aff:
        return a.shift(self.delta) if _free_row(a) else a

    def poly(self, p: Poly) -> Poly:
        if p.inf or not p.terms:
            return p
        return self._once(p, lambda p: Poly.make(
            (self.body(b), self.weight(w)) for b, w in p.terms))

    def weight(self, w: TermWeight) -> TermWeight:
        if isinstance(w, Weight):
            return w
        d = self.delta
        return Pieces(tuple((lo + d, hi + d, pw) for lo, hi, pw in w.parts))

    def ranges(self, r: Ranges) -> Ranges:
        d = self.delta
        return Ranges(tuple((lo + d, hi + d) for lo, hi in r.parts))

    def body(self, b: Body) -> Body:
        if not b.expo and not b.factors:
            return b
        return self._once(b, lambda b: Body.make(((self.atom(a), c) for a, c in b.expo),
                                                 ((self.atom(a), k) for a, k in b.factors)))

    def lin(self, lin: Lin) -> Lin:
        if not lin.coeffs:
            return lin
        return self._once(lin, lambda x: Lin.make(x.const, ((self.atom(a), c)
                                                           for a, c in x.coeffs)))

    def atom(self, a: Atom) -> Atom:
        return self._once(a, self._atom)

    def _atom(self, a: Atom) -> Atom:
        if isinstance(a, Input):
            if a.tensor not in ROW_TENSORS:
                return a
            return Input(a.tensor, a.group, (self.row(a.coords[0]), a.coords[1], a.coords[2]))
        if isinstance(a, QK):
            return QK(a.group, a.t, a.h, self.row(a.j), a.g)
        if isinstance(a, Scrambled):
            return Scrambled(a.label, self.row(a.row), a.others, a.bound)
        if isinstance(a, Max):
            return Max((Elem(self.lin(e.body), None if e.rows is None else self.ranges(e.rows))
                        for e in a.elems), a.is_min)
        if isinstance(a, Log):
            return Log(self.poly(a.arg))
        if isinstance(a, Pos):
            return Pos(self.poly(a.arg))
        raise TypeError(f"no shift for atom {a!r}")  # a new atom kind must say how it shifts


def shift(form: Poly, delta: int) -> Poly:
    """`form` with every key row j renamed j + delta."""
    return form if not delta else _Shift(delta).poly(form)


class _Anchor:
    """The smallest key row a form mentions (None if it mentions none)."""

    def __init__(self) -> None:
        self.best: int | None = None
        self.seen: set[int] = set()

    def note(self, x: int) -> None:
        if self.best is None or x < self.best:
            self.best = x

    def row(self, a: Aff) -> None:
        if _free_row(a):
            self.note(a.const)

    def poly(self, p: Poly) -> None:
        if id(p) in self.seen:
            return
        self.seen.add(id(p))
        for b, w in p.terms:
            if isinstance(w, Pieces) and w.parts:
                self.note(w.parts[0][0])
            for a, _ in b.expo:
                self.atom(a)
            for a, _ in b.factors:
                self.atom(a)

    def atom(self, a: Atom) -> None:
        if id(a) in self.seen:
            return
        self.seen.add(id(a))
        if isinstance(a, Input):
            if a.tensor in ROW_TENSORS:
                self.row(a.coords[0])
        elif isinstance(a, QK):
            self.row(a.j)
        elif isinstance(a, Scrambled):
            self.row(a.row)
        elif isinstance(a, Max):
            for e in a.elems:
                if e.rows is not None and e.rows.parts:
                    self.note(e.rows.parts[0][0])
                for x, _ in e.body.coeffs:
                    self.atom(x)
        elif isinstance(a, (Log, Pos)):
            self.poly(a.arg)


def anchor(form: Poly) -> int | None:
    finder = _Anchor()
    finder.poly(form)
    return finder.best


def canonical_digits(value: Value) -> Value:
    """The same value with its layout's digits numbered 0, 1, ... in layout order."""
    digits = value.layout.digits
    if all(d.id == i for i, d in enumerate(digits)):
        return value
    mapping = {d.id: Aff.digit(i) for i, d in enumerate(digits) if d.id != i}
    renamed: list[tuple[Digit, ...]] = []
    i = 0
    for axis in value.layout.axes:
        renamed.append(tuple(Digit(i + j, d.size) for j, d in enumerate(axis)))
        i += len(axis)
    return Value(Layout(tuple(renamed), value.layout.shape), value.form.subst(mapping))


class CanonValue:
    """One canonical value, interned: equal canonical values are one object (`id`).
    `rowless`: its form mentions no key row, so every shift leaves it as it is (Q, a
    constant); such a value always sits at offset 0."""

    __slots__ = ("facts", "form", "id", "layout", "rowless")

    def __init__(self, uid: int, layout: Layout, form: Poly, rowless: bool) -> None:
        self.id = uid
        self.layout = layout
        self.form = form
        self.rowless = rowless
        self.facts: dict[object, object] = {}   # per-value results of later checks

    def at(self, delta: int) -> Value:
        """The value this canonical value stands for at offset `delta`."""
        return Value(self.layout, shift(self.form, delta))


class CanonTable:
    def __init__(self) -> None:
        self._by_key: dict[tuple[Layout, str], CanonValue] = {}

    def __len__(self) -> int:
        return len(self._by_key)

    def intern(self, value: Value) -> tuple[CanonValue, int]:
        """The canonical value of `value` and the offset it sits at."""
        value = canonical_digits(value)
        first = anchor(value.form)
        delta = first or 0
        form = shift(value.form, -delta)
        key = (value.layout, form.key)
        cv = self._by_key.get(key)
        if cv is None:
            cv = self._by_key[key] = CanonValue(len(self._by_key), value.layout, form,
                                                first is None)
        return cv, delta
