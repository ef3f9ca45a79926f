"""The report directory (report/api.py): byte-identical reruns, --fast, refusing a bad --out,
nothing half-written."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import RunCli, one_line_error

from meshproof.cli import main, report_cmd
from meshproof.errors import OutputError
from meshproof.report import api as report_api
from meshproof.report import sweep as report_sweep
from meshproof.report.api import write_report
from meshproof.report.cases import VALIDATION_CASES
from meshproof.report.sweep import SweepOptions

REPORT_CASES = {c.name: c for c in VALIDATION_CASES}


SMALL = SweepOptions(cases=(REPORT_CASES["mesh_mlo_1d_recv_first"],), panels=False,
                     step_meshes=((1, 4), (2, 4)))


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.fixture(scope="module")
def small_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("review") / "rep"
    write_report(out, options=SMALL)
    return out


def test_report_rerun_is_byte_identical_including_png_and_svg(small_report: Path,
                                                              tmp_path: Path) -> None:
    again = tmp_path / "rep"
    write_report(again, options=SMALL)
    first, second = _files(small_report), _files(again)
    assert sorted(first) == sorted(second)
    assert {k for k in first if k.endswith((".png", ".svg"))} >= {
        "figures/steps_1d_vs_2d.png", "figures/gqa_scaling.png",
        "diagrams/mesh_mlo_1d_recv_first.svg"}
    assert [k for k in first if first[k] != second[k]] == []


def test_fast_reproduces_markdown_and_figures_without_running_anything(
        small_report: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "rep"
    shutil.copytree(small_report, copy)
    before = _files(copy)
    for figure in (copy / "figures").iterdir():
        figure.unlink()
    (copy / "README.md").write_text("stale", encoding="utf-8")

    def no_runs(*_: object, **__: object) -> None:
        raise AssertionError("--fast traced, solved or simulated")

    for module, name in ((report_sweep, "run_sweep"), (report_api, "run_sweep"),
                         (report_sweep, "run_case")):
        monkeypatch.setattr(module, name, no_runs)
    write_report(copy, fast=True)
    assert _files(copy) == before


@pytest.mark.parametrize("where", [".", "", "{parent}"])
def test_report_refuses_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str],
                                              where: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("my project", encoding="utf-8")
    monkeypatch.chdir(project)
    code = main(["report", "--out", where.format(parent=tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "is the current directory" in err
    assert (project / "README.md").read_text(encoding="utf-8") == "my project"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["project"]


def test_report_refuses_a_directory_that_is_not_a_report(run_cli: RunCli, tmp_path: Path) -> None:
    mine = tmp_path / "docs"
    (mine / "figures").mkdir(parents=True)
    (mine / "README.md").write_text("my docs", encoding="utf-8")
    for extra in ([], ["--fast"]):
        err = one_line_error(run_cli(["report", "--out", str(mine), *extra]))
        assert "not a meshproof report (no sweep.json)" in err and "README.md" in err
    assert (mine / "README.md").read_text(encoding="utf-8") == "my docs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs"]


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda d: d.pop("scale"), "scale None is not one of"),
    (lambda d: d.update(cases=[{"name": 1}]), "cases[0] lacks name, kernel, why, expect"),
    (lambda d: d.update(steps_1d_vs_2d="x"), "steps_1d_vs_2d must be a list of objects"),
    (lambda d: d["cases"][0].update(verdict=3), "AttributeError"),
    (lambda d: d["steps_1d_vs_2d"][0].pop("mesh"), "KeyError"),
])
def test_fast_with_a_broken_sweep_is_one_line_and_keeps_the_report(
        run_cli: RunCli, small_report: Path, tmp_path: Path, edit: Callable[[dict[str, Any]], Any],
        needle: str) -> None:
    copy = tmp_path / "rep"
    shutil.copytree(small_report, copy)
    sweep = json.loads((copy / "sweep.json").read_text(encoding="utf-8"))
    edit(sweep)
    (copy / "sweep.json").write_text(json.dumps(sweep), encoding="utf-8")
    before = _files(copy)
    err = one_line_error(run_cli(["report", "--fast", "--out", str(copy)]))
    assert needle in err and "rerun `meshproof report` without --fast" in err
    assert _files(copy) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


def test_a_write_failure_aborts_the_report_instead_of_blaming_the_kernel(
        run_cli: RunCli, small_report: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "rep"
    shutil.copytree(small_report, copy)
    before = _files(copy)

    def disk_full(*_: object, **__: object) -> None:
        raise OutputError("cannot write x.svg: No space left on device; pass a path in a "
                          "writable directory")

    monkeypatch.setattr(report_sweep, "render_dot", disk_full)
    monkeypatch.setattr(report_cmd, "SweepOptions", lambda **_: SMALL)
    err = one_line_error(run_cli(["report", "--out", str(copy)]))
    assert "No space left on device" in err
    assert _files(copy) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]
