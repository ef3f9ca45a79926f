"""The value numbers' side tables, shared between ranks (relations.py): per *relative*
number what the relations read, naming other numbers relative to its owner, and the rules
that compute an op's relation and its result's entries in the frame of the rank that
meets the situation first (run once per situation, so written for clarity, not speed).

In a rank's frame a number is `absolute - (rank << SHIFT)`: its owner's offset in the high
bits, its relative number in the low ones (`& LOW`, also for a negative offset). A tilt
token translates the same way (its anchor, the owner of its first leaf, in the high bits).
A constant is a tuple ("c", value): the same in every frame.
"""

from __future__ import annotations

import math

from meshproof.model.schedule import DType
from meshproof.verify.semantics.relations_kinds import (
    _OTHER,
    _OTHER_AT,
    _PARTNERS,
    _SAME,
    _SAME_AT,
    NONE,
    Related,
    Relation,
)
from meshproof.verify.semantics.ulp import UNIT, half_ulp

SHIFT = 32
LOW = (1 << SHIFT) - 1
_LN2 = math.log(2.0)
# the reference point of a weight exp(x) with no subtraction (C = 1): the same in every frame
EXACT = ("exact",)
_DTYPES = (DType.F16, DType.BF16, DType.F32)
DT = {d: i for i, d in enumerate(_DTYPES)}
UNITS = tuple(UNIT[d] for d in _DTYPES)

# a number in a frame, or a constant ("c", value), or None (not numbered)
Num = int | tuple[str, float] | None
# a reference point: (the number ỹ, whether k is ln 2) of weights exp(k·(x - ỹ)), or EXACT
Ref = tuple[object, ...]


def _move(n: object, off: int) -> object:
    """A number (or a constant, or a reference point) moved by `off` between frames."""
    if type(n) is int:
        return n + off
    if type(n) is tuple and n and n[0] != "c" and n is not EXACT:
        return (_move(n[0], off), *n[1:])
    return n


class FrameTables:
    """Per relative number (owner-relative entries): reference point, tilt token,
    narrowing, difference, rescale, log's reference point, reciprocal's divisor."""

    def __init__(self) -> None:
        self.ref: dict[int, Ref] = {}
        self.token: dict[int, int] = {}
        self.narrow: dict[int, tuple[object, float]] = {}
        self.diff: dict[int, tuple[object, object]] = {}
        self.rescale: dict[int, Ref] = {}
        self.logref: dict[int, tuple[Ref, int]] = {}
        self.recip: dict[int, object] = {}
        self._tids: dict[tuple[object, ...], int] = {}
        self._next = 0

    def fresh(self, dtc: int) -> int:
        self._next += 4
        return self._next | dtc

    def get(self, table: dict[int, object], x: object) -> object:
        """x's entry in `table`, in x's frame (None for a constant or an unnumbered value)."""
        if type(x) is not int:
            return None
        rel = x & LOW
        v = table.get(rel)
        return None if v is None else _move(v, x - rel)

    def difference(self, x: object) -> tuple[object, object] | None:
        """x's (minuend, subtrahend) if x is a difference, in x's frame."""
        if type(x) is not int:
            return None
        rel = x & LOW
        v = self.diff.get(rel)
        return None if v is None else (_move(v[0], x - rel), _move(v[1], x - rel))

    def _tid(self, parts: tuple[object, ...]) -> int:
        t = self._tids.get(parts)
        if t is None:
            t = self._tids[parts] = len(self._tids) + 1
        return t

    def leaf(self, out: int) -> int:
        """The token of the exp whose result is `out` (owner offset 0)."""
        return self._tid(("leaf", out))

    def tok(self, what: int, t: int, y: object) -> int:
        """scale(t, factor y) (what 0) or add(t, token y) (what 1), anchored at t's."""
        anchor = t - (t & LOW)
        return anchor + self._tid((what, t & LOW, _move(y, -anchor)))

    def keep(self, out: int, src: object) -> None:
        ref = self.get(self.ref, src)   # type: ignore[arg-type]
        if ref is not None:
            self.ref[out] = ref   # type: ignore[assignment]
        tok = self.get(self.token, src)   # type: ignore[arg-type]
        if tok is not None:
            self.token[out] = tok   # type: ignore[assignment]


