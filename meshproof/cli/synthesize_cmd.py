"""`meshproof synthesize`: search merge schedules for a launch, write the best as a kernel
file, and (with --verify) prove it; the file plus its verdict is the certificate."""

from __future__ import annotations

import math
from pathlib import Path

import click

from meshproof.cli.options import (
    current_pipeline,
    launch_options,
    trace_limit_options,
    trace_limits,
)
from meshproof.cli.verdict_print import console, print_verdict
from meshproof.errors import LaunchError, OptionError
from meshproof.gate.pipeline import one_launch, run_case
from meshproof.model.hardware import DEFAULT_PROFILE, load_profile
from meshproof.model.launch import build_launch
from meshproof.model.launch_options import LaunchOptions
from meshproof.model.serialize import dumps
from meshproof.outputs import check_writable, write_text
from meshproof.synth.api import Objective, Synthesis, measure
from meshproof.synth.emit_text import KERNEL_NAME
from meshproof.synth.regen import synthesize_for
from meshproof.verify.api import VerifyConfig
from meshproof.verify.properties import check_numeric_assumptions

_SHOWN = 10      # candidates printed (all of them in --json)


@click.command("synthesize")
@launch_options
@trace_limit_options
@click.option("--hw", "hw_file", type=click.Path(path_type=Path), default=None,
              help="Hardware profile TOML (default: the built-in, assumed profile).")
@click.option("--objective", type=click.Choice([o.value for o in Objective]),
              default=Objective.LATENCY.value, show_default=True,
              help="Rank candidates by modelled latency, by comm steps, or by the largest "
                   "bytes on a link (ties: latency, then plan name).")
@click.option("--chunks", "chunks", type=click.IntRange(min=1), default=None,
              help="Only plans with o in this many row chunks (tl.view; 1: whole). "
                   "Default: whole and every chunk count the sizes allow (2, 4, 8).")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path),
              required=True, help="The kernel file to write (FILE.py); its function is "
                                  f"`{KERNEL_NAME}`.")
@click.option("--verify", "run_verify", is_flag=True,
              help="Prove the seven properties of the written file; exit with verify's code.")
@click.option("--timeout", "timeout_s", type=float, default=60.0, show_default=True,
              help="With --verify: seconds per solver call.")
@click.option("--input-bound", "input_bound", type=float, default=16.0, show_default=True,
              help="With --verify: numeric_safety's |input| bound.")
@click.option("--rounding-tolerance", "tolerance", type=float, default=None,
              help="With --verify: numeric_safety's tolerance (default: the simulator's).")
@click.option("--json", "as_json", is_flag=True, help="Print one synthesis-v1 JSON object.")
def synthesize_cmd(hw_file: Path | None, objective: str, chunks: int | None, out: Path,
                   run_verify: bool,
                   timeout_s: float, input_bound: float, tolerance: float | None,
                   as_json: bool, trace_timeout: float, trace_memory: int,
                   launch: LaunchOptions, launches_file: Path | None) -> int:
    """Synthesise a decode merge kernel for a launch, write it to --out and rank the plans."""
    if launches_file is not None or launch.panel is not None:
        raise LaunchError("synthesize takes one launch given by flags (--wiring, --mesh or "
                          "--pes/--cubes, --arg SIZE=N), not --panel or --launches")
    if out.suffix != ".py":
        raise OptionError(f"--out {out} must be a .py file (the kernel is Python)")
    if not (math.isfinite(input_bound) and input_bound > 0):
        raise OptionError(f"--input-bound must be a positive, finite number, got {input_bound}")
    check_numeric_assumptions(None, tolerance)
    check_writable(out, "--out")
    hw = load_profile(hw_file) if hw_file is not None else DEFAULT_PROFILE
    pipeline = current_pipeline(trace_limits(trace_timeout, trace_memory))
    result, launch_opts = synthesize_for(launch, pipeline.resolver, hw, Objective(objective),
                                         chunks=chunks)
    write_text(out, result.kernel_text)
    measured = measure(out, launch_opts, hw)
    verdict = None
    if run_verify:
        kernel = pipeline.resolver(f"{out}::{KERNEL_NAME}")
        emitted = build_launch(kernel, launch_opts)
        config = VerifyConfig(queue_depth=emitted.spec.queue_depth, timeout_s=timeout_s,
                              input_bound=input_bound, rounding_tolerance=tolerance)
        verified = run_case(one_launch(kernel, emitted), simulate=False,
                            verify_config=config, pipeline=pipeline).verdict
        assert verified is not None
        verdict = verified.verdicts[0]
    if as_json:
        doc = result.to_json(str(out), measured)
        doc["verdict"] = verdict.to_json(timings=False) if verdict is not None else None
        click.echo(dumps(doc), nl=False)
    else:
        _print(result, out, measured)
        if verdict is not None:
            print_verdict(verdict, console())
    return verdict.exit_code if verdict is not None else 0


def _print(result: Synthesis, out: Path, measured: float) -> None:
    click.echo(f"synthesised {result.n_ranks} ranks over {result.wiring} (D = "
               f"{result.depth}, profile: {result.profile}, objective: "
               f"{result.objective.value})")
    click.echo(f"{'rank':>4}  {'latency us':>10}  {'steps':>5}  {'max link B':>10}  plan")
    for i, c in enumerate(result.candidates[:_SHOWN]):
        click.echo(f"{i + 1:>4}  {c.latency_s * 1e6:>10.3f}  {c.steps:>5}  "
                   f"{c.max_link_bytes:>10}  {c.plan} ({c.rule} order)")
    if len(result.candidates) > _SHOWN:
        click.echo(f"      ... {len(result.candidates) - _SHOWN} more (see --json)")
    if result.rejected:
        click.echo(f"{len(result.rejected)} plan(s) refused by the plan check; first: "
                   f"{result.rejected[0]}")
    chosen = result.chosen
    click.echo(f"chosen: {chosen.plan} ({chosen.rule} order)")
    same = "" if measured == chosen.latency_s else \
        f" (sim.timing of the written file: {measured * 1e6:.3f} us)"
    click.echo(f"predicted latency: {chosen.latency_s * 1e6:.3f} us{same}; lower bound: "
               f"{result.bound.latency_s * 1e6:.3f} us (D = {result.bound.steps} hops); gap "
               f"{result.gap:.2f}x")
    click.echo(f"wrote {out} (kernel `{KERNEL_NAME}`); prove it with --verify or `meshproof "
               f"verify {out}::{KERNEL_NAME}` and the same launch flags")
