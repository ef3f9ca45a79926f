"""SARIF 2.1.0 for `verify --sarif` and `gate --sarif` (GitHub code scanning, IDE viewers).

One rule per property (from the `Property` enum and `RULE_TEXT`, so a new property cannot
be left out: building the rules fails loudly) plus `numerics`. Each finding of a
counterexample is one result at the kernel's line, the rank in its message; related
locations are the places that explain it (`gate.findings`: the matching send or recv,
what a blocked rank waits for, the store); a deadlock's wait-for cycle is a codeFlow.
`partialFingerprints` hash case, property, file and op, so an alert keeps its identity
across runs. URIs are relative to the working directory when the file lies inside it.

What is reported is the judge's answer (`gate.judge`): in the gate, a violation the
matrix expects (a known-bad kernel still caught) is a *suppressed* result, justified by
the matrix; an unknown property is a warning (never proved, never silent); a case that
raised is a tool execution notification. GitHub takes at most 25,000 results per run:
beyond that they are left out and the run says so.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from meshproof import __version__
from meshproof.errors import InternalError, MeshproofError
from meshproof.gate.findings import Finding, Place
from meshproof.gate.judge import NUMERICS, CaseStatus, ItemStatus
from meshproof.gate.locations import artifact_uri, case_lines, report_path
from meshproof.gate.outcome import PropertyOutcome
from meshproof.gate.results import CaseResult, GateResult
from meshproof.model.loader import resolve_kernel
from meshproof.model.schedule import Schedule
from meshproof.outputs import check_writable, write_text
from meshproof.verify.properties import Property
from meshproof.verify.result import Role, Status, Verdict

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_FLAG = "--sarif"
MAX_RESULTS = 25_000       # GitHub code scanning's limit per run
FINGERPRINT = "meshproofFinding/v1"

# One line per rule: what holding means. A property missing here is an internal error.
RULE_TEXT: dict[str, str] = {
    Property.DIRECTION_LEGALITY.value: "Every send and recv uses a link the wiring has.",
    Property.LAUNCH_CONFINEMENT.value: "Every link used joins two launched endpoints.",
    Property.CHANNEL_MATCHING.value: "On every link the sends and recvs pair up and the "
                                     "k-th pair agrees on shape, dtype and bytes.",
    Property.DEADLOCK_FREEDOM.value: "No reachable state at the queue depth leaves a rank "
                                     "blocked forever.",
    Property.EXACTLY_ONCE_MERGE.value: "Every stored output holds each KV element's "
                                       "contribution exactly once.",
    Property.ATTENTION_EQUIVALENCE.value: "Every stored output equals softmax(scale*q*K^T)*V "
                                          "over its group's KV, for all inputs.",
    Property.NUMERIC_SAFETY.value: "No exp argument is positive, no f16/bf16 value can pass "
                                   "its dtype's max, empty partials stay finite.",
    NUMERICS: "The numpy reference simulation is within tolerance of dense float64 "
              "attention.",
}


class Level(Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


@dataclass(frozen=True, slots=True)
class Alert:
    """What one property (or the numerics) of one case reports: each finding becomes a
    result; without findings, one result at `fallback`."""

    case: str
    rule: str
    level: Level
    message: str
    findings: tuple[Finding, ...] = ()
    cycle: tuple[Place, ...] = ()
    fallback: Place | None = None
    suppressed: str = ""     # the justification when the violation is expected
    named: bool = True       # messages start with the case name (the gate's many cases)


@dataclass(frozen=True, slots=True)
class Notice:
    """A tool execution notification (a case that could not be run)."""

    message: str
    place: Place | None = None


def rule_ids() -> tuple[str, ...]:
    return (*(p.value for p in Property), NUMERICS)


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def rules() -> list[dict[str, Any]]:
    out = []
    for rule in rule_ids():
        text = RULE_TEXT.get(rule)
        if text is None:
            raise InternalError(f"no SARIF rule description for {rule}; add one to "
                                "RULE_TEXT in meshproof/gate/sarif.py")
        out.append({"id": rule, "name": _camel(rule),
                    "shortDescription": {"text": f"{rule}: {text}"},
                    "fullDescription": {"text": text},
                    "defaultConfiguration": {"level": "error"},
                    "properties": {"tags": ["meshproof", "correctness"]}})
    return out


def _location(place: Place, base: Path | None, message: str = "") -> dict[str, Any]:
    uri, relative = artifact_uri(place.file, base)
    artifact: dict[str, Any] = {"uri": uri}
    if relative:
        artifact["uriBaseId"] = "%SRCROOT%"
    loc: dict[str, Any] = {"physicalLocation": {"artifactLocation": artifact,
                                                "region": {"startLine": max(place.line, 1)}}}
    if place.rank is not None:
        loc["logicalLocations"] = [{"name": place.rank.label, "kind": "rank",
                                    "fullyQualifiedName": f"rank {place.rank.describe()}"}]
    if message:
        loc["message"] = {"text": message}
    return loc


def _fingerprint(alert: Alert, finding: Finding | None, place: Place | None, file: str,
                 seen: Counter[str]) -> str:
    rank = place.rank.label if place and place.rank else ""
    op = finding.op_index if finding and finding.op_index is not None else ""
    line = place.line if place else 0
    key = "\0".join((alert.case, alert.rule, file, rank, str(op),
                     str(line) if op == "" else "", finding.role.value if finding else ""))
    seen[key] += 1
    digest = hashlib.sha256(f"{key}\0{seen[key]}".encode()).hexdigest()[:32]
    return digest


def _result(alert: Alert, finding: Finding | None, base: Path | None, rule_index: int,
            seen: Counter[str]) -> dict[str, Any]:
    place = finding.place if finding else alert.fallback
    if finding is None:
        text = alert.message
    else:
        rank = f"rank {place.rank.describe()}: " if place and place.rank else ""
        text = f"{rank}{finding.message}"
    level = Level.NOTE if finding is not None and finding.role is Role.NOTE else alert.level
    result: dict[str, Any] = {
        "ruleId": alert.rule, "ruleIndex": rule_index, "level": level.value,
        "message": {"text": f"{alert.case}: {text}" if alert.named else text}}
    file = report_path(place.file, base) if place else ""
    if place is not None:
        result["locations"] = [_location(place, base)]
    related = finding.related if finding else ()
    if related:
        result["relatedLocations"] = [
            {**_location(p, base, p.message), "id": i} for i, p in enumerate(related, 1)]
    if alert.cycle and (finding is None or finding.role is Role.BLOCKED):
        result["codeFlows"] = [{
            "message": {"text": "the wait-for cycle: each rank waits for the next"},
            "threadFlows": [{"locations": [
                {"location": _location(p, base, p.message), "nestingLevel": 0,
                 "executionOrder": i} for i, p in enumerate(alert.cycle, 1)]}]}]
    result["partialFingerprints"] = {FINGERPRINT: _fingerprint(alert, finding, place, file,
                                                               seen)}
    props: dict[str, Any] = {"case": alert.case, "property": alert.rule}
    if place is not None and place.rank is not None:
        props.update(cube=place.rank.cube, pe=place.rank.pe)
    if finding is not None:
        props["role"] = finding.role.value
        if finding.op_index is not None:
            props["op_index"] = finding.op_index
    result["properties"] = props
    if alert.suppressed:
        result["suppressions"] = [{"kind": "external", "status": "accepted",
                                   "justification": alert.suppressed}]
    return result


def sarif_log(alerts: Sequence[Alert], notices: Sequence[Notice] = (),
              base: Path | None = None) -> dict[str, Any]:
    """The SARIF log of one run of meshproof: its rules, results and notifications."""
    ids = rule_ids()
    index = {rule: i for i, rule in enumerate(ids)}
    results: list[dict[str, Any]] = []
    seen: Counter[str] = Counter()
    total = 0
    for alert in alerts:
        if alert.rule not in index:
            raise InternalError(f"SARIF alert for unknown rule {alert.rule}")
        items: tuple[Finding | None, ...] = alert.findings or (None,)
        for finding in items:
            total += 1
            if len(results) < MAX_RESULTS:
                results.append(_result(alert, finding, base, index[alert.rule], seen))
    notifications = [_notification(n, base) for n in notices]
    run_props: dict[str, Any] = {"results_total": total,
                                 "results_truncated": total > MAX_RESULTS}
    if total > MAX_RESULTS:
        notifications.append({"level": "warning", "message": {
            "text": f"{total - MAX_RESULTS} of {total} results left out: GitHub code "
                    f"scanning accepts at most {MAX_RESULTS} results per run; the full list "
                    "is in --json / --junit"}})
    invocation: dict[str, Any] = {"executionSuccessful": True}
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    return {"$schema": SARIF_SCHEMA_URI, "version": SARIF_VERSION, "runs": [{
        "tool": {"driver": {"name": "meshproof", "version": __version__,
                            "semanticVersion": __version__, "rules": rules()}},
        "invocations": [invocation],
        "columnKind": "unicodeCodePoints",
        "results": results,
        "properties": run_props}]}


def _notification(notice: Notice, base: Path | None) -> dict[str, Any]:
    out: dict[str, Any] = {"level": "error", "message": {"text": notice.message}}
    if notice.place is not None:
        out["locations"] = [_location(notice.place, base)]
    return out


# ---- verify -------------------------------------------------------------------------------

def verdict_alerts(verdict: Verdict, schedule: Schedule | None,
                   kernel_place: Place | None) -> list[Alert]:
    """A verify run's alerts: each violated property's findings, each unknown a warning."""
    case = verdict.launch.header(verdict.depth)
    alerts: list[Alert] = []
    for result in verdict.properties:
        outcome = PropertyOutcome.of(result, schedule)
        if result.status is Status.VIOLATED:
            alerts.append(Alert(case, result.name.value, Level.ERROR,
                                f"{result.name.value} violated: "
                                f"{outcome.summary or result.message}", outcome.findings,
                                outcome.located.cycle, kernel_place, named=False))
        elif result.status is Status.UNKNOWN:
            alerts.append(Alert(case, result.name.value, Level.WARNING,
                                f"{result.name.value} is unknown (not proved): "
                                f"{result.message}", fallback=kernel_place, named=False))
    return alerts


def verdict_sarif(verdict: Verdict, schedule: Schedule | None, kernel_place: Place | None,
                  base: Path | None = None) -> dict[str, Any]:
    return sarif_log(verdict_alerts(verdict, schedule, kernel_place), [], base)


# ---- gate ---------------------------------------------------------------------------------

def _kernel_place(result: CaseResult) -> Place | None:
    case = result.case
    try:
        site = resolve_kernel(case.launch.kernel or case.kernel).site
    except MeshproofError:
        return None
    return Place(site.display_file, site.def_line)


def case_alerts(result: CaseResult, matrix: Path, lines: dict[str, int]) -> list[Alert]:
    """What one gate case reports, as the judge decided it."""
    case, judgement = result.case, result.judgement
    if judgement is None:
        return []
    where = Place(str(matrix.resolve()), lines.get(case.name, 1))
    kernel = _kernel_place(result) or where
    alerts: list[Alert] = []
    for j in judgement.properties:
        name, got = j.prop.value, j.got
        if got is None or j.status is ItemStatus.MISSING:
            alerts.append(Alert(case.name, name, Level.ERROR,
                                f"{name}: the verifier reported no result", fallback=where))
        elif j.status is ItemStatus.UNKNOWN:
            alerts.append(Alert(case.name, name, Level.WARNING,
                                f"{name} is unknown (not proved): {got.message}",
                                fallback=kernel))
        elif got.status is Status.VIOLATED:
            expected = j.status is ItemStatus.MET
            why = (f"{matrix.as_posix()} expects {name} violated in case {case.name} "
                   "(a known-bad kernel, still caught)") if expected else ""
            alerts.append(Alert(case.name, name, Level.ERROR,
                                f"{name} violated: {got.summary or got.message}",
                                got.findings, got.located.cycle, kernel, why))
        elif j.status is ItemStatus.FAILED:
            alerts.append(Alert(case.name, name, Level.ERROR,
                                f"{name} expected violated (known-bad case), got proved: "
                                "if the kernel was fixed, update expect in the matrix",
                                fallback=where))
    numerics = judgement.numerics
    if numerics is not None and numerics.status is not ItemStatus.MET:
        alerts.append(Alert(case.name, NUMERICS, Level.ERROR, numerics.reason,
                            fallback=kernel))
    return alerts


def gate_sarif(gate: GateResult, base: Path | None = None) -> dict[str, Any]:
    lines = case_lines(gate.matrix)
    alerts: list[Alert] = []
    notices: list[Notice] = []
    rechecks = [f"{r.case.name}: {p.name.value}: {p.recheck}" for r in gate.results
                if r.outcome is not None for p in r.outcome.properties if p.recheck]
    for result in gate.results:
        if result.status is CaseStatus.ERROR:
            notices.append(Notice(f"{result.case.name}: {result.error}",
                                  Place(str(gate.matrix.resolve()),
                                        lines.get(result.case.name, 1))))
            continue
        alerts += case_alerts(result, gate.matrix, lines)
    log = sarif_log(alerts, notices, base)
    if rechecks:   # the recheck key: what the second solver said, a line per property
        log["runs"][0]["properties"]["rechecks"] = rechecks
    return log


# ---- files --------------------------------------------------------------------------------

def check_sarif_target(path: Path) -> None:
    """Fail before any work on a --sarif path that cannot be written."""
    check_writable(path, SARIF_FLAG, what="the SARIF log ")


def dumps_sarif(log: dict[str, Any]) -> str:
    return json.dumps(log, indent=2, sort_keys=True, ensure_ascii=False,
                      allow_nan=False) + "\n"


def write_sarif(path: Path, log: dict[str, Any]) -> None:
    write_text(path, dumps_sarif(log))
