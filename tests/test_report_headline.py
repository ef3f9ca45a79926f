"""The headline report: panels as deployments, placement tables, the benchmark files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import WIDE

from meshproof.gate.matrix import resolve_case
from meshproof.gate.pipeline import Pipeline
from meshproof.model.schedule import GroupMode
from meshproof.report.cases import scaling_cases
from meshproof.report.headline import panel_record
from meshproof.report.headline_page import headline_section


def test_scaling_covers_decode_with_b1_and_b8_at_both_scales() -> None:
    for scale in ("validation", "headline"):
        cases = {(c.panel, c.users, c.h_q): c for c in scaling_cases(scale)}
        assert set(cases) == {(p, b, h) for p, bs in (("multi_user_prefill", (1,)),
                                                       ("multi_user_decode", (1, 8)))
                              for b in bs for h in (1, 2, 4)}
        _, b8 = resolve_case(cases[("multi_user_decode", 8, 2)].case.case)
        assert (b8.spec.kernel, b8.spec.wiring) == ("mesh_mlo_2d_batch", "cube_mesh_all_pes")
        assert b8.spec.groups is GroupMode.PE and b8.spec.arg("h_q") == 2
        _, b1 = resolve_case(cases[("multi_user_decode", 1, 1)].case.case)
        assert (b1.spec.kernel, b1.spec.wiring) == ("mesh_mlo_2d", "cube_mesh")
        assert b1.spec.cube_start == 0   # one kv group of the headline panel


def test_a_panel_record_sums_its_launches() -> None:
    record = panel_record("multi_user_decode", "validation", Pipeline(), WIDE)
    assert record["as_expected"] and record["verdict"]["ok"]
    assert [p["status"] for p in record["verdict"]["properties"]] == ["proved"] * 7
    assert record["launches"] == [{"cube_start": 0, "cubes": 4, "ok": True, "violated": [],
                                   "min_queue_depth": 3}]
    assert record["separation"]["status"] == "proved"
    assert record["sim"]["timing"]["comm_steps"] == 3 and record["busy_cubes"] == 4


def _sweep() -> dict[str, Any]:
    rows = [{"cube_start": k, "cubes": f"SIP 0 c{k}", "ok": k in (0, 4, 8),
             "violated": [] if k in (0, 4, 8) else ["direction_legality"],
             "message": "all 7 properties proved" if k in (0, 4, 8) else
             "direction_legality: meshproof/kernels/mesh_mlo.py:53: ..."} for k in range(9)]
    return {"scale": "headline", "panels": [], "steps_1d_vs_2d": [
        {"mesh": "4x4", "steps_1d": 15, "steps_2d": 6, "diameter": 6,
         "latency_1d_s": 2e-5, "latency_2d_s": 1e-5}],
        "headline": {"system": "1x4x4", "contrasts": [], "placements": [
            {"kernel": "mesh_mlo_2d", "wiring": "cube_mesh", "cubes": 8, "pes": 8,
             "mesh": "2x4", "placements": 9, "legal": [0, 4, 8], "relocated": True,
             "traced_how": "one trace", "rows": rows}]}}


def test_the_section_reads_the_benchmarks_and_says_how_to_make_missing_ones(
        tmp_path: Path) -> None:
    lines, made, notes = headline_section(_sweep(), tmp_path, tmp_path)
    text = "\n".join(lines)
    assert "| `mesh_mlo_2d` | `cube_mesh` mesh 2x4 | 9 | 0, 4, 8 (3) | one trace |" in text
    assert "the 1D line takes 15 communication steps, the 2D row-then-column kernel 6" in text
    assert made == [("figures/headline_placements.png", "Every built-in kernel at every "
                     "placement of the headline system")]
    assert (tmp_path / "figures" / "headline_placements.png").is_file()
    assert any("sim_scale.json missing: run `python benchmarks/sim_scale.py" in n
               for n in notes)
    machine = {"cpu": "Test CPU", "cpus": 2, "memory_gib": 23.0, "os": "Linux",
               "python": "3.11", "numpy": "2", "blas_threads": "1",
               "load_average_1m": 0.5, "date_utc": "2026-12-01 12:00"}
    (tmp_path / "headline_verify.json").write_text(json.dumps({
        "schema": "meshproof/headline-verify-v1", "machine": machine, "target_s": 60.0,
        "proofs_carried": {"total_s": 40.0, "panels": [
            {"panel": "multi_user_decode", "launches": 8, "ranks": 512, "trace_s": 2.0,
             "verify_s": 2.5}]},
        "every_launch_checked": {"total_s": 55.0, "panels": [
            {"panel": "multi_user_decode", "launches": 8, "ranks": 512, "trace_s": 2.0,
             "verify_s": 14.0}]}}), encoding="utf-8")
    lines, _, notes = headline_section(_sweep(), tmp_path, tmp_path)
    text = "\n".join(lines)
    assert "| `multi_user_decode` | 8 | 512 | 2.0 s | 2.5 s | 14.0 s |" in text
    assert "proofs carried 40.0 s, every launch checked 55.0 s (target 60.0 s)" in text
    assert "Measured on 2 x Test CPU, 23.0 GiB" in text
    assert not any("headline_verify.json" in n for n in notes)