class FrameRules(FrameTables):
    """relations_absolute.py's rules, in the frame of the rank computing the situation;
    `out` is the result's relative number (owner offset 0)."""

    def r(self, table: dict[int, object], x: object) -> object:
        return self.get(table, x)

    def exp(self, out: int, a: Num, base2: int, maxed: int) -> Related:
        move = self.difference(a)
        if move is not None:
            x, y = move   # type: ignore[misc]
            self.rescale[out] = (x, base2)
            self.ref[out] = (y, base2)
        elif a is not None:
            self.ref[out] = EXACT
        if a is not None:
            self.token[out] = self.leaf(out)
        if a is None or move is None:
            return NONE
        return Related(Relation.MAXED, keys=maxed) if maxed else _SAME

    def related(self, code: str, out: int, a: Num, b: Num, za: bool, zb: bool) -> Related:
        if a is None or b is None:
            return _OTHER
        if code == "mul":
            return self._product(out, a, b)
        if code == "add":
            return self._union(out, a, b, za, zb)
        rel = self._normalising(a, b)
        if type(a) is tuple:    # c / X: X's reference point and tilt, inverted
            self.recip[out] = b
            self.keep(out, b)
        return rel

    def _product(self, out: int, a: object, b: object) -> Related:
        ra, rb = self.r(self.rescale, a), self.r(self.rescale, b)   # type: ignore[arg-type]
        rel: Related | None = None
        for i, (u, inv) in enumerate(((a, b), (b, a))):
            of = self.r(self.recip, inv)
            if of is not None:   # o · (1/ℓ): a normalisation, related as o / ℓ
                rel = self._normalising(u, of)._replace(factor=1 - i)
                break
        if rb is not None and ra is None:     # a · exp(k·(x - ỹ))
            if rel is None:
                rel = _SAME_AT[1] if self.r(self.ref, a) == rb else self._rescaled(a, rb, 1)  # type: ignore[arg-type]
            ta = self.r(self.token, a)   # type: ignore[arg-type]
            if ta is not None:
                self.ref[out] = self.r(self.ref, b)    # type: ignore[arg-type, assignment]
                self.token[out] = self.tok(0, ta, b)   # type: ignore[arg-type]
                return rel
        elif ra is not None and rb is None:   # exp(k·(x - ỹ)) · b
            if rel is None:
                rel = _SAME_AT[0] if self.r(self.ref, b) == ra else self._rescaled(b, ra, 0)  # type: ignore[arg-type]
            tb = self.r(self.token, b)   # type: ignore[arg-type]
            if tb is not None:
                self.ref[out] = self.r(self.ref, a)    # type: ignore[arg-type, assignment]
                self.token[out] = self.tok(0, tb, a)   # type: ignore[arg-type]
                return rel
        elif rel is None:
            rel = NONE
        for x, c in ((a, b), (b, a)):
            tx = self.r(self.token, x)   # type: ignore[arg-type]
            if tx is not None and type(c) is tuple:
                self.keep(out, x)
                self.token[out] = self.tok(0, tx, c)   # type: ignore[arg-type]
                break
        return rel

    def _union(self, out: int, a: object, b: object, za: bool, zb: bool) -> Related:
        rel = self._logged(a, b)
        if za or zb:
            self.keep(out, b if za else a)
            return NONE if rel is None else rel
        ra = self.r(self.ref, a)   # type: ignore[arg-type]
        if rel is None:
            rel = _SAME if ra is not None and ra == self.r(self.ref, b) else _OTHER  # type: ignore[arg-type]
        if ra is not None:
            self.ref[out] = ra   # type: ignore[assignment]
        ta, tb = self.r(self.token, a), self.r(self.token, b)   # type: ignore[arg-type]
        if ta is not None and tb is not None:
            self.token[out] = self.tok(1, ta, tb)   # type: ignore[arg-type]
        elif ta is not None or tb is not None:
            self.token[out] = ta if ta is not None else tb   # type: ignore[assignment]
        return rel

    def _logged(self, a: object, b: object) -> Related | None:
        for i, (u, lg) in enumerate(((a, b), (b, a))):
            at = self.r(self.logref, lg)   # type: ignore[arg-type]
            if at is not None and (u, at[1]) == at[0]:   # type: ignore[index]
                # ũ + log X̃ with X referenced at ũ: ũ's error cancels
                return Related(Relation.SAME, factor=1 - i)
        return None

    def _normalising(self, a: object, b: object) -> Related:
        ta = self.r(self.token, a)   # type: ignore[arg-type]
        if ta is not None and ta == self.r(self.token, b):   # type: ignore[arg-type]
            return _PARTNERS
        ra = self.r(self.ref, a)   # type: ignore[arg-type]
        if ra is not None and ra == self.r(self.ref, b):   # type: ignore[arg-type]
            return _SAME
        return _OTHER

    def _rescaled(self, x: object, at_source: Ref, index: int) -> Related:
        """x · α with α = exp(k·(source - ỹ)) the operand `index`, at_source the reference
        point of weights at source."""
        ref = self.r(self.ref, x)   # type: ignore[arg-type]
        if ref is None:
            return _OTHER_AT[index]
        if at_source == ref:
            return _SAME_AT[index]
        narrowed = self.r(self.narrow, at_source[0])   # type: ignore[arg-type]
        base2 = at_source[1]
        if narrowed is not None and (narrowed[0], base2) == ref:   # type: ignore[index]
            return Related(Relation.NARROWED,
                           narrowed[1] * (_LN2 if base2 else 1.0), index)  # type: ignore[index]
        return _OTHER_AT[index]

    def other(self, code: str, out: int, args: tuple[Num, ...], base2: int, mag: float,
              dtc: int) -> None:
        """The entries of a result numbered by note (its operands in `args`)."""
        a = args[0] if args else None
        b = args[1] if len(args) > 1 else None
        if a is None:
            return
        if code == "sub":
            if b is not None:
                self.diff[out] = (a, b)
        elif code == "cast":            # a narrowing
            origin, offset = self.r(self.narrow, a) or (a, 0.0)   # type: ignore[arg-type, misc]
            self.narrow[out] = (origin, offset + half_ulp(_DTYPES[dtc], mag))
            self.keep(out, a)
        elif code == "log":
            ref = self.r(self.ref, a)   # type: ignore[arg-type]
            if ref is not None:
                self.logref[out] = (ref, base2)   # type: ignore[assignment]
        elif code == "keep":
            w = next((x for x in args if self.r(self.token, x) is not None), a)  # type: ignore[arg-type]
            self.keep(out, w)


__all__ = ["DT", "EXACT", "LOW", "SHIFT", "UNITS", "FrameRules", "Num"]
