"""The value numbering before it was shared between ranks (relations.py): a fresh number
per op of every rank, side tables keyed by it. Kept as the reference that
tests/test_semantics_relations_shared.py validates the shared numbering against, op by op."""

from __future__ import annotations

from meshproof.model.schedule import Op
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
from meshproof.verify.semantics.relations_numbering import (
    _ADD,
    _AXIS,
    _CODE,
    _CONSTS,
    _DTC,
    _EXP,
    _HALF,
    _IDS,
    _LN2,
    _LOW,
    _MUL,
    _OP,
    _OUT,
    _RELATED_CODES,
    Numbering,
    _refid,
)


class AbsoluteNumbers(Numbering):
    """The relations of an op's operands, read off their value numbers (relations_numbering.py)
    before the memo lookup."""

    def related(self, rank: int, op: Op) -> Related:
        """The relation of op's operands; and op's result numbered already (note() is
        called next for the same op and rank, and then has nothing left to do)."""
        # the hot path (a million calls at 32x32): operands read once, the relation read
        # off them, then the result numbered without a second read
        plan = self._plans.get(id(op))
        if plan is None or plan[_OP] is not op:
            plan = self._plan(op)
        code = plan[_CODE]
        if code == _EXP:
            consts = plan[_CONSTS]
            vr = self._vns[rank]
            a = consts[0][1] if consts else vr.get(plan[_IDS][0])
            self._next += 4
            out = vr[plan[_OUT]] = self._next | plan[_DTC]
            rel = NONE
            if a is not None:
                move = self._exp(plan, out, a)
                if move is not None:
                    mx = self.maximum_of.get(move & _LOW)
                    # x - max(x) over the kept last axis: the max key's argument is exactly 0
                    rel = Related(Relation.MAXED, keys=op.shape[-1]) if mx is not None and \
                        mx[0] == move >> _HALF and mx[1] == plan[_AXIS] else _SAME
        elif code in _RELATED_CODES:
            vr = self._vns[rank]
            if plan[_CONSTS]:
                a, b = self._args(rank, plan)
            else:
                x, y = plan[_IDS]
                a, b = vr.get(x), vr.get(y)
            self._next += 4
            out = vr[plan[_OUT]] = self._next | plan[_DTC]
            # the result's number is fresh: writing its entries moves no relation of a, b
            if a is None or b is None:
                rel = _OTHER
            elif code == _MUL:
                rel = self._product(out, a, b)
            elif code == _ADD:
                rel = self._union(out, a, b)
            else:
                rel = self._normalising(a, b)
                if a in self._const_numbers:    # c / X: X's reference point and tilt,
                    self.recip[out] = b         # inverted
                    self._keep(out, b)
        else:
            return NONE
        self._done_op, self._done_rank = op, rank
        return rel

    def _product(self, out: int, a: int, b: int) -> Related:
        """The relation of a · b (a rescale of weights by a factor exp(x - y), or a
        normalisation o · (1/ℓ)), and the number `out` of the product given its entries."""
        rescale = self.rescale
        ra, rb = rescale.get(a), rescale.get(b)
        rel: Related | None = None
        if self.recip:
            for i, (u, inv) in enumerate(((a, b), (b, a))):
                of = self.recip.get(inv)
                if of is not None:   # o · (1/ℓ): a normalisation, related as o / ℓ
                    rel = self._normalising(u, of)._replace(factor=1 - i)
                    break
        token = self.token
        if rb is not None and ra is None:     # a · exp(k·(x - ỹ))
            if rel is None:
                rel = _SAME_AT[1] if self.ref.get(a) == rb else self._rescaled(a, rb, 1)
            ta = token.get(a)
            if ta is not None:
                self.ref[out] = self.ref[b]    # ỹ's: set by the exp
                token[out] = self._tok(0, ta, b)
                return rel
        elif ra is not None and rb is None:   # exp(k·(x - ỹ)) · b
            if rel is None:
                rel = _SAME_AT[0] if self.ref.get(b) == ra else self._rescaled(b, ra, 0)
            tb = token.get(b)
            if tb is not None:
                self.ref[out] = self.ref[a]
                token[out] = self._tok(0, tb, a)
                return rel
        elif rel is None:
            rel = NONE
        consts = self._const_numbers
        if consts:
            for x, c in ((a, b), (b, a)):
                if x in token and c in consts:
                    self._keep(out, x)
                    token[out] = self._tok(0, token[x], c)
                    break
        return rel

    def _union(self, out: int, a: int, b: int) -> Related:
        """The relation of a + b (the same reference point or not), and the number `out`
        of the sum given its entries: the first operand's reference point (rounding.py's
        union rule), the union of the tilt tokens."""
        rel = self._logged(a, b) if self.logref else None
        zero = self.zero
        if a in zero or b in zero:
            self._keep(out, b if a in zero else a)
            return NONE if rel is None else rel
        ref = self.ref
        ra = ref.get(a)
        if rel is None:
            rel = _SAME if ra is not None and ra == ref.get(b) else _OTHER
        if ra is not None:
            ref[out] = ra
        token = self.token
        ta, tb = token.get(a), token.get(b)
        if ta is not None and tb is not None:
            token[out] = self._tok(1, ta, tb)
        elif ta is not None or tb is not None:
            token[out] = ta if ta is not None else tb  # type: ignore[assignment]
        return rel

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


__all__ = ["AbsoluteNumbers"]
