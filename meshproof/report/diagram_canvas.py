"""The DOT graph a schedule diagram is drawn on, with what later drawing steps look up.

Lanes are drawn first; edges (messages, fault stubs, wait-for) then need to know which
node shows an op and which cube cluster a node sits in, and every step counts the red
elements it adds (`faults`), which the diagram reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from meshproof.model.channel_table import OpRef
from meshproof.report import style
from meshproof.report.diagram_place import Size, estimate
from meshproof.report.dot import Digraph

ENGINE = "neato"   # every node is pinned (diagram_place.py); neato routes the edges


def _schedule_graph() -> Digraph:
    graph = Digraph(name="schedule", graph_attr={
        "layout": ENGINE, "splines": "true", "overlap": "true", "fontname": style.FONT,
        "fontsize": 12, "labelloc": "t", "labeljust": "l", "outputorder": "nodesfirst",
        "pad": 0.2})
    graph.node_attr = {"fontname": style.FONT, "fontsize": 10, "shape": "box",
                           "style": "rounded,filled", "fillcolor": "white",
                           "height": 0.3, "margin": "0.08,0.03"}
    graph.edge_attr = {"fontname": style.FONT, "fontsize": 8, "arrowsize": 0.6}
    return graph


@dataclass(frozen=True, slots=True)
class ScheduleDiagram:
    source: str                 # DOT text
    lanes_shown: int
    lanes_elided: int
    nodes_elided: int
    messages_elided: int
    faults_drawn: int           # red nodes + red edges
    notes: tuple[str, ...]
    aggregated: bool = False    # one node per rank per step (large launches)
    engine: str = ENGINE


@dataclass(slots=True)
class DiagramCanvas:
    graph: Digraph = field(default_factory=_schedule_graph)
    node_of: dict[OpRef, str] = field(default_factory=dict)   # op -> the node showing it
    home: dict[str, Digraph] = field(default_factory=dict)    # node id -> its cube cluster
    lanes_drawn: set[int] = field(default_factory=set)        # ranks with a lane
    faults: int = 0                 # red nodes and edges drawn so far
    stubs: int = 0                  # fault stubs drawn so far (numbers their ids)
    messages_elided: int = 0        # messages whose both ends are not drawn
    drawn: set[str] = field(default_factory=set)             # legend keys in use
    sizes: dict[str, Size] = field(default_factory=dict)     # node id -> estimated size
    stubs_of: dict[str, list[str]] = field(default_factory=dict)  # node -> its fault stubs
    usual_burst: int = 1            # aggregated view: messages on an unlabelled edge

    def node(self, node_id: str, graph: Digraph | None = None, /,
             **attrs: str | int | float) -> None:
        """Add a node and remember how big its label makes it (for the grid)."""
        label = str(attrs.get("label", node_id))
        fontsize = float(attrs.get("fontsize", 10))
        box = attrs.get("shape", "box") not in ("plaintext", "plain", "none")
        self.sizes[node_id] = estimate(label, fontsize, box=box)
        (graph or self.graph).node(node_id, **attrs)

    def stub(self, node_id: str, text: str, tooltip: str, *, outgoing: bool) -> None:
        """A red octagon next to `node_id` with a dashed red edge: where a message or a
        link should be and is not."""
        self.stubs += 1
        stub = f"{node_id}_stub{self.stubs}"
        # drawn inside the op's cube cluster, so it sits next to its lane
        self.node(stub, self.home.get(node_id, self.graph), label=text, shape="octagon",
                  style="filled", color=style.FAULT, fillcolor=style.FAULT_FILL,
                  fontcolor=style.FAULT, fontsize=9, height=0.25, tooltip=tooltip)
        self.stubs_of.setdefault(node_id, []).append(stub)
        tail, head = (node_id, stub) if outgoing else (stub, node_id)
        self.graph.edge(tail, head, color=style.FAULT, style="dashed", penwidth=1.5)
        self.faults += 1
        self.drawn.add("fault")
