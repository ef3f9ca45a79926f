"""`meshproof gate`: the CI proof gate over a matrix file (default proofs.toml)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from meshproof.cli.options import current_pipeline, gate_trace_limit_options, trace_limits
from meshproof.errors import OptionError, OutputError
from meshproof.exitcodes import ExitCode
from meshproof.gate.cluster import parse_cluster
from meshproof.gate.github import (
    GITHUB_ENV,
    SUMMARY_ENV,
    append_step_summary,
    step_summary,
    workflow_commands,
)
from meshproof.gate.judge import CaseStatus, JudgedProperty
from meshproof.gate.junit import check_junit_target, write_junit
from meshproof.gate.matrix import load_matrix
from meshproof.gate.results import CaseResult, GateResult
from meshproof.gate.runner import check_matrix, default_cache, run_gate
from meshproof.gate.sarif import check_sarif_target, gate_sarif, write_sarif
from meshproof.model.serialize import dumps
from meshproof.verify.result import Status

_STYLE = {CaseStatus.MET: "green", CaseStatus.FAILED: "bold red",
          CaseStatus.UNKNOWN: "yellow", CaseStatus.ERROR: "bold red"}
_MAX_LISTED = 8  # diagnostics per unexpected violation printed under the table
_WORD = {CaseStatus.MET: "ok", CaseStatus.FAILED: "FAILED", CaseStatus.UNKNOWN: "UNKNOWN",
         CaseStatus.ERROR: "ERROR"}


@click.command("gate")
@click.argument("file", required=False, default="proofs.toml",
                type=click.Path(path_type=Path, dir_okay=False))
@click.option("--junit", "junit_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write a JUnit XML report (one testcase per case x property).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (no timings).")
@click.option("--jobs", "-j", type=click.IntRange(min=0), default=1, show_default=True,
              help="Cases run in parallel processes; 0 = one per CPU.")
@click.option("--cluster", "cluster", default=None, metavar="ADDRESS|local:N",
              help="Run the cases on a Dask cluster: a scheduler's ADDRESS, or local:N "
                   "worker processes on this machine (pip install 'meshproof[cluster]'); "
                   "the results and files are the serial gate's.")
@click.option("--no-cache", is_flag=True,
              help="Re-prove every case; neither read nor write the cache.")
@click.option("--cache-dir", "cache_dir", type=click.Path(path_type=Path, file_okay=False),
              default=None, help="Cache directory (default: $MESHPROOF_CACHE_DIR, else "
              "$XDG_CACHE_HOME/meshproof or ~/.cache/meshproof).")
@click.option("--sarif", "sarif_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write a SARIF 2.1.0 log (results at the kernels' lines).")
@click.option("--github/--no-github", "github", default=None,
              help="Print GitHub Actions annotations and write $GITHUB_STEP_SUMMARY "
              "(default: on when GITHUB_ACTIONS=true).")
@gate_trace_limit_options
def gate_cmd(file: Path, junit_path: Path | None, as_json: bool, jobs: int,
             cluster: str | None, no_cache: bool, cache_dir: Path | None, sarif_path: Path | None,
             github: bool | None, trace_timeout: float, trace_memory: int) -> int:
    """Prove every case of FILE (default proofs.toml) and check its expected outcome.

    Exit 0 if every case met its expectation, 1 if any did not, 3 if a property was
    unknown (solver timeout) and nothing failed, 2 if FILE is missing or malformed.
    """
    if junit_path is not None:
        check_junit_target(junit_path)
    if sarif_path is not None:
        check_sarif_target(sarif_path)
    on = parse_cluster(cluster) if cluster is not None else None
    if on is not None and jobs != 1:
        raise OptionError(f"--cluster {on.name} and --jobs {jobs} both say where cases run; "
                          "give one (local:N for N processes on this machine)")
    matrix = load_matrix(file)
    pipeline = current_pipeline(trace_limits(trace_timeout, trace_memory, gate=True))
    check_matrix(matrix, pipeline)
    cache = None if no_cache else default_cache(cache_dir)
    problem = cache.unwritable() if cache is not None else ""
    if problem and cache_dir is not None:
        raise OutputError(f"{problem} (or --no-cache)")
    if problem:  # the default place: run, uncached, and say so
        click.echo(f"note: {problem}; this run caches nothing (or --no-cache)", err=True)
        cache = None
    workers = (os.cpu_count() or 1) if jobs == 0 else jobs
    with _progress(len(matrix.cases)) as report:
        gate = run_gate(matrix, jobs=workers, cache=cache, on_result=report,
                        pipeline=pipeline, cluster=on)
    if as_json:
        click.echo(dumps(gate.to_json()), nl=False)
    else:
        print_table(gate)
    if junit_path is not None:
        write_junit(gate, junit_path)
    if sarif_path is not None:
        write_sarif(sarif_path, gate_sarif(gate))
    if github if github is not None else os.environ.get(GITHUB_ENV) == "true":
        _github(gate, to_stderr=as_json)
    return gate.exit_code


def _github(gate: GateResult, *, to_stderr: bool) -> None:
    """Annotations on stdout (stderr under --json, which owns stdout); the summary table
    appended to $GITHUB_STEP_SUMMARY when the runner provides it."""
    for line in workflow_commands(gate):
        click.echo(line, err=to_stderr)
    summary = os.environ.get(SUMMARY_ENV, "").strip()
    if summary:
        append_step_summary(Path(summary), step_summary(gate))


@contextmanager
def _progress(total: int) -> Iterator[Callable[[CaseResult], None]]:
    """A live bar on a terminal; one line per finished case otherwise (CI logs)."""
    console = Console(stderr=True)
    if console.is_terminal:
        # redrawn per case, without rich's refresh thread: with one thread the trace
        # child is forked (~20 ms) rather than started by a fork server (~130 ms)
        with Progress(TextColumn("gate"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.description}"), TimeElapsedColumn(),
                      console=console, transient=True, auto_refresh=False) as bar:
            task = bar.add_task("", total=total)
            bar.refresh()

            def advance(result: CaseResult) -> None:
                bar.update(task, advance=1, refresh=True,
                           description=f"{result.case.name}: {_WORD[result.status]}")

            yield advance
        return
    done = 0

    def log(result: CaseResult) -> None:
        nonlocal done
        done += 1
        when = "cached" if result.cached else f"{result.seconds:.1f} s"
        click.echo(f"gate [{done}/{total}] {result.case.name}: {_WORD[result.status]} "
                   f"({when})", err=True)

    yield log


def print_table(gate: GateResult) -> None:
    console = Console(width=None if Console().is_terminal else 120, highlight=False)
    table = Table(title=f"proof gate: {gate.matrix}", title_justify="left")
    for column in ("case", "expected", "got", "result"):
        table.add_column(column)
    table.add_column("time", justify="right")
    for r in gate.results:
        style = _STYLE[r.status]
        table.add_row(r.case.name, r.case.expected_text, Text(r.got, style=style),
                      Text(_WORD[r.status], style=style),
                      "cached" if r.cached else f"{r.seconds:.2f} s")
    console.print(table)
    for r in gate.results:
        if r.status is CaseStatus.MET:
            continue
        console.print(Text(f"{r.case.name}: {_WORD[r.status]}", style=_STYLE[r.status]))
        # soft_wrap: a file:line diagnostic must stay on one line to stay clickable
        for line in _details(r):
            console.print(line, markup=False, soft_wrap=True)
    counts = ", ".join(f"{gate.count(s)} {s.value}" for s in CaseStatus if gate.count(s))
    verdict = {ExitCode.OK: "gate passed", ExitCode.VIOLATED: "gate FAILED",
               ExitCode.UNKNOWN: "gate UNKNOWN (not proved)"}
    console.print(f"{verdict[gate.exit_code]}: {len(gate.results)} cases ({counts})",
                  markup=False)


def _details(result: CaseResult) -> list[str]:
    """Why a case did not meet its expectation; an unexpected violation brings the first
    lines of its counterexample (the rest is in --junit / --json)."""
    if result.judgement is None:
        return [f"  {reason}" for reason in result.reasons]
    lines: list[str] = []
    for item in result.judgement.problems():
        lines.append(f"  {item.reason}")
        if not isinstance(item, JudgedProperty) or item.got is None or \
                item.got.status is not Status.VIOLATED or item.want is Status.VIOLATED:
            continue
        diagnostics = item.got.diagnostics
        lines.extend(f"    {d}" for d in diagnostics[:_MAX_LISTED])
        if len(diagnostics) > _MAX_LISTED:
            lines.append(f"    ... and {len(diagnostics) - _MAX_LISTED} more "
                         "(all of them: --junit PATH or --json)")
    return lines
