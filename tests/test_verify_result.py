"""Verification results (verify/result.py): typed counterexamples, JSON only at the edge."""

from __future__ import annotations

from helpers import trace_kernel

from meshproof.exitcodes import ExitCode
from meshproof.model.schedule import OpKind, SourceLoc
from meshproof.model.topology import Direction, Endpoint
from meshproof.verify.api import verify
from meshproof.verify.details import (
    BlockedOp,
    ConfinementDetails,
    DeadlockDetails,
    Leftover,
    MatchingDetails,
    MergeCount,
    MergeDetails,
)
from meshproof.verify.properties import Property
from meshproof.verify.result import Counterexample, Diagnostic, Role

E = Endpoint


def test_each_kind_of_details_writes_the_verdict_v1_keys() -> None:
    blocked = BlockedOp(E(0, 1), 17, OpKind.RECV, Direction.E, SourceLoc("k.py", 9))
    assert DeadlockDetails((blocked,), (E(0, 0), E(0, 1)), 2).to_json() == {
        "blocked": [{"cube": 0, "pe": 1, "op_index": 17, "op": "recv", "dir": "E",
                     "source": "k.py:9"}],
        "queue_depth": 2, "wait_for_cycle": [[0, 0], [0, 1]]}
    assert ConfinementDetails((E(4, 0), E(5, 0))).to_json() == \
        {"outside_endpoints": [[4, 0], [5, 0]]}
    assert MatchingDetails((Leftover("c0p0_E", 3, 2),)).to_json() == \
        {"leftovers": [{"link": "c0p0_E", "sends": 3, "recvs": 2}]}
    assert MergeDetails((MergeCount(E(0, 0), E(0, 3), (16, 32), 2.0, None),)).to_json() == \
        {"counts": [{"cube": 0, "pe": 0, "shard": [0, 3], "rows": [16, 32], "numerator": 2,
                     "denominator": None}]}


def test_a_counterexample_merges_its_details_into_its_json() -> None:
    diag = Diagnostic("blocked", Role.BLOCKED, SourceLoc("k.py", 9), E(0, 1), 17, OpKind.RECV,
                      Direction.W, E(0, 0))
    plain = Counterexample("s", (diag,))
    assert plain.to_json() == {"summary": "s", "diagnostics": [{
        "message": "blocked", "role": "blocked", "source": "k.py:9", "cube": 0, "pe": 1,
        "op_index": 17, "op": "recv", "dir": "W", "peer": [0, 0]}]}
    with_details = Counterexample("s", (diag,), ConfinementDetails((E(4, 0),)))
    assert with_details.to_json() == {**plain.to_json(), "outside_endpoints": [[4, 0]]}


def test_a_real_deadlock_comes_with_typed_facts() -> None:
    verdict = verify(trace_kernel("mesh_mlo_1d_recv_first", pes=2))
    cx = verdict.property(Property.DEADLOCK_FREEDOM).counterexample
    assert cx is not None and isinstance(cx.details, DeadlockDetails)
    assert [b.endpoint for b in cx.details.blocked] == [E(0, 0), E(0, 1)]
    assert cx.details.wait_for_cycle == (E(0, 0), E(0, 1))
    assert verdict.exit_code is ExitCode.VIOLATED


def test_the_verdict_reports_deadlock_facts_from_the_deadlock_result() -> None:
    verdict = verify(trace_kernel("mesh_mlo_1d", queue_depth=3))
    assert verdict.deadlock is verdict.property("deadlock_freedom")
    assert (verdict.min_queue_depth, verdict.depth, verdict.queue_depth) == (3, 3, 3)
    doc = verdict.to_json(timings=False)
    assert (doc["min_queue_depth"], doc["queue_depth"], doc["rendezvous"], doc["skipped"]) == \
        (3, 3, "violated", [])
    assert all("seconds" not in p for p in doc["properties"])


def test_the_worst_status_wins() -> None:
    from meshproof.exitcodes import ExitCode
    from meshproof.verify.result import Status

    P, U, V = Status.PROVED, Status.UNKNOWN, Status.VIOLATED
    assert P.severity < U.severity < V.severity
    assert Status.worst([]) is P
    assert Status.worst([P, P]) is P
    assert Status.worst([P, U, P]) is U
    assert Status.worst(iter([U, V, P])) is V
    assert [s.exit_code for s in (P, U, V)] == \
        [ExitCode.OK, ExitCode.UNKNOWN, ExitCode.VIOLATED]
