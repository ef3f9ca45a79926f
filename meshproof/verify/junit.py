"""JUnit XML for the gate: one testcase per case x property (plus `numerics` when the case
simulates), so CI shows exactly which proof of which launch broke.

classname is the case name and name the property. A property that contradicts its
expectation is a <failure> whose text is the counterexample in `file:line` form; an unknown
property or a case that raised is an <error> (not proved is not passing); an expected
violation that occurred passes and carries its counterexample in <system-out>.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from meshproof.errors import OutputError
from meshproof.verify.gate import CaseResult, CaseStatus, GateResult, PropertyOutcome
from meshproof.verify.gate_cache import write_atomic
from meshproof.verify.gate_matrix import NUMERICS
from meshproof.verify.result import PROPERTY_NAMES, Status

# XML 1.0 cannot carry most control characters, even escaped
_ILLEGAL_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


@dataclass(frozen=True, slots=True)
class JUnitOutcome:
    """How one JUnit testcase came out."""

    kind: str            # "pass", "failure" or "error"
    message: str = ""
    text: str = ""       # failure/error body, or system-out for a pass
    seconds: float = 0.0


def _clean(text: str) -> str:
    return _ILLEGAL_XML.sub("?", text)


def property_outcome(result: CaseResult, name: str) -> JUnitOutcome:
    case = result.case
    if result.status is CaseStatus.ERROR:
        return JUnitOutcome("error", f"{case.name}: {result.error}", result.error)
    prop = result.property(name)
    if prop is None:
        return JUnitOutcome("error", f"{case.name}: {name}: the verifier reported no result")
    want = Status.VIOLATED if case.expects_violated(name) else Status.PROVED
    if prop.status is Status.UNKNOWN:
        return JUnitOutcome("error", f"{case.name}: {name} is unknown (not proved): {prop.message}",
                       prop.text(), prop.seconds)
    if prop.status is want:
        return JUnitOutcome("pass", text=prop.text() if want is Status.VIOLATED else "",
                       seconds=prop.seconds)
    if prop.status is Status.VIOLATED:
        return JUnitOutcome("failure", f"{case.name}: {name} expected proved, got violated: "
                       f"{prop.summary or prop.message}", prop.text(), prop.seconds)
    return JUnitOutcome("failure", f"{case.name}: {name} expected violated (known-bad case), got "
                   f"proved: {prop.message}", _expected_violation_text(prop), prop.seconds)


def _expected_violation_text(prop: PropertyOutcome) -> str:
    return (f"the matrix expects {prop.name} to be violated, but the verifier proved it. "
            "If the kernel was fixed, update expect in the matrix.\n" + prop.message)


def numerics_outcome(result: CaseResult) -> JUnitOutcome:
    case = result.case
    if result.status is CaseStatus.ERROR or result.outcome is None:
        return JUnitOutcome("error", f"{case.name}: {result.error}", result.error)
    numeric = result.outcome.numeric
    if numeric is None:
        return JUnitOutcome("error", f"{case.name}: numerics: the simulation did not run")
    want_ok = not case.expects_violated(NUMERICS)
    if numeric.ok == want_ok:
        return JUnitOutcome("pass", text=numeric.text())
    want = "in" if want_ok else "out of"
    return JUnitOutcome("failure", f"{case.name}: numerics expected {want} tolerance, got "
                   f"{numeric.text()}", numeric.text())


def to_xml(gate: GateResult, suite_name: str | None = None) -> ET.Element:
    suites = ET.Element("testsuites", name="meshproof gate")
    suite = ET.SubElement(suites, "testsuite", name=suite_name or gate.matrix.as_posix())
    counts = {"tests": 0, "failures": 0, "errors": 0}
    total = 0.0
    for result in gate.results:
        names = [*PROPERTY_NAMES, NUMERICS] if result.case.simulate else list(PROPERTY_NAMES)
        for name in names:
            outcome = (numerics_outcome(result) if name == NUMERICS
                       else property_outcome(result, name))
            element = ET.SubElement(suite, "testcase", classname=result.case.name, name=name,
                                    time=f"{outcome.seconds:.3f}")
            counts["tests"] += 1
            total += outcome.seconds
            if outcome.kind == "pass":
                if outcome.text:
                    ET.SubElement(element, "system-out").text = _clean(outcome.text)
                continue
            counts["failures" if outcome.kind == "failure" else "errors"] += 1
            child = ET.SubElement(element, outcome.kind, message=_clean(outcome.message),
                                  type=outcome.kind)
            child.text = _clean(outcome.text) if outcome.text else None
    for element in (suites, suite):
        for key, value in counts.items():
            element.set(key, str(value))
        element.set("time", f"{total:.3f}")
    return suites


def check_junit_target(path: Path) -> None:
    """Fail before the gate runs (minutes in CI) on a --junit path that cannot work: the
    nearest existing ancestor must be a writable directory (missing ones are created)."""
    if path.is_dir():
        raise OutputError(f"cannot write the JUnit report {path}: it is a directory; name "
                          "a file such as reports/proofs.xml")
    parent = path.absolute().parent
    existing = next((p for p in (parent, *parent.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise OutputError(f"cannot write the JUnit report {path}: {existing} is a file, not "
                          "a directory; pass another --junit path")
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write the JUnit report {path}: {existing} is not "
                          "writable; pass another --junit path")


def write_junit(gate: GateResult, path: Path) -> None:
    """Write the report atomically: CI never picks up a half-written file."""
    root = to_xml(gate)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.indent(root)
    text = '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode")
    write_atomic(path, text + "\n")
