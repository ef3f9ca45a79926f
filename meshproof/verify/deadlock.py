"""deadlock_freedom at queue depth D, the minimal depth, and rendezvous (D = 0).

Decision: one run of the Kahn network (model/progress.py) decides deadlock for every
interleaving at a given D. Certificates: Z3 checks the run's order (deadlock-free) or its
stuck frontier (deadlock); for small launches Z3 also searches for a stuck state on its
own, and the two verdicts must agree or meshproof raises an InternalError.
"""

from __future__ import annotations

import time

from meshproof.errors import InternalError
from meshproof.model.channel_table import ChannelTable, OpRef, PortStatus
from meshproof.model.progress import Progress, depth_sweep, find_cycle, run, wait_for
from meshproof.model.schedule import Schedule
from meshproof.verify.certificate_job import certificate_job, order_constraints_at_depth
from meshproof.verify.deadlock_encoding import DeadlockModel, order_certificate, stuck_state
from meshproof.verify.deadlock_ground import check_order, check_stuck
from meshproof.verify.kahn import progress_at_depth
from meshproof.verify.properties import CheckContext, Property
from meshproof.verify.result import Counterexample, DeadlockResult, Diagnostic, Role, Status
from meshproof.verify.z3util import SatResult, check

MAX_LISTED_BLOCKED = 48


def minimal_depth(schedule: Schedule, table: ChannelTable,
                  known: dict[int, bool] | None = None) -> tuple[int | None, dict[int, bool]]:
    """Smallest D >= 0 that is deadlock-free, or None if even unbounded queues deadlock.

    Deadlock freedom is monotone in D (more buffering only enables more sends), so one
    sweep finds it: run at D = 1 and, each time the run sticks with sends waiting for
    room, go on from that state at D + 1 (model/progress.py `depth_sweep`). It stops at
    the most sends any link carries, where no send can block: that D decides "never".
    `known` maps depths already run to "deadlock-free"; D = 0 (rendezvous) is run apart.
    """
    seen: dict[int, bool] = dict(known or {})
    if 0 not in seen:
        seen[0] = not run(schedule, table, 0).deadlock
    if seen[0]:
        return 0, seen
    sweep = depth_sweep(table)
    for d, ok in sweep.free.items():
        if seen.setdefault(d, ok) != ok:
            raise InternalError(f"the depth sweep says D={d} is "
                                f"{'deadlock-free' if ok else 'deadlocked'}, a run at D={d} "
                                "says otherwise")
    return sweep.minimal, seen


def _blocked_reason(schedule: Schedule, table: ChannelTable, ref: OpRef) -> str:
    """Why a blocked op cannot complete, in words naming the peer it waits on."""
    op = schedule.programs[ref.rank].ops[ref.op]
    use = table.port_use[ref]
    d = op.dir.value if op.dir else "?"
    if use.status is PortStatus.NO_LINK:
        return f"stuck at {op.kind.value} {d}: the wiring has no {d} link here, so it never " \
               "completes (IpcqInvalidDirection)"
    assert use.peer is not None
    if use.status is PortStatus.OUTSIDE:
        what = "never drains the queue" if op.kind.value == "send" else "never sends"
        return f"blocked at {op.kind.value} {d}: {use.peer.describe()} is outside the launch " \
               f"and {what}"
    ch_i, k = table.position[ref]
    ch = table.channels[ch_i]
    if op.kind.value == "send":
        return (f"blocked at send {d} (message {k}): the queue to {use.peer.describe()} is full "
                f"and that rank is not receiving")
    if k >= len(ch.sends):
        return (f"blocked at recv {d} (message {k}): {use.peer.describe()} sends only "
                f"{len(ch.sends)} message(s) on this link")
    return f"blocked at recv {d} (message {k}): {use.peer.describe()} has not sent it"


def _counterexample(schedule: Schedule, table: ChannelTable, progress: Progress) -> Counterexample:
    from meshproof.verify.details import BlockedOp, DeadlockDetails  # for a counterexample only

    diags: list[Diagnostic] = []
    blocked: list[BlockedOp] = []
    for r in sorted(progress.stuck):
        ref = OpRef(r, progress.stuck[r])
        prog = schedule.programs[r]
        op = prog.ops[ref.op]
        blocked.append(BlockedOp(prog.endpoint, op.index, op.kind, op.dir, op.source))
        if len(diags) < MAX_LISTED_BLOCKED:
            diags.append(Diagnostic(_blocked_reason(schedule, table, ref), Role.BLOCKED,
                                    op.source, prog.endpoint, op.index, op.kind, op.dir,
                                    table.port_use[ref].peer))
    eps = find_cycle(wait_for(schedule, table, progress))
    n = len(progress.stuck)
    summary = f"deadlock at queue depth {progress.depth}: {n} rank(s) blocked forever"
    if eps:
        summary += "; wait-for cycle " + " -> ".join(e.label for e in [*eps, eps[0]])
    else:
        summary += "; no cycle: they wait on ranks that never act (outside the launch, " \
                   "missing links, or finished)"
    if n > MAX_LISTED_BLOCKED:
        summary += f" (first {MAX_LISTED_BLOCKED} listed)"
    return Counterexample(summary, tuple(diags),
                          DeadlockDetails(tuple(blocked), tuple(eps), progress.depth))


