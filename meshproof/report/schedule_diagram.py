"""The space-time diagram of a schedule: one lane per rank, messages as edges, faults red.

Lanes run top to bottom in program order, grouped in clusters by SIP and cube. Comm ops
are always drawn; a run of consecutive comm ops on the same port (a kernel sending a
triplet) is one node, and its edge lists every message it carries. Compute ops collapse
into "k compute ops" nodes unless they carry a fault. Large schedules are capped (lanes,
nodes per lane) and the title says what was left out, rather than drawing a hairball.
"""

from __future__ import annotations

import itertools
import textwrap
from collections import defaultdict
from dataclasses import dataclass, field

from meshproof.model.channels import OpRef, PortStatus
from meshproof.model.schedule import OpKind, RankProgram, Schedule
from meshproof.model.topology import Direction, Endpoint
from meshproof.report import style
from meshproof.report.dot import Graph, label_lines
from meshproof.report.faults import FaultMarks, OpMark, marks_from_schedule, marks_from_verdict
from meshproof.report.messages import Message, MessageTable, message_table
from meshproof.report.text import describe_endpoints, launch_line, shape_text
from meshproof.verify.result import Role, Verdict


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


@dataclass(slots=True)
class _Node:
    id: str
    kind: str                   # comm | compute | store | op | elided
    ops: list[int]
    op_kind: OpKind | None = None
    dir: str | None = None
    marks: list[OpMark] = field(default_factory=list)


def schedule_diagram(schedule: Schedule, verdict: Verdict | None = None,
                     options: DiagramOptions = DiagramOptions()) -> ScheduleDiagram:
    depth = verdict.depth if verdict is not None else None
    msgs = message_table(schedule, depth)
    marks = marks_from_verdict(verdict) if verdict is not None else \
        marks_from_schedule(schedule, msgs)
    return _Builder(schedule, verdict, msgs, marks, options).build()


