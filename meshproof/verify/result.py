"""Verification results: tri-state statuses, diagnostics with file:line, verdicts.

Unknown is never proved: a verdict is `ok` only when every property it checked is
proved, and it names the properties it did not check (`skipped`). Counterexample facts
are typed records (`details`); JSON is produced only by the `to_json` methods.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from meshproof.exitcodes import ExitCode
from meshproof.model.problem import DEFAULT_INPUT_BOUND
from meshproof.model.schedule import LaunchSpec, OpKind, SourceLoc
from meshproof.model.topology import Direction, Endpoint
from meshproof.verify.property_names import Property

VERDICT_SCHEMA = "meshproof/verdict-v1"


class Status(Enum):
    """A property's status, ordered by how bad it is: proved < unknown < violated. Over
    several (the properties of a verdict, the launches of a deployment, a property over
    every launch) the worst one wins: `Status.worst`."""

    PROVED = "proved"
    VIOLATED = "violated"
    UNKNOWN = "unknown"

    @property
    def severity(self) -> int:
        return _SEVERITY[self]

    @staticmethod
    def worst(statuses: Iterable[Status]) -> Status:
        """The worst of `statuses`; proved when there are none (nothing is wrong)."""
        return max(statuses, key=_SEVERITY.__getitem__, default=Status.PROVED)

    @property
    def exit_code(self) -> ExitCode:
        return _EXIT_CODES[self]


_SEVERITY = {Status.PROVED: 0, Status.UNKNOWN: 1, Status.VIOLATED: 2}
_EXIT_CODES = {Status.PROVED: ExitCode.OK, Status.UNKNOWN: ExitCode.UNKNOWN,
               Status.VIOLATED: ExitCode.VIOLATED}


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


def _pair(ep: Endpoint) -> list[int]:
    return [ep.cube, ep.pe]


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One actionable finding, printed as `file:line: rank (cube C, pe P): error: ...`."""

    message: str
    role: Role
    source: SourceLoc | None = None
    endpoint: Endpoint | None = None
    op_index: int | None = None
    op_kind: OpKind | None = None
    dir: Direction | None = None
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
            "op": self.op_kind.value if self.op_kind else None,
            "dir": self.dir.value if self.dir else None,
            "peer": _pair(self.peer) if self.peer else None,
        }


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


@dataclass(frozen=True, slots=True)
class Counterexample:
    """Why a property is violated: a summary, diagnostics at kernel lines, typed details."""

    summary: str
    diagnostics: tuple[Diagnostic, ...]
    details: Details | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"summary": self.summary,
                               "diagnostics": [d.to_json() for d in self.diagnostics]}
        if self.details is not None:
            out.update(self.details.to_json())
        return out


@dataclass(frozen=True, slots=True)
class PropertyResult:
    """One property's status, in words, with its counterexample and certificate."""

    name: Property
    status: Status
    message: str
    counterexample: Counterexample | None = None
    seconds: float = 0.0
    certificate: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name.value,
            "status": self.status.value,
            "message": self.message,
            "counterexample": self.counterexample.to_json() if self.counterexample else None,
            "seconds": round(self.seconds, 4),
            "certificate": self.certificate,
        }


@dataclass(frozen=True, slots=True)
class DeadlockResult(PropertyResult):
    """deadlock_freedom's result, with the facts the verdict reports beside it."""

    min_queue_depth: int | None = None     # None: deadlocks at every depth
    rendezvous: Status = Status.UNKNOWN    # deadlock freedom at D = 0
    smt2: str | None = field(default=None, repr=False)  # the certificate query, if kept


@dataclass(frozen=True, slots=True)
class NumericResult(PropertyResult):
    """numeric_safety's result, with the assumption it rests on, the tolerance it is judged
    against and the outputs' first-order rounding-error bound (|computed - exact| <=
    error_bound * max|V| + error_floor), when known."""

    input_bound: float = DEFAULT_INPUT_BOUND
    error_bound: float | None = None     # η: relative to max|V|
    error_floor: float | None = None     # τ: absolute (roundings of subnormal values)
    score_bound: float | None = None     # the assumption |scale·q·kᵀ| <= S, if made
    tolerance: float = 1e-2              # T: proved needs η·max|V| + τ <= T·max|V|
    assumption: str = ""                 # both, and where T comes from, in words
    culprits: tuple[Any, ...] = ()       # the bound's mechanisms by share (culprits.Culprit)

    def to_json(self) -> dict[str, Any]:
        out = PropertyResult.to_json(self)
        out["input_bound"] = self.input_bound
        out["score_bound"] = self.score_bound
        out["tolerance"] = self.tolerance
        out["assumption"] = self.assumption
        out["error_bound"] = float(f"{self.error_bound:.4g}") \
            if self.error_bound is not None else None
        out["error_floor"] = float(f"{self.error_floor:.4g}") \
            if self.error_floor is not None else None
        out["culprits"] = [c.to_json() for c in self.culprits]
        return out


