"""`--recheck cvc5`: a second solver re-solves every query a protocol verdict rests on.

Rules (spec/verify.md "Re-check"): a proved protocol property stays proved only when
Z3 and the second solver both give the answer the verdict rests on, on every query;
a disagreement, or an unknown from either, makes it unknown with both answers in the
message. A violated property's counterexample is re-validated by evaluating it, not by a
second solver. The semantic properties are exact algebra, not SMT: their re-check says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from meshproof.model.progress import run
from meshproof.verify.cvc5_solver import solve_cvc5
from meshproof.verify.kahn import progress_at_depth
from meshproof.verify.properties import (
    PROTOCOL_PROPERTIES,
    CheckContext,
    Property,
    RecheckSolver,
)
from meshproof.verify.recheck_queries import (
    Enumerated,
    Query,
    confinement_query,
    deadlock_queries,
    legality_query,
    matching_query,
    stuck_state_fault,
)
from meshproof.verify.result import PropertyResult, Recheck, RecheckStatus, Status
from meshproof.verify.z3util import Budget, Outcome, SatResult, check, new_solver

Solve = Callable[[str, Budget], Outcome]
NOT_SMT = ("not re-checkable by SMT: exact algebra over the schedule, decided without a "
           "solver")


def solve_z3(text: str, budget: Budget) -> Outcome:
    solver = new_solver(budget)
    solver.from_string(text)
    return check(solver)


def second_solver(name: RecheckSolver) -> Solve:
    """The solve function of a re-check solver (one today)."""
    assert name is RecheckSolver.CVC5
    return solve_cvc5


def _answer(outcome: Outcome) -> str:
    return outcome.result.value + (f" ({outcome.reason})" if outcome.reason else "")


def _solve_all(queries: list[Query], budget: Budget, solver: str, solve: Solve
               ) -> tuple[RecheckStatus, str]:
    """Both solvers on every query: AGREED, or the first query where they part."""
    for q in queries:
        z3 = Outcome(q.z3, "") if q.z3 is not None else solve_z3(q.text, budget)
        other = solve(q.text, budget)
        if SatResult.UNKNOWN in (z3.result, other.result):
            return RecheckStatus.UNDECIDED, (
                f"{q.label}: z3 says {_answer(z3)}, {solver} says {_answer(other)}")
        if z3.result is not q.expect or other.result is not q.expect:
            return RecheckStatus.DISAGREED, (
                f"{q.label}: z3 says {_answer(z3)}, {solver} says {_answer(other)}, the "
                f"verdict rests on {q.expect.value}")
    return RecheckStatus.AGREED, f"{len(queries)} quer{'y' if len(queries) == 1 else 'ies'}"


def _deadlock(ctx: CheckContext, result: PropertyResult, solver: str, solve: Solve
              ) -> tuple[RecheckStatus, str, int]:
    schedule, table, depth = ctx.schedule, ctx.channels, ctx.depth
    max_ops = ctx.config.stuck_state_max_ops
    runs = [(depth, ctx.shared(progress_at_depth), True)]
    if depth != 0 and result.status is Status.PROVED:
        runs.append((0, run(schedule, table, 0), False))   # the rendezvous fact it states
    queries: list[Query] = []
    for d, progress, judged in runs:
        if progress.deadlock:
            fault = stuck_state_fault(table, d, progress.stamps)
            if fault:
                return RecheckStatus.DISAGREED, (
                    f"the stuck state at D={d} does not evaluate as stuck: {fault}"), 0
        else:
            queries += deadlock_queries(schedule, table, d, progress.stamps, ctx.budget,
                                        max_ops, z3_answered=judged)
    if result.status is Status.VIOLATED:
        return RecheckStatus.EVALUATED, (
            f"violated: the stuck state at D={depth} re-validated by evaluating it (no "
            "second solver)"), 0
    status, detail = _solve_all(queries, ctx.budget, solver, solve)
    return status, detail, len(queries)


def _enumerated(ctx: CheckContext, prop: Property) -> Enumerated:
    if prop is Property.DIRECTION_LEGALITY:
        return legality_query(ctx.schedule, ctx.channels.cols)
    if prop is Property.LAUNCH_CONFINEMENT:
        return confinement_query(ctx.schedule, ctx.channels.cols)
    return matching_query(ctx.schedule, ctx.channels)


def recheck_one(ctx: CheckContext, result: PropertyResult, name: RecheckSolver,
                solve: Solve | None = None) -> tuple[PropertyResult, Recheck]:
    """One property's re-check, and its result as it stands after it."""
    solver, solve = name.value, solve or second_solver(name)
    start = time.perf_counter()
    prop = result.name
    queries = 0
    if prop not in PROTOCOL_PROPERTIES:
        status, detail = RecheckStatus.NOT_SMT, NOT_SMT
    elif result.status is Status.UNKNOWN:
        status, detail = RecheckStatus.NOT_RECHECKED, "not re-checked: the property is unknown"
    elif prop is Property.DEADLOCK_FREEDOM:
        status, detail, queries = _deadlock(ctx, result, solver, solve)
    else:
        enum = _enumerated(ctx, prop)
        queries = 1
        if result.status is Status.VIOLATED:
            status, detail = (RecheckStatus.EVALUATED,
                              "violated: the counterexample re-validated by evaluating it (no "
                              "second solver)") if enum.violated else (
                RecheckStatus.DISAGREED, "the counterexample does not evaluate as a "
                "violation of the exported enumeration")
        elif enum.violated:
            status, detail = RecheckStatus.DISAGREED, (
                "the exported enumeration evaluates to a violation")
        else:
            status, detail = _solve_all([enum.query], ctx.budget, solver, solve)
    seconds = time.perf_counter() - start
    record = Recheck(prop, solver, status, detail, queries, seconds)
    if status in (RecheckStatus.DISAGREED, RecheckStatus.UNDECIDED):
        was = result.status.value
        result = replace(result, status=Status.UNKNOWN, message=(
            f"{was} by z3 but not confirmed by the {solver} re-check ({detail}); not "
            f"{was} on one solver's word; was: {result.message}"))
    return result, record
