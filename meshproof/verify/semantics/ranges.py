"""The interval domain: per value, an interval [lo, hi] holding every element for every
input with |x| <= B.

Two sound enclosures are intersected: what the value's exact form shows (bounds.py: a
convex combination of V rows is within [-B, B], a softmax weight within [0, 1], a log-sum-
exp within its scores' range) and interval arithmetic on the operands' intervals (|a·b| <=
|a|·|b|, a sum of n values of [lo, hi] is within [n·lo, n·hi], exp is monotone). The form
knows correlations the operands have lost (o / ℓ), the operands know facts the normal form
has cancelled away (a reference point that keeps every weight <= 1 on the way).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from meshproof.model.evaluate import Binary, Compare, Lost, Reduction, Reload, Unary
from meshproof.model.schedule import Op, ValueRef
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.bounds import lin_interval, magnitude
from meshproof.verify.semantics.domination import nonpositive
from meshproof.verify.semantics.order import lower_bound
from meshproof.verify.semantics.rational import Rat, sign
from meshproof.verify.semantics.readers import FormReader
from meshproof.verify.semantics.strided import expand_form
from meshproof.verify.semantics.symbolic_core import Opaque

Interval = tuple[float, float]
INF = math.inf
UNBOUNDED: Interval = (-INF, INF)


def _exp(x: float) -> float:
    if x > 700:
        return INF
    return math.exp(x) if x > -INF else 0.0


def _log(x: float) -> float:
    return math.log(x) if x > 0 else -INF


def _mul(a: Interval, b: Interval) -> Interval:
    products = [x * y for x in a for y in b if not ((math.isinf(x) and y == 0) or
                                                     (math.isinf(y) and x == 0))]
    if len(products) < 4:
        products.append(0.0)
    return min(products), max(products)


def _div(a: Interval, b: Interval) -> Interval:
    if b[0] > 0 or b[1] < 0:
        inv = (1 / b[1], 1 / b[0])
        return _mul(a, (min(inv), max(inv)))
    return UNBOUNDED


def _meet(a: Interval, b: Interval) -> Interval:
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo <= hi else a


_BINARY_IV: dict[Binary, Callable[[Interval, Interval], Interval]] = {
    Binary.ADD: lambda x, y: (x[0] + y[0], x[1] + y[1]),
    Binary.SUB: lambda x, y: (x[0] - y[1], x[1] - y[0]),
    Binary.MUL: _mul, Binary.DIV: _div,
    Binary.MAXIMUM: lambda x, y: (max(x[0], y[0]), max(x[1], y[1])),
    Binary.MINIMUM: lambda x, y: (min(x[0], y[0]), min(x[1], y[1])),
}


def form_interval(form: Rat, b: float, d: int, sizes: dict[int, int]) -> Interval:
    """What the exact form shows about its range."""
    if form.inf:
        v = INF if form.inf > 0 else -INF
        return v, v
    form = expand_form(form)     # strided sums read as their pieces (an identity)
    lin = form.as_lin()
    if lin is not None:
        iv = lin_interval(lin, b, d)
        lo, hi = UNBOUNDED if iv is None else iv
        if hi > 0 and nonpositive(lin, sizes):
            hi = 0.0      # a value minus a max over a set holding it (max-domination)
        return lo, hi
    mag = magnitude(form, b, d, sizes=sizes)
    hi = INF if mag is None else mag
    if sign(form) > 0:
        def low_of(member: Lin) -> float | None:
            iv = lin_interval(member, b, d)
            return None if iv is None else iv[0]
        low = lower_bound(form, low_of) if not form.den else 0.0
        return low, hi
    return -hi, hi


class Ranges:
    """An OpSemantics over the symbolic evaluation: intervals per value."""

    def __init__(self, symbolic: FormReader, input_bound: float, d_head: int) -> None:
        self.sym = symbolic
        self.b = input_bound
        self.d = d_head
        self._forms: dict[int, Interval] = {}

    def _form(self, rank: int, op: Op) -> Interval:
        cid = self.sym.cid_of((rank, op.out)) if op.out is not None else None
        if cid is None:
            return UNBOUNDED
        hit = self._forms.get(cid)
        if hit is None:   # a function of the canonical value: one per cid, for every rank
            res = self.sym.by_cid(cid)
            sizes = {dg.id: dg.size for dg in res.layout.digits}
            hit = self._forms[cid] = form_interval(res.form, self.b, self.d, sizes)
        return hit

    def _out(self, rank: int, op: Op, iv: Interval) -> Interval:
        return _meet(self._form(rank, op), iv)

    # --- OpSemantics -----------------------------------------------------------------------
    def const(self, rank: int, op: Op, value: float) -> Interval:
        return value, value

    def cycle(self, rank: int, op: Op) -> Interval:
        return UNBOUNDED

    def recv(self, rank: int, op: Op, sent: Interval | Lost) -> Interval:
        return self._out(rank, op, UNBOUNDED if isinstance(sent, Lost) else sent)

    def load(self, rank: int, op: Op, reload: Reload[Interval] | None) -> Interval:
        if reload is None:
            return self._out(rank, op, (-self.b, self.b))
        lo = min(iv[0] for _, iv in reload.stores)
        hi = max(iv[1] for _, iv in reload.stores)
        if reload.uncovered:
            lo, hi = min(lo, -self.b), max(hi, self.b)
        return self._out(rank, op, (lo, hi))

    def full(self, rank: int, op: Op) -> Interval:
        v = op.fill if op.fill is not None else 0.0
        return v, v

    def cast(self, rank: int, op: Op, x: Interval) -> Interval:
        return self._out(rank, op, x)

    def reshape(self, rank: int, op: Op, x: Interval) -> Interval:
        return self._out(rank, op, x)

    def trans(self, rank: int, op: Op, x: Interval) -> Interval:
        return self._out(rank, op, x)

    def unary(self, rank: int, op: Op, fn: Unary, x: Interval) -> Interval:
        lo, hi = x
        match fn:
            case Unary.EXP:
                iv = (_exp(lo), _exp(hi))
            case Unary.EXP2:
                iv = (_exp(lo * math.log(2)), _exp(hi * math.log(2)))
            case Unary.LOG:
                iv = (_log(lo), _log(hi))
            case Unary.LOG2:
                iv = (_log(lo) / math.log(2), _log(hi) / math.log(2))
            case Unary.LOG1P:
                iv = (_log(1 + lo), _log(1 + hi))
            case Unary.SIGMOID:
                iv = (0.0, 1.0)
            case Unary.NEG:
                iv = (-hi, -lo)
        return self._out(rank, op, iv)

    def binary(self, rank: int, op: Op, fn: Binary, a: Interval, b: Interval) -> Interval:
        try:
            iv = _BINARY_IV[fn](a, b)
        except (ArithmeticError, ValueError):
            iv = UNBOUNDED
        if any(math.isnan(v) for v in iv):
            iv = UNBOUNDED
        return self._out(rank, op, iv)

    def _axis(self, rank: int, op: Op) -> int:
        arg = op.args[0]
        res = self.sym.canonical((rank, arg.id)) if isinstance(arg, ValueRef) else None
        if res is None or isinstance(res, Opaque) or op.axis is None:
            return 1
        return res.layout.shape[op.axis]

    def reduce(self, rank: int, op: Op, fn: Reduction, x: Interval) -> Interval:
        if fn is Reduction.MAX:
            return self._out(rank, op, x)
        n = self._axis(rank, op)
        return self._out(rank, op, (n * x[0], n * x[1]))

    def arange(self, rank: int, op: Op) -> Interval:
        lo = op.fill if op.fill is not None else 0.0
        return lo, lo + op.shape[0] - 1

    def compare(self, rank: int, op: Op, fn: Compare, a: Interval, b: Interval) -> Interval:
        return 0.0, 1.0

    def where(self, rank: int, op: Op, cond: Interval, a: Interval, b: Interval
              ) -> Interval:
        return self._out(rank, op, (min(a[0], b[0]), max(a[1], b[1])))

    def dot(self, rank: int, op: Op, a: Interval, b: Interval) -> Interval:
        arg = op.args[0]
        res = self.sym.canonical((rank, arg.id)) if isinstance(arg, ValueRef) else None
        n = res.layout.shape[-1] if res is not None and not isinstance(res, Opaque) and \
            res.layout.shape else 1
        lo, hi = _mul(a, b)
        return self._out(rank, op, (n * lo, n * hi))

