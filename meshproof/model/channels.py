"""Channels derived from a schedule: per directed link, its sends and recvs in order.

The k-th send on a link matches the k-th recv on its far side (FIFO, one writer, one
reader). A link is named by its sending port `(endpoint, dir)`; a recv on `(B, d)` reads
the link `(B's d-neighbour, opposite(d))`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from meshproof.model.schedule import Op, OpKind, Schedule
from meshproof.model.topology import Direction, Endpoint


class PortStatus(Enum):
    OK = "ok"                    # the wiring has the port and the far end is launched
    NO_LINK = "no_link"          # the wiring has no such port: IpcqInvalidDirection
    OUTSIDE = "outside_launch"   # the far end exists but runs nothing in this launch


@dataclass(frozen=True, slots=True)
class OpRef:
    """An op by rank index (into `Schedule.programs`) and op index."""

    rank: int
    op: int


@dataclass(frozen=True, slots=True)
class Channel:
    """A directed link `src --dir--> dst` and the ops that use it, in program order."""

    src: Endpoint
    dir: Direction
    dst: Endpoint | None
    status: PortStatus
    sends: tuple[OpRef, ...]
    recvs: tuple[OpRef, ...]
    # True for recvs on a port the wiring lacks: then `src` is the *receiving* endpoint.
    orphan: bool = False

    @property
    def name(self) -> str:
        return f"{self.src.label}_{self.dir.value}" + ("_in" if self.orphan else "")


@dataclass(frozen=True, slots=True)
class PortUse:
    """Where one comm op points: its port status and the far endpoint if any."""

    status: PortStatus
    peer: Endpoint | None


@dataclass(frozen=True, slots=True)
class ChannelTable:
    """Every channel of a schedule, and for each comm op its channel, position and port."""

    channels: tuple[Channel, ...]
    # per op (rank, op) of a comm op: its channel index and its position k on the channel
    position: dict[OpRef, tuple[int, int]]
    port_use: dict[OpRef, PortUse]

    def match(self, ref: OpRef, op: Op) -> OpRef | None:
        """The op on the other side of `ref`'s message, if there is one."""
        ch_index, k = self.position[ref]
        ch = self.channels[ch_index]
        other = ch.recvs if op.kind is OpKind.SEND else ch.sends
        return other[k] if k < len(other) else None


def derive_channels(schedule: Schedule) -> ChannelTable:
    wiring = schedule.wiring
    launch = schedule.launch
    sends: dict[tuple[Endpoint, Direction], list[OpRef]] = {}
    recvs: dict[tuple[Endpoint, Direction], list[OpRef]] = {}
    # A recv on a port the wiring lacks has no sender; key it on the receiver's side so it
    # still shows up (as NO_LINK) instead of vanishing.
    orphan_recvs: dict[tuple[Endpoint, Direction], list[OpRef]] = {}
    port_use: dict[OpRef, PortUse] = {}
    for r, prog in enumerate(schedule.programs):
        for op in prog.ops:
            if not op.kind.is_comm:
                continue
            assert op.dir is not None
            ref = OpRef(r, op.index)
            peer = wiring.neighbour(prog.endpoint, op.dir)
            if peer is None:
                status = PortStatus.NO_LINK
            elif not launch.is_launched(peer):
                status = PortStatus.OUTSIDE
            else:
                status = PortStatus.OK
            port_use[ref] = PortUse(status, peer)
            if op.kind is OpKind.SEND:
                sends.setdefault((prog.endpoint, op.dir), []).append(ref)
            elif peer is None:
                orphan_recvs.setdefault((prog.endpoint, op.dir), []).append(ref)
            else:
                recvs.setdefault((peer, op.dir.opposite), []).append(ref)
    channels: list[Channel] = []
    keys = sorted(set(sends) | set(recvs), key=lambda k: (k[0], k[1].value))
    for src, d in keys:
        dst = wiring.neighbour(src, d)
        if dst is None:
            status = PortStatus.NO_LINK
        elif not launch.is_launched(dst) or not launch.is_launched(src):
            status = PortStatus.OUTSIDE
        else:
            status = PortStatus.OK
        channels.append(Channel(src, d, dst, status, tuple(sends.get((src, d), ())),
                                tuple(recvs.get((src, d), ()))))
    for (ep, d), refs in sorted(orphan_recvs.items(), key=lambda kv: (kv[0][0], kv[0][1].value)):
        # Named by the receiving port, with no source: nobody can ever write it.
        channels.append(Channel(ep, d, None, PortStatus.NO_LINK, (), tuple(refs), orphan=True))
    position: dict[OpRef, tuple[int, int]] = {}
    for i, ch in enumerate(channels):
        for k, ref in enumerate(ch.sends):
            position[ref] = (i, k)
        for k, ref in enumerate(ch.recvs):
            position[ref] = (i, k)
    return ChannelTable(tuple(channels), position, port_use)


def communication_groups(schedule: Schedule, table: ChannelTable) -> tuple[tuple[int, ...], ...]:
    """Connected components over the ranks that run ops, joined by the wiring's links
    between two such ranks (and by every channel whose both ends are launched and wired).

    Components follow the *wiring*, not just the messages actually exchanged: a kernel
    that forgot to communicate must still be judged against every shard it could reach
    (else "each rank merges its own shard once" would pass). Independent rings of one
    launch (64 cubes each running its own 8-PE line) stay separate because no link joins
    them. Ordered by their first rank; ranks sorted."""
    active = [r for r, p in enumerate(schedule.programs) if p.ops]
    parent = {r: r for r in active}
    index = {schedule.programs[r].endpoint: r for r in active}

    def find(r: int) -> int:
        while parent[r] != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    def join(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    for link in schedule.wiring.links:
        if link.src in index and link.dst in index:
            join(index[link.src], index[link.dst])
    for ch in table.channels:
        if ch.status is not PortStatus.OK:
            continue
        ends = sorted({ref.rank for ref in (*ch.sends, *ch.recvs)} & parent.keys())
        for r in ends[1:]:
            join(ends[0], r)
    members: dict[int, list[int]] = {}
    for r in active:
        members.setdefault(find(r), []).append(r)
    return tuple(tuple(sorted(rs)) for rs in sorted(members.values(), key=min))
