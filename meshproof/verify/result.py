"""Verification results: tri-state statuses, diagnostics with file:line, verdicts.

Unknown is never proved: a verdict is `ok` only when every property it checked is
proved, and it names the properties it did not check (`skipped`). Counterexample facts
are typed records (`details`, details.py); JSON is produced only by the `to_json` methods.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from meshproof.exitcodes import ExitCode
from meshproof.model.problem import DEFAULT_INPUT_BOUND
from meshproof.model.schedule import LaunchSpec, OpKind, SourceLoc
from meshproof.model.topology import Direction, Endpoint
from meshproof.verify.property_names import Property

if TYPE_CHECKING:  # the details are a counterexample's: a proved run never loads them
    from meshproof.verify.details import Details

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
        from meshproof.verify.details import _pair  # for a counterexample only

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
