"""`meshproof placements`: verify a launch at every cube_start where it fits."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from meshproof.cli.options import (
    current_pipeline,
    launch_options,
    trace_limit_options,
    trace_limits,
)
from meshproof.cli.verdict_print import console
from meshproof.deploy.launches import expand
from meshproof.deploy.placements import PlacementSearch, search_placements
from meshproof.errors import LaunchError
from meshproof.exitcodes import ExitCode
from meshproof.model.launch_options import LaunchOptions
from meshproof.model.serialize import dumps
from meshproof.verify.properties import VerifyConfig


@click.command("placements")
@launch_options
@trace_limit_options
@click.option("--timeout", "timeout_s", type=float, default=60.0, show_default=True,
              help="Seconds per solver call; a timeout makes the property unknown.")
@click.option("--retrace", is_flag=True,
              help="Trace and verify every placement from scratch (no shared trace, no "
                   "proofs carried between placements).")
@click.option("--json", "as_json", is_flag=True, help="Print one placements-v1 JSON object.")
def placements_cmd(timeout_s: float, retrace: bool, as_json: bool, trace_timeout: float,
                   trace_memory: int, launch: LaunchOptions, launches_file: Path | None
                   ) -> int:
    """Verify KERNEL at every cube_start where its launch (--mesh RxC or --cubes N) fits
    in the system: the properties a placement can change at each (legal: all proved),
    the others once, in the header; print which placements are legal and, for the others,
    the first violation with its line. Exit 0 when some placement is legal, 1 when none
    is or a placement-independent property is violated, 3 when a placement is
    undecided."""
    if launches_file is not None:
        raise LaunchError("placements moves one launch; --launches lists launches that are "
                          "already placed (verify them with `meshproof verify --launches`)")
    if launch.cube_start is not None:
        raise LaunchError("placements tries every cube_start; drop --cube-start")
    if launch.empty_shards:
        raise LaunchError("--empty-shard names physical ranks, and placements moves the "
                          "launch; drop it (or verify one placement with `meshproof verify`)")
    pipeline = current_pipeline(trace_limits(trace_timeout, trace_memory))
    launch_opts = expand(launch)[0]   # a panel of several launches: its first one
    assert launch_opts.kernel is not None   # expand names it
    kernel = pipeline.resolver(launch_opts.kernel)
    search = search_placements(kernel, launch_opts, pipeline.tracer, pipeline.verifier,
                               VerifyConfig(queue_depth=launch_opts.queue_depth,
                                            timeout_s=timeout_s), retrace=retrace)
    if as_json:
        click.echo(dumps(search.to_json()), nl=False)
    else:
        print_search(search)
    if search.independent_violated:
        return ExitCode.VIOLATED
    if search.undecided:
        return ExitCode.UNKNOWN
    return ExitCode.OK if search.legal else ExitCode.VIOLATED


def print_search(search: PlacementSearch) -> None:
    out = console()
    first = search.rows[0]
    spec = first.verdict.launch
    out.print(f"{search.kernel} on {spec.wiring} ({spec.system.shape_text}), "
              f"{spec.n_cubes} cube(s) x {spec.pes} PEs per launch, queue depth "
              f"{first.verdict.depth}; groups: {spec.groups.value}: {len(search.rows)} "
              f"placement(s), cube_start 0..{search.rows[-1].cube_start}", markup=False)
    out.print(search.traced_how, markup=False)
    out.print(f"placement-independent: {search.independent_text()}", markup=False)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("cube_start", justify="right")
    table.add_column("cubes")
    table.add_column("legal")
    table.add_column("first violation", overflow="fold")
    for row in search.rows:
        legal = "[green]yes[/]" if row.ok else \
            "[bold red]no[/]" if row.violated else "[yellow]unknown[/]"
        table.add_row(str(row.cube_start), row.cubes_text(), legal,
                      "" if row.ok else row.message)
    out.print(table)
    starts = search.legal
    out.print(f"legal at cube_start {', '.join(map(str, starts)) if starts else 'none'} "
              f"({len(starts)} of {len(search.rows)})", markup=False)
