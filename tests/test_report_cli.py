"""`meshproof report`: files written, byte-identical reruns, --fast, bad --out, atomicity.

The full report runs in `make demo`; here a small case list keeps the tests quick.
"""

from __future__ import annotations

import json
import shutil
import stat
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from meshproof.report import api as report_api
from meshproof.report import sweep as sweep_mod
from meshproof.report.api import write_report
from meshproof.report.cases import VALIDATION_CASES
from meshproof.report.sweep import SWEEP_SCHEMA, SweepOptions

Run = Callable[[Sequence[str]], Any]
CASES = {c.name: c for c in VALIDATION_CASES}
TINY = SweepOptions(cases=(CASES["mesh_mlo_2d_2x4"], CASES["mesh_mlo_1d_8cubes"]),
                    step_meshes=((1, 4), (2, 4)))
FIGURES = ["gqa_comparison.png", "gqa_scaling.png", "steps_1d_vs_2d.png",
           *(f"gqa_op_log_{p}.png" for p in ("single_user_prefill", "multi_user_prefill",
                                               "single_user_decode", "multi_user_decode"))]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    out = tmp_path_factory.mktemp("rep") / "reports"
    outcome = write_report(out, options=TINY)
    assert outcome.unexpected == ()
    return out, _snapshot(out)


def test_report_writes_readme_sweep_figures_and_diagrams(
        report: tuple[Path, dict[str, bytes]]) -> None:
    _, files = report
    sweep = json.loads(files["sweep.json"])
    assert sweep["schema"] == SWEEP_SCHEMA and sweep["scale"] == "validation"
    assert [c["name"] for c in sweep["cases"]] == ["mesh_mlo_2d_2x4", "mesh_mlo_1d_8cubes"]
    assert len(sweep["panels"]) == 4
    for fig in FIGURES:
        assert files[f"figures/{fig}"].startswith(b"\x89PNG")
    assert "figures/verify_time.png" not in files
    readme = files["README.md"].decode()
    assert "verify_time.png not drawn" in readme
    for record in sweep["cases"] + sweep["panels"]:
        for key in ("schedule", "topology"):
            rel = record["diagrams"][key]
            assert rel in files and rel.endswith(".svg"), rel
            assert f"]({rel})" in readme
    bad = next(c for c in sweep["cases"] if c["name"] == "mesh_mlo_1d_8cubes")
    assert bad["expect"] == "violated" and bad["as_expected"]
    assert "refused" in bad["sim"]
    assert "| `mesh_mlo_1d_8cubes` |" in readme and "**✗**" in readme
    assert "✓ 2D all-reduce on 2x4 takes 4 steps vs 7" in readme
    assert "seconds" not in files["sweep.json"].decode()  # no wall-clock values


def test_fast_rerenders_without_any_solver_and_draws_the_verify_benchmark(
        report: tuple[Path, dict[str, bytes]], monkeypatch: pytest.MonkeyPatch) -> None:
    out, before = report

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("--fast must not trace, verify or simulate")

    monkeypatch.setattr(sweep_mod, "run_case", boom)
    (out / "figures" / "gqa_comparison.png").unlink()
    (out / "README.md").write_text("stale")
    # the verify benchmark's JSON is not the report's: kept, and drawn as verify_time.png
    bench = {"schema": "x", "results": [
        {"ranks": r, "seconds": s, "method": m}
        for m, base in (("order certificate", 0.01), ("stuck-state", 0.02))
        for r, s in ((8, base), (64, base * 10), (256, base * 100))]}
    (out / "verify_scale.json").write_text(json.dumps(bench))
    write_report(out, fast=True)
    after = _snapshot(out)
    assert after["sweep.json"] == before["sweep.json"]
    for fig in FIGURES:
        assert after[f"figures/{fig}"] == before[f"figures/{fig}"], fig
    assert {k for k in after if k.startswith("diagrams/")} == \
        {k for k in before if k.startswith("diagrams/")}
    assert after["figures/verify_time.png"].startswith(b"\x89PNG")
    assert json.loads(after["verify_scale.json"]) == bench
    readme = after["README.md"].decode()
    old = before["README.md"].decode()
    assert "![Proof time vs ranks (from verify_scale.json; wall clock)](figures/verify_time.png)" \
        in readme
    assert "verify_time.png not drawn" in old and "verify_time.png not drawn" not in readme
    # apart from the verify_time figure and its note, the page is the same
    strip = {"verify_time.png", "Proof time vs ranks", "verify benchmark results"}
    assert [ln for ln in readme.splitlines() if ln and not any(x in ln for x in strip)] == \
        [ln for ln in old.splitlines() if ln and not any(x in ln for x in strip)]
    (out / "verify_scale.json").unlink()


def test_a_failing_run_leaves_the_existing_report_untouched(
        report: tuple[Path, dict[str, bytes]], monkeypatch: pytest.MonkeyPatch) -> None:
    out, _ = report
    before = _snapshot(out)

    def half_done(options: SweepOptions, diagram_dir: Path, progress: object) -> None:
        diagram_dir.mkdir(parents=True)
        (diagram_dir / "partial.svg").write_text("<svg/>")
        raise RuntimeError("simulated crash in the middle of the sweep")

    monkeypatch.setattr(report_api, "run_sweep", half_done)
    with pytest.raises(RuntimeError):
        write_report(out, options=TINY)
    assert _snapshot(out) == before
    assert [p.name for p in out.parent.iterdir()] == ["reports"]  # no temp dirs left


