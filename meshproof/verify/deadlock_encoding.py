"""Z3 encodings of deadlock freedom at queue depth D (spec/properties.md, "Deadlock").

Two queries over the comm ops of a schedule:

* order certificate — integer timestamps `t_c{cube}p{pe}_op{i}` under which every op's
  dependencies come strictly earlier: its program-order predecessor, a recv's matching
  send, and for the k-th send on a link the (k-D)-th recv there (D = 0: a send and its
  recv share one timestamp). If such timestamps exist no reachable state is stuck.
* stuck state — progress counters `p_c{cube}p{pe}` (comm ops done per rank), executed
  flags derived from them, and timestamps ordering the executed ops as above; "stuck"
  means not all ranks are done and every unfinished rank's next op is blocked. UNSAT
  refutes deadlock for every interleaving; SAT is a deadlock witness.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from meshproof.model.channels import ChannelTable, OpRef, PortStatus
from meshproof.model.schedule import OpKind, Schedule
from meshproof.verify.z3util import Budget, add_group, new_solver, op_var_name, rank_var_name


@dataclass(frozen=True, slots=True)
class CommOp:
    ref: OpRef
    pos: int           # position among its rank's comm ops
    is_send: bool
    channel: int | None
    k: int
    status: PortStatus


class DeadlockModel:
    """Comm ops and their FIFO relations, the common ground of both encodings."""

    def __init__(self, schedule: Schedule, table: ChannelTable,
                 comm: tuple[tuple[int, ...], ...]) -> None:
        self.schedule = schedule
        self.table = table
        self.comm = comm
        self.ops: dict[OpRef, CommOp] = {}
        for r, indices in enumerate(comm):
            for pos, i in enumerate(indices):
                ref = OpRef(r, i)
                kind = schedule.programs[r].ops[i].kind
                ch, k = table.position.get(ref, (None, 0))
                self.ops[ref] = CommOp(ref, pos, kind is OpKind.SEND, ch, k,
                                       table.port_use[ref].status)

    def partner(self, op: CommOp) -> OpRef | None:
        """The matching op of a message (recv for a send, send for a recv)."""
        if op.channel is None or op.status is PortStatus.NO_LINK:
            return None
        ch = self.table.channels[op.channel]
        other = ch.recvs if op.is_send else ch.sends
        return other[op.k] if op.k < len(other) else None

    def credit(self, op: CommOp, depth: int) -> OpRef | bool | None:
        """For a send at D >= 1: the recv that must precede it (True: none needed)."""
        if op.k < depth:
            return True
        assert op.channel is not None
        recvs = self.table.channels[op.channel].recvs
        j = op.k - depth
        return recvs[j] if j < len(recvs) else None

    def name(self, ref: OpRef) -> str:
        return op_var_name(self.schedule, ref)


def order_certificate(model: DeadlockModel, depth: int, stamp: dict[OpRef, int],
                      budget: Budget) -> tuple[Any, dict[str, int]]:
    """Solver asserting the dependency constraints and the simulation's timestamps.

    Returns the solver (check it: SAT = certificate holds) and the constraint counts.
    """
    t = {ref: z3.Int(model.name(ref)) for ref in model.ops}
    program_order: list[Any] = []
    message_order: list[Any] = []
    capacity: list[Any] = []
    blocked: list[Any] = []
    for r, indices in enumerate(model.comm):
        for pos in range(1, len(indices)):
            program_order.append(t[OpRef(r, indices[pos])] > t[OpRef(r, indices[pos - 1])])
    for ref, op in model.ops.items():
        if op.status is PortStatus.NO_LINK:
            blocked.append(z3.BoolVal(False))
            continue
        partner = model.partner(op)
        if depth == 0:
            if partner is None:
                blocked.append(z3.BoolVal(False))
            elif op.is_send:
                message_order.append(t[ref] == t[partner])
            continue
        if not op.is_send:
            if partner is None:
                blocked.append(z3.BoolVal(False))
            else:
                message_order.append(t[ref] > t[partner])
            continue
        need = model.credit(op, depth)
        if need is None:
            blocked.append(z3.BoolVal(False))
        elif need is not True:
            assert isinstance(need, OpRef)
            capacity.append(t[ref] > t[need])
    solver = new_solver(budget, "QF_IDL")
    add_group(solver, "program_order", program_order)
    add_group(solver, "message_order", message_order)
    add_group(solver, f"queue_capacity_D{depth}", capacity)
    add_group(solver, "ops_that_can_never_complete", blocked)
    add_group(solver, "simulation_timestamps",
              [t[ref] == stamp.get(ref, -1) for ref in model.ops])
    counts = {"program_order": len(program_order), "message_order": len(message_order),
              "queue_capacity": len(capacity), "timestamps": len(model.ops)}
    return solver, counts


def stuck_state(model: DeadlockModel, depth: int, budget: Budget,
                fixed_progress: dict[int, int] | None = None,
                stamp: dict[OpRef, int] | None = None) -> tuple[Any, dict[int, Any]]:
    """Solver for "a reachable state where some rank is unfinished and all such are blocked".

    `fixed_progress`/`stamp` pin the state to a simulation's stuck frontier (a witness
    check) instead of letting Z3 search for one.
    """
    sched = model.schedule
    p = {r: z3.Int(rank_var_name(sched, r, "p")) for r in range(len(model.comm))}
    t = {ref: z3.Int(model.name(ref)) for ref in model.ops}
    done = {ref: p[ref.rank] > op.pos for ref, op in model.ops.items()}
    bounds: list[Any] = []
    order: list[Any] = []
    enabled_rules: list[Any] = []
    stuck: list[Any] = []
    for r, indices in enumerate(model.comm):
        bounds += [p[r] >= 0, p[r] <= len(indices)]
        for pos in range(1, len(indices)):
            cur, prev = OpRef(r, indices[pos]), OpRef(r, indices[pos - 1])
            order.append(z3.Implies(done[cur], t[cur] > t[prev]))
    for ref, op in model.ops.items():
        partner = model.partner(op)
        blocked: Any
        if op.status is PortStatus.NO_LINK:
            enabled_rules.append(z3.Not(done[ref]))
            blocked = z3.BoolVal(True)
        elif depth == 0:
            if partner is None:
                enabled_rules.append(z3.Not(done[ref]))
                blocked = z3.BoolVal(True)
            else:
                enabled_rules.append(done[ref] == done[partner])
                enabled_rules.append(z3.Implies(done[ref], t[ref] == t[partner]))
                peer = model.ops[partner]
                blocked = p[partner.rank] != peer.pos
        elif not op.is_send:
            if partner is None:
                enabled_rules.append(z3.Not(done[ref]))
                blocked = z3.BoolVal(True)
            else:
                enabled_rules.append(z3.Implies(done[ref], z3.And(done[partner],
                                                                  t[ref] > t[partner])))
                blocked = z3.Not(done[partner])
        else:
            need = model.credit(op, depth)
            if need is None:
                enabled_rules.append(z3.Not(done[ref]))
                blocked = z3.BoolVal(True)
            elif need is True:
                blocked = z3.BoolVal(False)
            else:
                assert isinstance(need, OpRef)
                enabled_rules.append(z3.Implies(done[ref], z3.And(done[need], t[ref] > t[need])))
                blocked = z3.Not(done[need])
        stuck.append(z3.Implies(p[ref.rank] == op.pos, blocked))
    unfinished = [p[r] < len(ix) for r, ix in enumerate(model.comm) if ix]
    solver = new_solver(budget)
    add_group(solver, "progress_bounds", bounds)
    add_group(solver, "program_order", order)
    add_group(solver, f"fifo_matching_and_capacity_D{depth}", enabled_rules)
    add_group(solver, "every_unfinished_rank_blocked", stuck)
    add_group(solver, "some_rank_unfinished", [z3.Or(unfinished) if unfinished
                                               else z3.BoolVal(False)])
    if fixed_progress is not None:
        add_group(solver, "simulated_frontier",
                  [p[r] == fixed_progress.get(r, len(ix)) for r, ix in enumerate(model.comm)])
    if stamp is not None:
        add_group(solver, "simulation_timestamps",
                  [t[ref] == stamp[ref] for ref in model.ops if ref in stamp])
    return solver, p
