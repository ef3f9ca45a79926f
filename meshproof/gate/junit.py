"""JUnit XML for the gate: one testcase per case x property (plus `numerics` when the case
simulates, `launch_separation` when it is several launches, and `synthesized` when its
kernel must regenerate byte for byte), so CI shows exactly which proof of which launch
broke.

classname is the case name and name the property; a testcase whose property has a
counterexample carries `file` and `line`, its first diagnostic's kernel line, so CI links
it there; the suite is named by the matrix path relative to the working directory. A
property that contradicts its expectation is a <failure> whose text is the
counterexample in `file:line` form; an unknown property or a case that raised is an
<error> (not proved is not passing), a property the case leaves out (`only` / `skip`)
<skipped>; an expected violation that occurred passes and
carries its counterexample in <system-out>. What passes and what fails is the judge's
(`gate.judge`); this module only words it.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from meshproof.gate.judge import (
    NUMERICS,
    CaseStatus,
    ItemStatus,
    JudgedNumerics,
    JudgedProperty,
)
from meshproof.gate.locations import report_path, suite_path
from meshproof.gate.outcome import SEPARATION
from meshproof.gate.results import CaseResult, GateResult
from meshproof.outputs import check_writable, write_text
from meshproof.verify.properties import Property
from meshproof.verify.result import Status

# XML 1.0 cannot carry most control characters, even escaped
_ILLEGAL_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
JUNIT_FLAG = "--junit"
JUNIT_WHAT = "the JUnit report "
SYNTHESIZED = "synthesized"    # the testcase of a `synthesized` case's byte comparison


class Kind(Enum):
    PASS = "pass"
    FAILURE = "failure"
    ERROR = "error"
    SKIPPED = "skipped"       # a property the case leaves out (`only` / `skip`)


@dataclass(frozen=True, slots=True)
class JUnitOutcome:
    """How one JUnit testcase came out."""

    kind: Kind
    message: str = ""
    text: str = ""       # failure/error body, or system-out for a pass
    seconds: float = 0.0


def _clean(text: str) -> str:
    return _ILLEGAL_XML.sub("?", text)


def property_outcome(result: CaseResult, prop: Property) -> JUnitOutcome:
    case = result.case
    if prop not in case.checked:
        return JUnitOutcome(Kind.SKIPPED, f"{case.name}: {prop.value} is not checked (the "
                            "case's only / skip)")
    judged = result.judgement.of(prop) if result.judgement else None
    if result.status is CaseStatus.ERROR or judged is None:
        return JUnitOutcome(Kind.ERROR, f"{case.name}: {result.error}", result.error)
    return _judged_property(case.name, judged)


def _judged_property(case: str, judged: JudgedProperty) -> JUnitOutcome:
    name, got = judged.prop.value, judged.got
    if got is None or judged.status is ItemStatus.MISSING:
        return JUnitOutcome(Kind.ERROR, f"{case}: {name}: the verifier reported no result")
    if judged.status is ItemStatus.UNKNOWN:
        return JUnitOutcome(Kind.ERROR, f"{case}: {name} is unknown (not proved): "
                            f"{got.message}", got.text(), got.seconds)
    if judged.status is ItemStatus.MET:
        text = got.text() if judged.want is Status.VIOLATED else ""
        if got.recheck:   # --recheck / the recheck key: the second solver's word, a line
            text = "\n".join(filter(None, [text, f"re-check: {got.recheck}"]))
        return JUnitOutcome(Kind.PASS, text=text, seconds=got.seconds)
    if got.status is Status.VIOLATED:
        return JUnitOutcome(Kind.FAILURE, f"{case}: {name} expected proved, got violated: "
                            f"{got.summary or got.message}", got.text(), got.seconds)
    return JUnitOutcome(Kind.FAILURE, f"{case}: {name} expected violated (known-bad case), got "
                        f"proved: {got.message}",
                        f"the matrix expects {name} to be violated, but the verifier proved "
                        "it. If the kernel was fixed, update expect in the matrix.\n"
                        + got.message, got.seconds)


def numerics_outcome(result: CaseResult) -> JUnitOutcome:
    case = result.case
    judged = result.judgement.numerics if result.judgement else None
    if result.status is CaseStatus.ERROR or judged is None:
        return JUnitOutcome(Kind.ERROR, f"{case.name}: {result.error}", result.error)
    return _judged_numerics(case.name, judged)


def _judged_numerics(case: str, judged: JudgedNumerics) -> JUnitOutcome:
    if judged.got is None:
        return JUnitOutcome(Kind.ERROR, f"{case}: {NUMERICS}: the simulation did not run")
    if judged.status is ItemStatus.MET:
        return JUnitOutcome(Kind.PASS, text=judged.got.text())
    want = "in" if judged.want_ok else "out of"
    return JUnitOutcome(Kind.FAILURE, f"{case}: {NUMERICS} expected {want} tolerance, got "
                        f"{judged.got.text()}", judged.got.text())


def separation_outcome(result: CaseResult) -> JUnitOutcome:
    """launch_separation of a case that is several launches: it must be proved."""
    case = result.case
    judged = result.judgement.separation if result.judgement else None
    if result.status is CaseStatus.ERROR or judged is None:
        return JUnitOutcome(Kind.ERROR, f"{case.name}: {result.error or 'not checked'}",
                            result.error)
    if judged.status is ItemStatus.MET:
        return JUnitOutcome(Kind.PASS)
    kind = Kind.ERROR if judged.status is ItemStatus.UNKNOWN else Kind.FAILURE
    return JUnitOutcome(kind, f"{case.name}: {judged.reason}", judged.got.text())


def regeneration_outcome(result: CaseResult) -> JUnitOutcome:
    """A `synthesized` case's byte comparison: the committed kernel must be what
    synthesize writes (gate/synthesized.py)."""
    case = result.case
    if result.status is CaseStatus.ERROR or result.judgement is None:
        return JUnitOutcome(Kind.ERROR, f"{case.name}: {result.error}", result.error)
    judged = result.judgement.regeneration
    if judged is None:
        return JUnitOutcome(Kind.PASS)
    return JUnitOutcome(Kind.FAILURE, f"{case.name}: {judged.reason}", judged.reason)


def to_xml(gate: GateResult, suite_name: str | None = None) -> ET.Element:
    suites = ET.Element("testsuites", name="meshproof gate")
    suite = ET.SubElement(suites, "testsuite", name=suite_name or suite_path(gate.matrix))
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total = 0.0
    for result in gate.results:
        outcomes = [(p.value, property_outcome(result, p)) for p in Property]
        if result.case.simulate:
            outcomes.append((NUMERICS, numerics_outcome(result)))
        if result.case.is_deployment:
            outcomes.append((SEPARATION, separation_outcome(result)))
        if result.case.synthesized:
            outcomes.append((SYNTHESIZED, regeneration_outcome(result)))
        for name, outcome in outcomes:
            element = ET.SubElement(suite, "testcase", classname=result.case.name, name=name,
                                    time=f"{outcome.seconds:.3f}")
            place = _first_place(result, name)
            if place is not None:
                # GitLab and the GitHub JUnit reporters link a testcase to this line
                element.set("file", report_path(place[0]))
                element.set("line", str(place[1]))
            counts["tests"] += 1
            total += outcome.seconds
            if outcome.kind is Kind.PASS:
                if outcome.text:
                    ET.SubElement(element, "system-out").text = _clean(outcome.text)
                continue
            counts["failures" if outcome.kind is Kind.FAILURE else
                   "skipped" if outcome.kind is Kind.SKIPPED else "errors"] += 1
            child = ET.SubElement(element, outcome.kind.value,
                                  message=_clean(outcome.message), type=outcome.kind.value)
            child.text = _clean(outcome.text) if outcome.text else None
    for element in (suites, suite):
        for key, value in counts.items():
            element.set(key, str(value))
        element.set("time", f"{total:.3f}")
    return suites


def _first_place(result: CaseResult, name: str) -> tuple[str, int] | None:
    """The kernel line of the counterexample's first located diagnostic, if any."""
    if name in (NUMERICS, SEPARATION, SYNTHESIZED) or result.outcome is None:
        return None
    got = result.outcome.property(Property(name))
    return got.first_place if got is not None else None


def check_junit_target(path: Path) -> None:
    """Fail before the gate runs (minutes in CI) on a --junit path that cannot work."""
    check_writable(path, JUNIT_FLAG, what=JUNIT_WHAT)


def write_junit(gate: GateResult, path: Path) -> None:
    """Write the report atomically: CI never picks up a half-written file."""
    root = to_xml(gate)
    ET.indent(root)
    text = '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode")
    write_text(path, text + "\n")
