"""Discrete-event timing of a schedule over a hardware profile (spec/timing.md).

Each rank executes its ops in program order; an op starts when the rank is ready and its
dependencies are met: a recv when its message has arrived, a send (queue depth D >= 1)
when its link has room, i.e. the (k-D)-th recv on that link has completed; with D = 0 a
send and its recv execute together (rendezvous). Ranks are deterministic Kahn processes,
so the times do not depend on the order in which this run visits them.

Communication steps are not a timing quantity: they depend only on the schedule
(`model.progress.comm_steps`).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from meshproof.errors import ConfigError, SimulationRefused
from meshproof.model.channels import ChannelTable, OpRef, PortStatus
from meshproof.model.hardware import HardwareProfile, LinkCost
from meshproof.model.schedule import (
    ELEMENTWISE_BINARY,
    ELEMENTWISE_UNARY,
    REDUCTIONS,
    Op,
    OpKind,
    Schedule,
)
from meshproof.model.topology import Endpoint, System

LINK_CLASSES = ("intra_cube", "inter_cube", "inter_sip")
# Passes over the data a softmax makes: max, exp and sum, divide.
SOFTMAX_PASSES = 3


@dataclass(frozen=True, slots=True)
class OpEvent:
    """When one op ran. The rank reached it at `ready`, began at `start` (waiting before
    that for a message or for queue room), finished at `end`."""

    rank: int
    op: int
    ready: float
    start: float
    end: float
    cause: OpRef | None     # the op that made it start late (None: program order)
    via: str                # "program", "message", "queue" or "rendezvous"


@dataclass(frozen=True, slots=True)
class MessageEvent:
    channel: int
    k: int
    send: OpRef
    recv: OpRef | None
    sent: float
    arrived: float
    nbytes: int


@dataclass(frozen=True, slots=True)
class TimingRun:
    events: tuple[tuple[OpEvent, ...], ...]       # per rank, in program order
    messages: tuple[MessageEvent, ...]
    link_class: tuple[str | None, ...]            # per channel

    @property
    def latency_s(self) -> float:
        return max((evs[-1].end for evs in self.events if evs), default=0.0)

    def critical_path(self) -> tuple[OpEvent, ...]:
        """From the op that finishes last back through the dependencies that delayed it."""
        last: OpEvent | None = None
        for evs in self.events:
            if evs and (last is None or evs[-1].end > last.end):
                last = evs[-1]
        path: list[OpEvent] = []
        cur = last
        while cur is not None:
            path.append(cur)
            # events of a rank are in program order and cover every op: index == op index
            if cur.cause is not None:
                cur = self.events[cur.cause.rank][cur.cause.op]
            else:
                cur = self.events[cur.rank][cur.op - 1] if cur.op > 0 else None
        return tuple(reversed(path))


def check_profile(hw: HardwareProfile) -> None:
    """The timing model divides by rates and adds latencies: every rate must be a finite
    number > 0 and every latency a finite number >= 0, or the times (and the JSON, which
    cannot hold nan/inf) are meaningless. TOML spells nan and inf, so a profile file can
    carry them."""
    rates = {"gemm_flops_per_pe": hw.gemm_flops_per_pe,
             "vector_elems_per_s": hw.vector_elems_per_s,
             "dma_bandwidth_Bps": hw.dma_bandwidth_Bps}
    times = {"dma_latency_s": hw.dma_latency_s, "op_overhead_s": hw.op_overhead_s}
    for cls in LINK_CLASSES:
        cost = _link_cost(hw, cls)
        rates[f"{cls}.bandwidth_Bps"] = cost.bandwidth_Bps
        times[f"{cls}.latency_s"] = cost.latency_s
    for key, value in rates.items():
        if not _finite(value) or value <= 0:
            raise ConfigError(f"hardware profile {hw.name!r}: {key} must be a finite number "
                              f"> 0, got {value!r}; fix it in the --hw file")
    for key, value in times.items():
        if not _finite(value) or value < 0:
            raise ConfigError(f"hardware profile {hw.name!r}: {key} must be a finite number "
                              f">= 0, got {value!r}; fix it in the --hw file")


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value)


def link_class(system: System, src: Endpoint, dst: Endpoint | None) -> str | None:
    if dst is None:
        return None
    if src.cube == dst.cube:
        return "intra_cube"
    if system.coord(src.cube).sip == system.coord(dst.cube).sip:
        return "inter_cube"
    return "inter_sip"


def _link_cost(hw: HardwareProfile, cls: str | None) -> LinkCost:
    if cls == "inter_sip":
        return hw.inter_sip
    if cls == "inter_cube":
        return hw.inter_cube
    return hw.intra_cube


def op_cost(op: Op, arg_shapes: tuple[tuple[int, ...], ...], hw: HardwareProfile) -> float:
    """Seconds an op keeps its rank busy (sends: injection only; the link latency is
    added to the message's arrival)."""
    kind = op.kind
    elems = math.prod(op.shape)
    if kind in (OpKind.LOAD, OpKind.STORE):
        return hw.dma_latency_s + op.nbytes / hw.dma_bandwidth_Bps
    if kind is OpKind.RESHAPE:
        return 0.0  # a metadata view
    if kind is OpKind.DOT:
        inner = arg_shapes[0][-1] if arg_shapes and arg_shapes[0] else 1
        return hw.op_overhead_s + 2.0 * elems * inner / hw.gemm_flops_per_pe
    if kind in REDUCTIONS or kind is OpKind.SOFTMAX:
        n_in = math.prod(arg_shapes[0]) if arg_shapes else elems
        passes = SOFTMAX_PASSES if kind is OpKind.SOFTMAX else 1
        return hw.op_overhead_s + passes * n_in / hw.vector_elems_per_s
    if kind in ELEMENTWISE_BINARY or kind in ELEMENTWISE_UNARY or kind in (
            OpKind.CAST, OpKind.FULL, OpKind.TRANS):
        return hw.op_overhead_s + elems / hw.vector_elems_per_s
    return hw.op_overhead_s  # send/recv: the transfer is charged separately


def _arg_shapes(ops: tuple[Op, ...]) -> list[tuple[tuple[int, ...], ...]]:
    shapes: dict[int, tuple[int, ...]] = {}
    out: list[tuple[tuple[int, ...], ...]] = []
    for op in ops:
        out.append(tuple(shapes[v] for v in op.value_args if v in shapes))
        if op.out is not None:
            shapes[op.out] = op.shape
    return out


def run_timing(schedule: Schedule, table: ChannelTable, hw: HardwareProfile,
               depth: int) -> TimingRun:
    programs = schedule.programs
    system = schedule.launch.system
    n = len(programs)
    classes = tuple(link_class(system, ch.src, ch.dst) if not ch.orphan else None
                    for ch in table.channels)
    costs = [[op_cost(op, shapes, hw) for op, shapes in zip(p.ops, _arg_shapes(p.ops),
                                                          strict=True)]
             for p in programs]
    events: list[list[OpEvent]] = [[] for _ in range(n)]
    clock = [0.0] * n
    arrivals: dict[tuple[int, int], tuple[float, OpRef]] = {}   # (ch, k) -> message
    recv_done: dict[tuple[int, int], tuple[float, OpRef]] = {}
    messages: list[MessageEvent] = []
    readers = {i: ch.recvs[0].rank for i, ch in enumerate(table.channels) if ch.recvs}
    writers = {i: ch.sends[0].rank for i, ch in enumerate(table.channels) if ch.sends}

    def emit(r: int, op: Op, start: float, end: float, cause: OpRef | None,
             via: str) -> None:
        events[r].append(OpEvent(r, op.index, clock[r], start, end, cause, via))
        clock[r] = end

    def transfer(ch_i: int, op: Op) -> tuple[float, float]:
        cost = _link_cost(hw, classes[ch_i])
        return op.nbytes / cost.bandwidth_Bps, cost.latency_s

    def step(r: int) -> tuple[bool, int | None]:
        """Run rank r's next op if it can; return (ran, a rank to wake)."""
        op = programs[r].ops[len(events[r])]
        ref = OpRef(r, op.index)
        ready = clock[r]
        if not op.kind.is_comm:
            emit(r, op, ready, ready + costs[r][op.index], None, "program")
            return True, None
        if table.port_use[ref].status is PortStatus.NO_LINK:
            return False, None
        ch_i, k = table.position[ref]
        ch = table.channels[ch_i]
        if op.kind is OpKind.SEND:
            inject, latency = transfer(ch_i, op)
            if depth == 0:
                if k >= len(ch.recvs):
                    return False, None
                peer = ch.recvs[k]
                peer_ops = programs[peer.rank].ops
                if len(events[peer.rank]) >= len(peer_ops) or \
                        peer_ops[len(events[peer.rank])].index != peer.op:
                    return False, None
                start = max(ready, clock[peer.rank])
                end = start + costs[r][op.index] + inject + latency
                cause = peer if clock[peer.rank] > ready else None
                emit(r, op, start, end, cause, "rendezvous" if cause else "program")
                peer_cause = ref if ready > clock[peer.rank] else None
                # the sender is held until the data is across; the receiver then pays its
                # own op overhead, as it does when the message was queued
                emit(peer.rank, peer_ops[peer.op], start, end + costs[peer.rank][peer.op],
                     peer_cause, "rendezvous" if peer_cause else "program")
                messages.append(MessageEvent(ch_i, k, ref, peer, start, end, op.nbytes))
                return True, peer.rank
            start, cause, via = ready, None, "program"
            if k >= depth:
                room = recv_done.get((ch_i, k - depth))
                if room is None:
                    return False, None
                if room[0] > ready:
                    start, cause, via = room[0], room[1], "queue"
            end = start + costs[r][op.index] + inject
            emit(r, op, start, end, cause, via)
            arrivals[(ch_i, k)] = (end + latency, ref)
            reader = ch.recvs[k] if k < len(ch.recvs) else None
            messages.append(MessageEvent(ch_i, k, ref, reader, end - inject, end + latency,
                                         op.nbytes))
            return True, readers.get(ch_i)
        if depth == 0:  # the writer executes the pair: make sure it gets a turn
            return False, ch.sends[k].rank if k < len(ch.sends) else None
        msg = arrivals.get((ch_i, k))
        if msg is None:
            return False, None
        arrived, sender = msg
        start, cause, via = ready, None, "program"
        if arrived > ready:
            start, cause, via = arrived, sender, "message"
        end = start + costs[r][op.index]
        emit(r, op, start, end, cause, via)
        recv_done[(ch_i, k)] = (end, ref)
        return True, writers.get(ch_i)

    work = deque(range(n))
    queued = [True] * n
    while work:
        r = work.popleft()
        queued[r] = False
        while len(events[r]) < len(programs[r].ops):
            ran, wake = step(r)
            if wake is not None and wake != r and not queued[wake]:
                work.append(wake)
                queued[wake] = True
            if not ran:
                break
    if any(len(events[r]) < len(programs[r].ops) for r in range(n)):
        stuck = [programs[r].endpoint.describe() for r in range(n)
                 if len(events[r]) < len(programs[r].ops)]
        raise SimulationRefused(f"the timing run blocked at queue depth {depth} (ranks "
                                f"{', '.join(stuck[:8])}); the schedule deadlocks")
    return TimingRun(tuple(tuple(e) for e in events), tuple(messages), classes)
