"""The one judge: does an outcome meet its expectation?

The gate, its JUnit report, the report's sweep and the pytest helpers all ask this
function and only word its answer differently.

An expectation names the properties expected violated; with `exactly` (a proof matrix
case) every other property must be proved, without it (`assert_violates`) the others are
not judged. Numerics, when checked, must be in tolerance, or out of it when expected
violated; a simulation the simulator refused (the schedule deadlocks) is out of
tolerance. An unknown property is never proved: the case is `unknown` unless something
else contradicts the expectation, which is a plain failure — a decided contradiction is
the more useful thing to report.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from meshproof.gate.outcome import (
    SEPARATION,
    CaseOutcome,
    NumericOutcome,
    PropertyOutcome,
    SeparationOutcome,
)
from meshproof.verify.properties import Property
from meshproof.verify.result import Status

NUMERICS = "numerics"    # the pseudo-property "the numpy simulation is within tolerance"
EXPECT_PROVED = "proved"


class CaseStatus(Enum):
    MET = "met"            # the outcome is exactly the expected one
    FAILED = "failed"      # a decided outcome contradicts the expectation
    UNKNOWN = "unknown"    # some property undecided, nothing contradicts
    ERROR = "error"        # tracing or simulating the case raised (no outcome to judge)


class Numerics(Enum):
    """What the expectation says about the simulation's numbers."""

    UNCHECKED = "unchecked"
    IN_TOLERANCE = "in_tolerance"
    OUT_OF_TOLERANCE = "out_of_tolerance"


class ItemStatus(Enum):
    MET = "met"
    FAILED = "failed"        # decided, and not as expected
    UNKNOWN = "unknown"      # the property came out unknown
    MISSING = "missing"      # no result where one was expected (a failure)


@dataclass(frozen=True, slots=True)
class Expectation:
    """What a case expects: the properties violated, the numerics, and whether every other
    property must be proved."""

    violated: frozenset[Property] = frozenset()
    numerics: Numerics = Numerics.UNCHECKED
    exactly: bool = True     # every property not listed must be proved
    unchecked: frozenset[Property] = frozenset()   # left out (a case's only / skip)

    def wants(self, prop: Property) -> Status | None:
        """The status `prop` must have; None when it is not judged."""
        if prop in self.unchecked:
            return None
        if prop in self.violated:
            return Status.VIOLATED
        return Status.PROVED if self.exactly else None

    @property
    def names(self) -> tuple[str, ...]:
        """The violations expected, in canonical order, as a matrix file writes them."""
        return (*(p.value for p in Property if p in self.violated),
                *((NUMERICS,) if self.numerics is Numerics.OUT_OF_TOLERANCE else ()))

    @property
    def text(self) -> str:
        return ", ".join(self.names) or EXPECT_PROVED


@dataclass(frozen=True, slots=True)
class JudgedProperty:
    """One property of an outcome against the status it must have."""

    prop: Property
    want: Status
    got: PropertyOutcome | None
    status: ItemStatus

    @property
    def reason(self) -> str:
        name, got = self.prop.value, self.got
        if got is None:
            return f"{name}: the verifier reported no result"
        if got.status is Status.UNKNOWN:
            return f"{name}: unknown ({got.message})"
        return (f"{name}: expected {self.want.value}, got {got.status.value}"
                + (f" — {got.summary or got.message}" if got.status is Status.VIOLATED else ""))


@dataclass(frozen=True, slots=True)
class JudgedNumerics:
    """The simulation's numerics against the side of the tolerance they must be on."""

    want_ok: bool
    got: NumericOutcome | None
    status: ItemStatus

    @property
    def reason(self) -> str:
        if self.got is None:
            return f"{NUMERICS}: the simulation did not run"
        return (f"{NUMERICS}: expected {'in' if self.want_ok else 'out of'} tolerance, got "
                f"{self.got.text()}")


