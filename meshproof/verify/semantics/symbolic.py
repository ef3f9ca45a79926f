"""The symbolic domain: every value of every rank as its exact normal form.

An `OpSemantics` of model/evaluate.py. Every value gets a `Value` (layout + exact form,
rational.py) or an `Opaque` result that says, at the op's line, why its form is outside the
algebra (or that it is undefined: 0/0, inf - inf, log 0). Semantics: exact real arithmetic
on everything that depends on an input; a value that depends on no input (a constant, a
`full`, a cast of one) is what the machine holds, i.e. rounded to its dtype, so a factor of
1e-50 in f32 is 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from meshproof.model.evaluate import (
    Binary,
    Compare,
    Dependencies,
    Lost,
    Reduction,
    Reload,
    Unary,
)
from meshproof.model.problem import Problem
from meshproof.model.schedule import DType, Op, OpKind, Schedule, ValueRef
from meshproof.verify.semantics import masks as M
from meshproof.verify.semantics import rational as R
from meshproof.verify.semantics.atoms import Input, Lin, Max, Scrambled
from meshproof.verify.semantics.budget import Budget, unbounded
from meshproof.verify.semantics.events import Departure, Recorder, Silent
from meshproof.verify.semantics.index import (
    Aff,
    DigitSource,
    Layout,
    Subst,
    compose,
    permute,
    unify_axis,
)
from meshproof.verify.semantics.layouts import Value, broadcast, buffer, read, separate, view
from meshproof.verify.semantics.rational import Rat
from meshproof.verify.semantics.reasons import NotModelled, Scramble, Undefined, UndefinedKind
from meshproof.verify.semantics.reduce import max_over, sum_over
from meshproof.verify.semantics.scalars import machine_value
from meshproof.verify.semantics.strided import stride_form
from meshproof.verify.semantics.views import describe


@dataclass(frozen=True, slots=True)
class Opaque:
    """A value whose exact form is not known: `reason` in words, at `op` of `rank`."""

    reason: str
    rank: int
    op: Op
    lost: bool = False                       # it depends on a message that never arrives
    undefined: UndefinedKind | None = None   # it is undefined on the machine (0/0, ...)


Result = Value | Opaque
UNDERFLOW_WATCH = 2.0 ** -60     # constant factors below this get the underflow check
F16_MAX = 65504.0
F32_TINY = 2.0 ** -149            # the smallest positive f32
EXP_UNDERFLOW = math.log(F32_TINY) - 1.0   # exp below this is 0 in f32
SIGMOID_FLAT = 89.0     # sigmoid(x) for x below -this is 0 in f32 (exp(-x) overflows)
SIGMOID_ONE = 18.0      # ... and above this it rounds to 1
LN2 = Fraction(math.log(2.0))     # ln 2 as the nearest double, used consistently
INV_LN2 = 1 / LN2                 # its exact reciprocal: exp2(log2 x) = x exactly
SCALAR = Layout((), ())
# A form larger than this cannot be the normal form of a merge that simplifies (correct
# merges stay under a hundred characters per partial at any size): past it the value is
# opaque, so a form that grows with every merge costs bounded time and memory.
FORM_LIMIT = 20_000
TERM_LIMIT = 256

_BINARY: dict[Binary, Callable[[Rat, Rat], Rat]] = {
    Binary.ADD: R.add, Binary.SUB: R.sub, Binary.MUL: R.mul, Binary.DIV: R.div,
    Binary.MAXIMUM: R.maximum, Binary.MINIMUM: lambda a, b: R.maximum(a, b, is_min=True),
}


def mask_reason(op: Op) -> str:
    """Why a value of a mask op has no form (the reason the semantic verdicts give)."""
    return (f"masks (tl.{op.kind.value} at {op.source}) are not modelled yet: "
            "spec/semantics.md §8")


def _const(v: float) -> Rat:
    return Rat.const(Fraction(v) if math.isfinite(v) else v)


class Symbolic:
    """The exact-form domain of one schedule and attention problem."""

    def __init__(self, schedule: Schedule, problem: Problem,
                 budget: Budget | None = None, record: bool = True,
                 dependencies: Dependencies | None = None) -> None:
        self.schedule = schedule
        self.problem = problem
        self.budget = budget if budget is not None else unbounded()
        self.src = DigitSource()
        self.rec = Recorder() if record else Silent()
        self.private = False      # the last op read rank context (a scrambled dot's label)
        self._buffers: dict[tuple[int, str], Value | None] = {}
        self.dependencies = dependencies  # the op defining each value (events only)

    # --- the guard around every op -------------------------------------------------------
    def _run(self, rank: int, op: Op, compute: Callable[[], Result]) -> Result:
        self.rec.key = (rank, op.out if op.out is not None else -1)
        try:
            out = compute()
        except Undefined as exc:
            self.rec.add(Departure.OPAQUE, op, f"line {op.source.line}: tl.{op.kind.value} "
                         f"{exc}")
            return Opaque(str(exc), rank, op, undefined=exc.kind)
        except NotModelled as exc:
            self.rec.add(Departure.OPAQUE, op, f"line {op.source.line}: tl.{op.kind.value} "
                         f"{exc}")
            return Opaque(str(exc), rank, op)
        if isinstance(out, Value):
            # long chains of shifted guarded row sums (striped shards) as one atom each
            strided = stride_form(out.form)
            if strided is not out.form:
                out = Value(out.layout, strided)
            self.budget.tick(op, len(out.form.key))
        if isinstance(out, Value) and (len(out.form.key) > FORM_LIMIT or
                                       len(out.form.num.terms) > TERM_LIMIT):
            reason = (f"grows past the algebra's size bound ({len(out.form.num.terms)} terms, "
                      f"{len(out.form.key)} characters): the merge does not simplify (a "
                      "normalisation or weight that never cancels)")
            self.rec.add(Departure.OPAQUE, op, f"line {op.source.line}: tl.{op.kind.value} "
                         f"{reason}")
            return Opaque(reason, rank, op)
        return self._fold(out, op) if isinstance(out, Value) else out

    def _fold(self, value: Value, op: Op) -> Value:
        """A value that depends on no input is what the machine holds in its dtype."""
        c = constant_value(value.form)
        if c is None:
            return value
        held = machine_value(c, op.dtype)
        exact = value.form.as_const()
        if isinstance(exact, Fraction) and held == float(exact):
            return value
        if c and not held:
            self.rec.machine_zero(op, c, op.dtype.value)
        if held != held:
            raise Undefined(UndefinedKind.NAN_CONSTANT, "computes nan from constants")
        return Value(value.layout, _const(held))

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

    def trans(self, rank: int, op: Op, x: Result) -> Result:
        if isinstance(x, Opaque):
            return x
        assert op.perm is not None
        perm = op.perm
        return self._run(rank, op, lambda: Value(permute(x.layout, perm), x.form))

    def unary(self, rank: int, op: Op, fn: Unary, x: Result) -> Result:
        if isinstance(x, Opaque):
            return x
        return self._run(rank, op, lambda: Value(x.layout, self._unary(op, fn, x.form)))

    def _unary(self, op: Op, fn: Unary, f: Rat) -> Rat:
        if fn not in (Unary.EXP, Unary.EXP2) and M.penalised(f):
            raise NotModelled(f"takes {fn.value} of masked scores (-inf where the mask hides "
                              "a key)")
        match fn:
            case Unary.EXP:
                self.rec.exponent(op, f)
                return self._exp(op, f)
            case Unary.EXP2:   # exp2(x) = exp(x ln 2)
                arg = R.scale(f, LN2)
                self.rec.exponent(op, arg)
                return self._exp(op, arg)
            case Unary.LOG:
                return R.log(f)
            case Unary.LOG2:   # log2(x) = log(x) / ln 2
                return R.scale(R.log(f), INV_LN2)
            case Unary.LOG1P:
                return R.log(R.add(R.ONE_RAT, f))
            case Unary.SIGMOID:   # 1 / (1 + exp(-x)); sigmoid(-inf) = 0, sigmoid(inf) = 1
                if f.inf:
                    return R.ZERO_RAT if f.inf < 0 else R.ONE_RAT
                held = self._saturated(op, f)
                if held is not None:
                    return held
                return R.reciprocal(R.add(R.ONE_RAT, self._exp(op, R.neg(f))))
            case Unary.NEG:
                return R.neg(f)

    def _exp(self, op: Op, arg: Rat) -> Rat:
        """exp(arg), or 0 where arg is below the f32 underflow for every f16 input (the
        weight of a guarded empty partial, exp(-1e30 - m)): the machine holds 0."""
        lin = arg.as_lin()
        if lin is not None and not lin.infinite and lin.const < EXP_UNDERFLOW and \
                lin.coeffs:
            from meshproof.verify.semantics.bounds import lin_interval

            iv = lin_interval(lin, F16_MAX, self.problem.d_head)
            if iv is not None and iv[1] < EXP_UNDERFLOW:
                self.rec.machine_zero(op, math.exp(max(iv[1], -745.0)),
                                      "f32 (for every input: exp of at most "
                                      f"{iv[1]:.3g})")
                return R.ZERO_RAT
        return R.exp(arg)

    def _saturated(self, op: Op, x: Rat) -> Rat | None:
        """sigmoid(x) is what the machine holds for every f16 input when x is far out:
        0 below -89 (exp(-x) overflows f32), 1 above 18 (1 - exp(-x) rounds to 1)."""
        lin = x.as_lin()
        if lin is None or lin.infinite or not lin.coeffs or \
                abs(float(lin.const)) < SIGMOID_FLAT:
            return None
        from meshproof.verify.semantics.bounds import lin_interval

        iv = lin_interval(lin, F16_MAX, self.problem.d_head)
        if iv is not None and iv[1] < -SIGMOID_FLAT:
            self.rec.machine_zero(op, 0.0, "f32 (sigmoid of at most "
                                  f"{iv[1]:.3g}, for every input)")
            return R.ZERO_RAT
        if iv is not None and iv[0] > SIGMOID_ONE:
            return R.ONE_RAT
        return None

    def binary(self, rank: int, op: Op, fn: Binary, a: Result, b: Result) -> Result:
        if isinstance(a, Opaque):
            return a
        if isinstance(b, Opaque):
            return b
        return self._run(rank, op, lambda: self._binary(rank, fn, a, b, op))

    def _binary(self, rank: int, fn: Binary, a: Value, b: Value, op: Op | None) -> Value:
        # operands line up by axis position, never by digit ids they happen to share; equal
        # layouts (canonical operands of one shape: the common case) already line up
        if a.layout == b.layout:
            layout, fa, fb = a.layout, a.form, b.form
        else:
            b = separate(a.layout, b, self.src, always=True)
            layout, sa, sb = broadcast(a.layout, b.layout, self.src)
            fa, fb = a.form.subst(sa), b.form.subst(sb)
        if fn is Binary.MAXIMUM:
            d = self.problem.d_head
            guarded = _guard(fa, fb, d) or _guard(fb, fa, d)
            if guarded is not None:
                return Value(layout, guarded)
        masked = M.penalised(fa) or M.penalised(fb)
        if masked:
            M.check_binary(fn.value, fa, fb)
        try:
            out = _BINARY[fn](fa, fb)
        except NotModelled as exc:
            if fn in (Binary.MAXIMUM, Binary.MINIMUM):
                raise NotModelled(f"of {describe(fa)} and {describe(fb)}: {exc}") from None
            raise
        if masked and fn is not Binary.MAXIMUM:
            out = M.penalty_result(out, fa, fb)
        if fn in (Binary.MAXIMUM, Binary.MINIMUM):
            out = self._unreachable_floor(out)
        if op is not None:
            self._note(rank, fn, op, fa, fb, out)
            if fn in (Binary.MUL, Binary.DIV):
                out = self._underflow(op, fa, fb, out)
        return Value(layout, out)

    def _unreachable_floor(self, m: Rat) -> Rat:
        """max(x, -1e30) is x for every f16 input when x can never be that low (a guard of
        the running max): the constant member never attains the max."""
        lin = m.as_lin()
        if lin is None or len(lin.coeffs) != 1 or lin.coeffs[0][1] != 1 or lin.const:
            return m
        atom = lin.coeffs[0][0]
        if not isinstance(atom, Max) or atom.is_min:
            return m
        consts = [e for e in atom.elems if e.rows is None and not e.body.coeffs]
        others = [e for e in atom.elems if e not in consts]
        if not consts or not others:
            return m
        from meshproof.verify.semantics.bounds import lin_interval

        lows = [lin_interval(e.body, F16_MAX, self.problem.d_head) for e in others]
        top = max(float(e.body.const) for e in consts)
        if any(iv is not None and iv[0] > top for iv in lows):
            return R.make_max(others, False)
        return m

    def _underflow(self, op: Op, fa: Rat, fb: Rat, out: Rat) -> Rat:
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
            return R.ZERO_RAT
        return out

    def _note(self, rank: int, fn: Binary, op: Op, fa: Rat, fb: Rat, out: Rat) -> None:
        if fn in (Binary.ADD, Binary.SUB):
            self.rec.added(op, fa, fb, out)
        elif fn is Binary.DIV:
            self.rec.divided(op, fa, fb, out)
        elif fn is Binary.MUL:
            for this, other, arg in ((fa, fb, 0), (fb, fa, 1)):
                c = other.as_const()
                if isinstance(c, Fraction):
                    src = op.args[arg]
                    received = isinstance(src, ValueRef) and \
                        self._defining(rank, src.id) is OpKind.RECV
                    self.rec.weighted(op, float(c), this, received)

    def reduce(self, rank: int, op: Op, fn: Reduction, x: Result) -> Result:
        if isinstance(x, Opaque):
            return x
        assert op.axis is not None
        axis = op.axis
        return self._run(rank, op, lambda: self._reduce(x, axis, op.keepdims, fn))

    def _reduce(self, x: Value, axis: int, keepdims: bool, fn: Reduction) -> Value:
        over = {dg.id: dg.size for dg in x.layout.axes[axis]}
        if fn is Reduction.SUM:
            form = sum_over(x.form, over, self.problem.d_head)
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
            return Value(Layout.fresh((*la.shape[:-1], lb.shape[-1]), self.src), R.NEG_INF)
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
        form = sum_over(prod, over, features)
        layout = Layout((*batch.axes, la.axes[-2], lb.axes[-1]),
                        (*batch.shape, la.shape[-2], lb.shape[-1]))
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

    def _op_of(self, rank: int, vid: int) -> Op | None:
        if self.dependencies is None:
            self.dependencies = Dependencies(self.schedule, None)  # type: ignore[arg-type]
        return self.dependencies.defining(rank).get(vid)

    def _defining(self, rank: int, vid: int) -> OpKind | None:
        op = self._op_of(rank, vid)
        return None if op is None else op.kind

    def _view_source(self, rank: int, arg: ValueRef | object) -> Op | None:
        """The reshape an operand went through (following trans, cast, recv)."""
        while isinstance(arg, ValueRef):
            op = self._op_of(rank, arg.id)
            if op is None:
                return None
            if op.kind is OpKind.RESHAPE:
                return op
            if op.kind not in (OpKind.TRANS, OpKind.CAST) or not op.args:
                return None
            arg = op.args[0]
        return None

    # --- the harness's inputs ------------------------------------------------------------
    def input_buffer(self, rank: int, ptr: str) -> Value | None:
        """The harness's content of `ptr` on `rank`, or None if it fills none."""
        if (rank, ptr) in self._buffers:
            return self._buffers[(rank, ptr)]
        p = self.problem
        g = p.group_of[rank]
        value: Value | None = None
        # a zigzag prefill's rows are read as positions (Problem.position_rows)
        q_pos, k_pos = p.rank_positions(rank) if p.position_rows else (None, None)
        if ptr == "q_ptr" and p.q_base(rank) is not None:
            base = 0 if q_pos is not None else p.q_base(rank) or 0
            value = buffer((p.S_q, p.h_q, p.d_head),
                           lambda c: Rat.atom(Input.make("Q", g, (c[0].shift(base), c[1], c[2]))),
                           self.src, None if q_pos is None else q_pos.tolist())
        elif ptr in (p.k_ptr, p.v_ptr) and p.kv_base(rank) is not None:
            base = 0 if k_pos is not None else p.kv_base(rank) or 0
            # an empty slice (numeric_safety's --empty-shard) holds no keys: its scores
            # are -inf, which the algebra then follows (max = -inf, exp(-inf - x) = 0)
            name = ("K" if ptr == p.k_ptr else "V") + ("x" if rank in p.empty else "")
            value = buffer((p.S_kv_per_rank, p.h_kv, p.d_head),
                           lambda c: Rat.atom(Input.make(name, g, (c[0].shift(base), c[1],
                                                                   c[2]))),
                           self.src, None if k_pos is None else k_pos.tolist())
        self._buffers[(rank, ptr)] = value
        return value


