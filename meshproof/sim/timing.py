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
from typing import assert_never

from meshproof.errors import ConfigError, SimulationRefused
from meshproof.model.channel_table import ChannelTable, OpRef, PortStatus
from meshproof.model.hardware import HardwareProfile, LinkCost
from meshproof.model.schedule import (
    Op,
    OpKind,
    Schedule,
)
from meshproof.model.topology import Endpoint, System

LINK_CLASSES = ("intra_cube", "inter_cube", "inter_sip")


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
    elems = math.prod(op.shape)
    vector = hw.op_overhead_s + elems / hw.vector_elems_per_s
    # every kind named: a new op kind fails mypy here (assert_never) until it has a cost
    match op.kind:
        case OpKind.LOAD | OpKind.STORE:
            return hw.dma_latency_s + op.nbytes / hw.dma_bandwidth_Bps
        case OpKind.RESHAPE | OpKind.VIEW:
            return 0.0  # metadata views
        case OpKind.DOT:
            inner = arg_shapes[0][-1] if arg_shapes and arg_shapes[0] else 1
            return hw.op_overhead_s + 2.0 * elems * inner / hw.gemm_flops_per_pe
        case OpKind.MAX | OpKind.SUM:
            n_in = math.prod(arg_shapes[0]) if arg_shapes else elems
            return hw.op_overhead_s + n_in / hw.vector_elems_per_s
        case (OpKind.ADD | OpKind.SUB | OpKind.MUL | OpKind.DIV | OpKind.MAXIMUM
              | OpKind.MINIMUM | OpKind.EXP | OpKind.EXP2 | OpKind.LOG | OpKind.LOG2
              | OpKind.LOG1P | OpKind.SIGMOID | OpKind.NEG | OpKind.CAST | OpKind.FULL
              | OpKind.TRANS | OpKind.ARANGE | OpKind.WHERE | OpKind.LT | OpKind.LE
              | OpKind.GT | OpKind.GE | OpKind.EQ | OpKind.NE):
            return vector
        case OpKind.SEND | OpKind.RECV:
            return hw.op_overhead_s  # the transfer is charged separately
        case _:
            assert_never(op.kind)


def arg_shapes(ops: tuple[Op, ...]) -> list[tuple[tuple[int, ...], ...]]:
    """Per op of one rank, the shapes of its value operands (what `op_cost` prices)."""
    shapes: dict[int, tuple[int, ...]] = {}
    out: list[tuple[tuple[int, ...], ...]] = []
    for op in ops:
        out.append(tuple(shapes[v] for v in op.value_args if v in shapes))
        if op.out is not None:
            shapes[op.out] = op.shape
    return out


def run_timing(schedule: Schedule, table: ChannelTable, hw: HardwareProfile,
               depth: int) -> TimingRun:
    return _Timing(schedule, table, hw, depth).run()


Step = tuple[bool, int | None]   # (the op ran, a rank to wake)


