"""The transfer of one op: operand values (layout + exact form) to the result's value.

Semantics: exact real arithmetic on everything that depends on an input; a value that
depends on no input (a constant, a `full`, a cast of one) is what the machine holds, i.e.
rounded to its dtype, so a factor of 1e-50 in f32 is 0. Every rule is in `algebra.py`;
this module lines up layouts, records departure events (events.py) and says, with
`NotModelled`, when a result leaves the algebra. The interpreter (interp.py) decides
which values to evaluate and reuses results.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from meshproof.model.problem import Problem
from meshproof.model.schedule import Const, DType, Op, OpKind, Schedule, ValueRef
from meshproof.verify.semantics import algebra as alg
from meshproof.verify.semantics.algebra import NotModelled, Scramble
from meshproof.verify.semantics.events import Departure, Recorder, describe
from meshproof.verify.semantics.index import (
    Aff,
    DigitSource,
    Layout,
    compose,
    flat_slice,
    permute,
    regroup,
    unify_axis,
)
from meshproof.verify.semantics.layouts import Value, broadcast, buffer, separate, view
from meshproof.verify.semantics.order import at_least_one
from meshproof.verify.semantics.scalars import machine_value
from meshproof.verify.semantics.terms import Input, Poly, Scrambled


@dataclass(frozen=True, slots=True)
class Opaque:
    """A value whose exact form is not known: `reason` in words, at `op` of `rank`."""

    reason: str
    rank: int
    op: Op
    lost: bool = False      # it depends on a message that never arrives


Result = Value | Opaque
LN2 = Fraction(math.log(2.0))

_BINARY: dict[OpKind, Callable[[Poly, Poly], Poly]] = {
    OpKind.ADD: alg.add, OpKind.SUB: alg.sub, OpKind.MUL: alg.mul, OpKind.DIV: alg.div,
    OpKind.MAXIMUM: alg.maximum,
    OpKind.MINIMUM: lambda a, b: alg.maximum(a, b, is_min=True),
}


class Transfer:
    """The per-op rules. `rec.key` is the value being defined, `received` whether each
    operand of the op comes straight from a recv (a weight on a received partial is
    named so), `rank_specific` set when the result names its rank (a scrambled dot)."""

    def __init__(self, schedule: Schedule, problem: Problem, src: DigitSource) -> None:
        self.schedule = schedule
        self.problem = problem
        self.src = src
        self.rec = Recorder()
        self._op: Op | None = None
        self.received: tuple[bool, ...] = ()
        self.rank_specific = False

    def const_value(self, a: Const, dtype: DType = DType.F32) -> Value:
        """A Python scalar operand: computed in f32 (the result is then rounded to its
        dtype)."""
        v = machine_value(a.value, dtype)
        if v != v:
            raise NotModelled("uses a nan constant")
        if a.value and not v and self._op is not None:
            self.rec.machine_zero(self._op, a.value, dtype.value)
        form = Poly.const(Fraction(v) if abs(v) != float("inf") else v)
        return Value(Layout((), ()), form)

    def full(self, op: Op) -> Value:
        assert op.fill is not None
        v = machine_value(op.fill, op.dtype)
        if v != v:
            raise NotModelled("fills a tensor with nan")
        form = Poly.const(Fraction(v) if abs(v) != float("inf") else v)
        return Value(Layout.fresh(op.shape, self.src), form)

    def view_source(self, rank: int, arg: ValueRef | Const) -> Op | None:
        raise NotImplementedError

    def _fold(self, value: Value, op: Op) -> Value:
        """A value that depends on no input is what the machine holds in its dtype."""
        c = value.form.as_const()
        if isinstance(c, Fraction):
            held = machine_value(float(c), op.dtype)
            if held != float(c):
                if c and not held:
                    self.rec.machine_zero(op, float(c), op.dtype.value)
                form = Poly.const(Fraction(held) if abs(held) != float("inf") else held)
                return Value(value.layout, form)
        return value

    def _compute(self, op: Op, vals: list[Value]) -> Value:
        k = op.kind
        d = self.problem.d_head
        if k in (OpKind.CAST, OpKind.STORE, OpKind.SEND):
            return vals[0]
        if k is OpKind.RESHAPE:
            return view(vals[0], op.shape, self.src)
        if k is OpKind.TRANS:
            assert op.perm is not None
            return Value(permute(vals[0].layout, op.perm), vals[0].form)
        if k is OpKind.NEG:
            return Value(vals[0].layout, alg.neg(vals[0].form))
        if k is OpKind.EXP:
            self.rec.exponent(op, vals[0].form)
            return Value(vals[0].layout, alg.exp(vals[0].form))
        if k is OpKind.EXP2:  # exp2(x) = exp(x ln 2), ln 2 as the nearest double
            arg = alg.scale(vals[0].form, LN2)
            self.rec.exponent(op, arg)
            return Value(vals[0].layout, alg.exp(arg))
        if k is OpKind.LOG:
            return Value(vals[0].layout, alg.log(vals[0].form))
        if k in (OpKind.MAX, OpKind.SUM):
            assert op.axis is not None
            return self._reduce(vals[0], op.axis, op.keepdims, k)
        if k is OpKind.SOFTMAX:
            assert op.axis is not None
            x = vals[0]
            m = self._reduce(x, op.axis, True, OpKind.MAX)
            e = self._binary(OpKind.SUB, x, m)
            self.rec.exponent(op, e.form)
            e = Value(e.layout, alg.exp(e.form))
            z = self._reduce(e, op.axis, True, OpKind.SUM)
            return self._binary(OpKind.DIV, e, z)
        if k is OpKind.DOT:
            try:
                return self._dot(vals[0], vals[1], d)
            except Scramble as exc:
                return self._scrambled(op, vals[0], vals[1], str(exc))
        if k in _BINARY:
            return self._binary(k, vals[0], vals[1], op)
        raise NotModelled(f"{k.value} is not modelled by the attention algebra")

    def _binary(self, kind: OpKind, a: Value, b: Value, op: Op | None = None) -> Value:
        b = separate(a.layout, b, self.src)
        layout, sa, sb = broadcast(a.layout, b.layout, self.src)
        fa, fb = a.form.subst(sa), b.form.subst(sb)
        if kind is OpKind.MAXIMUM:
            guarded = _guard(fa, fb) or _guard(fb, fa)
            if guarded is not None:
                return Value(layout, guarded)
        try:
            out = _BINARY[kind](fa, fb)
        except NotModelled as exc:
            if kind in (OpKind.MAXIMUM, OpKind.MINIMUM):
                raise NotModelled(f"of {describe(fa)} and {describe(fb)}: {exc}") from None
            raise
        where = op or self._op
        if where is not None:
            self._note(kind, where, fa, fb, out)
        return Value(layout, out)

    def _note(self, kind: OpKind, op: Op, fa: Poly, fb: Poly, out: Poly) -> None:
        if kind in (OpKind.ADD, OpKind.SUB):
            self.rec.added(op, fa, fb, out)
        elif kind is OpKind.DIV:
            self.rec.divided(op, fa, out)
        elif kind is OpKind.MUL:
            for this, other, arg in ((fa, fb, 0), (fb, fa, 1)):
                c = other.as_const()
                if isinstance(c, Fraction):
                    received = self.received[arg] if arg < len(self.received) else False
                    self.rec.weighted(op, float(c), this, received)

    def _reduce(self, x: Value, axis: int, keepdims: bool, kind: OpKind) -> Value:
        over = {dg.id: dg.size for dg in x.layout.axes[axis]}
        if kind is OpKind.SUM:
            form = alg.sum_over(x.form, over, self.problem.d_head)
        else:
            form = alg.max_over(x.form, over)
        axes = list(x.layout.axes)
        shape = list(x.layout.shape)
        if keepdims:
            axes[axis], shape[axis] = (), 1
        else:
            del axes[axis]
            del shape[axis]
        return Value(Layout(tuple(axes), tuple(shape)), form)

    def _dot(self, a: Value, b: Value, features: int) -> Value:
        b = separate(a.layout, b, self.src, always=True)
        la, lb = a.layout, b.layout
        if _empty_keys(a.form) or _empty_keys(b.form):
            return Value(Layout.fresh((*la.shape[:-1], lb.shape[-1]), self.src), alg.NEG_INF)
        batch, sa, sb = broadcast(Layout(la.axes[:-2], la.shape[:-2]),
                                  Layout(lb.axes[:-2], lb.shape[:-2]), self.src)
        ka, kb = la.axes[-1], lb.axes[-2]
        over: dict[int, int] = {}
        if ka or kb:
            unified = unify_axis(ka, kb, self.src)
            if unified is None:
                raise NotModelled("contracts axes whose factors do not line up")
            common, ua, ub = unified
            sa, sb = compose(sa, ua) if ua else sa, compose(sb, ub) if ub else sb
            over = {dg.id: dg.size for dg in common}
        prod = alg.mul(a.form.subst(sa), b.form.subst(sb))
        form = alg.sum_over(prod, over, features)
        layout = Layout((*batch.axes, la.axes[-2], lb.axes[-1]),
                        (*batch.shape, la.shape[-2], lb.shape[-1]))
        return Value(layout, form)

    def _scrambled(self, op: Op, a: Value, b: Value, reason: str) -> Value:
        """A wrong contraction becomes a fresh score-like symbol indexed by the result's
        axes (its last axis plays the key rows), so the rest is still judged."""
        rank = self.rec.key[0]
        self.rank_specific = True   # the fresh symbol is named after this rank
        src = self.view_source(rank, op.args[1])
        cause = f" (K comes from the reshape at {src.source}, not a transpose)" if src else ""
        self.rec.add(Departure.CONTRACTION, op,
                     f"the scores at {op.source} are not q·kᵀ: the dot {reason}{cause}")
        layout = Layout.fresh((*a.layout.shape[:-1], b.layout.shape[-1]), self.src)
        axes = layout.axes
        row = Aff(0)
        stride = 1
        for dg in reversed(axes[-1]):
            row = row + Aff.digit(dg.id, stride)
            stride *= dg.size
        others = tuple(Aff.digit(dg.id) for axis in axes[:-1] for dg in axis)
        label = f"{op.source}@{self.schedule.programs[rank].endpoint.label}"
        return Value(layout, Poly.atom(Scrambled(label, row, others,
                                                 _product_bound(a, b))))

def _product_bound(a: Value, b: Value) -> float | None:
    """|dot(a, b)| for inputs bounded by 1, when both are linear in Q/K/V elements."""
    total = float(a.layout.shape[-1]) if a.layout.shape else 1.0
    for v in (a, b):
        lin = v.form.as_lin()
        if lin is None or not all(isinstance(x, Input) for x, _ in lin.coeffs):
            return None
        total *= abs(float(lin.const)) + sum(abs(float(c)) for _, c in lin.coeffs)
    return total


def _empty_keys(form: Poly) -> bool:
    return any(isinstance(a, Input) and a.tensor == "Kx" for a in form.atoms())


def _guard(x: Poly, floor: Poly) -> Poly | None:
    """maximum(x, c) is x when x is a positive sum provably >= c (ℓ >= 1 >= eps)."""
    c = floor.as_const()
    if not isinstance(c, Fraction) or x.as_lin() is not None or not alg.positive(x):
        return None
    if c <= 0 or (c <= 1 and at_least_one(x)):
        return x
    return None


def output_coords(problem: Problem, rank: int, offset: int, shape: tuple[int, ...],
                  src: DigitSource) -> tuple[Layout, tuple[Aff, Aff, Aff]] | str:
    """For a store of `shape` at `offset` into an output buffer of `rank`: a layout of
    `shape` and the (query row, q head, feature) each of its elements lands on."""
    base = problem.q_base(rank)
    if base is None:
        return "stores an output on a rank that holds no query rows"
    coords: dict[str, tuple[Aff, Aff, Aff]] = {}

    def make(c: tuple[Aff, ...]) -> Poly:
        coords["c"] = (c[0].shift(base), c[1], c[2])
        return Poly.const(Fraction(0))

    out = buffer((problem.S_q, problem.h_q, problem.d_head), make, src)
    layout = out.layout
    total = layout.size()
    count = 1
    for n in shape:
        count *= n
    if offset + count > total:
        return f"stores beyond the end of the output ({offset + count} > {total} elements)"
    c3 = coords["c"]
    if not (offset == 0 and count == total):
        box = flat_slice(layout, offset, count, src)
        if box is None:
            return "stores elements that straddle rows of the output"
        flat = box.flat
        c3 = tuple(a.substitute(box.subst) for a in c3)  # type: ignore[assignment]
    else:
        flat = layout.flat()
    regrouped = regroup(flat, shape, src)
    if regrouped is None:
        return f"stores a {shape} value into the output in an order that mixes indices"
    new_layout, s = regrouped
    return new_layout, tuple(a.substitute(s) for a in c3)  # type: ignore[return-value]


__all__ = ["LN2", "Opaque", "Result", "Transfer", "output_coords"]
