"""The SMT-LIB 2 queries a protocol property's verdict rests on, for a second solver.

`--recheck` (spec/verify.md "Re-check") hands each query to another solver and compares
its answer with Z3's:

* deadlock_freedom at D: the order certificate's ground facts, the very chunks Z3 checked
  (SAT: the run's timestamps satisfy every dependency), and, up to `stuck_state_max_ops`
  comm ops, the stuck-state search (UNSAT: no reachable stuck state). The rendezvous case
  (D = 0) the same way, from its own run.
* direction_legality, launch_confinement, channel_matching are decided by enumerating the
  schedule (no search). Their enumeration is written here as a ground query whose models
  are the property's violations, built from the schedule's ops and the wiring's list of
  links (not from the channel table's status columns the properties read): UNSAT is
  proved. Each builder also evaluates the same disjunction in Python, which is what
  re-validates a violation.

A violated deadlock is re-validated by evaluating its stuck state (`stuck_state_fault`),
never by a second solver.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from meshproof.model.channel_table import NO_LINK, OK, ChannelTable, CommColumns
from meshproof.model.schedule import Schedule
from meshproof.model.topology import Direction, Endpoint
from meshproof.verify.deadlock_encoding import DeadlockModel, order_constraints, stuck_state
from meshproof.verify.deadlock_ground import order_chunks
from meshproof.verify.z3util import Budget, SatResult

_DIR = {d: i for i, d in enumerate(Direction)}


@dataclass(frozen=True, slots=True)
class Query:
    """One query: its name, its text, Z3's answer during verify (None: not asked yet),
    and the answer the verdict rests on."""

    label: str
    text: str
    z3: SatResult | None
    expect: SatResult


@dataclass(frozen=True, slots=True)
class Enumerated:
    """An enumeration property as a query whose models are its violations, and the same
    disjunction evaluated in Python (True: a violation exists)."""

    query: Query
    violated: bool


def _text(title: str, logic: str, lines: list[str]) -> str:
    return "\n".join([f"; meshproof: {title}", f"(set-logic {logic})", *lines,
                      "(check-sat)", ""])


def _disjunction(terms: list[str]) -> str:
    return f"(assert (or {' '.join(terms)} false))"


def _used_ports(schedule: Schedule, cols: CommColumns) -> list[tuple[Endpoint, Direction]]:
    """Every (endpoint, direction) a send or recv uses, read from the ops themselves."""
    ports: set[tuple[int, Direction]] = set()
    programs = schedule.programs
    for r, o in zip(cols.rank.tolist(), cols.op.tolist(), strict=True):
        d = programs[r].ops[o].dir
        assert d is not None
        ports.add((r, d))
    return sorted(((programs[r].endpoint, d) for r, d in ports),
                  key=lambda p: (p[0].cube, p[0].pe, _DIR[p[1]]))


def legality_query(schedule: Schedule, cols: CommColumns) -> Enumerated:
    """direction_legality: `link(cube, pe, dir)` holds exactly for the wiring's links;
    SAT would be a used port without one."""
    links = {(lk.src, lk.dir) for lk in schedule.wiring.links}
    lines = ["(declare-fun link (Int Int Int) Bool)"]
    missing: list[str] = []
    violated = False
    for ep, d in _used_ports(schedule, cols):
        atom = f"(link {ep.cube} {ep.pe} {_DIR[d]})"
        has = (ep, d) in links
        violated |= not has
        lines.append(f"(assert {atom})" if has else f"(assert (not {atom}))")
        missing.append(f"(not {atom})")
    lines.append(_disjunction(missing))
    text = _text(f"direction_legality, {schedule.launch.kernel}: a used port without a link "
                 "(unsat: proved)", "QF_UFLIA", lines)
    return Enumerated(Query("direction_legality", text, None, SatResult.UNSAT), violated)


def confinement_query(schedule: Schedule, cols: CommColumns) -> Enumerated:
    """launch_confinement: the far end of every used link, against the launched box;
    SAT would be one outside it."""
    launch = schedule.launch
    table = {(lk.src, lk.dir): lk.dst for lk in schedule.wiring.links}
    lo, hi = launch.cube_start, launch.cube_start + launch.n_cubes
    lines = [f"(define-fun inside ((c Int) (p Int)) Bool (and (<= {lo} c) (< c {hi}) "
             f"(<= 0 p) (< p {launch.pes})))"]
    peers = sorted({table[port] for port in _used_ports(schedule, cols) if port in table})
    lines.append(_disjunction([f"(not (inside {p.cube} {p.pe}))" for p in peers]))
    violated = any(not (lo <= p.cube < hi and 0 <= p.pe < launch.pes) for p in peers)
    text = _text(f"launch_confinement, {launch.kernel}: a used link leaving the launch "
                 "(unsat: proved)", "QF_LIA", lines)
    return Enumerated(Query("launch_confinement", text, None, SatResult.UNSAT), violated)


def matching_query(schedule: Schedule, table: ChannelTable) -> Enumerated:
    """channel_matching: per judged link, its send and recv counts, and per message the
    (shape, dtype, bytes) of both ends, numbered alike; SAT would be a difference.
    Distinct facts only: a mesh repeats the same few."""
    programs = schedule.programs
    judged = table.channel_status() == OK
    counts: set[tuple[int, int]] = set()
    ends: set[tuple[tuple[object, object, int], tuple[object, object, int]]] = set()
    for i, ch in enumerate(table.channels):
        if not judged[i]:
            continue
        counts.add((len(ch.sends), len(ch.recvs)))
        for s_ref, r_ref in zip(ch.sends, ch.recvs, strict=False):
            s_op, r_op = programs[s_ref.rank].ops[s_ref.op], programs[r_ref.rank].ops[r_ref.op]
            ends.add(((s_op.shape, s_op.dtype, s_op.nbytes),
                      (r_op.shape, r_op.dtype, r_op.nbytes)))
    codes: dict[object, int] = {}

    def code(end: tuple[object, object, int]) -> tuple[int, int, int]:
        return (codes.setdefault(end[0], len(codes)), codes.setdefault(end[1], len(codes)),
                end[2])

    # numbered in a fixed order, so that the query text is the same on every run
    pairs = sorted((code(a), code(b)) for a, b in sorted(ends, key=repr))
    terms = [f"(distinct {s} {r})" for s, r in sorted(counts)]
    terms += [f"(not (and (= {a[0]} {b[0]}) (= {a[1]} {b[1]}) (= {a[2]} {b[2]})))"
              for a, b in pairs]
    violated = any(s != r for s, r in counts) or any(a != b for a, b in ends)
    text = _text(f"channel_matching, {schedule.launch.kernel}: a link's counts or a message's "
                 "ends differ (unsat: proved)", "QF_LIA", [_disjunction(terms)])
    return Enumerated(Query("channel_matching", text, None, SatResult.UNSAT), violated)


def deadlock_queries(schedule: Schedule, table: ChannelTable, depth: int, stamps: np.ndarray,
                     budget: Budget, search_max_ops: int, z3_answered: bool) -> list[Query]:
    """The queries of a deadlock-free run at `depth`: its order certificate's chunks (SAT)
    and, on small launches, the stuck-state search (UNSAT). `z3_answered`: verify already
    had Z3 solve exactly these (the judged depth), so Z3 is not asked again."""
    model = DeadlockModel(schedule, table)
    cons = order_constraints(model, depth)
    known = SatResult.SAT if z3_answered else None
    chunks = list(order_chunks(cons, stamps, starts=table.cols.start))
    out = [Query(f"order certificate D={depth}" +
                 (f" (chunk {i + 1} of {len(chunks)})" if len(chunks) > 1 else ""),
                 "\n".join(["(set-logic QF_LIA)", *lines, "(check-sat)", ""]), known,
                 SatResult.SAT)
           for i, lines in enumerate(chunks)]
    if table.cols.n <= search_max_ops:
        out.append(Query(f"stuck-state search D={depth}", stuck_state(model, depth, budget)[1],
                         SatResult.UNSAT if z3_answered else None, SatResult.UNSAT))
    return out


def stuck_state_fault(table: ChannelTable, depth: int, stamps: np.ndarray) -> str:
    """Evaluate a run's stuck state: "" when it is reachable and stuck (each done op's
    dependencies done earlier, some rank unfinished, every unfinished rank's next op
    blocked), else what fails. No solver: the state's numbers are evaluated directly."""
    cols = table.cols
    starts = cols.start.tolist()
    done = stamps >= 0
    p = [int(done[starts[r]:starts[r + 1]].sum()) for r in range(len(starts) - 1)]
    for r, count in enumerate(p):
        if not done[starts[r]:starts[r] + count].all():
            return f"rank {r}'s executed ops are not a prefix of its program"
        if count > 1 and not np.all(np.diff(stamps[starts[r]:starts[r] + count]) > 0):
            return f"rank {r}'s executed ops are not in program order"
    rank = cols.rank.tolist()
    for g in range(cols.n):
        fault = _row_fault(cols, depth, stamps, p, starts, rank, g)
        if fault:
            return fault
    if all(p[r] == starts[r + 1] - starts[r] for r in range(len(p))):
        return "every rank finished: no rank is stuck"
    return ""