class RecheckStatus(Enum):
    """How a property fared under `--recheck` (spec/verify.md "Re-check")."""

    AGREED = "agreed"              # the second solver gave Z3's answer on every query
    EVALUATED = "evaluated"        # a violation's witness re-validated by evaluating it
    DISAGREED = "disagreed"        # the solvers differ: the property is unknown
    UNDECIDED = "undecided"        # a solver returned unknown (timeout, limit): unknown
    NOT_SMT = "not_smt"            # exact algebra, not SMT: not re-checkable by SMT
    NOT_RECHECKED = "not_rechecked"  # already unknown: nothing to re-check


@dataclass(frozen=True, slots=True)
class Recheck:
    """One property's re-check: its outcome, the queries re-solved, in words."""

    name: Property
    solver: str
    status: RecheckStatus
    detail: str              # deterministic words (no timings)
    queries: int = 0
    seconds: float = 0.0

    def describe(self, *, timings: bool = True) -> str:
        """The re-check in one line, e.g. `proved (z3; re-checked by cvc5 in 0.12 s)`."""
        if self.status is RecheckStatus.AGREED:
            took = f" in {self.seconds:.2f} s" if timings else ""
            return f"proved (z3; re-checked by {self.solver}{took})"
        return self.detail

    def to_json(self, *, timings: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"solver": self.solver, "status": self.status.value,
                               "queries": self.queries, "message": self.describe(timings=False)}
        if timings:
            out["seconds"] = round(self.seconds, 4)
        return out


@dataclass(frozen=True, slots=True)
class Verdict:
    """The properties checked for one launch at one queue depth, and those not checked."""

    kernel: str
    launch: LaunchSpec
    properties: tuple[PropertyResult, ...]
    queue_depth: int | None = None         # the D the properties were judged at
    skipped: tuple[Property, ...] = ()     # not checked (--only / --skip)
    rechecks: tuple[Recheck, ...] = ()     # --recheck: one per property checked

    @property
    def ok(self) -> bool:
        """Every property checked is proved (see `skipped` for those not checked)."""
        return all(p.status is Status.PROVED for p in self.properties)

    @property
    def status(self) -> Status:
        """The worst status of the properties checked."""
        return Status.worst(p.status for p in self.properties)

    @property
    def exit_code(self) -> ExitCode:
        return self.status.exit_code

    @property
    def depth(self) -> int:
        return self.queue_depth if self.queue_depth is not None else self.launch.queue_depth

    @property
    def deadlock(self) -> DeadlockResult | None:
        return next((p for p in self.properties if isinstance(p, DeadlockResult)), None)

    @property
    def min_queue_depth(self) -> int | None:
        return self.deadlock.min_queue_depth if self.deadlock else None

    @property
    def rendezvous(self) -> Status | None:
        return self.deadlock.rendezvous if self.deadlock else None

    @property
    def smt2(self) -> str | None:
        return self.deadlock.smt2 if self.deadlock else None

    def property(self, name: Property | str) -> PropertyResult:
        wanted = Property(name)
        for p in self.properties:
            if p.name is wanted:
                return p
        raise KeyError(wanted.value)

    def violated(self) -> tuple[Property, ...]:
        return tuple(p.name for p in self.properties if p.status is Status.VIOLATED)

    def to_json(self, *, timings: bool = True) -> dict[str, Any]:
        props = [p.to_json() for p in self.properties]
        if not timings:
            for p in props:
                p.pop("seconds")
        rechecks = {r.name.value: r.to_json(timings=timings) for r in self.rechecks}
        for p in props:
            if p["name"] in rechecks:
                p["recheck"] = rechecks[p["name"]]
        rendezvous = self.rendezvous
        return {
            "schema": VERDICT_SCHEMA,
            "ok": self.ok,
            "kernel": self.kernel,
            "launch": self.launch.to_json(),
            "properties": props,
            "skipped": [p.value for p in self.skipped],
            "min_queue_depth": self.min_queue_depth,
            "queue_depth": self.depth,
            "rendezvous": rendezvous.value if rendezvous else None,
        }