class _Timing:
    """One discrete-event run: per rank its events so far and its clock."""

    def __init__(self, schedule: Schedule, table: ChannelTable, hw: HardwareProfile,
                 depth: int) -> None:
        self.programs = schedule.programs
        self.table = table
        self.hw = hw
        self.depth = depth
        system = schedule.launch.system
        n = len(self.programs)
        self.classes = tuple(link_class(system, ch.src, ch.dst) if not ch.orphan else None
                             for ch in table.channels)
        self.costs = [[op_cost(op, shapes, hw)
                       for op, shapes in zip(p.ops, arg_shapes(p.ops), strict=True)]
                      for p in self.programs]
        self.events: list[list[OpEvent]] = [[] for _ in range(n)]
        self.clock = [0.0] * n
        self.arrivals: dict[tuple[int, int], tuple[float, OpRef]] = {}  # (ch, k) -> message
        self.recv_done: dict[tuple[int, int], tuple[float, OpRef]] = {}
        self.messages: list[MessageEvent] = []
        self.readers = {i: ch.recvs[0].rank for i, ch in enumerate(table.channels) if ch.recvs}
        self.writers = {i: ch.sends[0].rank for i, ch in enumerate(table.channels) if ch.sends}

    def run(self) -> TimingRun:
        programs, events = self.programs, self.events
        n = len(programs)
        work = deque(range(n))
        queued = [True] * n
        while work:
            r = work.popleft()
            queued[r] = False
            while len(events[r]) < len(programs[r].ops):
                ran, wake = self._step(r)
                if wake is not None and wake != r and not queued[wake]:
                    work.append(wake)
                    queued[wake] = True
                if not ran:
                    break
        stuck = [programs[r].endpoint.describe() for r in range(n)
                 if len(events[r]) < len(programs[r].ops)]
        if stuck:
            raise SimulationRefused(f"the timing run blocked at queue depth {self.depth} "
                                    f"(ranks {', '.join(stuck[:8])}); the schedule deadlocks")
        return TimingRun(tuple(tuple(e) for e in events), tuple(self.messages), self.classes)

    def _emit(self, r: int, op: Op, start: float, end: float, cause: OpRef | None,
              via: str) -> None:
        self.events[r].append(OpEvent(r, op.index, self.clock[r], start, end, cause, via))
        self.clock[r] = end

    def _transfer(self, ch_i: int, op: Op) -> tuple[float, float]:
        cost = _link_cost(self.hw, self.classes[ch_i])
        return op.nbytes / cost.bandwidth_Bps, cost.latency_s

    def _step(self, r: int) -> Step:
        """Run rank r's next op if it can."""
        op = self.programs[r].ops[len(self.events[r])]
        ref = OpRef(r, op.index)
        if not op.kind.is_comm:
            ready = self.clock[r]
            self._emit(r, op, ready, ready + self.costs[r][op.index], None, "program")
            return True, None
        if self.table.port_use[ref].status is PortStatus.NO_LINK:
            return False, None
        ch_i, k = self.table.position[ref]
        if op.kind is OpKind.SEND:
            if self.depth == 0:
                return self._rendezvous(r, op, ref, ch_i, k)
            return self._send(r, op, ref, ch_i, k)
        return self._recv(r, op, ref, ch_i, k)

    def _rendezvous(self, r: int, op: Op, ref: OpRef, ch_i: int, k: int) -> Step:
        """D = 0: the send and its recv execute together, when both ranks are at them."""
        ch = self.table.channels[ch_i]
        if k >= len(ch.recvs):
            return False, None
        peer = ch.recvs[k]
        peer_ops = self.programs[peer.rank].ops
        if len(self.events[peer.rank]) >= len(peer_ops) or \
                peer_ops[len(self.events[peer.rank])].index != peer.op:
            return False, None
        inject, latency = self._transfer(ch_i, op)
        ready, peer_ready = self.clock[r], self.clock[peer.rank]
        start = max(ready, peer_ready)
        end = start + self.costs[r][op.index] + inject + latency
        cause = peer if peer_ready > ready else None
        self._emit(r, op, start, end, cause, "rendezvous" if cause else "program")
        peer_cause = ref if ready > peer_ready else None
        # the sender is held until the data is across; the receiver then pays its own op
        # overhead, as it does when the message was queued
        self._emit(peer.rank, peer_ops[peer.op], start,
                   end + self.costs[peer.rank][peer.op], peer_cause,
                   "rendezvous" if peer_cause else "program")
        self.messages.append(MessageEvent(ch_i, k, ref, peer, start, end, op.nbytes))
        return True, peer.rank

    def _send(self, r: int, op: Op, ref: OpRef, ch_i: int, k: int) -> Step:
        """D >= 1: the k-th send waits for room, i.e. the (k-D)-th recv on its link."""
        ready = self.clock[r]
        start, cause, via = ready, None, "program"
        if k >= self.depth:
            room = self.recv_done.get((ch_i, k - self.depth))
            if room is None:
                return False, None
            if room[0] > ready:
                start, cause, via = room[0], room[1], "queue"
        inject, latency = self._transfer(ch_i, op)
        end = start + self.costs[r][op.index] + inject
        self._emit(r, op, start, end, cause, via)
        self.arrivals[(ch_i, k)] = (end + latency, ref)
        ch = self.table.channels[ch_i]
        reader = ch.recvs[k] if k < len(ch.recvs) else None
        self.messages.append(MessageEvent(ch_i, k, ref, reader, end - inject, end + latency,
                                          op.nbytes))
        return True, self.readers.get(ch_i)

    def _recv(self, r: int, op: Op, ref: OpRef, ch_i: int, k: int) -> Step:
        if self.depth == 0:  # the writer executes the pair: make sure it gets a turn
            sends = self.table.channels[ch_i].sends
            return False, sends[k].rank if k < len(sends) else None
        msg = self.arrivals.get((ch_i, k))
        if msg is None:
            return False, None
        arrived, sender = msg
        ready = self.clock[r]
        start, cause, via = ready, None, "program"
        if arrived > ready:
            start, cause, via = arrived, sender, "message"
        end = start + self.costs[r][op.index]
        self._emit(r, op, start, end, cause, via)
        self.recv_done[(ch_i, k)] = (end, ref)
        return True, self.writers.get(ch_i)
