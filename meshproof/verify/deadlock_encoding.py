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

from meshproof.model.channels import ChannelTable, OpRef, PortStatus
from meshproof.model.schedule import OpKind, Schedule
from meshproof.verify.z3util import Budget, SmtLib, op_var_name, rank_var_name


@dataclass(frozen=True, slots=True)
class CommOp:
    """A comm op as both deadlock encodings see it: its place in its rank and channel."""

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
                      budget: Budget) -> tuple[Any, dict[str, int], str]:
    """Solver asserting the dependency constraints and the simulation's timestamps.

    Returns the solver (check it: SAT = certificate holds), constraint counts per group,
    and the query text.
    """
    t = {ref: model.name(ref) for ref in model.ops}
    smt = SmtLib(f"order certificate, {model.schedule.launch.kernel}, queue depth {depth}")
    smt.declare(list(t.values()))
    smt.group("program_order")
    for r, indices in enumerate(model.comm):
        for pos in range(1, len(indices)):
            smt.add(f"(> {t[OpRef(r, indices[pos])]} {t[OpRef(r, indices[pos - 1])]})")
    smt.group("message_order")
    never: list[OpRef] = []
    capacity: list[str] = []
    for ref, op in model.ops.items():
        if op.status is PortStatus.NO_LINK:
            never.append(ref)
            continue
        partner = model.partner(op)
        if depth == 0:
            if partner is None:
                never.append(ref)
            elif op.is_send:
                smt.add(f"(= {t[ref]} {t[partner]})")
            continue
        if not op.is_send:
            if partner is None:
                never.append(ref)
            else:
                smt.add(f"(> {t[ref]} {t[partner]})")
            continue
        need = model.credit(op, depth)
        if need is None:
            never.append(ref)
        elif need is not True:
            assert isinstance(need, OpRef)
            capacity.append(f"(> {t[ref]} {t[need]})")
    smt.group(f"queue_capacity_D{depth}")
    for term in capacity:
        smt.add(term)
    smt.group("ops_that_can_never_complete")
    for ref in never:
        smt.comment(f"{t[ref]} can never complete")
        smt.add("false")
    smt.group("simulation_timestamps")
    for ref in model.ops:
        smt.add(f"(= {t[ref]} {stamp.get(ref, -1)})")
    return smt.solver(budget), smt.counts, smt.text()


def stuck_state(model: DeadlockModel, depth: int, budget: Budget,
                fixed_progress: dict[int, int] | None = None,
                stamp: dict[OpRef, int] | None = None) -> tuple[Any, str]:
    """Solver for "a reachable state where some rank is unfinished and all such are blocked".

    `fixed_progress`/`stamp` pin the state to a simulation's stuck frontier (a witness
    check) instead of letting Z3 search for one.
    """
    sched = model.schedule
    p = {r: rank_var_name(sched, r, "p") for r in range(len(model.comm))}
    t = {ref: model.name(ref) for ref in model.ops}
    done = {ref: f"(> {p[ref.rank]} {op.pos})" for ref, op in model.ops.items()}
    kind = "witness check" if fixed_progress is not None else "search"
    smt = SmtLib(f"stuck-state {kind}, {sched.launch.kernel}, queue depth {depth}")
    smt.declare(list(p.values()) + list(t.values()))
    smt.group("progress_bounds")
    for r, indices in enumerate(model.comm):
        smt.add(f"(and (>= {p[r]} 0) (<= {p[r]} {len(indices)}))")
    smt.group("program_order")
    for r, indices in enumerate(model.comm):
        for pos in range(1, len(indices)):
            cur, prev = OpRef(r, indices[pos]), OpRef(r, indices[pos - 1])
            smt.add(f"(=> {done[cur]} (> {t[cur]} {t[prev]}))")
    smt.group(f"fifo_matching_and_capacity_D{depth}")
    stuck: list[str] = []
    for ref, op in model.ops.items():
        asserts, blocked = _fifo(model, ref, op, depth, p, t, done)
        for term in asserts:
            smt.add(term)
        stuck.append(f"(=> (= {p[ref.rank]} {op.pos}) {blocked})")
    smt.group("every_unfinished_rank_blocked")
    for term in stuck:
        smt.add(term)
    smt.group("some_rank_unfinished")
    unfinished = [f"(< {p[r]} {len(ix)})" for r, ix in enumerate(model.comm) if ix]
    smt.add(f"(or {' '.join(unfinished)})" if len(unfinished) > 1 else
            (unfinished[0] if unfinished else "false"))
    if fixed_progress is not None:
        smt.group("simulated_frontier")
        for r, ix in enumerate(model.comm):
            smt.add(f"(= {p[r]} {fixed_progress.get(r, len(ix))})")
    if stamp is not None:
        smt.group("simulation_timestamps")
        for ref in model.ops:
            if ref in stamp:
                smt.add(f"(= {t[ref]} {stamp[ref]})")
    return smt.solver(budget), smt.text()


def _fifo(model: DeadlockModel, ref: OpRef, op: CommOp, depth: int, p: dict[int, str],
          t: dict[OpRef, str], done: dict[OpRef, str]) -> tuple[list[str], str]:
    """The FIFO constraints of one op when executed, and when it is blocked at it."""
    partner = model.partner(op)
    never = ([f"(not {done[ref]})"], "true")
    if op.status is PortStatus.NO_LINK:
        return never
    if depth == 0:
        if partner is None:
            return never
        return ([f"(= {done[ref]} {done[partner]})",
                 f"(=> {done[ref]} (= {t[ref]} {t[partner]}))"],
                f"(not (= {p[partner.rank]} {model.ops[partner].pos}))")
    if not op.is_send:
        if partner is None:
            return never
        return ([f"(=> {done[ref]} (and {done[partner]} (> {t[ref]} {t[partner]})))"],
                f"(not {done[partner]})")
    need = model.credit(op, depth)
    if need is None:
        return never
    if need is True:
        return [], "false"
    assert isinstance(need, OpRef)
    return ([f"(=> {done[ref]} (and {done[need]} (> {t[ref]} {t[need]})))"],
            f"(not {done[need]})")