@dataclass(frozen=True, slots=True)
class JudgedSeparation:
    """A deployment's launch_separation: it must be proved (no launch uses another's
    endpoints or links)."""

    got: SeparationOutcome
    status: ItemStatus

    @property
    def reason(self) -> str:
        if self.got.status is Status.UNKNOWN:
            return f"{SEPARATION}: unknown ({self.got.message})"
        return f"{SEPARATION}: expected proved, got {self.got.status.value} — {self.got.message}"


@dataclass(frozen=True, slots=True)
class JudgedRegeneration:
    """A `synthesized` case whose committed kernel is not what synthesize writes now: a
    failure whatever the verdict (gate/synthesized.py)."""

    reason: str
    status: ItemStatus = ItemStatus.FAILED


@dataclass(frozen=True, slots=True)
class Judgement:
    """The judge's answer for one outcome: a case status and every item it judged."""

    status: CaseStatus
    properties: tuple[JudgedProperty, ...]     # the judged ones, in verdict order
    numerics: JudgedNumerics | None            # None: numerics not judged
    separation: JudgedSeparation | None = None  # several launches: launch_separation
    regeneration: JudgedRegeneration | None = None  # a stale synthesised kernel

    @property
    def met(self) -> bool:
        return self.status is CaseStatus.MET

    def problems(self) -> tuple[JudgedProperty | JudgedNumerics | JudgedSeparation |
                                JudgedRegeneration, ...]:
        """What is not as expected: contradictions first, then unknowns."""
        items: list[JudgedProperty | JudgedNumerics | JudgedSeparation |
                    JudgedRegeneration] = [*self.properties]
        if self.regeneration is not None:
            items.insert(0, self.regeneration)
        if self.separation is not None:
            items.append(self.separation)
        if self.numerics is not None:
            items.append(self.numerics)
        bad = [i for i in items if i.status in (ItemStatus.FAILED, ItemStatus.MISSING)]
        return (*bad, *(i for i in items if i.status is ItemStatus.UNKNOWN))

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the case is not met, one line each."""
        return tuple(i.reason for i in self.problems())

    def of(self, prop: Property) -> JudgedProperty | None:
        return next((j for j in self.properties if j.prop is prop), None)

    def with_stale_kernel(self, reason: str) -> Judgement:
        """This judgement, failed because the committed synthesised kernel is stale."""
        return replace(self, status=CaseStatus.FAILED,
                       regeneration=JudgedRegeneration(reason))


def judge(expect: Expectation, outcome: CaseOutcome) -> Judgement:
    """Compare an outcome with an expectation."""
    by_name = {p.name: p for p in outcome.properties}
    judged: list[JudgedProperty] = []
    for prop in Property:
        want = expect.wants(prop)
        if want is None:
            continue
        got = by_name.get(prop)
        if got is None:
            status = ItemStatus.MISSING
        elif got.status is Status.UNKNOWN:
            status = ItemStatus.UNKNOWN
        else:
            status = ItemStatus.MET if got.status is want else ItemStatus.FAILED
        judged.append(JudgedProperty(prop, want, got, status))
    numerics = None
    if expect.numerics is not Numerics.UNCHECKED:
        want_ok = expect.numerics is Numerics.IN_TOLERANCE
        got_num = outcome.numeric
        met = got_num is not None and got_num.ok == want_ok
        numerics = JudgedNumerics(want_ok, got_num, ItemStatus.MET if met else ItemStatus.FAILED)
    separation = None
    if outcome.separation is not None:
        got_sep = outcome.separation
        separation = JudgedSeparation(got_sep, ItemStatus.UNKNOWN
                                      if got_sep.status is Status.UNKNOWN else ItemStatus.MET
                                      if got_sep.status is Status.PROVED else ItemStatus.FAILED)
    statuses = {j.status for j in judged} | ({numerics.status} if numerics else set()) | \
        ({separation.status} if separation else set())
    if statuses & {ItemStatus.FAILED, ItemStatus.MISSING}:
        case_status = CaseStatus.FAILED
    elif ItemStatus.UNKNOWN in statuses:
        case_status = CaseStatus.UNKNOWN
    else:
        case_status = CaseStatus.MET
    return Judgement(case_status, tuple(judged), numerics, separation)
