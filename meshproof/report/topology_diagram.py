"""The topology diagram: the system's cubes on their grid, the wiring's links, the launch.

Cubes sit at their physical (SIP, row, col) place (neato with pinned positions). When the
wiring links PEs inside a cube (pe_line, pe_ring), launched cubes show their PEs; otherwise
a cube stands for its PE 0. Launched cubes are filled blue, links the schedule uses are
bold blue, and ports the kernel used that the wiring lacks are dashed red stubs towards
where the neighbour would be; links to endpoints outside the launch are dashed red too.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshproof.model.channel_table import ChannelTable, PortStatus
from meshproof.model.channels import derive_channels
from meshproof.model.schedule import Schedule
from meshproof.model.topology import Direction, Endpoint, System
from meshproof.report import style
from meshproof.report.dot import Attrs, Graph, label_lines
from meshproof.report.text import int_ranges, launch_line

MAX_PE_DETAIL_CUBES = 16    # above this many launched cubes, draw cubes only
MAX_SIPS = 8                # SIPs drawn; the rest are summarised in the title

_STEP = {Direction.E: (1, 0), Direction.W: (-1, 0), Direction.N: (0, 1), Direction.S: (0, -1)}

Port = tuple[Endpoint, Direction]


@dataclass(frozen=True, slots=True)
class TopologyDiagram:
    """The topology's DOT text, whether PEs are drawn, the red elements and the notes."""

    source: str
    pe_detail: bool
    faults_drawn: int
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where everything sits: SIPs side by side, cubes on their grid, PEs in a row."""

    system: System
    sips: tuple[int, ...]          # the SIPs drawn, in order
    launched: frozenset[int]       # launched cubes
    pe_detail: bool                # launched cubes show their PEs
    cube_w: float
    cube_h: float

    @property
    def gap_x(self) -> float:
        return self.cube_w + 0.55

    @property
    def gap_y(self) -> float:
        return self.cube_h + 0.55

    def sip_x(self, sip: int) -> float:
        return self.sips.index(sip) * (self.system.cols * self.gap_x + 0.9)

    def cube_xy(self, cube: int) -> tuple[float, float]:
        c = self.system.coord(cube)
        return self.sip_x(c.sip) + c.col * self.gap_x, -c.row * self.gap_y

    def detailed(self, cube: int) -> bool:
        return self.pe_detail and cube in self.launched

    def shown(self, cube: int) -> bool:
        return self.system.coord(cube).sip in self.sips

    def node_of(self, ep: Endpoint) -> str:
        return f"pe{ep.cube}_{ep.pe}" if self.detailed(ep.cube) else f"cube{ep.cube}"

    def ep_xy(self, ep: Endpoint) -> tuple[float, float]:
        x, y = self.cube_xy(ep.cube)
        if not self.detailed(ep.cube):
            return x, y
        return x - self.cube_w / 2 + 0.5 * ep.pe + 0.5, y - 0.12


def topology_diagram(schedule: Schedule) -> TopologyDiagram:
    spec = schedule.launch
    system = spec.system
    wiring = schedule.wiring
    table = derive_channels(schedule)
    launched = frozenset(spec.cubes)
    intra = any(lk.src.cube == lk.dst.cube for lk in wiring.links)
    pe_detail = intra and len(launched) <= MAX_PE_DETAIL_CUBES
    notes: list[str] = []
    if intra and not pe_detail:
        notes.append(f"{len(launched)} launched cubes: PEs inside cubes not drawn "
                     f"(cap {MAX_PE_DETAIL_CUBES})")
    sips = sorted({system.coord(c).sip for c in launched})
    sips = sorted(set(sips) | set(range(min(system.n_sips, MAX_SIPS))))[:MAX_SIPS]
    if system.n_sips > len(sips):
        notes.append(f"{system.n_sips - len(sips)} more SIPs not drawn")
    layout = _Layout(system, tuple(sips), launched, pe_detail,
                     0.5 * system.pes + 0.5 if pe_detail else 1.1, 1.0 if pe_detail else 0.65)
    g = Graph(name="topology", graph_attr={
        "layout": "neato", "splines": "true", "overlap": "true", "fontname": style.FONT,
        "fontsize": 12, "labelloc": "t", "labeljust": "l", "outputorder": "nodesfirst",
        "pad": 0.3})
    g.node_attr = {"fontname": style.FONT, "fontsize": 10}
    g.edge_attr = {"fontname": style.FONT, "fontsize": 8}
    _draw_sips(g, layout)
    _draw_cubes(g, layout, schedule, intra)
    bad_ports, peers = _bad_ports(schedule, table)
    _draw_links(g, layout, schedule, table, bad_ports, peers)
    faults = _draw_bad_ports(g, layout, schedule, bad_ports, peers)
    if bad_ports:
        notes.append("red dashed: ports the kernel used that the wiring lacks (or that "
                     "leave the launch)")
    title = [f"{spec.kernel}: {launch_line(spec)}",
             f"wiring {wiring.name}: {len(wiring.links) // 2} links; launched cubes "
             f"{int_ranges(launched)} in blue; bold blue = links the schedule uses",
             *notes]
    g.graph_attr["label"] = label_lines(title, left=True)
    return TopologyDiagram(g.source, pe_detail, faults, tuple(notes))


def _draw_sips(g: Graph, layout: _Layout) -> None:
    system = layout.system
    for sip in layout.sips:
        x = layout.sip_x(sip) + (system.cols - 1) * layout.gap_x / 2
        y = -(system.rows - 1) * layout.gap_y / 2
        g.node(f"sip{sip}", label=f"SIP {sip}", shape="box", style="dashed,rounded",
               color="#c8c8c8", fontcolor="#808080", labelloc="t", fixedsize="true",
               width=system.cols * layout.gap_x + 0.2,
               height=system.rows * layout.gap_y + 0.35, pos=f"{x:.3f},{y + 0.12:.3f}!")


def _draw_cubes(g: Graph, layout: _Layout, schedule: Schedule, intra: bool) -> None:
    """Every cube of the SIPs drawn; launched ones blue, with their PEs when detailed."""
    system, spec = layout.system, schedule.launch
    active = {p.endpoint for p in schedule.active}
    for cube in (c for c in range(system.n_cubes) if layout.shown(c)):
        x, y = layout.cube_xy(cube)
        is_launched = cube in layout.launched
        attrs: Attrs = {
            "shape": "box", "style": "rounded,filled", "fixedsize": "true",
            "width": layout.cube_w if layout.detailed(cube) else min(layout.cube_w, 1.6),
            "height": layout.cube_h, "pos": f"{x:.3f},{y:.3f}!",
            "fillcolor": style.LAUNCH_FILL if is_launched else style.IDLE_FILL,
            "color": style.USED_LINK if is_launched else "#bdbdbd",
            "penwidth": 2 if is_launched else 1,
            "fontcolor": "#202020" if is_launched else "#909090",
            "tooltip": system.describe_cube(cube)}
        if layout.detailed(cube):
            attrs.update(label=f"cube {cube}", labelloc="t")
        else:
            ran = sum(1 for e in active if e.cube == cube)
            runs = [] if not ran else [f"{ran} PEs run"] if intra and ran > 1 else ["runs"]
            attrs["label"] = label_lines([f"cube {cube}", *runs])
        g.node(f"cube{cube}", **attrs)
        if not layout.detailed(cube):
            continue
        for pe in range(system.pes):
            ep = Endpoint(cube, pe)
            px, py = layout.ep_xy(ep)
            on = spec.is_launched(ep)
            g.node(layout.node_of(ep), label=f"p{pe}", shape="circle", fixedsize="true",
                   width=0.34, fontsize=8, style="filled", pos=f"{px:.3f},{py:.3f}!",
                   fillcolor=style.SEND_FILL if ep in active else "white",
                   color=style.USED_LINK if on else "#c0c0c0",
                   fontcolor="#202020" if on else "#a0a0a0")


def _bad_ports(schedule: Schedule, table: ChannelTable
               ) -> tuple[dict[Port, PortStatus], dict[Port, Endpoint | None]]:
    """Ports the kernel used that the wiring lacks or that leave the launch, and where
    each one points."""
    bad_ports: dict[Port, PortStatus] = {}
    peers: dict[Port, Endpoint | None] = {}
    for ref, use in table.port_use.items():
        if use.status is PortStatus.OK:
            continue
        op = schedule.programs[ref.rank].ops[ref.op]
        assert op.dir is not None
        port = (schedule.programs[ref.rank].endpoint, op.dir)
        bad_ports.setdefault(port, use.status)
        peers[port] = use.peer
    return bad_ports, peers


def _key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def _draw_links(g: Graph, layout: _Layout, schedule: Schedule, table: ChannelTable,
                bad_ports: dict[Port, PortStatus], peers: dict[Port, Endpoint | None]) -> None:
    """The wiring's links, once per pair; bold blue where the schedule uses them."""
    outside = {_key(layout.node_of(ep), layout.node_of(peer)) for (ep, d), peer in peers.items()
               if peer is not None and bad_ports[(ep, d)] is PortStatus.OUTSIDE}
    used = {_key(layout.node_of(ch.src), layout.node_of(ch.dst)) for ch in table.channels
            if ch.status is PortStatus.OK and ch.dst is not None and (ch.sends or ch.recvs)}
    drawn: set[tuple[str, str]] = set()
    for link in schedule.wiring.links:
        if not (layout.shown(link.src.cube) and layout.shown(link.dst.cube)):
            continue
        a, b = layout.node_of(link.src), layout.node_of(link.dst)
        key = _key(a, b)
        if a == b or key in drawn or key in outside:
            continue
        drawn.add(key)
        attrs: Attrs = ({"color": style.USED_LINK, "penwidth": 2.2} if key in used
                        else {"color": style.LINK, "penwidth": 1})
        if layout.detailed(link.src.cube) and link.src.cube == link.dst.cube and \
                abs(link.src.pe - link.dst.pe) > 1:
            # a wrap-around link (pe_ring) would cross the PEs in between: route it below
            # the row through two pinned waypoints
            (xa, ya), (xb, _) = layout.ep_xy(link.src), layout.ep_xy(link.dst)
            way = [f"via_{a}_{b}_{i}" for i in range(2)]
            for w, x in zip(way, (xa, xb), strict=True):
                g.node(w, shape="point", width=0.01, style="invis",
                       pos=f"{x:.3f},{ya - 0.3:.3f}!")
            g.edge(a, way[0], **attrs)
            g.edge(way[0], way[1], **attrs)
            g.edge(way[1], b, **attrs)
        else:
            g.edge(a, b, **attrs)


