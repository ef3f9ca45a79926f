"""GitHub Actions output for the gate: `::error file=…,line=…,title=…::message` workflow
commands (annotations on the kernel line in the pull request) and a markdown table for
`$GITHUB_STEP_SUMMARY`.

Only what fails the gate is annotated, as the judge decided it: each diagnostic of an
unexpected violation at its kernel line (an error), an expected violation that was
proved and a missing result at the case's line in the matrix (an error), an unknown
property (a warning: never proved), a case that raised (an error).
"""

from __future__ import annotations

from pathlib import Path

from meshproof.errors import OutputError
from meshproof.exitcodes import ExitCode
from meshproof.gate.judge import CaseStatus, ItemStatus, JudgedProperty
from meshproof.gate.locations import case_lines, report_path
from meshproof.gate.results import CaseResult, GateResult
from meshproof.verify.result import Role, Status

GITHUB_ENV = "GITHUB_ACTIONS"
SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
MAX_PER_PROPERTY = 10   # GitHub shows at most 10 error annotations per step anyway


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def command(level: str, message: str, *, file: str | None = None, line: int | None = None,
            title: str = "") -> str:
    """One workflow command line, escaped as the runner expects."""
    params = []
    if file:
        params.append(f"file={_prop(file)}")
        if line:
            params.append(f"line={line}")
    if title:
        params.append(f"title={_prop(title)}")
    head = f"::{level}" + (" " + ",".join(params) if params else "")
    return f"{head}::{_data(message)}"


def _property_lines(result: CaseResult, j: JudgedProperty, matrix: str,
                    line: int) -> list[str]:
    case, name, got = result.case.name, j.prop.value, j.got
    if got is None or j.status is ItemStatus.MISSING:
        return [command("error", f"{name}: the verifier reported no result", file=matrix,
                        line=line, title=f"{case}: {name}")]
    if j.status is ItemStatus.UNKNOWN:
        return [command("warning", f"{name} is unknown (not proved): {got.message}",
                        file=matrix, line=line, title=f"{case}: {name} unknown")]
    if got.status is not Status.VIOLATED:
        return [command("error", j.reason + "; if the kernel was fixed, update expect in "
                        "the matrix", file=matrix, line=line,
                        title=f"{case}: {name} expected violated")]
    located = [f for f in got.findings if f.place is not None and f.role is not Role.NOTE]
    if not located:
        return [command("error", j.reason, file=matrix, line=line,
                        title=f"{case}: {name} violated")]
    out = []
    for f in located[:MAX_PER_PROPERTY]:
        assert f.place is not None
        rank = f"rank {f.place.rank.describe()}: " if f.place.rank else ""
        out.append(command("error", f"{rank}{f.message}", file=report_path(f.place.file),
                           line=f.place.line, title=f"{case}: {name} violated"))
    if len(located) > MAX_PER_PROPERTY:
        out.append(command("error", f"... and {len(located) - MAX_PER_PROPERTY} more "
                           f"{name} diagnostics (all of them: --junit, --sarif or --json)",
                           file=matrix, line=line, title=f"{case}: {name} violated"))
    return out


def workflow_commands(gate: GateResult) -> list[str]:
    """The workflow commands for every case the gate fails on (or is unknown)."""
    matrix = report_path(gate.matrix.resolve())
    lines = case_lines(gate.matrix)
    out: list[str] = []
    for result in gate.results:
        line = lines.get(result.case.name, 1)
        if result.status is CaseStatus.ERROR or result.judgement is None:
            out.append(command("error", result.error, file=matrix, line=line,
                               title=f"{result.case.name}: error"))
            continue
        for item in result.judgement.problems():
            if isinstance(item, JudgedProperty):
                out += _property_lines(result, item, matrix, line)
            else:
                out.append(command("error", item.reason, file=matrix, line=line,
                                   title=f"{result.case.name}: numerics"))
    return out


_WORD = {CaseStatus.MET: "✅ met", CaseStatus.FAILED: "❌ failed",
         CaseStatus.UNKNOWN: "⚠️ unknown", CaseStatus.ERROR: "❌ error"}


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def step_summary(gate: GateResult) -> str:
    """A markdown table of the gate for the job's summary page."""
    matrix = report_path(gate.matrix.resolve())
    counts = ", ".join(f"{gate.count(s)} {s.value}" for s in CaseStatus if gate.count(s))
    verdict = "passed" if gate.ok else ("UNKNOWN (not proved)"
                                        if gate.exit_code is ExitCode.UNKNOWN else "FAILED")
    out = [f"### meshproof gate `{matrix}`: {verdict}", "",
           f"{len(gate.results)} cases ({counts})", "",
           "| case | expected | got | result |", "|---|---|---|---|"]
    for r in gate.results:
        out.append(f"| `{_cell(r.case.name)}` | {_cell(r.case.expected_text)} | "
                   f"{_cell(r.got)} | {_WORD[r.status]} |")
    problems = [r for r in gate.results if r.status is not CaseStatus.MET]
    if problems:
        out += ["", "Why:", ""]
        for r in problems:
            for reason in r.reasons:
                out.append(f"- `{_cell(r.case.name)}`: {_cell(reason)}")
    return "\n".join(out) + "\n"


def append_step_summary(path: Path, text: str) -> None:
    """Append to the summary file GitHub gives each step (other tools append too)."""
    try:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise OutputError(f"cannot append the gate summary to ${SUMMARY_ENV} ({path}): "
                          f"{exc.strerror or exc}") from None