def _product_bound(a: Value, b: Value) -> float | None:
    """|dot(a, b)| for inputs bounded by 1, when both are linear in Q/K/V elements."""
    total = float(a.layout.shape[-1]) if a.layout.shape else 1.0
    for v in (a, b):
        lin = v.form.as_lin()
        if lin is None or not all(isinstance(x, Input) for x, _ in lin.coeffs):
            return None
        total *= abs(float(lin.const)) + sum(abs(float(c)) for _, c in lin.coeffs)
    return total


def constant_value(form: Rat) -> float | None:
    """The value of a form that depends on no input (also exp or log of constants), as a
    float; None if it depends on an input (or is infinite: kept exact)."""
    if form.inf or form.den:
        return None
    total = 0.0
    for m, c in form.num.terms:
        if m.unit.coeffs or m.vars:
            return None
        with np.errstate(over="ignore"):
            try:
                total += float(c) * math.exp(float(m.unit.const))
            except OverflowError:
                total += math.inf if c > 0 else -math.inf
    return total


def _empty_keys(form: Rat) -> bool:
    return any(isinstance(a, Input) and a.tensor == "Kx" for a in form.atoms())


def _guard(x: Rat, floor: Rat, d_head: int) -> Rat | None:
    """maximum(x, c) is x when x is a positive sum provably >= c (ℓ >= 1 >= eps). A
    constant member of a max below every score any f16 input can make (maximum(m, -1e30))
    never attains it."""
    from meshproof.verify.semantics.bounds import lin_interval
    from meshproof.verify.semantics.order import lower_bound

    c = floor.as_const()
    if not isinstance(c, Fraction) or x.as_lin() is not None or R.sign(x) <= 0:
        return None
    if c <= 0:
        return x

    def low_of(member: Lin) -> float | None:
        iv = lin_interval(member, F16_MAX, d_head)
        return None if iv is None else iv[0]
    return x if c <= 1 and lower_bound(x, low_of) >= 1 else None


__all__ = ["Opaque", "Result", "Symbolic", "Value"]
