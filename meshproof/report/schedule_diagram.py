"""The space-time diagram of a schedule: one lane per rank, messages as edges, faults red.

Lanes run top to bottom in program order, grouped in clusters by SIP and cube. Comm ops
are always drawn; a run of consecutive comm ops on the same port (a kernel sending a
triplet) is one node, and its edge lists every message it carries. Compute ops collapse
into "k compute ops" nodes unless they carry a fault. Large schedules are capped (lanes,
nodes per lane) and the title says what was left out, rather than drawing a hairball.

The work is split by job: `diagram_lanes` plans lanes and nodes, `diagram_labels` words
them, `diagram_edges` draws messages, fault stubs and wait-for edges on the
`diagram_canvas`; this module puts them together with the clusters and the title.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshproof.model.channel_table import OpRef
from meshproof.model.schedule import OpKind, Schedule
from meshproof.report import style
from meshproof.report.aggregate_diagram import aggregate_diagram
from meshproof.report.diagram_canvas import DiagramCanvas, ScheduleDiagram
from meshproof.report.diagram_edges import draw_messages, draw_port_faults, draw_wait_for
from meshproof.report.diagram_labels import node_attrs
from meshproof.report.diagram_lanes import (
    LaneNode,
    LanePlan,
    NodeKind,
    head_label,
    lane_order,
    plan_lanes,
)
from meshproof.report.diagram_legend import draw_legend, draw_time_axis, title_lines
from meshproof.report.diagram_place import Grid, pin
from meshproof.report.diagram_rows import plan_rows
from meshproof.report.dot import Attrs, Digraph, label_lines
from meshproof.report.faults import FaultMarks, marks_from_verdict
from meshproof.report.messages import MessageTable, message_table
from meshproof.report.text import describe_endpoints
from meshproof.verify.result import Verdict


@dataclass(frozen=True, slots=True)
class DiagramOptions:
    max_lanes: int = 16
    max_nodes_per_lane: int = 48
    collapse_compute: bool = True
    group_bursts: bool = True
    # from this many active ranks (a 4x4 mesh) on: one node per rank per step, messages
    # as counts (`aggregate_diagram`), instead of lanes of ops capped to `max_lanes`
    aggregate_from: int = 16


def schedule_diagram(schedule: Schedule, verdict: Verdict,
                     options: DiagramOptions = DiagramOptions()) -> ScheduleDiagram:
    msgs = message_table(schedule, verdict.depth)
    marks = marks_from_verdict(verdict)
    if len(schedule.active) >= options.aggregate_from:
        return aggregate_diagram(schedule, verdict, msgs, marks)
    plan = plan_lanes(schedule, marks, options.max_lanes, options.max_nodes_per_lane,
                      options.collapse_compute, options.group_bursts)
    canvas = DiagramCanvas()
    canvas.lanes_drawn = set(plan.shown)
    for r, nodes in plan.nodes.items():
        for node in nodes:
            if node.kind is not NodeKind.ELIDED:
                for o in node.ops:
                    canvas.node_of[OpRef(r, o)] = node.id
    rows = plan_rows(schedule, plan, msgs, canvas.node_of)
    order = lane_order(schedule, plan.shown)
    heads = _draw_lanes(canvas, schedule, marks, plan, order)
    draw_messages(canvas, schedule, msgs, marks)
    draw_port_faults(canvas, schedule, msgs, plan.nodes)
    draw_wait_for(canvas, schedule, marks)
    notes = _notes(schedule, plan, canvas.messages_elided, options)
    columns = [[(head, 0), *((n.id, rows.level[n.id]) for n in plan.nodes[r])]
               for head, r in zip(heads, order, strict=True)]
    axis = draw_time_axis(canvas, {row: f"step {step}" for step, row in rows.step_rows.items()},
                          rows.rows)
    grid = Grid(columns, canvas.sizes, canvas.stubs_of, axis, draw_legend(canvas))
    pin(canvas.graph, grid.positions(rows.rows))
    canvas.graph.graph_attr["label"] = label_lines(
        _title(schedule, verdict, msgs, marks, notes), left=True)
    return ScheduleDiagram(canvas.graph.source, len(plan.shown), len(plan.elided),
                           plan.nodes_elided, canvas.messages_elided, canvas.faults,
                           tuple(notes))


def _draw_lanes(canvas: DiagramCanvas, schedule: Schedule, marks: FaultMarks,
                plan: LanePlan, order: list[int]) -> list[str]:
    """One lane per shown rank, in `order` (row-major mesh order); returns the heads.
    The head says where the rank's cube sits (no clusters: the grid is pinned)."""
    return [_draw_lane(canvas, schedule, marks, canvas.graph, r, plan.nodes[r])
            for r in order]


