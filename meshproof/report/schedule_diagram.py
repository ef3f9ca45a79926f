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

import itertools
import textwrap
from collections import defaultdict
from dataclasses import dataclass

from meshproof.model.channels import OpRef
from meshproof.model.schedule import Schedule
from meshproof.report import style
from meshproof.report.diagram_canvas import DiagramCanvas
from meshproof.report.diagram_edges import draw_messages, draw_port_faults, draw_wait_for
from meshproof.report.diagram_labels import node_attrs
from meshproof.report.diagram_lanes import LaneNode, LanePlan, NodeKind, plan_lanes
from meshproof.report.dot import Attrs, Digraph, label_lines
from meshproof.report.faults import FaultMarks, marks_from_verdict
from meshproof.report.messages import MessageTable, message_table
from meshproof.report.text import describe_endpoints, launch_line
from meshproof.verify.result import Verdict


@dataclass(frozen=True, slots=True)
class DiagramOptions:
    max_lanes: int = 16
    max_nodes_per_lane: int = 48
    collapse_compute: bool = True
    group_bursts: bool = True


@dataclass(frozen=True, slots=True)
class ScheduleDiagram:
    source: str                 # DOT text
    lanes_shown: int
    lanes_elided: int
    nodes_elided: int
    messages_elided: int
    faults_drawn: int           # red nodes + red edges
    notes: tuple[str, ...]


def schedule_diagram(schedule: Schedule, verdict: Verdict,
                     options: DiagramOptions = DiagramOptions()) -> ScheduleDiagram:
    msgs = message_table(schedule, verdict.depth)
    marks = marks_from_verdict(verdict)
    plan = plan_lanes(schedule, marks, options.max_lanes, options.max_nodes_per_lane,
                      options.collapse_compute, options.group_bursts)
    canvas = DiagramCanvas()
    canvas.lanes_drawn = set(plan.shown)
    for r, nodes in plan.nodes.items():
        for node in nodes:
            if node.kind is not NodeKind.ELIDED:
                for o in node.ops:
                    canvas.node_of[OpRef(r, o)] = node.id
    heads = _draw_lanes(canvas, schedule, marks, plan)
    draw_messages(canvas, schedule, msgs, marks)
    draw_port_faults(canvas, schedule, msgs, plan.nodes)
    draw_wait_for(canvas, schedule, marks)
    notes = _notes(schedule, plan, canvas.messages_elided, options)
    canvas.graph.same_rank(heads)
    for a, b in itertools.pairwise(heads):
        # a flat invisible edge keeps the lanes in endpoint order, left to right
        canvas.graph.edge(a, b, style="invis")
    canvas.graph.graph_attr["label"] = label_lines(
        _title(schedule, verdict, msgs, marks, notes), left=True)
    return ScheduleDiagram(canvas.graph.source, len(plan.shown), len(plan.elided),
                           plan.nodes_elided, canvas.messages_elided, canvas.faults,
                           tuple(notes))


def _draw_lanes(canvas: DiagramCanvas, schedule: Schedule, marks: FaultMarks,
                plan: LanePlan) -> list[str]:
    """Cube clusters inside SIP clusters, one lane per shown rank; returns the lane heads."""
    system = schedule.launch.system
    by_cube: dict[int, list[int]] = defaultdict(list)
    for r in plan.shown:
        by_cube[schedule.programs[r].endpoint.cube].append(r)
    sips: dict[int, Digraph] = {}
    heads: list[str] = []
    for cube in sorted(by_cube):
        c = system.coord(cube)
        if c.sip not in sips:
            sips[c.sip] = canvas.graph.subgraph(
                f"cluster_sip{c.sip}", label=f"SIP {c.sip}", style="dashed",
                color="#c8c8c8", fontcolor="#707070", fontsize=11)
        cube_g = sips[c.sip].subgraph(
            f"cluster_cube{cube}", label=f"cube {cube} (row {c.row}, col {c.col})",
            style="rounded", color="#b0b0b0", fontsize=10, fontcolor="#404040")
        for r in by_cube[cube]:
            heads.append(_draw_lane(canvas, schedule, marks, cube_g, r, plan.nodes[r]))
    return heads


def _draw_lane(canvas: DiagramCanvas, schedule: Schedule, marks: FaultMarks, g: Digraph,
               rank: int, nodes: list[LaneNode]) -> str:
    prog = schedule.programs[rank]
    ep = prog.endpoint
    head = f"{ep.label}_head"
    lane_marks = marks.lanes.get(ep, ())
    attrs: Attrs = {
        "label": ep.label, "fillcolor": style.HEAD_FILL, "fontsize": 11,
        "style": "filled,bold", "tooltip": f"rank {ep.describe()}: {len(prog.ops)} ops",
        "group": ep.label}
    if lane_marks:
        attrs.update(color=style.FAULT, penwidth=2,
                     tooltip="; ".join(m.message for m in lane_marks))
        canvas.faults += 1
    g.node(head, **attrs)
    prev = head
    for node in nodes:
        canvas.home[node.id] = g
        node_style, faulty = node_attrs(prog, node, marks)
        if faulty:
            canvas.faults += 1
        # `group` asks dot to keep the lane's program-order edges straight
        g.node(node.id, group=ep.label, **node_style)
        g.edge(prev, node.id, color=style.LANE, arrowhead="none", weight=50)
        prev = node.id
    return head


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
    spec = schedule.launch
    lines = [f"{spec.kernel}: {launch_line(spec)}"]
    if verdict.ok:
        lines.append(f"verdict: all {len(verdict.properties)} properties proved"
                     f" at queue depth {verdict.depth}")
    else:
        bad = [f"{p.name.value} {p.status.value}" for p in verdict.properties
               if p.status.value != "proved"]
        lines.append("verdict: " + ", ".join(bad))
    if verdict.skipped:
        lines[-1] += "; not checked: " + ", ".join(p.value for p in verdict.skipped)
    for h in marks.headlines[:4]:
        lines.append("  " + textwrap.shorten(h, 150, placeholder=" ..."))
    n_msgs = sum(1 for m in msgs.messages if m.send is not None)
    lines.append(f"{n_msgs} messages, {msgs.comm_steps} communication steps "
                 f"(hop depth) at queue depth {msgs.progress.depth}")
    lines += notes
    lines.append("lanes: ops top to bottom in program order; blue edge = message "
                 "(step, shapes dtype); grey dashed = never delivered; red = fault")
    return lines
