"""The numeric domain: the schedule on concrete inputs, with the algebra's semantics.

An `OpSemantics` of model/evaluate.py for witnesses: exact real arithmetic approximated in
float64 or in 40-digit arithmetic (mpmath), casts are identities, and a value that depends
on no input is what the machine holds in its dtype (as in the symbolic domain). A value
that never arrives is None.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from meshproof.model.op_semantics import Binary, Compare, Lost, Reduction, Reload, Unary
from meshproof.model.problem import Problem
from meshproof.model.schedule import DType, Op
from meshproof.verify.semantics.scalars import machine_value

Array = np.ndarray[Any, Any]
_COMPARE: dict[Compare, Callable[[Array, Array], Array]] = {
    Compare.LT: np.less, Compare.LE: np.less_equal, Compare.GT: np.greater,
    Compare.GE: np.greater_equal, Compare.EQ: np.equal, Compare.NE: np.not_equal}
MP_DIGITS = 40


@dataclass(frozen=True, slots=True)
class Inputs:
    q: dict[int, Array]      # per group: (q_rows, h_q, d)
    k: dict[int, Array]      # per group: (kv_rows, h_kv, d)
    v: dict[int, Array]


@dataclass(frozen=True, slots=True)
class Backend:
    name: str
    exp: Callable[[Array], Array]
    exp2: Callable[[Array], Array]
    log: Callable[[Array], Array]
    log2: Callable[[Array], Array]
    log1p: Callable[[Array], Array]
    lift: Callable[[Array], Array]
    dtype: Any

    def const(self, x: float) -> Any:
        if self.dtype is object:
            import mpmath
            return mpmath.mpf(x)
        return x


def _vec(f: Callable[[Any], Any]) -> Callable[[Array], Array]:
    v = np.vectorize(f, otypes=[object])
    return lambda a: v(a)


FLOAT64 = Backend("float64", np.exp, np.exp2, np.log, np.log2, np.log1p,
                  lambda a: np.asarray(a, dtype=np.float64), np.float64)


@functools.cache
def mpmath_backend() -> Backend:
    """40-digit arithmetic (mpmath, imported only when a witness is checked: it costs a
    `verify` process a twentieth of its start-up)."""
    import mpmath

    return Backend(f"{MP_DIGITS}-digit", _vec(mpmath.exp), _vec(lambda x: mpmath.power(2, x)),
                   _vec(mpmath.log), _vec(lambda x: mpmath.log(x, 2)), _vec(mpmath.log1p),
                   lambda a: np.vectorize(mpmath.mpf, otypes=[object])(
                       np.asarray(a, np.float64)),
                   object)


@dataclass(frozen=True, slots=True)
class Num:
    data: Array
    constant: bool = False     # depends on no input: what the machine holds


V = Num | None


class Numeric:
    """Concrete values of every rank for one set of inputs and one precision."""

    def __init__(self, problem: Problem, inputs: Inputs, be: Backend) -> None:
        self.problem = problem
        self.inputs = inputs
        self.be = be

    def _out(self, op: Op, data: Array, *args: V) -> V:
        constant = all(a is not None and a.constant for a in args)
        if constant:
            held = np.vectorize(lambda v: machine_value(float(v), op.dtype),
                                otypes=[np.float64])(data)
            data = self.be.lift(held)
        return Num(np.asarray(data), constant)

    def _guard(self, op: Op, compute: Callable[[], Array], *args: V) -> V:
        if any(a is None for a in args):
            return None
        try:
            # -inf - -inf of an empty masked state is nan, as the exact semantics say: the
            # nan carries the undefined value, numpy's warning about it would be noise
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                data = compute()
        except (FloatingPointError, ZeroDivisionError, ValueError):
            # 0/0 or log of a negative on real inputs: undefined, a witness by itself
            data = np.full(op.shape, self.be.const(float("nan")), dtype=self.be.dtype)
        return self._out(op, data, *args)

    # --- OpSemantics -----------------------------------------------------------------------
    def const(self, rank: int, op: Op, value: float) -> V:
        return Num(np.asarray(self.be.const(machine_value(value, DType.F32)),
                              dtype=self.be.dtype), True)

    def cycle(self, rank: int, op: Op) -> V:
        return None

    def recv(self, rank: int, op: Op, sent: V | Lost) -> V:
        if sent is None or isinstance(sent, Lost):
            return None
        if sent.data.shape == op.shape:
            return sent
        if sent.data.size != math.prod(op.shape):
            return None
        return Num(sent.data.reshape(op.shape), sent.constant)

    def _buffer(self, rank: int, ptr: str) -> Array | None:
        p = self.problem
        g = p.group_of[rank]
        if ptr == "q_ptr" and p.q_base(rank) is not None:
            b = p.q_base(rank) or 0
            return self.be.lift(self.inputs.q[g][b:b + p.S_q]).reshape(-1)
        base = p.kv_base(rank)
        if ptr in (p.k_ptr, p.v_ptr) and base is not None:
            src = self.inputs.k[g] if ptr == p.k_ptr else self.inputs.v[g]
            return self.be.lift(src[base:base + p.S_kv_per_rank]).reshape(-1)
        return None

    def load(self, rank: int, op: Op, reload: Reload[V] | None) -> V:
        n = math.prod(op.shape)
        lo = op.offset
        region = np.zeros(n, dtype=self.be.dtype)
        filled = np.zeros(n, dtype=bool)
        buf = self._buffer(rank, op.ptr or "")
        if buf is not None and lo < buf.size:
            m = min(n, buf.size - lo)
            region[:m] = buf[lo:lo + m]
            filled[:m] = True
        for store, val in reload.stores if reload is not None else ():
            if val is None:
                return None
            flat = np.asarray(val.data).reshape(-1)
            a, b = max(lo, store.offset), min(lo + n, store.offset + flat.size)
            region[a - lo:b - lo] = flat[a - store.offset:b - store.offset]
            filled[a - lo:b - lo] = True
        if not filled.all():
            return None
        return Num(region.reshape(op.shape))

    def full(self, rank: int, op: Op) -> V:
        v = machine_value(op.fill if op.fill is not None else 0.0, op.dtype)
        return Num(np.full(op.shape, self.be.const(v), dtype=self.be.dtype), True)

    def cast(self, rank: int, op: Op, x: V) -> V:
        return None if x is None else self._out(op, x.data, x)

    def reshape(self, rank: int, op: Op, x: V) -> V:
        return None if x is None else Num(np.asarray(x.data).reshape(op.shape), x.constant)

    def trans(self, rank: int, op: Op, x: V) -> V:
        return None if x is None else Num(np.transpose(x.data, op.perm), x.constant)

    def view_slice(self, rank: int, op: Op, x: V) -> V:
        if x is None:
            return None
        n = math.prod(op.shape)
        flat = np.asarray(x.data).reshape(-1)[op.offset:op.offset + n]
        return Num(np.array(flat).reshape(op.shape), x.constant)

    def unary(self, rank: int, op: Op, fn: Unary, x: V) -> V:
        be = self.be

        def compute() -> Array:
            assert x is not None
            a = np.asarray(x.data)
            match fn:
                case Unary.EXP:
                    return be.exp(a)
                case Unary.EXP2:
                    return be.exp2(a)
                case Unary.LOG:
                    return be.log(a)
                case Unary.LOG2:
                    return be.log2(a)
                case Unary.LOG1P:
                    return be.log1p(a)
                case Unary.SIGMOID:
                    return 1 / (1 + be.exp(-a))
                case Unary.NEG:
                    return -a
        return self._guard(op, compute, x)

    def binary(self, rank: int, op: Op, fn: Binary, a: V, b: V) -> V:
        def compute() -> Array:
            assert a is not None and b is not None
            x, y = np.asarray(a.data), np.asarray(b.data)
            match fn:
                case Binary.ADD:
                    return np.asarray(x + y)
                case Binary.SUB:
                    return np.asarray(x - y)
                case Binary.MUL:
                    return np.asarray(x * y)
                case Binary.DIV:
                    return np.asarray(x / y)
                case Binary.MAXIMUM:
                    return np.asarray(np.maximum(x, y))
                case Binary.MINIMUM:
                    return np.asarray(np.minimum(x, y))
        return self._guard(op, compute, a, b)

    def reduce(self, rank: int, op: Op, fn: Reduction, x: V) -> V:
        def compute() -> Array:
            assert x is not None
            f = np.max if fn is Reduction.MAX else np.sum
            return np.asarray(f(x.data, axis=op.axis, keepdims=op.keepdims))
        return self._guard(op, compute, x)

    # masks (spec/semantics.md §8): positions and comparisons depend on no input (what the
    # machine holds: f32 positions, 0/1 masks); tl.where selects elementwise
    def arange(self, rank: int, op: Op) -> V:
        lo = int(op.fill or 0.0)
        return Num(self.be.lift(np.arange(lo, lo + op.shape[0], dtype=np.float64)), True)

    def compare(self, rank: int, op: Op, fn: Compare, a: V, b: V) -> V:
        if a is None or b is None:
            return None
        x = np.asarray(a.data, dtype=np.float64)
        y = np.asarray(b.data, dtype=np.float64)
        held = _COMPARE[fn](x, y).astype(np.float64)
        return Num(self.be.lift(held), a.constant and b.constant)

    def where(self, rank: int, op: Op, cond: V, a: V, b: V) -> V:
        if cond is None or a is None or b is None:
            return None
        mask = np.asarray(np.asarray(cond.data, dtype=np.float64) != 0)
        data = np.where(mask, a.data, b.data)
        return Num(np.asarray(data, dtype=self.be.dtype),
                   cond.constant and a.constant and b.constant)

    def dot(self, rank: int, op: Op, a: V, b: V) -> V:
        def compute() -> Array:
            assert a is not None and b is not None
            return np.asarray(np.matmul(a.data, b.data))
        return self._guard(op, compute, a, b)
