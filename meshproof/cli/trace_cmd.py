"""`meshproof list` and `meshproof trace`."""

from __future__ import annotations

from collections import Counter
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
from meshproof.deploy.deployment import Deployment, build_deployment
from meshproof.exitcodes import ExitCode
from meshproof.kernels import BUILTIN_KERNELS
from meshproof.model.launch_options import LaunchOptions
from meshproof.model.serialize import dumps, schedule_to_json
from meshproof.model.wiring import BUILTIN_WIRINGS
from meshproof.panels import PANELS

DEPLOYMENT_TRACE_SCHEMA = "meshproof/deployment-trace-v1"


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def list_cmd(as_json: bool) -> int:
    """List built-in kernels, wirings and panels."""
    if as_json:
        click.echo(dumps({
            "schema": "meshproof/list-v1",
            "kernels": [{"name": k.name, "description": k.description, "harness": k.harness,
                         "known_bad": k.known_bad, "wiring": k.wiring}
                        for k in BUILTIN_KERNELS.values()],
            "wirings": [{"name": n, "description": d} for n, d in BUILTIN_WIRINGS.items()],
            "panels": {scale: [p.to_json() for p in panels.values()]
                       for scale, panels in PANELS.items()},
        }), nl=False)
        return ExitCode.OK
    click.echo("kernels:")
    width = max(len(n) for n in BUILTIN_KERNELS)
    for k in BUILTIN_KERNELS.values():
        click.echo(f"  {k.name:<{width}}  {k.description}")
    click.echo("wirings:")
    for n, d in BUILTIN_WIRINGS.items():
        click.echo(f"  {n:<{width}}  {d}")
    click.echo("panels (--panel NAME, --scale validation|headline):")
    for p in PANELS["validation"].values():
        click.echo(f"  {p.name:<{width}}  {p.kernel} on {p.wiring}, S_q={p.S_q}, "
                   f"n={p.n_ranks}, rank_axis={p.rank_axis}")
    return ExitCode.OK


@click.command("trace")
@launch_options
@trace_limit_options
@click.option("--json", "as_json", is_flag=True, help="Print the schedule IR as JSON.")
def trace_cmd(as_json: bool, trace_timeout: float, trace_memory: int, launch: LaunchOptions,
              launches_file: Path | None) -> int:
    """Trace KERNEL symbolically and print each rank's schedule."""
    pipeline = current_pipeline(trace_limits(trace_timeout, trace_memory))
    listed = cli_launches(launch, launches_file, pipeline.resolver)
    deployment = build_deployment(listed.name, listed.launches, pipeline.tracer)
    if several(listed, launches_file):
        return _trace_launches(deployment, as_json)
    schedule = deployment.schedules[0]
    if as_json:
        click.echo(dumps(schedule_to_json(schedule)), nl=False)
        return ExitCode.OK
    click.echo(f"{schedule.launch.header()}; {len(schedule.active)} of "
               f"{len(schedule.programs)} ranks run ops")
    for prog in schedule.active:
        counts = Counter(op.kind.value for op in prog.ops)
        summary = ", ".join(f"{k} {counts[k]}" for k in sorted(counts))
        click.echo(f"{prog.endpoint.label} {prog.endpoint.describe()}: {len(prog.ops)} ops "
                   f"({summary})")
        for op in prog.comm_ops:
            assert op.dir is not None
            shape = "x".join(str(d) for d in op.shape) or "scalar"
            click.echo(f"  #{op.index:<4} {op.kind.value:<4} {op.dir.value} {shape} "
                       f"{op.dtype.value}  {op.source}")
    return ExitCode.OK


def _trace_launches(deployment: Deployment, as_json: bool) -> int:
    """Several launches (or a launches file): the system, then a line a launch."""
    if as_json:
        click.echo(dumps({"schema": DEPLOYMENT_TRACE_SCHEMA, "name": deployment.name,
                          "system": deployment.system.shape_text,
                          "launches": [schedule_to_json(s) for s in deployment.schedules]}),
                   nl=False)
        return ExitCode.OK
    click.echo(deployment.header())
    for i, s in enumerate(deployment.schedules):
        counts = Counter(op.kind.value for p in s.active for op in p.ops)
        ops = ", ".join(f"{k} {counts[k]}" for k in sorted(counts))
        click.echo(f"launch {i + 1}: {s.launch.header()}; {len(s.active)} of "
                   f"{len(s.programs)} ranks run ops ({ops})")
    return ExitCode.OK
