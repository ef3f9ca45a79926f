"""The DOT graph a schedule diagram is drawn on, with what later drawing steps look up.

Lanes are drawn first; edges (messages, fault stubs, wait-for) then need to know which
node shows an op and which cube cluster a node sits in, and every step counts the red
elements it adds (`faults`), which the diagram reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from meshproof.model.channels import OpRef
from meshproof.report import style
from meshproof.report.dot import Digraph


def _schedule_graph() -> Digraph:
    graph = Digraph(name="schedule", graph_attr={
        "rankdir": "TB", "newrank": "true", "nodesep": 0.3, "ranksep": 0.28,
        "fontname": style.FONT, "fontsize": 12, "labelloc": "t", "labeljust": "l",
        "compound": "true", "outputorder": "edgesfirst"})
    graph.node_attr = {"fontname": style.FONT, "fontsize": 10, "shape": "box",
                           "style": "rounded,filled", "fillcolor": "white",
                           "height": 0.3, "margin": "0.08,0.03"}
    graph.edge_attr = {"fontname": style.FONT, "fontsize": 8, "arrowsize": 0.6}
    return graph


@dataclass(slots=True)
class DiagramCanvas:
    graph: Digraph = field(default_factory=_schedule_graph)
    node_of: dict[OpRef, str] = field(default_factory=dict)   # op -> the node showing it
    home: dict[str, Digraph] = field(default_factory=dict)    # node id -> its cube cluster
    lanes_drawn: set[int] = field(default_factory=set)        # ranks with a lane
    faults: int = 0                 # red nodes and edges drawn so far
    stubs: int = 0                  # fault stubs drawn so far (numbers their ids)
    messages_elided: int = 0        # messages whose both ends are not drawn

    def stub(self, node_id: str, text: str, tooltip: str, *, outgoing: bool) -> None:
        """A red octagon next to `node_id` with a dashed red edge: where a message or a
        link should be and is not."""
        self.stubs += 1
        stub = f"{node_id}_stub{self.stubs}"
        # drawn inside the op's cube cluster, so it sits next to its lane
        self.home.get(node_id, self.graph).node(
            stub, label=text, shape="octagon", style="filled", color=style.FAULT,
            fillcolor=style.FAULT_FILL, fontcolor=style.FAULT, fontsize=9, height=0.25,
            tooltip=tooltip)
        tail, head = (node_id, stub) if outgoing else (stub, node_id)
        self.graph.edge(tail, head, color=style.FAULT, style="dashed", penwidth=1.5)
        self.faults += 1
