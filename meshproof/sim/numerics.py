"""Evaluate the schedule IR with numpy, for a batch of identical groups at once.

Every value is a float32 array with a leading batch axis (one entry per member group of a
class, see groups.py). A value whose dtype is f16/bf16 holds only numbers of that dtype:
op results are rounded where the IR gives them a narrower dtype (dot without out_dtype,
casts, loads, receives), so stores and sends need no rounding. Matmuls run in float32
(numpy's float16 matmul is slow and is not what the hardware does).

Ranks run in a dependency order: each rank runs until it reaches a recv whose message has
not been sent yet; messages queue without bound (the caller has already refused schedules
that deadlock at the launch's queue depth, and a schedule free of deadlock at depth D is
free of it with unbounded queues).

A `GroupPlan` (per class) resolves each op's handler, message key and the values it frees
once, so the per-op cost of a batch is a few microseconds (the headline panel runs 64
batches of ~1000 ops).

**Streamed K/V (the fast path).** The harness's K and V buffers are `Generated`: never
made whole. The plan marks the values that stay *streamed* (stream_plan.py); a `dot`
with one streamed operand runs piece by piece over the generator's tiles (streamed.py).
Any other use makes the value whole first (`_arg`), so every kernel evaluates; only the
memory and the time differ. One dispatch on op kind (`_HANDLERS`) evaluates the IR; the
plan's analysis (`stream_axes`) is the only other place that looks at op kinds.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from meshproof.errors import InternalError, SimulationRefused
from meshproof.model.channel_table import ChannelTable, OpRef
from meshproof.model.schedule import Const, DType, Op, OpKind, Schedule, ValueRef
from meshproof.sim.groups import Group
from meshproof.sim.harness import Memory
from meshproof.sim.memory_ops import load, store
from meshproof.sim.pool_scores import PoolScores
from meshproof.sim.rounding import F32, round_to
from meshproof.sim.stream_plan import (
    donors,
    follow_axis,
    free_points,
    stream_axes,
    whole_elements,
)
from meshproof.sim.streamed import Streamed, dot_mode, streamed_dot

_BLOCKED = object()   # a handler's answer for a recv whose message is not there yet

_BINARY: dict[OpKind, Callable[..., F32]] = {
    OpKind.ADD: np.add, OpKind.SUB: np.subtract, OpKind.MUL: np.multiply,
    OpKind.DIV: np.divide, OpKind.MAXIMUM: np.maximum, OpKind.MINIMUM: np.minimum,
}
_UNARY: dict[OpKind, Callable[..., F32]] = {
    OpKind.EXP: np.exp, OpKind.EXP2: np.exp2, OpKind.LOG: np.log, OpKind.NEG: np.negative,
    OpKind.LOG2: np.log2, OpKind.LOG1P: np.log1p,
    OpKind.SIGMOID: lambda x: 1.0 / (1.0 + np.exp(-x)),
}


@dataclass(frozen=True, slots=True)
class _Message:
    value: F32
    dtype: DType


Handler = Callable[["GroupEvaluator", int, Op], object]


@dataclass(frozen=True, slots=True)
class RankPlan:
    endpoint_text: str
    ops: tuple[Op, ...]
    handlers: tuple[Handler, ...]
    frees: tuple[tuple[int, ...], ...]           # per op: values whose last use it is
    keys: tuple[tuple[int, int] | None, ...]     # per op: (channel, k) of a send/recv
    delivered: tuple[bool, ...]                  # per op: a send somebody receives
    streamed: frozenset[int] = frozenset()       # values kept streamed (never whole)
    whole_elements: int = 0     # the largest value or buffer this rank makes whole
    donors: tuple[int, ...] = ()   # per op: the argument it may overwrite (-1: none)


@dataclass(frozen=True, slots=True)
class GroupPlan:
    ranks: tuple[RankPlan, ...]

    @property
    def largest(self) -> int:
        """Elements of the largest array any rank holds at once (streamed values are not
        arrays; one made whole for a use that cannot stream is)."""
        return max((rp.whole_elements for rp in self.ranks), default=0)


def plan_group(schedule: Schedule, table: ChannelTable, group: Group,
               generated: frozenset[str] = frozenset(), row_elements: int = 0) -> GroupPlan:
    """`generated`: the buffers the harness generates (K and V), whose loads of whole
    rows (`row_elements` each) may stream."""
    plans = []
    for r in group.ranks:
        prog = schedule.programs[r]
        keys: list[tuple[int, int] | None] = []
        delivered: list[bool] = []
        for op in prog.ops:
            key = table.position.get(OpRef(r, op.index)) if op.kind.is_comm else None
            keys.append(key)
            delivered.append(key is not None and op.kind is OpKind.SEND
                             and key[1] < len(table.channels[key[0]].recvs))
        axes = stream_axes(prog.ops, generated, row_elements) if row_elements else {}
        plans.append(RankPlan(prog.endpoint.describe(), prog.ops,
                              tuple(_HANDLERS[op.kind] for op in prog.ops),
                              free_points(prog.ops), tuple(keys), tuple(delivered),
                              frozenset(axes), whole_elements(prog.ops, axes, generated,
                                                               row_elements),
                              donors(prog.ops, frozenset(axes))))
    return GroupPlan(tuple(plans))


def _expand(x: F32, ndim: int) -> F32:
    """Give a (batch, *shape) array `ndim` non-batch axes, numpy-broadcasting style."""
    missing = ndim - (x.ndim - 1)
    if missing <= 0:
        return x
    return x.reshape(x.shape[:1] + (1,) * missing + x.shape[1:])


class GroupEvaluator:
    """Runs the ranks of one group plan on batched memories (one per group rank)."""

    def __init__(self, plan: GroupPlan, memories: list[Memory], batch: int,
                 on_streamed: Callable[[int], None] | None = None) -> None:
        self.plan = plan
        self.memories = memories
        self.batch = batch
        self.values: list[dict[int, F32 | Streamed]] = [{} for _ in plan.ranks]
        self.messages: dict[tuple[int, int], _Message] = {}
        # told the f16 bytes of K/V each streamed dot has read (progress)
        self.on_streamed = on_streamed
        self.pool_scores = PoolScores()    # scores of pool tiles, shared by the ranks

    def run(self) -> list[Memory]:
        ranks = self.plan.ranks
        pcs = [0] * len(ranks)
        with np.errstate(all="ignore"):
            while True:
                moved = False
                for i, rp in enumerate(ranks):
                    vals = self.values[i]
                    pc, n = pcs[i], len(rp.ops)
                    while pc < n:
                        op = rp.ops[pc]
                        result = rp.handlers[pc](self, i, op)
                        if result is _BLOCKED:
                            break
                        if result is not None:
                            assert op.out is not None
                            vals[op.out] = result  # type: ignore[assignment]
                        for vid in rp.frees[pc]:
                            vals.pop(vid, None)
                        pc += 1
                        moved = True
                    pcs[i] = pc
                if all(pc == len(rp.ops) for pc, rp in zip(pcs, ranks, strict=True)):
                    return self.memories
                if not moved:
                    raise InternalError("numeric evaluation blocked although the progress run "
                                        "found no deadlock")

    # --- helpers --------------------------------------------------------------------
    def _where(self, i: int, op: Op) -> str:
        return f"{op.source}: rank {self.plan.ranks[i].endpoint_text}"

    def _arg(self, i: int, arg: ValueRef | Const) -> F32:
        """An operand as an array: a streamed value is made whole here, for a use that
        cannot stream."""
        if isinstance(arg, Const):
            return np.float32(arg.value)  # type: ignore[return-value]
        value = self.values[i][arg.id]
        return value.whole() if isinstance(value, Streamed) else value

    def _raw(self, i: int, arg: ValueRef | Const) -> F32 | Streamed:
        if isinstance(arg, Const):
            return np.float32(arg.value)  # type: ignore[return-value]
        return self.values[i][arg.id]

    def _streams(self, i: int, op: Op) -> bool:
        return op.out is not None and op.out in self.plan.ranks[i].streamed

    @staticmethod
    def _computed(op: Op, result: F32) -> F32:
        """A new array computed in float32: round it to the op's dtype in place."""
        if result.dtype != np.float32:
            result = result.astype(np.float32)
        return result if op.dtype is DType.F32 else round_to(result, op.dtype, inplace=True)

    # --- handlers, one per op kind ------------------------------------------------------
    def _send(self, i: int, op: Op) -> object:
        rp = self.plan.ranks[i]
        if rp.delivered[op.index]:  # a message nobody receives is dropped
            key = rp.keys[op.index]
            assert key is not None
            self.messages[key] = _Message(self._arg(i, op.args[0]), op.dtype)
        return None

    def _recv(self, i: int, op: Op) -> object:
        key = self.plan.ranks[i].keys[op.index]
        msg = self.messages.pop(key, None) if key is not None else None
        if msg is None:
            return _BLOCKED
        value = msg.value
        if value.shape[1:] != op.shape:
            if math.prod(value.shape[1:]) != math.prod(op.shape):
                raise SimulationRefused(
                    f"{self._where(i, op)}: error: recv of shape {op.shape} got a message of "
                    f"shape {value.shape[1:]} (channel_matching is violated); fix the recv "
                    "shape to match the send")
            value = value.reshape(self.batch, *op.shape)
        if op.dtype is not msg.dtype and op.dtype is not DType.F32:
            value = round_to(value, op.dtype)
        return value

    def _load(self, i: int, op: Op) -> object:
        return load(self.memories[i], op, self.batch, self._where(i, op), self._streams(i, op))

    def _store(self, i: int, op: Op) -> object:
        store(self.memories[i], op, self._arg(i, op.args[0]), self.batch, self._where(i, op))
        return None

    def _dot(self, i: int, op: Op) -> object:
        a, b = self._raw(i, op.args[0]), self._raw(i, op.args[1])
        mode = dot_mode(a, b)
        if mode is not None:
            return self._computed(op, streamed_dot(op.shape, self.batch, a, b, mode,
                                                   self.on_streamed, self.pool_scores))
        a, b = self._arg(i, op.args[0]), self._arg(i, op.args[1])
        nd = max(a.ndim, b.ndim) - 1
        return self._computed(op, np.matmul(_expand(a, nd), _expand(b, nd)))

    def _out(self, i: int, op: Op, args: tuple[F32, ...]) -> F32 | None:
        """The dying operand's array the result may be written over (stream_plan.donors):
        no new array, and the same numbers."""
        j = self.plan.ranks[i].donors[op.index] if self.plan.ranks[i].donors else -1
        if j < 0:
            return None
        x = args[j]
        ok = x.shape == (self.batch, *op.shape) and x.dtype == np.float32
        return x if ok else None

    def _binary(self, i: int, op: Op, ufunc: Callable[..., F32]) -> object:
        nd = len(op.shape)
        a, b = op.args
        x, y = self._arg(i, a), self._arg(i, b)
        x = _expand(x, nd) if isinstance(a, ValueRef) else x
        y = _expand(y, nd) if isinstance(b, ValueRef) else y
        return self._computed(op, ufunc(x, y, out=self._out(i, op, (x, y))))

    def _unary(self, i: int, op: Op, ufunc: Callable[..., F32]) -> object:
        x = self._arg(i, op.args[0])
        out = self._out(i, op, (x,))
        return self._computed(op, ufunc(x) if out is None else ufunc(x, out=out))

    def _reduce(self, i: int, op: Op) -> object:
        assert op.axis is not None
        reduce = np.max if op.kind is OpKind.MAX else np.sum
        return self._computed(op, reduce(self._arg(i, op.args[0]), axis=op.axis + 1,
                                         keepdims=op.keepdims))

    def _follow(self, i: int, op: Op, arg: tuple[int, ...]) -> Streamed | None:
        """The streamed result of a trans / reshape / cast of a streamed value."""
        x = self._raw(i, op.args[0])
        if not (isinstance(x, Streamed) and self._streams(i, op)):
            return None
        followed = follow_axis(op, x.shape, x.axis, x.unit)
        assert followed is not None  # the plan streams only what follows
        return x if op.kind is OpKind.CAST else \
            x.then("T" if op.kind is OpKind.TRANS else "R", arg, op.shape, *followed)

    def _trans(self, i: int, op: Op) -> object:
        assert op.perm is not None
        lazy = self._follow(i, op, tuple(op.perm))
        if lazy is not None:
            return lazy
        return np.transpose(self._arg(i, op.args[0]), (0, *(p + 1 for p in op.perm)))

    def _reshape(self, i: int, op: Op) -> object:
        lazy = self._follow(i, op, op.shape)
        if lazy is not None:
            return lazy
        return self._arg(i, op.args[0]).reshape(self.batch, *op.shape)

    def _view(self, i: int, op: Op) -> object:
        # a streamed operand is made whole by _arg (the plan does not follow views); a copy,
        # so that no later in-place update writes through into x
        x = self._arg(i, op.args[0])
        n = math.prod(op.shape)
        flat = x.reshape(self.batch, -1)[:, op.offset:op.offset + n]
        return np.array(flat.reshape(self.batch, *op.shape))

    def _cast(self, i: int, op: Op) -> object:
        lazy = self._follow(i, op, ())
        if lazy is not None:
            return lazy
        # a widening cast (f16 -> f32) changes nothing; a narrowing one rounds a copy
        return round_to(self._arg(i, op.args[0]), op.dtype)

    def _full(self, i: int, op: Op) -> object:
        assert op.fill is not None
        return self._computed(op, np.full((self.batch, *op.shape), op.fill, np.float32))

    def _arange(self, i: int, op: Op) -> object:
        assert op.fill is not None
        positions = np.arange(op.fill, op.fill + op.shape[0], dtype=np.float32)
        return np.array(np.broadcast_to(positions, (self.batch, *op.shape)))

    def _compare(self, i: int, op: Op, ufunc: Callable[..., F32]) -> object:
        nd = len(op.shape)
        a, b = op.args
        x, y = self._arg(i, a), self._arg(i, b)
        x = _expand(x, nd) if isinstance(a, ValueRef) else x
        y = _expand(y, nd) if isinstance(b, ValueRef) else y
        mask = np.asarray(ufunc(x, y), dtype=np.float32)
        return np.array(np.broadcast_to(mask, (self.batch, *op.shape)))

    def _select(self, i: int, op: Op) -> object:
        nd = len(op.shape)
        c, x, y = (_expand(self._arg(i, a), nd) if isinstance(a, ValueRef) else
                   self._arg(i, a) for a in op.args)
        out = np.where(c != 0, x, y)
        return self._computed(op, np.array(np.broadcast_to(out, (self.batch, *op.shape)),
                                           dtype=np.float32))


