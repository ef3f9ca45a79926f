"""Outputs never written at any queue depth (verify/unwritten.py, model/blocking.py).

attention_equivalence and exactly_once_merge read the dataflow as if every op completes;
an output whose rank is blocked at every queue depth is never written, so both are
violated, with the blocked op's line. A deadlock that only the queue depth causes keeps
their verdicts, which say they hold once the schedule completes (spec/properties.md §5-6).
"""

from __future__ import annotations

from pathlib import Path

from helpers import TEST_KERNELS, WIDE, kernel_spec, line_of, trace_kernel, verify_kernel

import meshproof.kernels.mesh_mlo as mesh_mlo
from meshproof.model.blocking import Blocking, Cause, blocking
from meshproof.model.channels import derive_channels
from meshproof.verify.api import VerifyConfig
from meshproof.verify.properties import Property
from meshproof.verify.result import PropertyResult, Role, Status, Verdict

SEMANTIC = (Property.EXACTLY_ONCE_MERGE, Property.ATTENTION_EQUIVALENCE)
KERNELS = TEST_KERNELS / "blocked_outputs.py"
MLO = Path(mesh_mlo.__file__)


def _prop(verdict: Verdict, prop: Property) -> PropertyResult:
    return next(p for p in verdict.properties if p.name is prop)


def _blocked_lines(result: PropertyResult) -> set[int]:
    assert result.counterexample is not None
    return {d.source.line for d in result.counterexample.diagnostics
            if d.role is Role.BLOCKED and d.source is not None}


def test_an_output_behind_a_send_on_a_missing_link_is_never_written() -> None:
    """The issue's line merge: PE 7 first sends m north (pe_line has no N link), so no
    rank ever stores; both semantic properties are violated at PE 7's send."""
    verdict = verify_kernel(kernel_spec("blocked_outputs.py::line_merge_north_first"), WIDE)
    line = line_of(KERNELS, "BLOCKS: no N link")
    store = line_of(KERNELS, "# STORE")
    for prop in SEMANTIC:
        result = _prop(verdict, prop)
        assert result.status is Status.VIOLATED, result.message
        assert _blocked_lines(result) == {line}
        assert result.message.startswith(
            f"the output at tests/kernels/blocked_outputs.py:{store} on (cube 0, pe 0) is "
            f"never written: (cube 0, pe 7) is blocked at tests/kernels/blocked_outputs.py:"
            f"{line} (send N: pe_line has no N link here)")


def test_recv_first_deadlocks_at_every_depth_so_its_outputs_are_never_written() -> None:
    verdict = verify_kernel("mesh_mlo_1d_recv_first", WIDE)
    line = line_of(MLO, "m = tl.recv(dir=direction")
    for prop in SEMANTIC:
        result = _prop(verdict, prop)
        assert result.status is Status.VIOLATED, result.message
        assert _blocked_lines(result) == {line}
        assert "wait-for cycle c0p0 -> c0p1 -> c0p0, which no queue depth breaks" in \
            result.message


def test_a_rank_waiting_on_an_endpoint_outside_the_launch_never_writes() -> None:
    verdict = verify_kernel("mesh_mlo_2d_physical_rank", WIDE, mesh="2x4", wiring="cube_mesh",
                            cube_start=8)
    for prop in SEMANTIC:
        result = _prop(verdict, prop)
        assert result.status is Status.VIOLATED
        assert "(recv N: (cube 4, pe 0) is outside the launch and never sends)" in \
            result.message


def test_a_deadlock_only_the_queue_depth_causes_keeps_the_semantic_proofs() -> None:
    """mesh_mlo_1d sends three messages per direction before receiving: it deadlocks at
    depth 2 and completes from depth 3; its outputs are attention once it completes."""
    verdict = verify_kernel("mesh_mlo_1d", VerifyConfig(rounding_tolerance=0.1, queue_depth=2))
    assert _prop(verdict, Property.DEADLOCK_FREEDOM).status is Status.VIOLATED
    for prop in SEMANTIC:
        result = _prop(verdict, prop)
        assert result.status is Status.PROVED, result.message
        assert result.message.endswith("; they hold once the schedule completes: it "
                                       "deadlocks at queue depth 2 and completes at depth >= 3")
    at_3 = verify_kernel("mesh_mlo_1d", VerifyConfig(rounding_tolerance=0.1, queue_depth=3))
    for prop in SEMANTIC:
        assert "once the schedule completes" not in _prop(at_3, prop).message


def test_outputs_stored_before_a_rank_blocks_are_judged_as_stored() -> None:
    """Every rank stores its own partial, then PE 7 blocks: the outputs are written, so the
    verdicts judge what they hold (one shard each: violated with a witness), not
    'never written'."""
    verdict = verify_kernel(kernel_spec("blocked_outputs.py::store_then_block"), WIDE)
    for prop in SEMANTIC:
        result = _prop(verdict, prop)
        assert result.status is Status.VIOLATED
        assert "never written" not in result.message


def test_blocking_finds_the_root_cause_and_the_minimal_depth() -> None:
    def of(kernel: str, **options: object) -> Blocking:
        schedule = trace_kernel(kernel, **options)
        return blocking(schedule, derive_channels(schedule))

    ok = of("mesh_mlo_1d")
    assert ok.minimal_depth == 3 and not ok.forever
    north = of(kernel_spec("blocked_outputs.py::line_merge_north_first"))
    assert north.minimal_depth is None
    roots = set(north.roots.values())
    assert {(r.rank, r.cause) for r in roots} == {(7, Cause.NO_LINK)}
    first = of("mesh_mlo_1d_recv_first")
    causes = {r.cause for r in first.roots.values()}
    assert causes == {Cause.CYCLE}
    outside = of("mesh_mlo_2d_physical_rank", mesh="2x4", wiring="cube_mesh", cube_start=8)
    assert Cause.OUTSIDE in {r.cause for r in outside.roots.values()}