def _draw_lane(canvas: DiagramCanvas, schedule: Schedule, marks: FaultMarks, g: Digraph,
               rank: int, nodes: list[LaneNode]) -> str:
    prog = schedule.programs[rank]
    ep = prog.endpoint
    head = f"{ep.label}_head"
    lane_marks = marks.lanes.get(ep, ())
    attrs: Attrs = {
        "label": label_lines(head_label(schedule, rank)), "fillcolor": style.HEAD_FILL,
        "fontsize": 11, "style": "filled,bold",
        "tooltip": f"rank {ep.describe()}: {len(prog.ops)} ops"}
    if lane_marks:
        attrs.update(color=style.FAULT, penwidth=2,
                     tooltip="; ".join(m.message for m in lane_marks))
        canvas.faults += 1
    canvas.node(head, g, **attrs)
    prev = head
    for node in nodes:
        canvas.home[node.id] = g
        node_style, faulty = node_attrs(prog, node, marks)
        canvas.drawn.add(legend_key(node, faulty, node_style))
        if faulty:
            canvas.faults += 1
        canvas.node(node.id, g, **node_style)
        g.edge(prev, node.id, color=style.LANE, arrowhead="none", weight=50)
        prev = node.id
    return head


def legend_key(node: LaneNode, faulty: bool, attrs: Attrs) -> str:
    """Which legend entry a lane node is an instance of."""
    if faulty:
        return "fault"
    if attrs.get("color") == style.NOTE:
        return "note"
    if node.kind is NodeKind.COMM:
        return "send" if node.op_kind is OpKind.SEND else "recv"
    if node.kind is NodeKind.STORE:
        return "store"
    return {NodeKind.COMPUTE: "compute", NodeKind.ELIDED: "elided"}.get(node.kind, "op")


def _notes(schedule: Schedule, plan: LanePlan, messages_elided: int,
           options: DiagramOptions) -> list[str]:
    """What the diagram leaves out, one line each (the title lists them)."""
    notes: list[str] = []
    progs = schedule.programs
    if plan.elided:
        eps = [progs[r].endpoint for r in plan.elided]
        notes.append(f"{len(plan.elided)} more active lanes not drawn (cap "
                     f"{options.max_lanes}): {describe_endpoints(eps)}")
    idle = [p.endpoint for p in progs if not p.ops]
    if idle:
        notes.append(f"{len(idle)} launched ranks ran no ops (not drawn): "
                     f"{describe_endpoints(idle)}")
    if plan.nodes_elided:
        notes.append(f"{plan.nodes_elided} op groups not shown (cap "
                     f"{options.max_nodes_per_lane} nodes per lane)")
    if messages_elided:
        notes.append(f"{messages_elided} messages to or from parts not drawn are omitted")
    return notes


def _title(schedule: Schedule, verdict: Verdict, msgs: MessageTable,
           marks: FaultMarks, notes: list[str]) -> list[str]:
    return title_lines(schedule, verdict, msgs, marks, notes,
                       "rows: communication steps, time running down (a step's sends on one "
                       "row); lanes: ranks in row-major mesh order; edge sN = step N, "
                       "n x dtype (hover for shapes)")
