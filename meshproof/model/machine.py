"""The machine domain: the schedule as the machine computes it, on concrete inputs.

An `OpSemantics` of model/evaluate.py, per rank and unbatched, with the simulator's
arithmetic (spec/simulator.md): every op computes in float32 and rounds its result to its
dtype (f16, bf16: round to nearest even); loads of f16 inputs are exact. The verifier uses
it for numeric hazards, which exist only on the machine -- exp(-724) is 0 in f32, so ℓ can
be 0 where its exact value is not -- and a witness found here reproduces in the simulator.
Values that never arrive are None.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from meshproof.model.op_semantics import Binary, Compare, Lost, Reduction, Reload, Unary
from meshproof.model.schedule import DType, Op

Array = np.ndarray[Any, Any]


def round_to(x: Array, dtype: DType) -> Array:
    """float32 values rounded to `dtype`, kept as float32."""
    x = np.asarray(x, dtype=np.float32)
    if dtype is DType.F32:
        return x
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype is DType.F16:
            return x.astype(np.float16).astype(np.float32)
        bits = x.view(np.uint32).copy()
        bits += ((bits >> np.uint32(16)) & np.uint32(1)) + np.uint32(0x7FFF)
        bits &= np.uint32(0xFFFF0000)
        out = bits.view(np.float32)
        out[np.isnan(x)] = np.float32(np.nan)
        return out


@dataclass(frozen=True, slots=True)
class Buffers:
    """What the harness puts in a rank's buffers: pointer -> flat float32 contents."""

    by_rank: Mapping[int, Mapping[str, Array]]


V = Array | None

_UNARY: dict[Unary, Callable[[Array], Array]] = {
    Unary.EXP: np.exp, Unary.EXP2: np.exp2, Unary.LOG: np.log, Unary.LOG2: np.log2,
    Unary.LOG1P: np.log1p, Unary.SIGMOID: lambda x: 1.0 / (1.0 + np.exp(-x)),
    Unary.NEG: np.negative,
}
_COMPARE: dict[Compare, Callable[[Array, Array], Array]] = {
    Compare.LT: np.less, Compare.LE: np.less_equal, Compare.GT: np.greater,
    Compare.GE: np.greater_equal, Compare.EQ: np.equal, Compare.NE: np.not_equal}
_BINARY: dict[Binary, Callable[[Array, Array], Array]] = {
    Binary.ADD: np.add, Binary.SUB: np.subtract, Binary.MUL: np.multiply,
    Binary.DIV: np.divide, Binary.MAXIMUM: np.maximum, Binary.MINIMUM: np.minimum,
}


class Machine:
    """float32 per op, rounded to each op's dtype."""

    def __init__(self, buffers: Buffers) -> None:
        self.buffers = buffers

    def _done(self, op: Op, x: Array) -> Array:
        return round_to(np.asarray(x, dtype=np.float32), op.dtype)

    def const(self, rank: int, op: Op, value: float) -> V:
        return np.asarray(np.float32(value))

    def cycle(self, rank: int, op: Op) -> V:
        return None

    def recv(self, rank: int, op: Op, sent: V | Lost) -> V:
        if sent is None or isinstance(sent, Lost):
            return None
        if sent.size != math.prod(op.shape):
            return None
        return round_to(sent.reshape(op.shape), op.dtype)

    def load(self, rank: int, op: Op, reload: Reload[V] | None) -> V:
        n = math.prod(op.shape)
        region = np.zeros(n, dtype=np.float32)
        filled = np.zeros(n, dtype=bool)
        buf = self.buffers.by_rank.get(rank, {}).get(op.ptr or "")
        if buf is not None and op.offset < buf.size:
            m = min(n, buf.size - op.offset)
            region[:m] = buf[op.offset:op.offset + m]
            filled[:m] = True
        for store, val in reload.stores if reload is not None else ():
            if val is None:
                return None
            flat = val.reshape(-1)
            a, b = max(op.offset, store.offset), min(op.offset + n, store.offset + flat.size)
            region[a - op.offset:b - op.offset] = flat[a - store.offset:b - store.offset]
            filled[a - op.offset:b - op.offset] = True
        if not filled.all():
            return None
        return round_to(region.reshape(op.shape), op.dtype)

    def full(self, rank: int, op: Op) -> V:
        return self._done(op, np.full(op.shape, op.fill or 0.0, dtype=np.float32))

    def cast(self, rank: int, op: Op, x: V) -> V:
        return None if x is None else self._done(op, x)

    def reshape(self, rank: int, op: Op, x: V) -> V:
        return None if x is None else x.reshape(op.shape)

    def trans(self, rank: int, op: Op, x: V) -> V:
        return None if x is None else np.transpose(x, op.perm)

    def view_slice(self, rank: int, op: Op, x: V) -> V:
        if x is None:
            return None
        return np.array(x.reshape(-1)[op.offset:op.offset + math.prod(op.shape)]
                        .reshape(op.shape))

    def unary(self, rank: int, op: Op, fn: Unary, x: V) -> V:
        if x is None:
            return None
        with np.errstate(all="ignore"):
            return self._done(op, _UNARY[fn](x))

    def binary(self, rank: int, op: Op, fn: Binary, a: V, b: V) -> V:
        if a is None or b is None:
            return None
        with np.errstate(all="ignore"):
            return self._done(op, _BINARY[fn](a, b))

    def reduce(self, rank: int, op: Op, fn: Reduction, x: V) -> V:
        if x is None:
            return None
        f = np.max if fn is Reduction.MAX else np.sum
        with np.errstate(all="ignore"):
            return self._done(op, f(x, axis=op.axis, keepdims=op.keepdims))

    # masks as the simulator computes them (spec/simulator.md): float32 positions,
    # comparisons as 1.0 / 0.0, a select rounded to the op's dtype
    def arange(self, rank: int, op: Op) -> V:
        lo = op.fill or 0.0
        return np.arange(lo, lo + op.shape[0], dtype=np.float32)

    def compare(self, rank: int, op: Op, fn: Compare, a: V, b: V) -> V:
        if a is None or b is None:
            return None
        held = np.asarray(_COMPARE[fn](a, b), dtype=np.float32)
        return np.array(np.broadcast_to(held, op.shape))

    def where(self, rank: int, op: Op, cond: V, a: V, b: V) -> V:
        if cond is None or a is None or b is None:
            return None
        picked = np.where(cond != 0, a, b)
        return self._done(op, np.array(np.broadcast_to(picked, op.shape)))

    def dot(self, rank: int, op: Op, a: V, b: V) -> V:
        if a is None or b is None:
            return None
        with np.errstate(all="ignore"):
            return self._done(op, np.matmul(a, b))
