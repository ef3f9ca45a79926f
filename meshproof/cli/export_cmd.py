"""`meshproof export`: a launch's schedules in another tool's language (Promela, for SPIN)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from meshproof.cli.options import (
    current_pipeline,
    launch_options,
    resolve_launch,
    resolve_launches,
    trace_limit_options,
    trace_limits,
)
from meshproof.errors import OptionError
from meshproof.exitcodes import ExitCode
from meshproof.model.channels import derive_channels
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
               **opts: Any) -> int:
    """Write KERNEL's schedules for another verifier (--promela FILE: SPIN)."""
    if promela_path is None:
        raise OptionError("export needs an output: --promela FILE")
    check_writable(promela_path, "--promela")
    pipeline = current_pipeline(trace_limits(trace_timeout, trace_memory))
    if resolve_launches(opts, pipeline.resolver) is not None:
        raise OptionError("export --promela takes one launch, not several (--launches, a "
                          "multi-launch panel): pick one with --cube-start K")
    kernel, launch = resolve_launch(**opts, resolver=pipeline.resolver)
    schedule = pipeline.tracer(kernel, launch)
    model = promela_model(schedule, derive_channels(schedule), launch.spec.queue_depth)
    write_text(promela_path, model.text)
    click.echo(f"wrote {promela_path}: {model.processes} processes, {model.channels} "
               f"channels of depth {launch.spec.queue_depth}, {model.comm_ops} comm ops")
    return ExitCode.OK
