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
point, or other). The cost is a few int operations per op.

Numbering is eager, in evaluation order. Numbering lazily (only the values a relation
reads, cone first) was measured on mesh_mlo_2d at 16x16 and saves nothing: the unions read
the reference points of both operands, whose numbering needs their whole cones, so 99% of
the values get numbered anyway (222,720 of 224,768 in two analyses). The cost is kept down
on the hot path instead: what an op needs is read once per op object (a plan, shared by
the ranks that trace it alike), and `related` reads the operands once, relates them and
numbers the op's result in the same call, so the `note` that follows has nothing left to
do. A weight's reference point and token and a rescale factor's reference point are
*fields of its number* (relations_numbering.py: an identity in the low bits, the fields
above, all set when the number is made): relating reads them with shifts, and numbering a
weight inserts into no table. With them in side tables (`ref` and `token` held 4.1 million
entries at 64x64), the cost per call grew with the tables, from 1.1 us to about 2 us over
the 11.4 million calls of a 64x64 analysis -- inserts and lookups missing the caches, a
received partial's entries written long before. Replaying the calls of one 32x32
mesh_mlo_2d analysis: 1.11 s with the fields, 1.66 s with the side tables, the same
relation at every call (tests/test_semantics_relations.py replays the analyses of its
goldens on relations_reference.py, the side-table numbering, the same way).

Measured and not kept: per-rank lists in place of the per-rank dicts (no gain); sharing
the numbering between ranks that trace alike, as the situation memo shares the facts (a
rank holds (owner, relative number), a relative number interned from the op and its
operands' numbers in the rank's frame, every entry naming numbers relative to its owner).
It was exact -- the same relation at each of the 11.4 million calls at 64x64 -- but slower
(replays of 20.7-23.7 s against 16.5-17.9 s at 64x64): a received partial's number carries
its owner's offset into the key, so the merges of a fanout differ from rank to rank and
the tables shrank only 3.6x (1.16 million relative numbers), every one a miss that runs
the rules (commit 9601f23 has it).
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

from meshproof.model.schedule import Op
from meshproof.verify.semantics.relations_numbering import (
    _ADD,
    _AXIS,
    _CODE,
    _CONSTS,
    _DTC,
    _EXP,
    _FM,
    _HALF,
    _IDS,
    _LN2,
    _LOW,
    _MUL,
    _NUM,
    _OP,
    _OUT,
    _RELATED_CODES,
    _RESCALE,
    _RF,
    _RS,
    _STEP,
    _TK,
    EXACT_REF,
    Numbering,
    _refid,
    _weight,
)


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
_MAXED: dict[int, Related] = {}


def _maxed(keys: int) -> Related:
    rel = _MAXED.get(keys)
    if rel is None:
        rel = _MAXED[keys] = Related(Relation.MAXED, keys=keys)
    return rel


_SAME = Related(Relation.SAME)
_OTHER = Related(Relation.OTHER)
_PARTNERS = Related(Relation.PARTNERS)
_SAME_AT = (Related(Relation.SAME, factor=0), Related(Relation.SAME, factor=1))
_OTHER_AT = (Related(Relation.OTHER, factor=0), Related(Relation.OTHER, factor=1))


