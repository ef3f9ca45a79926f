"""The dependencies of a schedule's values: an op depends on its operands; a recv on the value
its matching send sent (the k-th send of the link, model/channels.py); a load on the stores
of the same rank that it reads back (model/memory.py).
"""

from __future__ import annotations

from meshproof.model.channel_table import NO_LINK, OUTSIDE, ChannelTable
from meshproof.model.memory import RankMemory, rank_memory
from meshproof.model.op_semantics import Key, Lost
from meshproof.model.schedule import Op, OpKind, Schedule, ValueRef


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
            self._rank_sources(rank)
            hit = self._sources[(rank, op.index)]
        return hit

    def _rank_sources(self, rank: int) -> None:
        """The sources of every recv of one rank, read off the channel table's columns."""
        cols = self.table.cols
        lo, hi = int(cols.start[rank]), int(cols.start[rank + 1])
        recv = ~cols.send[lo:hi]
        ops = cols.op[lo:hi][recv].tolist()
        status = cols.status[lo:hi][recv].tolist()
        partner = cols.partner[lo:hi][recv].tolist()
        k = cols.k[lo:hi][recv].tolist()
        src_rank = cols.rank.take(cols.partner[lo:hi][recv].clip(0)).tolist()
        src_value = cols.value.take(cols.partner[lo:hi][recv].clip(0)).tolist()
        program = self.schedule.programs[rank].ops
        sources = self._sources
        for i, o in enumerate(ops):
            if status[i] == NO_LINK or status[i] == OUTSIDE or partner[i] < 0:
                sources[(rank, o)] = self._lost(program[o], status[i], k[i])
            else:
                sources[(rank, o)] = (src_rank[i], src_value[i])

    @staticmethod
    def _lost(op: Op, status: int, k: int) -> Lost:
        d = op.dir.value if op.dir else "?"
        if status == NO_LINK:
            return Lost(f"recv {d} uses a link the wiring does not have, so no message "
                        "arrives")
        if status == OUTSIDE:
            return Lost(f"recv {d} waits on an endpoint outside the launch, which never sends")
        return Lost(f"recv {d} has no matching send (message {k} never arrives)")

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


class _Defining:
    """`evaluation.defining[rank][vid]`: the op that defines a value."""

    __slots__ = ("_deps",)

    def __init__(self, deps: Dependencies) -> None:
        self._deps = deps

    def __getitem__(self, rank: int) -> dict[int, Op]:
        return self._deps.defining(rank)
