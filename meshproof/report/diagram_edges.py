"""The edges of a schedule diagram: messages, ports that lead nowhere, and wait-for.

- a matched message burst is one edge send node -> recv node, labelled with its step and
  payload (red when the recv disagrees with the send, grey dashed when never delivered);
- a message without a partner, a port the wiring lacks and a port towards an endpoint
  outside the launch end in a red stub;
- a deadlock adds red `waits for` edges between blocked ops, the cycle in bold.
"""

from __future__ import annotations

from collections import defaultdict

from meshproof.model.channel_table import OpRef, PortStatus
from meshproof.model.schedule import OpKind, Schedule
from meshproof.model.topology import Endpoint
from meshproof.report import style
from meshproof.report.diagram_canvas import DiagramCanvas
from meshproof.report.diagram_labels import count_text, payload_text
from meshproof.report.diagram_lanes import LaneNode, NodeKind
from meshproof.report.dot import Attrs
from meshproof.report.faults import FaultMarks
from meshproof.report.messages import Message, MessageTable
from meshproof.verify.result import Role


def draw_messages(canvas: DiagramCanvas, schedule: Schedule, msgs: MessageTable,
                  marks: FaultMarks) -> None:
    table = msgs.table
    bursts: dict[tuple[str, str], list[Message]] = defaultdict(list)
    # unmatched messages, one stub per node: (node, outgoing) -> channel names
    dangling: dict[tuple[str, bool], list[str]] = defaultdict(list)
    for m in msgs.messages:
        ch = table.channels[m.channel]
        if ch.status is not PortStatus.OK:
            continue  # outside-launch ports are drawn by draw_port_faults
        s_node = canvas.node_of.get(m.send) if m.send is not None else None
        r_node = canvas.node_of.get(m.recv) if m.recv is not None else None
        if s_node and r_node:
            bursts[(s_node, r_node)].append(m)
        elif s_node and m.recv is None:
            dangling[(s_node, True)].append(f"message {m.k} on {ch.name}")
        elif r_node and m.send is None:
            dangling[(r_node, False)].append(f"message {m.k} on {ch.name}")
        else:
            canvas.messages_elided += 1
    for (s_node, r_node), burst in bursts.items():
        _message_edge(canvas, schedule, marks, s_node, r_node, burst)
    for (node, outgoing), what in dangling.items():
        text = "never received" if outgoing else "never sent"
        count = f" ({len(what)} msgs)" if len(what) > 1 else ""
        canvas.stub(node, text + count, f"{text}: {', '.join(what)}", outgoing=outgoing)


def _message_edge(canvas: DiagramCanvas, schedule: Schedule, marks: FaultMarks, s_node: str,
                  r_node: str, burst: list[Message]) -> None:
    steps = sorted({m.step for m in burst if m.step is not None})
    delivered = all(m.delivered for m in burst)
    if not steps:
        when = "never sent"
    elif not delivered:
        when = "never received"
    else:
        when = f"s{steps[0]}" if len(steps) == 1 else f"s{steps[0]}-{steps[-1]}"
    ends = _ends(schedule, burst)
    # a short label at the receiving end (labels at the middle of parallel edges ran
    # together; each recv node has its own end); the shapes and the link are in the tooltip
    attrs: Attrs = {"headlabel": f"{when} {count_text(schedule, burst)}",
                    "tooltip": f"{when.replace('s', 'step ', 1) if steps else when}: "
                               f"{payload_text(schedule, burst)}, {ends}",
                    "headtooltip": f"{payload_text(schedule, burst)}, {ends}",
                    "labelfontsize": 7, "labeldistance": 3.2, "labelangle": -20,
                    "labelfontcolor": style.MESSAGE,
                    "color": style.MESSAGE, "fontcolor": style.MESSAGE, "penwidth": 1.2}
    mismatched = any(
        any(mk.role is Role.MISMATCHED for mk in marks.ops.get(
            (schedule.programs[m.recv.rank].endpoint, m.recv.op), ()))
        for m in burst if m.recv is not None)
    canvas.drawn.add("message")
    if mismatched:
        attrs.update(color=style.FAULT, fontcolor=style.FAULT, labelfontcolor=style.FAULT,
                     penwidth=2)
        canvas.faults += 1
        canvas.drawn.add("fault")
    elif not delivered:
        canvas.drawn.add("undelivered")
        # time does not flow along an undelivered message: do not let it rank the lanes
        attrs.update(color=style.UNDELIVERED, fontcolor=style.UNDELIVERED,
                     labelfontcolor=style.UNDELIVERED, style="dashed")
    canvas.graph.edge(s_node, r_node, **attrs)


def _ends(schedule: Schedule, burst: list[Message]) -> str:
    first = burst[0]
    src = schedule.programs[first.send.rank].endpoint.label if first.send else "?"
    dst = schedule.programs[first.recv.rank].endpoint.label if first.recv else "?"
    return f"{src} -> {dst}"


def draw_port_faults(canvas: DiagramCanvas, schedule: Schedule, msgs: MessageTable,
                     lane_nodes: dict[int, list[LaneNode]]) -> None:
    """A stub per comm node and fault: `no W link`, or `outside launch: c4p0`."""
    table = msgs.table
    for r, nodes in lane_nodes.items():
        for node in nodes:
            if node.kind is not NodeKind.COMM or node.dir is None:
                continue
            seen: set[tuple[PortStatus, Endpoint | None]] = set()
            for o in node.ops:
                use = table.port_use.get(OpRef(r, o))
                if use is None or use.status is PortStatus.OK or \
                        (use.status, use.peer) in seen:
                    continue
                seen.add((use.status, use.peer))
                if use.status is PortStatus.NO_LINK:
                    text = f"no {node.dir.value} link"
                    tip = schedule.wiring.missing_link_reason(schedule.programs[r].endpoint,
                                                              node.dir)
                else:
                    peer = use.peer.label if use.peer else "?"
                    text = f"outside launch: {peer}"
                    tip = f"{peer} is not launched and runs nothing"
                canvas.stub(node.id, text, tip, outgoing=node.op_kind is OpKind.SEND)


def draw_wait_for(canvas: DiagramCanvas, schedule: Schedule, marks: FaultMarks) -> None:
    cycle = set(marks.cycle_edges())
    edges = sorted(set(marks.wait_for) | cycle)
    rank_of = schedule.rank_index()
    for a, b in edges:
        na = _blocked_node(canvas, marks, a, rank_of)
        nb = _blocked_node(canvas, marks, b, rank_of)
        if na is None or nb is None:
            continue
        in_cycle = (a, b) in cycle
        # a 2-cycle draws two edges between the same nodes: label one of them
        twin = in_cycle and (b, a) in cycle and b < a
        label = "" if twin else ("waits for (cycle)" if in_cycle else "waits for")
        canvas.graph.edge(na, nb, color=style.FAULT, fontcolor=style.FAULT, label=label,
                          style="bold" if in_cycle else "dashed",
                          penwidth=2.5 if in_cycle else 1.5, constraint="false")
        canvas.faults += 1
        canvas.drawn.add("wait_for")


def _blocked_node(canvas: DiagramCanvas, marks: FaultMarks, ep: Endpoint,
                  rank_of: dict[Endpoint, int]) -> str | None:
    """The node of `ep`'s blocked op, else its lane head; None if its lane is not drawn."""
    if ep not in rank_of:
        return None
    op = marks.blocked.get(ep)
    if op is not None:
        return canvas.node_of.get(OpRef(rank_of[ep], op))
    return f"{ep.label}_head" if rank_of[ep] in canvas.lanes_drawn else None
