"""Run a schedule's communication to completion or to its stuck frontier, at queue depth D.

Ranks are deterministic, each channel has one writer and one reader, and no recv is a
wildcard: the system is a Kahn network, so this single run decides deadlock for every
interleaving at this D (spec/properties.md). The run also yields an execution order — a
timestamp per executed comm op — that back-ends reuse (the order certificate, numeric
evaluation order, provenance order), and the schedule's communication steps
(`hop_steps`, `comm_steps`), which the simulator reports and the diagrams draw.

Semantics (D >= 1): a send on a link is enabled while fewer than D messages are in flight
on it; a recv is enabled when a message is waiting. D = 0 (rendezvous): a send and its
matching recv execute together, when both ranks are at them. An op on a port the wiring
lacks never completes (the hardware raises IpcqInvalidDirection); a recv from an endpoint
outside the launch never returns; a send towards one fills its queue and then blocks.

The run works on the channel table's columns (one row per comm op) with plain lists, about
a microsecond per comm op. `depth_sweep` finds the minimal depth in one pass: a state
reachable at D is reachable at every D' > D (more room only enables sends), so when the run
sticks at D it continues from there at D + 1 instead of starting over.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from meshproof.model.channel_table import NO_LINK, ChannelTable, CommColumns, OpRef
from meshproof.model.schedule import OpKind, Schedule
from meshproof.model.topology import Endpoint


class _StampView(Mapping[OpRef, int]):
    """Executed comm op -> its timestamp."""

    __slots__ = ("_cols", "_stamps")

    def __init__(self, cols: CommColumns, stamps: np.ndarray) -> None:
        self._cols = cols
        self._stamps = stamps

    def __getitem__(self, ref: OpRef) -> int:
        g = self._cols.row(ref) if isinstance(ref, OpRef) else -1
        if g < 0 or self._stamps[g] < 0:
            raise KeyError(ref)
        return int(self._stamps[g])

    def __contains__(self, ref: object) -> bool:
        if not isinstance(ref, OpRef):
            return False
        g = self._cols.row(ref)
        return g >= 0 and bool(self._stamps[g] >= 0)

    def __iter__(self) -> Iterator[OpRef]:
        cols = self._cols
        rows = np.flatnonzero(self._stamps >= 0)
        for r, o in zip(cols.rank[rows].tolist(), cols.op[rows].tolist(), strict=True):
            yield OpRef(r, o)

    def __len__(self) -> int:
        return int(np.count_nonzero(self._stamps >= 0))


@dataclass(frozen=True, slots=True, eq=False)
class Progress:
    """Outcome of one run. `stamps` orders executed comm ops (equal for a rendezvous pair)."""

    depth: int
    stamps: np.ndarray        # int64 per comm row: its timestamp, -1 if it never executed
    # per rank index: the index of the comm op it is stuck at (absent if finished)
    stuck: dict[int, int]
    cols: CommColumns

    @property
    def deadlock(self) -> bool:
        return bool(self.stuck)

    @property
    def stamp(self) -> Mapping[OpRef, int]:
        return _StampView(self.cols, self.stamps)

    @property
    def comm(self) -> tuple[tuple[int, ...], ...]:
        """Comm op indices per rank, in program order (the run's view of each program)."""
        ops, start = self.cols.op.tolist(), self.cols.start.tolist()
        return tuple(tuple(ops[start[r]:start[r + 1]]) for r in range(len(start) - 1))


def comm_indices(schedule: Schedule) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(op.index for op in p.ops if op.kind.is_comm) for p in schedule.programs)


def run(schedule: Schedule, table: ChannelTable, depth: int) -> Progress:
    return _Run(table, depth).run()


