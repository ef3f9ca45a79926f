"""A counterexample's diagnostics as CI tools place them: each finding at its kernel line,
with the related places (the matching send or recv, the op a blocked rank waits for,
the store a departing value reaches) and, for a deadlock, the wait-for cycle as a flow.

Built once, where the schedule is at hand (`PropertyOutcome.of`), and kept in the
outcome and the gate's cache, so SARIF, JUnit and the GitHub annotations can be written
from a cached or worker-process outcome too. A `note` diagnostic (context, e.g. the
partner of a mismatch, a witness) is a related place of the finding before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from meshproof.model.channel_table import OpRef
from meshproof.model.channels import derive_channels
from meshproof.model.schedule import OpKind, Schedule, SourceLoc
from meshproof.model.topology import Endpoint
from meshproof.verify.result import Diagnostic, PropertyResult, Role

MAX_RELATED = 100   # related places per finding (GitHub takes at most 1000)


@dataclass(frozen=True, slots=True)
class Place:
    """A kernel line, as diagnostics print it (`file` is a display path)."""

    file: str
    line: int
    rank: Endpoint | None = None
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "message": self.message,
                "rank": [self.rank.cube, self.rank.pe] if self.rank else None}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Place:
        rank = data.get("rank")
        return Place(str(data["file"]), int(data["line"]),
                     Endpoint(int(rank[0]), int(rank[1])) if rank else None,
                     str(data.get("message", "")))


@dataclass(frozen=True, slots=True)
class Finding:
    """One diagnostic: what is wrong, where, on which rank, and the places that explain it."""

    message: str                      # the diagnostic's message, without file or rank
    role: Role
    text: str                         # the formatted `file:line: rank (...): error: ...`
    place: Place | None               # None: the diagnostic names no kernel line
    op_index: int | None = None
    related: tuple[Place, ...] = ()

    @property
    def rank(self) -> Endpoint | None:
        return self.place.rank if self.place else None

    def to_json(self) -> dict[str, Any]:
        return {"message": self.message, "role": self.role.value, "text": self.text,
                "place": self.place.to_json() if self.place else None,
                "op_index": self.op_index, "related": [p.to_json() for p in self.related]}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Finding:
        place = data.get("place")
        op = data.get("op_index")
        return Finding(str(data["message"]), Role(data["role"]), str(data["text"]),
                       Place.from_json(place) if place else None,
                       int(op) if op is not None else None,
                       tuple(Place.from_json(p) for p in data.get("related", ())))


@dataclass(frozen=True, slots=True)
class Located:
    """A property's findings and, for a deadlock with a wait-for cycle, the cycle in order
    (each step: the blocked op of one rank of the cycle)."""

    findings: tuple[Finding, ...] = ()
    cycle: tuple[Place, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"findings": [f.to_json() for f in self.findings],
                "cycle": [p.to_json() for p in self.cycle]}

    @staticmethod
    def from_json(data: dict[str, Any] | None) -> Located:
        if not data:
            return Located()
        return Located(tuple(Finding.from_json(f) for f in data.get("findings", ())),
                       tuple(Place.from_json(p) for p in data.get("cycle", ())))


def _place(source: SourceLoc | None, rank: Endpoint | None, message: str = "") -> Place | None:
    return Place(source.file, source.line, rank, message) if source is not None else None


class _Context:
    """What related places are looked up in: the schedule's ops and channels."""

    def __init__(self, schedule: Schedule | None, result: PropertyResult) -> None:
        self.schedule = schedule
        self.rank_of = schedule.rank_index() if schedule else {}
        self.table = derive_channels(schedule) if schedule else None
        from meshproof.verify.details import (  # for a counterexample only
            AttentionDetails,
            DeadlockDetails,
        )

        details = result.counterexample.details if result.counterexample else None
        self.blocked = {b.endpoint: b for b in details.blocked} \
            if isinstance(details, DeadlockDetails) else {}
        self.cycle = details.wait_for_cycle if isinstance(details, DeadlockDetails) else ()
        witness = details.witness if isinstance(details, AttentionDetails) else None
        self.witness = witness

    def related(self, d: Diagnostic) -> list[Place]:
        out: list[Place] = []
        if d.endpoint is not None and d.op_index is not None:
            out += self._partner(d.endpoint, d.op_index)
        if d.role is Role.BLOCKED and d.peer is not None and d.peer in self.blocked:
            b = self.blocked[d.peer]
            out.append(Place(b.source.file, b.source.line, b.endpoint,
                             f"what it waits for: rank {b.endpoint.describe()}, itself "
                             f"blocked at {b.op.value}"
                             + (f" {b.dir.value}" if b.dir else "")))
        if d.role in (Role.DEPARTURE, Role.MERGE, Role.NUMERIC) and d.endpoint is not None:
            out += self._stores(d.endpoint, d.source)
        return out

    def _partner(self, ep: Endpoint, op_index: int) -> list[Place]:
        if self.schedule is None or self.table is None or ep not in self.rank_of:
            return []
        rank = self.rank_of[ep]
        ops = self.schedule.programs[rank].ops
        if not 0 <= op_index < len(ops) or not ops[op_index].kind.is_comm:
            return []
        ref = OpRef(rank, op_index)
        if ref not in self.table.position:
            return []
        other = self.table.match(ref, ops[op_index])
        if other is None:
            return []
        peer = self.schedule.programs[other.rank]
        what = "the matching recv" if ops[op_index].kind is OpKind.SEND else "the matching send"
        return [Place(peer.ops[other.op].source.file, peer.ops[other.op].source.line,
                      peer.endpoint, f"{what}, on rank {peer.endpoint.describe()}")]

    def _stores(self, ep: Endpoint, source: SourceLoc | None) -> list[Place]:
        """The stores of `ep`'s outputs (where the departing value ends up)."""
        if self.witness is not None and self.witness.endpoint == ep:
            if self.witness.source != source:
                return [Place(self.witness.source.file, self.witness.source.line, ep,
                              "the store of the output the witness input breaks")]
            return []
        if self.schedule is None or ep not in self.rank_of:
            return []
        outputs = set(self.schedule.launch.outputs)
        seen: set[SourceLoc] = set()
        out: list[Place] = []
        for op in self.schedule.programs[self.rank_of[ep]].ops:
            if op.kind is OpKind.STORE and op.ptr in outputs and op.source != source and \
                    op.source not in seen:
                seen.add(op.source)
                out.append(Place(op.source.file, op.source.line, ep,
                                 f"the store of output {op.ptr}"))
        return out


