"""Review of the simulator, the report and the gate: each test pins one fixed problem.

Kept fast (small launches, a fake verifier where the gate only needs expectations).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import pytest
from conftest import REPO_ROOT, trace_kernel

from meshproof.atomic import write_atomic
from meshproof.cli import gate_cmd, main, report_cmd, simulate_cmd
from meshproof.errors import BadInput, ConfigError, HarnessError, OutputError
from meshproof.model.channels import derive_channels
from meshproof.model.hardware import HardwareProfile, LinkCost
from meshproof.report import api as report_api
from meshproof.report import figures
from meshproof.report import sweep as report_sweep
from meshproof.report.api import write_report
from meshproof.report.cases import VALIDATION_CASES
from meshproof.report.schedule_diagram import DiagramOptions, schedule_diagram
from meshproof.report.sweep import SweepOptions
from meshproof.sim import checking
from meshproof.sim.api import SimConfig, simulate
from meshproof.sim.checking import plan_numerics
from meshproof.sim.inputs import InputKind
from meshproof.sim.memory import estimate_batch
from meshproof.testing import assert_verified

Run = Callable[[Sequence[str]], Any]
REPORT_CASES = {c.name: c for c in VALIDATION_CASES}

# Modules this review owns; the project keeps modules under ~400 lines.
REVIEWED = [*sorted((REPO_ROOT / "meshproof" / "sim").glob("*.py")),
            *sorted((REPO_ROOT / "meshproof" / "report").glob("*.py")),
            *sorted((REPO_ROOT / "meshproof" / "verify").glob("gate*.py")),
            REPO_ROOT / "meshproof" / "verify" / "junit.py",
            REPO_ROOT / "meshproof" / "testing.py",
            *(REPO_ROOT / "meshproof" / "cli" / f"{n}_cmd.py"
              for n in ("simulate", "report", "gate"))]


# --- the schedule diagram, split into modules with one job each --------------------------

@pytest.mark.parametrize("path", REVIEWED, ids=lambda p: p.name)
def test_reviewed_modules_stay_small(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines < 400, f"{path.name} has {lines} lines; split it by job"


def test_schedule_diagram_still_draws_caps_and_faults() -> None:
    # the 1D kernel over 8 cubes: illegal ports (red stubs), capped to 3 lanes of 5 nodes
    schedule = trace_kernel("mesh_mlo_1d", wiring="cube_mesh", cubes=8,
                            args=(("rank_axis", 1),))
    small = DiagramOptions(max_lanes=3, max_nodes_per_lane=5)
    first = schedule_diagram(schedule, None, small)
    assert first.source == schedule_diagram(schedule, None, small).source
    assert first.lanes_shown == 3 and first.lanes_elided == 5
    assert first.nodes_elided > 0 and first.faults_drawn > 0
    # the root-cause lanes (cube 3 sends E, cube 4 receives W) are the ones kept
    assert '"c3p0_head"' in first.source and '"c4p0_head"' in first.source
    assert "no E link" in first.source and "no W link" in first.source
    assert "op groups not shown (cap 5 nodes per lane)" in first.source


# --- helpers ------------------------------------------------------------------------------

def _one_line_error(res: Any, code: int = 2) -> str:
    """The CLI's promise for bad input: exit `code`, one line on stderr, no traceback."""
    assert res.code == code, (res.code, res.out, res.err)
    assert res.err.count("\n") == 1 and res.err.startswith("meshproof: error: "), res.err
    assert "Traceback" not in res.err + res.out
    return str(res.err)


# --- the simulator refuses sizes that cannot fit, before allocating anything --------------

def test_absurd_sizes_are_refused_with_an_estimate_and_the_fix(run_cli: Run) -> None:
    res = run_cli(["simulate", "mesh_mlo_1d", "--arg", "S_kv_per_rank=1000000000000"])
    err = _one_line_error(res)
    assert "GiB" in err and "available" in err
    assert "S_kv_per_rank=1000000000000" in err          # what was asked
    assert "lower S_kv_per_rank" in err and "--no-numerics" in err   # how to fix it
    # the JSON mode refuses the same way (nothing on stdout)
    res = run_cli(["simulate", "mesh_mlo_1d", "--arg", "S_kv_per_rank=10000000000",
                   "--json"])
    _one_line_error(res)
    assert res.out == ""


