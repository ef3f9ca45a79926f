"""`meshproof verify`: prove the properties or print counterexamples."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from meshproof.cli.diagram import check_diagram, diagram_options, draw_diagram
from meshproof.cli.options import (
    current_pipeline,
    launch_options,
    resolve_launch,
    resolve_launches,
    trace_limit_options,
    trace_limits,
)
from meshproof.cli.progress import VerifyBar, working
from meshproof.errors import OptionError
from meshproof.gate.pipeline import one_launch, run_case
from meshproof.model.serialize import dumps
from meshproof.outputs import check_writable, write_text
from meshproof.panels import panel_input_bound
from meshproof.verify.api import VerifyConfig
from meshproof.verify.cvc5_solver import require_cvc5
from meshproof.verify.properties import (
    PROPERTY_NAMES,
    check_numeric_assumptions,
    parse_properties,
    parse_recheck,
)
from meshproof.verify.result import Status, Verdict

_STYLE = {Status.PROVED: "green", Status.VIOLATED: "bold red", Status.UNKNOWN: "yellow"}
MAX_PRINTED_DIAGNOSTICS = 24


def console() -> Console:
    tty = sys.stdout.isatty()
    return Console(file=sys.stdout, width=None if tty else 110, highlight=False,
                   color_system="auto" if tty else None, soft_wrap=not tty)


def verdict_header(verdict: Verdict) -> str:
    header = verdict.launch.header(verdict.depth)
    if verdict.skipped:
        header += "; not checked: " + ", ".join(p.value for p in verdict.skipped)
    return header


def print_verdict(verdict: Verdict, out: Console) -> None:
    out.print(verdict_header(verdict), markup=False)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("property")
    table.add_column("status")
    table.add_column("seconds", justify="right")
    table.add_column("summary", overflow="fold")
    for p in verdict.properties:
        table.add_row(p.name.value, f"[{_STYLE[p.status]}]{p.status.value}[/]",
                      f"{p.seconds:.2f}", p.message)
    out.print(table)
    if verdict.deadlock is not None:
        depth = verdict.min_queue_depth
        out.print(f"min_queue_depth: {depth if depth is not None else 'none up to the bound'}"
                  "; rendezvous (D=0): "
                  f"{'deadlock-free' if verdict.rendezvous is Status.PROVED else 'deadlocks'}")
    for p in verdict.properties:
        if p.counterexample is None:
            continue
        out.print(f"\n[bold]{p.name.value}[/]: {p.counterexample.summary}")
        # A loop repeats the same fault at the same line: print it once, with a count.
        grouped: dict[str, list[int]] = {}
        for d in p.counterexample.diagnostics:
            grouped.setdefault(d.format(), []).append(d.op_index if d.op_index is not None
                                                      else -1)
        for i, (text, ops) in enumerate(grouped.items()):
            if i == MAX_PRINTED_DIAGNOSTICS:
                out.print(f"... {len(grouped) - i} more (see --json)")
                break
            repeat = f" [x{len(ops)}: ops {_op_list(ops)}]" if len(ops) > 1 else ""
            out.print(text + repeat, markup=False)
    if verdict.rechecks:
        out.print("\nre-check:")
        for r in verdict.rechecks:
            out.print(f"  {r.name.value}: {r.describe()}", markup=False)
    unknown = [p for p in verdict.properties if p.status is Status.UNKNOWN]
    for p in unknown:
        out.print(f"\n[yellow]{p.name.value}[/]: unknown, not proved: {p.message}")


def _op_list(ops: list[int]) -> str:
    shown = ", ".join(f"#{o}" for o in ops[:6])
    return shown + (", ..." if len(ops) > 6 else "")


_NAMES = f"Properties: {', '.join(PROPERTY_NAMES)}."


@click.command("verify")
@launch_options
@trace_limit_options
@click.option("--timeout", "timeout_s", type=float, default=60.0, show_default=True,
              help="Seconds per solver call; a timeout makes the property unknown.")
@click.option("--only", "only", multiple=True, metavar="NAME[,NAME]",
              help=f"Check only these properties (repeatable). {_NAMES}")
@click.option("--skip", "skip", multiple=True, metavar="NAME[,NAME]",
              help="Do not check these properties (repeatable); the verdict lists them as "
                   "not checked.")
@click.option("--json", "as_json", is_flag=True, help="Print one verdict-v1 JSON object.")
@click.option("--no-timings", is_flag=True,
              help="Leave `seconds` out of --json, so identical runs print identical bytes.")
@diagram_options
@click.option("--smt2", "smt2_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Write the deadlock certificate query (SMT-LIB 2).")
@click.option("--input-bound", "input_bound", type=float, default=None,
              help="numeric_safety's assumption: every input element has |x| <= this "
                   "(default: the panel's, else 16).")
@click.option("--score-bound", "score_bound", type=float, default=None,
              help="numeric_safety's assumption on the scores: |scale·q·kᵀ| <= this for "
                   "every query and key row (e.g. a logit soft-cap of 30); the tighter of it "
                   "and d_head·B²·scale bounds every score.")
@click.option("--tolerance", "tolerance", type=float, default=None,
              help="numeric_safety is proved when the rounding bound is within this times "
                   "max|V| (default: the simulator's: 5e-2 with bf16, 1e-2 with f16, 1e-5 "
                   "all f32).")
@click.option("--sarif", "sarif_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Write a SARIF 2.1.0 log (results at the kernel's lines).")
@click.option("--recheck", "recheck", default=None, metavar="SOLVER",
              help="Re-solve every query a protocol property rests on with a second "
                   "solver (cvc5; pip install 'meshproof[recheck]'): a disagreement or its "
                   "timeout makes the property unknown.")
def verify_cmd(timeout_s: float, only: tuple[str, ...], skip: tuple[str, ...], as_json: bool,
               no_timings: bool, diagram: Path | None, keep_dot: bool, smt2_path: Path | None,
               input_bound: float | None, score_bound: float | None, tolerance: float | None,
               sarif_path: Path | None, recheck: str | None, trace_timeout: float,
               trace_memory: int, **opts: Any) -> int:
    """Prove direction legality, launch confinement, channel matching, deadlock freedom,
    exactly-once merging, attention equivalence and numeric safety of KERNEL, or show
    counterexamples at the kernel's lines."""
    if input_bound is None:
        input_bound = panel_input_bound(opts.get("panel"), opts.get("scale", "validation"))
    if not (math.isfinite(input_bound) and input_bound > 0):
        raise OptionError(f"--input-bound must be a positive, finite number, got {input_bound}")
    check_numeric_assumptions(score_bound, tolerance)
    only_props, skip_props = parse_properties(only), parse_properties(skip)
    solver = parse_recheck(recheck) if recheck is not None else None
    if solver is not None:
        require_cvc5()
    if smt2_path is not None:
        check_writable(smt2_path, "--smt2")
    if sarif_path is not None:
        # imported for --sarif only, like the report stack for --diagram
        from meshproof.gate.sarif import check_sarif_target

        check_sarif_target(sarif_path)
    check_diagram(diagram, keep_dot)
    pipeline = current_pipeline(trace_limits(trace_timeout, trace_memory))
    listed = resolve_launches(opts, pipeline.resolver)
    if listed is not None:  # several launches at once
        from meshproof.cli.deployments import refuse_single_launch_options, verify_launches

        refuse_single_launch_options(listed, **{"--diagram": diagram, "--smt2": smt2_path,
                                                "--sarif": sarif_path, "--recheck": recheck})
        with working(not as_json, f"verifying {len(listed.launches)} launches"):
            return verify_launches(listed, pipeline, VerifyConfig(
                timeout_s=timeout_s, only=only_props, skip=skip_props,
                input_bound=input_bound, score_bound=score_bound, tolerance=tolerance),
                as_json, not no_timings, console())
    kernel, launch = resolve_launch(**opts, resolver=pipeline.resolver)
    # a progress bar on a terminal once the run passes 2 s (never under --json): the
    # property being checked and the semantic analysis's ops
    with VerifyBar(not as_json, f"verifying {launch.spec.kernel}") as bar:
        config = VerifyConfig(queue_depth=launch.spec.queue_depth, timeout_s=timeout_s,
                              keep_smt2=smt2_path is not None, only=only_props,
                              skip=skip_props, input_bound=input_bound,
                              score_bound=score_bound, tolerance=tolerance, progress=bar,
                              recheck=solver)
        outcome = run_case(one_launch(kernel, launch), simulate=False, verify_config=config,
                           pipeline=pipeline)
    verdict, schedule = outcome.verdict, outcome.schedule
    assert verdict is not None and schedule is not None  # verified here, not cached
    notes: list[str] = []
    if smt2_path is not None and verdict.smt2 is not None:
        write_text(smt2_path, verdict.smt2)
        notes.append(f"wrote the deadlock certificate query to {smt2_path}")
    if diagram is not None:
        notes.append(draw_diagram(schedule, verdict, diagram, keep_dot))
    if sarif_path is not None:
        from meshproof.gate.findings import Place
        from meshproof.gate.sarif import verdict_sarif, write_sarif

        site = kernel.site
        write_sarif(sarif_path, verdict_sarif(verdict, schedule,
                                              Place(site.display_file, site.def_line)))
        notes.append(f"wrote the SARIF log to {sarif_path}")
    if as_json:
        click.echo(dumps(verdict.to_json(timings=not no_timings)), nl=False)
        for note in notes:
            click.echo(note, err=True)
    else:
        out = console()
        print_verdict(verdict, out)
        for note in notes:
            out.print(note, markup=False)
    return verdict.exit_code
