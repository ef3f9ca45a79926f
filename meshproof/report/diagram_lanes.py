"""Which lanes a schedule diagram draws, and which nodes each lane is made of.

Pure planning, no DOT: the lanes to show (root-cause lanes first when there are more than
the cap), each lane's ops grouped into nodes (a burst of comm ops on one port is one node;
runs of compute ops collapse), and the per-lane node cap with its elisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from meshproof.model.schedule import OpKind, RankProgram, Schedule
from meshproof.model.topology import Direction, Endpoint
from meshproof.report.faults import FaultMarks, OpMark
from meshproof.verify.result import Role

# Faults that explain a failure by themselves; their lanes are kept first when capping.
ROOT_CAUSES = frozenset({Role.ILLEGAL, Role.OUTSIDE, Role.MISMATCHED, Role.UNMATCHED})


class NodeKind(Enum):
    COMM = "comm"          # a burst of consecutive comm ops on one port
    COMPUTE = "compute"    # a run of compute ops, collapsed
    STORE = "store"        # a store (always its own node)
    OP = "op"              # one op a diagnostic points at (or any op, uncollapsed)
    ELIDED = "elided"      # stands in for nodes the per-lane cap left out


@dataclass(slots=True)
class LaneNode:
    """One node of a lane: a burst of comm ops, a run of compute ops, a store, one marked
    op, or a stand-in for nodes the cap left out. Mutable while the lane is grouped."""

    id: str
    kind: NodeKind
    ops: list[int]
    op_kind: OpKind | None = None
    dir: Direction | None = None
    marks: list[OpMark] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class LanePlan:
    shown: list[int]                    # ranks drawn, in endpoint order
    elided: list[int]                   # active ranks left out by the lane cap
    nodes: dict[int, list[LaneNode]]    # per shown rank, top to bottom
    nodes_elided: int                   # nodes folded into "... k ops not shown ..."


def plan_lanes(schedule: Schedule, marks: FaultMarks, max_lanes: int,
               max_nodes_per_lane: int, collapse_compute: bool,
               group_bursts: bool) -> LanePlan:
    shown, elided = _choose_lanes(schedule, marks, max_lanes)
    nodes: dict[int, list[LaneNode]] = {}
    nodes_elided = 0
    for r in shown:
        prog = schedule.programs[r]
        grouped = _group_ops(prog, marks, collapse_compute, group_bursts)
        nodes[r], n_elided = _cap(grouped, prog.endpoint, marks, max_nodes_per_lane)
        nodes_elided += n_elided
    return LanePlan(shown, elided, nodes, nodes_elided)


def _choose_lanes(schedule: Schedule, marks: FaultMarks,
                  max_lanes: int) -> tuple[list[int], list[int]]:
    active = [r for r, p in enumerate(schedule.programs) if p.ops]
    if len(active) <= max_lanes:
        return active, []
    # keep the lanes that explain the fault: root causes first, then the wait-for
    # cycle, then ranks that are merely blocked or hold a wrong output
    score: dict[Endpoint, int] = {}
    for (ep, _), op_marks in marks.ops.items():
        rank = 0 if any(m.role in ROOT_CAUSES for m in op_marks) else 2
        score[ep] = min(score.get(ep, 3), rank)
    for ep in marks.lanes:
        score[ep] = min(score.get(ep, 3), 2)
    for ep in marks.cycle:
        score[ep] = min(score.get(ep, 3), 1)
    progs = schedule.programs
    ranked = sorted(active, key=lambda r: (score.get(progs[r].endpoint, 3), r))
    shown = sorted(ranked[:max_lanes])
    return shown, [r for r in active if r not in set(shown)]


def _group_ops(prog: RankProgram, marks: FaultMarks, collapse_compute: bool,
               group_bursts: bool) -> list[LaneNode]:
    ep = prog.endpoint
    nodes: list[LaneNode] = []
    pending: list[int] = []

    def flush() -> None:
        if pending:
            nodes.append(LaneNode(f"{ep.label}_n{len(nodes)}", NodeKind.COMPUTE,
                                  list(pending)))
            pending.clear()

    for op in prog.ops:
        op_marks = list(marks.ops.get((ep, op.index), ()))
        if op.kind.is_comm:
            flush()
            prev = nodes[-1] if nodes else None
            if (group_bursts and prev is not None and prev.kind is NodeKind.COMM
                    and prev.op_kind is op.kind and prev.dir is op.dir
                    and prev.ops[-1] == op.index - 1):
                prev.ops.append(op.index)
                prev.marks += op_marks
            else:
                nodes.append(LaneNode(f"{ep.label}_n{len(nodes)}", NodeKind.COMM, [op.index],
                                      op.kind, op.dir, op_marks))
        elif op.kind is OpKind.STORE or op_marks or not collapse_compute:
            flush()
            kind = NodeKind.STORE if op.kind is OpKind.STORE else NodeKind.OP
            nodes.append(LaneNode(f"{ep.label}_n{len(nodes)}", kind, [op.index], op.kind,
                                  None, op_marks))
        else:
            pending.append(op.index)
    flush()
    return nodes


def _cap(nodes: list[LaneNode], ep: Endpoint, marks: FaultMarks,
         cap: int) -> tuple[list[LaneNode], int]:
    """At most about `cap` nodes: the first ones, every marked node and the last one;
    each run of the others becomes one elision node. Returns the nodes and how many were
    folded away."""
    if len(nodes) <= cap:
        return nodes, 0
    must = {i for i, n in enumerate(nodes) if n.marks}
    blocked = marks.blocked.get(ep)
    must |= {i for i, n in enumerate(nodes) if blocked is not None and blocked in n.ops}
    budget = max(cap - len(must), cap // 2)
    keep = set(range(min(budget, len(nodes)))) | must | {len(nodes) - 1}
    out: list[LaneNode] = []
    run: list[LaneNode] = []
    folded = 0

    def fold() -> None:
        nonlocal folded
        folded += len(run)
        ops = [o for n in run for o in n.ops]
        out.append(LaneNode(f"{ep.label}_elided{len(out)}", NodeKind.ELIDED, ops))
        run.clear()

    for i, node in enumerate(nodes):
        if i in keep:
            if run:
                fold()
            out.append(node)
        else:
            run.append(node)
    if run:
        fold()
    return out, folded


def lane_order(schedule: Schedule, ranks: list[int]) -> list[int]:
    """Ranks in row-major mesh order: grid row, then SIP and column (SIPs stand side by
    side), then PE — so a 2x4 sub-mesh reads c0 c1 c2 c3 / c4 c5 c6 c7."""
    system = schedule.launch.system

    def key(r: int) -> tuple[int, int, int, int]:
        ep = schedule.programs[r].endpoint
        c = system.coord(ep.cube)
        return (c.row, c.sip, c.col, ep.pe)

    return sorted(ranks, key=key)


def head_label(schedule: Schedule, rank: int) -> list[str]:
    """A lane's head: the endpoint, and where its cube sits."""
    system = schedule.launch.system
    ep = schedule.programs[rank].endpoint
    c = system.coord(ep.cube)
    where = f"cube {ep.cube}: row {c.row}, col {c.col}" + \
        (f", SIP {c.sip}" if system.n_sips > 1 else "")
    return [ep.label, where]
