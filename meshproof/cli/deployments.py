"""trace, verify and simulate of several launches at once (`--launches FILE`, or a panel
that is several launches): one table over the launches, the cross-launch check, then the
counterexamples of the launches that fail."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.table import Table

from meshproof.cli.verdict_print import print_verdict
from meshproof.deploy.deployment import Deployment, build_deployment
from meshproof.deploy.launches import LaunchList
from meshproof.deploy.verify import DeploymentVerdict
from meshproof.errors import LaunchError
from meshproof.exitcodes import ExitCode
from meshproof.gate.pipeline import Pipeline, run_case
from meshproof.model.serialize import dumps, schedule_to_json
from meshproof.sim.config import SimConfig
from meshproof.verify.properties import Property, VerifyConfig
from meshproof.verify.result import Status

if TYPE_CHECKING:
    from meshproof.deploy.simulate import DeploymentSimulation

DEPLOYMENT_TRACE_SCHEMA = "meshproof/deployment-trace-v1"
_GLYPH = {Status.PROVED: "[green]✓[/]", Status.VIOLATED: "[bold red]✗[/]",
          Status.UNKNOWN: "[yellow]?[/]"}
_SHORT = {Property.DIRECTION_LEGALITY: "dir", Property.LAUNCH_CONFINEMENT: "conf",
          Property.CHANNEL_MATCHING: "match", Property.DEADLOCK_FREEDOM: "deadlock",
          Property.EXACTLY_ONCE_MERGE: "merge", Property.ATTENTION_EQUIVALENCE: "attention",
          Property.NUMERIC_SAFETY: "numeric"}
# failing launches whose whole verdict is printed; the others are named
PRINTED_FAILING = 1


def refuse_single_launch_options(listed: LaunchList, **given: object) -> None:
    """Options that draw or dump one launch make no sense for several."""
    used = [name for name, value in given.items() if value]
    if used:
        raise LaunchError(f"{' and '.join(used)} draw(s) one launch, and {listed.name} is "
                          f"{len(listed.launches)} launches; pick one with --cube-start K "
                          "(or run the launch on its own)")


def deploy(listed: LaunchList, pipeline: Pipeline) -> Deployment:
    return build_deployment(listed.name, listed.launches, pipeline.tracer)


def trace_deployment(listed: LaunchList, pipeline: Pipeline, as_json: bool) -> int:
    deployment = deploy(listed, pipeline)
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


def verify_launches(listed: LaunchList, pipeline: Pipeline, config: VerifyConfig,
                    as_json: bool, timings: bool, out: Console) -> int:
    result = run_case(listed, simulate=False, verify_config=config, pipeline=pipeline,
                      deployment=True).deployment_verdict
    assert result is not None  # several launches, verified
    if as_json:
        click.echo(dumps(result.to_json(timings=timings)), nl=False)
    else:
        print_deployment_verdict(result, out)
    return result.exit_code


def print_deployment_verdict(result: DeploymentVerdict, out: Console) -> None:
    d = result.deployment
    out.print(d.header(), markup=False)
    props = [p.name for p in result.verdicts[0].properties]
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for head in ("launch", "cubes", "groups", *(_SHORT.get(p, p.value) for p in props),
                 "min D", "seconds", "proofs"):
        table.add_column(head, justify="right" if head == "seconds" else "left")
    carried = result.carried_from or (None,) * len(result.verdicts)
    for i, (v, origin) in enumerate(zip(result.verdicts, carried, strict=True)):
        spec = v.launch
        statuses = [_GLYPH[p.status] for p in v.properties]
        depth = v.min_queue_depth
        how = "checked" if origin is None else f"from {origin + 1}"
        table.add_row(str(i + 1), f"{spec.cube_start}..{spec.cube_start + spec.n_cubes - 1}",
                      spec.groups.value, *statuses, "–" if depth is None else str(depth),
                      f"{sum(p.seconds for p in v.properties):.2f}", how)
    out.print(table)
    sep = result.separation
    out.print(f"launch_separation: [{'green' if sep.ok else 'bold red'}]{sep.status.value}[/]"
              f" ({sep.seconds:.2f} s): ", end="")
    out.print(sep.message, markup=False)
    for line in sep.diagnostics[:24]:
        out.print(line, markup=False)
    failing = result.failing()
    for i in failing[:PRINTED_FAILING]:
        out.print(f"\n[bold]{d.label(i)}[/]:")
        print_verdict(result.verdicts[i], out)
    rest = failing[PRINTED_FAILING:]
    if rest:
        out.print(f"\n{len(rest)} more launch(es) not proved: "
                  + ", ".join(str(i + 1) for i in rest) + " (see --json)", markup=False)
    if any(c is not None for c in carried):
        out.print("proofs from N: the launch's schedule is launch N's moved over the same "
                  "links, so it has the same proofs (spec/deployments.md)", markup=False)
    total = sum(p.seconds for v in result.verdicts for p in v.properties) + sep.seconds
    out.print(f"{'proved' if result.ok else 'not proved'}: {len(result.verdicts)} launch(es), "
              f"{d.endpoints} endpoints, {total:.2f} s of checks", markup=False)


def simulate_launches(listed: LaunchList, pipeline: Pipeline, config: SimConfig,
                      as_json: bool) -> int:
    outcome = run_case(listed, simulate=True, verify=False, sim_config=config,
                       pipeline=pipeline, deployment=True)
    if outcome.refused:  # the launches are not separated
        click.echo(f"meshproof: error: {' '.join(outcome.refused.split())}", err=True)
        return ExitCode.VIOLATED
    result = outcome.deployment_simulation
    assert result is not None  # several launches, simulated
    if as_json:
        click.echo(dumps(result.to_json()), nl=False)
    else:
        print_deployment_simulation(result)
    return ExitCode.OK if result.ok else ExitCode.VIOLATED


def print_deployment_simulation(result: DeploymentSimulation) -> None:
    d = result.deployment
    click.echo(d.header())
    for i, (s, r) in enumerate(zip(d.schedules, result.launches, strict=True)):
        num = r.numeric if r is not None else None
        if num is None:
            continue
        err = "n/a" if num.rel_err is None else f"{num.rel_err:.3g}"
        click.echo(f"launch {i + 1} (cubes {s.launch.cube_start}.."
                   f"{s.launch.cube_start + s.launch.n_cubes - 1}): numerics "
                   f"{'ok' if num.ok else 'OUT OF TOLERANCE'}, {num.groups} group(s), "
                   f"{len(num.per_rank)} checked rank(s), worst rel_err {err} "
                   f"(tolerance {num.tolerance:g})")
    tim = result.together.timing
    if tim is not None:
        click.echo(f"all launches together ({tim.profile}): latency "
                   f"{tim.latency_s * 1e6:.3f} us, comm_steps {tim.comm_steps}, "
                   f"{len(tim.links)} link(s) carried {sum(x.bytes for x in tim.links)} bytes")
    log = result.together.op_log
    click.echo(f"op log (all launches): gemm {log.gemm}, ipcq_send {log.ipcq_send}, "
               f"ipcq_recv {log.ipcq_recv}, dma_read {log.dma_read}, dma_write "
               f"{log.dma_write}")
