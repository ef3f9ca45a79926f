"""Value numbers: which values are the same machine number, outside the situation memo.

The rounding bound reads a weight-carrying value (p, ℓ, o) relative to the machine number
it is normalised by -- its *reference point* -- and splits its rounding into a *tilt*
shared with its partners and an *own* part (spec/semantics.md §7). Whether two reference
points are the same machine number, or one is a narrowing of the other, and whether o and
ℓ were built from the same machine weights by the same machine factors, are facts about
ranks, not about exact forms: two computations of one exact max may differ on the
machine. So they are kept here, per (rank, value id), as *value numbers*:

- a fresh number per op; views (reshape, trans), widening casts and a recv in the sent
  dtype keep their operand's number (the same machine number);
- a narrowing cast records its source and the offset bound;
- a difference `x - y` records both; the exp of one records the factor as rescaling from
  x's number to y's (p = exp(s - m): weights referenced at m);
- every weight value carries its reference point's number and a hash-consed *tilt token*:
  a leaf per exp, `scale(token, factor)` per rescale, `add(token, token)` per union; casts,
  recvs, sums and dots keep it. o and ℓ with equal tokens were built from the same machine
  weights by the same machine factors, in the same tree.

At three ops the relation of the operands joins the memo key (situations.py), so the
rules stay functions of the situation: a rescale `X·α` (same / narrowed / other), a union
`X + Y` (same reference point or not), a normalisation `o / ℓ` (partners, same reference
point, or other). The cost is a few dict operations per op.

Numbering is eager, in evaluation order. Numbering lazily (only the values a relation
reads, cone first) was measured on mesh_mlo_2d at 16x16 and saves nothing: the unions read
the reference points of both operands, whose numbering needs their whole cones, so 99% of
the values get numbered anyway (222,720 of 224,768 in two analyses). The cost is kept down
on the hot path instead (`related`).
"""

from __future__ import annotations

import math
from enum import IntEnum
from typing import NamedTuple

from meshproof.model.evaluate import Key, Lost
from meshproof.model.schedule import Const, DType, Op, OpKind, ValueRef
from meshproof.verify.semantics.ulp import UNIT, half_ulp

_LN2 = math.log(2.0)
EXACT_REF = 0   # the reference point of a weight exp(x) with no subtraction: C = 1


class Relation(IntEnum):
    NONE = 0        # not a rescale, union or normalisation of weights
    SAME = 1        # the same machine reference point
    NARROWED = 2    # a rescale from a narrowing of the partial's reference point
    PARTNERS = 3    # o / ℓ built from the same weights by the same factors
    OTHER = 4       # nothing shared is known
    MAXED = 5       # exp(x - max(x)): SAME, and the max key's argument is 0 (rule E)


class Related(NamedTuple):
    """The relation of an op's operands, part of its situation's memo key (a tuple of
    ints and a float: hashed in C, once per op of every rank)."""

    relation: Relation
    offset: float = 0.0      # NARROWED: |narrowed - reference| <= offset
    factor: int = 1          # MUL: the operand that is the rescale factor
    keys: int = 0            # MAXED: the keys of the block (the max's axis)


NONE = Related(Relation.NONE)
_SAME = Related(Relation.SAME)
_OTHER = Related(Relation.OTHER)
_PARTNERS = Related(Relation.PARTNERS)
_VIEWS = (OpKind.RESHAPE, OpKind.TRANS)
_SAME_AT = (Related(Relation.SAME, factor=0), Related(Relation.SAME, factor=1))
_OTHER_AT = (Related(Relation.OTHER, factor=0), Related(Relation.OTHER, factor=1))


