"""The schedule diagram of a large launch (from 4x4 up): one node per rank per step.

Lanes of single ops stop being readable long before 64 ranks, and a cap hides most of
them. Here every active rank has a lane (row-major mesh order) and each step is a band
of two rows: a rank's node on the first counts the messages it sends in that step
(`3 out`), on the second those it receives (`3 in`); an edge from a sender's node to a
receiver's counts the messages between them (`x3`), always one row down, so the edges
are straight and never cross a node. What the run never executes (the ranks block
first, or the port is missing) sits in a last row, `not run`. Faults are the verdict's,
as in the lane view: a node holding an op a diagnostic names is red and says why;
wait-for edges join blocked ranks.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from meshproof.model.channel_table import OpRef
from meshproof.model.schedule import OpKind, Schedule
from meshproof.model.topology import Endpoint
from meshproof.report import style
from meshproof.report.diagram_canvas import DiagramCanvas, ScheduleDiagram
from meshproof.report.diagram_labels import fault_lines
from meshproof.report.diagram_lanes import head_label, lane_order
from meshproof.report.diagram_legend import draw_legend, draw_time_axis, title_lines
from meshproof.report.diagram_place import Grid, pin
from meshproof.report.dot import Attrs, label_lines
from meshproof.report.faults import FaultMarks, OpMark
from meshproof.report.messages import MessageTable
from meshproof.verify.result import Role, Verdict

NOT_RUN = (1 << 30, 0)     # the row of ops the run never executes (sorts last)
OUT, IN = 0, 1             # a step's two rows: its sends, then its recvs
Slot = tuple[int, int]     # (step, side)


@dataclass(slots=True)
class _Cell:
    """What one rank does in one step."""

    sent: int = 0
    received: int = 0
    ops: list[int] = field(default_factory=list)
    marks: list[OpMark] = field(default_factory=list)


def _cells(schedule: Schedule, msgs: MessageTable,
           marks: FaultMarks) -> dict[int, dict[Slot, _Cell]]:
    """Per rank, per (step, side) (NOT_RUN last), the cell of ops it runs there; an op
    that is not a message goes with the message before it."""
    step_of: dict[OpRef, int] = {}
    for m in msgs.messages:
        if m.step is None:
            continue
        if m.send is not None:
            step_of[m.send] = m.step
        if m.recv is not None and m.delivered:
            step_of[m.recv] = m.step
    cells: dict[int, dict[Slot, _Cell]] = {}
    for r, prog in enumerate(schedule.programs):
        if not prog.ops:
            continue
        lane: dict[Slot, _Cell] = defaultdict(_Cell)
        current: Slot = (0, OUT)
        stuck = False
        for op in prog.ops:
            if op.kind.is_comm:
                step = step_of.get(OpRef(r, op.index))
                stuck = stuck or step is None
                if step is not None and not stuck:
                    current = (step, OUT if op.kind is OpKind.SEND else IN)
            where = NOT_RUN if stuck else current
            op_marks = marks.ops.get((prog.endpoint, op.index), ())
            if op.kind.is_comm or op_marks or op.kind is OpKind.STORE:
                cell = lane[where]
                cell.ops.append(op.index)
                cell.marks += op_marks
                if op.kind is OpKind.SEND and not stuck:
                    cell.sent += 1
                elif op.kind is OpKind.RECV and not stuck:
                    cell.received += 1
        cells[r] = dict(lane)
    return cells


def _node_id(ep: Endpoint, slot: Slot) -> str:
    return f"{ep.label}_" + ("x" if slot == NOT_RUN else f"s{slot[0]}{'io'[slot[1]]}")


def _slot_text(slot: Slot) -> str:
    return "not run" if slot == NOT_RUN else f"step {slot[0]} {('out', 'in')[slot[1]]}"


def _cell_attrs(cell: _Cell, step: Slot, marks: FaultMarks,
                ep: Endpoint) -> tuple[Attrs, bool]:
    counts = [f"{cell.sent} out" if cell.sent else "", f"{cell.received} in"
              if cell.received else ""]
    head = ", ".join(c for c in counts if c) or ("not run" if step == NOT_RUN else "")
    ops = f"#{cell.ops[0]}" + (f"-{cell.ops[-1]}" if len(cell.ops) > 1 else "")
    lines = [head or "ops", ops]
    fill = style.HEAD_FILL if step == NOT_RUN else \
        (style.SEND_FILL if step[1] == OUT else style.RECV_FILL)
    attrs: Attrs = {"fillcolor": fill, "fontsize": 8,
                    "tooltip": f"{ep.label} {_slot_text(step)}: ops {ops}"}
    faults = [m for m in cell.marks if m.role is not Role.NOTE]
    if faults:
        blocked = marks.blocked.get(ep)
        at = f" at #{blocked}" if blocked is not None and blocked in cell.ops else ""
        lines += fault_lines(faults[:1], OpKind.SEND, at)[:2]
        attrs.update(color=style.FAULT, fillcolor=style.FAULT_FILL, fontcolor=style.FAULT,
                     penwidth=2, tooltip="; ".join(dict.fromkeys(m.message for m in faults)))
    attrs["label"] = label_lines(lines)
    return attrs, bool(faults)


def aggregate_diagram(schedule: Schedule, verdict: Verdict, msgs: MessageTable,
                      marks: FaultMarks) -> ScheduleDiagram:
    cells = _cells(schedule, msgs, marks)
    canvas = DiagramCanvas()
    g = canvas.graph
    # pinned nodes and edges that only ever go one row down: straight lines are enough,
    # and routing splines around ~1000 nodes takes graphviz minutes
    g.graph_attr["splines"] = "line"
    ranks = lane_order(schedule, list(cells))
    rows = sorted({slot for lane in cells.values() for slot in lane})
    heads: list[str] = []
    columns: list[list[tuple[str, int]]] = []
    row_of = {step: i + 1 for i, step in enumerate(rows)}
    for r in ranks:
        ep = schedule.programs[r].endpoint
        head = f"{ep.label}_head"
        lane_faulty = bool(marks.lanes.get(ep))
        head_attrs: Attrs = {"label": label_lines(head_label(schedule, r)),
                             "fillcolor": style.HEAD_FILL, "style": "filled,bold",
                             "fontsize": 9}
        if lane_faulty:
            head_attrs.update(color=style.FAULT, penwidth=2)
        canvas.node(head, **head_attrs)
        canvas.faults += lane_faulty
        heads.append(head)
        column = [(head, 0)]
        prev = head
        for step in rows:
            cell = cells[r].get(step)
            if cell is None:
                continue
            node = _node_id(ep, step)
            attrs, faulty = _cell_attrs(cell, step, marks, ep)
            canvas.faults += faulty
            canvas.drawn.add("fault" if faulty else "aggregate")
            canvas.node(node, **attrs)
            g.edge(prev, node, color=style.LANE, arrowhead="none")
            column.append((node, row_of[step]))
            prev = node
        columns.append(column)
    undelivered = _messages(canvas, schedule, msgs, cells)
    _wait_for(canvas, schedule, marks, cells)
    axis = draw_time_axis(canvas, {row_of[slot]: _slot_text(slot) for slot in rows},
                          len(rows) + 1)
    grid = Grid(columns, canvas.sizes, {}, axis, draw_legend(canvas))
    pin(g, grid.positions(len(rows) + 1))
    n_idle = sum(1 for p in schedule.programs if not p.ops)
    notes = [f"aggregated view: {len(ranks)} ranks from {len(ranks)} active (no lane left "
             "out); one node per rank per step"]
    if n_idle:
        notes.append(f"{n_idle} launched ranks ran no ops (not drawn)")
    if undelivered:
        notes.append(f"{undelivered} messages never delivered (grey dashed)")
    g.graph_attr["label"] = label_lines(title_lines(
        schedule, verdict, msgs, marks, notes,
        "rows: communication steps, each a row of sends (out) and a row of recvs (in); not "
        f"run: ops the run never executes; an edge carries {canvas.usual_burst} message(s) "
        "unless labelled xN"), left=True)
    return ScheduleDiagram(g.source, len(ranks), 0, 0, 0, canvas.faults, tuple(notes),
                           aggregated=True)


def _messages(canvas: DiagramCanvas, schedule: Schedule, msgs: MessageTable,
              cells: dict[int, dict[Slot, _Cell]]) -> int:
    """One edge per (sender, receiver, step), labelled with its message count."""
    bursts: Counter[tuple[int, Slot, int, Slot, bool]] = Counter()
    undelivered = 0
    for m in msgs.messages:
        if m.send is None or m.recv is None or m.step is None:
            continue
        src_step, dst_step = (m.step, OUT), (m.step, IN) if m.delivered else NOT_RUN
        if dst_step not in cells.get(m.recv.rank, {}):
            continue
        undelivered += not m.delivered
        bursts[(m.send.rank, src_step, m.recv.rank, dst_step, m.delivered)] += 1
    # most edges carry the same number of messages (a triplet): label only the others
    usual = Counter(bursts.values()).most_common(1)[0][0] if bursts else 1
    canvas.usual_burst = usual
    for (a, sa, b, sb, delivered), n in sorted(bursts.items()):
        tail = _node_id(schedule.programs[a].endpoint, sa)
        head = _node_id(schedule.programs[b].endpoint, sb)
        attrs: Attrs = {"color": style.MESSAGE if delivered else style.UNDELIVERED,
                        "fontcolor": style.MESSAGE, "penwidth": 1.0, "arrowsize": 0.5,
                        "constraint": "false",
                        "tooltip": f"{n} message(s) {tail} -> {head}"}
        if n != usual:
            attrs["label"] = f"x{n}"
        if not delivered:
            attrs["style"] = "dashed"
            canvas.drawn.add("undelivered")
        canvas.drawn.add("message")
        canvas.graph.edge(tail, head, **attrs)
    return undelivered


def _wait_for(canvas: DiagramCanvas, schedule: Schedule, marks: FaultMarks,
              cells: dict[int, dict[Slot, _Cell]]) -> None:
    rank_of = schedule.rank_index()
    cycle = set(marks.cycle_edges())
    for a, b in sorted(set(marks.wait_for) | cycle):
        ra, rb = rank_of.get(a), rank_of.get(b)
        if ra is None or rb is None or NOT_RUN not in cells.get(ra, {}) or \
                NOT_RUN not in cells.get(rb, {}):
            continue
        in_cycle = (a, b) in cycle
        canvas.graph.edge(_node_id(a, NOT_RUN), _node_id(b, NOT_RUN), color=style.FAULT,
                          style="bold" if in_cycle else "dashed", constraint="false",
                          penwidth=2.5 if in_cycle else 1.2)
        canvas.faults += 1
        canvas.drawn.add("wait_for")
