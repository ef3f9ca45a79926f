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
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from meshproof.errors import HarnessError, InternalError, SimulationRefused
from meshproof.model.channels import ChannelTable, OpRef
from meshproof.model.schedule import Const, DType, Op, OpKind, Schedule, ValueRef
from meshproof.sim.groups import Group
from meshproof.sim.harness import Buffer
from meshproof.sim.rounding import F32, round_to

Memory = dict[str, Buffer]
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


@dataclass(frozen=True, slots=True)
class GroupPlan:
    ranks: tuple[RankPlan, ...]


def plan_group(schedule: Schedule, table: ChannelTable, group: Group) -> GroupPlan:
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
        plans.append(RankPlan(prog.endpoint.describe(), prog.ops,
                              tuple(_HANDLERS[op.kind] for op in prog.ops),
                              _free_points(prog.ops), tuple(keys), tuple(delivered)))
    return GroupPlan(tuple(plans))


def _expand(x: F32, ndim: int) -> F32:
    """Give a (batch, *shape) array `ndim` non-batch axes, numpy-broadcasting style."""
    missing = ndim - (x.ndim - 1)
    if missing <= 0:
        return x
    return x.reshape(x.shape[:1] + (1,) * missing + x.shape[1:])


class GroupEvaluator:
    """Runs the ranks of one group plan on batched memories (one per group rank)."""

    def __init__(self, plan: GroupPlan, memories: list[Memory], batch: int) -> None:
        self.plan = plan
        self.memories = memories
        self.batch = batch
        self.values: list[dict[int, F32]] = [{} for _ in plan.ranks]
        self.messages: dict[tuple[int, int], _Message] = {}

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
        if isinstance(arg, Const):
            return np.float32(arg.value)  # type: ignore[return-value]
        return self.values[i][arg.id]

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
        mem = self.memories[i]
        assert op.ptr is not None
        buf = mem.get(op.ptr)
        if buf is None:
            raise HarnessError(
                f"{self._where(i, op)}: error: load from {op.ptr}, which the harness does not "
                f"provide and the kernel never stored to (buffers: {', '.join(sorted(mem))}); "
                f"if {op.ptr} holds K or V, name the K and V buffers with --sharded (the "
                f"harness fills the first two with K and V), e.g. --sharded {op.ptr},...")
        n = math.prod(op.shape)
        if op.offset + n > buf.data.shape[1]:
            raise HarnessError(
                f"{self._where(i, op)}: error: load of {op.ptr}[{op.offset}:{op.offset + n}] "
                f"reads past the harness buffer of {buf.data.shape[1]} elements; check the "
                "shape arguments (S_q, S_kv_per_rank, h_q, h_kv, d_head)")
        view = buf.data[:, op.offset:op.offset + n].reshape(self.batch, *op.shape)
        if op.dtype is DType.F32 or buf.dtype is op.dtype:
            return view
        return round_to(view, op.dtype)

    def _store(self, i: int, op: Op) -> object:
        value = self._arg(i, op.args[0])
        mem = self.memories[i]
        assert op.ptr is not None
        n = math.prod(op.shape)
        end = op.offset + n
        buf = mem.get(op.ptr)
        if buf is None:  # a buffer the harness does not provide: scratch memory
            data = np.full((self.batch, end), np.nan, np.float32)
            buf = Buffer(data, op.dtype, shared=False, fixed=False)
        elif end > buf.data.shape[1]:
            if buf.fixed:
                raise HarnessError(
                    f"{self._where(i, op)}: error: store to {op.ptr}[{op.offset}:{end}] "
                    f"writes past the harness buffer of {buf.data.shape[1]} elements; check "
                    "the shape arguments (S_q, h_q, d_head)")
            data = np.full((self.batch, end), np.nan, np.float32)
            data[:, :buf.data.shape[1]] = buf.data
            buf = Buffer(data, buf.dtype, shared=False, fixed=False)
        elif buf.shared:  # copy on write: harness inputs are shared between ranks
            buf = Buffer(buf.data.copy(), buf.dtype, shared=False, fixed=buf.fixed)
        if buf.dtype is not op.dtype:  # mixed contents: loads must round again
            buf = Buffer(buf.data, DType.F32, shared=False, fixed=buf.fixed)
        buf.data[:, op.offset:end] = value.reshape(self.batch, n)
        mem[op.ptr] = buf
        return None

    def _dot(self, i: int, op: Op) -> object:
        a, b = self._arg(i, op.args[0]), self._arg(i, op.args[1])
        nd = max(a.ndim, b.ndim) - 1
        return self._computed(op, np.matmul(_expand(a, nd), _expand(b, nd)))

    def _binary(self, i: int, op: Op, ufunc: Callable[..., F32]) -> object:
        nd = len(op.shape)
        a, b = op.args
        x, y = self._arg(i, a), self._arg(i, b)
        x = _expand(x, nd) if isinstance(a, ValueRef) else x
        y = _expand(y, nd) if isinstance(b, ValueRef) else y
        return self._computed(op, ufunc(x, y))

    def _unary(self, i: int, op: Op, ufunc: Callable[..., F32]) -> object:
        return self._computed(op, ufunc(self._arg(i, op.args[0])))

    def _reduce(self, i: int, op: Op) -> object:
        assert op.axis is not None
        reduce = np.max if op.kind is OpKind.MAX else np.sum
        return self._computed(op, reduce(self._arg(i, op.args[0]), axis=op.axis + 1,
                                         keepdims=op.keepdims))

    def _softmax(self, i: int, op: Op) -> object:
        assert op.axis is not None
        x = self._arg(i, op.args[0])
        e = np.exp(x - np.max(x, axis=op.axis + 1, keepdims=True))
        return self._computed(op, e / np.sum(e, axis=op.axis + 1, keepdims=True))

    def _trans(self, i: int, op: Op) -> object:
        assert op.perm is not None
        return np.transpose(self._arg(i, op.args[0]), (0, *(p + 1 for p in op.perm)))

    def _reshape(self, i: int, op: Op) -> object:
        return self._arg(i, op.args[0]).reshape(self.batch, *op.shape)

    def _cast(self, i: int, op: Op) -> object:
        # a widening cast (f16 -> f32) changes nothing; a narrowing one rounds a copy
        return round_to(self._arg(i, op.args[0]), op.dtype)

    def _full(self, i: int, op: Op) -> object:
        assert op.fill is not None
        return self._computed(op, np.full((self.batch, *op.shape), op.fill, np.float32))


