"""Verification results: tri-state statuses, diagnostics with file:line, verdicts.

Unknown is never proved: a verdict is `ok` only when every property is proved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from meshproof.model.schedule import LaunchSpec, SourceLoc
from meshproof.model.topology import Endpoint

VERDICT_SCHEMA = "meshproof/verdict-v1"
PROPERTY_NAMES = ("direction_legality", "launch_confinement", "channel_matching",
                  "deadlock_freedom", "exactly_once_merge", "attention_equivalence",
                  "numeric_safety")


class Status(Enum):
    PROVED = "proved"
    VIOLATED = "violated"
    UNKNOWN = "unknown"


class Role(Enum):
    """What a diagnostic says about its op; diagrams colour by it."""

    ILLEGAL = "illegal"            # uses a port the wiring lacks
    OUTSIDE = "outside_launch"     # talks to an endpoint that runs nothing
    UNMATCHED = "unmatched"        # no partner op on the channel
    MISMATCHED = "mismatched"      # partner disagrees on shape/dtype/bytes
    BLOCKED = "blocked"            # where a rank is stuck in a deadlock
    MERGE = "merge"                # an output with a wrong merge count
    DEPARTURE = "departure"        # where a value stops being the attention it should be
    NUMERIC = "numeric"            # a value that can overflow or become undefined
    NOTE = "note"                  # context (e.g. the partner of a mismatch)


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One actionable finding, printed as `file:line: rank (cube C, pe P): error: ...`."""

    message: str
    role: Role
    source: SourceLoc | None = None
    endpoint: Endpoint | None = None
    op_index: int | None = None
    op_kind: str | None = None
    dir: str | None = None
    peer: Endpoint | None = None

    def format(self) -> str:
        where = f"{self.source}: " if self.source else ""
        rank = f"rank {self.endpoint.describe()}: " if self.endpoint else ""
        level = "note" if self.role is Role.NOTE else "error"
        return f"{where}{rank}{level}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "role": self.role.value,
            "source": str(self.source) if self.source else None,
            "cube": self.endpoint.cube if self.endpoint else None,
            "pe": self.endpoint.pe if self.endpoint else None,
            "op_index": self.op_index,
            "op": self.op_kind,
            "dir": self.dir,
            "peer": [self.peer.cube, self.peer.pe] if self.peer else None,
        }


@dataclass(frozen=True, slots=True)
class Counterexample:
    summary: str
    diagnostics: tuple[Diagnostic, ...]
    # extra structured facts, e.g. ("wait_for_cycle", [[4, 0], [5, 0]]); JSON-able values
    details: tuple[tuple[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"summary": self.summary,
                               "diagnostics": [d.to_json() for d in self.diagnostics]}
        for key, value in self.details:
            out[key] = value
        return out

    def detail(self, key: str, default: Any = None) -> Any:
        for k, v in self.details:
            if k == key:
                return v
        return default


@dataclass(frozen=True, slots=True)
class PropertyResult:
    name: str
    status: Status
    message: str
    counterexample: Counterexample | None = None
    seconds: float = 0.0
    certificate: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status.value,
            "message": self.message,
            "counterexample": self.counterexample.to_json() if self.counterexample else None,
            "seconds": round(self.seconds, 4),
            "certificate": self.certificate,
        }


@dataclass(frozen=True, slots=True)
class Verdict:
    kernel: str
    launch: LaunchSpec
    properties: tuple[PropertyResult, ...]
    min_queue_depth: int | None
    rendezvous: Status                     # deadlock freedom at D = 0
    smt2: str | None = field(default=None, repr=False)  # the certificate query, if kept
    queue_depth: int = -1                  # the D deadlock_freedom was judged at

    @property
    def ok(self) -> bool:
        return all(p.status is Status.PROVED for p in self.properties)

    @property
    def exit_code(self) -> int:
        if any(p.status is Status.VIOLATED for p in self.properties):
            return 1
        if any(p.status is Status.UNKNOWN for p in self.properties):
            return 3
        return 0

    @property
    def depth(self) -> int:
        return self.queue_depth if self.queue_depth >= 0 else self.launch.queue_depth

    def property(self, name: str) -> PropertyResult:
        for p in self.properties:
            if p.name == name:
                return p
        raise KeyError(name)

    def violated(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.properties if p.status is Status.VIOLATED)

    def to_json(self, *, timings: bool = True) -> dict[str, Any]:
        props = [p.to_json() for p in self.properties]
        if not timings:
            for p in props:
                p.pop("seconds")
        return {
            "schema": VERDICT_SCHEMA,
            "ok": self.ok,
            "kernel": self.kernel,
            "launch": self.launch.to_json(),
            "properties": props,
            "min_queue_depth": self.min_queue_depth,
            "queue_depth": self.depth,
            "rendezvous": self.rendezvous.value,
        }
