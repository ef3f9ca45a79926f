"""The symbolic domain: every value of every rank as its exact normal form.

An `OpSemantics` of model/evaluate.py. Every value gets a `Value` (layout + exact form,
rational.py) or an `Opaque` result that says, at the op's line, why its form is outside the
algebra (or that it is undefined: 0/0, inf - inf, log 0). Semantics: exact real arithmetic
on everything that depends on an input; a value that depends on no input (a constant, a
`full`, a cast of one) is what the machine holds, i.e. rounded to its dtype, so a factor of
1e-50 in f32 is 0.

This module holds the rules of loads, views, reductions, masks and dots; the frame (the
guard around every op, the harness's inputs) is symbolic_core.py and the unary and binary
arithmetic symbolic_arith.py.
"""

from __future__ import annotations

import math

from meshproof.model.op_semantics import Compare, Lost, Reduction, Reload
from meshproof.model.schedule import DType, Op
from meshproof.verify.semantics import masks as M
from meshproof.verify.semantics import rational as R
from meshproof.verify.semantics.events import Departure
from meshproof.verify.semantics.index import Aff, Layout, Subst, compose, permute, unify_axis
from meshproof.verify.semantics.layouts import Value, broadcast, read, separate, view
from meshproof.verify.semantics.rat import NEG_INF, Rat
from meshproof.verify.semantics.reasons import NotModelled, Scramble, Undefined, UndefinedKind
from meshproof.verify.semantics.reduce import max_over, sum_over
from meshproof.verify.semantics.scalars import machine_value
from meshproof.verify.semantics.symbolic_arith import SymbolicArithmetic
from meshproof.verify.semantics.symbolic_core import SCALAR, Opaque, Result, _const
from meshproof.verify.semantics.tensor_atoms import Input, Scrambled


def mask_reason(op: Op) -> str:
    """Why a value of a mask op has no form (the reason the semantic verdicts give)."""
    return (f"masks (tl.{op.kind.value} at {op.source}) are not modelled yet: "
            "spec/semantics.md §8")


