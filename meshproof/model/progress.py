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
    comm = comm_indices(schedule)
    kinds = [[schedule.programs[r].ops[i].kind for i in idx] for r, idx in enumerate(comm)]
    n_ranks = len(comm)
    pc = [0] * n_ranks
    sent = [0] * len(table.channels)
    received = [0] * len(table.channels)
    stamp: dict[OpRef, int] = {}
    clock = 0
    # Which rank to wake when a channel changes: its reader (after a send) or its writer.
    readers: dict[int, int] = {}
    writers: dict[int, int] = {}
    for ch_i, ch in enumerate(table.channels):
        if ch.recvs:
            readers[ch_i] = ch.recvs[0].rank
        if ch.sends:
            writers[ch_i] = ch.sends[0].rank

    def status(ref: OpRef) -> PortStatus:
        return table.port_use[ref].status

    work = deque(range(n_ranks))
    queued = [True] * n_ranks
    woken_at = [-1] * n_ranks  # rendezvous: the pc at which a rank last woke its writer
    while work:
        r = work.popleft()
        queued[r] = False
        while pc[r] < len(comm[r]):
            ref = OpRef(r, comm[r][pc[r]])
            if status(ref) is PortStatus.NO_LINK:
                break
            ch_i, k = table.position[ref]
            wake: int | None = None
            if kinds[r][pc[r]] is OpKind.SEND:
                if depth == 0:
                    # rendezvous: the matching recv must be the reader's current op
                    ch = table.channels[ch_i]
                    if k >= len(ch.recvs):
                        break
                    peer = ch.recvs[k]
                    if pc[peer.rank] >= len(comm[peer.rank]) or \
                            comm[peer.rank][pc[peer.rank]] != peer.op:
                        break
                    clock += 1
                    stamp[ref] = stamp[peer] = clock
                    sent[ch_i] += 1
                    received[ch_i] += 1
                    pc[peer.rank] += 1
                    wake = peer.rank
                else:
                    if sent[ch_i] - received[ch_i] >= depth:
                        break
                    clock += 1
                    stamp[ref] = clock
                    sent[ch_i] += 1
                    wake = readers.get(ch_i)
            else:
                if depth == 0:
                    # wait for the writer to reach the matching send (it executes both).
                    # Wake it once per arrival at this recv: two ranks each waiting in a
                    # recv on the other would otherwise wake each other forever.
                    ch = table.channels[ch_i]
                    if k < len(ch.sends) and woken_at[r] != pc[r]:
                        woken_at[r] = pc[r]
                        w = ch.sends[k].rank
                        if w != r and not queued[w]:  # no rendezvous with itself
                            work.append(w)
                            queued[w] = True
                    break
                if received[ch_i] >= sent[ch_i]:
                    break
                clock += 1
                stamp[ref] = clock
                received[ch_i] += 1
                wake = writers.get(ch_i)
            pc[r] += 1
            if wake is not None and wake != r and not queued[wake]:
                work.append(wake)
                queued[wake] = True
    stuck = {r: comm[r][pc[r]] for r in range(n_ranks) if pc[r] < len(comm[r])}
    return Progress(depth, stamp, stuck, comm)


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
