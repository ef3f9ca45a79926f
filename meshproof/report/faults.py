"""What a diagram paints red: the verdict's counterexamples, per op and lane, and the
wait-for graph of a deadlock. The verifier is the only fault detector; diagrams draw what
its verdict says (`simulate --diagram` verifies first).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from meshproof.model.topology import Direction, Endpoint
from meshproof.verify.details import DeadlockDetails
from meshproof.verify.result import Role, Status, Verdict

OpKey = tuple[Endpoint, int]


@dataclass(frozen=True, slots=True)
class OpMark:
    role: Role
    message: str
    peer: Endpoint | None = None
    dir: Direction | None = None


@dataclass(frozen=True, slots=True)
class FaultMarks:
    ops: dict[OpKey, tuple[OpMark, ...]] = field(default_factory=dict)
    lanes: dict[Endpoint, tuple[OpMark, ...]] = field(default_factory=dict)
    # (waiting rank, the rank it waits for); `cycle` lists the ranks of the cycle in order
    wait_for: tuple[tuple[Endpoint, Endpoint], ...] = ()
    cycle: tuple[Endpoint, ...] = ()
    blocked: dict[Endpoint, int] = field(default_factory=dict)
    headlines: tuple[str, ...] = ()   # one line per violated/unknown property

    def cycle_edges(self) -> tuple[tuple[Endpoint, Endpoint], ...]:
        n = len(self.cycle)
        return tuple((self.cycle[i], self.cycle[(i + 1) % n]) for i in range(n)) if n > 1 \
            else ()


def marks_from_verdict(verdict: Verdict) -> FaultMarks:
    ops: dict[OpKey, list[OpMark]] = {}
    lanes: dict[Endpoint, list[OpMark]] = {}
    blocked: dict[Endpoint, int] = {}
    wait_for: list[tuple[Endpoint, Endpoint]] = []
    cycle: list[Endpoint] = []
    headlines: list[str] = []
    for prop in verdict.properties:
        if prop.status is not Status.PROVED:
            headlines.append(f"{prop.name.value}: {prop.status.value}: {prop.message}")
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
        if isinstance(cex.details, DeadlockDetails):
            # every blocked rank, also those beyond the diagnostics' cap
            for b in cex.details.blocked:
                blocked.setdefault(b.endpoint, b.op_index)
                key = (b.endpoint, b.op_index)
                if not any(m.role is Role.BLOCKED for m in ops.get(key, [])):
                    ops.setdefault(key, []).append(OpMark(Role.BLOCKED, "blocked forever here"))
            for ep in cex.details.wait_for_cycle:
                if ep not in cycle:
                    cycle.append(ep)
    return FaultMarks({k: tuple(v) for k, v in sorted(ops.items())},
                      {k: tuple(v) for k, v in sorted(lanes.items())},
                      tuple(sorted(set(wait_for))), tuple(cycle), dict(sorted(blocked.items())),
                      tuple(headlines))
