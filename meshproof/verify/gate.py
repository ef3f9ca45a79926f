"""The CI proof gate: run every case of a proof matrix and check it met its expectation.

A case *meets* its expectation when every property it lists is violated and every other
property is proved (and, with simulate = true, the numerics are in tolerance unless it
lists "numerics"). A property that came out unknown never counts as proved: the case is
`unknown` (exit 3) unless something else in it contradicts the expectation, which is a
plain failure (exit 1) — a decided contradiction is the more useful thing to report.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from meshproof.errors import (
    BadInput,
    ConfigError,
    InternalError,
    MeshproofError,
    SimulationRefused,
)
from meshproof.model.loader import KernelRef
from meshproof.model.schedule import LaunchSpec, Schedule
from meshproof.model.trace import trace
from meshproof.verify.gate_cache import CACHE_DIR_NAME, GateCache, case_key
from meshproof.verify.gate_matrix import (
    EXPECT_PROVED,
    NUMERICS,
    GateCase,
    GateMatrix,
    resolve_case,
)
from meshproof.verify.result import PROPERTY_NAMES, PropertyResult, Status, Verdict

GATE_SCHEMA = "meshproof/gate-v1"


class CaseStatus(Enum):
    MET = "met"            # the outcome is exactly the expected one
    FAILED = "failed"      # a decided outcome contradicts the expectation
    UNKNOWN = "unknown"    # some property undecided, nothing contradicts
    ERROR = "error"        # tracing or simulating the case raised


@dataclass(frozen=True, slots=True)
class PropertyOutcome:
    """What the gate keeps of a PropertyResult: enough for the table, JUnit and the cache."""

    name: str
    status: Status
    message: str
    summary: str = ""
    diagnostics: tuple[str, ...] = ()   # formatted `file:line: rank (...): error: ...`
    seconds: float = 0.0

    @staticmethod
    def of(result: PropertyResult) -> PropertyOutcome:
        cex = result.counterexample
        return PropertyOutcome(result.name, result.status, result.message,
                               cex.summary if cex else "",
                               tuple(d.format() for d in cex.diagnostics) if cex else (),
                               result.seconds)

    def text(self) -> str:
        """The counterexample as a developer reads it: summary, then file:line lines."""
        lines = [self.summary or self.message] if (self.summary or self.message) else []
        return "\n".join([*lines, *self.diagnostics])

    def to_json(self, timings: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "status": self.status.value,
                               "message": self.message, "summary": self.summary,
                               "diagnostics": list(self.diagnostics)}
        if timings:
            out["seconds"] = self.seconds
        return out

    @staticmethod
    def from_json(data: dict[str, Any]) -> PropertyOutcome:
        return PropertyOutcome(str(data["name"]), Status(data["status"]), str(data["message"]),
                               str(data["summary"]), tuple(str(d) for d in data["diagnostics"]),
                               float(data.get("seconds", 0.0)))


@dataclass(frozen=True, slots=True)
class NumericOutcome:
    ok: bool
    rel_err: float | None
    max_abs_err: float | None
    tolerance: float | None
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "rel_err": self.rel_err, "max_abs_err": self.max_abs_err,
                "tolerance": self.tolerance, "message": self.message}

    @staticmethod
    def from_json(data: dict[str, Any]) -> NumericOutcome:
        return NumericOutcome(bool(data["ok"]), data["rel_err"], data["max_abs_err"],
                              data["tolerance"], str(data["message"]))

    def text(self) -> str:
        if self.message:
            return self.message
        return (f"numerics {'in' if self.ok else 'out of'} tolerance: rel_err "
                f"{_g(self.rel_err)} (tolerance {_g(self.tolerance)}), max_abs_err "
                f"{_g(self.max_abs_err)}")


def _g(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


@dataclass(frozen=True, slots=True)
class CaseOutcome:
    """The cacheable part of a run: what verify (and simulate) said."""

    properties: tuple[PropertyOutcome, ...]
    numeric: NumericOutcome | None
    min_queue_depth: int | None

    @property
    def decided(self) -> bool:
        return all(p.status is not Status.UNKNOWN for p in self.properties)

    def to_json(self) -> dict[str, Any]:
        return {"properties": [p.to_json(timings=True) for p in self.properties],
                "numeric": self.numeric.to_json() if self.numeric else None,
                "min_queue_depth": self.min_queue_depth}

    @staticmethod
    def from_json(data: dict[str, Any]) -> CaseOutcome:
        numeric = data.get("numeric")
        return CaseOutcome(tuple(PropertyOutcome.from_json(p) for p in data["properties"]),
                           NumericOutcome.from_json(numeric) if numeric else None,
                           data.get("min_queue_depth"))


@dataclass(frozen=True, slots=True)
class CaseResult:
    case: GateCase
    status: CaseStatus
    outcome: CaseOutcome | None         # None when the case raised
    reasons: tuple[str, ...]            # why the case failed / is unknown, one line each
    error: str = ""
    seconds: float = 0.0
    cached: bool = False
    launch: LaunchSpec | None = None
    verdict: Verdict | None = field(default=None, compare=False, repr=False)

    @property
    def got(self) -> str:
        """The outcome in the same words as `expect`: proved, or what was violated."""
        if self.outcome is None:
            return "error"
        props = self.outcome.properties
        violated = [p.name for p in props if p.status is Status.VIOLATED]
        if self.outcome.numeric is not None and not self.outcome.numeric.ok:
            violated.append(NUMERICS)
        unknown = [p.name for p in props if p.status is Status.UNKNOWN]
        parts = [", ".join(violated)] if violated else []
        if unknown:
            parts.append("unknown: " + ", ".join(unknown))
        return "; ".join(parts) or EXPECT_PROVED

    def property(self, name: str) -> PropertyOutcome | None:
        if self.outcome is None:
            return None
        return next((p for p in self.outcome.properties if p.name == name), None)

    def to_json(self) -> dict[str, Any]:
        out = self.outcome
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
                {**p.to_json(), "expected": ("violated" if self.case.expects_violated(p.name)
                                             else "proved")}
                for p in (out.properties if out else ())],
            "numeric": out.numeric.to_json() if out and out.numeric else None,
            "min_queue_depth": out.min_queue_depth if out else None,
        }


@dataclass(frozen=True, slots=True)
class GateResult:
    matrix: Path
    results: tuple[CaseResult, ...]

    @property
    def exit_code(self) -> int:
        statuses = {r.status for r in self.results}
        if statuses & {CaseStatus.FAILED, CaseStatus.ERROR}:
            return 1
        if CaseStatus.UNKNOWN in statuses:
            return 3
        return 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def count(self, status: CaseStatus) -> int:
        return sum(1 for r in self.results if r.status is status)

    def to_json(self) -> dict[str, Any]:
        """Deterministic: no timings, no cache hits (they differ run to run)."""
        return {"schema": GATE_SCHEMA, "matrix": self.matrix.as_posix(), "ok": self.ok,
                "exit_code": self.exit_code,
                "counts": {s.value: self.count(s) for s in CaseStatus},
                "cases": [r.to_json() for r in self.results]}


def judge(case: GateCase, outcome: CaseOutcome) -> tuple[CaseStatus, tuple[str, ...]]:
    """Compare an outcome with the case's expectation."""
    failures: list[str] = []
    unknown: list[str] = []
    by_name = {p.name: p for p in outcome.properties}
    for name in PROPERTY_NAMES:
        want = Status.VIOLATED if case.expects_violated(name) else Status.PROVED
        got = by_name.get(name)
        if got is None:
            failures.append(f"{name}: the verifier reported no result")
        elif got.status is Status.UNKNOWN:
            unknown.append(f"{name}: unknown ({got.message})")
        elif got.status is not want:
            failures.append(f"{name}: expected {want.value}, got {got.status.value}"
                            + (f" — {got.summary or got.message}"
                               if got.status is Status.VIOLATED else ""))
    if case.simulate:
        numeric = outcome.numeric
        want_ok = not case.expects_violated(NUMERICS)
        if numeric is None:
            failures.append("numerics: the simulation did not run")
        elif numeric.ok != want_ok:
            failures.append(f"numerics: expected {'in' if want_ok else 'out of'} tolerance, "
                            f"got {numeric.text()}")
    if failures:
        return CaseStatus.FAILED, tuple(failures + unknown)
    if unknown:
        return CaseStatus.UNKNOWN, tuple(unknown)
    return CaseStatus.MET, ()


