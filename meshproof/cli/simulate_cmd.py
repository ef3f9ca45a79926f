"""`meshproof simulate`: numerics against dense float64 attention, timing, op log."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource

from meshproof.cli.diagram import check_diagram, diagram_options, draw_diagram
from meshproof.cli.options import (
    cli_launches,
    current_pipeline,
    launch_options,
    refuse_single_launch_options,
    several,
    trace_limit_options,
    trace_limits,
)
from meshproof.cli.progress import NumericBar
from meshproof.deploy.launches import LaunchList
from meshproof.errors import LaunchError, OptionError
from meshproof.exitcodes import ExitCode
from meshproof.gate.outcome import EXPLAINERS, CaseOutcome, NumericOutcome, explain
from meshproof.gate.pipeline import Pipeline, run_case
from meshproof.model.channels import derive_channels
from meshproof.model.hardware import DEFAULT_PROFILE, load_profile
from meshproof.model.launch_options import LaunchOptions
from meshproof.model.schedule import Schedule
from meshproof.model.serialize import dumps
from meshproof.model.witness_file import Witness, load_witness
from meshproof.sim.config import SimConfig
from meshproof.sim.cost import ANNOUNCE_S, CostEstimate
from meshproof.sim.inputs import InputKind
from meshproof.sim.perfetto import check_trace_target, perfetto_trace, write_trace
from meshproof.sim.result import SIM_SCHEMA, SimResult, WitnessReplay
from meshproof.verify.api import VerifyConfig

if TYPE_CHECKING:
    from meshproof.deploy.simulate import DeploymentSimulation

# Ranks listed one per line in the table; beyond this, only the worst ones.
_RANK_ROWS = 16


@click.command("simulate")
@launch_options
@trace_limit_options
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Input RNG seed (>= 0).")
@click.option("--inputs", "inputs", type=click.Choice([k.value for k in InputKind]),
              default=InputKind.NORMAL.value, show_default=True,
              help="normal: Q, K, V ~ N(0,1); peaked: plus a few keys that dominate; "
                   "uniform: Q = 0, every score equal.")
@click.option("--witness", "witness_file", type=click.Path(path_type=Path), default=None,
              help="Replay a rounding witness: FILE is a `verify --json` verdict (its "
                   "numeric_safety witness) or the witness object; its Q, K, V replace the "
                   "seeded inputs and the witness element is printed beside the verdict's.")
@click.option("--no-numerics", is_flag=True,
              help="Skip the numeric check (no data is allocated): timing model and op log "
                   "only, e.g. at headline scale.")
@click.option("--hw", "hw_file", type=click.Path(path_type=Path), default=None,
              help="Hardware profile TOML (default: the built-in, assumed profile).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--perfetto", "perfetto_path", type=click.Path(path_type=Path), default=None,
              help="Write a Chrome/Perfetto trace JSON of the timing run here.")
@click.option("--time-budget", "time_budget", type=click.FloatRange(min=0, min_open=True),
              default=None, metavar="SECONDS",
              help="Give up, unknown (exit 3), when the numeric run is estimated to take "
                   "longer (refused before it starts) or runs longer (stopped there).")
@diagram_options
def simulate_cmd(seed: int, inputs: str, witness_file: Path | None, no_numerics: bool,
                 hw_file: Path | None, as_json: bool, perfetto_path: Path | None,
                 time_budget: float | None,
                 diagram: Path | None, keep_dot: bool, trace_timeout: float,
                 trace_memory: int, launch: LaunchOptions, launches_file: Path | None
                 ) -> int:
    """Run KERNEL in the numpy reference simulator; exit 1 when out of tolerance."""
    if no_numerics:
        _refuse_numeric_options()
    witness = _witness(witness_file) if witness_file is not None else None
    check_diagram(diagram, keep_dot)
    if perfetto_path is not None:
        check_trace_target(perfetto_path)
    profile = load_profile(hw_file) if hw_file is not None else DEFAULT_PROFILE
    if launch.queue_depth is None and hw_file is not None:
        launch = replace(launch, queue_depth=profile.ipcq_depth)
    pipeline = current_pipeline(trace_limits(trace_timeout, trace_memory))
    listed = cli_launches(launch, launches_file, pipeline.resolver)
    deployment = several(listed, launches_file)
    if deployment and witness is not None:
        raise LaunchError(f"--witness replays one launch, and {listed.name} is "
                          f"{len(listed.launches)} launches; pick the one verified with "
                          "--cube-start K (or run the launch on its own)")
    # a progress bar on a terminal once the numerics run past 2 s (never under --json)
    bar = NumericBar(not as_json and not no_numerics, "simulate",
                     len(listed.launches))
    config = SimConfig(seed=seed, inputs=InputKind(inputs), witness=witness,
                       hardware=profile, numerics=not no_numerics, progress=bar,
                       time_budget_s=time_budget, estimate=_state_estimate)
    with bar:
        return _simulate(listed, deployment, config, pipeline, as_json, perfetto_path,
                         diagram, keep_dot)


def _simulate(listed: LaunchList, deployment: bool, config: SimConfig, pipeline: Pipeline,
              as_json: bool, perfetto_path: Path | None, diagram: Path | None,
              keep_dot: bool) -> int:
    if deployment:
        refuse_single_launch_options(listed, **{"--diagram": diagram,
                                                "--perfetto": perfetto_path})
    launch = listed.launches[0][1]
    # the diagram draws what the verifier finds, so --diagram verifies first
    outcome = run_case(listed, simulate=True, verify=diagram is not None,
                       verify_config=VerifyConfig(queue_depth=launch.spec.queue_depth),
                       sim_config=config, pipeline=pipeline)
    if deployment:
        return _launches_result(outcome, as_json)
    schedule = outcome.schedule
    assert schedule is not None  # traced here
    if diagram is not None:
        assert outcome.verdict is not None
        click.echo(draw_diagram(schedule, outcome.verdict.verdicts[0], diagram, keep_dot),
                   err=True)
    if outcome.refused:
        message = " ".join(outcome.refused.split())
        if as_json:
            click.echo(dumps({"schema": SIM_SCHEMA, "ok": False, "kernel": launch.spec.kernel,
                              "launch": launch.spec.to_json(), "refused": message}), nl=False)
        click.echo(f"meshproof: error: {message}", err=True)
        return ExitCode.VIOLATED
    assert outcome.simulation is not None  # simulated and not refused
    result = outcome.simulation.together  # one launch: its whole run
    if perfetto_path is not None and result.run is not None:
        write_trace(perfetto_path, perfetto_trace(schedule, derive_channels(schedule),
                                                  result.run))
    why = _explanation(outcome, schedule, pipeline)
    if as_json:
        doc = result.to_json()
        if doc.get("numeric") is not None:
            doc["numeric"]["explained_by"] = why
        click.echo(dumps(doc), nl=False)
    else:
        _print_table(result, perfetto_path)
        if why:
            click.echo(f"  explained by {why}")
    return result.exit_code


def _launches_result(outcome: CaseOutcome, as_json: bool) -> int:
    """Several launches (or a launches file): each launch's numerics, then the timing and
    op log of all of them together."""
    if outcome.refused:  # the launches are not separated
        click.echo(f"meshproof: error: {' '.join(outcome.refused.split())}", err=True)
        return ExitCode.VIOLATED
    result = outcome.simulation
    assert result is not None  # simulated and not refused
    if as_json:
        click.echo(dumps(result.to_json()), nl=False)
    else:
        _print_launches(result)
    return ExitCode.OK if result.ok else ExitCode.VIOLATED


def _state_estimate(cost: CostEstimate) -> None:
    """A run estimated past ANNOUNCE_S seconds says so on stderr, in one line, first."""
    if cost.seconds > ANNOUNCE_S:
        click.echo(f"meshproof: {cost.describe()} (--time-budget SECONDS gives up sooner)",
                   err=True)


def _given(*names: str) -> list[str]:
    """The flags of the parameters `names` given on the command line, in that order."""
    ctx = click.get_current_context()
    flags = {p.name: p.opts[0] for p in ctx.command.params}
    return [flags[name] for name in names
            if ctx.get_parameter_source(name) is not ParameterSource.DEFAULT]


def _witness(path: Path) -> Witness:
    """--witness FILE read and parsed (WitnessFileError, exit 2, when it cannot be); its
    inputs replace the seeded ones, so --seed and --inputs would be ignored."""
    ignored = _given("inputs", "seed")
    if ignored:
        names = " and ".join(ignored)
        raise OptionError(f"--witness {path} feeds the witness's inputs, so {names} would "
                          f"be ignored; drop {names} or --witness")
    return load_witness(path)


def _refuse_numeric_options() -> None:
    """--inputs, --seed and --witness make the numeric check's inputs: with --no-numerics
    they would be ignored, which is a choice made silently."""
    given = _given("inputs", "seed", "witness_file")
    if given:
        names = " and ".join(given)
        verb = "builds" if len(given) == 1 else "build"
        raise OptionError(f"{names} {verb} the numeric check's inputs, which --no-numerics "
                          f"skips; drop {names} or --no-numerics")


def _explanation(outcome: CaseOutcome, schedule: Schedule, pipeline: Pipeline) -> str:
    """For an out-of-tolerance run: the static property that explains it (the semantic
    properties are verified here, only then), or '' when none does."""
    sim = outcome.simulation.together if outcome.simulation is not None else None
    if sim is None or sim.numeric is None or sim.numeric.ok:
        return ""
    verdict = outcome.verdict.verdicts[0] if outcome.verdict else pipeline.verifier(
        schedule, VerifyConfig(queue_depth=schedule.launch.queue_depth,
                               only=frozenset(EXPLAINERS)))
    numeric = explain(NumericOutcome.of(sim, ""), verdict, sim)
    return numeric.explained_by if numeric is not None else ""


def _fmt(x: float | None, spec: str = ".3g") -> str:
    return "n/a" if x is None else format(x, spec)


def _print_table(result: SimResult, perfetto_path: Path | None) -> None:
    spec = result.launch
    click.echo(spec.header(spec.queue_depth))
    num = result.numeric
    if num is not None:
        verdict = "ok" if num.ok else "OUT OF TOLERANCE"
        fed = f"witness inputs from {num.witness.path}" if num.witness is not None else \
            f"{num.inputs} inputs, seed {num.seed}"
        click.echo(f"numerics ({num.harness}, {fed}, {num.groups} group(s)): {verdict}")
        masked = "" if spec.mask is None else f"masked ({spec.mask.text}) "
        click.echo(f"  reference: dense {masked}float64 attention, softmax scale "
                   f"{num.softmax_scale:.6g} ({num.scale_source}); change it with "
                   "--softmax-scale X")
        click.echo(f"  rel_err {_fmt(num.rel_err)}  max_abs_err {_fmt(num.max_abs_err)}  "
                   f"tolerance {num.tolerance:g} ({'/'.join(num.dtypes)} used)")
        rows = list(num.per_rank)
        if len(rows) > _RANK_ROWS:
            rows.sort(key=lambda r: (r.ok, -(r.rel_err if r.rel_err is not None
                                             else float("inf"))))
            rows = rows[:_RANK_ROWS]
            click.echo(f"  worst {len(rows)} of {len(num.per_rank)} ranks:")
        for r in rows:
            click.echo(f"  {r.endpoint.label:<8} rel_err {_fmt(r.rel_err):>9}  max_abs "
                       f"{_fmt(r.max_abs_err):>9}  {'ok' if r.ok else 'FAIL'}"
                       + (f"  {r.note}" if r.note else ""))
        click.echo(f"  {num.message}")
        if num.witness is not None:
            click.echo(f"  {witness_line(num.witness)}")
    tim = result.timing
    if tim is not None:
        slowest = max(tim.per_rank, key=lambda r: r.finish_s, default=None)
        click.echo(f"timing ({tim.profile}): latency {tim.latency_s * 1e6:.3f} us, "
                   f"comm_steps {tim.comm_steps}, critical path {len(tim.critical_path)} ops")
        if slowest is not None:
            click.echo(f"  last to finish {slowest.endpoint.label}: busy "
                       f"{slowest.busy_s * 1e6:.3f} us, waiting {slowest.wait_s * 1e6:.3f} us")
        total = sum(link.bytes for link in tim.links)
        click.echo(f"  {len(tim.links)} link(s) carried {total} bytes")
    log = result.op_log
    click.echo(f"op log: gemm {log.gemm}, ipcq_send {log.ipcq_send}, ipcq_recv "
               f"{log.ipcq_recv}, dma_read {log.dma_read}, dma_write {log.dma_write}")
    if perfetto_path is not None:
        click.echo(f"perfetto trace: {perfetto_path}")


def witness_line(w: WitnessReplay) -> str:
    """The witness element replayed, beside the verdict's numbers, on one line."""
    t, h, e = w.element
    same = "agrees with the verdict" if w.agrees else \
        "DIFFERS from the verdict's machine value"
    return (f"witness element (query row {t}, head {h}, feature {e}) of group {w.group} on "
            f"{w.endpoint.label}: simulated {w.simulated:.9g}, attention {w.attention:.9g}, "
            f"|diff|/max|V| {w.error:.4g} (max|V| = {w.max_v:g}); verdict: machine "
            f"{w.verdict_machine:.9g}, error {w.verdict_error:.4g}: {same}")


def _print_launches(result: DeploymentSimulation) -> None:
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
