"""Value numbering (relations.py's side tables): per (rank, value id) its number, and what
the relations read -- a weight's reference point and tilt token and a rescale factor's
reference point, carried in the number itself, and in side tables a narrowing (casts), a
difference (x - y), a log's reference point, a reciprocal's divisor, a max's operand and axis.

Numbers are assigned in evaluation order, one `note` per op (relations.py's `related`
numbers the op it relates itself). What an op needs is read once per op object (a plan,
shared by the ranks that trace it alike). A number is an int: its *identity* (a counter,
a rescale flag, the dtype in the low two bits) in its low `_NB` bits, and above them the
fields a weight's relations read (its rescale's reference point, its reference point, its
tilt token), all set when it is made and never changed: reading them is a shift, not a
lookup in a table of millions of entries, and numbering a weight inserts nothing. Equal
identities are equal numbers (the fields are a function of the identity). Pairs are packed
in one int: no tuple per value for the collector to scan.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Final

from meshproof.model.evaluate import Key, Lost
from meshproof.model.schedule import Const, DType, Op, OpKind, ValueRef
from meshproof.verify.semantics.ulp import UNIT, half_ulp

_LN2 = math.log(2.0)
EXACT_REF = 0   # the reference point of a weight exp(x) with no subtraction: C = 1

# Per op object (shared by every rank that traces it alike), what numbering it needs, read
# once instead of once per rank: (op, code, out, operand ids (-1: a constant), the
# constants' (position, number), dtype code, exp/log base flag, axis)
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
# A number is an int: its identity in the low _NB bits (the dtype in the lowest two), its
# fields above (2**41 numbers before an identity could reach them: far beyond any memory)
_DTYPES = (DType.F16, DType.BF16, DType.F32)
_DT = {d: i for i, d in enumerate(_DTYPES)}
_UNITS = tuple(UNIT[d] for d in _DTYPES)
_RELATED_CODES = frozenset((_MUL, _ADD, _DIV))
_STEP = 8             # identities: the dtype in bits 0-1, bit 2 set for a rescale factor
_RESCALE = 4
_NB = 44              # the bits of an identity
_NUM = (1 << _NB) - 1
_HALF = _NB           # a pair of identities packed in one int (a difference)
_LOW = _NUM
_FB = 46              # the bits of a field: a reference point (2·identity + base2) + 1
_FM = (1 << _FB) - 1
_RS = _NB             # the rescale's reference point + 1 (0: not a rescale factor)
_RF = _NB + _FB       # the weight's reference point + 1 (0: none)
_TK = _NB + 2 * _FB   # the weight's tilt token (0: none)
_TS = 48              # a token's parts: a token or an identity, both below 2**_TS


def _refid(vn: int, base2: int) -> int:
    """The reference point of weights exp(k·(x - ỹ)): the identity of ỹ and whether k is
    ln 2 (exp2) or 1, as one int > 0 (EXACT_REF is 0)."""
    return 2 * (vn & _NUM) + base2


def _weight(n: int) -> int:
    """n's reference point and tilt token fields, in place (what a copy of its weights
    keeps)."""
    return (n >> _RF) << _RF


class Numbering:
    """Per (rank, value id) its value number; per number its reference point, tilt token,
    narrowing, difference and rescale."""

    def __init__(self) -> None:
        self._vns: defaultdict[int, dict[int, int]] = defaultdict(dict)  # rank: vid -> no.
        # by identity: narrowed -> (source, offset); x - y -> x << _HALF | y
        self.narrow: dict[int, tuple[int, float]] = {}
        self.diff: dict[int, int] = {}
        self._tokens: dict[int, int] = {}                # scale / add (packed) -> token
        self._consts: dict[float, int] = {}
        self._const_numbers: set[int] = set()
        self.zero: set[int] = set()                      # numbers known to be exactly 0
        self.logref: dict[int, tuple[int, int]] = {}     # log X -> (X's reference, base2)
        self.recip: dict[int, int] = {}                  # c / X -> X (by c / X's identity)
        self.maximum_of: dict[int, tuple[int, int]] = {}  # max(x, axis) -> (x, axis)
        self._next = 0
        self._plans: dict[int, Plan] = {}
        # the op (and rank) related() numbered already: the note() that follows returns
        self._done_op: Op | None = None
        self._done_rank = -1

    @staticmethod
    def ref_of(n: int) -> int | None:
        r = n >> _RF & _FM
        return r - 1 if r else None

    @staticmethod
    def token_of(n: int) -> int | None:
        return (n >> _TK) or None

    def _product(self, ident: int, a: int, b: int) -> tuple[object, int]:
        """The relation of a · b and its fields (relations.py)."""
        raise NotImplementedError

    def _union(self, ident: int, a: int, b: int) -> tuple[object, int]:
        """The relation of a + b and its fields (relations.py)."""
        raise NotImplementedError

    def _tok(self, what: int, x: int, y: int) -> int:
        """A hash-consed token (even; a leaf's is its exp's number, odd-shifted)."""
        parts = (((x << _TS) | y) << 1) | what
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
            self._next += _STEP
            c = self._consts[value] = self._next | _DT[DType.F32]
            self._const_numbers.add(c)
        return c

    def number(self, rank: int, arg: ValueRef | Const) -> int | None:
        if isinstance(arg, Const):
            return self._const(arg.value)
        return self._vns[rank].get(arg.id)

    def dtype_of(self, rank: int, vid: int) -> DType | None:
        n = self._vns[rank].get(vid)
        return None if n is None else _DTYPES[n & 3]

    def _args(self, rank: int, plan: Plan) -> list[int | None]:
        vr = self._vns[rank]
        out = [vr.get(i) for i in plan[_IDS]]
        for i, c in plan[_CONSTS]:
            out[i] = c
        return out

    def note(self, rank: int, op: Op, mag: float = 0.0, zero: bool = False,
             recv_source: Key | Lost | None = None) -> None:
        """Number op's result; `mag` bounds the operand's magnitude (for a narrowing),
        `zero` says the result is exactly 0 (a running state's start)."""
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
            self._next += _STEP
            vr[plan[_OUT]] = self._next | plan[_DTC]
        elif code == _SUB and not plan[_CONSTS] and len(plan[_IDS]) == 2:   # x - y: for an exp
            x, y = plan[_IDS]
            a, b = vr.get(x), vr.get(y)
            self._next += _STEP
            out = vr[plan[_OUT]] = self._next | plan[_DTC]
            if a is not None and b is not None:
                self.diff[out] = (a & _NUM) << _HALF | (b & _NUM)
        elif code == _RECV:         # before the operands: a recv numbers from its source
            src = self._vns[recv_source[0]].get(recv_source[1]) \
                if isinstance(recv_source, tuple) else None
            dt = plan[_DTC]
            if src is None or _UNITS[dt] > _UNITS[src & 3]:
                self._next += _STEP
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
        if code == _EXP and a is not None:
            vr[plan[_OUT]] = self._exp(plan, a)[0]
            return
        dt = plan[_DTC]
        if code == _CAST and a is not None and _UNITS[dt] <= _UNITS[a & 3]:
            vr[plan[_OUT]] = a              # widening or the same dtype: the same number
            return
        self._next += _STEP
        out = self._next | dt
        fields = 0
        if a is not None:
            fields = self._fields(rank, plan, code, out, a, b, mag)
        vr[plan[_OUT]] = out | fields

    def _fields(self, rank: int, plan: Plan, code: int, out: int, a: int, b: int | None,
                mag: float) -> int:
        """The side-table entries of `out` (an identity) and its fields."""
        if code == _CAST:                   # a narrowing
            origin, offset = self.narrow.get(a & _NUM, (a & _NUM, 0.0))
            self.narrow[out] = (origin, offset + half_ulp(_DTYPES[plan[_DTC]], mag))
            return _weight(a)
        if code == _SUB:
            if b is not None:
                self.diff[out] = (a & _NUM) << _HALF | (b & _NUM)
        elif code == _MUL:
            if b is not None:
                return self._product(out, a, b)[1]
        elif code == _ADD:
            if b is not None:
                return self._union(out, a, b)[1]
        elif code == _DIV:
            if a in self._const_numbers and b is not None:
                self.recip[out] = b     # c / X: X's reference point and tilt, inverted
                return _weight(b)
        elif code == _MAX:
            self.maximum_of[out] = (a & _NUM, plan[_AXIS])   # the machine max: exact
        elif code == _LOG:
            ref = self.ref_of(a)
            if ref is not None:
                self.logref[out] = (ref, plan[_BASE2])
        elif code == _KEEP:
            w = next((x for x in self._args(rank, plan) if x is not None and x >> _TK), a)
            return _weight(w)
        return 0

    def _exp(self, plan: Plan, a: int) -> tuple[int, int | None]:
        """The number of an exp's result of argument `a` (a rescale factor if `a` is a
        difference, with the reference point of weights at its minuend), a weight with
        a leaf token (its own); the difference it exponentiates (packed), if it is one."""
        move = self.diff.get(a)
        self._next += _STEP
        if move is not None:
            out = self._next | plan[_DTC] | _RESCALE
            base2 = plan[_BASE2]
            return out | (2 * out + 1) << _TK | (2 * (move & _LOW) + base2 + 1) << _RF | \
                (2 * (move >> _HALF) + base2 + 1) << _RS, move
        out = self._next | plan[_DTC]
        return out | (2 * out + 1) << _TK | (EXACT_REF + 1) << _RF, None


__all__ = ["EXACT_REF", "Numbering", "Plan"]