def evaluate(case: GateCase, *, kernel: KernelRef | None = None,
             cache: GateCache | None = None) -> CaseResult:
    """Trace, verify (and simulate) one case; errors of the kernel become an ERROR result."""
    start = time.perf_counter()
    spec: LaunchSpec | None = None
    try:
        ref, launch = resolve_case(case, kernel)
        spec = launch.spec
        schedule = trace(ref, launch)
        key = case_key(ref, launch, schedule, simulate=case.simulate) if cache else ""
        stored = cache.get(key) if cache else None
        if stored is not None:
            try:
                outcome = CaseOutcome.from_json(stored)
            except (KeyError, TypeError, ValueError):
                stored = None  # an entry from an incompatible build: re-prove
        verdict = None
        if stored is None:
            verdict, outcome = _run(case, schedule)
            if cache is not None and outcome.decided:
                cache.put(key, outcome.to_json())
    except InternalError as exc:
        return _error(case, f"internal error (please report): {exc}", start, spec)
    except MeshproofError as exc:
        return _error(case, str(exc), start, spec)
    status, reasons = judge(case, outcome)
    return CaseResult(case, status, outcome, reasons, seconds=time.perf_counter() - start,
                      cached=stored is not None, launch=spec, verdict=verdict)


def _error(case: GateCase, message: str, start: float, spec: LaunchSpec | None) -> CaseResult:
    return CaseResult(case, CaseStatus.ERROR, None, (message,), error=message,
                      seconds=time.perf_counter() - start, launch=spec)


