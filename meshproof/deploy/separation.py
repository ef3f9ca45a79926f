"""launch_separation: no launch of a deployment uses an endpoint or a link of another.

Two checks, each an enumeration over finite sets (the enumeration is the proof):

- **endpoints**: the launched endpoints of any two launches (every PE 0..pes-1 of their
  cubes, silent ones included: the launch owns them) are disjoint;
- **links**: every send or recv of a launch goes through a port whose far end is not an
  endpoint of another launch (a message into another launch's queues, or a recv that
  would read them).

Each launch's own `launch_confinement` already says whether its links stay inside it;
this check says *whose* endpoint a stray link reaches, and catches overlapping launches,
which no single launch can see.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from meshproof.deploy.deployment import Deployment
from meshproof.model.schedule import OpKind, SourceLoc
from meshproof.model.topology import Direction, Endpoint
from meshproof.verify.result import Status

NAME = "launch_separation"


@dataclass(frozen=True, slots=True)
class EndpointOverlap:
    """Two launches that both claim these cubes (with PEs 0..pes-1 of the smaller)."""

    first: int                  # launch indices, first < second
    second: int
    cubes: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"launches": [self.first + 1, self.second + 1], "cubes": list(self.cubes)}


@dataclass(frozen=True, slots=True)
class LinkCrossing:
    """A comm op of `launch` whose port reaches an endpoint of `other`."""

    launch: int
    other: int
    endpoint: Endpoint
    op_index: int
    op: OpKind
    dir: Direction
    peer: Endpoint
    source: SourceLoc

    def diagnostic(self, deployment: Deployment) -> str:
        verb = "sends to" if self.op is OpKind.SEND else "receives from"
        return (f"{self.source}: rank {self.endpoint.describe()}: error: "
                f"{deployment.label(self.launch)}: {self.op.value} {self.dir.value} {verb} "
                f"{self.peer.describe()}, an endpoint of {deployment.label(self.other)}")

    def to_json(self) -> dict[str, Any]:
        return {"launch": self.launch + 1, "other": self.other + 1,
                "cube": self.endpoint.cube, "pe": self.endpoint.pe, "op_index": self.op_index,
                "op": self.op.value, "dir": self.dir.value,
                "peer": [self.peer.cube, self.peer.pe], "source": str(self.source)}


@dataclass(frozen=True, slots=True)
class SeparationResult:
    """launch_separation's status, in words, with every overlap and crossing found."""

    status: Status
    message: str
    overlaps: tuple[EndpointOverlap, ...] = ()
    crossings: tuple[LinkCrossing, ...] = ()
    diagnostics: tuple[str, ...] = ()
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status is Status.PROVED

    def to_json(self, *, timings: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"name": NAME, "status": self.status.value,
                               "message": self.message,
                               "overlaps": [o.to_json() for o in self.overlaps],
                               "crossings": [c.to_json() for c in self.crossings],
                               "diagnostics": list(self.diagnostics)}
        if timings:
            out["seconds"] = round(self.seconds, 4)
        return out


def _owners(deployment: Deployment) -> dict[Endpoint, int]:
    """The launch each endpoint belongs to (the first, where launches overlap)."""
    owner: dict[Endpoint, int] = {}
    for i, s in enumerate(deployment.schedules):
        for cube in s.launch.cubes:
            for pe in range(s.launch.pes):
                owner.setdefault(Endpoint(cube, pe), i)
    return owner


def _overlaps(deployment: Deployment) -> list[EndpointOverlap]:
    out = []
    specs = [s.launch for s in deployment.schedules]
    for i, a in enumerate(specs):
        for j in range(i + 1, len(specs)):
            shared = sorted(set(a.cubes) & set(specs[j].cubes))
            if shared:
                out.append(EndpointOverlap(i, j, tuple(shared)))
    return out


def _crossings(deployment: Deployment, owner: dict[Endpoint, int]) -> list[LinkCrossing]:
    out = []
    for i, s in enumerate(deployment.schedules):
        for prog in s.programs:
            for op in prog.comm_ops:
                assert op.dir is not None
                peer = s.wiring.neighbour(prog.endpoint, op.dir)
                other = owner.get(peer) if peer is not None else None
                if peer is not None and other is not None and not s.launch.is_launched(peer):
                    out.append(LinkCrossing(i, other, prog.endpoint, op.index, op.kind, op.dir,
                                            peer, op.source))
    return out


def launch_separation(deployment: Deployment) -> SeparationResult:
    start = time.perf_counter()
    overlaps = _overlaps(deployment)
    crossings = _crossings(deployment, _owners(deployment))
    seconds = time.perf_counter() - start
    n = len(deployment.schedules)
    if not overlaps and not crossings:
        ops = sum(len(p.comm_ops) for s in deployment.schedules for p in s.programs)
        return SeparationResult(
            Status.PROVED, f"the {n} launches use disjoint endpoints ({deployment.endpoints} "
            f"in all) and none of their {ops} send/recv ops reaches another launch",
            seconds=seconds)
    parts = [f"{deployment.label(o.first)} and {deployment.label(o.second)} both launch "
             f"cube(s) {_cubes_text(o.cubes)}" for o in overlaps]
    pairs = sorted({(c.launch, c.other) for c in crossings})
    parts += [f"{sum(1 for c in crossings if (c.launch, c.other) == p)} op(s) of "
              f"{deployment.label(p[0])} reach {deployment.label(p[1])}" for p in pairs]
    diagnostics = tuple(c.diagnostic(deployment) for c in crossings)
    return SeparationResult(Status.VIOLATED, "; ".join(parts), tuple(overlaps),
                            tuple(crossings), diagnostics, seconds)


def _cubes_text(cubes: tuple[int, ...]) -> str:
    if len(cubes) > 1 and cubes == tuple(range(cubes[0], cubes[-1] + 1)):
        return f"{cubes[0]}..{cubes[-1]}"
    return ", ".join(map(str, cubes))
