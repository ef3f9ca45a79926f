"""What a diagram paints red: faults per op and lane, and the wait-for graph of a deadlock.

With a verdict, the marks are its counterexamples' diagnostics (the verifier is the
authority). Without one (`simulate --diagram`), the structural faults are read off the
IR: ports the wiring lacks, ports towards endpoints outside the launch, links with more
sends than recvs, and the stuck frontier of the Kahn-network run at the launch's depth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from meshproof.model.channels import OpRef, PortStatus
from meshproof.model.progress import find_cycle, wait_for
from meshproof.model.schedule import Schedule
from meshproof.model.topology import Endpoint
from meshproof.report.messages import MessageTable
from meshproof.verify.result import Role, Status, Verdict

OpKey = tuple[Endpoint, int]


@dataclass(frozen=True, slots=True)
class OpMark:
    role: Role
    message: str
    peer: Endpoint | None = None
    dir: str | None = None


@dataclass(frozen=True, slots=True)
class FaultMarks:
    ops: dict[OpKey, tuple[OpMark, ...]] = field(default_factory=dict)
    lanes: dict[Endpoint, tuple[OpMark, ...]] = field(default_factory=dict)
    # (waiting rank, the rank it waits for); `cycle` lists the ranks of the cycle in order
    wait_for: tuple[tuple[Endpoint, Endpoint], ...] = ()
    cycle: tuple[Endpoint, ...] = ()
    blocked: dict[Endpoint, int] = field(default_factory=dict)
    headlines: tuple[str, ...] = ()   # one line per violated/unknown property
    origin: str = "verdict"           # "verdict" or "schedule"

    @property
    def any(self) -> bool:
        return bool(self.ops or self.lanes or self.blocked or self.wait_for)

    def cycle_edges(self) -> tuple[tuple[Endpoint, Endpoint], ...]:
        n = len(self.cycle)
        return tuple((self.cycle[i], self.cycle[(i + 1) % n]) for i in range(n)) if n > 1 \
            else ()


def _endpoint(value: Any) -> Endpoint | None:
    if isinstance(value, dict) and "cube" in value and "pe" in value:
        return Endpoint(int(value["cube"]), int(value["pe"]))
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return Endpoint(int(value[0]), int(value[1]))
    return None


def marks_from_verdict(verdict: Verdict) -> FaultMarks:
    ops: dict[OpKey, list[OpMark]] = {}
    lanes: dict[Endpoint, list[OpMark]] = {}
    blocked: dict[Endpoint, int] = {}
    wait_for: list[tuple[Endpoint, Endpoint]] = []
    cycle: list[Endpoint] = []
    headlines: list[str] = []
    for prop in verdict.properties:
        if prop.status is not Status.PROVED:
            headlines.append(f"{prop.name}: {prop.status.value}: {prop.message}")
        cex = prop.counterexample
        if cex is None or prop.status is Status.PROVED:
            continue
        for d in cex.diagnostics:
            if d.endpoint is None:
                continue
            mark = OpMark(d.role, d.message, d.peer, d.dir)
            if d.op_index is None:
                lanes.setdefault(d.endpoint, []).append(mark)
            else:
                ops.setdefault((d.endpoint, d.op_index), []).append(mark)
            if d.role is Role.BLOCKED:
                if d.op_index is not None:
                    blocked.setdefault(d.endpoint, d.op_index)
                if d.peer is not None:
                    wait_for.append((d.endpoint, d.peer))
        for item in cex.detail("blocked", None) or []:
            ep = _endpoint(item)
            if ep is not None and isinstance(item, dict) and item.get("op_index") is not None:
                index = int(item["op_index"])
                blocked.setdefault(ep, index)
                if not any(m.role is Role.BLOCKED for m in ops.get((ep, index), [])):
                    ops.setdefault((ep, index), []).append(
                        OpMark(Role.BLOCKED, "blocked forever here"))
        for item in cex.detail("wait_for_cycle", None) or []:
            ep = _endpoint(item)
            if ep is not None and ep not in cycle:
                cycle.append(ep)
    return FaultMarks({k: tuple(v) for k, v in sorted(ops.items())},
                      {k: tuple(v) for k, v in sorted(lanes.items())},
                      tuple(sorted(set(wait_for))), tuple(cycle), dict(sorted(blocked.items())),
                      tuple(headlines), "verdict")


def marks_from_schedule(schedule: Schedule, msgs: MessageTable) -> FaultMarks:
    """Structural faults only; the verifier decides the rest (exactly-once merging)."""
    table = msgs.table
    ops: dict[OpKey, list[OpMark]] = {}

    def add(ref: OpRef, mark: OpMark) -> None:
        ops.setdefault((schedule.programs[ref.rank].endpoint, ref.op), []).append(mark)

    for ref, use in sorted(table.port_use.items(), key=lambda kv: (kv[0].rank, kv[0].op)):
        op = schedule.programs[ref.rank].ops[ref.op]
        d = op.dir.value if op.dir else None
        if use.status is PortStatus.NO_LINK:
            add(ref, OpMark(Role.ILLEGAL, f"{op.kind.value} {d}: the wiring has no {d} link", None,
                            d))
        elif use.status is PortStatus.OUTSIDE:
            add(ref, OpMark(Role.OUTSIDE, f"{op.kind.value} {d}: peer is outside the launch",
                            use.peer, d))
    for m in msgs.messages:
        ch = table.channels[m.channel]
        if ch.status is not PortStatus.OK:
            continue
        if m.recv is None and m.send is not None:
            add(m.send, OpMark(Role.UNMATCHED, "never received", ch.dst, ch.dir.value))
        elif m.send is None and m.recv is not None:
            add(m.recv, OpMark(Role.UNMATCHED, "never sent", ch.src, ch.dir.opposite.value))
    blocked: dict[Endpoint, int] = {}
    for rank, op_index in sorted(msgs.progress.stuck.items()):
        ep = schedule.programs[rank].endpoint
        blocked[ep] = op_index
        ref = OpRef(rank, op_index)
        add(ref, OpMark(Role.BLOCKED, f"blocked forever at queue depth {msgs.progress.depth}"))
    waits = {ep: peer for ep, peer in wait_for(schedule, table, msgs.progress).items()
             if peer is not None}
    headline = []
    if blocked:
        headline.append(f"deadlock at queue depth {msgs.progress.depth}: "
                        f"{len(blocked)} rank(s) blocked")
    if any(m.role is Role.ILLEGAL for ms in ops.values() for m in ms):
        headline.append("ops on links the wiring lacks")
    return FaultMarks({k: tuple(v) for k, v in sorted(ops.items())}, {},
                      tuple(sorted(waits.items())), find_cycle(waits), blocked,
                      tuple(headline), "schedule")