def _run(case: GateCase, schedule: Schedule) -> tuple[Verdict, CaseOutcome]:
    # looked up at call time so tests (and users) can substitute the verifier
    from meshproof.verify import api as verify_api

    defaults = verify_api.VerifyConfig()
    config = verify_api.VerifyConfig(
        queue_depth=schedule.launch.queue_depth, timeout_s=case.timeout,
        rlimit=case.rlimit if case.rlimit is not None else defaults.rlimit)
    verdict = verify_api.verify(schedule, config)
    numeric = _simulate(schedule) if case.simulate else None
    return verdict, CaseOutcome(tuple(PropertyOutcome.of(p) for p in verdict.properties),
                                numeric, verdict.min_queue_depth)


def _simulate(schedule: Schedule) -> NumericOutcome:
    # imported here so a monkeypatched simulator (tests) is the one called
    from meshproof.sim.api import SimConfig, simulate

    try:
        # timing is not part of the gate; numerics use the simulator's defaults (seed 0)
        numeric = simulate(schedule, SimConfig(timing=False)).numeric
    except SimulationRefused as exc:  # e.g. it deadlocks: there are no numbers to check
        return NumericOutcome(False, None, None, None, f"simulation refused: {exc}")
    if numeric is None:
        return NumericOutcome(False, None, None, None, "the simulator computed no numerics")
    return NumericOutcome(numeric.ok, numeric.rel_err, numeric.max_abs_err, numeric.tolerance,
                          "" if numeric.rel_err is not None else numeric.message)


def check_matrix(matrix: GateMatrix) -> None:
    """Resolve every kernel and build every launch now, so a bad case is a bad file (exit 2)
    before anything is proved, not a failure discovered minutes later."""
    for index, case in enumerate(matrix.cases, start=1):
        try:
            resolve_case(case)
        except BadInput as exc:
            # the same `FILE: case #N (NAME):` prefix as the file's own errors
            raise ConfigError(f"{matrix.path}: case #{index} ({case.name}): {exc}") from None


def default_cache(matrix_path: Path) -> GateCache:
    return GateCache(matrix_path.resolve().parent / CACHE_DIR_NAME / "gate")


def run_gate(matrix: GateMatrix, *, jobs: int = 1, cache: GateCache | None = None,
             on_result: Callable[[CaseResult], None] | None = None) -> GateResult:
    """Run every case, in matrix order in the result whatever the completion order."""
    results: dict[int, CaseResult] = {}
    if jobs <= 1 or len(matrix.cases) <= 1:
        for i, case in enumerate(matrix.cases):
            results[i] = evaluate(case, cache=cache)
            if on_result:
                on_result(results[i])
    else:
        # spawn, not fork: the parent may run a progress-display thread
        context = multiprocessing.get_context("spawn")
        workers = min(jobs, len(matrix.cases))
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = {pool.submit(_evaluate_in_worker, case, cache.directory if cache else None): i
                       for i, case in enumerate(matrix.cases)}
            for future in as_completed(futures):
                i = futures[future]
                results[i] = future.result()
                if on_result:
                    on_result(results[i])
    return GateResult(matrix.path, tuple(results[i] for i in range(len(matrix.cases))))


def _evaluate_in_worker(case: GateCase, cache_dir: Path | None) -> CaseResult:
    result = evaluate(case, cache=GateCache(cache_dir) if cache_dir else None)
    # the full verdict stays in the worker; the outcome carries what the gate reports
    return CaseResult(result.case, result.status, result.outcome, result.reasons,
                      result.error, result.seconds, result.cached, result.launch)
