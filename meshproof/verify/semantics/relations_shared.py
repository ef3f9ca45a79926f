"""Value numbers shared between ranks that trace alike (relations.py): the hot path.

A rank holds per value id an absolute number `owner << SHIFT | relative number` (its dtype
in the low two bits). The relation of an op and its result's relative number are memoised
per (op, its operands' numbers in the rank's frame, and what else the rules read that is
not a function of those: a narrowing's magnitude, whether a union's operands are exactly
0, whether an exp's subtrahend is the row max of its minuend); a miss runs
relations_frame.py's rules once. Equal absolute numbers are the same machine number:
a result's owner is the rank that computes it, and one op object runs at most once per
rank (its index is its place in the rank's program).
"""

from __future__ import annotations

from collections import defaultdict

from meshproof.model.evaluate import Key, Lost
from meshproof.model.schedule import Const, Op, OpKind, ValueRef
from meshproof.verify.semantics.relations_frame import DT, LOW, SHIFT, UNITS, FrameRules
from meshproof.verify.semantics.relations_kinds import NONE, Related

_CODES = {OpKind.RECV: "recv", OpKind.RESHAPE: "view", OpKind.TRANS: "view",
          OpKind.CAST: "cast", OpKind.SUB: "sub", OpKind.EXP: "exp", OpKind.EXP2: "exp",
          OpKind.MUL: "mul", OpKind.ADD: "add", OpKind.DIV: "div", OpKind.MAX: "max",
          OpKind.LOG: "log", OpKind.LOG2: "log", OpKind.SUM: "keep", OpKind.DOT: "keep",
          OpKind.NEG: "keep"}
_RELATED = frozenset(("mul", "add", "div"))
# per op object: (op, code, out, operand ids (-1: a constant), constants' (position,
# descriptor), dtype code, exp/log base flag, axis, keys)
Plan = tuple[Op, str, int, tuple[int, ...], tuple[tuple[int, tuple[str, float]], ...], int,
             int, int, int]


