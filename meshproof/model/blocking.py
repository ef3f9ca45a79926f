"""Which ranks are blocked at every queue depth, and the op no other rank can release.

A rank stuck at unbounded queue depth is stuck at every depth: deadlock freedom is
monotone in D (spec/properties.md §4), and by confluence the frontier at any D is a prefix,
rank by rank, of the frontier at a larger D. At D = the most sends any link carries no
send waits for room, so that one run is the unbounded frontier; D = 0 (rendezvous) is more
constrained than D = 1 and stops no later. What stays blocked there is blocked by the
program itself: a port the wiring lacks, an endpoint outside the launch, a message its
writer never sends, or a wait-for cycle that no buffering breaks.

Both back-ends read this (verify: the semantic properties say an output is never written;
sim: its deadlock advice leads with the root cause), so it lives in model/.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from meshproof.model.channel_table import ChannelTable, OpRef, PortStatus
from meshproof.model.progress import depth_sweep, max_sends_per_channel, run
from meshproof.model.schedule import Op, Schedule
from meshproof.model.topology import Endpoint


class Cause(Enum):
    """Why the root op of a chain of blocked ranks can never complete."""

    NO_LINK = "no_link"          # the wiring has no such port (IpcqInvalidDirection)
    OUTSIDE = "outside_launch"   # a recv from an endpoint that runs nothing here
    NEVER_SENT = "never_sent"    # a recv whose writer finishes without sending it
    CYCLE = "cycle"              # ranks waiting on each other in recvs


@dataclass(frozen=True, slots=True)
class RootCause:
    """The blocked op that no other rank can release, reached from a blocked rank by
    following whom it waits on."""

    rank: int                      # index of the program blocked at the root op
    op: int                        # that op's index in its program
    cause: Cause
    peer: Endpoint | None = None       # the endpoint its port points at (None: no link)
    cycle: tuple[Endpoint, ...] = ()   # the wait-for cycle, for Cause.CYCLE

    def describe(self, schedule: Schedule) -> str:
        """`(cube 0, pe 7) is blocked at FILE:LINE (send N: pe_line has no N link here)`."""
        prog = schedule.programs[self.rank]
        op = prog.ops[self.op]
        return f"{prog.endpoint.describe()} is blocked at {op.source} ({self.why(schedule, op)})"

    def why(self, schedule: Schedule, op: Op) -> str:
        d = op.dir.value if op.dir is not None else "?"
        what = f"{op.kind.value} {d}"
        if self.cause is Cause.NO_LINK:
            return f"{what}: {schedule.launch.wiring} has no {d} link here"
        peer = self.peer.describe() if self.peer is not None else "its peer"
        if self.cause is Cause.OUTSIDE:
            return f"{what}: {peer} is outside the launch and never sends"
        if self.cause is Cause.NEVER_SENT:
            return f"{what}: {peer} finishes without sending this message"
        cycle = " -> ".join(e.label for e in [*self.cycle, self.cycle[0]])
        return f"{what}: wait-for cycle {cycle}, which no queue depth breaks"


@dataclass(frozen=True, slots=True)
class Blocking:
    """The launch's communication at every queue depth at once."""

    minimal_depth: int | None        # smallest D >= 1 that completes; None: none does
    forever: dict[int, int]          # rank index -> comm op it is stuck at, at every depth
    roots: dict[int, RootCause]      # rank index -> the root cause of its being stuck

    def reaches(self, rank: int, op_index: int) -> bool:
        """Whether the rank gets to op `op_index` at some queue depth."""
        stuck = self.forever.get(rank)
        return stuck is None or op_index < stuck


def blocking(schedule: Schedule, table: ChannelTable) -> Blocking:
    """Run once at unbounded depth (no send waits for room) and trace each stuck rank to
    its root cause; the depth sweep gives the minimal depth (linear in the comm ops)."""
    top = max(1, max_sends_per_channel(table))
    frontier = run(schedule, table, top)
    minimal = None if frontier.deadlock else depth_sweep(table, top).minimal
    forever = dict(frontier.stuck)
    index = schedule.rank_index()
    roots: dict[int, RootCause] = {}
    for r in sorted(forever):
        _walk(schedule, table, index, forever, roots, r)
    return Blocking(minimal, forever, roots)


def _walk(schedule: Schedule, table: ChannelTable, index: dict[Endpoint, int],
          forever: dict[int, int], roots: dict[int, RootCause], rank: int) -> None:
    """Follow whom `rank` waits on to the root cause, and record it for every rank on the
    way (each rank is walked once: linear in the blocked ranks)."""
    path: list[int] = []
    seen: dict[int, int] = {}
    r = rank
    while r not in roots:
        seen[r] = len(path)
        path.append(r)
        op = forever[r]
        use = table.port_use[OpRef(r, op)]
        if use.status is PortStatus.NO_LINK:
            roots[r] = RootCause(r, op, Cause.NO_LINK)
            break
        if use.status is PortStatus.OUTSIDE or use.peer is None:
            roots[r] = RootCause(r, op, Cause.OUTSIDE, use.peer)
            break
        peer = index.get(use.peer)
        if peer is None or peer not in forever:
            # at unbounded depth a send never waits for room: this is a recv whose
            # writer has finished (or never runs)
            roots[r] = RootCause(r, op, Cause.NEVER_SENT, use.peer)
            break
        if peer in seen:
            cycle = path[seen[peer]:]
            first = min(cycle, key=lambda x: schedule.programs[x].endpoint)
            eps = _rotate([schedule.programs[x].endpoint for x in cycle],
                          schedule.programs[first].endpoint)
            peer_of_first = table.port_use[OpRef(first, forever[first])].peer
            roots[first] = RootCause(first, forever[first], Cause.CYCLE, peer_of_first, eps)
            r = first
            break
        r = peer
    for x in path:
        roots.setdefault(x, roots[r])


def _rotate(eps: list[Endpoint], first: Endpoint) -> tuple[Endpoint, ...]:
    i = eps.index(first)
    return tuple(eps[i:] + eps[:i])


__all__ = ["Blocking", "Cause", "RootCause", "blocking"]
