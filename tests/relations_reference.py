"""The value numbering as it was before its fields moved into the numbers (relations.py at
a7345c2: a fresh number per op of every rank, ref/token/rescale in side tables keyed by
it), kept as the reference that tests/test_semantics_relations.py replays every numbering
call of an analysis on: the relation at every op must be the same."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Final

from meshproof.model.evaluate import Key, Lost
from meshproof.model.schedule import Const, DType, Op, OpKind, ValueRef
from meshproof.verify.semantics.ulp import UNIT, half_ulp

_LN2 = math.log(2.0)
EXACT_REF = 0   # the reference point of a weight exp(x) with no subtraction: C = 1

_NOOUT, _RECV, _VIEW, _CAST, _SUB, _EXP, _MUL, _ADD, _DIV, _MAX, _LOG, _KEEP, _FRESH = \
    range(13)
_CODES = {OpKind.RECV: _RECV, OpKind.RESHAPE: _VIEW, OpKind.TRANS: _VIEW,
          OpKind.CAST: _CAST, OpKind.SUB: _SUB, OpKind.EXP: _EXP, OpKind.EXP2: _EXP,
          OpKind.MUL: _MUL, OpKind.ADD: _ADD, OpKind.DIV: _DIV, OpKind.MAX: _MAX,
          OpKind.LOG: _LOG, OpKind.LOG2: _LOG, OpKind.SUM: _KEEP, OpKind.DOT: _KEEP,
          OpKind.NEG: _KEEP}
_OP: Final = 0
_CODE: Final = 1
_OUT: Final = 2
_IDS: Final = 3
_CONSTS: Final = 4
_DTC: Final = 5
_BASE2: Final = 6
_AXIS: Final = 7
Plan = tuple[Op, int, int, tuple[int, ...], tuple[tuple[int, int], ...], int, int, int]
_DTYPES = (DType.F16, DType.BF16, DType.F32)
_DT = {d: i for i, d in enumerate(_DTYPES)}
_UNITS = tuple(UNIT[d] for d in _DTYPES)
_HALF = 40
_RELATED_CODES = frozenset((_MUL, _ADD, _DIV))
_LOW = (1 << _HALF) - 1


def _refid(vn: int, base2: int) -> int:
    return 2 * vn + base2


class Numbering:

    def __init__(self) -> None:
        self._vns: defaultdict[int, dict[int, int]] = defaultdict(dict)  # rank: vid -> no.
        self.ref: dict[int, int] = {}                    # weight -> its reference's number
        self.token: dict[int, int] = {}                  # weight -> its tilt token
        self.narrow: dict[int, tuple[int, float]] = {}   # narrowed -> (source, offset)
        self.diff: dict[int, int] = {}                   # x - y -> x << _HALF | y
        self.rescale: dict[int, int] = {}
        self._tokens: dict[int, int] = {}                # scale / add (packed) -> token
        self._consts: dict[float, int] = {}
        self._const_numbers: set[int] = set()
        self.zero: set[int] = set()                      # numbers known to be exactly 0
        self.logref: dict[int, tuple[int, int]] = {}     # log X -> (X's reference, base2)
        self.recip: dict[int, int] = {}                  # c / X -> X
        self.maximum_of: dict[int, tuple[int, int]] = {}  # max(x, axis) -> (x, axis)
        self._next = 0
        self._plans: dict[int, Plan] = {}
        self._done_op: Op | None = None
        self._done_rank = -1

    def _tok(self, what: int, x: int, y: int) -> int:
        parts = (((x << _HALF) | y) << 1) | what
        t = self._tokens.get(parts)
        if t is None:
            t = self._tokens[parts] = 2 * (len(self._tokens) + 1)
        return t

    def _plan(self, op: Op) -> Plan:
        code = _NOOUT if op.out is None else _CODES.get(op.kind, _FRESH)
        if code in (_MUL, _ADD, _DIV) and len(op.args) != 2:
            code = _FRESH
        if code == _MAX and (not op.keepdims or op.axis is None):
            code = _FRESH
        ids = tuple(a.id if type(a) is ValueRef else -1 for a in op.args)
        consts = tuple((i, self._const(a.value)) for i, a in enumerate(op.args)
                       if isinstance(a, Const))
        base2 = int(op.kind in (OpKind.EXP2, OpKind.LOG2))
        axis = (op.axis or 0) if code == _MAX else len(op.shape) - 1
        plan = self._plans[id(op)] = (op, code, op.out or 0, ids, consts, _DT[op.dtype],
                                      base2, axis)
        return plan

    def _const(self, value: float) -> int:
        c = self._consts.get(value)
        if c is None:
            self._next += 4
            c = self._consts[value] = self._next | _DT[DType.F32]
            self._const_numbers.add(c)
        return c

    def _args(self, rank: int, plan: Plan) -> list[int | None]:
        vr = self._vns[rank]
        out = [vr.get(i) for i in plan[_IDS]]
        for i, c in plan[_CONSTS]:
            out[i] = c
        return out

    def note(self, rank: int, op: Op, mag: float = 0.0, zero: bool = False,
             recv_source: Key | Lost | None = None) -> None:
        if op is self._done_op and rank == self._done_rank:    # related() numbered it
            self._done_op = None
            if zero:
                self.zero.add(self._vns[rank][op.out or 0])
            return
        plan = self._plans.get(id(op))
        if plan is None or plan[_OP] is not op:
            plan = self._plan(op)
        code = plan[_CODE]
        if code == _NOOUT:
            return
        vr = self._vns[rank]
        if code == _FRESH:          # a number of its own, nothing read
            self._next += 4
            vr[plan[_OUT]] = self._next | plan[_DTC]
        elif code == _SUB and not plan[_CONSTS] and len(plan[_IDS]) == 2:   # x - y: for an exp
            x, y = plan[_IDS]
            a, b = vr.get(x), vr.get(y)
            self._next += 4
            out = vr[plan[_OUT]] = self._next | plan[_DTC]
            if a is not None and b is not None:
                self.diff[out] = (a << _HALF) | b
        elif code == _RECV:         # before the operands: a recv numbers from its source
            src = self._vns[recv_source[0]].get(recv_source[1]) \
                if isinstance(recv_source, tuple) else None
            dt = plan[_DTC]
            if src is None or _UNITS[dt] > _UNITS[src & 3]:
                self._next += 4
                src = self._next | dt
            vr[plan[_OUT]] = src
        else:
            self._note(rank, vr, plan, code, mag)
        if zero:
            self.zero.add(vr[plan[_OUT]])

    def _note(self, rank: int, vr: dict[int, int], plan: Plan, code: int, mag: float
              ) -> None:
        if plan[_CONSTS]:
            args = self._args(rank, plan)
            a = args[0] if args else None
            b = args[1] if len(args) > 1 else None
        else:
            ids = plan[_IDS]
            a = vr.get(ids[0]) if ids else None
            b = vr.get(ids[1]) if len(ids) > 1 else None
        if code == _VIEW and a is not None:
            vr[plan[_OUT]] = a
            if a in self.maximum_of:   # a view may move the max's axis: no rule E
                del self.maximum_of[a]
            return
        if code == _CAST and a is not None:
            self._cast(vr, plan, a, mag)
            return
        self._next += 4
        out = vr[plan[_OUT]] = self._next | plan[_DTC]
        if a is None:
            return
        if code == _SUB:
            if b is not None:
                self.diff[out] = (a << _HALF) | b
        elif code == _EXP:
            self._exp(plan, out, a)
        elif code == _MUL:
            if b is not None:
                self._mul(out, a, b)
        elif code == _ADD:
            if b is not None:
                self._add(out, a, b)
        else:
            self._other(rank, plan, code, out, a, b)

    def _exp(self, plan: Plan, out: int, a: int) -> int | None:
        move = self.diff.get(a)
        if move is not None:
            base2 = plan[_BASE2]
            self.rescale[out] = _refid(move >> _HALF, base2)
            self.ref[out] = _refid(move & _LOW, base2)
        else:
            self.ref[out] = EXACT_REF
        self.token[out] = 2 * out + 1      # a leaf: its own
        return move

    def _other(self, rank: int, plan: Plan, code: int, out: int, a: int, b: int | None
               ) -> None:
        if code == _DIV:
            if a in self._const_numbers and b is not None:
                self.recip[out] = b     # c / X: X's reference point and tilt, inverted
                self._keep(out, b)
        elif code == _MAX:
            self.maximum_of[out] = (a, plan[_AXIS])   # the machine max: exact
        elif code == _LOG:
            ref = self.ref.get(a)
            if ref is not None:
                self.logref[out] = (ref, plan[_BASE2])
        elif code == _KEEP:
            token = self.token
            w = next((x for x in self._args(rank, plan) if x is not None and x in token), a)
            self._keep(out, w)

    def _cast(self, vr: dict[int, int], plan: Plan, src: int, mag: float) -> None:
        dt = plan[_DTC]
        if _UNITS[dt] <= _UNITS[src & 3]:
            vr[plan[_OUT]] = src            # widening or the same dtype: the same number
            return
        self._next += 4
        out = vr[plan[_OUT]] = self._next | dt
        origin, offset = self.narrow.get(src, (src, 0.0))
        self.narrow[out] = (origin, offset + half_ulp(_DTYPES[dt], mag))
        self._keep(out, src)

    def _keep(self, out: int, src: int) -> None:
        ref = self.ref.get(src)
        if ref is not None:
            self.ref[out] = ref
        tok = self.token.get(src)
        if tok is not None:
            self.token[out] = tok

    def _mul(self, out: int, a: int, b: int) -> None:
        rescale, token = self.rescale, self.token
        if b in rescale and a not in rescale and a in token:
            self.ref[out] = self.ref[b]   # ỹ's: set by the exp
            token[out] = self._tok(0, token[a], b)
            return
        if a in rescale and b not in rescale and b in token:
            self.ref[out] = self.ref[a]
            token[out] = self._tok(0, token[b], a)
            return
        consts = self._const_numbers
        if not consts:
            return
        for x, c in ((a, b), (b, a)):
            if x in token and c in consts:
                self._keep(out, x)
                token[out] = self._tok(0, token[x], c)
                return

    def _add(self, out: int, a: int, b: int) -> None:
        zero = self.zero
        if a in zero or b in zero:
            self._keep(out, b if a in zero else a)
            return
        token = self.token
        ta, tb = token.get(a), token.get(b)
        ref = self.ref.get(a)          # the first operand's C (rounding.py's union rule)
        if ref is not None:
            self.ref[out] = ref
        if ta is not None and tb is not None:
            token[out] = self._tok(1, ta, tb)
        elif ta is not None or tb is not None:
            token[out] = ta if ta is not None else tb  # type: ignore[assignment]








from meshproof.verify.semantics.relations import NONE, Related, Relation  # noqa: E402

_SAME = Related(Relation.SAME)
_OTHER = Related(Relation.OTHER)
_PARTNERS = Related(Relation.PARTNERS)
_SAME_AT = (Related(Relation.SAME, factor=0), Related(Relation.SAME, factor=1))
_OTHER_AT = (Related(Relation.OTHER, factor=0), Related(Relation.OTHER, factor=1))


class ReferenceNumbers(Numbering):

    def related(self, rank: int, op: Op) -> Related:
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