class _Run:
    """The state of one run: per rank its next comm row, per channel its counts."""

    def __init__(self, table: ChannelTable, depth: int) -> None:
        cols = table.cols
        self.cols = cols
        self.depth = depth
        n_ch = len(table.channels)
        # one code per row: channel * 4 + 2 * is_send + (port missing)
        self.code: list[int] = (cols.channel.astype(np.int64) * 4 + cols.send * 2 +
                                (cols.status == NO_LINK)).tolist()
        self.end: list[int] = cols.start[1:].tolist()
        self.pc: list[int] = cols.start[:-1].tolist()
        self.sent = [0] * n_ch
        self.received = [0] * n_ch
        self.stamp = array("q", bytes(8 * cols.n))
        self.clock = 0
        # Which rank to wake when a channel changes: its reader (after a send) or its writer.
        reader = np.full(n_ch, -1, dtype=np.int64)
        writer = np.full(n_ch, -1, dtype=np.int64)
        reader[cols.channel[~cols.send]] = cols.rank[~cols.send]
        writer[cols.channel[cols.send]] = cols.rank[cols.send]
        self.reader: list[int] = reader.tolist()
        self.writer: list[int] = writer.tolist()
        self.ranks: list[int] = cols.rank.tolist()
        self.partner: list[int] = cols.partner.tolist()
        n_ranks = len(self.pc)
        self.work = deque(r for r in range(n_ranks) if self.pc[r] < self.end[r])
        self.queued = [True] * n_ranks
        self.woken_at = [-1] * n_ranks  # rendezvous: the row at which a rank last woke its writer

    def run(self) -> Progress:
        if self.depth == 0:
            self._rendezvous()
        else:
            self._buffered()
        return self.progress()

    def progress(self) -> Progress:
        cols, pc, end = self.cols, self.pc, self.end
        ops = cols.op
        stuck = {r: int(ops[pc[r]]) for r in range(len(pc)) if pc[r] < end[r]}
        stamps = np.frombuffer(self.stamp, dtype=np.int64).copy()
        stamps[stamps == 0] = -1
        return Progress(self.depth, stamps, stuck, cols)

    def _buffered(self) -> None:
        depth, code, end, pc = self.depth, self.code, self.end, self.pc
        sent, received, stamp = self.sent, self.received, self.stamp
        reader, writer, work, queued = self.reader, self.writer, self.work, self.queued
        clock = self.clock
        while work:
            r = work.popleft()
            queued[r] = False
            g, stop = pc[r], end[r]
            while g < stop:
                c = code[g]
                if c & 1:
                    break   # a port the wiring lacks: never completes
                ch = c >> 2
                if c & 2:
                    if sent[ch] - received[ch] >= depth:
                        break
                    sent[ch] += 1
                    other = reader[ch]
                else:
                    if received[ch] >= sent[ch]:
                        break
                    received[ch] += 1
                    other = writer[ch]
                clock += 1
                stamp[g] = clock
                g += 1
                if other >= 0 and other != r and not queued[other]:
                    work.append(other)
                    queued[other] = True
            pc[r] = g
        self.clock = clock

    def _rendezvous(self) -> None:
        code, end, pc, ranks, partner = self.code, self.end, self.pc, self.ranks, self.partner
        stamp, work, queued, woken_at = self.stamp, self.work, self.queued, self.woken_at

        def wake(r: int, other: int) -> None:
            if other != r and not queued[other]:
                work.append(other)
                queued[other] = True

        while work:
            r = work.popleft()
            queued[r] = False
            g, stop = pc[r], end[r]
            while g < stop:
                c = code[g]
                if c & 1:
                    break
                p = partner[g]
                if not c & 2:
                    # wait for the writer to reach the matching send (it executes both).
                    # Wake it once per arrival at this recv: two ranks each waiting in a
                    # recv on the other would otherwise wake each other forever.
                    if p >= 0 and woken_at[r] != g:
                        woken_at[r] = g
                        wake(r, ranks[p])  # (no rendezvous with itself)
                    break
                # a send: the matching recv must be the reader's current op
                if p < 0:
                    break
                peer = ranks[p]
                if pc[peer] != p:
                    break
                self.clock += 1
                stamp[g] = stamp[p] = self.clock
                pc[peer] = p + 1
                g += 1
                wake(r, peer)
            pc[r] = g

    def raise_depth(self) -> bool:
        """Continue at depth + 1 from the stuck state: wake every rank stuck at a send (all
        such sends wait for room). False if none is: then no depth helps."""
        code, pc, end = self.code, self.pc, self.end
        blocked = [r for r in range(len(pc)) if pc[r] < end[r] and code[pc[r]] & 3 == 2]
        if not blocked:
            return False
        self.depth += 1
        for r in blocked:
            if not self.queued[r]:
                self.work.append(r)
                self.queued[r] = True
        return True


