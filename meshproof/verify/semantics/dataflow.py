"""Evaluation in data-dependency order, shared by the symbolic and the numeric evaluator.

A value depends on its op's operands; a recv on the value its matching send sent (the
k-th send of the link), a load on the stores of the same rank that it reads back. Values
are evaluated on demand with an explicit stack, so the dataflow of a schedule that
deadlocks is still defined, and a value that depends on itself through messages is found.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from meshproof.model.channels import NO_LINK, OUTSIDE, ChannelTable, OpRef
from meshproof.model.schedule import Op, OpKind, Schedule, ValueRef
from meshproof.verify.memory import RankMemory, rank_memory

Key = tuple[int, int]   # (rank index, value id)
R = TypeVar("R")


class Dataflow(Generic[R]):
    def __init__(self, schedule: Schedule, table: ChannelTable) -> None:
        self.schedule = schedule
        self.table = table
        self.values: dict[Key, R] = {}
        self.defining: dict[Key, Op] = {}
        for r, prog in enumerate(schedule.programs):
            for op in prog.ops:
                if op.out is not None:
                    self.defining[(r, op.out)] = op
        self.memory: dict[int, RankMemory] = {}

    def rank_memory(self, rank: int) -> RankMemory:
        if rank not in self.memory:
            self.memory[rank] = rank_memory(self.schedule.programs[rank])
        return self.memory[rank]

    def recv_source(self, rank: int, op: Op) -> Key | str:
        """The key of the value a recv gets, or why none arrives."""
        cols = self.table.cols
        g = cols.row(OpRef(rank, op.index))
        status = int(cols.status[g])
        d = op.dir.value if op.dir else "?"
        if status == NO_LINK:
            return f"recv {d} uses a link the wiring does not have, so no message arrives"
        if status == OUTSIDE:
            return f"recv {d} waits on an endpoint outside the launch, which never sends"
        p = int(cols.partner[g])
        if p < 0:
            return f"recv {d} has no matching send (message {int(cols.k[g])} never arrives)"
        s_rank = int(cols.rank[p])
        arg = self.schedule.programs[s_rank].ops[int(cols.op[p])].args[0]
        assert isinstance(arg, ValueRef)
        return (s_rank, arg.id)

    def deps(self, key: Key) -> list[Key]:
        rank = key[0]
        op = self.defining[key]
        if op.kind is OpKind.RECV:
            src = self.recv_source(rank, op)
            return [src] if isinstance(src, tuple) else []
        if op.kind is OpKind.LOAD:
            source = self.rank_memory(rank).loads.get(op.index)
            return [(rank, w.value_args[0]) for w in source.writers] if source else []
        return [(rank, a.id) for a in op.args if isinstance(a, ValueRef)]

    def evaluate(self, key: Key) -> R:
        raise NotImplementedError

    def cycle(self, key: Key) -> R:
        raise NotImplementedError

    def result(self, rank: int, vid: int) -> R:
        key = (rank, vid)
        if key in self.values:
            return self.values[key]
        on_stack: set[Key] = set()
        stack: list[tuple[Key, bool]] = [(key, False)]
        while stack:
            k, expanded = stack.pop()
            if k in self.values:
                continue
            if expanded:
                on_stack.discard(k)
                self.values[k] = self.evaluate(k)
                continue
            if k in on_stack:
                self.values[k] = self.cycle(k)
                continue
            on_stack.add(k)
            stack.append((k, True))
            for dep in self.deps(k):
                if dep not in self.values:
                    stack.append((dep, False))
        return self.values[key]
