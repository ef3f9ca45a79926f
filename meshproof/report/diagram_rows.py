"""Which row of the schedule diagram each node sits on: time runs down by communication
step, not by program order.

Every node is below the one before it in its lane, and a recv below the send it
receives. On top of that, sends of the same step are pulled onto one row: the k-th send
burst of step s in every lane shares a row, so a reader sees step 1 on one row, step 2
below it, and a lane that lags shows as a gap, not as a shifted picture. Levels are the
longest path under these constraints; since a lane's sends never go down in step and a
message always goes to a later step, the aligned groups are ordered (step, k) and the
computation terminates.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from meshproof.model.channel_table import OpRef
from meshproof.model.schedule import OpKind, Schedule
from meshproof.report.diagram_lanes import LanePlan, NodeKind
from meshproof.report.messages import MessageTable


@dataclass(frozen=True, slots=True)
class RowPlan:
    level: dict[str, int]          # node id -> row (lane heads are row 0)
    step_rows: dict[int, int]      # step -> the row of its first send group
    rows: int                      # rows in use, heads included


def plan_rows(schedule: Schedule, plan: LanePlan, msgs: MessageTable,
              node_of: dict[OpRef, str]) -> RowPlan:
    step_of_send = {m.send: m.step for m in msgs.messages
                    if m.send is not None and m.step is not None}
    edges: list[tuple[str, str]] = []
    groups: dict[tuple[int, int], list[str]] = defaultdict(list)
    node_step: dict[str, int] = {}
    for r in plan.shown:
        nodes = plan.nodes[r]
        per_step: dict[int, int] = defaultdict(int)
        for prev, node in zip([None, *nodes[:-1]], nodes, strict=True):
            if prev is not None:
                edges.append((prev.id, node.id))
            if node.kind is not NodeKind.COMM or node.op_kind is not OpKind.SEND:
                continue
            steps = [step_of_send[OpRef(r, o)] for o in node.ops
                     if OpRef(r, o) in step_of_send]
            if steps:
                step = min(steps)
                node_step[node.id] = step
                groups[(step, per_step[step])].append(node.id)
                per_step[step] += 1
    for m in msgs.messages:
        if m.send is None or m.recv is None or not m.delivered:
            continue  # an undelivered message does not order anything
        a, b = node_of.get(m.send), node_of.get(m.recv)
        if a is not None and b is not None and a != b:
            edges.append((a, b))
    level = _levels(plan, sorted(set(edges)), [groups[k] for k in sorted(groups)])
    step_rows: dict[int, int] = {}
    for (step, k), members in sorted(groups.items()):
        if k == 0 and members:
            step_rows.setdefault(step, level[members[0]])
    return RowPlan(level, step_rows, max(level.values(), default=0) + 1)


def _levels(plan: LanePlan, edges: list[tuple[str, str]],
            groups: list[list[str]]) -> dict[str, int]:
    level = {n.id: 1 for r in plan.shown for n in plan.nodes[r]}
    bound = len(level) + 2
    for _ in range(bound):
        changed = False
        for a, b in edges:
            if level[b] < level[a] + 1:
                level[b] = level[a] + 1
                changed = True
        for members in groups:
            top = max(level[m] for m in members)
            for m in members:
                if level[m] != top:
                    level[m] = top
                    changed = True
        if not changed:
            return level
    # alignment could not settle (it cannot for a schedule's own order; defensive): keep
    # the order constraints alone, which settle on any acyclic graph
    return _levels(plan, edges, []) if groups else level