def locate(result: PropertyResult, schedule: Schedule | None) -> Located:
    """The findings of `result`'s counterexample (none when it has none)."""
    cex = result.counterexample
    if cex is None:
        return Located()
    ctx = _Context(schedule, result)
    findings: list[Finding] = []
    related: list[list[Place]] = []
    for d in cex.diagnostics:
        here = _place(d.source, d.endpoint, d.message)
        if d.role is Role.NOTE and findings:
            if here is not None:
                related[-1].append(here)
            continue
        findings.append(Finding(d.message, d.role, d.format(), here, d.op_index))
        related.append(ctx.related(d))
    located = tuple(
        Finding(f.message, f.role, f.text, f.place, f.op_index, tuple(_dedupe(r))[:MAX_RELATED])
        for f, r in zip(findings, related, strict=True))
    cycle = tuple(p for ep in ctx.cycle if ep in ctx.blocked
                  for p in [_blocked_place(ctx, ep)] if p is not None)
    return Located(located, cycle)


def _blocked_place(ctx: _Context, ep: Endpoint) -> Place | None:
    b = ctx.blocked[ep]
    n = len(ctx.cycle)
    nxt = ctx.cycle[(ctx.cycle.index(ep) + 1) % n] if n else None
    waits = f", waiting for rank {nxt.describe()}" if nxt is not None else ""
    return Place(b.source.file, b.source.line, ep,
                 f"rank {ep.describe()} blocked at {b.op.value}"
                 + (f" {b.dir.value}" if b.dir else "") + waits)


def _dedupe(places: list[Place]) -> list[Place]:
    seen: set[tuple[str, int, Endpoint | None]] = set()
    out: list[Place] = []
    for p in places:
        key = (p.file, p.line, p.rank)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out
