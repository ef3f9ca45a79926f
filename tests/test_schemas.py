"""The JSON Schemas shipped in meshproof/schemas: every JSON output validates against the
schema its `"schema"` string names, and the schemas reject what they must."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers import REPO_ROOT, TEST_DATA, RunCli

from meshproof.schemas import SCHEMAS, load_schema

MLO_2X4 = ["--wiring", "cube_mesh", "--mesh", "2x4"]


@cache
def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = load_schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def errors(doc: dict[str, Any], name: str | None = None) -> list[str]:
    """Why `doc` does not validate against its own schema (or `name`)."""
    found = sorted(_validator(name or str(doc["schema"]).removeprefix("meshproof/"))
                   .iter_errors(doc), key=lambda e: list(e.path))
    return [f"{list(e.path)}: {e.message[:200]}" for e in found[:5]]


def _json(run_cli: RunCli, args: list[str]) -> dict[str, Any]:
    res = run_cli(args)
    assert res.code in (0, 1, 3), res.err   # 3: numeric_safety above the tolerance
    data: dict[str, Any] = json.loads(res.out)
    return data


def test_every_schema_is_a_valid_2020_12_schema_with_one_launch() -> None:
    launches = []
    for name in SCHEMAS:
        schema = load_schema(name)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["properties"]["schema"]["const"] == f"meshproof/{name}"
        if "launch" in schema.get("$defs", {}):
            launches.append(schema["$defs"]["launch"])
    assert launches and all(launch == launches[0] for launch in launches)


@pytest.mark.parametrize("args", [["mesh_mlo_1d"], ["mesh_mlo_2d", *MLO_2X4], ["mesh_kv"]])
def test_trace_json_is_schedule_v1(run_cli: RunCli, args: list[str]) -> None:
    assert errors(_json(run_cli, ["trace", *args, "--json"])) == []


# the verdicts with details are validated by test_every_detail_shape_is_exercised
DETAILED = (["mesh_mlo_1d_recv_first"],                                  # deadlock details
            ["mesh_kv_skip_last"],                                       # merge counts, witness
            ["mesh_mlo_2d_physical_rank", *MLO_2X4, "--cube-start", "8"],  # confinement
            ["mesh_mlo_1d", "--arg", "S_kv_per_rank=131072", "--arg", "msg_dtype=f16"])  # hazards


@pytest.mark.parametrize("args", [
    ["mesh_mlo_1d"],
    ["mesh_mlo_1d", "--wiring", "cube_mesh", "--cubes", "8", "--arg", "rank_axis=1"],
    ["mesh_mlo_1d", "--only", "deadlock_freedom", "--no-timings"],
    ["mesh_mlo_1d", "--arg", "msg_dtype=f16", "--only", "numeric_safety"],  # rounding witness
])
def test_verify_json_is_verdict_v1(run_cli: RunCli, args: list[str]) -> None:
    doc = _json(run_cli, ["verify", *args, "--json"])
    assert errors(doc) == []


def test_every_detail_shape_is_exercised(run_cli: RunCli) -> None:
    """The verdicts with counterexamples validate, and carry every typed detail the schema
    describes."""
    seen: set[str] = set()
    for args in DETAILED:
        doc = _json(run_cli, ["verify", *args, "--json"])
        assert errors(doc) == [], args
        for p in doc["properties"]:
            seen |= set(p["counterexample"] or {}) - {"summary", "diagnostics"}
    details = load_schema("verdict-v1")["$defs"]["details"]["properties"]
    assert seen == set(details)


def test_a_verdict_with_an_unknown_detail_or_status_is_rejected(run_cli: RunCli) -> None:
    doc = _json(run_cli, ["verify", "mesh_mlo_1d_recv_first", "--json"])
    dead = next(p for p in doc["properties"] if p["name"] == "deadlock_freedom")
    dead["counterexample"]["counts"] = []   # a merge detail on a deadlock
    assert errors(doc)
    doc = _json(run_cli, ["verify", "mesh_mlo_1d", "--json"])
    doc["properties"][0]["status"] = "probably"
    assert errors(doc)


def test_simulate_json_is_simulation_v1(run_cli: RunCli) -> None:
    assert errors(_json(run_cli, ["simulate", "mesh_mlo_1d", "--json"])) == []
    refused = _json(run_cli, ["simulate", "mesh_mlo_1d_recv_first", "--json"])
    assert "refused" in refused and errors(refused) == []


def test_gate_json_is_gate_v2(run_cli: RunCli) -> None:
    for matrix in ("real.toml", "unknown.toml"):
        res = run_cli(["gate", str(TEST_DATA / "gate" / matrix), "--no-cache", "--json"])
        assert res.code in (0, 3), res.err
        assert errors(json.loads(res.out)) == []


@pytest.mark.parametrize("where", ["reports", "reports/headline"])
def test_the_committed_sweep_is_sweep_v1(where: str) -> None:
    sweep = REPO_ROOT / where / "sweep.json"
    if not sweep.is_file():
        pytest.skip(f"{where}/sweep.json is not present")
    assert errors(json.loads(sweep.read_text(encoding="utf-8"))) == []


PLACEMENTS = {"schema": "meshproof/placements-v1", "placements": [
    {"cube_start": 0, "cubes": 8, "ok": True, "violated": [], "message": "all proved"},
    {"cube_start": 8, "cubes": 8, "ok": False,
     "violated": ["launch_confinement", "deadlock_freedom"],
     "message": "2 properties violated"}],
    "placement_independent": {"cube_start": 0, "shared_by": [0], "properties": [
        {"name": "numeric_safety", "status": "unknown", "message": "cannot bound"}]}}


def test_a_hand_made_placements_document_validates() -> None:
    assert errors(PLACEMENTS) == []
    bad = json.loads(json.dumps(PLACEMENTS))
    bad["placements"][1]["violated"] = ["deadlock"]       # not a property
    assert errors(bad)
    del bad["placements"][0]["message"]
    assert errors(bad)
    bad = json.loads(json.dumps(PLACEMENTS))
    bad["placement_independent"]["properties"][0]["status"] = "maybe"
    assert errors(bad)


def test_spec_references_every_schema() -> None:
    text = "\n".join(p.read_text(encoding="utf-8") for p in (REPO_ROOT / "spec").glob("*.md"))
    for name in SCHEMAS:
        assert f"meshproof/schemas/{name}.json" in text, name


def test_schemas_ship_with_the_package() -> None:
    import meshproof.schemas as pkg

    here = Path(pkg.__file__).parent
    assert sorted(p.stem for p in here.glob("*.json")) == sorted(SCHEMAS)
