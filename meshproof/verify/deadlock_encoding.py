"""Z3 encodings of deadlock freedom at queue depth D (spec/properties.md, "Deadlock").

Two queries over the comm ops of a schedule:

* order certificate — integer timestamps `t_c{cube}p{pe}_op{i}` under which every op's
  dependencies come strictly earlier: its program-order predecessor, a recv's matching
  send, and for the k-th send on a link the (k-D)-th recv there (D = 0: a send and its
  recv share one timestamp). If such timestamps exist no reachable state is stuck.
  The constraints are computed as arrays of comm-op rows (`order_constraints`); Z3 checks
  the run's timestamps against them as ground facts (deadlock_ground.py), and
  `order_certificate` writes the same constraints over named variables (what `--smt2`
  saves).
* stuck state — progress counters `p_c{cube}p{pe}` (comm ops done per rank), executed
  flags derived from them, and timestamps ordering the executed ops as above; "stuck"
  means not all ranks are done and every unfinished rank's next op is blocked. UNSAT
  refutes deadlock for every interleaving; SAT is a deadlock witness.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from meshproof.model.channel_table import NO_LINK, STATUSES, ChannelTable, CommColumns, OpRef
from meshproof.model.channel_table import PortStatus as PortStatus
from meshproof.model.schedule import Schedule
from meshproof.verify.z3util import Budget, SmtLib


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
                 comm: tuple[tuple[int, ...], ...] | None = None) -> None:
        del comm  # the table's columns hold each rank's comm ops in program order
        self.schedule = schedule
        self.table = table
        self.cols: CommColumns = table.cols

    @cached_property
    def comm(self) -> tuple[tuple[int, ...], ...]:
        ops, start = self.cols.op.tolist(), self.cols.start.tolist()
        return tuple(tuple(ops[start[r]:start[r + 1]]) for r in range(len(start) - 1))

    @cached_property
    def ops(self) -> dict[OpRef, CommOp]:
        """Per comm op its record, in rank and program order (the stuck-state query)."""
        cols = self.cols
        out: dict[OpRef, CommOp] = {}
        start = cols.start.tolist()
        for g, (r, o, s, ch, k, st) in enumerate(zip(
                cols.rank.tolist(), cols.op.tolist(), cols.send.tolist(),
                cols.channel.tolist(), cols.k.tolist(), cols.status.tolist(), strict=True)):
            ref = OpRef(r, o)
            out[ref] = CommOp(ref, g - start[r], s, ch, k, STATUSES[st])
        return out

    def partner(self, op: CommOp) -> OpRef | None:
        """The matching op of a message (recv for a send, send for a recv)."""
        if op.channel is None or op.status is PortStatus.NO_LINK:
            return None
        other = self.cols.side(op.channel, not op.is_send)
        return self.cols.ref(int(other[op.k])) if op.k < len(other) else None

    def credit(self, op: CommOp, depth: int) -> OpRef | bool | None:
        """For a send at D >= 1: the recv that must precede it (True: none needed)."""
        if op.k < depth:
            return True
        assert op.channel is not None
        recvs = self.cols.side(op.channel, False)
        j = op.k - depth
        return self.cols.ref(int(recvs[j])) if j < len(recvs) else None

    def name(self, ref: OpRef) -> str:
        ep = self.schedule.programs[ref.rank].endpoint
        return f"t_c{ep.cube}p{ep.pe}_op{ref.op}"

    def row_names(self) -> list[str]:
        """The timestamp variable of every comm row."""
        eps = [(p.endpoint.cube, p.endpoint.pe) for p in self.schedule.programs]
        return [f"t_c{eps[r][0]}p{eps[r][1]}_op{o}"
                for r, o in zip(self.cols.rank.tolist(), self.cols.op.tolist(), strict=True)]


@dataclass(frozen=True, slots=True, eq=False)
class OrderConstraints:
    """The order certificate at depth D as rows: `t[after] > t[before]` per pair (D = 0:
    message pairs are `t[after] = t[before]`), and rows that can never complete."""

    depth: int
    program: tuple[np.ndarray, np.ndarray]
    message: tuple[np.ndarray, np.ndarray]
    capacity: tuple[np.ndarray, np.ndarray]
    never: np.ndarray

    @property
    def counts(self) -> dict[str, int]:
        return {"program_order": len(self.program[0]), "message_order": len(self.message[0]),
                f"queue_capacity_D{self.depth}": len(self.capacity[0]),
                "ops_that_can_never_complete": len(self.never)}

    def holds(self, stamps: np.ndarray) -> bool:
        """The constraints evaluated at `stamps` (an independent check of Z3's answer)."""
        if len(self.never):
            return False
        eq = np.equal if self.depth == 0 else np.greater
        return bool(np.all(stamps[self.program[0]] > stamps[self.program[1]]) and
                    np.all(eq(stamps[self.message[0]], stamps[self.message[1]])) and
                    np.all(stamps[self.capacity[0]] > stamps[self.capacity[1]]))


def order_constraints(model: DeadlockModel, depth: int) -> OrderConstraints:
    cols = model.cols
    n = cols.n
    rows = np.arange(n, dtype=np.int64)
    first = np.zeros(n, dtype=bool)
    starts = cols.start[:-1]
    first[starts[starts < n]] = True
    program = rows[~first]
    linked = cols.status != NO_LINK
    has_partner = (cols.partner >= 0) & linked
    never = ~linked
    empty = np.zeros(0, dtype=np.int64)
    if depth == 0:
        never |= linked & (cols.partner < 0)
        msg = rows[cols.send & has_partner]
        return OrderConstraints(depth, (program, program - 1), (msg, cols.partner[msg]),
                                (empty, empty), rows[never])
    recv = ~cols.send
    never |= recv & linked & (cols.partner < 0)
    msg = rows[recv & has_partner]
    # the k-th send on a link needs the (k-D)-th recv there: its credit
    side = cols.side_start[2 * cols.channel.astype(np.int64)]
    n_recvs = cols.side_start[2 * cols.channel.astype(np.int64) + 1] - side
    j = cols.k.astype(np.int64) - depth
    needs = cols.send & linked & (j >= 0)
    never |= needs & (j >= n_recvs)
    cap = rows[needs & (j < n_recvs)]
    return OrderConstraints(depth, (program, program - 1), (msg, cols.partner[msg]),
                            (cap, cols.by_side[side[cap] + j[cap]]), rows[never])


def order_certificate(model: DeadlockModel, depth: int,
                      stamp: Mapping[OpRef, int] | np.ndarray,
                      budget: Budget) -> tuple[Any, dict[str, int], str]:
    """Solver asserting the dependency constraints and the simulation's timestamps over
    named variables (the text `--smt2` writes).

    Returns the solver (check it: SAT = certificate holds), constraint counts per group,
    and the query text.
    """
    cons = order_constraints(model, depth)
    cols = model.cols
    if isinstance(stamp, np.ndarray):
        stamps = stamp
    else:
        stamps = np.full(cols.n, -1, dtype=np.int64)
        for ref, s in stamp.items():
            g = cols.row(ref)
            if g >= 0:
                stamps[g] = s
    t = model.row_names()
    smt = SmtLib(f"order certificate, {model.schedule.launch.kernel}, queue depth {depth}")
    smt.declare(t)
    rel = "=" if depth == 0 else ">"
    for label, (after, before), op in (("program_order", cons.program, ">"),
                                       ("message_order", cons.message, rel),
                                       (f"queue_capacity_D{depth}", cons.capacity, ">")):
        smt.group(label)
        for a, b in zip(after.tolist(), before.tolist(), strict=True):
            smt.add(f"({op} {t[a]} {t[b]})")
    smt.group("ops_that_can_never_complete")
    for g in cons.never.tolist():
        smt.comment(f"{t[g]} can never complete")
        smt.add("false")
    smt.group("simulation_timestamps")
    for name, s in zip(t, stamps.tolist(), strict=True):
        smt.add(f"(= {name} {s})")
    return smt.solver(budget), smt.counts, smt.text()


def stuck_state(model: DeadlockModel, depth: int, budget: Budget,
                fixed_progress: dict[int, int] | None = None,
                stamp: Mapping[OpRef, int] | None = None) -> tuple[Any, str]:
    """Solver for "a reachable state where some rank is unfinished and all such are blocked".

    `fixed_progress`/`stamp` pin the state to a simulation's stuck frontier (a witness
    check) instead of letting Z3 search for one.
    """
    sched = model.schedule
    comm = model.comm
    p = {r: f"p_c{sched.programs[r].endpoint.cube}p{sched.programs[r].endpoint.pe}"
         for r in range(len(comm))}
    t = {ref: model.name(ref) for ref in model.ops}
    done = {ref: f"(> {p[ref.rank]} {op.pos})" for ref, op in model.ops.items()}
    kind = "witness check" if fixed_progress is not None else "search"
    smt = SmtLib(f"stuck-state {kind}, {sched.launch.kernel}, queue depth {depth}")
    smt.declare(list(p.values()) + list(t.values()))
    smt.group("progress_bounds")
    for r, indices in enumerate(comm):
        smt.add(f"(and (>= {p[r]} 0) (<= {p[r]} {len(indices)}))")
    smt.group("program_order")
    for r, indices in enumerate(comm):
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
    unfinished = [f"(< {p[r]} {len(ix)})" for r, ix in enumerate(comm) if ix]
    smt.add(f"(or {' '.join(unfinished)})" if len(unfinished) > 1 else
            (unfinished[0] if unfinished else "false"))
    if fixed_progress is not None:
        smt.group("simulated_frontier")
        for r, ix in enumerate(comm):
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
