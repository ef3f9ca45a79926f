"""Where every node of a schedule diagram sits: a grid of lanes (columns, row-major mesh
order) by rows (communication steps), pinned for graphviz's neato.

dot computes its own ranks and orders nodes inside a rank to reduce crossings, so lanes
drifted into each other and clusters of cubes came out as c0 c1 c4 c5; pinning every
node (`pos="x,y!"`) makes the picture the plan. Column widths and row heights are
estimated from the labels at the diagrams' font (DejaVu Sans, the widest of the stack),
so boxes never overlap and neato can route the edges around them.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshproof.report.dot import Digraph

CHAR_EM = 0.66
LINE_EM = 1.25
COL_GAP = 0.55          # inches between columns
ROW_GAP = 0.32          # inches between rows (room for an edge's short label)
AXIS_W = 0.75


def label_lines_of(label: str) -> list[str]:
    """The lines of a DOT label as `dot.label_lines` writes it (quoted, \\n or \\l)."""
    body = label[1:-1] if label.startswith('"') and label.endswith('"') else label
    for sep in ("\\l", "\\n"):
        body = body.replace(sep, "\n")
    return [line.replace('\\"', '"').replace("\\\\", "\\") for line in body.split("\n")
            if line] or [""]


@dataclass(frozen=True, slots=True)
class Size:
    width: float    # inches
    height: float


def estimate(label: str, fontsize: float, *, box: bool = True) -> Size:
    lines = label_lines_of(label)
    width = max(len(line) for line in lines) * fontsize * CHAR_EM / 72
    height = len(lines) * fontsize * LINE_EM / 72
    pad_w, pad_h = (0.22, 0.1) if box else (0.08, 0.04)
    return Size(width + pad_w, max(height + pad_h, 0.22))


@dataclass(slots=True)
class Grid:
    """Nodes to pin: per column (left to right) its nodes with their rows; extras sit to
    the right of the node they belong to (fault stubs)."""

    columns: list[list[tuple[str, int]]]
    sizes: dict[str, Size]
    extras: dict[str, list[str]]           # node id -> its stub ids, in drawing order
    axis: dict[int, str]                   # row -> axis node id
    below: list[str]                       # one row under the grid (the legend)

    def positions(self, rows: int) -> dict[str, tuple[float, float]]:
        heights = [0.3] * rows
        for column in self.columns:
            for node, row in column:
                heights[row] = max(heights[row], self.sizes[node].height)
                for stub in self.extras.get(node, ()):
                    heights[row] = max(heights[row], self.sizes[stub].height)
        ys, y = [], 0.0
        for h in heights:
            ys.append(-(y + h / 2))
            y += h + ROW_GAP
        pos: dict[str, tuple[float, float]] = {}
        for row, node in self.axis.items():
            pos[node] = (AXIS_W / 2, ys[row])
        x = AXIS_W + COL_GAP / 2
        for column in self.columns:
            core = max((self.sizes[n].width for n, _ in column), default=0.5)
            side = max((sum(self.sizes[s].width + 0.15 for s in self.extras.get(n, ()))
                        for n, _ in column), default=0.0)
            centre = x + core / 2
            for node, row in column:
                pos[node] = (centre, ys[row])
                sx = centre + self.sizes[node].width / 2 + 0.15
                for stub in self.extras.get(node, ()):
                    w = self.sizes[stub].width
                    pos[stub] = (sx + w / 2, ys[row])
                    sx += w + 0.15
            x += core + side + COL_GAP
        lx = AXIS_W / 2
        ly = -(y + 0.2)
        for node in self.below:
            w = self.sizes[node].width
            pos[node] = (lx + w / 2, ly)
            lx += w + 0.2
        return pos


def pin(graph: Digraph, positions: dict[str, tuple[float, float]]) -> None:
    """Add each node's pinned position (a later statement for the same node merges)."""
    for node in sorted(positions):
        x, y = positions[node]
        graph.node(node, pos=f"{x:.3f},{y:.3f}!")
