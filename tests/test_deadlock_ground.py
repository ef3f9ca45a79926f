"""verify/deadlock_ground.py (and the rows of deadlock_encoding.py): the certificates checked
by Z3 as ground facts in chunks. The order certificate holds for a run's own order and fails
for an order that breaks a rule; the stuck-state witness holds for a stuck run's frontier
and fails for a frontier where some rank could still move."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import trace_kernel

from meshproof.model.channels import derive_channels
from meshproof.model.progress import run
from meshproof.verify.deadlock_encoding import DeadlockModel, order_certificate, order_constraints
from meshproof.verify.deadlock_ground import check_order, check_stuck
from meshproof.verify.z3util import Budget, SatResult

BUDGET = Budget(30.0, 200_000_000)


def _setup(depth: int, **options: object):  # type: ignore[no-untyped-def]
    schedule = trace_kernel("mesh_mlo_1d", **options)
    table = derive_channels(schedule)
    model = DeadlockModel(schedule, table)
    return table, order_constraints(model, depth), run(schedule, table, depth).stamps, model


@pytest.mark.parametrize("depth", [3, 4, 8])
def test_a_finished_runs_order_is_a_certificate(depth: int) -> None:
    table, cons, stamps, _ = _setup(depth)
    n = table.cols.n
    assert cons.counts["program_order"] == n - 8 and cons.counts["message_order"] == n // 2
    assert len(cons.never) == 0 and cons.holds(stamps)
    for chunk in (n, 50, 7):  # chunks are independent: any split gives the same answer
        for starts in (None, table.cols.start):   # program order as pairs or as chains
            outcome, chunks = check_order(cons, stamps, BUDGET, chunk_rows=chunk,
                                          starts=starts)
            assert outcome.result is SatResult.SAT and chunks == -(-n // chunk)


@pytest.mark.parametrize("rule", ["program_order", "message", "capacity"])
def test_an_order_that_breaks_one_rule_is_rejected(rule: str) -> None:
    _, cons, stamps, _ = _setup(3)
    bad = stamps.copy()
    after, before = {"program_order": cons.program, "message": cons.message,
                     "capacity": cons.capacity}[rule]
    a, b = int(after[len(after) // 2]), int(before[len(after) // 2])
    bad[a] = bad[b]   # the op no longer comes strictly after what it waits for
    assert not cons.holds(bad)
    for starts in (None, _setup(3)[0].cols.start):
        outcome, _ = check_order(cons, bad, BUDGET, chunk_rows=64, starts=starts)
        assert outcome.result is SatResult.UNSAT


def test_rendezvous_pairs_share_a_timestamp() -> None:
    import randprog

    from meshproof.model.loader import resolve_kernel

    kernel = resolve_kernel(randprog.KERNEL_SPEC)
    checked = 0
    for ex in randprog.seeded_examples(11, 80):
        schedule = randprog.trace_example(ex, kernel)
        table = derive_channels(schedule)
        p = run(schedule, table, 0)
        if p.deadlock or table.cols.n == 0:
            continue
        cons = order_constraints(DeadlockModel(schedule, table), 0)
        assert cons.holds(p.stamps)
        assert check_order(cons, p.stamps, BUDGET)[0].result is SatResult.SAT
        bad = p.stamps.copy()
        bad[cons.message[0][0]] += 1   # a send no longer meets its recv
        assert check_order(cons, bad, BUDGET)[0].result is SatResult.UNSAT
        checked += 1
    assert checked >= 5


def test_ops_that_can_never_complete_make_the_certificate_false() -> None:
    # D = 2: the third send of a step has no (k-2)-th recv before it that can come first
    schedule = trace_kernel("ring_mlo", wiring="pe_line")   # ops on missing links
    table = derive_channels(schedule)
    cons = order_constraints(DeadlockModel(schedule, table), 4)
    assert len(cons.never) > 0 and not cons.holds(np.arange(table.cols.n))
    assert check_order(cons, np.arange(table.cols.n), BUDGET)[0].result is SatResult.UNSAT


def test_the_named_query_says_the_same_as_the_ground_facts() -> None:
    _, cons, stamps, model = _setup(3)
    solver, counts, text = order_certificate(model, 3, stamps, BUDGET)
    assert {k: counts[k] for k in cons.counts} == cons.counts
    assert "(declare-const t_c0p0_op" in text and "; group: queue_capacity_D3" in text
    assert str(solver.check()) == "sat"


def test_a_launch_without_messages_has_an_empty_certificate() -> None:
    schedule = trace_kernel("mesh_mlo_1d", pes=1)
    table = derive_channels(schedule)
    cons = order_constraints(DeadlockModel(schedule, table), 3)
    stamps = run(schedule, table, 3).stamps
    assert table.cols.n == 0 and cons.holds(stamps)
    outcome, chunks = check_order(cons, stamps, BUDGET, starts=table.cols.start)
    assert outcome.result is SatResult.SAT and chunks == 1


def _stuck_runs():  # type: ignore[no-untyped-def]
    import randprog

    from meshproof.model.loader import resolve_kernel

    kernel = resolve_kernel(randprog.KERNEL_SPEC)
    for ex in randprog.seeded_examples(5, 120):
        schedule = randprog.trace_example(ex, kernel)
        table = derive_channels(schedule)
        for depth in (0, 1, 2):
            p = run(schedule, table, depth)
            if p.deadlock:
                yield schedule, table, depth, p


def test_a_stuck_runs_frontier_is_a_reachable_stuck_state() -> None:
    seen = 0
    for schedule, table, depth, p in _stuck_runs():
        model = DeadlockModel(schedule, table)
        for chunk in (10_000, 5):
            outcome, _ = check_stuck(model, depth, p.stamps, BUDGET, chunk_rows=chunk)
            assert outcome.result is SatResult.SAT, (depth, chunk)
        seen += 1
    assert seen >= 20


def test_a_frontier_where_a_rank_could_move_is_rejected() -> None:
    # undo the last op of a rank that finished: it is now the rank's next op, and it was
    # enabled (it ran), so the state is not stuck there
    rejected = 0
    for schedule, table, depth, p in _stuck_runs():
        cols = table.cols
        done_ranks = [r for r in range(len(cols.start) - 1)
                      if cols.start[r + 1] > cols.start[r] and r not in p.stuck]
        if not done_ranks:
            continue
        last = int(cols.start[done_ranks[0] + 1]) - 1
        bad = p.stamps.copy()
        bad[last] = -1
        if depth == 0 and cols.partner[last] >= 0:
            bad[int(cols.partner[last])] = -1   # a rendezvous pair is undone together
        outcome, _ = check_stuck(DeadlockModel(schedule, table), depth, bad, BUDGET)
        assert outcome.result is SatResult.UNSAT, depth
        rejected += 1
    assert rejected >= 10
