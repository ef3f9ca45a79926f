"""deadlock_freedom at queue depth D, the minimal depth, and rendezvous (D = 0).

Decision: one run of the Kahn network (model/progress.py) decides deadlock for every
interleaving at a given D. Certificates: Z3 checks the run's order (deadlock-free) or its
stuck frontier (deadlock); for small launches Z3 also searches for a stuck state on its
own, and the two verdicts must agree or meshproof raises an InternalError.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from meshproof.errors import InternalError
from meshproof.model.channels import ChannelTable, OpRef, PortStatus
from meshproof.model.progress import Progress, max_sends_per_channel, run
from meshproof.model.schedule import Schedule
from meshproof.model.topology import Endpoint
from meshproof.verify.deadlock_encoding import DeadlockModel, order_certificate, stuck_state
from meshproof.verify.result import Counterexample, Diagnostic, PropertyResult, Role, Status
from meshproof.verify.z3util import Budget, SatResult, check

MAX_LISTED_BLOCKED = 48


@dataclass(frozen=True, slots=True)
class DeadlockReport:
    result: PropertyResult
    min_queue_depth: int | None
    rendezvous: Status
    smt2: str | None


def minimal_depth(schedule: Schedule, table: ChannelTable) -> tuple[int | None, dict[int, bool]]:
    """Smallest D >= 0 that is deadlock-free, or None if even unbounded queues deadlock.

    Deadlock freedom is monotone in D (more buffering only enables more sends), and once D
    reaches the most sends any link carries no send can block, so that D decides "never".
    """
    seen: dict[int, bool] = {}

    def free(d: int) -> bool:
        if d not in seen:
            seen[d] = not run(schedule, table, d).deadlock
        return seen[d]

    top = max(1, max_sends_per_channel(table))
    if not free(top):
        return None, seen
    if free(0):
        return 0, seen
    lo, hi = 0, top  # invariant: deadlock at lo, free at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if free(mid):
            hi = mid
        else:
            lo = mid
    return hi, seen


def _waits_on(schedule: Schedule, table: ChannelTable, ref: OpRef) -> tuple[str, int | None]:
    """What a blocked op waits for: a reason and the rank it waits on (if any)."""
    op = schedule.programs[ref.rank].ops[ref.op]
    use = table.port_use[ref]
    d = op.dir.value if op.dir else "?"
    if use.status is PortStatus.NO_LINK:
        return f"stuck at {op.kind.value} {d}: the wiring has no {d} link here, so it never " \
               "completes (IpcqInvalidDirection)", None
    assert use.peer is not None
    if use.status is PortStatus.OUTSIDE:
        what = "never drains the queue" if op.kind.value == "send" else "never sends"
        return f"blocked at {op.kind.value} {d}: {use.peer.describe()} is outside the launch " \
               f"and {what}", None
    ch_i, k = table.position[ref]
    ch = table.channels[ch_i]
    index = schedule.rank_index()
    peer_rank = index[use.peer]
    if op.kind.value == "send":
        return (f"blocked at send {d} (message {k}): the queue to {use.peer.describe()} is full "
                f"and that rank is not receiving", peer_rank)
    if k >= len(ch.sends):
        return (f"blocked at recv {d} (message {k}): {use.peer.describe()} sends only "
                f"{len(ch.sends)} message(s) on this link", peer_rank)
    return (f"blocked at recv {d} (message {k}): {use.peer.describe()} has not sent it",
            peer_rank)


def _counterexample(schedule: Schedule, table: ChannelTable, progress: Progress) -> Counterexample:
    waits: dict[int, int | None] = {}
    diags: list[Diagnostic] = []
    blocked_json = []
    for r in sorted(progress.stuck):
        ref = OpRef(r, progress.stuck[r])
        reason, peer = _waits_on(schedule, table, ref)
        waits[r] = peer
        prog = schedule.programs[r]
        op = prog.ops[ref.op]
        blocked_json.append({"cube": prog.endpoint.cube, "pe": prog.endpoint.pe,
                             "op_index": op.index, "op": op.kind.value,
                             "dir": op.dir.value if op.dir else None,
                             "source": str(op.source)})
        if len(diags) < MAX_LISTED_BLOCKED:
            peer_ep = schedule.programs[peer].endpoint if peer is not None else \
                table.port_use[ref].peer
            diags.append(Diagnostic(reason, Role.BLOCKED, op.source, prog.endpoint, op.index,
                                    op.kind.value, op.dir.value if op.dir else None, peer_ep))
    cycle = _find_cycle(waits)
    eps: list[Endpoint] = [schedule.programs[r].endpoint for r in cycle]
    n = len(progress.stuck)
    summary = f"deadlock at queue depth {progress.depth}: {n} rank(s) blocked forever"
    if eps:
        summary += "; wait-for cycle " + " -> ".join(e.label for e in [*eps, eps[0]])
    else:
        summary += "; no cycle: they wait on ranks that never act (outside the launch, " \
                   "missing links, or finished)"
    if n > MAX_LISTED_BLOCKED:
        summary += f" (first {MAX_LISTED_BLOCKED} listed)"
    return Counterexample(summary, tuple(diags), (
        ("blocked", blocked_json),
        ("queue_depth", progress.depth),
        ("wait_for_cycle", [[e.cube, e.pe] for e in eps]),
    ))


def _find_cycle(waits: dict[int, int | None]) -> list[int]:
    for start in sorted(waits):
        path: list[int] = []
        seen: dict[int, int] = {}
        node: int | None = start
        while node is not None and node in waits and node not in seen:
            seen[node] = len(path)
            path.append(node)
            node = waits[node]
        if node is not None and node in seen:
            return path[seen[node]:]
    return []


def deadlock_freedom(schedule: Schedule, table: ChannelTable, depth: int, budget: Budget,
                     stuck_state_max_ops: int, keep_smt2: bool = False) -> DeadlockReport:
    start = time.perf_counter()
    progress = run(schedule, table, depth)
    model = DeadlockModel(schedule, table, progress.comm)
    n_ops = len(model.ops)
    certificates: list[str] = []
    smt2: str | None = None
    unknown_reason = ""
    if not progress.deadlock:
        solver, counts, text = order_certificate(model, depth, progress.stamp, budget)
        outcome = check(solver)
        if keep_smt2:
            smt2 = text
        if outcome.result is SatResult.UNSAT:
            raise InternalError(
                f"deadlock_freedom at D={depth}: the simulation finished but Z3 rejects its "
                "order certificate")
        if outcome.result is SatResult.UNKNOWN:
            unknown_reason = f"order certificate: solver returned unknown ({outcome.reason})"
        else:
            certificates.append(
                f"z3 order certificate ({counts['program_order']} program-order, "
                f"{counts['message_order']} message, {counts[f'queue_capacity_D{depth}']} "
                "capacity "
                "constraints)")
    else:
        fixed = {r: progress.comm[r].index(i) for r, i in progress.stuck.items()}
        solver, text = stuck_state(model, depth, budget, fixed, progress.stamp)
        outcome = check(solver)
        if keep_smt2:
            smt2 = text
        if outcome.result is SatResult.UNSAT:
            raise InternalError(
                f"deadlock_freedom at D={depth}: the simulation is stuck but Z3 rejects the "
                "stuck state as unreachable or not stuck")
        if outcome.result is SatResult.UNKNOWN:
            unknown_reason = f"stuck-state witness: solver returned unknown ({outcome.reason})"
        else:
            certificates.append("z3 stuck-state witness check")
    if n_ops <= stuck_state_max_ops and not unknown_reason:
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
    min_depth, seen = minimal_depth(schedule, table)
    rendezvous_free = seen[0] if 0 in seen else not run(schedule, table, 0).deadlock
    rendezvous = Status.PROVED if rendezvous_free else Status.VIOLATED
    seconds = time.perf_counter() - start
    cert = "; ".join(certificates)
    depth_note = ("min_queue_depth " + (str(min_depth) if min_depth is not None else
                                        "none (deadlocks at every depth)"))
    if unknown_reason:
        return DeadlockReport(PropertyResult(
            "deadlock_freedom", Status.UNKNOWN,
            f"simulation says {'deadlock' if progress.deadlock else 'deadlock-free'} at "
            f"D={depth}, but the Z3 certificate was not obtained: {unknown_reason}; not "
            "certified", None, seconds, cert), min_depth, rendezvous, smt2)
    if progress.deadlock:
        cx = _counterexample(schedule, table, progress)
        return DeadlockReport(PropertyResult(
            "deadlock_freedom", Status.VIOLATED, f"{cx.summary}; {depth_note}", cx, seconds,
            cert), min_depth, rendezvous, smt2)
    return DeadlockReport(PropertyResult(
        "deadlock_freedom", Status.PROVED,
        f"no reachable stuck state at D={depth} ({n_ops} comm ops); {depth_note}; "
        f"rendezvous (D=0) {'deadlock-free' if rendezvous_free else 'deadlocks'}",
        None, seconds, cert), min_depth, rendezvous, smt2)