class ValueNumbers(Numbering):
    """The relations of an op's operands, read off their value numbers (relations_numbering.py)
    before the memo lookup."""

    def related(self, rank: int, op: Op) -> Related:
        """The relation of op's operands; and op's result numbered already (note() is
        called next for the same op and rank, and then has nothing left to do)."""
        # the hot path (a million calls at 32x32): operands read once, the relation read
        # off them and their fields, then the result numbered without a second read
        plan = self._plans.get(id(op))
        if plan is None or plan[_OP] is not op:
            plan = self._plan(op)
        code = plan[_CODE]
        if code == _EXP:
            consts = plan[_CONSTS]
            vr = self._vns[rank]
            a = consts[0][1] if consts else vr.get(plan[_IDS][0])
            rel = NONE
            if a is None:
                self._next += _STEP
                vr[plan[_OUT]] = self._next | plan[_DTC]
            else:
                vr[plan[_OUT]], move = self._exp(plan, a)
                if move is not None:
                    mx = self.maximum_of.get(move & _LOW)
                    # x - max(x) over the kept last axis: the max key's argument is exactly 0
                    rel = _maxed(op.shape[-1]) if mx is not None and \
                        mx[0] == move >> _HALF and mx[1] == plan[_AXIS] else _SAME
        elif code in _RELATED_CODES:
            vr = self._vns[rank]
            if plan[_CONSTS]:
                a, b = self._args(rank, plan)
            else:
                x, y = plan[_IDS]
                a, b = vr.get(x), vr.get(y)
            self._next += _STEP
            out = self._next | plan[_DTC]
            # the result's identity is fresh: its entries move no relation of a, b
            if a is None or b is None:
                rel = _OTHER
                vr[plan[_OUT]] = out
            elif code == _MUL:
                rel, fields = self._product(out, a, b)
                vr[plan[_OUT]] = out | fields
            elif code == _ADD:
                rel, fields = self._union(out, a, b)
                vr[plan[_OUT]] = out | fields
            else:
                rel = self._normalising(a, b)
                if a in self._const_numbers:    # c / X: X's reference point and tilt,
                    self.recip[out] = b         # inverted
                    out |= _weight(b)
                vr[plan[_OUT]] = out
        else:
            return NONE
        self._done_op, self._done_rank = op, rank
        return rel

    def _product(self, ident: int, a: int, b: int) -> tuple[Related, int]:
        """The relation of a · b (a rescale of weights by a factor exp(x - y), or a
        normalisation o · (1/ℓ)), and the fields of the product."""
        # a rescale factor is flagged in its identity, its reference point in its fields
        ra = (a >> _RS & _FM) - 1 if a & _RESCALE else None
        rb = (b >> _RS & _FM) - 1 if b & _RESCALE else None
        rel: Related | None = None
        if self.recip:
            for i, (u, inv) in enumerate(((a, b), (b, a))):
                of = self.recip.get(inv & _NUM)
                if of is not None:   # o · (1/ℓ): a normalisation, related as o / ℓ
                    rel = self._normalising(u, of)._replace(factor=1 - i)
                    break
        if rb is not None and ra is None:     # a · exp(k·(x - ỹ))
            if rel is None:
                rel = _SAME_AT[1] if a >> _RF & _FM == rb + 1 else self._rescaled(a, rb, 1)
            ta = a >> _TK
            if ta:      # ỹ's reference point: set by the exp
                return rel, self._tok(0, ta, b & _NUM) << _TK | (b >> _RF & _FM) << _RF
        elif ra is not None and rb is None:   # exp(k·(x - ỹ)) · b
            if rel is None:
                rel = _SAME_AT[0] if b >> _RF & _FM == ra + 1 else self._rescaled(b, ra, 0)
            tb = b >> _TK
            if tb:
                return rel, self._tok(0, tb, a & _NUM) << _TK | (a >> _RF & _FM) << _RF
        elif rel is None:
            rel = NONE
        consts = self._const_numbers
        if consts:
            for x, c in ((a, b), (b, a)):
                tx = x >> _TK
                if tx and c in consts:
                    return rel, self._tok(0, tx, c) << _TK | (x >> _RF & _FM) << _RF
        return rel, 0

    def _union(self, ident: int, a: int, b: int) -> tuple[Related, int]:
        """The relation of a + b (the same reference point or not), and the fields of the
        sum: the first operand's reference point (rounding.py's union rule), the union of
        the tilt tokens."""
        rel = self._logged(a, b) if self.logref else None
        zero = self.zero
        if a in zero or b in zero:
            return NONE if rel is None else rel, _weight(b if a in zero else a)
        ra = a >> _RF & _FM     # + 1; 0: none
        if rel is None:
            rel = _SAME if ra and ra == b >> _RF & _FM else _OTHER
        ta, tb = a >> _TK, b >> _TK
        tok = self._tok(1, ta, tb) if ta and tb else ta or tb
        return rel, tok << _TK | ra << _RF

    def _logged(self, a: int, b: int) -> Related | None:
        for i, (u, lg) in enumerate(((a, b), (b, a))):
            at = self.logref.get(lg & _NUM)
            if at is not None and _refid(u, at[1]) == at[0]:
                # ũ + log X̃ with X referenced at ũ: ũ's error cancels
                return Related(Relation.SAME, factor=1 - i)
        return None

    def _normalising(self, a: int, b: int) -> Related:
        ta = a >> _TK
        if ta and ta == b >> _TK:
            return _PARTNERS
        ra = a >> _RF & _FM
        if ra and ra == b >> _RF & _FM:
            return _SAME
        return _OTHER

    def _rescaled(self, x: int, at_source: int, index: int) -> Related:
        """x · α with α = exp(k·(source - ỹ)) the operand `index`, at_source the reference
        point of weights at source."""
        ref = self.ref_of(x)
        if ref is None:
            return _OTHER_AT[index]
        if at_source == ref:
            return _SAME_AT[index]
        narrowed = self.narrow.get(at_source >> 1)
        base2 = at_source & 1
        if narrowed is not None and _refid(narrowed[0], base2) == ref:
            return Related(Relation.NARROWED, narrowed[1] * (_LN2 if base2 else 1.0), index)
        return _OTHER_AT[index]


__all__ = ["EXACT_REF", "NONE", "Related", "Relation", "ValueNumbers"]
