"""Paint a graphviz layout (its `json` output, xdot drawing ops) to PNG with matplotlib.

The pip-only renderer (graphviz compiled to WebAssembly) lays graphs out and writes SVG,
but has no PNG device. Its `json` output carries every drawing op with coordinates in
points, so PNG is a faithful replay of them on an Agg canvas.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, BinaryIO

import matplotlib.style
from matplotlib import rc_context
from matplotlib.figure import Figure
from matplotlib.patches import Ellipse, PathPatch, Polygon
from matplotlib.path import Path as MplPath

MAX_PIXELS = 14000  # longest side; big graphs get a lower dpi instead of a huge file
_ALIGN = {"l": "left", "c": "center", "r": "right"}


def _colour(text: str) -> tuple[float, float, float, float] | str:
    if text.startswith("#") and len(text) in (7, 9):
        rgb = [int(text[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        alpha = int(text[7:9], 16) / 255 if len(text) == 9 else 1.0
        return (rgb[0], rgb[1], rgb[2], alpha)
    return text


class _Pen:
    def __init__(self) -> None:
        self.stroke: Any = "black"
        self.fill: Any = "none"
        self.style = "-"
        self.width = 1.0
        self.font_size = 14.0
        self.bold = False


def _apply(ax: Any, ops: list[dict[str, Any]], z: float, pen: _Pen) -> None:
    for op in ops:
        kind = op.get("op")
        if kind == "c":
            pen.stroke = _colour(op["color"])
        elif kind == "C":
            pen.fill = _colour(op["color"])
        elif kind == "S":
            s = str(op.get("style", ""))
            if s.startswith("setlinewidth("):
                pen.width = float(s[len("setlinewidth("):-1])
            elif s in ("dashed", "dotted", "solid"):
                pen.style = {"dashed": "--", "dotted": ":", "solid": "-"}[s]
            elif s == "bold":
                pen.width = 2.0
        elif kind == "F":
            pen.font_size = float(op.get("size", 14.0))
        elif kind == "t":
            pen.bold = bool(int(op.get("fontchar", 0)) & 1)
        elif kind in ("e", "E"):
            cx, cy, rx, ry = op["rect"]
            ax.add_patch(Ellipse((cx, cy), 2 * rx, 2 * ry, zorder=z, linewidth=pen.width,
                                 linestyle=pen.style, edgecolor=pen.stroke,
                                 facecolor=pen.fill if kind == "E" else "none"))
        elif kind in ("p", "P"):
            ax.add_patch(Polygon(op["points"], closed=True, zorder=z, linewidth=pen.width,
                                 linestyle=pen.style, edgecolor=pen.stroke,
                                 facecolor=pen.fill if kind == "P" else "none"))
        elif kind == "L":
            xs, ys = zip(*op["points"], strict=True)
            ax.plot(xs, ys, color=pen.stroke, linewidth=pen.width, linestyle=pen.style,
                    zorder=z)
        elif kind in ("b", "B"):
            pts = op["points"]
            codes = [MplPath.MOVETO] + [MplPath.CURVE4] * (len(pts) - 1)
            ax.add_patch(PathPatch(MplPath(pts, codes), zorder=z, linewidth=pen.width,
                                   linestyle=pen.style, edgecolor=pen.stroke,
                                   facecolor=pen.fill if kind == "B" else "none"))
        elif kind == "T":
            x, y = op["pt"]
            # matplotlib's sans is wider than graphviz's font metrics: shrink a little
            ax.text(x, y, op["text"], ha=_ALIGN.get(op.get("align", "c"), "center"),
                    va="baseline", fontsize=pen.font_size * 0.86, color=pen.stroke,
                    fontweight="bold" if pen.bold else "normal", zorder=z + 0.5)


def _draw(ax: Any, obj: dict[str, Any], z: float) -> None:
    pen = _Pen()
    for key in ("_draw_", "_ldraw_", "_hdraw_", "_tdraw_", "_hldraw_", "_tldraw_"):
        if key in obj:
            _apply(ax, obj[key], z, pen)


def paint_png(layout: dict[str, Any], path: Path | BinaryIO, dpi: float = 110.0) -> None:
    """Replay `layout` (graphviz `-Tjson`) into a PNG at `path` (a file, or a binary
    stream)."""
    x0, y0, x1, y1 = (float(v) for v in str(layout.get("bb", "0,0,10,10")).split(","))
    width_in, height_in = max(x1 - x0, 1.0) / 72.0, max(y1 - y0, 1.0) / 72.0
    dpi = min(dpi, MAX_PIXELS / max(width_in, height_in))
    # matplotlib's defaults (not the user's matplotlibrc) and a pyplot-free Figure: the
    # same bytes on every run, and the process's backend is left alone
    with matplotlib.style.context("default"), \
            rc_context({"font.family": "DejaVu Sans", "svg.hashsalt": "meshproof"}):
        fig = Figure(figsize=(width_in, height_in), dpi=dpi)
        ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
        ax.set_xlim(x0, x1)
        ax.set_ylim(y0, y1)
        ax.set_axis_off()
        _draw(ax, layout, 0.0)
        objects = layout.get("objects", [])
        for obj in objects:          # clusters first: they sit under everything else
            if "nodes" in obj or "edges" in obj:
                _draw(ax, obj, 1.0)
        # graphviz draws edges after nodes unless outputorder=edgesfirst
        edge_z = 2.0 if layout.get("outputorder") == "edgesfirst" else 3.5
        for edge in layout.get("edges", []):
            _draw(ax, edge, edge_z)
        for obj in objects:
            if "nodes" not in obj and "edges" not in obj:
                _draw(ax, obj, 3.0)
        fig.savefig(path, format="png", dpi=dpi, metadata={"Software": None})