class ValueNumbers:
    """Per (rank, value id) its absolute number; the relations of an op's operands."""

    def __init__(self) -> None:
        self._vns: defaultdict[int, dict[int, int]] = defaultdict(dict)
        self.rules = FrameRules()
        self._memo: dict[tuple[object, ...], tuple[Related, int]] = {}
        self._plans: dict[int, Plan] = {}
        self.zero: set[int] = set()                       # absolute numbers exactly 0
        self.maximum_of: dict[int, tuple[object, int]] = {}   # max(x, axis) -> (x, axis)
        self._done_op: Op | None = None
        self._done_rank = -1

    def _plan(self, op: Op) -> Plan:
        code = "noout" if op.out is None else _CODES.get(op.kind, "fresh")
        if code in _RELATED and len(op.args) != 2:
            code = "fresh"
        if code == "max" and (not op.keepdims or op.axis is None):
            code = "fresh"
        ids = tuple(a.id if type(a) is ValueRef else -1 for a in op.args)
        consts = tuple((i, ("c", a.value)) for i, a in enumerate(op.args)
                       if isinstance(a, Const))
        base2 = int(op.kind in (OpKind.EXP2, OpKind.LOG2))
        axis = (op.axis or 0) if code == "max" else len(op.shape) - 1
        keys = op.shape[-1] if op.shape else 0
        plan = self._plans[id(op)] = (op, code, op.out or 0, ids, consts, DT[op.dtype],
                                      base2, axis, keys)
        return plan

    def _args(self, vr: dict[int, int], base: int, plan: Plan) -> list[object]:
        """The operands in the frame `base`."""
        out: list[object] = []
        for i in plan[3]:
            h = vr.get(i)
            out.append(None if h is None else h - base)
        for i, c in plan[4]:
            out[i] = c
        return out

    def dtype_of(self, rank: int, vid: int) -> object:
        from meshproof.verify.semantics.relations_frame import _DTYPES
        n = self._vns[rank].get(vid)
        return None if n is None else _DTYPES[n & 3]

    def related(self, rank: int, op: Op) -> Related:
        """The relation of op's operands; and op's result numbered already (note() is
        called next for the same op and rank, and then has nothing left to do)."""
        plan = self._plans.get(id(op))
        if plan is None or plan[0] is not op:
            plan = self._plan(op)
        code = plan[1]
        if code != "exp" and code not in _RELATED:
            return NONE
        vr = self._vns[rank]
        base = rank << SHIFT
        if plan[4] or len(plan[3]) != (1 if code == "exp" else 2):
            args = self._args(vr, base, plan)
            a, b = args[0], (args[1] if len(args) > 1 else None)
        else:
            ha = vr.get(plan[3][0])
            a = None if ha is None else ha - base
            if code == "exp":
                b = None
            else:
                hb = vr.get(plan[3][1])
                b = None if hb is None else hb - base
        if code == "exp":
            key: tuple[object, ...] = (id(op), a, self._maxed(plan, a, base))
        elif code == "add":
            zero = self.zero
            key = (id(op), a, b, type(a) is int and a + base in zero,
                   type(b) is int and b + base in zero)
        else:
            key = (id(op), a, b)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = self._miss(plan, key, a, b)
        vr[plan[2]] = base + hit[1]
        self._done_op, self._done_rank = op, rank
        return hit[0]

    def _maxed(self, plan: Plan, a: object, base: int) -> int:
        """The keys of exp(x - max(x)) over the kept last axis (its max key's argument is
        exactly 0: rule E), else 0; the max is an absolute fact (a view forgets it)."""
        if not self.maximum_of:
            return 0
        move = self.rules.difference(a)
        if move is None or type(move[1]) is not int:
            return 0
        mx = self.maximum_of.get(move[1] + base)
        x = move[0] + base if type(move[0]) is int else move[0]
        return plan[8] if mx is not None and mx[0] == x and mx[1] == plan[7] else 0

    def _miss(self, plan: Plan, key: tuple[object, ...], a: object, b: object
              ) -> tuple[Related, int]:
        rules = self.rules
        out = rules.fresh(plan[5])
        if plan[1] == "exp":
            return rules.exp(out, a, plan[6], key[2]), out   # type: ignore[arg-type]
        za, zb = (key[3], key[4]) if plan[1] == "add" else (False, False)
        return rules.related(plan[1], out, a, b, za, zb), out   # type: ignore[arg-type]

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
        if plan is None or plan[0] is not op:
            plan = self._plan(op)
        code = plan[1]
        if code == "noout":
            return
        if code == "exp" or code in _RELATED:
            self.related(rank, op)
            self._done_op = None
        else:
            self._note(rank, op, plan, code, mag, recv_source)
        if zero:
            self.zero.add(self._vns[rank][plan[2]])

    def _note(self, rank: int, op: Op, plan: Plan, code: str, mag: float,
              recv_source: Key | Lost | None) -> None:
        vr = self._vns[rank]
        base = rank << SHIFT
        if code == "recv":          # before the operands: a recv numbers from its source
            src = self._vns[recv_source[0]].get(recv_source[1]) \
                if isinstance(recv_source, tuple) else None
            if src is not None and UNITS[plan[5]] <= UNITS[src & 3]:
                vr[plan[2]] = src
                return
            args: list[object] = []
        elif code == "fresh":
            args = []
        else:
            args = self._args(vr, base, plan)
        a = args[0] if args else None
        if a is not None and type(a) is int:
            if code == "view":
                h = vr[plan[2]] = a + base
                if h in self.maximum_of:   # a view may move the max's axis: no rule E
                    del self.maximum_of[h]
                return
            if code == "cast" and UNITS[plan[5]] <= UNITS[a & 3]:
                vr[plan[2]] = a + base     # widening or the same dtype: the same number
                return
        key = (id(op), *args, mag if code == "cast" else 0.0)
        hit = self._memo.get(key)
        if hit is None:
            out = self.rules.fresh(plan[5])
            self.rules.other(code, out, tuple(args), plan[6], mag, plan[5])  # type: ignore[arg-type]
            hit = self._memo[key] = (NONE, out)
        h = vr[plan[2]] = base + hit[1]
        if code == "max" and a is not None:
            self.maximum_of[h] = (a + base if type(a) is int else a, plan[7])


__all__ = ["LOW", "ValueNumbers"]
