"""`--diagram PATH` and `--keep-dot` of verify and simulate.

The report stack (graphviz, the diagram builders) is imported only when a diagram is
asked for: it is most of a cold start's imports.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from meshproof.errors import OptionError
from meshproof.model.schedule import Schedule
from meshproof.verify.result import Verdict

F = TypeVar("F", bound=Callable[..., Any])


def diagram_options(func: F) -> F:
    func = click.option("--keep-dot", is_flag=True,
                        help="With --diagram x.svg or x.png, also keep its graphviz source "
                             "x.dot.")(func)
    return click.option("--diagram", "diagram", type=click.Path(dir_okay=False, path_type=Path),
                        default=None,
                        help="Write the schedule diagram (.svg, .png or .dot).")(func)


def check_diagram(path: Path | None, keep_dot: bool = False) -> None:
    """Fail on a diagram path that cannot work before any tracing or solving, and on
    --keep-dot without a diagram to keep the source of."""
    if keep_dot and path is None:
        raise OptionError("--keep-dot keeps the graphviz source of --diagram; add --diagram "
                          "PATH.svg (or drop --keep-dot)")
    if path is not None:
        from meshproof.report.diagrams import check_diagram_target

        check_diagram_target(path)


def draw_diagram(schedule: Schedule, verdict: Verdict, path: Path, keep_dot: bool) -> str:
    """Draw the schedule with the faults `verdict` found to `path` (only that file, unless
    `keep_dot`, or no renderer could draw it); return the one-line note."""
    from meshproof.report.diagrams import write_schedule_diagram

    return write_schedule_diagram(schedule, verdict, path, keep_dot=keep_dot).note
