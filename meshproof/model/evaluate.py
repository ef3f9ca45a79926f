"""The one evaluation core of the schedule IR.

A *domain* gives the IR a meaning -- exact symbolic forms (the verifier's algebra), concrete
numbers in float64 or 40-digit arithmetic (witnesses), rounding errors, the simulator's
float32 -- by implementing `OpSemantics`: one method per op family. `Evaluation` runs a
schedule for one domain in data-dependency order, and its `_plan` is the only dispatch on
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

The domain interface (`OpSemantics` and the enums it takes) is model/op_semantics.py, the
dependencies model/dependencies.py; this module is the evaluation.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Generic, assert_never

from meshproof.model.channel_table import ChannelTable
from meshproof.model.dependencies import Dependencies, _Defining
from meshproof.model.memory import RankMemory
from meshproof.model.op_semantics import (
    Binary,
    Compare,
    E,
    Key,
    Lost,
    OpSemantics,
    OpsProgress,
    Reduction,
    Reload,
    Unary,
    V,
)
from meshproof.model.schedule import Const, Op, OpKind, Schedule, ValueRef


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
        self._plans: dict[int, Callable[[int], V]] = {}
        self._planned: list[Op] = []

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

    def run(self, progress: OpsProgress | None = None) -> None:
        """Every value: program order with unbounded queues, then the rest on demand.

        A rank runs until a recv whose message is not sent yet; it waits on the sender's
        rank and runs again when that rank has moved (a worklist, not rounds over every
        rank: a mesh's fan-in would otherwise cost ranks x rounds). `progress` is told
        (ops run, ops in all) about every 1/200th of the schedule."""
        programs = self.schedule.programs
        total = sum(len(p.ops) for p in programs) if progress is not None else 0
        step = max(1, total // 200)
        done = told = 0
        pcs = [0] * len(programs)
        waiting: dict[int, list[int]] = {}
        ready = deque(range(len(programs)))
        queued = [True] * len(programs)
        while ready:
            r = ready.popleft()
            queued[r] = False
            ops = programs[r].ops
            pc, blocker = self._advance(r, ops, pcs[r])
            moved = pc != pcs[r]
            if progress is not None:
                done += pc - pcs[r]
                if done - told >= step:
                    told = done
                    progress(done, total)
            pcs[r] = pc
            if blocker >= 0:
                waiting.setdefault(blocker, []).append(r)
            if moved:
                for w in waiting.pop(r, ()):
                    if not queued[w]:
                        queued[w] = True
                        ready.append(w)
        for r, prog in enumerate(programs):
            for op in prog.ops[pcs[r]:]:
                if op.out is not None:
                    self.value(r, op.out)
        if progress is not None:
            progress(total, total)

    def _advance(self, rank: int, ops: tuple[Op, ...], pc: int) -> tuple[int, int]:
        """Run one rank from pc: the new pc and the rank it waits on (-1: none)."""
        values = self.values
        mine = values[rank]
        recv_source = self.dependencies.recv_source
        plans = self._plans
        n = len(ops)
        while pc < n:
            op = ops[pc]
            out = op.out
            if out is None:
                pc += 1
                continue
            if op.kind is OpKind.RECV:
                src = recv_source(rank, op)
                if type(src) is tuple and src[1] not in values[src[0]]:
                    return pc, src[0]   # its message is not sent yet
            plan = plans.get(id(op))
            mine[out] = plan(rank) if plan is not None else self._apply(rank, op)
            pc += 1
        return pc, -1

    def _arg(self, rank: int, op: Op, i: int) -> V:
        a = op.args[i]
        if isinstance(a, Const):
            return self.domain.const(rank, op, a.value)
        return self.values[rank][a.id]

    def _apply(self, rank: int, op: Op) -> V:
        plan = self._plans.get(id(op))
        if plan is None:
            plan = self._plans[id(op)] = self._plan(op)
            self._planned.append(op)   # keeps id(op) unique while the plan lives
        return plan(rank)

    def _reader(self, op: Op, i: int) -> Callable[[int], V]:
        """How an op's operand i is read on a rank."""
        a = op.args[i]
        values = self.values
        if isinstance(a, Const):
            const, value = self.domain.const, a.value
            return lambda rank: const(rank, op, value)
        vid = a.id
        return lambda rank: values[rank][vid]

    def _unary(self, op: Op, method: Callable[[int, Op, V], V]) -> Callable[[int], V]:
        a = op.args[0]
        if isinstance(a, ValueRef):
            values, vid = self.values, a.id
            return lambda rank: method(rank, op, values[rank][vid])
        x = self._reader(op, 0)
        return lambda rank: method(rank, op, x(rank))

    def _fn(self, op: Op, method: Callable[[int, Op, E, V], V], fn: E) -> Callable[[int], V]:
        a = op.args[0]
        if isinstance(a, ValueRef):
            values, vid = self.values, a.id
            return lambda rank: method(rank, op, fn, values[rank][vid])
        x = self._reader(op, 0)
        return lambda rank: method(rank, op, fn, x(rank))

    def _binary(self, op: Op, fn: Binary) -> Callable[[int], V]:
        a, b = op.args
        binary = self.domain.binary
        if isinstance(a, ValueRef) and isinstance(b, ValueRef):
            values, ai, bi = self.values, a.id, b.id
            return lambda rank: binary(rank, op, fn, values[rank][ai], values[rank][bi])
        x, y = self._reader(op, 0), self._reader(op, 1)
        return lambda rank: binary(rank, op, fn, x(rank), y(rank))

    def _recv(self, op: Op) -> Callable[[int], V]:
        recv, values, source = self.domain.recv, self.values, self.dependencies.recv_source

        def plan(rank: int) -> V:
            src = source(rank, op)
            return recv(rank, op, src if isinstance(src, Lost) else values[src[0]][src[1]])
        return plan

    def _load(self, op: Op) -> Callable[[int], V]:
        load, values, memory = self.domain.load, self.values, self.dependencies.rank_memory

        def plan(rank: int) -> V:
            source = memory(rank).loads.get(op.index)
            reload = None if source is None else Reload(
                tuple((w, values[rank][w.value_args[0]]) for w in source.writers),
                source.uncovered)
            return load(rank, op, reload)
        return plan

    def _plan(self, op: Op) -> Callable[[int], V]:  # noqa: C901 - the one dispatch on op kinds
        """What one op does on any rank (ops are shared by the ranks that trace them
        alike, so this runs once per distinct op)."""
        d = self.domain
        kind = op.kind
        match kind:
            case OpKind.RECV:
                return self._recv(op)
            case OpKind.LOAD:
                return self._load(op)
            case OpKind.FULL:
                full = d.full
                return lambda rank: full(rank, op)
            case OpKind.CAST:
                return self._unary(op, d.cast)
            case OpKind.RESHAPE:
                return self._unary(op, d.reshape)
            case OpKind.VIEW:
                return self._unary(op, d.view_slice)
            case OpKind.TRANS:
                return self._unary(op, d.trans)
            case OpKind.EXP:
                return self._fn(op, d.unary, Unary.EXP)
            case OpKind.EXP2:
                return self._fn(op, d.unary, Unary.EXP2)
            case OpKind.LOG:
                return self._fn(op, d.unary, Unary.LOG)
            case OpKind.LOG2:
                return self._fn(op, d.unary, Unary.LOG2)
            case OpKind.LOG1P:
                return self._fn(op, d.unary, Unary.LOG1P)
            case OpKind.SIGMOID:
                return self._fn(op, d.unary, Unary.SIGMOID)
            case OpKind.NEG:
                return self._fn(op, d.unary, Unary.NEG)
            case OpKind.ADD:
                return self._binary(op, Binary.ADD)
            case OpKind.SUB:
                return self._binary(op, Binary.SUB)
            case OpKind.MUL:
                return self._binary(op, Binary.MUL)
            case OpKind.DIV:
                return self._binary(op, Binary.DIV)
            case OpKind.MAXIMUM:
                return self._binary(op, Binary.MAXIMUM)
            case OpKind.MINIMUM:
                return self._binary(op, Binary.MINIMUM)
            case OpKind.MAX:
                return self._fn(op, d.reduce, Reduction.MAX)
            case OpKind.SUM:
                return self._fn(op, d.reduce, Reduction.SUM)
            case OpKind.DOT:
                x, y, dot = self._reader(op, 0), self._reader(op, 1), d.dot
                return lambda rank: dot(rank, op, x(rank), y(rank))
            case OpKind.ARANGE:
                arange = d.arange
                return lambda rank: arange(rank, op)
            case OpKind.LT | OpKind.LE | OpKind.GT | OpKind.GE | OpKind.EQ | OpKind.NE:
                x, y, compare, fn = self._reader(op, 0), self._reader(op, 1), d.compare, \
                    Compare(kind.value)
                return lambda rank: compare(rank, op, fn, x(rank), y(rank))
            case OpKind.WHERE:
                c, x, y, where = self._reader(op, 0), self._reader(op, 1), \
                    self._reader(op, 2), d.where
                return lambda rank: where(rank, op, c(rank), x(rank), y(rank))
            case OpKind.STORE | OpKind.SEND:
                raise AssertionError(f"{kind.value} defines no value")
            case _:
                assert_never(kind)


# the domain interface (op_semantics.py) and Dependencies stay importable from here: the
# modules of verify/semantics/ being split elsewhere read them here
__all__ = ["Binary", "Compare", "Dependencies", "Evaluation", "Key", "Lost", "OpSemantics",
           "Reduction", "Reload", "Unary"]