def _call_binary(ev: GroupEvaluator, i: int, op: Op, ufunc: Callable[..., F32]) -> object:
    return ev._binary(i, op, ufunc)


def _call_unary(ev: GroupEvaluator, i: int, op: Op, ufunc: Callable[..., F32]) -> object:
    return ev._unary(i, op, ufunc)


_HANDLERS: dict[OpKind, Handler] = {
    OpKind.SEND: GroupEvaluator._send, OpKind.RECV: GroupEvaluator._recv,
    OpKind.LOAD: GroupEvaluator._load, OpKind.STORE: GroupEvaluator._store,
    OpKind.DOT: GroupEvaluator._dot, OpKind.TRANS: GroupEvaluator._trans,
    OpKind.RESHAPE: GroupEvaluator._reshape, OpKind.CAST: GroupEvaluator._cast,
    OpKind.FULL: GroupEvaluator._full, OpKind.SOFTMAX: GroupEvaluator._softmax,
    OpKind.MAX: GroupEvaluator._reduce, OpKind.SUM: GroupEvaluator._reduce,
}
# The ufunc is bound per kind here, once, rather than looked up per op (enum hashing is
# a Python-level call).
for _kind, _ufunc in _BINARY.items():
    _HANDLERS[_kind] = functools.partial(_call_binary, ufunc=_ufunc)
for _kind, _ufunc in _UNARY.items():
    _HANDLERS[_kind] = functools.partial(_call_unary, ufunc=_ufunc)
assert set(_HANDLERS) == set(OpKind), "every op kind needs a handler"


def _free_points(ops: tuple[Op, ...]) -> tuple[tuple[int, ...], ...]:
    """Per op index: the values whose last use is that op (or that nobody uses)."""
    last: dict[int, int] = {}
    for op in ops:
        if op.out is not None:
            last[op.out] = op.index
        for vid in op.value_args:
            last[vid] = op.index
    frees: list[list[int]] = [[] for _ in ops]
    for vid, index in last.items():
        frees[index].append(vid)
    return tuple(tuple(f) for f in frees)
