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
on the hot path instead: what an op needs is read once per op object (a plan, shared by
the ranks that trace it alike), a number carries its dtype in its low bits and pairs are
packed in ints (no tuple per value for the collector to scan), and `related` numbers the
op's result too, so the `note` that follows has nothing left to do. Replaying the calls
of one 16x16 mesh_mlo_2d analysis costs 0.24 s against 0.44 s before, of a 32x32 one 3.1 s
against 4.6 s. Per-rank lists in place of the per-rank dicts were measured there too and
gain nothing (3.3 s). At 32x32 and above the numbering is still most of numeric_safety's
cost (its tables outgrow the caches): sharing it between ranks that trace alike, as the
situation memo shares the facts, is what is left.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

from meshproof.model.schedule import Op
from meshproof.verify.semantics.relations_numbering import (
    _AXIS,
    _CODE,
    _CONSTS,
    _DIV,
    _EXP,
    _HALF,
    _IDS,
    _LN2,
    _LOW,
    _MUL,
    _OP,
    _RELATED_CODES,
    EXACT_REF,
    Numbering,
    Plan,
    _refid,
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
        plan = self._plans.get(id(op))
        if plan is None or plan[_OP] is not op:
            plan = self._plan(op)
        code = plan[_CODE]
        if code == _EXP:
            rel = self._exp_related(rank, plan)
        elif code in _RELATED_CODES:
            rel = self._binary(rank, op, plan, code)
        else:
            return NONE
        self._note(rank, self._vns[rank], plan, code, 0.0)
        self._done = (rank, op)
        return rel

    def _binary(self, rank: int, op: Op, plan: Plan, code: int) -> Related:
        # the hot path (half a million calls at 16x16): both operands inline, side tables
        # that are empty skipped, the common answers prebuilt
        if plan[_CONSTS]:
            a, b = self._args(rank, plan)
        else:
            vr = self._vns[rank]
            x, y = plan[_IDS]
            a, b = vr.get(x), vr.get(y)
        self._last = (rank, op, a, b)      # note() numbers this op next: not twice
        if a is None or b is None:
            return _OTHER
        if code == _MUL:
            if self.recip:
                for i, (u, inv) in enumerate(((a, b), (b, a))):
                    of = self.recip.get(inv)
                    if of is not None:   # o · (1/ℓ): a normalisation, related as o / ℓ
                        return self._normalising(u, of)._replace(factor=1 - i)
            rescale = self.rescale
            at = rescale.get(b)
            if at is not None and a not in rescale:
                return self._rescaled(a, at, 1)
            at = rescale.get(a)
            if at is not None and b not in rescale:
                return self._rescaled(b, at, 0)
            return NONE
        if code == _DIV:
            return self._normalising(a, b)
        if self.logref:
            logged = self._logged(a, b)
            if logged is not None:
                return logged
        zero = self.zero
        if a in zero or b in zero:
            return NONE
        ra = self.ref.get(a)
        if ra is not None and ra == self.ref.get(b):
            return _SAME
        return _OTHER

    def _exp_related(self, rank: int, plan: Plan) -> Related:
        consts = plan[_CONSTS]
        n = consts[0][1] if consts else self._vns[rank].get(plan[_IDS][0])
        move = self.diff.get(n) if n is not None else None
        if move is None:
            return NONE
        mx = self.maximum_of.get(move & _LOW)
        if mx is not None and mx[0] == move >> _HALF and mx[1] == plan[_AXIS]:
            # x - max(x) over the kept last axis: the max key's argument is exactly 0
            return Related(Relation.MAXED, keys=plan[_OP].shape[-1])
        return _SAME

    def _logged(self, a: int, b: int) -> Related | None:
        for i, (u, lg) in enumerate(((a, b), (b, a))):
            at = self.logref.get(lg)
            if at is not None and _refid(u, at[1]) == at[0]:
                # ũ + log X̃ with X referenced at ũ: ũ's error cancels
                return Related(Relation.SAME, factor=1 - i)
        return None

    def _normalising(self, a: int, b: int) -> Related:
        ta = self.token.get(a)
        if ta is not None and ta == self.token.get(b):
            return _PARTNERS
        ra = self.ref.get(a)
        if ra is not None and ra == self.ref.get(b):
            return _SAME
        return _OTHER

    def _rescaled(self, x: int, at_source: int, index: int) -> Related:
        """x · α with α = exp(k·(source - ỹ)) the operand `index`, at_source the reference
        point of weights at source."""
        ref = self.ref.get(x)
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
