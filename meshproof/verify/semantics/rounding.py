"""A first-order forward rounding-error bound for every stored output.

Standard running-error analysis (first order in the unit roundoffs u: f16 2^-11, bf16 2^-8,
f32 2^-24), driven by what each value is in the exact forms:

- scores, maxima and log-sum-exp values carry an absolute error a;
- exponential weights and sums of them (ℓ) a relative error r;
- unnormalised outputs (o) an error relative to ℓ·max|V|;
- normalised outputs an error relative to max|V|.

Dots accumulate in f32 (n·u32 for n products), then round to their dtype; exp adds its
argument's absolute error to its relative error; a division o/ℓ adds the errors of both.
Inputs are exact (the harness gives f16-representable numbers). The output bound η means
|computed - exact| <= η·max|V| elementwise, under |inputs| <= B for the score errors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from meshproof.model.schedule import DType, Op, OpKind, ValueRef
from meshproof.verify.semantics.dataflow import Dataflow, Key
from meshproof.verify.semantics.events import describe
from meshproof.verify.semantics.interp import Interpreter, Opaque

UNIT = {DType.F16: 2.0 ** -11, DType.BF16: 2.0 ** -8, DType.F32: 2.0 ** -24}


class Kind(Enum):
    EXACT = "exact"
    ABS = "abs"          # scores, maxima: absolute error
    REL = "rel"          # weights and their sums: relative error
    OSCALE = "oscale"    # unnormalised o: error relative to ℓ·max|V|
    OUT = "out"          # normalised o: error relative to max|V|


@dataclass(frozen=True, slots=True)
class Err:
    kind: Kind
    eps: float
    dtype: DType


def _kind(interp: Interpreter, key: Key) -> Kind | None:
    res = interp.values.get(key)
    if res is None or isinstance(res, Opaque):
        return None
    what = describe(res.form)
    if what in ("a constant", "Q", "K", "V") or "/" in what:
        return Kind.EXACT
    if what in ("scores", "a running max (m)", "a log-sum-exp value"):
        return Kind.ABS
    if what in ("ℓ", "exponential weights", "softmax probabilities"):
        return Kind.REL
    if what == "o":
        return Kind.OSCALE
    if what == "o (normalised)":
        return Kind.OUT
    return None


class ErrorBounds(Dataflow[Err | None]):
    def __init__(self, interp: Interpreter, input_bound: float) -> None:
        super().__init__(interp.schedule, interp.table)
        self.interp = interp
        self.b = input_bound
        self.d = interp.problem.d_head

    def cycle(self, key: Key) -> Err | None:
        return None

    def _mag(self, key: Key) -> float:
        from meshproof.verify.semantics.bounds import magnitude

        res = self.interp.values.get(key)
        if res is None or isinstance(res, Opaque):
            return math.inf
        m = magnitude(res.form, self.b, self.d,
                      sizes={dg.id: dg.size for dg in res.layout.digits})
        return math.inf if m is None else m

    def evaluate(self, key: Key) -> Err | None:
        self.interp.result(*key)
        op = self.defining[key]
        kind = _kind(self.interp, key)
        if kind is None:
            return None
        args = [self.values.get((key[0], a.id)) if isinstance(a, ValueRef) else
                Err(Kind.EXACT, 0.0, DType.F32) for a in op.args]
        if op.kind is OpKind.RECV:
            src = self.recv_source(key[0], op)
            sent = self.values.get(src) if isinstance(src, tuple) else None
            return None if sent is None else self._round(sent, kind, op, key)
        if op.kind is OpKind.LOAD:
            source = self.rank_memory(key[0]).loads.get(op.index)
            if source is not None:
                w = source.writers[0]
                kept = self.values.get((key[0], w.value_args[0]))
                return None if kept is None else self._round(kept, kind, op, key)
            return Err(kind, UNIT[op.dtype] if op.dtype is DType.BF16 else 0.0, op.dtype)
        if any(a is None for a in args):
            return None
        return self._combine(op, kind, [a for a in args if a is not None], key)

    def _round(self, e: Err, kind: Kind, op: Op, key: Key) -> Err:
        """A value moved into op's dtype: one more rounding if it narrows."""
        extra = UNIT[op.dtype] if UNIT[op.dtype] > UNIT[e.dtype] else 0.0
        return Err(kind, self._add_rounding(e.eps, extra, kind, key), op.dtype)

    def _add_rounding(self, eps: float, u: float, kind: Kind, key: Key) -> float:
        if kind is Kind.ABS:
            return eps + u * self._mag(key)
        return eps + u

    def _combine(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        u = UNIT[op.dtype]
        u32 = UNIT[DType.F32]
        k = op.kind
        worst = max((a.eps for a in args), default=0.0)
        total = sum(a.eps for a in args)
        if k in (OpKind.CAST, OpKind.STORE, OpKind.SEND, OpKind.RESHAPE, OpKind.TRANS,
                 OpKind.NEG, OpKind.MAX, OpKind.MAXIMUM, OpKind.MINIMUM):
            if k is OpKind.CAST:
                return self._round(args[0], kind, op, key)
            return Err(kind, worst, op.dtype)
        if k is OpKind.FULL:
            return Err(kind, 0.0, op.dtype)
        if k is OpKind.DOT:
            n = self._inner(op, key)
            if kind is Kind.ABS:
                # sum of n products of inputs bounded by B: n·u32·(n·B²) plus the rounding
                return Err(kind, total + n * u32 * n * self.b ** 2 + u * self._mag(key),
                           op.dtype)
            return Err(kind, worst + n * u32 + u, op.dtype)
        if k in (OpKind.EXP, OpKind.EXP2):
            a = args[0]
            arg_abs = a.eps if a.kind is Kind.ABS else 0.0
            scale = math.log(2.0) if k is OpKind.EXP2 else 1.0
            return Err(Kind.REL, arg_abs * scale + u32 + u, op.dtype)
        if k is OpKind.SOFTMAX:
            a = args[0]
            n = self._axis_size(op, key)
            return Err(Kind.REL, 2 * a.eps + (n + 2) * u32 + u, op.dtype)
        if k is OpKind.SUM:
            n = self._axis_size(op, key)
            return Err(kind, worst + (n - 1) * u32 + u, op.dtype)
        if k is OpKind.LOG:
            return Err(Kind.ABS, worst + u * max(1.0, self._mag(key)), op.dtype)
        if k in (OpKind.ADD, OpKind.SUB):
            if kind is Kind.ABS:
                return Err(kind, total + u * self._mag(key), op.dtype)
            return Err(kind, worst + u, op.dtype)
        if k in (OpKind.MUL, OpKind.DIV):
            if kind is Kind.ABS and k is OpKind.MUL:
                mags = [self._arg_mag(op, key, i) for i in range(len(op.args))]
                spread = sum(a.eps * math.prod(m for j, m in enumerate(mags) if j != i)
                             for i, a in enumerate(args))
                return Err(kind, spread + u * self._mag(key), op.dtype)
            if kind is Kind.ABS:
                return None
            return Err(kind, total + u, op.dtype)
        return None

    def _arg_mag(self, op: Op, key: Key, i: int) -> float:
        a = op.args[i]
        if isinstance(a, ValueRef):
            return self._mag((key[0], a.id))
        return abs(a.value)

    def _inner(self, op: Op, key: Key) -> int:
        arg = op.args[0]
        assert isinstance(arg, ValueRef)
        res = self.interp.values.get((key[0], arg.id))
        if res is None or isinstance(res, Opaque) or not res.layout.shape:
            return 1
        return res.layout.shape[-1]

    def _axis_size(self, op: Op, key: Key) -> int:
        arg = op.args[0]
        assert isinstance(arg, ValueRef) and op.axis is not None
        res = self.interp.values.get((key[0], arg.id))
        if res is None or isinstance(res, Opaque):
            return 1
        return res.layout.shape[op.axis]


def output_error_bounds(interp: Interpreter, stores: list[tuple[int, Op]],
                        input_bound: float) -> list[float | None]:
    """Per stored output, η with |computed - exact| <= η·max|V|, or None."""
    eb = ErrorBounds(interp, input_bound)
    out: list[float | None] = []
    for rank, store in stores:
        arg = store.args[0]
        assert isinstance(arg, ValueRef)
        e = eb.result(rank, arg.id)
        out.append(None if e is None or e.kind is not Kind.OUT else
                   e.eps + (UNIT[store.dtype] if UNIT[store.dtype] > UNIT[e.dtype] else 0.0))
    return out