def _call_binary(ev: GroupEvaluator, i: int, op: Op, ufunc: Callable[..., F32]) -> object:
    return ev._binary(i, op, ufunc)


def _call_unary(ev: GroupEvaluator, i: int, op: Op, ufunc: Callable[..., F32]) -> object:
    return ev._unary(i, op, ufunc)


def _call_compare(ev: GroupEvaluator, i: int, op: Op, ufunc: Callable[..., F32]) -> object:
    return ev._compare(i, op, ufunc)


_COMPARE: dict[OpKind, Callable[..., F32]] = {
    OpKind.LT: np.less, OpKind.LE: np.less_equal, OpKind.GT: np.greater,
    OpKind.GE: np.greater_equal, OpKind.EQ: np.equal, OpKind.NE: np.not_equal,
}


_HANDLERS: dict[OpKind, Handler] = {
    OpKind.SEND: GroupEvaluator._send, OpKind.RECV: GroupEvaluator._recv,
    OpKind.LOAD: GroupEvaluator._load, OpKind.STORE: GroupEvaluator._store,
    OpKind.DOT: GroupEvaluator._dot, OpKind.TRANS: GroupEvaluator._trans,
    OpKind.RESHAPE: GroupEvaluator._reshape, OpKind.CAST: GroupEvaluator._cast,
    OpKind.VIEW: GroupEvaluator._view,
    OpKind.FULL: GroupEvaluator._full,
    OpKind.MAX: GroupEvaluator._reduce, OpKind.SUM: GroupEvaluator._reduce,
    OpKind.ARANGE: GroupEvaluator._arange, OpKind.WHERE: GroupEvaluator._select,
}
# The ufunc is bound per kind here, once, rather than looked up per op (enum hashing is
# a Python-level call).
for _kind, _ufunc in _BINARY.items():
    _HANDLERS[_kind] = functools.partial(_call_binary, ufunc=_ufunc)
for _kind, _ufunc in _UNARY.items():
    _HANDLERS[_kind] = functools.partial(_call_unary, ufunc=_ufunc)
for _kind, _ufunc in _COMPARE.items():
    _HANDLERS[_kind] = functools.partial(_call_compare, ufunc=_ufunc)
assert set(_HANDLERS) == set(OpKind), "every op kind needs a handler"