def deadlock_freedom(ctx: CheckContext) -> DeadlockResult:
    start = time.perf_counter()
    schedule, table, depth, budget = ctx.schedule, ctx.channels, ctx.depth, ctx.budget
    progress = ctx.shared(progress_at_depth)
    model = DeadlockModel(schedule, table)
    n_ops = table.cols.n
    certificates: list[str] = []
    unknown_reason = ""
    text: str | None = None
    # Certify the run's own answer: its order when it finished, its frontier when stuck.
    if not progress.deadlock:
        cons = ctx.shared(order_constraints_at_depth)
        counts = cons.counts
        job = ctx.shared(certificate_job)   # started early by verify on large launches
        outcome, chunks = job.result() if job is not None else \
            check_order(cons, progress.stamps, budget, starts=table.cols.start)
        if outcome.result is SatResult.SAT and not cons.holds(progress.stamps):
            raise InternalError(f"deadlock_freedom at D={depth}: Z3 accepts an order "
                                "certificate that the constraints reject")
        if ctx.config.keep_smt2:
            text = order_certificate(model, depth, progress.stamps, budget)[2]
        what = "order certificate"
        label = (f"z3 order certificate ({counts['program_order']} program-order, "
                 f"{counts['message_order']} message, {counts[f'queue_capacity_D{depth}']} "
                 "capacity constraints" +
                 (f"; ground facts in {chunks} chunks" if chunks > 1 else "") + ")")
        rejected = "the simulation finished but Z3 rejects its order certificate"
    else:
        outcome, chunks = check_stuck(model, depth, progress.stamps, budget)
        if ctx.config.keep_smt2:
            first = table.cols.start
            fixed = {r: table.cols.row(OpRef(r, i)) - int(first[r])
                     for r, i in progress.stuck.items()}
            text = stuck_state(model, depth, budget, fixed, progress.stamp)[1]
        what = "stuck-state witness"
        label = "z3 stuck-state witness check" + (
            f" (ground facts in {chunks} chunks)" if chunks > 1 else "")
        rejected = "the simulation is stuck but Z3 rejects the stuck state as unreachable " \
                   "or not stuck"
    smt2 = text if ctx.config.keep_smt2 else None
    if outcome.result is SatResult.UNSAT:
        raise InternalError(f"deadlock_freedom at D={depth}: {rejected}")
    if outcome.result is SatResult.UNKNOWN:
        unknown_reason = f"{what}: solver returned unknown ({outcome.reason})"
    else:
        certificates.append(label)
    if n_ops <= ctx.config.stuck_state_max_ops and not unknown_reason:
        solver, _ = stuck_state(model, depth, budget)
        outcome = check(solver)
        if outcome.result is SatResult.UNKNOWN:
            unknown_reason = f"stuck-state search: solver returned unknown ({outcome.reason})"
        elif (outcome.result is SatResult.SAT) != progress.deadlock:
            raise InternalError(
                f"deadlock_freedom at D={depth}: simulation says "
                f"{'deadlock' if progress.deadlock else 'deadlock-free'} but the Z3 stuck-state "
                f"search says {outcome.result.value}")
        else:
            certificates.append("z3 stuck-state " +
                                ("search found the deadlock" if progress.deadlock
                                 else "refutation (unsat)"))
    min_depth, seen = minimal_depth(schedule, table, {depth: not progress.deadlock})
    rendezvous_free = seen[0] if 0 in seen else not run(schedule, table, 0).deadlock
    rendezvous = Status.PROVED if rendezvous_free else Status.VIOLATED
    seconds = time.perf_counter() - start
    cert = "; ".join(certificates)
    depth_note = ("min_queue_depth " + (str(min_depth) if min_depth is not None else
                                        "none (deadlocks at every depth)"))

    def result(status: Status, message: str, cx: Counterexample | None = None) -> DeadlockResult:
        return DeadlockResult(Property.DEADLOCK_FREEDOM, status, message, cx, seconds, cert,
                              min_depth, rendezvous, smt2)

    if unknown_reason:
        return result(Status.UNKNOWN,
                      f"simulation says {'deadlock' if progress.deadlock else 'deadlock-free'} "
                      f"at D={depth}, but the Z3 certificate was not obtained: "
                      f"{unknown_reason}; not certified")
    if progress.deadlock:
        cx = _counterexample(schedule, table, progress)
        return result(Status.VIOLATED, f"{cx.summary}; {depth_note}", cx)
    return result(Status.PROVED,
                  f"no reachable stuck state at D={depth} ({n_ops} comm ops); {depth_note}; "
                  f"rendezvous (D=0) {'deadlock-free' if rendezvous_free else 'deadlocks'}")