def test_no_numerics_gives_timing_and_op_log_at_any_size(run_cli: Run) -> None:
    res = run_cli(["simulate", "mesh_mlo_1d", "--arg", "S_kv_per_rank=1000000000000",
                   "--no-numerics", "--json"])
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["numeric"] is None and doc["ok"] is True
    assert doc["timing"]["comm_steps"] == 7 and doc["op_log"]["gemm"] == 16


def test_memory_limit_shrinks_batches_before_refusing() -> None:
    # 4 cubes, each its own 8-PE line: 4 groups of one class, normally one batch
    schedule = trace_kernel("mesh_mlo_1d", cubes=4)
    table = derive_channels(schedule)
    whole = plan_numerics(schedule, table, 1 << 30, memory_limit=1 << 40)
    assert [c.batch for c in whole.classes] == [4]
    one = estimate_batch(schedule, whole.groups[0], whole.classes[0].layout, 1)
    tight = plan_numerics(schedule, table, 1 << 30, memory_limit=2 * one.total)
    assert [c.batch for c in tight.classes] == [2]
    # batching does not change the numbers
    free = simulate(schedule, SimConfig(timing=False))
    capped = simulate(schedule, SimConfig(timing=False, memory_limit_bytes=2 * one.total))
    assert free.to_json() == capped.to_json()
    with pytest.raises(HarnessError, match=r"needs about .* GiB .* more than the"):
        simulate(schedule, SimConfig(timing=False, memory_limit_bytes=one.total - 1))


def test_the_estimate_counts_inputs_intermediates_and_reference() -> None:
    schedule = trace_kernel("mesh_mlo_1d", args=(("S_kv_per_rank", 1000), ("d_head", 64)))
    plan = plan_numerics(schedule, derive_channels(schedule), 1 << 30, memory_limit=1 << 40)
    m = plan.memory
    kv = 2 * 8 * 1000 * 64 * 4                         # float32 K and V of 8 shards
    assert m.inputs == kv + 64 * 4                     # plus Q (1 row, 1 head)
    assert m.intermediates >= 3 * 1000 * 4             # the scores of one rank, a few times
    assert m.reference > 0 and m.total == m.inputs + m.outputs + m.intermediates + \
        m.reference


