"""`meshproof export`: a launch's schedules in another tool's language (Promela, for SPIN)."""

from __future__ import annotations

from pathlib import Path

import click

from meshproof.cli.options import (
    cli_launches,
    current_pipeline,
    launch_options,
    several,
    trace_limit_options,
    trace_limits,
)
from meshproof.errors import OptionError
from meshproof.exitcodes import ExitCode
from meshproof.model.channels import derive_channels
from meshproof.model.launch_options import LaunchOptions
from meshproof.outputs import check_writable, write_text
from meshproof.verify.promela import promela_model


@click.command("export")
@launch_options
@trace_limit_options
@click.option("--promela", "promela_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Write the per-rank schedules as a Promela model with FIFO "
                                 "channels of the queue depth (0: rendezvous), for SPIN's "
                                 "deadlock search (small launches).")
def export_cmd(promela_path: Path | None, trace_timeout: float, trace_memory: int,
               launch: LaunchOptions, launches_file: Path | None) -> int:
    """Write KERNEL's schedules for another verifier (--promela FILE: SPIN)."""
    if promela_path is None:
        raise OptionError("export needs an output: --promela FILE")
    check_writable(promela_path, "--promela")
    pipeline = current_pipeline(trace_limits(trace_timeout, trace_memory))
    listed = cli_launches(launch, launches_file, pipeline.resolver)
    if several(listed, launches_file):
        raise OptionError("export --promela takes one launch, not several (--launches, a "
                          "multi-launch panel): pick one with --cube-start K")
    (kernel, one), = listed.launches
    schedule = pipeline.tracer(kernel, one)
    model = promela_model(schedule, derive_channels(schedule), one.spec.queue_depth)
    write_text(promela_path, model.text)
    click.echo(f"wrote {promela_path}: {model.processes} processes, {model.channels} "
               f"channels of depth {one.spec.queue_depth}, {model.comm_ops} comm ops")
    return ExitCode.OK
