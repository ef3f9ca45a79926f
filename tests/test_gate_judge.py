"""The one judge (gate/judge.py): exactly-these semantics, unknown never passes."""

from __future__ import annotations

import pytest

from meshproof.gate.judge import CaseStatus, Expectation, Numerics, judge
from meshproof.gate.outcome import CaseOutcome, NumericOutcome, PropertyOutcome
from meshproof.verify.properties import Property
from meshproof.verify.result import Status

V, P, U = Status.VIOLATED, Status.PROVED, Status.UNKNOWN


def _outcome(numeric: NumericOutcome | None = None, **statuses: Status) -> CaseOutcome:
    return CaseOutcome(tuple(PropertyOutcome(p, statuses.get(p.value, P), "m")
                             for p in Property), numeric, None)


def test_judge_semantics() -> None:
    expect = Expectation(frozenset({Property.DEADLOCK_FREEDOM}))
    assert judge(expect, _outcome(deadlock_freedom=V)).status is CaseStatus.MET
    # "exactly those violated": an extra violation is a failure
    judged = judge(expect, _outcome(deadlock_freedom=V, channel_matching=V))
    assert judged.status is CaseStatus.FAILED
    assert judged.reasons == ("channel_matching: expected proved, got violated — m",)
    assert judge(expect, _outcome()).status is CaseStatus.FAILED
    assert judge(expect, _outcome(deadlock_freedom=U)).status is CaseStatus.UNKNOWN
    assert judge(expect, _outcome(deadlock_freedom=V, exactly_once_merge=U)).status is \
        CaseStatus.UNKNOWN
    missing = CaseOutcome(_outcome(deadlock_freedom=V).properties[:-1], None, None)
    judged = judge(expect, missing)
    assert judged.status is CaseStatus.FAILED
    assert judged.reasons == ("numeric_safety: the verifier reported no result",)


def test_a_failure_is_listed_before_an_unknown() -> None:
    judged = judge(Expectation(), _outcome(direction_legality=U, exactly_once_merge=V))
    assert judged.status is CaseStatus.FAILED
    assert judged.reasons == ("exactly_once_merge: expected proved, got violated — m",
                              "direction_legality: unknown (m)")


def test_without_exactly_only_the_named_properties_are_judged() -> None:
    loose = Expectation(frozenset({Property.DEADLOCK_FREEDOM}), exactly=False)
    judged = judge(loose, _outcome(deadlock_freedom=V, exactly_once_merge=U))
    assert judged.met and [j.prop for j in judged.properties] == [Property.DEADLOCK_FREEDOM]


@pytest.mark.parametrize(("numerics", "numeric", "met"), [
    (Numerics.IN_TOLERANCE, NumericOutcome(True, 1e-4, 1e-4, 1e-2), True),
    (Numerics.IN_TOLERANCE, NumericOutcome(False, 0.5, 0.1, 1e-2), False),
    (Numerics.OUT_OF_TOLERANCE, NumericOutcome(False, None, None, None, "refused"), True),
    (Numerics.IN_TOLERANCE, None, False),
    (Numerics.UNCHECKED, None, True),
])
def test_numerics_are_judged_only_when_expected(numerics: Numerics,
                                                numeric: NumericOutcome | None,
                                                met: bool) -> None:
    judged = judge(Expectation(numerics=numerics), _outcome(numeric))
    assert judged.met is met
    if numeric is None and not met:
        assert judged.reasons == ("numerics: the simulation did not run",)