class Symbolic(SymbolicArithmetic):
    """The exact-form domain of one schedule and attention problem."""

    # --- OpSemantics -----------------------------------------------------------------------
    def const(self, rank: int, op: Op, value: float) -> Result:
        # Python scalars are computed in f32 (the result is then rounded to its dtype)
        v = machine_value(value, DType.F32)
        self.rec.key = (rank, op.out if op.out is not None else -1)
        if v != v:
            return Opaque("uses a nan constant", rank, op, undefined=UndefinedKind.NAN_CONSTANT)
        if value and not v:
            self.rec.machine_zero(op, value, DType.F32.value)
        return Value(SCALAR, _const(v))

    def cycle(self, rank: int, op: Op) -> Result:
        return Opaque("depends on itself through messages", rank, op)

    def recv(self, rank: int, op: Op, sent: Result | Lost) -> Result:
        if isinstance(sent, Lost):
            return Opaque(sent.reason, rank, op, lost=True)
        if isinstance(sent, Opaque) or sent.layout.shape == op.shape:
            return sent

        def reshaped() -> Result:
            assert isinstance(sent, Value)
            if sent.layout.size() != math.prod(op.shape):
                raise NotModelled(f"receives shape {op.shape}, but the message holds "
                                  f"{sent.layout.shape} ({sent.layout.size()} elements)")
            # a message is flat bytes: the receiver reads them in its declared shape
            return view(sent, op.shape, self.src)
        return self._run(rank, op, reshaped)

    def load(self, rank: int, op: Op, reload: Reload[Result] | None) -> Result:
        return self._run(rank, op, lambda: self._load(rank, op, reload))

    def _load(self, rank: int, op: Op, reload: Reload[Result] | None) -> Result:
        if reload is not None:
            if len(reload.stores) != 1 or reload.uncovered:
                raise NotModelled(f"reads {op.ptr} elements written by several stores (or "
                                  "partly by none): reload exactly what one store wrote")
            store, stored = reload.stores[0]
            if isinstance(stored, Opaque):
                return stored
            return read(stored, op.offset - store.offset, op.shape, self.src)
        assert op.ptr is not None
        buf = self.input_buffer(rank, op.ptr)
        if buf is None:
            raise NotModelled(f"loads {op.ptr}, which the harness does not fill on this rank "
                              "(and the rank has not stored there before)")
        return read(buf, op.offset, op.shape, self.src)

    def full(self, rank: int, op: Op) -> Result:
        def fill() -> Result:
            assert op.fill is not None
            v = machine_value(op.fill, op.dtype)
            if v != v:
                raise Undefined(UndefinedKind.NAN_CONSTANT, "fills a tensor with nan")
            return Value(Layout.fresh(op.shape, self.src), _const(v))
        return self._run(rank, op, fill)

    def cast(self, rank: int, op: Op, x: Result) -> Result:
        return x if isinstance(x, Opaque) else self._run(rank, op, lambda: x)

    def reshape(self, rank: int, op: Op, x: Result) -> Result:
        if isinstance(x, Opaque):
            return x
        return self._run(rank, op, lambda: view(x, op.shape, self.src))

    def view_slice(self, rank: int, op: Op, x: Result) -> Result:
        # exactly x's elements [offset, offset + n): read as a load reads a buffer (the
        # digits the run does not cover become constants)
        if isinstance(x, Opaque):
            return x
        return self._run(rank, op, lambda: read(x, op.offset, op.shape, self.src))

    def trans(self, rank: int, op: Op, x: Result) -> Result:
        if isinstance(x, Opaque):
            return x
        assert op.perm is not None
        perm = op.perm
        return self._run(rank, op, lambda: Value(permute(x.layout, perm), x.form))

    def reduce(self, rank: int, op: Op, fn: Reduction, x: Result) -> Result:
        if isinstance(x, Opaque):
            return x
        assert op.axis is not None
        axis = op.axis
        return self._run(rank, op, lambda: self._reduce(x, axis, op.keepdims, fn))

    def _reduce(self, x: Value, axis: int, keepdims: bool, fn: Reduction) -> Value:
        over = {dg.id: dg.size for dg in x.layout.axes[axis]}
        if fn is Reduction.SUM:
            form = sum_over(x.form, over, self.problem.d_head,
                            {dg.id: dg.size for dg in x.layout.digits})
        else:
            form = max_over(x.form, over)
        axes = list(x.layout.axes)
        shape = list(x.layout.shape)
        if keepdims:
            axes[axis], shape[axis] = (), 1
        else:
            del axes[axis]
            del shape[axis]
        return Value(Layout(tuple(axes), tuple(shape)), form)

    # masks (spec/semantics.md §8): positions are Idx atoms, comparisons guards (Ind),
    # tl.where(mask, s, -inf) the penalty s + Pen(G); masks.py holds the rules
    def arange(self, rank: int, op: Op) -> Result:
        def compute() -> Result:
            layout = Layout.fresh(op.shape, self.src)
            return Value(layout, M.positions(layout, op.fill or 0.0))
        return self._run(rank, op, compute)

    def compare(self, rank: int, op: Op, fn: Compare, a: Result, b: Result) -> Result:
        if isinstance(a, Opaque):
            return a
        if isinstance(b, Opaque):
            return b

        def compute() -> Result:
            layout, fa, fb = self._aligned(a, b)
            return Value(layout, M.compare(fn, fa, fb, layout))
        return self._run(rank, op, compute)

    def where(self, rank: int, op: Op, cond: Result, a: Result, b: Result) -> Result:
        for x in (cond, a, b):
            if isinstance(x, Opaque):
                return x

        def compute() -> Result:
            assert isinstance(cond, Value) and isinstance(a, Value) and isinstance(b, Value)
            layout, fc, fa = self._aligned(cond, a)
            layout, s_first, fb = self._aligned_subst(Value(layout, fc), b)
            return Value(layout, M.where(fc.subst(s_first), fa.subst(s_first), fb))
        return self._run(rank, op, compute)

    def _aligned(self, a: Value, b: Value) -> tuple[Layout, Rat, Rat]:
        layout, sa, fb = self._aligned_subst(a, b)
        return layout, a.form.subst(sa), fb

    def _aligned_subst(self, a: Value, b: Value) -> tuple[Layout, Subst, Rat]:
        """The elementwise layout of a and b, the substitution for a, and b's form."""
        if a.layout == b.layout:
            return a.layout, {}, b.form
        b = separate(a.layout, b, self.src, always=True)
        layout, sa, sb = broadcast(a.layout, b.layout, self.src)
        return layout, sa, b.form.subst(sb)

    def dot(self, rank: int, op: Op, a: Result, b: Result) -> Result:
        if isinstance(a, Opaque):
            return a
        if isinstance(b, Opaque):
            return b

        def compute() -> Result:
            try:
                out = self._dot(a, b, self.problem.d_head)
            except Scramble as exc:
                return self._scrambled(rank, op, a, b, str(exc))
            self.rec.produced(op, out.form)
            return out
        return self._run(rank, op, compute)

    def _dot(self, a: Value, b: Value, features: int) -> Value:
        if M.penalised(a.form) or M.penalised(b.form):
            raise NotModelled("multiplies masked scores (-inf where the mask hides a key) in "
                              "a dot: exponentiate them first")
        b = separate(a.layout, b, self.src, always=True)
        la, lb = a.layout, b.layout
        if _empty_keys(a.form) or _empty_keys(b.form):
            return Value(Layout.fresh((*la.shape[:-1], lb.shape[-1]), self.src), NEG_INF)
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
        prod = R.mul(a.form.subst(sa), b.form.subst(sb))
        layout = Layout((*batch.axes, la.axes[-2], lb.axes[-1]),
                        (*batch.shape, la.shape[-2], lb.shape[-1]))
        form = sum_over(prod, over, features, {dg.id: dg.size for dg in layout.digits})
        return Value(layout, form)

    def _scrambled(self, rank: int, op: Op, a: Value, b: Value, reason: str) -> Value:
        """A wrong contraction becomes a fresh score-like symbol indexed by the result's
        axes (its last axis plays the key rows), so the rest is still judged."""
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
        self.private = True
        return Value(layout, Rat.atom(Scrambled.make(label, row, others,
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


def _empty_keys(form: Rat) -> bool:
    return any(isinstance(a, Input) and a.tensor == "Kx" for a in form.atoms())


__all__ = ["Result", "Symbolic", "Value"]
