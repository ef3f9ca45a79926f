"""Diagram entry points for `verify --diagram` and `simulate --diagram`.

- `check_diagram_target(path)`: fail fast, before any tracing or solving, on a path that
  cannot work (the output rule of `meshproof.outputs`, and .svg/.png/.dot only).
- `write_schedule_diagram(schedule, verdict, path)`: the space-time diagram, faults as
  the verdict states them (.svg, .png or .dot by the extension).
- `write_topology_diagram(schedule, path)`: cubes, links, launch, missing links.

No matplotlib here: a PNG without the `dot` binary imports it when it is drawn.
"""

from __future__ import annotations

from pathlib import Path

from meshproof.model.schedule import Schedule
from meshproof.outputs import check_writable
from meshproof.report.render import FORMATS, RenderOutcome, check_diagram_path, render_dot
from meshproof.report.schedule_diagram import DiagramOptions, schedule_diagram
from meshproof.report.topology_diagram import topology_diagram
from meshproof.verify.result import Verdict

DIAGRAM_FLAG = "--diagram"


def check_diagram_target(path: Path) -> None:
    check_writable(path, DIAGRAM_FLAG, suffixes=FORMATS)


def write_schedule_diagram(schedule: Schedule, verdict: Verdict, path: Path,
                           options: DiagramOptions | None = None,
                           renderer: str = "auto", keep_dot: bool = True) -> RenderOutcome:
    """Draw `schedule` with the faults `verdict` found to `path` (and its .dot source with
    `keep_dot`, or when no renderer could draw it)."""
    check_diagram_path(path)
    diagram = schedule_diagram(schedule, verdict, options or DiagramOptions())
    return render_dot(diagram.source, path, engine=diagram.engine, renderer=renderer,
                      keep_dot=keep_dot)


def write_topology_diagram(schedule: Schedule, path: Path,
                           renderer: str = "auto") -> RenderOutcome:
    check_diagram_path(path)
    return render_dot(topology_diagram(schedule).source, path, engine="neato",
                      renderer=renderer)