def _dependency(cols: CommColumns, depth: int, g: int) -> int | None:
    """The row comm row g waits for (-1: none; None: one that can never come)."""
    if cols.status[g] == NO_LINK:
        return None
    partner = int(cols.partner[g])
    if depth == 0 or not cols.send[g]:
        return partner if partner >= 0 else None
    j = int(cols.k[g]) - depth
    if j < 0:
        return -1
    recvs = cols.side(int(cols.channel[g]), False)
    return int(recvs[j]) if j < len(recvs) else None


def _row_fault(cols: CommColumns, depth: int, stamps: np.ndarray, p: list[int],
               starts: list[int], rank: list[int], g: int) -> str:
    """What is wrong with row g in the stuck state: a done op whose dependency is not done
    earlier, or a rank's next op that is not blocked ("" when neither)."""
    need = _dependency(cols, depth, g)
    if stamps[g] >= 0:
        if need is None:
            return f"comm row {g} ran, yet it can never complete"
        ordered = need < 0 or (stamps[need] >= 0 and (
            stamps[need] == stamps[g] if depth == 0 else stamps[need] < stamps[g]))
        return "" if ordered else f"comm row {g} ran before its dependency, row {need}"
    if g - starts[rank[g]] != p[rank[g]] or need is None:
        return ""       # not a rank's next op, or one that can never complete
    if need < 0:
        return f"comm row {g} is a send with room in its queue, not blocked"
    if depth == 0:
        other = rank[need]
        return f"comm row {g} and its partner are both ready: not blocked" \
            if need - starts[other] == p[other] else ""
    return f"comm row {g}'s dependency, row {need}, is done: not blocked" \
        if stamps[need] >= 0 else ""
