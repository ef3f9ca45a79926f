"""The property interface (verify/properties.py, verify/registry.py, verify/api.py)."""

from __future__ import annotations

import pytest
from helpers import WIDE_TOLERANCE, trace_kernel

from meshproof.errors import InternalError, OptionError
from meshproof.model.channels import derive_channels
from meshproof.verify import deadlock, kahn, registry
from meshproof.verify.api import verify
from meshproof.verify.properties import (
    PROPERTY_NAMES,
    CheckContext,
    Property,
    VerifyConfig,
    parse_properties,
)
from meshproof.verify.result import PropertyResult, Status
from meshproof.verify.z3util import Budget

DF, EOM = Property.DEADLOCK_FREEDOM, Property.EXACTLY_ONCE_MERGE


def _context(kernel: str = "mesh_mlo_1d", **options: object) -> CheckContext:
    schedule = trace_kernel(kernel, **options)
    return CheckContext(schedule, derive_channels(schedule), VerifyConfig(),
                        Budget(10.0, 10_000_000))


def test_the_names_and_their_order_are_the_verdicts() -> None:
    assert PROPERTY_NAMES == ("direction_legality", "launch_confinement", "channel_matching",
                              "deadlock_freedom", "exactly_once_merge",
                              "attention_equivalence", "numeric_safety")
    assert list(registry.CHECKS) == list(Property)  # one check per property, in order


def test_names_parse_repeated_or_comma_separated() -> None:
    assert parse_properties(["deadlock_freedom, exactly_once_merge", "deadlock_freedom"]) == \
        {DF, EOM}
    assert parse_properties([]) == frozenset()
    with pytest.raises(OptionError, match="unknown property 'deadlock'; properties: "
                                          "direction_legality, launch_confinement"):
        parse_properties(["deadlock"])


def test_only_and_skip_choose_in_verdict_order() -> None:
    assert VerifyConfig().selected() == tuple(Property)
    assert VerifyConfig(only=frozenset({EOM, DF})).selected() == (DF, EOM)
    assert VerifyConfig(skip=frozenset({DF})).selected() == tuple(p for p in Property
                                                                    if p is not DF)
    assert VerifyConfig(only=frozenset({DF}), skip=frozenset({DF})).selected() == ()


def test_a_skipped_property_is_named_not_proved() -> None:
    """Mistake caught: --skip must not turn into "everything proved"."""
    verdict = verify(trace_kernel("mesh_mlo_1d", queue_depth=3),
                     VerifyConfig(skip=frozenset({EOM}), rounding_tolerance=WIDE_TOLERANCE))
    assert [p.name for p in verdict.properties] == [p for p in Property if p is not EOM]
    assert verdict.skipped == (EOM,)
    assert verdict.ok  # every property *checked* is proved ...
    assert verdict.to_json()["skipped"] == ["exactly_once_merge"]  # ... and it says which not
    # a violation is still a violation with others skipped
    bad = verify(trace_kernel("mesh_mlo_1d", queue_depth=2), VerifyConfig(skip=frozenset({EOM})))
    assert bad.exit_code == 1 and bad.violated() == (DF,)


def test_skipping_deadlock_freedom_leaves_its_facts_out() -> None:
    verdict = verify(trace_kernel("mesh_mlo_1d"), VerifyConfig(only=frozenset({EOM})))
    assert verdict.deadlock is None and verdict.min_queue_depth is None
    doc = verdict.to_json()
    assert doc["rendezvous"] is None and doc["min_queue_depth"] is None
    assert doc["queue_depth"] == 4  # the depth judged at is still the verdict's


def test_an_empty_selection_is_bad_input() -> None:
    with pytest.raises(OptionError, match="leave no property to check"):
        verify(trace_kernel("mesh_mlo_1d"),
               VerifyConfig(only=frozenset({DF}), skip=frozenset({DF})))


def test_a_check_registered_under_another_name_is_an_internal_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def confused(ctx: CheckContext) -> PropertyResult:
        return PropertyResult(DF, Status.PROVED, "says it is deadlock_freedom")

    monkeypatch.setitem(registry.CHECKS, EOM, confused)
    with pytest.raises(InternalError, match="registered for exactly_once_merge reported "
                                            "deadlock_freedom"):
        verify(trace_kernel("mesh_mlo_1d"), VerifyConfig(only=frozenset({EOM})))


def test_a_property_without_a_registered_check_is_an_internal_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(registry.CHECKS, EOM)
    with pytest.raises(InternalError, match="no check is registered for exactly_once_merge"):
        verify(trace_kernel("mesh_mlo_1d"))


def test_a_shared_analysis_runs_once_per_verify_call() -> None:
    ctx = _context()
    calls: list[int] = []

    def analysis(c: CheckContext) -> int:
        calls.append(1)
        return c.depth * 10

    assert ctx.shared(analysis) == ctx.shared(analysis) == 40
    assert calls == [1]
    assert _context().shared(analysis) == 40 and calls == [1, 1]  # a new call: run again


def test_deadlock_freedom_reads_the_shared_kahn_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another property asking for the run at the judged depth gets the same object."""
    ctx = _context(queue_depth=3)
    progress = ctx.shared(kahn.progress_at_depth)

    def no_second_run(*_: object, **__: object) -> None:
        raise AssertionError("the run at the judged depth was computed twice")

    real_run = deadlock.run
    monkeypatch.setattr(deadlock, "run",
                        lambda s, t, d: no_second_run() if d == 3 else real_run(s, t, d))
    result = deadlock.deadlock_freedom(ctx)
    assert result.status is Status.PROVED and ctx.shared(kahn.progress_at_depth) is progress