class ValueNumbers:
    """Per (rank, value id) its value number; per number its reference point, tilt token,
    narrowing, difference and rescale."""

    def __init__(self) -> None:
        self.vn: dict[Key, int] = {}
        self.ref: dict[int, int] = {}                    # weight -> its reference's number
        self.token: dict[int, int] = {}                  # weight -> its tilt token
        self.narrow: dict[int, tuple[int, float]] = {}   # narrowed -> (source, offset)
        self.diff: dict[int, tuple[int, int]] = {}       # x - y -> (x, y)
        # exp(k·(x - y)) -> (x, y, k, the reference point of weights at x: x's rescale)
        self.rescale: dict[int, tuple[int, int, float, int]] = {}
        self._tokens: dict[tuple[object, ...], int] = {}
        self.dtype: dict[int, DType] = {}
        self._consts: dict[float, int] = {}
        self._const_numbers: set[int] = set()
        self.zero: set[int] = set()                      # numbers known to be exactly 0
        self.logref: dict[int, tuple[int, float]] = {}   # log X -> (X's reference, base)
        self.recip: dict[int, int] = {}                  # c / X -> X
        self.maximum_of: dict[int, tuple[int, int]] = {}  # max(x, axis) -> (x, axis)
        self._next = 1
        self._last: tuple[int, Op, list[int | None]] | None = None

    def _fresh(self) -> int:
        self._next += 1
        return self._next

    def _tok(self, *parts: object) -> int:
        t = self._tokens.get(parts)
        if t is None:
            t = self._tokens[parts] = len(self._tokens) + 1
        return t

    def number(self, rank: int, arg: ValueRef | Const) -> int | None:
        if isinstance(arg, Const):
            c = self._consts.get(arg.value)
            if c is None:
                c = self._consts[arg.value] = self._fresh()
                self.dtype[c] = DType.F32
                self._const_numbers.add(c)
            return c
        return self.vn.get((rank, arg.id))

    def dtype_of(self, rank: int, vid: int) -> DType | None:
        n = self.vn.get((rank, vid))
        return None if n is None else self.dtype.get(n)

    def _numbers(self, rank: int, op: Op) -> list[int | None]:
        vn = self.vn
        return [vn.get((rank, a.id)) if type(a) is ValueRef else self.number(rank, a)
                for a in op.args]

    # --- relations (read before the memo lookup) -------------------------------------
    def related(self, rank: int, op: Op) -> Related:
        k = op.kind
        if k is OpKind.EXP or k is OpKind.EXP2:
            return self._exp_related(rank, op)
        if (k is not OpKind.MUL and k is not OpKind.ADD and k is not OpKind.DIV) or \
                len(op.args) != 2:
            return NONE
        # the hot path (half a million calls at 16x16): both operands inline, side tables
        # that are empty skipped, the common answers prebuilt
        x, y = op.args
        vn = self.vn
        a = vn.get((rank, x.id)) if type(x) is ValueRef else self.number(rank, x)
        b = vn.get((rank, y.id)) if type(y) is ValueRef else self.number(rank, y)
        self._last = (rank, op, [a, b])      # note() numbers this op next: not twice
        if a is None or b is None:
            return _OTHER
        if k is OpKind.ADD:
            if self.logref:
                logged = self._logged(a, b)
                if logged is not None:
                    return logged
            if a in self.zero or b in self.zero:
                return NONE
        elif k is OpKind.MUL:
            if self.recip:
                for i, (u, inv) in enumerate(((a, b), (b, a))):
                    of = self.recip.get(inv)
                    if of is not None:   # o · (1/ℓ): a normalisation, related as o / ℓ
                        return self._normalising(u, of)._replace(factor=1 - i)
            return self._rescale(a, b)
        if k is OpKind.DIV:
            return self._normalising(a, b)
        ra, rb = self.ref.get(a), self.ref.get(b)
        if ra is not None and ra == rb:
            return _SAME
        return _OTHER

    def _exp_related(self, rank: int, op: Op) -> Related:
        n = self.number(rank, op.args[0])
        move = self.diff.get(n) if n is not None else None
        if move is None:
            return NONE
        mx = self.maximum_of.get(move[1])
        if mx is not None and mx[0] == move[0] and mx[1] == len(op.shape) - 1:
            # x - max(x) over the kept last axis: the max key's argument is exactly 0
            return Related(Relation.MAXED, keys=op.shape[-1])
        return _SAME

    def _logged(self, a: int, b: int) -> Related | None:
        for i, (u, lg) in enumerate(((a, b), (b, a))):
            at = self.logref.get(lg)
            if at is not None and self._refid(u, at[1]) == at[0]:
                # ũ + log X̃ with X referenced at ũ: ũ's error cancels
                return Related(Relation.SAME, factor=1 - i)
        return None

    def _normalising(self, a: int, b: int) -> Related:
        ta, tb = self.token.get(a), self.token.get(b)
        if ta is not None and ta == tb:
            return _PARTNERS
        ra, rb = self.ref.get(a), self.ref.get(b)
        if ra is not None and ra == rb:
            return _SAME
        return _OTHER

    def _rescale(self, a: int, b: int) -> Related:
        rescale = self.rescale
        move = rescale.get(b)
        if move is not None and a not in rescale:
            return self._rescaled(a, move, 1)
        move = rescale.get(a)
        if move is not None and b not in rescale:
            return self._rescaled(b, move, 0)
        return NONE

    def _rescaled(self, x: int, move: tuple[int, int, float, int], index: int) -> Related:
        """x · α with α = exp(k·(source - ỹ)) the operand `index`."""
        ref = self.ref.get(x)
        if ref is None:
            return _OTHER_AT[index]
        source, _, base, at_source = move
        if at_source == ref:
            return _SAME_AT[index]
        narrowed = self.narrow.get(source)
        if narrowed is not None and self._refid(narrowed[0], base) == ref:
            return Related(Relation.NARROWED, narrowed[1] * base, index)
        return _OTHER_AT[index]

    def _refid(self, vn: int, base: float) -> int:
        """The reference point of weights exp(k·(x - ỹ)): the number ỹ and k."""
        return self._tok("ref", vn, base)

    # --- numbering (after every op) -----------------------------------------------------
    def note(self, rank: int, op: Op, mag: float = 0.0, zero: bool = False,
             recv_source: Key | Lost | None = None) -> None:
        """Number op's result; `mag` bounds the operand's magnitude (for a narrowing),
        `zero` says the result is exactly 0 (a running state's start)."""
        if op.out is None:
            return
        self._note(rank, op, mag, recv_source)
        if zero:
            self.zero.add(self.vn[(rank, op.out)])

    def _note(self, rank: int, op: Op, mag: float, recv_source: Key | Lost | None) -> None:
        assert op.out is not None
        key = (rank, op.out)
        k = op.kind
        if k is OpKind.RECV:        # before the operands: a recv numbers from its source
            src = self.vn.get(recv_source) if isinstance(recv_source, tuple) else None
            held = self.dtype.get(src) if src is not None else None
            if src is None or held is None or UNIT[op.dtype] > UNIT[held]:
                src = self._fresh()
                self.dtype[src] = op.dtype
            self.vn[key] = src
            return
        last = self._last
        args = last[2] if last is not None and last[1] is op and last[0] == rank else \
            self._numbers(rank, op)
        first = args[0] if args else None
        if k in _VIEWS and first is not None:
            self.vn[key] = first
            if first in self.maximum_of:   # a view may move the max's axis: no rule E
                del self.maximum_of[first]
            return
        if k is OpKind.CAST and first is not None:
            self._cast(key, op, first, mag)
            return
        out = self.vn[key] = self._fresh()
        self.dtype[out] = op.dtype
        if k is OpKind.SUB and None not in args:
            self.diff[out] = (args[0], args[1])  # type: ignore[assignment]
        elif k in (OpKind.EXP, OpKind.EXP2) and first is not None:
            self._exp(out, first, _LN2 if k is OpKind.EXP2 else 1.0)
        elif k is OpKind.MUL and None not in args:
            self._mul(out, args[0], args[1])  # type: ignore[arg-type]
        elif k is OpKind.ADD and None not in args:
            self._add(out, args[0], args[1])  # type: ignore[arg-type]
        elif k is OpKind.DIV and len(args) == 2 and args[0] in self._const_numbers and \
                args[1] is not None:
            self.recip[out] = args[1]     # c / X: X's reference point and tilt, inverted
            self._keep(out, args[1])
        elif k is OpKind.MAX and first is not None and op.keepdims and op.axis is not None:
            self.maximum_of[out] = (first, op.axis)   # the machine max: exact
        elif k in (OpKind.LOG, OpKind.LOG2) and first is not None:
            ref = self.ref.get(first)
            if ref is not None:
                self.logref[out] = (ref, _LN2 if k is OpKind.LOG2 else 1.0)
        elif k in (OpKind.SUM, OpKind.DOT, OpKind.NEG) and first is not None:
            w = next((x for x in args if x is not None and x in self.token), first)
            self._keep(out, w)

    def _cast(self, key: Key, op: Op, src: int, mag: float) -> None:
        held = self.dtype.get(src)
        if held is not None and UNIT[op.dtype] <= UNIT[held]:
            self.vn[key] = src            # widening or the same dtype: the same number
            return
        out = self.vn[key] = self._fresh()
        self.dtype[out] = op.dtype
        origin, offset = self.narrow.get(src, (src, 0.0))
        self.narrow[out] = (origin, offset + half_ulp(op.dtype, mag))
        self._keep(out, src)

    def _keep(self, out: int, src: int) -> None:
        ref = self.ref.get(src)
        if ref is not None:
            self.ref[out] = ref
        tok = self.token.get(src)
        if tok is not None:
            self.token[out] = tok

    def _exp(self, out: int, arg: int, base: float) -> None:
        move = self.diff.get(arg)
        if move is not None:
            self.rescale[out] = (move[0], move[1], base, self._refid(move[0], base))
            self.ref[out] = self._refid(move[1], base)
        else:
            self.ref[out] = EXACT_REF
        self.token[out] = self._tok("leaf", out)

    def _mul(self, out: int, a: int, b: int) -> None:
        rescale, token = self.rescale, self.token
        for x, factor in ((a, b), (b, a)):
            move = rescale.get(factor)
            if move is not None and x not in rescale and x in token:
                self.ref[out] = self.ref[factor]   # ỹ's: set by _exp
                self.token[out] = self._tok("scale", token[x], factor)
                return
        if not self._const_numbers:
            return
        for x, c in ((a, b), (b, a)):
            if x in token and c in self._const_numbers:
                self._keep(out, x)
                self.token[out] = self._tok("scale", self.token[x], c)
                return

    def _add(self, out: int, a: int, b: int) -> None:
        if a in self.zero or b in self.zero:
            self._keep(out, b if a in self.zero else a)
            return
        ta, tb = self.token.get(a), self.token.get(b)
        ref = self.ref.get(a)          # the first operand's C (rounding.py's union rule)
        if ref is not None:
            self.ref[out] = ref
        if ta is not None and tb is not None:
            self.token[out] = self._tok("add", ta, tb)
        elif ta is not None or tb is not None:
            self.token[out] = ta if ta is not None else tb  # type: ignore[assignment]


__all__ = ["EXACT_REF", "NONE", "Related", "Relation", "ValueNumbers"]
