"""trace, verify and simulate of several launches at once: `--launches FILE` and the
headline multi-user panels."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers import Golden, RunCli, assert_bad_input

from meshproof.schemas import load_schema

FILE = "tests/data/two_batch_groups.toml"


def test_verify_launches_text_golden(run_cli: RunCli, golden: Golden) -> None:
    res = run_cli(["verify", "--launches", FILE, "--tolerance", "0.1"])
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert lines[0] == ("two_batch_groups: 2 launch(es) of mesh_mlo_2d_batch on "
                        "cube_mesh_all_pes (1x4x4), 16 cubes, 128 endpoints, queue depth 4")
    # seconds vary from run to run: the golden file holds the rest
    golden("verify_two_batch_groups.txt",
           "\n".join(" ".join(t for t in line.split() if not re.fullmatch(r"\d+\.\d\d", t))
                     for line in lines if not line.startswith(("proved:",
                                                               "launch_separation:")))
           + "\n")
    assert any(line.startswith("launch_separation: proved") for line in lines)


def test_verify_launches_json(run_cli: RunCli) -> None:
    args = ["verify", "--launches", FILE, "--json", "--no-timings", "--tolerance", "0.1"]
    first, second = run_cli(args), run_cli(args)
    assert first.code == 0 and first.out == second.out
    doc = json.loads(first.out)
    assert doc["schema"] == "meshproof/deployment-v1" and doc["ok"]
    assert [v["launch"]["cube_start"] for v in doc["launches"]] == [0, 8]
    assert all(v["schema"] == "meshproof/verdict-v1" for v in doc["launches"])
    assert doc["separation"]["status"] == "proved" and "seconds" not in doc["separation"]


def test_simulate_and_trace_launches(run_cli: RunCli) -> None:
    res = run_cli(["simulate", "--launches", FILE])
    assert res.code == 0, res.err
    assert "launch 2 (cubes 8..15): numerics ok, 8 group(s), 64 checked rank(s)" in res.out
    assert "all launches together (default (assumed, not measured)): latency" in res.out
    doc = json.loads(run_cli(["trace", "--launches", FILE, "--json"]).out)
    assert doc["schema"] == "meshproof/deployment-trace-v1"
    assert [s["schema"] for s in doc["launches"]] == ["meshproof/schedule-v1"] * 2


def test_a_headline_multi_user_panel_is_all_its_launches(run_cli: RunCli) -> None:
    res = run_cli(["trace", "--panel", "multi_user_prefill", "--scale", "headline"])
    assert res.code == 0, res.err
    assert res.out.splitlines()[0].startswith(
        "multi_user_prefill (headline): 8 launch(es) of mesh_kv_snake on cube_mesh (4x4x4), "
        "64 cubes, 512 endpoints")
    assert res.out.count("\nlaunch ") == 8
    # --cube-start picks one launch of the panel
    one = run_cli(["trace", "--panel", "multi_user_prefill", "--scale", "headline",
                   "--cube-start", "16"])
    assert one.out.startswith("mesh_kv_snake on cube_mesh (4x4x4), cubes 16..23")


def test_b8_on_cube_mesh_names_pes_1_to_7_and_the_line(run_cli: RunCli) -> None:
    base = ["verify", "--panel", "multi_user_decode", "--scale", "headline", "--cube-start",
            "0", "--wiring", "cube_mesh", "--only", "direction_legality"]
    res = run_cli(base)
    assert res.code == 1
    summary = " ".join(res.out.split())
    assert "1344 op(s) on 56 rank(s) use links cube_mesh lacks: cube 0 pe 1 E/S" in summary
    assert all(f"cube 7 pe {pe} N/W" in summary for pe in range(1, 8))
    assert "meshproof/kernels/mesh_mlo.py:53: rank (cube 0, pe 1): error: send E uses a link " \
           "the wiring does not have (IpcqInvalidDirection): cube_mesh links only PE 0" in res.out
    doc = json.loads(run_cli([*base, "--json"]).out)
    diags = doc["properties"][0]["counterexample"]["diagnostics"]
    assert {d["pe"] for d in diags} == set(range(1, 8))       # PE 0 has its links
    assert {d["source"].rsplit(":", 1)[0] for d in diags} == {"meshproof/kernels/mesh_mlo.py"}


def test_bad_input(run_cli: RunCli) -> None:
    assert_bad_input(run_cli(["verify", "mesh_mlo_2d", "--launches", FILE]),
                     f"--launches {FILE} describes every launch; drop KERNEL")
    assert_bad_input(run_cli(["verify", "--launches", FILE, "--mesh", "1x4", "--arg", "S_q=2"]),
                     "drop --mesh, --arg")
    assert_bad_input(run_cli(["verify", "--launches", FILE, "--diagram", "x.svg"]),
                     "--diagram draw(s) one launch, and two_batch_groups is 2 launches")
    assert_bad_input(run_cli(["verify", "--launches", "tests/data/nope.toml"]),
                     "launches file tests/data/nope.toml does not exist")
    assert_bad_input(run_cli(["verify", "--launches", "tests/data"]),
                     "launches file tests/data is a directory; pass a TOML file with [[launch]] "
                     "tables")


def _check(doc: dict[str, Any]) -> None:
    name = str(doc["schema"]).removeprefix("meshproof/")
    jsonschema.Draft202012Validator(load_schema(name)).validate(doc)


def test_every_deployment_output_validates_against_its_schema(run_cli: RunCli,
                                                               tmp_path: Path) -> None:
    verify = json.loads(run_cli(["verify", "--launches", FILE, "--json"]).out)
    _check(verify)
    for launch in verify["launches"]:
        _check(launch)
    _check(json.loads(run_cli(["simulate", "--launches", FILE, "--json"]).out))
    traced = json.loads(run_cli(["trace", "--launches", FILE, "--json"]).out)
    _check(traced)
    for schedule in traced["launches"]:
        _check(schedule)
    # a violated deployment: the physical-rank bug at cube 8 sends into the group at 0
    crossing = tmp_path / "crossing.toml"
    crossing.write_text('mesh = "2x4"\nargs = { S_kv_per_rank = 8, d_head = 4 }\n'
                        '[[launch]]\nkernel = "mesh_mlo_2d"\ncube_start = 0\n'
                        '[[launch]]\nkernel = "mesh_mlo_2d_physical_rank"\ncube_start = 8\n',
                        encoding="utf-8")
    res = run_cli(["verify", "--launches", str(crossing), "--json"])
    assert res.code == 1
    doc = json.loads(res.out)
    _check(doc)
    assert doc["separation"]["crossings"] and doc["carried_from"] == [None, None]
    doc["separation"]["status"] = "unknown"     # separation is an enumeration: decided
    with pytest.raises(jsonschema.ValidationError):
        _check(doc)
