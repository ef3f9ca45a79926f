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
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from meshproof.model.channels import ChannelTable, OpRef, PortStatus
from meshproof.model.schedule import OpKind, Schedule
from meshproof.model.topology import Endpoint


@dataclass(frozen=True, slots=True)
class Progress:
    """Outcome of one run. `stamp` orders executed comm ops (equal for a rendezvous pair)."""

    depth: int
    stamp: dict[OpRef, int]
    # per rank index: the index of the comm op it is stuck at (absent if finished)
    stuck: dict[int, int]
    # comm op indices per rank, in program order (the run's view of each program)
    comm: tuple[tuple[int, ...], ...]

    @property
    def deadlock(self) -> bool:
        return bool(self.stuck)


def comm_indices(schedule: Schedule) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(op.index for op in p.ops if op.kind.is_comm) for p in schedule.programs)


def run(schedule: Schedule, table: ChannelTable, depth: int) -> Progress:
    return _Run(schedule, table, depth).run()


_BLOCKED = -1   # what an op step returns when the op cannot execute yet


class _Run:
    """The state of one run: per rank its program counter, per channel its counts."""

    def __init__(self, schedule: Schedule, table: ChannelTable, depth: int) -> None:
        self.table = table
        self.depth = depth
        self.comm = comm_indices(schedule)
        self.kinds = [[schedule.programs[r].ops[i].kind for i in idx]
                      for r, idx in enumerate(self.comm)]
        n_ranks = len(self.comm)
        self.pc = [0] * n_ranks
        self.sent = [0] * len(table.channels)
        self.received = [0] * len(table.channels)
        self.stamp: dict[OpRef, int] = {}
        self.clock = 0
        # Which rank to wake when a channel changes: its reader (after a send) or its writer.
        self.readers = {i: ch.recvs[0].rank for i, ch in enumerate(table.channels) if ch.recvs}
        self.writers = {i: ch.sends[0].rank for i, ch in enumerate(table.channels) if ch.sends}
        self.work = deque(range(n_ranks))
        self.queued = [True] * n_ranks
        self.woken_at = [-1] * n_ranks  # rendezvous: the pc at which a rank last woke its writer

    def run(self) -> Progress:
        comm, pc = self.comm, self.pc
        while self.work:
            r = self.work.popleft()
            self.queued[r] = False
            while pc[r] < len(comm[r]):
                ref = OpRef(r, comm[r][pc[r]])
                if self.table.port_use[ref].status is PortStatus.NO_LINK:
                    break
                ch_i, k = self.table.position[ref]
                is_send = self.kinds[r][pc[r]] is OpKind.SEND
                wake = self._send(r, ref, ch_i, k) if is_send else self._recv(r, ref, ch_i, k)
                if wake == _BLOCKED:
                    break
                pc[r] += 1
                if wake is not None:
                    self._wake(r, wake)
        stuck = {r: comm[r][pc[r]] for r in range(len(comm)) if pc[r] < len(comm[r])}
        return Progress(self.depth, self.stamp, stuck, comm)

    def _wake(self, r: int, rank: int) -> None:
        if rank != r and not self.queued[rank]:
            self.work.append(rank)
            self.queued[rank] = True

    def _send(self, r: int, ref: OpRef, ch_i: int, k: int) -> int | None:
        """Execute the send if it is enabled: the rank to wake (None: nobody); _BLOCKED
        when it cannot execute yet."""
        if self.depth == 0:
            # rendezvous: the matching recv must be the reader's current op
            ch = self.table.channels[ch_i]
            if k >= len(ch.recvs):
                return _BLOCKED
            peer = ch.recvs[k]
            if self.pc[peer.rank] >= len(self.comm[peer.rank]) or \
                    self.comm[peer.rank][self.pc[peer.rank]] != peer.op:
                return _BLOCKED
            self.clock += 1
            self.stamp[ref] = self.stamp[peer] = self.clock
            self.sent[ch_i] += 1
            self.received[ch_i] += 1
            self.pc[peer.rank] += 1
            return peer.rank
        if self.sent[ch_i] - self.received[ch_i] >= self.depth:
            return _BLOCKED
        self.clock += 1
        self.stamp[ref] = self.clock
        self.sent[ch_i] += 1
        return self.readers.get(ch_i)

    def _recv(self, r: int, ref: OpRef, ch_i: int, k: int) -> int | None:
        """Execute the recv if a message is waiting: the rank to wake; _BLOCKED when none
        is."""
        if self.depth == 0:
            # wait for the writer to reach the matching send (it executes both). Wake it
            # once per arrival at this recv: two ranks each waiting in a recv on the other
            # would otherwise wake each other forever.
            ch = self.table.channels[ch_i]
            if k < len(ch.sends) and self.woken_at[r] != self.pc[r]:
                self.woken_at[r] = self.pc[r]
                self._wake(r, ch.sends[k].rank)  # (no rendezvous with itself)
            return _BLOCKED
        if self.received[ch_i] >= self.sent[ch_i]:
            return _BLOCKED
        self.clock += 1
        self.stamp[ref] = self.clock
        self.received[ch_i] += 1
        return self.writers.get(ch_i)


def hop_steps(schedule: Schedule, table: ChannelTable, progress: Progress) -> dict[OpRef, int]:
    """The step of every send the run executes: its hop depth, 1 + the deepest step its
    rank had received before sending it (program order)."""
    # A rendezvous pair shares a stamp: order the send first so its recv sees its step.
    order = sorted(progress.stamp, key=lambda ref: (
        progress.stamp[ref], schedule.programs[ref.rank].ops[ref.op].kind is OpKind.RECV,
        ref.rank, ref.op))
    level = [0] * len(schedule.programs)
    step_of: dict[OpRef, int] = {}
    for ref in order:
        op = schedule.programs[ref.rank].ops[ref.op]
        if op.kind is OpKind.SEND:
            step_of[ref] = level[ref.rank] + 1
            continue
        peer = table.match(ref, op)
        if peer is not None and peer in step_of:
            level[ref.rank] = max(level[ref.rank], step_of[peer])
    return step_of


def comm_steps(steps: Mapping[OpRef, int]) -> int:
    """The schedule's communication steps: the longest chain of dependent hops, i.e. the
    largest step of any message sent (0 when none is)."""
    return max(steps.values(), default=0)


def max_sends_per_channel(table: ChannelTable) -> int:
    return max((len(ch.sends) for ch in table.channels), default=0)


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