def test_running_out_of_memory_anyway_is_one_clear_line(
        run_cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_memory(*_: object, **__: object) -> None:
        raise MemoryError("Unable to allocate 23.8 GiB")

    monkeypatch.setattr(checking, "make_inputs", no_memory)
    err = _one_line_error(run_cli(["simulate", "mesh_mlo_1d"]))
    assert "out of memory simulating mesh_mlo_1d" in err and "lower S_kv_per_rank" in err


def test_negative_seed_is_bad_input(run_cli: Run) -> None:
    err = _one_line_error(run_cli(["simulate", "mesh_mlo_1d", "--seed", "-1"]))
    assert "--seed" in err
    with pytest.raises(HarnessError, match="seed -1 is negative"):
        simulate(trace_kernel("mesh_mlo_1d"), SimConfig(seed=-1))


@pytest.mark.parametrize(("text", "needle"), [
    ("gemm_flops_per_pe = nan\n", "gemm_flops_per_pe must be a positive number (not nan or inf)"),
    ("dma_bandwidth_Bps = inf\n", "dma_bandwidth_Bps must be a positive number (not nan"),
    ("[inter_sip]\nlatency_s = inf\n", "inter_sip.latency_s must be a positive number"),
    ("gemm_flops_per_pe = -1e12\n", "gemm_flops_per_pe must be a positive number"),
    ("gemm_flop_per_pe = 1e12\n", "unknown key(s) gemm_flop_per_pe"),
    ("gemm_flops_per_pe = \n", "is not valid TOML"),
])
def test_bad_hardware_profiles_are_one_line(run_cli: Run, tmp_path: Path, text: str,
                                           needle: str) -> None:
    hw = tmp_path / "hw.toml"
    hw.write_text(text, encoding="utf-8")
    assert needle in _one_line_error(run_cli(["simulate", "mesh_mlo_1d", "--hw", str(hw),
                                              "--json"]))


def test_profile_check_guards_the_library_too() -> None:
    bad = HardwareProfile(name="x", inter_cube=LinkCost(1e-7, math.nan))
    with pytest.raises(ConfigError, match=r"inter_cube.bandwidth_Bps must be a finite"):
        simulate(trace_kernel("mesh_mlo_1d"), SimConfig(hardware=bad))
    # numerics alone do not use the profile
    assert simulate(trace_kernel("mesh_mlo_1d"),
                    SimConfig(hardware=bad, timing=False)).ok


# --- the Perfetto trace: checked before simulating, readable like any output --------------

@pytest.mark.parametrize("where", ["missing/t.json", "afile/t.json", "adir"])
def test_bad_perfetto_paths_fail_before_simulating(run_cli: Run, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   where: str) -> None:
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    (tmp_path / "adir").mkdir()

    def not_reached(*_: object, **__: object) -> None:
        raise AssertionError("simulated although the trace path cannot be written")

    monkeypatch.setattr(simulate_cmd, "simulate", not_reached)
    err = _one_line_error(run_cli(["simulate", "mesh_mlo_1d", "--perfetto",
                                   str(tmp_path / where)]))
    want = {"missing/t.json": "does not exist", "afile/t.json": "is a file, not a directory",
            "adir": "is a directory"}[where]
    assert want in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "afile"]