def _draw_bad_ports(g: Graph, layout: _Layout, schedule: Schedule,
                    bad_ports: dict[Port, PortStatus],
                    peers: dict[Port, Endpoint | None]) -> int:
    """A red dashed edge to the outside endpoint, or a red stub where the missing link's
    neighbour would be; returns how many were drawn."""
    faults = 0
    for (ep, d), status in sorted(bad_ports.items(), key=lambda kv: (kv[0][0], kv[0][1].value)):
        if not layout.shown(ep.cube):
            continue
        src = layout.node_of(ep)
        peer = peers[(ep, d)]
        if status is PortStatus.OUTSIDE and peer is not None and layout.shown(peer.cube):
            g.edge(src, layout.node_of(peer), color=style.FAULT, style="dashed", penwidth=2.2,
                   label="outside", fontcolor=style.FAULT,
                   tooltip=f"{ep.label} {d.value} -> {peer.label}: outside the launch")
            faults += 1
            continue
        x, y = layout.ep_xy(ep)
        dx, dy = _STEP[d]
        detailed = layout.detailed(ep.cube)
        reach = 0.45 if detailed and dx else 0.75
        sx = x + dx * (reach + (layout.cube_w / 2 if not detailed else 0))
        sy = y + dy * (0.75 if not detailed else 0.55)
        stub = f"missing_{ep.cube}_{ep.pe}_{d.value}"
        g.node(stub, label=f"no {d.value}", shape="plaintext", fontcolor=style.FAULT,
               fontsize=9, pos=f"{sx:.3f},{sy:.3f}!",
               tooltip=schedule.wiring.missing_link_reason(ep, d))
        g.edge(src, stub, color=style.FAULT, style="dashed", penwidth=2.2)
        faults += 1
    return faults