@dataclass(frozen=True, slots=True)
class DepthSweep:
    """What the sweep found: the smallest deadlock-free D >= 1 (None: every D deadlocks)
    and the depths it ran, with whether each is deadlock-free."""

    minimal: int | None
    free: dict[int, bool]


def depth_sweep(table: ChannelTable, top: int | None = None) -> DepthSweep:
    """Run at D = 1, 2, ... continuing from each stuck state, until the run finishes or no
    send waits for room. Bounded by the most sends any link carries (`top`): at that depth
    no send can block, so a run stuck there is stuck at every depth."""
    limit = max(1, max_sends_per_channel(table)) if top is None else top
    state = _Run(table, 1)
    free: dict[int, bool] = {}
    while True:
        state._buffered()
        done = all(p >= e for p, e in zip(state.pc, state.end, strict=True))
        free[state.depth] = done
        if done:
            return DepthSweep(state.depth, free)
        if state.depth >= limit or not state.raise_depth():
            return DepthSweep(None, free)


def hop_steps(schedule: Schedule, table: ChannelTable, progress: Progress) -> dict[OpRef, int]:
    """The step of every send the run executes: its hop depth, 1 + the deepest step its
    rank had received before sending it (program order)."""
    cols, stamps = progress.cols, progress.stamps
    rows = np.flatnonzero(stamps >= 0)
    # A rendezvous pair shares a stamp: order the send first so its recv sees its step.
    order = rows[np.lexsort((cols.op[rows], cols.rank[rows], ~cols.send[rows], stamps[rows]))]
    level = [0] * (len(cols.start) - 1)
    step_of: dict[int, int] = {}
    send, ranks, partner = cols.send.tolist(), cols.rank.tolist(), cols.partner.tolist()
    for g in order.tolist():
        r = ranks[g]
        if send[g]:
            step_of[g] = level[r] + 1
            continue
        p = partner[g]
        if p >= 0 and p in step_of:
            level[r] = max(level[r], step_of[p])
    ops = cols.op.tolist()
    return {OpRef(ranks[g], ops[g]): s for g, s in step_of.items()}


def comm_steps(steps: Mapping[OpRef, int]) -> int:
    """The schedule's communication steps: the longest chain of dependent hops, i.e. the
    largest step of any message sent (0 when none is)."""
    return max(steps.values(), default=0)


def max_sends_per_channel(table: ChannelTable) -> int:
    cols = table.cols
    sends = cols.channel[cols.send]
    return int(np.bincount(sends).max()) if len(sends) else 0


def wait_for(schedule: Schedule, table: ChannelTable,
             progress: Progress) -> dict[Endpoint, Endpoint | None]:
    """Each blocked rank and the endpoint whose progress would unblock it: the peer of its
    port (a recv's writer, a full send's reader); None on a port the wiring lacks."""
    return {schedule.programs[r].endpoint: table.port_use[OpRef(r, i)].peer
            for r, i in sorted(progress.stuck.items())}


def find_cycle(waits: Mapping[Endpoint, Endpoint | None]) -> tuple[Endpoint, ...]:
    """The first wait-for cycle met when following `waits` from each blocked endpoint in
    order, from where the walk enters it; () if every chain ends outside (at an endpoint
    that is not blocked: outside the launch, finished, or behind a missing link)."""
    for start in sorted(waits):
        path: list[Endpoint] = []
        seen: dict[Endpoint, int] = {}
        node: Endpoint | None = start
        while node is not None and node in waits and node not in seen:
            seen[node] = len(path)
            path.append(node)
            node = waits[node]
        if node is not None and node in seen:
            return tuple(path[seen[node]:])
    return ()


__all__ = ["DepthSweep", "OpKind", "Progress", "comm_indices", "comm_steps", "depth_sweep",
           "find_cycle", "hop_steps", "max_sends_per_channel", "run", "wait_for"]
