"""The one evaluation core of the schedule IR.

A *domain* gives the IR a meaning -- exact symbolic forms (the verifier's algebra), concrete
numbers in float64 or 40-digit arithmetic (witnesses), rounding errors, the simulator's
float32 -- by implementing `OpSemantics`: one method per op family. `Evaluation` runs a
schedule for one domain in data-dependency order, and its `_apply` is the only dispatch on
the op kind in the code base: exhaustive (`assert_never`), so a new op kind is one enum
member in model/schedule.py, one line here, and one case per domain, and mypy names every
domain that lacks it.

Dependencies: an op depends on its operands; a recv on the value its matching send sent
(the k-th send of the link, model/channels.py); a load on the stores of the same rank that
it reads back (model/memory.py). `run()` evaluates every value in program order with
unbounded queues (a rank waits only on a recv whose send has not run) and finishes what
program order cannot reach -- the dataflow of a schedule that deadlocks -- on demand, so a
value that depends on itself through messages is found (`OpSemantics.cycle`). `value()`
evaluates only the cone of one value, on demand.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Generic, Protocol, TypeVar, assert_never

from meshproof.model.channels import ChannelTable, OpRef, PortStatus
from meshproof.model.memory import RankMemory, rank_memory
from meshproof.model.schedule import Const, Op, OpKind, Schedule, ValueRef

V = TypeVar("V")
Key = tuple[int, int]   # (rank index, value id)


class Unary(Enum):
    EXP = "exp"
    EXP2 = "exp2"
    LOG = "log"
    LOG2 = "log2"
    LOG1P = "log1p"
    SIGMOID = "sigmoid"
    NEG = "neg"


class Binary(Enum):
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    MAXIMUM = "maximum"
    MINIMUM = "minimum"


class Reduction(Enum):
    MAX = "max"
    SUM = "sum"


@dataclass(frozen=True, slots=True)
class Lost:
    """A recv whose message never arrives, and why."""

    reason: str


@dataclass(frozen=True, slots=True)
class Reload(Generic[V]):
    """What a load reads back: the stores of the same rank (in program order, with the
    values they stored) and whether some element was never stored (the buffer's input)."""

    stores: tuple[tuple[Op, V], ...]
    uncovered: bool


class OpSemantics(Protocol[V]):
    """A meaning of the IR, one method per op family (the op is passed for its
    attributes: shape, dtype, axis, perm, ptr, offset, fill, source)."""

    def const(self, rank: int, op: Op, value: float) -> V:
        """A Python scalar operand of `op`."""

    def load(self, rank: int, op: Op, reload: Reload[V] | None) -> V: ...

    def full(self, rank: int, op: Op) -> V: ...

    def recv(self, rank: int, op: Op, sent: V | Lost) -> V: ...

    def cast(self, rank: int, op: Op, x: V) -> V: ...

    def reshape(self, rank: int, op: Op, x: V) -> V: ...

    def trans(self, rank: int, op: Op, x: V) -> V: ...

    def unary(self, rank: int, op: Op, fn: Unary, x: V) -> V: ...

    def binary(self, rank: int, op: Op, fn: Binary, a: V, b: V) -> V: ...

    def reduce(self, rank: int, op: Op, fn: Reduction, x: V) -> V: ...

    def softmax(self, rank: int, op: Op, x: V) -> V: ...

    def dot(self, rank: int, op: Op, a: V, b: V) -> V: ...

    def cycle(self, rank: int, op: Op) -> V:
        """A value that depends on itself through messages."""


class Dependencies:
    """What every evaluation of one schedule shares: the op defining each value, each
    rank's memory (what its loads read back), each recv's source. Built lazily, per rank,
    once for every domain that evaluates the schedule."""

    def __init__(self, schedule: Schedule, table: ChannelTable) -> None:
        self.schedule = schedule
        self.table = table
        self._defining: list[dict[int, Op] | None] = [None] * len(schedule.programs)
        self._memory: dict[int, RankMemory] = {}
        self._sources: dict[tuple[int, int], Key | Lost] = {}

    def defining(self, rank: int) -> dict[int, Op]:
        ops = self._defining[rank]
        if ops is None:
            ops = self._defining[rank] = {op.out: op for op in self.schedule.programs[rank].ops
                                          if op.out is not None}
        return ops

    def rank_memory(self, rank: int) -> RankMemory:
        memory = self._memory.get(rank)
        if memory is None:
            memory = self._memory[rank] = rank_memory(self.schedule.programs[rank])
        return memory

    def recv_source(self, rank: int, op: Op) -> Key | Lost:
        """The key of the value a recv gets, or why none arrives."""
        hit = self._sources.get((rank, op.index))
        if hit is None:
            hit = self._sources[(rank, op.index)] = self._source(rank, op)
        return hit

    def _source(self, rank: int, op: Op) -> Key | Lost:
        ref = OpRef(rank, op.index)
        use = self.table.port_use[ref]
        d = op.dir.value if op.dir else "?"
        if use.status is PortStatus.NO_LINK:
            return Lost(f"recv {d} uses a link the wiring does not have, so no message "
                        "arrives")
        if use.status is PortStatus.OUTSIDE:
            return Lost(f"recv {d} waits on an endpoint outside the launch, which never sends")
        ch_i, k = self.table.position[ref]
        ch = self.table.channels[ch_i]
        if k >= len(ch.sends):
            return Lost(f"recv {d} has no matching send (message {k} never arrives)")
        s = ch.sends[k]
        arg = self.schedule.programs[s.rank].ops[s.op].args[0]
        assert isinstance(arg, ValueRef)
        return (s.rank, arg.id)

    def deps(self, key: Key) -> list[Key]:
        rank = key[0]
        op = self.defining(rank)[key[1]]
        if op.kind is OpKind.RECV:
            src = self.recv_source(rank, op)
            return [src] if isinstance(src, tuple) else []
        if op.kind is OpKind.LOAD:
            source = self.rank_memory(rank).loads.get(op.index)
            return [(rank, w.value_args[0]) for w in source.writers] if source else []
        return [(rank, a.id) for a in op.args if isinstance(a, ValueRef)]


class Evaluation(Generic[V]):
    """The values of one schedule under one domain (per rank: value id -> value)."""

    def __init__(self, schedule: Schedule, table: ChannelTable, domain: OpSemantics[V],
                 dependencies: Dependencies | None = None) -> None:
        self.schedule = schedule
        self.table = table
        self.domain = domain
        self.dependencies = dependencies if dependencies is not None else \
            Dependencies(schedule, table)
        self.values: list[dict[int, V]] = [{} for _ in schedule.programs]

    # --- the IR's dependencies -----------------------------------------------------------
    @property
    def defining(self) -> _Defining:
        return _Defining(self.dependencies)

    def rank_memory(self, rank: int) -> RankMemory:
        return self.dependencies.rank_memory(rank)

    def recv_source(self, rank: int, op: Op) -> Key | Lost:
        return self.dependencies.recv_source(rank, op)

    def deps(self, key: Key) -> list[Key]:
        return self.dependencies.deps(key)

    def cone(self, keys: Iterable[Key]) -> set[Key]:
        """Every value the given ones depend on, themselves included."""
        seen: set[Key] = set()
        stack = list(keys)
        while stack:
            key = stack.pop()
            if key in seen:
                continue
            seen.add(key)
            stack.extend(self.deps(key))
        return seen

    # --- evaluation ----------------------------------------------------------------------
    def get(self, key: Key) -> V | None:
        return self.values[key[0]].get(key[1])

    def value(self, rank: int, vid: int) -> V:
        """The value, evaluating its cone on demand (explicit stack: no recursion limit)."""
        have = self.values[rank].get(vid)
        if have is not None or vid in self.values[rank]:
            return have  # type: ignore[return-value]
        on_stack: set[Key] = set()
        stack: list[tuple[Key, bool]] = [((rank, vid), False)]
        while stack:
            key, expanded = stack.pop()
            r, v = key
            if v in self.values[r]:
                continue
            if expanded:
                on_stack.discard(key)
                self.values[r][v] = self._apply(r, self.dependencies.defining(r)[v])
                continue
            if key in on_stack:
                self.values[r][v] = self.domain.cycle(r, self.dependencies.defining(r)[v])
                continue
            on_stack.add(key)
            stack.append((key, True))
            for dep in self.deps(key):
                if dep[1] not in self.values[dep[0]]:
                    stack.append((dep, False))
        return self.values[rank][vid]

    def run(self) -> None:
        """Every value: program order with unbounded queues, then the rest on demand."""
        programs = self.schedule.programs
        pcs = [0] * len(programs)
        moved = True
        while moved:
            moved = False
            for r, prog in enumerate(programs):
                pc = self._advance(r, prog.ops, pcs[r])
                if pc != pcs[r]:
                    pcs[r], moved = pc, True
        for r, prog in enumerate(programs):
            for op in prog.ops[pcs[r]:]:
                if op.out is not None:
                    self.value(r, op.out)

    def _advance(self, rank: int, ops: tuple[Op, ...], pc: int) -> int:
        values = self.values[rank]
        while pc < len(ops):
            op = ops[pc]
            if op.out is None:
                pc += 1
                continue
            if op.kind is OpKind.RECV:
                src = self.recv_source(rank, op)
                if isinstance(src, tuple) and src[1] not in self.values[src[0]]:
                    return pc   # its message is not sent yet
            values[op.out] = self._apply(rank, op)
            pc += 1
        return pc

    def _arg(self, rank: int, op: Op, i: int) -> V:
        a = op.args[i]
        if isinstance(a, Const):
            return self.domain.const(rank, op, a.value)
        return self.values[rank][a.id]

    def _args2(self, rank: int, op: Op) -> tuple[V, V]:
        return self._arg(rank, op, 0), self._arg(rank, op, 1)

    def _apply(self, rank: int, op: Op) -> V:  # noqa: C901 - the one dispatch on op kinds
        d = self.domain
        kind = op.kind
        match kind:
            case OpKind.RECV:
                src = self.recv_source(rank, op)
                return d.recv(rank, op, src if isinstance(src, Lost) else
                              self.values[src[0]][src[1]])
            case OpKind.LOAD:
                source = self.rank_memory(rank).loads.get(op.index)
                reload = None if source is None else Reload(
                    tuple((w, self.values[rank][w.value_args[0]]) for w in source.writers),
                    source.uncovered)
                return d.load(rank, op, reload)
            case OpKind.FULL:
                return d.full(rank, op)
            case OpKind.CAST:
                return d.cast(rank, op, self._arg(rank, op, 0))
            case OpKind.RESHAPE:
                return d.reshape(rank, op, self._arg(rank, op, 0))
            case OpKind.TRANS:
                return d.trans(rank, op, self._arg(rank, op, 0))
            case OpKind.EXP:
                return d.unary(rank, op, Unary.EXP, self._arg(rank, op, 0))
            case OpKind.EXP2:
                return d.unary(rank, op, Unary.EXP2, self._arg(rank, op, 0))
            case OpKind.LOG:
                return d.unary(rank, op, Unary.LOG, self._arg(rank, op, 0))
            case OpKind.LOG2:
                return d.unary(rank, op, Unary.LOG2, self._arg(rank, op, 0))
            case OpKind.LOG1P:
                return d.unary(rank, op, Unary.LOG1P, self._arg(rank, op, 0))
            case OpKind.SIGMOID:
                return d.unary(rank, op, Unary.SIGMOID, self._arg(rank, op, 0))
            case OpKind.NEG:
                return d.unary(rank, op, Unary.NEG, self._arg(rank, op, 0))
            case OpKind.ADD:
                return d.binary(rank, op, Binary.ADD, *self._args2(rank, op))
            case OpKind.SUB:
                return d.binary(rank, op, Binary.SUB, *self._args2(rank, op))
            case OpKind.MUL:
                return d.binary(rank, op, Binary.MUL, *self._args2(rank, op))
            case OpKind.DIV:
                return d.binary(rank, op, Binary.DIV, *self._args2(rank, op))
            case OpKind.MAXIMUM:
                return d.binary(rank, op, Binary.MAXIMUM, *self._args2(rank, op))
            case OpKind.MINIMUM:
                return d.binary(rank, op, Binary.MINIMUM, *self._args2(rank, op))
            case OpKind.MAX:
                return d.reduce(rank, op, Reduction.MAX, self._arg(rank, op, 0))
            case OpKind.SUM:
                return d.reduce(rank, op, Reduction.SUM, self._arg(rank, op, 0))
            case OpKind.SOFTMAX:
                return d.softmax(rank, op, self._arg(rank, op, 0))
            case OpKind.DOT:
                return d.dot(rank, op, self._arg(rank, op, 0), self._arg(rank, op, 1))
            case OpKind.STORE | OpKind.SEND:
                raise AssertionError(f"{kind.value} defines no value")
            case _:
                assert_never(kind)


class _Defining:
    """`evaluation.defining[rank][vid]`: the op that defines a value."""

    __slots__ = ("_deps",)

    def __init__(self, deps: Dependencies) -> None:
        self._deps = deps

    def __getitem__(self, rank: int) -> dict[int, Op]:
        return self._deps.defining(rank)


__all__ = ["Binary", "Dependencies", "Evaluation", "Key", "Lost", "OpSemantics", "Reduction",
           "Reload", "Unary"]
