"""`meshproof simulate ... --witness FILE`: replays a numeric_safety witness written by
`meshproof verify --json` and prints the same error; bad input is one line, exit 2."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import assert_bad_input, machine_witness, trace_kernel

Run = Callable[[Sequence[str]], Any]
F16 = ["examples/f16_design.py::mesh_f16_design", "--wiring", "cube_mesh", "--cubes", "8",
       "--arg", "mesh_rows=2", "--arg", "mesh_cols=4", "--arg", "S_q=1", "--arg",
       "S_kv_per_rank=16", "--arg", "h_q=1", "--arg", "h_kv=1", "--arg", "d_head=8"]


def _verdict(run_cli: Run, tmp_path: Path, *args: str) -> tuple[Path, dict[str, Any]]:
    res = run_cli(["verify", *args, "--json"])
    path = tmp_path / "verdict.json"
    path.write_text(res.out, encoding="utf-8")
    prop = next(p for p in json.loads(res.out)["properties"] if p["name"] == "numeric_safety")
    cex = prop["counterexample"]
    return path, (cex or {}).get("witness") or {}


def test_the_f16_designs_witness_replays_with_the_verdicts_error(run_cli: Run,
                                                                tmp_path: Path) -> None:
    path, stated = _verdict(run_cli, tmp_path, *F16, "--input-bound", "16")
    assert stated["error"] > 1e-2
    res = run_cli(["simulate", *F16, "--witness", str(path)])
    assert res.code == 1, res.err          # out of tolerance, as the verdict says
    assert f"witness inputs from {path}" in res.out
    line = next(x for x in res.out.splitlines() if "witness element" in x)
    t, h, e = stated["element"]
    assert f"(query row {t}, head {h}, feature {e}) of group 0 on c0p0" in line
    assert f"simulated {stated['machine']:.9g}" in line
    assert f"|diff|/max|V| {stated['error']:.4g}" in line
    assert line.endswith("agrees with the verdict"), line
    assert "explained by numeric_safety" in res.out

    doc = json.loads(run_cli(["simulate", *F16, "--witness", str(path), "--json"]).out)
    w = doc["numeric"]["witness"]
    assert doc["numeric"]["inputs"] == "witness" and w["agrees"] is True
    assert w["simulated"] == stated["machine"] and w["verdict_error"] == stated["error"]
    assert f"{w['error']:.4g}" == f"{stated['error']:.4g}"


def test_a_bare_witness_object_replays_too(run_cli: Run, tmp_path: Path) -> None:
    _, stated = _verdict(run_cli, tmp_path, "mesh_mlo_1d", "--arg", "msg_dtype=f16")
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(stated), encoding="utf-8")
    res = run_cli(["simulate", "mesh_mlo_1d", "--arg", "msg_dtype=f16", "--witness",
                   str(bare)])
    assert res.code == 1, res.err
    assert "agrees with the verdict" in res.out and f"{stated['machine']:.9g}" in res.out


def test_a_witness_with_a_small_error_replays_within_tolerance(run_cli: Run,
                                                               tmp_path: Path) -> None:
    """Correct use, a benign witness: f32 merges at |inputs| <= 16 (the verifier's machine
    value of the worst element, error ~4e-7·max|V|) replay with exit 0, in agreement."""
    path = tmp_path / "w.json"
    doc = machine_witness(trace_kernel("mesh_mlo_1d"), path)
    assert doc["error"] < 1e-5
    res = run_cli(["simulate", "mesh_mlo_1d", "--witness", str(path)])
    assert res.code == 0, res.out + res.err
    assert f"witness inputs from {path}, 1 group(s)): ok" in res.out
    line = next(x for x in res.out.splitlines() if "witness element" in x)
    assert f"simulated {doc['machine']:.9g}" in line
    assert line.endswith("agrees with the verdict"), line


def test_inputs_that_are_not_the_verdicts_run_and_say_the_value_differs(
        run_cli: Run, tmp_path: Path) -> None:
    """The f16 design's witness with Q and K scaled by 1/256 (exact in f16) and V made
    positive (the witness may balance ±B so that attention is near 0, where the
    simulator's relative error is undefined): within tolerance, and the line says the
    verdict's machine value is not reproduced."""
    _, stated = _verdict(run_cli, tmp_path, *F16, "--input-bound", "16")
    small = dict(stated, inputs={t: {g: (_scaled(x, 1 / 256) if t != "v" else _abs(x))
                                     for g, x in by.items()}
                                 for t, by in stated["inputs"].items()})
    path = tmp_path / "small.json"
    path.write_text(json.dumps(small), encoding="utf-8")
    res = run_cli(["simulate", *F16, "--witness", str(path)])
    assert res.code == 0, res.out + res.err
    assert "witness inputs" in res.out and "): ok" in res.out
    line = next(x for x in res.out.splitlines() if "witness element" in x)
    # the inputs are not the verdict's: its machine value is not reproduced, and it says so
    assert "DIFFERS from the verdict's machine value" in line


def _scaled(x: Any, by: float) -> Any:
    return [_scaled(y, by) for y in x] if isinstance(x, list) else x * by


def _abs(x: Any) -> Any:
    return [_abs(y) for y in x] if isinstance(x, list) else abs(x)


@pytest.mark.parametrize(("make", "extra", "fragments"), [
    (lambda d: None, [], ("no such file",)),
    (lambda d: d.write_text("{nope", encoding="utf-8"), [], ("not JSON",)),
    (lambda d: d.write_text(json.dumps({"properties": [
        {"name": "numeric_safety", "status": "proved", "counterexample": None}]}),
        encoding="utf-8"), [], ("numeric_safety is proved", "carries no rounding witness")),
])
def test_a_bad_witness_file_is_one_line_exit_2(run_cli: Run, tmp_path: Path,
                                              make: Callable[[Path], object],
                                              extra: list[str],
                                              fragments: tuple[str, ...]) -> None:
    path = tmp_path / "w.json"
    make(path)
    res = run_cli(["simulate", "mesh_mlo_1d", "--witness", str(path), *extra])
    assert_bad_input(res, f"--witness {path}", *fragments)


def test_a_verdict_without_a_witness_and_a_launch_that_does_not_fit_are_exit_2(
        run_cli: Run, tmp_path: Path) -> None:
    proved, stated = _verdict(run_cli, tmp_path, "mesh_mlo_1d")
    assert stated == {}
    assert_bad_input(run_cli(["simulate", "mesh_mlo_1d", "--witness", str(proved)]),
                     "numeric_safety is proved in this verdict")
    path, _ = _verdict(run_cli, tmp_path, "mesh_mlo_1d", "--arg", "msg_dtype=f16")
    res = run_cli(["simulate", "mesh_mlo_1d", "--arg", "msg_dtype=f16", "--arg",
                   "S_kv_per_rank=8", "--witness", str(path)])
    assert_bad_input(res, f"--witness {path}: witness.inputs.k[0] has shape (128, 1, 8), "
                          "but this launch's "
                          "group 0 needs (64, 1, 8)", "replay it with the launch it was "
                                                      "verified with")


@pytest.mark.parametrize(("extra", "fragment"), [
    (["--seed", "3"], "--witness W feeds the witness's inputs, so --seed would be ignored"),
    (["--inputs", "peaked"], "so --inputs would be ignored"),
    (["--no-numerics"], "--witness builds the numeric check's inputs, which --no-numerics "
                        "skips"),
])
def test_options_the_witness_makes_moot_are_refused(run_cli: Run, tmp_path: Path,
                                                    extra: list[str], fragment: str) -> None:
    res = run_cli(["simulate", "mesh_mlo_1d", "--witness", "W", *extra])
    assert_bad_input(res, fragment)


def test_several_launches_at_once_are_refused(run_cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    machine_witness(trace_kernel("mesh_mlo_1d"), path)
    res = run_cli(["simulate", "--launches", "tests/data/two_batch_groups.toml",
                   "--witness", str(path)])
    assert_bad_input(res, "--witness replays one launch", "pick the one verified with "
                                                          "--cube-start K")