class _Builder:
    def __init__(self, schedule: Schedule, verdict: Verdict | None, msgs: MessageTable,
                 marks: FaultMarks, options: DiagramOptions) -> None:
        self.schedule = schedule
        self.verdict = verdict
        self.msgs = msgs
        self.marks = marks
        self.opt = options
        self.node_of: dict[OpRef, str] = {}
        self.nodes_elided = 0
        self.messages_elided = 0
        self.faults = 0
        self.stubs = 0
        self.lanes_drawn: set[int] = set()
        self.home: dict[str, Graph] = {}    # node id -> the cube cluster it is drawn in
        self.graph = Graph("schedule", {
            "rankdir": "TB", "newrank": "true", "nodesep": 0.3, "ranksep": 0.28,
            "fontname": style.FONT, "fontsize": 12, "labelloc": "t", "labeljust": "l",
            "compound": "true", "outputorder": "edgesfirst"})
        self.graph.node_defaults = {"fontname": style.FONT, "fontsize": 10, "shape": "box",
                                    "style": "rounded,filled", "fillcolor": "white",
                                    "height": 0.3, "margin": "0.08,0.03"}
        self.graph.edge_defaults = {"fontname": style.FONT, "fontsize": 8,
                                    "arrowsize": 0.6}

    # -- lanes -----------------------------------------------------------------------
    def _lanes(self) -> tuple[list[int], list[int]]:
        active = [r for r, p in enumerate(self.schedule.programs) if p.ops]
        if len(active) <= self.opt.max_lanes:
            return active, []
        # keep the lanes that explain the fault: root causes first, then the wait-for
        # cycle, then ranks that are merely blocked or hold a wrong output
        primary = {Role.ILLEGAL, Role.OUTSIDE, Role.MISMATCHED, Role.UNMATCHED}
        score: dict[Endpoint, int] = {}
        for (ep, _), marks in self.marks.ops.items():
            rank = 0 if any(m.role in primary for m in marks) else 2
            score[ep] = min(score.get(ep, 3), rank)
        for ep in self.marks.lanes:
            score[ep] = min(score.get(ep, 3), 2)
        for ep in self.marks.cycle:
            score[ep] = min(score.get(ep, 3), 1)
        eps = self.schedule.programs
        ranked = sorted(active, key=lambda r: (score.get(eps[r].endpoint, 3), r))
        shown = sorted(ranked[:self.opt.max_lanes])
        return shown, [r for r in active if r not in set(shown)]

    def _lane_nodes(self, rank: int, prog: RankProgram) -> list[_Node]:
        ep = prog.endpoint
        nodes: list[_Node] = []
        pending: list[int] = []

        def flush() -> None:
            if pending:
                nodes.append(_Node(f"{ep.label}_n{len(nodes)}", "compute", list(pending)))
                pending.clear()

        for op in prog.ops:
            op_marks = list(self.marks.ops.get((ep, op.index), ()))
            if op.kind.is_comm:
                flush()
                prev = nodes[-1] if nodes else None
                d = op.dir.value if op.dir else None
                if (self.opt.group_bursts and prev is not None and prev.kind == "comm"
                        and prev.op_kind is op.kind and prev.dir == d
                        and prev.ops[-1] == op.index - 1):
                    prev.ops.append(op.index)
                    prev.marks += op_marks
                else:
                    nodes.append(_Node(f"{ep.label}_n{len(nodes)}", "comm", [op.index],
                                       op.kind, d, op_marks))
            elif op.kind is OpKind.STORE or op_marks or not self.opt.collapse_compute:
                flush()
                kind = "store" if op.kind is OpKind.STORE else "op"
                nodes.append(_Node(f"{ep.label}_n{len(nodes)}", kind, [op.index], op.kind,
                                   None, op_marks))
            else:
                pending.append(op.index)
        flush()
        return self._cap(nodes, ep)

    def _cap(self, nodes: list[_Node], ep: Endpoint) -> list[_Node]:
        cap = self.opt.max_nodes_per_lane
        if len(nodes) <= cap:
            return nodes
        must = {i for i, n in enumerate(nodes) if n.marks}
        blocked = self.marks.blocked.get(ep)
        must |= {i for i, n in enumerate(nodes) if blocked is not None and blocked in n.ops}
        budget = max(cap - len(must), cap // 2)
        keep = set(range(min(budget, len(nodes)))) | must | {len(nodes) - 1}
        out: list[_Node] = []
        run: list[_Node] = []
        for i, node in enumerate(nodes):
            if i in keep:
                if run:
                    out.append(self._elided(run, ep, len(out)))
                    run = []
                out.append(node)
            else:
                run.append(node)
        if run:
            out.append(self._elided(run, ep, len(out)))
        return out

    def _elided(self, run: list[_Node], ep: Endpoint, i: int) -> _Node:
        self.nodes_elided += len(run)
        ops = [o for n in run for o in n.ops]
        return _Node(f"{ep.label}_elided{i}", "elided", ops)

    # -- drawing ---------------------------------------------------------------------
    def build(self) -> ScheduleDiagram:
        shown, elided = self._lanes()
        lane_nodes = {r: self._lane_nodes(r, self.schedule.programs[r]) for r in shown}
        self.lanes_drawn = set(shown)
        for r, nodes in lane_nodes.items():
            for node in nodes:
                if node.kind != "elided":
                    for o in node.ops:
                        self.node_of[OpRef(r, o)] = node.id
        heads = self._draw_lanes(shown, lane_nodes)
        self._draw_messages()
        self._draw_port_faults(lane_nodes)
        self._draw_wait_for()
        notes = self._notes(shown, elided)
        self.graph.same_rank(heads)
        for a, b in itertools.pairwise(heads):
            # a flat invisible edge keeps the lanes in endpoint order, left to right
            self.graph.edge(a, b, style="invis")
        self.graph.attrs["label"] = label_lines(self._title(notes), left=True)
        return ScheduleDiagram(self.graph.source(), len(shown), len(elided), self.nodes_elided,
                               self.messages_elided, self.faults, tuple(notes))

    def _draw_lanes(self, shown: list[int], lane_nodes: dict[int, list[_Node]]) -> list[str]:
        system = self.schedule.launch.system
        by_cube: dict[int, list[int]] = defaultdict(list)
        for r in shown:
            by_cube[self.schedule.programs[r].endpoint.cube].append(r)
        sips: dict[int, Graph] = {}
        heads: list[str] = []
        for cube in sorted(by_cube):
            c = system.coord(cube)
            if c.sip not in sips:
                sips[c.sip] = self.graph.subgraph(
                    f"cluster_sip{c.sip}", label=f"SIP {c.sip}", style="dashed",
                    color="#c8c8c8", fontcolor="#707070", fontsize=11)
            cube_g = sips[c.sip].subgraph(
                f"cluster_cube{cube}", label=f"cube {cube} (row {c.row}, col {c.col})",
                style="rounded", color="#b0b0b0", fontsize=10, fontcolor="#404040")
            for r in by_cube[cube]:
                heads.append(self._draw_lane(cube_g, r, lane_nodes[r]))
        return heads

    def _draw_lane(self, g: Graph, rank: int, nodes: list[_Node]) -> str:
        prog = self.schedule.programs[rank]
        ep = prog.endpoint
        head = f"{ep.label}_head"
        lane_marks = self.marks.lanes.get(ep, ())
        attrs: dict[str, str | int | float] = {
            "label": ep.label, "fillcolor": style.HEAD_FILL, "fontsize": 11,
            "style": "filled,bold", "tooltip": f"rank {ep.describe()}: {len(prog.ops)} ops",
            "group": ep.label}
        if lane_marks:
            attrs.update(color=style.FAULT, penwidth=2,
                         tooltip="; ".join(m.message for m in lane_marks))
            self.faults += 1
        g.node(head, **attrs)
        prev = head
        for node in nodes:
            self.home[node.id] = g
            # `group` asks dot to keep the lane's program-order edges straight
            g.node(node.id, group=ep.label, **self._node_attrs(prog, node))
            g.edge(prev, node.id, color=style.LANE, arrowhead="none", weight=50)
            prev = node.id
        return head

    def _node_attrs(self, prog: RankProgram, node: _Node) -> dict[str, str | int | float]:
        ops = [prog.ops[i] for i in node.ops]
        first = ops[0]
        span = f"#{node.ops[0]}" + (f"-{node.ops[-1]}" if len(node.ops) > 1 else "")
        if node.kind == "elided":
            return {"label": f"... {len(node.ops)} ops not shown ...", "shape": "plaintext",
                    "style": "", "fontcolor": style.COMPUTE_TEXT, "fontsize": 9}
        if node.kind == "compute":
            kinds = sorted({op.kind.value for op in ops})
            return {"label": f"{len(ops)} compute op{'s' if len(ops) > 1 else ''}",
                    "shape": "plaintext", "style": "", "fontcolor": style.COMPUTE_TEXT,
                    "fontsize": 9, "height": 0.2,
                    "tooltip": f"{span}: {', '.join(kinds)}"}
        if node.kind == "comm":
            mult = f" x{len(ops)}" if len(ops) > 1 else ""
            lines = [f"{first.kind.value} {node.dir}{mult}  {span}"]
            fill = style.SEND_FILL if first.kind is OpKind.SEND else style.RECV_FILL
        elif node.kind == "store":
            lines = [f"store {first.ptr or ''}  {span}"]
            fill = style.STORE_FILL
        else:
            lines = [f"{first.kind.value}  {span}"]
            fill = "white"
        attrs: dict[str, str | int | float] = {
            "fillcolor": fill, "tooltip": f"{span} {first.source}"}
        faults = [m for m in node.marks if m.role is not Role.NOTE]
        notes = [m for m in node.marks if m.role is Role.NOTE]
        if faults:
            blocked_at = self.marks.blocked.get(prog.endpoint)
            at = f" at #{blocked_at}" if len(ops) > 1 and blocked_at in node.ops else ""
            lines += _fault_lines(faults, first.kind, at)
            lines.append(str(first.source).rsplit("/", 1)[-1])
            attrs.update(color=style.FAULT, fillcolor=style.FAULT_FILL, penwidth=2,
                         fontcolor=style.FAULT,
                         tooltip="; ".join(dict.fromkeys(m.message for m in faults)))
            self.faults += 1
        elif notes:
            lines.append(textwrap.shorten(notes[0].message, 40, placeholder="..."))
            attrs.update(color=style.NOTE, fillcolor=style.NOTE_FILL, penwidth=1.5,
                         tooltip=notes[0].message)
        attrs["label"] = label_lines(lines)
        return attrs

    def _draw_messages(self) -> None:
        table = self.msgs.table
        groups: dict[tuple[str, str], list[Message]] = defaultdict(list)
        # unmatched messages, one stub per node: (node, outgoing) -> channel names
        dangling: dict[tuple[str, bool], list[str]] = defaultdict(list)
        for m in self.msgs.messages:
            ch = table.channels[m.channel]
            if ch.status is not PortStatus.OK:
                continue  # outside-launch ports are drawn by _draw_port_faults
            s_node = self.node_of.get(m.send) if m.send is not None else None
            r_node = self.node_of.get(m.recv) if m.recv is not None else None
            if s_node and r_node:
                groups[(s_node, r_node)].append(m)
            elif s_node and m.recv is None:
                dangling[(s_node, True)].append(f"message {m.k} on {ch.name}")
            elif r_node and m.send is None:
                dangling[(r_node, False)].append(f"message {m.k} on {ch.name}")
            else:
                self.messages_elided += 1
        for (s_node, r_node), group in groups.items():
            self._message_edge(s_node, r_node, group)
        for (node, outgoing), what in dangling.items():
            text = "never received" if outgoing else "never sent"
            count = f" ({len(what)} msgs)" if len(what) > 1 else ""
            self._stub(node, text + count, f"{text}: {', '.join(what)}", outgoing=outgoing)

    def _message_edge(self, s_node: str, r_node: str, group: list[Message]) -> None:
        steps = sorted({m.step for m in group if m.step is not None})
        delivered = all(m.delivered for m in group)
        payload = _payload(self.schedule, group)
        if not steps:
            when = "never sent"
        elif not delivered:
            when = "never received"
        else:
            when = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
        attrs: dict[str, str | int | float] = {
            "label": label_lines([when, payload]), "color": style.MESSAGE,
            "fontcolor": style.MESSAGE, "penwidth": 1.2}
        mismatched = any(
            any(mk.role is Role.MISMATCHED for mk in self.marks.ops.get(
                (self.schedule.programs[m.recv.rank].endpoint, m.recv.op), ()))
            for m in group if m.recv is not None)
        if mismatched:
            attrs.update(color=style.FAULT, fontcolor=style.FAULT, penwidth=2)
            self.faults += 1
        elif not delivered:
            # time does not flow along an undelivered message: do not let it rank the lanes
            attrs.update(color=style.UNDELIVERED, fontcolor=style.UNDELIVERED,
                         style="dashed", constraint="false")
        self.graph.edge(s_node, r_node, **attrs)

    def _draw_port_faults(self, lane_nodes: dict[int, list[_Node]]) -> None:
        table = self.msgs.table
        for r, nodes in lane_nodes.items():
            for node in nodes:
                if node.kind != "comm":
                    continue
                seen: set[tuple[PortStatus, Endpoint | None]] = set()
                for o in node.ops:
                    use = table.port_use.get(OpRef(r, o))
                    if use is None or use.status is PortStatus.OK or \
                            (use.status, use.peer) in seen:
                        continue
                    seen.add((use.status, use.peer))
                    if use.status is PortStatus.NO_LINK:
                        text = f"no {node.dir} link"
                        tip = self.schedule.wiring.missing_link_reason(
                            self.schedule.programs[r].endpoint, Direction.parse(node.dir))
                    else:
                        peer = use.peer.label if use.peer else "?"
                        text = f"outside launch: {peer}"
                        tip = f"{peer} is not launched and runs nothing"
                    self._stub(node.id, text, tip, outgoing=node.op_kind is OpKind.SEND)

    def _stub(self, node_id: str, text: str, tooltip: str, *, outgoing: bool) -> None:
        self.stubs += 1
        stub = f"{node_id}_stub{self.stubs}"
        # drawn inside the op's cube cluster, so it sits next to its lane
        self.home.get(node_id, self.graph).node(stub, label=text, shape="octagon", style="filled",
                        color=style.FAULT, fillcolor=style.FAULT_FILL, fontcolor=style.FAULT,
                        fontsize=9, height=0.25, tooltip=tooltip)
        tail, head = (node_id, stub) if outgoing else (stub, node_id)
        self.graph.edge(tail, head, color=style.FAULT, style="dashed", penwidth=1.5)
        self.faults += 1

    def _draw_wait_for(self) -> None:
        cycle = set(self.marks.cycle_edges())
        edges = sorted(set(self.marks.wait_for) | cycle)
        rank_of = self.schedule.rank_index()
        for a, b in edges:
            na = self._blocked_node(a, rank_of)
            nb = self._blocked_node(b, rank_of)
            if na is None or nb is None:
                continue
            in_cycle = (a, b) in cycle
            # a 2-cycle draws two edges between the same nodes: label one of them
            twin = in_cycle and (b, a) in cycle and b < a
            label = "" if twin else ("waits for (cycle)" if in_cycle else "waits for")
            self.graph.edge(na, nb, color=style.FAULT, fontcolor=style.FAULT, label=label,
                            style="bold" if in_cycle else "dashed",
                            penwidth=2.5 if in_cycle else 1.5, constraint="false")
            self.faults += 1

    def _blocked_node(self, ep: Endpoint, rank_of: dict[Endpoint, int]) -> str | None:
        if ep not in rank_of:
            return None
        op = self.marks.blocked.get(ep)
        if op is not None:
            return self.node_of.get(OpRef(rank_of[ep], op))
        return f"{ep.label}_head" if rank_of[ep] in self.lanes_drawn else None

    # -- text ------------------------------------------------------------------------
    def _notes(self, shown: list[int], elided: list[int]) -> list[str]:
        notes: list[str] = []
        progs = self.schedule.programs
        if elided:
            eps = [progs[r].endpoint for r in elided]
            notes.append(f"{len(elided)} more active lanes not drawn (cap {self.opt.max_lanes}"
                         f"): {describe_endpoints(eps)}")
        idle = [p.endpoint for p in progs if not p.ops]
        if idle:
            notes.append(f"{len(idle)} launched ranks ran no ops (not drawn): "
                         f"{describe_endpoints(idle)}")
        if self.nodes_elided:
            notes.append(f"{self.nodes_elided} op groups not shown (cap "
                         f"{self.opt.max_nodes_per_lane} nodes per lane)")
        if self.messages_elided:
            notes.append(f"{self.messages_elided} messages to or from parts not drawn are "
                         "omitted")
        return notes

    def _title(self, notes: list[str]) -> list[str]:
        spec = self.schedule.launch
        lines = [f"{spec.kernel}: {launch_line(spec)}"]
        if self.verdict is None:
            lines.append("no verdict: faults read off the schedule (ports, matching, "
                         f"deadlock at queue depth {self.msgs.progress.depth})")
        elif self.verdict.ok:
            lines.append(f"verdict: all {len(self.verdict.properties)} properties proved"
                         f" at queue depth {self.verdict.depth}")
        else:
            bad = [f"{p.name} {p.status.value}" for p in self.verdict.properties
                   if p.status.value != "proved"]
            lines.append("verdict: " + ", ".join(bad))
        for h in self.marks.headlines[:4]:
            lines.append("  " + textwrap.shorten(h, 150, placeholder=" ..."))
        n_msgs = sum(1 for m in self.msgs.messages if m.send is not None)
        lines.append(f"{n_msgs} messages, {self.msgs.comm_steps} communication steps "
                     f"(hop depth) at queue depth {self.msgs.progress.depth}")
        lines += notes
        lines.append("lanes: ops top to bottom in program order; blue edge = message "
                     "(step, shapes dtype); grey dashed = never delivered; red = fault")
        return lines


def _fault_lines(marks: list[OpMark], kind: OpKind, blocked_at: str = "") -> list[str]:
    out: list[str] = []
    for role in dict.fromkeys(m.role for m in marks):
        m = next(x for x in marks if x.role is role)
        if role is Role.ILLEGAL:
            out.append(f"ILLEGAL: no {m.dir or ''} link".rstrip())
        elif role is Role.OUTSIDE:
            out.append(f"OUTSIDE: {m.peer.label if m.peer else 'peer'} not launched")
        elif role is Role.UNMATCHED:
            out.append("UNMATCHED: " + ("never received" if kind is OpKind.SEND
                                        else "never sent"))
        elif role is Role.MISMATCHED:
            out.append("MISMATCHED shape/dtype")
        elif role is Role.BLOCKED:
            out.append(f"BLOCKED{blocked_at} (deadlock)")
        elif role is Role.MERGE:
            out += ["MERGE: " + line for line in
                    textwrap.wrap(m.message, 44, max_lines=2, placeholder=" ...")[:1]]
            out += textwrap.wrap(m.message, 44, max_lines=3, placeholder=" ...")[1:]
    return out


def _payload(schedule: Schedule, group: list[Message]) -> str:
    ops = []
    for m in group:
        ref = m.send if m.send is not None else m.recv
        assert ref is not None
        ops.append(schedule.programs[ref.rank].ops[ref.op])
    dtypes = {op.dtype.value for op in ops}
    if len(dtypes) == 1:
        return ", ".join(shape_text(op.shape) for op in ops) + f" {dtypes.pop()}"
    return ", ".join(f"{shape_text(op.shape)} {op.dtype.value}" for op in ops)


