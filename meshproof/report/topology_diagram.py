"""The topology diagram: the system's cubes on their grid, the wiring's links, the launch.

Cubes sit at their physical (SIP, row, col) place (neato with pinned positions). When the
wiring links PEs inside a cube (pe_line, pe_ring), launched cubes show their PEs; otherwise
a cube stands for its PE 0. Launched cubes are filled blue, links the schedule uses are
bold blue, and ports the kernel used that the wiring lacks are dashed red stubs towards
where the neighbour would be; links to endpoints outside the launch are dashed red too.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshproof.model.channels import PortStatus, derive_channels
from meshproof.model.schedule import Schedule
from meshproof.model.topology import Direction, Endpoint
from meshproof.report import style
from meshproof.report.dot import Graph, label_lines
from meshproof.report.text import int_ranges, launch_line

MAX_PE_DETAIL_CUBES = 16    # above this many launched cubes, draw cubes only
MAX_SIPS = 8                # SIPs drawn; the rest are summarised in the title

_STEP = {Direction.E: (1, 0), Direction.W: (-1, 0), Direction.N: (0, 1), Direction.S: (0, -1)}


@dataclass(frozen=True, slots=True)
class TopologyDiagram:
    source: str
    pe_detail: bool
    faults_drawn: int
    notes: tuple[str, ...]


def topology_diagram(schedule: Schedule) -> TopologyDiagram:
    spec = schedule.launch
    system = spec.system
    wiring = schedule.wiring
    table = derive_channels(schedule)
    launched = set(spec.cubes)
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
    shown_cubes = [c for c in range(system.n_cubes) if system.coord(c).sip in sips]

    cube_w = 0.5 * system.pes + 0.5 if pe_detail else 1.1
    cube_h = 1.0 if pe_detail else 0.65
    gap_x, gap_y = cube_w + 0.55, cube_h + 0.55
    sip_gap = 0.9

    def cube_xy(cube: int) -> tuple[float, float]:
        c = system.coord(cube)
        return (sips.index(c.sip) * (system.cols * gap_x + sip_gap) + c.col * gap_x,
                -c.row * gap_y)

    def detailed(cube: int) -> bool:
        return pe_detail and cube in launched

    def node_of(ep: Endpoint) -> str:
        return f"pe{ep.cube}_{ep.pe}" if detailed(ep.cube) else f"cube{ep.cube}"

    def ep_xy(ep: Endpoint) -> tuple[float, float]:
        x, y = cube_xy(ep.cube)
        if not detailed(ep.cube):
            return x, y
        return x - cube_w / 2 + 0.5 * ep.pe + 0.5, y - 0.12

    g = Graph("topology", {"layout": "neato", "splines": "true", "overlap": "true",
                           "fontname": style.FONT, "fontsize": 12, "labelloc": "t",
                           "labeljust": "l", "outputorder": "nodesfirst",
                           "pad": 0.3}, directed=False)
    g.node_defaults = {"fontname": style.FONT, "fontsize": 10}
    g.edge_defaults = {"fontname": style.FONT, "fontsize": 8}
    active = {p.endpoint for p in schedule.active}
    for sip in sips:
        x = sips.index(sip) * (system.cols * gap_x + sip_gap) + (system.cols - 1) * gap_x / 2
        y = -(system.rows - 1) * gap_y / 2
        g.node(f"sip{sip}", label=f"SIP {sip}", shape="box", style="dashed,rounded",
               color="#c8c8c8", fontcolor="#808080", labelloc="t", fixedsize="true",
               width=system.cols * gap_x + 0.2, height=system.rows * gap_y + 0.35,
               pos=f"{x:.3f},{y + 0.12:.3f}!")
    for cube in shown_cubes:
        x, y = cube_xy(cube)
        is_launched = cube in launched
        attrs: dict[str, str | int | float] = {
            "shape": "box", "style": "rounded,filled", "fixedsize": "true",
            "width": cube_w if detailed(cube) else min(cube_w, 1.6), "height": cube_h,
            "pos": f"{x:.3f},{y:.3f}!",
            "fillcolor": style.LAUNCH_FILL if is_launched else style.IDLE_FILL,
            "color": style.USED_LINK if is_launched else "#bdbdbd",
            "penwidth": 2 if is_launched else 1,
            "fontcolor": "#202020" if is_launched else "#909090",
            "tooltip": system.describe_cube(cube)}
        if detailed(cube):
            attrs.update(label=f"cube {cube}", labelloc="t")
        else:
            ran = sum(1 for e in active if e.cube == cube)
            runs = [] if not ran else [f"{ran} PEs run"] if intra and ran > 1 else ["runs"]
            attrs["label"] = label_lines([f"cube {cube}", *runs])
        g.node(f"cube{cube}", **attrs)
        if detailed(cube):
            for pe in range(system.pes):
                ep = Endpoint(cube, pe)
                px, py = ep_xy(ep)
                on = spec.is_launched(ep)
                g.node(node_of(ep), label=f"p{pe}", shape="circle", fixedsize="true",
                       width=0.34, fontsize=8, style="filled", pos=f"{px:.3f},{py:.3f}!",
                       fillcolor=style.SEND_FILL if ep in active else "white",
                       color=style.USED_LINK if on else "#c0c0c0",
                       fontcolor="#202020" if on else "#a0a0a0")

    faults = 0
    bad_ports: dict[tuple[Endpoint, Direction], PortStatus] = {}
    peers: dict[tuple[Endpoint, Direction], Endpoint | None] = {}
    rank_of = {r: p.endpoint for r, p in enumerate(schedule.programs)}
    for ref, use in table.port_use.items():
        if use.status is PortStatus.OK:
            continue
        op = schedule.programs[ref.rank].ops[ref.op]
        assert op.dir is not None
        key2 = (rank_of[ref.rank], op.dir)
        bad_ports.setdefault(key2, use.status)
        peers[key2] = use.peer
    outside_links = {_key(node_of(ep), node_of(peer)) for (ep, d), peer in peers.items()
                     if peer is not None and bad_ports[(ep, d)] is PortStatus.OUTSIDE}
    used: set[tuple[str, str]] = set()
    for ch in table.channels:
        if ch.status is PortStatus.OK and ch.dst is not None and (ch.sends or ch.recvs):
            used.add(_key(node_of(ch.src), node_of(ch.dst)))
    drawn: set[tuple[str, str]] = set()
    for link in wiring.links:
        if system.coord(link.src.cube).sip not in sips or \
                system.coord(link.dst.cube).sip not in sips:
            continue
        a, b = node_of(link.src), node_of(link.dst)
        key = _key(a, b)
        if a == b or key in drawn or key in outside_links:
            continue
        drawn.add(key)
        link_attrs: dict[str, str | int | float] = (
            {"color": style.USED_LINK, "penwidth": 2.2} if key in used
            else {"color": style.LINK, "penwidth": 1})
        if detailed(link.src.cube) and link.src.cube == link.dst.cube and \
                abs(link.src.pe - link.dst.pe) > 1:
            # a wrap-around link (pe_ring) would cross the PEs in between: route it
            # below the row through two pinned waypoints
            (xa, ya), (xb, _) = ep_xy(link.src), ep_xy(link.dst)
            way = [f"via_{a}_{b}_{i}" for i in range(2)]
            for w, x in zip(way, (xa, xb), strict=True):
                g.node(w, shape="point", width=0.01, style="invis",
                       pos=f"{x:.3f},{ya - 0.3:.3f}!")
            g.edge(a, way[0], **link_attrs)
            g.edge(way[0], way[1], **link_attrs)
            g.edge(way[1], b, **link_attrs)
        else:
            g.edge(a, b, **link_attrs)

    for (ep, d), status in sorted(bad_ports.items(), key=lambda kv: (kv[0][0], kv[0][1].value)):
        if system.coord(ep.cube).sip not in sips:
            continue
        src = node_of(ep)
        peer = peers[(ep, d)]
        if status is PortStatus.OUTSIDE and peer is not None and \
                system.coord(peer.cube).sip in sips:
            g.edge(src, node_of(peer), color=style.FAULT, style="dashed", penwidth=2.2,
                   label="outside", fontcolor=style.FAULT,
                   tooltip=f"{ep.label} {d.value} -> {peer.label}: outside the launch")
            faults += 1
            continue
        x, y = ep_xy(ep)
        dx, dy = _STEP[d]
        reach = 0.45 if detailed(ep.cube) and dx else 0.75
        sx = x + dx * (reach + (cube_w / 2 if not detailed(ep.cube) else 0))
        sy = y + dy * (0.75 if not detailed(ep.cube) else 0.55)
        stub = f"missing_{ep.cube}_{ep.pe}_{d.value}"
        g.node(stub, label=f"no {d.value}", shape="plaintext", fontcolor=style.FAULT,
               fontsize=9, pos=f"{sx:.3f},{sy:.3f}!",
               tooltip=wiring.missing_link_reason(ep, d))
        g.edge(src, stub, color=style.FAULT, style="dashed", penwidth=2.2)
        faults += 1
    if bad_ports:
        notes.append("red dashed: ports the kernel used that the wiring lacks (or that "
                     "leave the launch)")
    title = [f"{spec.kernel}: {launch_line(spec)}",
             f"wiring {wiring.name}: {len(wiring.links) // 2} links; launched cubes "
             f"{int_ranges(launched)} in blue; bold blue = links the schedule uses",
             *notes]
    g.attrs["label"] = label_lines(title, left=True)
    return TopologyDiagram(g.source(), pe_detail, faults, tuple(notes))


def _key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)
