"""`meshproof verify`: prove the properties or print counterexamples."""

from __future__ import annotations

import math
from pathlib import Path

import click

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
from meshproof.cli.progress import VerifyBar, working
from meshproof.cli.verdict_print import console, print_launches_verdict, print_verdict
from meshproof.errors import OptionError
from meshproof.gate.pipeline import run_case
from meshproof.model.launch_options import LaunchOptions
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
from meshproof.verify.z3util import warm as warm_solver

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
@click.option("--rounding-tolerance", "--tolerance", "rounding_tolerance", type=float,
              default=None, metavar="T",
              help="numeric_safety is proved when the rounding bound is within this times "
                   "max|V| (default: the simulator's: 5e-2 with bf16, 1e-2 with f16, 1e-5 "
                   "all f32). --tolerance is its old spelling (deprecated).")
@click.option("--sarif", "sarif_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Write a SARIF 2.1.0 log (results at the kernel's lines).")
@click.option("--recheck", "recheck", default=None, metavar="SOLVER",
              help="Re-solve every query a protocol property rests on with a second "
                   "solver (cvc5; pip install 'meshproof[recheck]'): a disagreement or its "
                   "timeout makes the property unknown.")
def verify_cmd(timeout_s: float, only: tuple[str, ...], skip: tuple[str, ...], as_json: bool,
               no_timings: bool, diagram: Path | None, keep_dot: bool, smt2_path: Path | None,
               input_bound: float | None, score_bound: float | None,
               rounding_tolerance: float | None,
               sarif_path: Path | None, recheck: str | None, trace_timeout: float,
               trace_memory: int, launch: LaunchOptions, launches_file: Path | None) -> int:
    """Prove direction legality, launch confinement, channel matching, deadlock freedom,
    exactly-once merging, attention equivalence and numeric safety of KERNEL, or show
    counterexamples at the kernel's lines."""
    if input_bound is None:
        input_bound = panel_input_bound(launch.panel, launch.scale)
    if not (math.isfinite(input_bound) and input_bound > 0):
        raise OptionError(f"--input-bound must be a positive, finite number, got {input_bound}")
    check_numeric_assumptions(score_bound, rounding_tolerance)
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
    pipeline = current_pipeline(trace_limits(trace_timeout, trace_memory), warm_solver)
    listed = cli_launches(launch, launches_file, pipeline.resolver)
    many = several(listed, launches_file)
    if many:
        refuse_single_launch_options(listed, **{"--diagram": diagram, "--smt2": smt2_path,
                                                "--sarif": sarif_path, "--recheck": recheck})
        with working(not as_json, f"verifying {len(listed.launches)} launches"):
            outcome = run_case(listed, simulate=False, verify_config=VerifyConfig(
                timeout_s=timeout_s, only=only_props, skip=skip_props,
                input_bound=input_bound, score_bound=score_bound,
                rounding_tolerance=rounding_tolerance), pipeline=pipeline)
    else:
        one = listed.launches[0][1]
        # a progress bar on a terminal once the run passes 2 s (never under --json): the
        # property being checked and the semantic analysis's ops
        with VerifyBar(not as_json, f"verifying {one.spec.kernel}") as bar:
            config = VerifyConfig(queue_depth=one.spec.queue_depth, timeout_s=timeout_s,
                                  keep_smt2=smt2_path is not None, only=only_props,
                                  skip=skip_props, input_bound=input_bound,
                                  score_bound=score_bound,
                                  rounding_tolerance=rounding_tolerance, progress=bar,
                                  recheck=solver)
            outcome = run_case(listed, simulate=False, verify_config=config,
                               pipeline=pipeline)
    verified, schedule = outcome.verdict, outcome.schedule
    assert verified is not None and schedule is not None  # verified here, not cached
    if many:
        if as_json:
            click.echo(dumps(verified.to_json(timings=not no_timings)), nl=False)
        else:
            print_launches_verdict(verified, console())
        return verified.exit_code
    verdict, kernel = verified.verdicts[0], listed.launches[0][0]
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
