"""What a gate run produced: each case's result (`CaseResult`) and the run's
(`GateResult`), with the gate's JSON (`meshproof/gate-v2`). Apart from the runner, so the
report writers (JUnit, SARIF, GitHub) and the cluster read results without importing the
machinery that makes them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from meshproof.exitcodes import ExitCode
from meshproof.gate.judge import EXPECT_PROVED, NUMERICS, CaseStatus, Judgement
from meshproof.gate.matrix import GateCase
from meshproof.gate.outcome import CaseOutcome, PropertyOutcome
from meshproof.model.schedule import LaunchSpec
from meshproof.verify.properties import Property
from meshproof.verify.result import Status

if TYPE_CHECKING:
    from meshproof.deploy.verify import DeploymentVerdict

GATE_SCHEMA = "meshproof/gate-v2"


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One case of a gate run: its status, the outcome and judgement (None when it raised)."""

    case: GateCase
    status: CaseStatus
    outcome: CaseOutcome | None         # None when the case raised
    judgement: Judgement | None         # None when the case raised
    error: str = ""
    seconds: float = 0.0
    launch: LaunchSpec | None = None

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the case failed / is unknown / raised, one line each."""
        return self.judgement.reasons if self.judgement else (self.error,)

    @property
    def cached(self) -> bool:
        return self.outcome is not None and self.outcome.cached

    @property
    def verdict(self) -> DeploymentVerdict | None:
        return self.outcome.verdict if self.outcome else None

    @property
    def got(self) -> str:
        """The outcome in the same words as `expect`: proved, or what was violated."""
        if self.outcome is None:
            return "error"
        props = self.outcome.properties
        violated = [p.name.value for p in props if p.status is Status.VIOLATED]
        if self.outcome.numeric is not None and not self.outcome.numeric.ok:
            violated.append(NUMERICS)
        unknown = [p.name.value for p in props if p.status is Status.UNKNOWN]
        parts = [", ".join(violated)] if violated else []
        if unknown:
            parts.append("unknown: " + ", ".join(unknown))
        return "; ".join(parts) or EXPECT_PROVED

    def property(self, name: Property) -> PropertyOutcome | None:
        return self.outcome.property(name) if self.outcome else None

    def to_json(self) -> dict[str, Any]:
        out = self.outcome
        violated = self.case.expectation.violated
        return {
            "name": self.case.name,
            "case": self.case.to_json(),
            "launch": self.launch.to_json() if self.launch else None,
            "status": self.status.value,
            "expected": self.case.expected_text,
            "got": self.got,
            "reasons": list(self.reasons),
            "error": self.error or None,
            "properties": [
                {**p.to_json(), "expected": ("violated" if p.name in violated else "proved")}
                for p in (out.properties if out else ())],
            "numeric": out.numeric.to_json() if out and out.numeric else None,
            "min_queue_depth": out.min_queue_depth if out else None,
            "launches": out.launches if out else 1,
            "separation": out.separation.to_json() if out and out.separation else None,
        }


@dataclass(frozen=True, slots=True)
class GateResult:
    """Every case of a gate run, in matrix order."""

    matrix: Path
    results: tuple[CaseResult, ...]

    @property
    def exit_code(self) -> ExitCode:
        statuses = {r.status for r in self.results}
        if statuses & {CaseStatus.FAILED, CaseStatus.ERROR}:
            return ExitCode.VIOLATED
        if CaseStatus.UNKNOWN in statuses:
            return ExitCode.UNKNOWN
        return ExitCode.OK

    @property
    def ok(self) -> bool:
        return self.exit_code is ExitCode.OK

    def count(self, status: CaseStatus) -> int:
        return sum(1 for r in self.results if r.status is status)

    def to_json(self) -> dict[str, Any]:
        """Deterministic: no timings, no cache hits (they differ run to run)."""
        return {"schema": GATE_SCHEMA, "matrix": self.matrix.as_posix(), "ok": self.ok,
                "exit_code": int(self.exit_code),
                "counts": {s.value: self.count(s) for s in CaseStatus},
                "cases": [r.to_json() for r in self.results]}
