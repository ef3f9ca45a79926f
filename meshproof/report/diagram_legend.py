"""What a schedule diagram says about itself: the time axis (a step label on each step's
row), the drawn legend (only what the diagram holds), and the title (kernel, launch,
verdict, what was left out)."""

from __future__ import annotations

import textwrap

from meshproof.model.schedule import Schedule
from meshproof.report import style
from meshproof.report.diagram_canvas import DiagramCanvas
from meshproof.report.dot import Attrs
from meshproof.report.faults import FaultMarks
from meshproof.report.messages import MessageTable
from meshproof.report.text import launch_line
from meshproof.verify.result import Status, Verdict

AXIS = "axis"

# legend key -> (label, node attributes); drawn in this order, only the keys in use
_LEGEND: tuple[tuple[str, str, Attrs], ...] = (
    ("send", "send  #ops", {"fillcolor": style.SEND_FILL}),
    ("recv", "recv  #ops", {"fillcolor": style.RECV_FILL}),
    ("store", "store", {"fillcolor": style.STORE_FILL}),
    ("aggregate", "a rank in a step: N out, M in  #ops", {"fillcolor": style.SEND_FILL}),
    ("compute", "k compute ops", {"shape": "plaintext", "style": "",
                                  "fontcolor": style.COMPUTE_TEXT}),
    ("op", "one op  #index", {"fillcolor": "white"}),
    ("elided", "... k ops not shown ...", {"shape": "plaintext", "style": "",
                                           "fontcolor": style.COMPUTE_TEXT}),
    ("message", "\u2192 message (sN = step N)", {"shape": "plaintext", "style": "",
                                                "fontcolor": style.MESSAGE}),
    ("undelivered", "\u21e2 never delivered", {"shape": "plaintext", "style": "",
                                               "fontcolor": style.UNDELIVERED}),
    ("note", "context of a fault", {"fillcolor": style.NOTE_FILL, "color": style.NOTE}),
    ("fault", "fault (the verdict's counterexample)",
     {"fillcolor": style.FAULT_FILL, "color": style.FAULT, "fontcolor": style.FAULT,
      "penwidth": 2}),
    ("wait_for", "\u21e2 waits for (bold: the cycle)", {"shape": "plaintext", "style": "",
                                                        "fontcolor": style.FAULT}),
)


def draw_time_axis(canvas: DiagramCanvas, labels: dict[int, str], rows: int) -> dict[int, str]:
    """A column left of the lanes: the label of each row that has one (`step N`)."""
    axis: dict[int, str] = {}
    for row in range(rows):
        node = f"{AXIS}{row}"
        canvas.node(node, label=labels.get(row, ""), shape="plaintext", style="",
                    fontcolor=style.COMPUTE_TEXT, fontsize=9)
        axis[row] = node
    return axis


def draw_legend(canvas: DiagramCanvas) -> list[str]:
    """Samples of every kind of thing the diagram draws (and only those), for the row
    under the grid; returns their node ids."""
    used = [(key, label, attrs) for key, label, attrs in _LEGEND if key in canvas.drawn]
    if not used:
        return []
    canvas.node("legend_title", label="legend:", shape="plaintext", style="", fontsize=9,
                fontcolor=style.COMPUTE_TEXT)
    ids = ["legend_title"]
    for key, label, attrs in used:
        node = f"legend_{key}"
        canvas.node(node, label=label, fontsize=9, height=0.25, tooltip="legend: " + label,
                    **attrs)
        ids.append(node)
    return ids


def title_lines(schedule: Schedule, verdict: Verdict, msgs: MessageTable, marks: FaultMarks,
                notes: list[str], how: str) -> list[str]:
    spec = schedule.launch
    lines = [f"{spec.kernel}: {launch_line(spec)}"]
    if verdict.ok:
        lines.append(f"verdict: all {len(verdict.properties)} properties proved"
                     f" at queue depth {verdict.depth}")
    else:
        bad = [f"{p.name.value} {p.status.value}" for p in verdict.properties
               if p.status is not Status.PROVED]
        lines.append("verdict: " + ", ".join(bad))
    if verdict.skipped:
        lines[-1] += "; not checked: " + ", ".join(p.value for p in verdict.skipped)
    for h in marks.headlines[:4]:
        lines.append("  " + textwrap.shorten(h, 150, placeholder=" ..."))
    n_msgs = sum(1 for m in msgs.messages if m.send is not None)
    lines.append(f"{n_msgs} messages, {msgs.comm_steps} communication steps "
                 f"(hop depth) at queue depth {msgs.progress.depth}")
    lines += notes
    lines.append(how)
    return lines
