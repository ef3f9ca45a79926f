"""`meshproof placements`: the table, the placements-v1 JSON, exit codes, bad input."""

from __future__ import annotations

import json

import jsonschema
from helpers import Golden, RunCli, assert_bad_input

from meshproof.schemas import load_schema

SHAPES = ["--arg", "S_kv_per_rank=8", "--arg", "d_head=4", "--arg", "h_q=1"]


def test_text_golden_row_then_column_2x4(run_cli: RunCli, golden: Golden) -> None:
    res = run_cli(["placements", "mesh_mlo_2d", "--mesh", "2x4", *SHAPES])
    assert res.code == 0, res.err
    assert res.out.splitlines()[-1] == "legal at cube_start 0, 4, 8 (3 of 9)"
    golden("placements_mesh_mlo_2d_2x4.txt", res.out)


def test_json_golden_physical_rank(run_cli: RunCli, golden: Golden) -> None:
    args = ["placements", "mesh_mlo_2d_physical_rank", "--mesh", "2x4", *SHAPES, "--json"]
    first, second = run_cli(args), run_cli(args)
    assert first.code == 0 and first.out == second.out   # byte-identical
    doc = json.loads(first.out)
    assert doc["schema"] == "meshproof/placements-v1"
    assert [p["cube_start"] for p in doc["placements"] if p["ok"]] == [0]
    assert doc["placements"][8]["violated"][0] == "launch_confinement"
    jsonschema.Draft202012Validator(load_schema("placements-v1")).validate(doc)
    golden("placements_physical_rank_2x4.json", first.out)


def test_no_legal_placement_exits_1(run_cli: RunCli) -> None:
    # batch on batch over 2 users on cube_mesh: PE 1 has no inter-cube link anywhere
    args = ["placements", "mesh_mlo_2d_batch", "--mesh", "2x4", "--wiring", "cube_mesh",
            "--pes", "2", *SHAPES]
    res = run_cli(args)
    assert res.code == 1
    assert res.out.splitlines()[-1] == "legal at cube_start none (0 of 9)"
    doc = json.loads(run_cli([*args, "--json"]).out)
    assert doc["placements"][0]["message"].startswith(
        "direction_legality: meshproof/kernels/mesh_mlo.py:53: rank (cube 0, pe 1): error: "
        "send E uses a link the wiring does not have (IpcqInvalidDirection): cube_mesh links "
        "only PE 0 of each cube; pe 1 of cube 0")


def test_bad_input(run_cli: RunCli, tmp_path: object) -> None:
    assert_bad_input(run_cli(["placements", "mesh_mlo_2d", "--cube-start", "8"]),
                     "placements tries every cube_start; drop --cube-start")
    assert_bad_input(run_cli(["placements", "mesh_mlo_2d", "--empty-shard", "0,0"]),
                     "--empty-shard names physical ranks, and placements moves the launch")
    assert_bad_input(run_cli(["placements", "--launches", "tests/data/two_batch_groups.toml"]),
                     "placements moves one launch; --launches lists launches")
    assert_bad_input(run_cli(["placements", "mesh_mlo_2d", "--mesh", "8x4"]),
                     "cubes 0..31 do not fit the system 1x4x4")
