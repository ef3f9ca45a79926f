"""Symbolic evaluation of the schedule IR into exact element forms.

Every value of every rank gets a `Value` (layout + exact form) or an `Opaque` result that
says, at the op's line, why its form is outside the algebra. Values are evaluated by
following data dependencies (a recv reads the value of its matching send, a load reads
the harness input or the store it reads back), not program order, so the dataflow of a
schedule that deadlocks is still judged.

Semantics: exact real arithmetic on everything that depends on an input; a value that
depends on no input (a constant, a `full`, a cast of one) is what the machine holds, i.e.
rounded to its dtype, so a factor of 1e-50 in f32 is 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from meshproof.model.channels import ChannelTable
from meshproof.model.problem import Problem
from meshproof.model.schedule import Const, DType, Op, OpKind, Schedule, ValueRef
from meshproof.verify.semantics import algebra as alg
from meshproof.verify.semantics.algebra import NotModelled, Scramble
from meshproof.verify.semantics.dataflow import Dataflow, Key
from meshproof.verify.semantics.events import Departure, Recorder, describe
from meshproof.verify.semantics.index import Aff, DigitSource, Layout, Subst, compose, permute
from meshproof.verify.semantics.layouts import Value, broadcast, buffer, read, separate, view
from meshproof.verify.semantics.order import at_least_one
from meshproof.verify.semantics.scalars import Weight, machine_value
from meshproof.verify.semantics.terms import Input, Poly, Scrambled


@dataclass(frozen=True, slots=True)
class Opaque:
    """A value whose exact form is not known: `reason` in words, at `op` of `rank`."""

    reason: str
    rank: int
    op: Op
    lost: bool = False      # it depends on a message that never arrives


Result = Value | Opaque
UNDERFLOW_WATCH = 2.0 ** -60     # constant factors below this get the underflow check
F16_MAX = 65504.0
F32_TINY = 2.0 ** -149            # the smallest positive f32
LN2 = Fraction(math.log(2.0))

_BINARY: dict[OpKind, Callable[[Poly, Poly], Poly]] = {
    OpKind.ADD: alg.add, OpKind.SUB: alg.sub, OpKind.MUL: alg.mul, OpKind.DIV: alg.div,
    OpKind.MAXIMUM: alg.maximum,
    OpKind.MINIMUM: lambda a, b: alg.maximum(a, b, is_min=True),
}


class Interpreter(Dataflow[Result]):
    def __init__(self, schedule: Schedule, table: ChannelTable, problem: Problem) -> None:
        super().__init__(schedule, table)
        self.problem = problem
        self.src = DigitSource()
        self._buffers: dict[tuple[int, str], Value | None] = {}
        self.rec = Recorder()
        self._op: Op | None = None

    def cycle(self, key: Key) -> Result:
        return Opaque("depends on itself through messages", key[0], self.defining[key])

    # --- one op --------------------------------------------------------------------------
    def evaluate(self, key: Key) -> Result:
        rank = key[0]
        op = self.defining[key]
        self.rec.key, self._op = key, op
        try:
            out = self._transfer(rank, op)
        except NotModelled as exc:
            self.rec.add(Departure.OPAQUE, op, f"line {op.source.line}: tl.{op.kind.value} {exc}")
            return Opaque(str(exc), rank, op)
        if isinstance(out, Value):
            return self._fold(out, op)
        return out

    def _fold(self, value: Value, op: Op) -> Value:
        """A value that depends on no input is what the machine holds in its dtype."""
        c = _constant_value(value.form)
        if c is not None:
            held = machine_value(c, op.dtype)
            exact = value.form.as_const()
            if not isinstance(exact, Fraction) or held != float(exact):
                if c and not held:
                    self.rec.machine_zero(op, c, op.dtype.value)
                if held != held:
                    raise NotModelled("computes nan from constants")
                form = Poly.const(Fraction(held) if abs(held) != float("inf") else held)
                return Value(value.layout, form)
        return value

    def _arg(self, rank: int, a: ValueRef | Const, dtype: DType) -> Result:
        if isinstance(a, Const):
            v = machine_value(a.value, dtype)
            if v != v:
                raise NotModelled("uses a nan constant")
            if a.value and not v and self._op is not None:
                self.rec.machine_zero(self._op, a.value, dtype.value)
            form = Poly.const(Fraction(v) if abs(v) != float("inf") else v)
            return Value(Layout((), ()), form)
        return self.values[(rank, a.id)]

    def _transfer(self, rank: int, op: Op) -> Result:
        k = op.kind
        if k is OpKind.RECV:
            src = self.recv_source(rank, op)
            if isinstance(src, str):
                return Opaque(src, rank, op, lost=True)
            sent = self.values[src]
            if isinstance(sent, Opaque) or sent.layout.shape == op.shape:
                return sent
            if sent.layout.size() != math.prod(op.shape):
                raise NotModelled(f"receives shape {op.shape}, but the message holds "
                                  f"{sent.layout.shape} ({sent.layout.size()} elements)")
            # a message is flat bytes: the receiver reads them in its declared shape
            return view(sent, op.shape, self.src)
        if k is OpKind.LOAD:
            return self._load(rank, op)
        if k is OpKind.FULL:
            assert op.fill is not None
            v = machine_value(op.fill, op.dtype)
            if v != v:
                raise NotModelled("fills a tensor with nan")
            form = Poly.const(Fraction(v) if abs(v) != float("inf") else v)
            return Value(Layout.fresh(op.shape, self.src), form)
        # Python scalars are computed in f32 (the result is then rounded to its dtype)
        args = [self._arg(rank, a, DType.F32) for a in op.args]
        for a in args:
            if isinstance(a, Opaque):
                return a
        vals = [a for a in args if isinstance(a, Value)]
        return self._compute(op, vals)

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
                out = self._dot(vals[0], vals[1], d)
            except Scramble as exc:
                return self._scrambled(op, vals[0], vals[1], str(exc))
            self.rec.produced(op, out.form)
            return out
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
            if kind in (OpKind.MUL, OpKind.DIV):
                out = self._underflow(where, fa, fb, out)
        return Value(layout, out)

    def _underflow(self, op: Op, fa: Poly, fb: Poly, out: Poly) -> Poly:
        """A value scaled by a tiny constant may be below the smallest f32 for every input:
        the machine holds 0 (the harness's inputs are f16 numbers, |x| <= 65504)."""
        from meshproof.verify.semantics.bounds import magnitude

        tiny = [abs(float(c)) for c in (fa.as_const(), fb.as_const())
                if isinstance(c, Fraction) and c]
        if not tiny or min(tiny) >= UNDERFLOW_WATCH or out.is_zero or out.inf:
            return out
        bound = magnitude(out, F16_MAX, self.problem.d_head)
        if bound is not None and bound < F32_TINY:
            self.rec.machine_zero(op, bound, "f32 (for every input: the value is at most "
                                  "that)")
            return alg.ZERO_POLY
        return out

    def _note(self, kind: OpKind, op: Op, fa: Poly, fb: Poly, out: Poly) -> None:
        if kind in (OpKind.ADD, OpKind.SUB):
            self.rec.added(op, fa, fb, out)
        elif kind is OpKind.DIV:
            self.rec.divided(op, fa, fb, out)
        elif kind is OpKind.MUL:
            for this, other, arg in ((fa, fb, 0), (fb, fa, 1)):
                c = other.as_const()
                if isinstance(c, Fraction):
                    src = op.args[arg]
                    received = isinstance(src, ValueRef) and \
                        self.defining[(self.rec.key[0], src.id)].kind is OpKind.RECV
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
        from meshproof.verify.semantics.index import unify_axis

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
        src = self._view_source(rank, op.args[1])
        here = f"line {op.source.line}"
        self.rec.add(Departure.CONTRACTION, op,
                     f"the scores at {here} use a reshape of K (line {src.source.line}), not its "
                     "transpose" if src is not None and "reshaped" in reason else
                     f"the scores at {here} are not q·kᵀ: the dot {reason}")
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

    def _view_source(self, rank: int, arg: ValueRef | Const) -> Op | None:
        """The reshape an operand went through (following trans, cast, recv)."""
        while isinstance(arg, ValueRef):
            op = self.defining.get((rank, arg.id))
            if op is None:
                return None
            if op.kind is OpKind.RESHAPE:
                return op
            if op.kind not in (OpKind.TRANS, OpKind.CAST) or not op.args:
                return None
            arg = op.args[0]
        return None

    # --- memory --------------------------------------------------------------------------
    def input_buffer(self, rank: int, ptr: str) -> Value | None:
        """The harness's content of `ptr` on `rank`, or None if it fills none."""
        if (rank, ptr) in self._buffers:
            return self._buffers[(rank, ptr)]
        p = self.problem
        g = p.group_of[rank]
        value: Value | None = None
        if ptr == "q_ptr" and p.q_base(rank) is not None:
            base = p.q_base(rank) or 0
            value = buffer((p.S_q, p.h_q, p.d_head),
                           lambda c: Poly.atom(Input("Q", g, (c[0].shift(base), c[1], c[2]))),
                           self.src)
        elif ptr in (p.k_ptr, p.v_ptr) and p.kv_base(rank) is not None:
            base = p.kv_base(rank) or 0
            # an empty slice (numeric_safety's --empty-shard) holds no keys: its scores
            # are -inf, which the algebra then follows (max = -inf, exp(-inf - x) = 0)
            name = ("K" if ptr == p.k_ptr else "V") + ("x" if rank in p.empty else "")
            value = buffer((p.S_kv_per_rank, p.h_kv, p.d_head),
                           lambda c: Poly.atom(Input(name, g, (c[0].shift(base), c[1], c[2]))),
                           self.src)
        self._buffers[(rank, ptr)] = value
        return value

    def _load(self, rank: int, op: Op) -> Result:
        assert op.ptr is not None
        source = self.rank_memory(rank).loads.get(op.index)
        if source is not None:
            if len(source.writers) != 1 or source.uncovered:
                raise NotModelled(f"reads {op.ptr} elements written by several stores (or "
                                  "partly by none): reload exactly what one store wrote")
            store = source.writers[0]
            stored = self.values[(rank, store.value_args[0])]
            if isinstance(stored, Opaque):
                return stored
            return read(stored, op.offset - store.offset, op.shape, self.src)
        buf = self.input_buffer(rank, op.ptr)
        if buf is None:
            raise NotModelled(f"loads {op.ptr}, which the harness does not fill on this rank "
                              "(and the rank has not stored there before)")
        return read(buf, op.offset, op.shape, self.src)


def _product_bound(a: Value, b: Value) -> float | None:
    """|dot(a, b)| for inputs bounded by 1, when both are linear in Q/K/V elements."""
    total = float(a.layout.shape[-1]) if a.layout.shape else 1.0
    for v in (a, b):
        lin = v.form.as_lin()
        if lin is None or not all(isinstance(x, Input) for x, _ in lin.coeffs):
            return None
        total *= abs(float(lin.const)) + sum(abs(float(c)) for _, c in lin.coeffs)
    return total


def _constant_value(form: Poly) -> float | None:
    """The value of a form that depends on no input (also exp or log of constants, whose
    weight has an exponential part), as a float; None if it depends on an input."""
    if form.inf:
        return None
    if not form.terms:
        return 0.0
    if len(form.terms) != 1:
        return None
    body, w = form.terms[0]
    if body.expo or body.factors or not isinstance(w, Weight):
        return None
    with np.errstate(over="ignore"):
        return w.value()


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
    from meshproof.verify.semantics.index import flat_slice, regroup

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


__all__ = ["Interpreter", "Opaque", "Result", "Subst", "Value", "output_coords"]