def test_outputs_get_normal_permissions(run_cli: Run, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        trace_path = tmp_path / "t.json"
        assert run_cli(["simulate", "mesh_mlo_1d", "--perfetto", str(trace_path)]).code == 0
        write_atomic(tmp_path / "x.bin", b"x")
    finally:
        os.umask(old)
    for path in (trace_path, tmp_path / "x.bin"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# --- the simulator's numbers, as spec/simulator.md states them ---------------------------

@pytest.mark.parametrize("kernel,options", [
    ("mesh_mlo_1d", {}), ("ring_mlo", {}), ("mesh_kv", {}),
    ("mesh_mlo_2d", {"mesh": "2x4", "wiring": "cube_mesh"})])
def test_correct_kernels_pass_at_s_q_16_gqa_8_on_peaked_inputs(kernel: str,
                                                               options: dict[str, Any]) -> None:
    args = (("S_q", 16), ("h_q", 8), ("h_kv", 1), ("S_kv_per_rank", 32), ("d_head", 16))
    schedule = trace_kernel(kernel, args=args, **options)
    numeric = simulate(schedule, SimConfig(inputs=InputKind.PEAKED, timing=False)).numeric
    assert numeric is not None and numeric.ok, numeric.message if numeric else ""
    assert numeric.tolerance == 1e-2 and numeric.dtypes == ("f16", "f32")
    # f16 storage lands near 3e-4: 30x inside the tolerance, not at its edge
    assert numeric.rel_err is not None and numeric.rel_err < 1e-3


def test_peaked_inputs_can_hide_a_normalised_merge_but_normal_inputs_catch_it() -> None:
    schedule = trace_kernel("mesh_mlo_1d_normalised_merge")
    peaked = [simulate(schedule, SimConfig(inputs=InputKind.PEAKED, seed=seed, timing=False))
              for seed in (0, 1)]
    assert [r.ok for r in peaked] == [False, True]          # seed 1: every ℓ ≈ 1
    for seed in range(4):
        normal = simulate(schedule, SimConfig(seed=seed, timing=False)).numeric
        assert normal is not None and normal.rel_err is not None and normal.rel_err > 0.3


def test_simulate_json_is_byte_identical_across_runs(run_cli: Run) -> None:
    args = ["simulate", "--panel", "multi_user_prefill", "--inputs", "peaked", "--json"]
    first, second = run_cli(args), run_cli(args)
    assert first.code == 0 and first.out == second.out
    doc = json.loads(first.out)
    assert list(doc) == sorted(doc) and "seconds" not in first.out


# --- the report: byte-identical reruns (figures and diagrams too), --fast, bad --out ------

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
                         (report_sweep, "verify"), (report_sweep, "simulate"),
                         (report_sweep, "trace")):
        monkeypatch.setattr(module, name, no_runs)
    write_report(copy, fast=True)
    assert _files(copy) == before


def test_figures_ignore_the_users_matplotlib_settings(tmp_path: Path) -> None:
    steps = [{"mesh": "1x4", "rows": 1, "cols": 4, "n": 4, "diameter": 3, "steps_1d": 3,
              "steps_2d": 3, "latency_1d_s": 1e-6, "latency_2d_s": 1e-6}]
    figures.steps_figure(steps, tmp_path / "a.png")
    with matplotlib.rc_context({"lines.linewidth": 7.0, "figure.facecolor": "red",
                                "font.size": 20.0, "savefig.dpi": 300.0}):
        figures.steps_figure(steps, tmp_path / "b.png")
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()


def test_drawing_leaves_the_matplotlib_backend_alone() -> None:
    code = ("import matplotlib; matplotlib.use('svg'); import meshproof.report.figures, "
            "meshproof.report.xdot_paint; print(matplotlib.get_backend())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "svg"


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


def test_report_refuses_a_directory_that_is_not_a_report(run_cli: Run, tmp_path: Path) -> None:
    mine = tmp_path / "docs"
    (mine / "figures").mkdir(parents=True)
    (mine / "README.md").write_text("my docs", encoding="utf-8")
    for extra in ([], ["--fast"]):
        err = _one_line_error(run_cli(["report", "--out", str(mine), *extra]))
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
        run_cli: Run, small_report: Path, tmp_path: Path, edit: Callable[[dict[str, Any]], Any],
        needle: str) -> None:
    copy = tmp_path / "rep"
    shutil.copytree(small_report, copy)
    sweep = json.loads((copy / "sweep.json").read_text(encoding="utf-8"))
    edit(sweep)
    (copy / "sweep.json").write_text(json.dumps(sweep), encoding="utf-8")
    before = _files(copy)
    err = _one_line_error(run_cli(["report", "--fast", "--out", str(copy)]))
    assert needle in err and "rerun `meshproof report` without --fast" in err
    assert _files(copy) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


# --- the gate: typos and empty values are bad files; --junit is checked up front ----------

CASE = '[[case]]\nname = "a"\nkernel = "mesh_mlo_1d"\nexpect = "proved"\n'


def _gate(run_cli: Run, tmp_path: Path, text: str, *extra: str) -> Any:
    matrix = tmp_path / "proofs.toml"
    matrix.write_text(text, encoding="utf-8")
    return run_cli(["gate", str(matrix), "--no-cache", *extra])


@pytest.mark.parametrize(("edit", "needle"), [
    (("", 'sharded = []\n'), "sharded names no buffer"),
    (("", 'sharded = ""\n'), "sharded names no buffer"),
    (('"proved"', '"prooved"'), 'got \'prooved\'; did you mean "proved"?'),
    (('"proved"', '"deadlock_freedom"'),
     'a violated property goes in a list: expect = ["deadlock_freedom"]'),
    (('"mesh_mlo_1d"', '"mesh_mlo_1dd"'), "case #1 (a): unknown kernel 'mesh_mlo_1dd'"),
    (("", "args = { S_kv_per_rank = 16, S_kv_per_rnk = 8 }\n"),
     "case #1 (a): kernel mesh_mlo_1d has no parameter(s) S_kv_per_rnk"),
])
def test_gate_file_typos_are_one_line(run_cli: Run, tmp_path: Path,
                                      edit: tuple[str, str], needle: str) -> None:
    old, new = edit
    text = CASE.replace(old, new, 1) if old else CASE + new
    err = _one_line_error(_gate(run_cli, tmp_path, text))
    assert needle in err


def test_an_empty_sharded_list_cannot_make_a_known_bad_kernel_pass(run_cli: Run,
                                                                  tmp_path: Path) -> None:
    text = CASE.replace("mesh_mlo_1d", "mesh_mlo_1d_forward_running_state") + "sharded = []\n"
    assert _gate(run_cli, tmp_path, text).code == 2


@pytest.mark.parametrize("junit", ["afile/x.xml", "afile/deeper/x.xml"])
def test_unwritable_junit_fails_before_the_gate_runs(run_cli: Run, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     junit: str) -> None:
    (tmp_path / "afile").write_text("x", encoding="utf-8")

    def not_reached(*_: object, **__: object) -> None:
        raise AssertionError("the gate ran although --junit cannot be written")

    monkeypatch.setattr(gate_cmd, "run_gate", not_reached)
    err = _one_line_error(_gate(run_cli, tmp_path, CASE, "--junit", str(tmp_path / junit)))
    assert "afile is a file, not a directory" in err


def test_junit_is_written_with_normal_permissions(run_cli: Run, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        res = _gate(run_cli, tmp_path, CASE, "--junit", str(tmp_path / "ci" / "proofs.xml"))
    finally:
        os.umask(old)
    assert res.code == 0, res.err
    report = tmp_path / "ci" / "proofs.xml"
    assert stat.S_IMODE(report.stat().st_mode) == 0o644
    assert report.read_text(encoding="utf-8").count("<testcase ") == 5


@pytest.mark.parametrize(("keywords", "needle"), [
    ({"timeout": -1.0}, "assert_verified: timeout must be a positive number"),
    ({"timeout": math.nan}, "assert_verified: timeout must be a positive number"),
    ({"sharded": []}, "assert_verified: sharded names no buffer"),
    ({"args": {"S_q": [1]}}, "assert_verified: args.S_q must be a number"),
])
def test_testing_helper_misuse_is_bad_input_not_a_failed_assertion(
        keywords: dict[str, Any], needle: str) -> None:
    with pytest.raises(BadInput) as caught:
        assert_verified("mesh_mlo_1d", **keywords)
    assert needle in str(caught.value)
    assert not isinstance(caught.value, AssertionError)


@pytest.mark.parametrize(("args", "needle"), [
    (["--softmax-scale", "0", "--inputs", "peaked"], "peaked inputs need a non-zero softmax"),
    (["--softmax-scale", "nan"], "--softmax-scale must be a finite number, got nan"),
    (["--softmax-scale", "inf"], "--softmax-scale must be a finite number, got inf"),
])
def test_softmax_scales_the_harness_cannot_use_are_one_line(run_cli: Run, args: list[str],
                                                           needle: str) -> None:
    assert needle in _one_line_error(run_cli(["simulate", "mesh_mlo_1d", *args]))


def test_a_negative_softmax_scale_still_peaks() -> None:
    schedule = trace_kernel("mesh_mlo_1d", args=(("sm_scale", -0.25),))
    assert simulate(schedule, SimConfig(inputs=InputKind.PEAKED, timing=False)).ok


def test_a_write_failure_aborts_the_report_instead_of_blaming_the_kernel(
        run_cli: Run, small_report: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "rep"
    shutil.copytree(small_report, copy)
    before = _files(copy)

    def disk_full(*_: object, **__: object) -> None:
        raise OutputError("cannot write x.svg: No space left on device; pass a path in a "
                          "writable directory")

    monkeypatch.setattr(report_sweep, "render_dot", disk_full)
    monkeypatch.setattr(report_cmd, "SweepOptions", lambda scale: SMALL)
    err = _one_line_error(run_cli(["report", "--out", str(copy)]))
    assert "No space left on device" in err
    assert _files(copy) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]
