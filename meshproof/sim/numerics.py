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
"""

from __future__ import annotations

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

_BINARY: dict[OpKind, Callable[..., F32]] = {
    OpKind.ADD: np.add, OpKind.SUB: np.subtract, OpKind.MUL: np.multiply,
    OpKind.DIV: np.divide, OpKind.MAXIMUM: np.maximum, OpKind.MINIMUM: np.minimum,
}
_UNARY: dict[OpKind, Callable[..., F32]] = {
    OpKind.EXP: np.exp, OpKind.LOG: np.log, OpKind.NEG: np.negative,
}


@dataclass(frozen=True, slots=True)
class _Message:
    value: F32
    dtype: DType


def _expand(x: F32, ndim: int) -> F32:
    """Give a (batch, *shape) array `ndim` non-batch axes, numpy-broadcasting style."""
    missing = ndim - (x.ndim - 1)
    if missing <= 0:
        return x
    return x.reshape(x.shape[:1] + (1,) * missing + x.shape[1:])


class GroupEvaluator:
    """Runs the ranks of one group (the class representative) on batched memories."""

    def __init__(self, schedule: Schedule, table: ChannelTable, group: Group,
                 memories: list[Memory], batch: int) -> None:
        self.schedule = schedule
        self.table = table
        self.ranks = group.ranks
        self.memories = memories
        self.batch = batch
        self.values: list[dict[int, F32]] = [{} for _ in group.ranks]
        self.messages: dict[tuple[int, int], _Message] = {}
        self.frees = [_free_points(schedule.programs[r].ops) for r in group.ranks]

    def run(self) -> list[Memory]:
        pcs = [0] * len(self.ranks)
        progs = [self.schedule.programs[r].ops for r in self.ranks]
        with np.errstate(all="ignore"):
            while True:
                moved = False
                for i, ops in enumerate(progs):
                    while pcs[i] < len(ops) and self._step(i, ops[pcs[i]]):
                        pcs[i] += 1
                        moved = True
                if all(pc == len(ops) for pc, ops in zip(pcs, progs, strict=True)):
                    return self.memories
                if not moved:
                    raise InternalError("numeric evaluation blocked although the progress run "
                                        "found no deadlock")

    # --- one op ---------------------------------------------------------------------
    def _where(self, i: int, op: Op) -> str:
        ep = self.schedule.programs[self.ranks[i]].endpoint
        return f"{op.source}: rank {ep.describe()}"

    def _arg(self, i: int, arg: ValueRef | Const) -> F32:
        if isinstance(arg, Const):
            return np.float32(arg.value)  # type: ignore[return-value]
        return self.values[i][arg.id]

    def _step(self, i: int, op: Op) -> bool:
        """Execute `op` of group rank i; False if it is a recv whose message is not there."""
        kind = op.kind
        vals = self.values[i]
        result: F32 | None = None
        # A computed result is a new float32 array: round it to the op's dtype in place.
        # Loads and receives round in their helpers; views (trans, reshape) keep the dtype.
        computed = True
        if kind is OpKind.RECV:
            msg = self.messages.pop(self._message_key(i, op), None)
            if msg is None:
                return False
            result, computed = self._received(i, op, msg), False
        elif kind is OpKind.SEND:
            key = self._message_key(i, op)
            ch = self.table.channels[key[0]]
            if key[1] < len(ch.recvs):  # a message nobody receives is dropped
                self.messages[key] = _Message(self._arg(i, op.args[0]), op.dtype)
        elif kind is OpKind.LOAD:
            result, computed = self._load(i, op), False
        elif kind is OpKind.STORE:
            self._store(i, op, self._arg(i, op.args[0]))
        elif kind is OpKind.DOT:
            a, b = self._arg(i, op.args[0]), self._arg(i, op.args[1])
            nd = max(a.ndim, b.ndim) - 1
            result = np.matmul(_expand(a, nd), _expand(b, nd))
        elif kind in _BINARY:
            nd = len(op.shape)
            x, y = (self._arg(i, a) for a in op.args)
            x = _expand(x, nd) if isinstance(op.args[0], ValueRef) else x
            y = _expand(y, nd) if isinstance(op.args[1], ValueRef) else y
            result = _BINARY[kind](x, y)
        elif kind in _UNARY:
            result = _UNARY[kind](self._arg(i, op.args[0]))
        elif kind is OpKind.MAX or kind is OpKind.SUM:
            x = self._arg(i, op.args[0])
            assert op.axis is not None
            reduce = np.max if kind is OpKind.MAX else np.sum
            result = reduce(x, axis=op.axis + 1, keepdims=op.keepdims)
        elif kind is OpKind.SOFTMAX:
            x = self._arg(i, op.args[0])
            assert op.axis is not None
            e = np.exp(x - np.max(x, axis=op.axis + 1, keepdims=True))
            result = e / np.sum(e, axis=op.axis + 1, keepdims=True)
        elif kind is OpKind.TRANS:
            assert op.perm is not None
            result = np.transpose(self._arg(i, op.args[0]), (0, *(p + 1 for p in op.perm)))
            computed = False
        elif kind is OpKind.RESHAPE:
            result = self._arg(i, op.args[0]).reshape(self.batch, *op.shape)
            computed = False
        elif kind is OpKind.CAST:
            # a widening cast (f16 -> f32) changes nothing; a narrowing one rounds a copy
            result, computed = round_to(self._arg(i, op.args[0]), op.dtype), False
        elif kind is OpKind.FULL:
            assert op.fill is not None
            result = np.full((self.batch, *op.shape), op.fill, np.float32)
        else:  # pragma: no cover - every OpKind is handled above
            raise InternalError(f"the simulator does not evaluate {kind.value} ops")
        if result is not None and op.out is not None:
            if result.dtype != np.float32:
                result = result.astype(np.float32)
            if computed and op.dtype is not DType.F32:
                result = round_to(result, op.dtype, inplace=True)
            vals[op.out] = result
        for vid in self.frees[i].get(op.index, ()):
            vals.pop(vid, None)
        return True

    def _message_key(self, i: int, op: Op) -> tuple[int, int]:
        ref = OpRef(self.ranks[i], op.index)
        return self.table.position[ref]

    def _received(self, i: int, op: Op, msg: _Message) -> F32:
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

    def _load(self, i: int, op: Op) -> F32:
        mem = self.memories[i]
        assert op.ptr is not None
        buf = mem.get(op.ptr)
        if buf is None:
            raise HarnessError(
                f"{self._where(i, op)}: error: load from {op.ptr}, which the harness does not "
                f"provide and the kernel never stored to (buffers: {', '.join(sorted(mem))})")
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

    def _store(self, i: int, op: Op, value: F32) -> None:
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


def _free_points(ops: tuple[Op, ...]) -> dict[int, tuple[int, ...]]:
    """Per op index: the values whose last use is that op (or that nobody uses)."""
    last: dict[int, int] = {}
    for op in ops:
        if op.out is not None:
            last[op.out] = op.index
        for vid in op.value_args:
            last[vid] = op.index
    frees: dict[int, list[int]] = {}
    for vid, index in last.items():
        frees.setdefault(index, []).append(vid)
    return {k: tuple(v) for k, v in frees.items()}
