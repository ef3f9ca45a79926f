"""Counterexample details: the typed facts of each property's finding (blocked ops of a
deadlock, leftover messages, merge counts, witnesses, hazards, rounding bounds), each with
its `to_json`. result.py wraps them in a `Counterexample`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from meshproof.model.schedule import OpKind, SourceLoc
from meshproof.model.topology import Direction, Endpoint


def _pair(ep: Endpoint) -> list[int]:
    return [ep.cube, ep.pe]


@dataclass(frozen=True, slots=True)
class BlockedOp:
    """The op a rank is stuck at in a deadlock."""

    endpoint: Endpoint
    op_index: int
    op: OpKind
    dir: Direction | None
    source: SourceLoc

    def to_json(self) -> dict[str, Any]:
        return {"cube": self.endpoint.cube, "pe": self.endpoint.pe,
                "op_index": self.op_index, "op": self.op.value,
                "dir": self.dir.value if self.dir else None, "source": str(self.source)}


@dataclass(frozen=True, slots=True)
class DeadlockDetails:
    """deadlock_freedom's counterexample facts: the blocked ops and the wait-for cycle."""

    blocked: tuple[BlockedOp, ...]          # every blocked rank, in rank order
    wait_for_cycle: tuple[Endpoint, ...]    # in cycle order; () when there is none
    queue_depth: int

    def to_json(self) -> dict[str, Any]:
        return {"blocked": [b.to_json() for b in self.blocked],
                "queue_depth": self.queue_depth,
                "wait_for_cycle": [_pair(e) for e in self.wait_for_cycle]}


@dataclass(frozen=True, slots=True)
class ConfinementDetails:
    """launch_confinement's counterexample facts: the endpoints outside the launch."""

    outside_endpoints: tuple[Endpoint, ...]   # sorted

    def to_json(self) -> dict[str, Any]:
        return {"outside_endpoints": [_pair(e) for e in self.outside_endpoints]}


@dataclass(frozen=True, slots=True)
class Leftover:
    """A link whose sends and recvs do not pair up."""

    link: str
    sends: int
    recvs: int

    def to_json(self) -> dict[str, Any]:
        return {"link": self.link, "sends": self.sends, "recvs": self.recvs}


@dataclass(frozen=True, slots=True)
class MatchingDetails:
    """channel_matching's counterexample facts: the links whose messages do not pair up."""

    leftovers: tuple[Leftover, ...]

    def to_json(self) -> dict[str, Any]:
        return {"leftovers": [lo.to_json() for lo in self.leftovers]}


@dataclass(frozen=True, slots=True)
class MergeCount:
    """How often an output on `endpoint` counts key rows [lo, hi) (held by `shard`),
    relative to its lightest row: 1 is exactly once."""

    endpoint: Endpoint
    shard: Endpoint | None
    rows: tuple[int, int]
    numerator: float
    denominator: float | None

    def to_json(self) -> dict[str, Any]:
        return {"cube": self.endpoint.cube, "pe": self.endpoint.pe,
                "shard": _pair(self.shard) if self.shard else None, "rows": list(self.rows),
                "numerator": _num(self.numerator),
                "denominator": _num(self.denominator) if self.denominator is not None else None}


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else float(f"{x:.6g}")


@dataclass(frozen=True, slots=True)
class MergeDetails:
    """exactly_once_merge's counterexample facts: every wrong count."""

    counts: tuple[MergeCount, ...]
    witness: Witness | None = None     # an input on which the wrong count shows

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"counts": [c.to_json() for c in self.counts]}
        if self.witness is not None:
            out["witness"] = self.witness.to_json()
        return out


@dataclass(frozen=True, slots=True)
class Witness:
    """Inputs on which a stored output differs from attention, evaluated exactly enough."""

    inputs: str                          # how to rebuild them (family and seed)
    precision: str                       # "float64" or "40-digit"
    rel_err: float                       # max |kernel - reference| / max |reference|
    endpoint: Endpoint
    source: SourceLoc                    # the store
    element: tuple[int, int, int]        # (query row, q head, feature) of the worst element
    got: float
    want: float

    def to_json(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "precision": self.precision,
                "rel_err": _number(self.rel_err), "cube": self.endpoint.cube,
                "pe": self.endpoint.pe, "source": str(self.source),
                "element": list(self.element), "got": _number(self.got),
                "want": _number(self.want)}


def _number(x: float) -> float | str:
    """A float for JSON: 6 significant digits, or "nan", "inf", "-inf" (a witness output
    can be undefined; JSON has no such numbers)."""
    if math.isfinite(x):
        return float(f"{x:.6g}")
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


@dataclass(frozen=True, slots=True)
class AttentionDetails:
    """attention_equivalence's counterexample facts: the witness, when one was found."""

    witness: Witness | None
    failing_outputs: int

    def to_json(self) -> dict[str, Any]:
        return {"witness": self.witness.to_json() if self.witness else None,
                "failing_outputs": self.failing_outputs}


@dataclass(frozen=True, slots=True)
class Hazard:
    """A value that can overflow or become undefined, at its op, with its bound."""

    kind: str                             # exp_positive | overflow | empty_partial
    endpoint: Endpoint
    source: SourceLoc
    bound: float | None
    limit: float | None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "cube": self.endpoint.cube, "pe": self.endpoint.pe,
                "source": str(self.source),
                "bound": float(f"{self.bound:.6g}") if self.bound is not None else None,
                "limit": self.limit}


@dataclass(frozen=True, slots=True)
class NumericDetails:
    hazards: tuple[Hazard, ...]
    input_bound: float

    def to_json(self) -> dict[str, Any]:
        return {"hazards": [h.to_json() for h in self.hazards], "input_bound": self.input_bound}


@dataclass(frozen=True, slots=True)
class RoundingDetails:
    """A rounding witness: an input within the assumption whose computed output (the
    simulator's arithmetic) is farther from attention (40 digits) than the tolerance.
    `inputs` holds Q, K and V per group (rows, heads, d_head) as f16 values, for `meshproof
    simulate --witness FILE`; left out (None) past 65,536 elements. `endpoint` is the rank
    whose store was judged (its group's inputs hold the element)."""

    family: str
    source: str
    element: tuple[int, int, int]        # (query row, head, feature)
    machine: float
    exact: float
    max_v: float
    error: float                         # |machine - exact| / max|V|
    tolerance: float
    bound: float | None
    inputs: dict[str, dict[str, list[Any]]] | None = None
    endpoint: Endpoint | None = None

    def to_json(self) -> dict[str, Any]:
        witness = {"family": self.family, "source": self.source,
                   "element": list(self.element), "machine": self.machine,
                   "exact": float(f"{self.exact:.17g}"), "max_v": self.max_v,
                   "error": float(f"{self.error:.4g}"), "tolerance": self.tolerance,
                   "bound": None if self.bound is None else float(f"{self.bound:.4g}"),
                   "inputs": self.inputs}
        if self.endpoint is not None:
            witness.update(cube=self.endpoint.cube, pe=self.endpoint.pe)
        return {"witness": witness}


Details = (DeadlockDetails | ConfinementDetails | MatchingDetails | MergeDetails |
           AttentionDetails | NumericDetails | RoundingDetails)