def test_cli_bad_out_exits_2_and_leaves_things_alone(run_cli: Run, tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("keep me")
    res = run_cli(["report", "--out", str(target)])
    assert res.code == 2
    assert res.err.count("\n") == 1 and "is a file, not a directory" in res.err
    assert target.read_text() == "keep me"
    res = run_cli(["report", "--out", str(target / "sub")])
    assert res.code == 2 and "not a directory" in res.err
    res = run_cli(["report", "--out", "/proc/meshproof-report"])
    assert res.code == 2 and "cannot write the report" in res.err
    res = run_cli(["report", "--fast", "--out", str(tmp_path / "empty")])
    assert res.code == 2 and "sweep.json does not exist" in res.err
    assert not (tmp_path / "empty").exists()


def test_cli_a_read_only_out_is_refused_before_any_work(run_cli: Run, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        res = run_cli(["report", "--out", str(locked)])
    finally:
        mode = stat.S_IMODE(locked.stat().st_mode)
        locked.chmod(0o755)
    assert res.code == 2 and res.err.count("\n") == 1, res.err
    assert f"cannot write the report {locked}: it is not writable" in res.err
    assert mode == 0o555 and list(locked.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["locked"]


def test_a_symlinked_out_updates_its_target_and_keeps_its_mode(
        report: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    out, before = report
    real = tmp_path / "real"
    shutil.copytree(out, real)
    real.chmod(0o750)
    link = tmp_path / "link"
    link.symlink_to(real)
    (real / "README.md").write_text("stale")
    write_report(link, fast=True)
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert stat.S_IMODE(real.stat().st_mode) == 0o750
    assert (real / "README.md").read_bytes() == before["README.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]  # no .old-PID


def test_cli_exit_code_says_whether_every_run_was_as_expected(
        run_cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import meshproof.cli.report_cmd as cmd

    good = replace(TINY, cases=(CASES["mesh_mlo_2d_2x4"],), panels=False, scaling=False,
                   step_meshes=((1, 4),))
    monkeypatch.setattr(cmd, "SweepOptions", lambda scale, pipeline: replace(good, scale=scale))
    res = run_cli(["report", "--out", str(tmp_path / "ok")])
    assert res.code == 0, res.err
    assert f"wrote {tmp_path / 'ok'}/README.md" in res.out
    bad = CASES["mesh_mlo_1d_8cubes"]
    wrong = replace(bad, case=replace(bad.case, violated=(), numerics_violated=False))  # a lie
    monkeypatch.setattr(cmd, "SweepOptions",
                        lambda scale, pipeline: replace(good, cases=(wrong,), scale=scale))
    res = run_cli(["report", "--out", str(tmp_path / "bad")])
    assert res.code == 1
    assert "did not give the expected verdict: mesh_mlo_1d_8cubes" in res.err
    assert "**UNEXPECTED**" in (tmp_path / "bad" / "README.md").read_text()


def test_the_verify_scale_benchmark_format_is_read() -> None:
    from meshproof.report.pages import search_baselines, verify_time_series

    data = {"schema": "meshproof/verify-scale-v1",
            "rows": [{"case": "2d 2x4", "ranks": 8, "seconds_total": 0.2,
                      "deadlock_freedom": 0.05, "exactly_once_merge": 0.1},
                     {"case": "1d 16", "ranks": 16, "seconds_total": 1.0,
                      "deadlock_freedom": 0.0, "exactly_once_merge": 0.9}],
            "baselines": [{"case": "2d 4x4", "certificate_seconds": 0.05,
                           "search_seconds": 0.3}]}
    series = verify_time_series(data)
    assert series == {"mesh_mlo_2d · all five properties": [(8, 0.2)],
                      "mesh_mlo_2d · deadlock_freedom": [(8, 0.05)],
                      "mesh_mlo_2d · exactly_once_merge": [(8, 0.1)],
                      "mesh_mlo_1d · all five properties": [(16, 1.0)],
                      "mesh_mlo_1d · exactly_once_merge": [(16, 0.9)]}  # 0 s: no log point
    assert search_baselines(data) == [("2d 4x4", 0.05, 0.3)]
    assert verify_time_series({"rows": "nonsense"}) == {}


def test_html_page_beside_the_readme_is_byte_identical_on_rerun(
        report: tuple[Path, dict[str, bytes]]) -> None:
    out, _ = report
    write_report(out, fast=True, html=True)
    first = (out / "report.html").read_bytes()
    write_report(out, fast=True, html=True)
    assert (out / "report.html").read_bytes() == first
    text = first.decode()
    assert text.startswith("<!DOCTYPE html>") and text.count("<svg") == 2 * 6
    assert "Kernels</h2>" in text and "Facts from the study, checked</h2>" in text
    write_report(out, fast=True)  # without --html the page is not kept stale
    assert not (out / "report.html").exists()
