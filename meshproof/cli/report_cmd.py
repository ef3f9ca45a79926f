"""`meshproof report`: regenerate the report directory (verdicts, sweep.json, figures)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from meshproof.cli.options import current_pipeline, trace_limit_options, trace_limits
from meshproof.exitcodes import ExitCode
from meshproof.panels import SCALES
from meshproof.report.api import write_report
from meshproof.report.sweep import SweepOptions


@click.command("report")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Report directory (default: reports/, or reports/headline at headline "
                   "scale).")
@click.option("--fast", is_flag=True,
              help="Redraw figures and README.md from the existing sweep.json; no runs.")
@click.option("--scale", type=click.Choice(SCALES), default="validation", show_default=True,
              help="Panel scale.")
@click.option("--html", "html", is_flag=True,
              help="Also write report.html: one offline page with the tables, inline "
                   "diagrams and figures.")
@trace_limit_options
def report_cmd(out_dir: Path | None, fast: bool, scale: str, html: bool, trace_timeout: float,
               trace_memory: int) -> int:
    """Verify and simulate every built-in kernel and panel; write README.md, sweep.json,
    figures and diagrams to the report directory."""
    out = out_dir if out_dir is not None else (
        Path("reports") if scale == "validation" else Path("reports") / "headline")
    err = Console(stderr=True)
    if fast:
        outcome = write_report(out, scale=scale, fast=True, html=html)
    else:
        options = SweepOptions(scale=scale, pipeline=current_pipeline(
            trace_limits(trace_timeout, trace_memory)))
        # redrawn per step, without rich's refresh thread, so that traces are forked
        # (see gate_cmd._progress)
        with Progress(TextColumn("[bold]report[/bold]"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.description}"), TimeElapsedColumn(), console=err,
                      transient=True, disable=not sys.stderr.isatty(),
                      auto_refresh=False) as bar:
            task = bar.add_task("starting", total=options.units())
            started = False

            def step(label: str) -> None:
                # a label announces the next unit: the previous one is done
                nonlocal started
                bar.update(task, advance=1 if started else 0, description=label, refresh=True)
                started = True

            outcome = write_report(out, scale=scale, options=options, progress=step,
                                   html=html)
            bar.advance(task)
    page = f", {out}/report.html" if html else ""
    click.echo(f"wrote {out}/README.md{page}, {out}/sweep.json, {out}/figures/, "
               f"{out}/diagrams/ ({outcome.runs} runs)")
    for note in outcome.notes:
        if "not drawn" in note or "renderer" in note:
            click.echo(f"note: {note}", err=True)
    if outcome.unexpected:
        click.echo(f"meshproof: {len(outcome.unexpected)} run(s) did not give the expected "
                   f"verdict: {', '.join(outcome.unexpected)}", err=True)
        return ExitCode.VIOLATED
    return ExitCode.OK
