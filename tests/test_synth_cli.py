"""`meshproof synthesize` (cli/synthesize_cmd.py): it writes a kernel that verify proves
(the certificate), on a mesh, a line and a wiring with a dead link; --json follows
synthesis-v1; the same command writes the same bytes."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from helpers import REPO_ROOT, RunCli

from meshproof.schemas import load_schema

DEAD_LINK = str(REPO_ROOT / "examples" / "wirings" / "dead_link_2x4.toml")
SEVEN = {"direction_legality", "launch_confinement", "channel_matching", "deadlock_freedom",
         "exactly_once_merge", "attention_equivalence", "numeric_safety"}


def _proved(doc: dict[str, object]) -> set[str]:
    verdict = doc["verdict"]
    assert isinstance(verdict, dict)
    return {p["name"] for p in verdict["properties"] if p["status"] == "proved"}


@pytest.mark.parametrize("launch", [["--wiring", "cube_mesh", "--mesh", "2x4"],
                                    ["--pes", "8"],
                                    ["--wiring", DEAD_LINK, "--mesh", "2x4"]],
                         ids=["2x4", "line", "dead-link"])
def test_the_written_kernel_is_proved(run_cli: RunCli, tmp_path: Path,
                                      launch: list[str]) -> None:
    out = tmp_path / "k.py"
    res = run_cli(["synthesize", *launch, "--out", str(out), "--verify", "--json"])
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    jsonschema.Draft202012Validator(load_schema("synthesis-v1")).validate(doc)
    assert _proved(doc) == SEVEN
    assert doc["measured_latency_s"] == doc["predicted_latency_s"]
    assert doc["bound"]["latency_s"] <= doc["predicted_latency_s"]


def test_the_dead_link_is_routed_around(run_cli: RunCli, tmp_path: Path) -> None:
    out = tmp_path / "k.py"
    res = run_cli(["synthesize", "--wiring", DEAD_LINK, "--mesh", "2x4", "--out", str(out)])
    assert res.code == 0, res.err
    # no row/column plan fits; the halves (each part connected without link 1-5) win
    assert "chosen: halves top/bottom" in res.out
    text = out.read_text()
    assert "wiring: cube_mesh_2x4_dead_1_5; 8 ranks" in text


def test_the_same_command_writes_the_same_bytes(run_cli: RunCli, tmp_path: Path) -> None:
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name / "k.py"
        res = run_cli(["synthesize", "--wiring", "cube_mesh", "--mesh", "2x4", "--out",
                       str(out), "--json"])
        assert res.code == 0, res.err
        outs.append((out.read_bytes(), json.loads(res.out)))
    assert outs[0][0] == outs[1][0]
    assert {**outs[0][1], "out": ""} == {**outs[1][1], "out": ""}


def test_the_table_names_the_plan_bound_and_gap(run_cli: RunCli, tmp_path: Path) -> None:
    res = run_cli(["synthesize", "--wiring", "cube_mesh", "--mesh", "2x4", "--out",
                   str(tmp_path / "k.py")])
    assert res.code == 0, res.err
    assert "chosen: columns then rows, segments [0,1]x[1,2] (forward order)" in res.out
    assert "predicted latency: 6.307 us; lower bound: 5.755 us (D = 4 hops); gap 1.10x" \
        in res.out


CHUNK_SIZES = ["--arg", "S_q=1", "--arg", "S_kv_per_rank=8", "--arg", "h_q=4", "--arg",
               "h_kv=1", "--arg", "d_head=8"]


def test_chunks_keeps_the_plans_with_o_in_k_row_chunks(run_cli: RunCli,
                                                      tmp_path: Path) -> None:
    out = tmp_path / "k.py"
    res = run_cli(["synthesize", "--pes", "4", *CHUNK_SIZES, "--chunks", "2", "--out",
                   str(out), "--json"])
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    jsonschema.Draft202012Validator(load_schema("synthesis-v1")).validate(doc)
    assert {c["chunks"] for c in doc["candidates"]} == {2}
    assert doc["measured_latency_s"] == doc["predicted_latency_s"]
    assert "CHUNKS = 2" in out.read_text()


def test_chunks_the_sizes_do_not_fit_are_refused_with_the_fix(run_cli: RunCli,
                                                               tmp_path: Path) -> None:
    res = run_cli(["synthesize", "--pes", "4", *CHUNK_SIZES, "--chunks", "3", "--out",
                   str(tmp_path / "k.py")])
    assert res.code == 2
    assert "does not split into 3 row chunks" in res.err and "--chunks" in res.err


def test_a_panel_is_refused_with_the_fix(run_cli: RunCli, tmp_path: Path) -> None:
    res = run_cli(["synthesize", "--panel", "A", "--out", str(tmp_path / "k.py")])
    assert res.code == 2
    assert "synthesize takes one launch given by flags" in res.err


def test_an_out_that_is_not_python_is_refused(run_cli: RunCli, tmp_path: Path) -> None:
    res = run_cli(["synthesize", "--out", str(tmp_path / "k.txt")])
    assert res.code == 2
    assert "must be a .py file" in res.err


@pytest.mark.scale
def test_the_8x8_kernel_is_proved(run_cli: RunCli, tmp_path: Path) -> None:
    res = run_cli(["synthesize", "--wiring", "cube_mesh", "--mesh", "8x8", "--out",
                   str(tmp_path / "k.py"), "--verify", "--json"])
    assert res.code == 0, res.err
    assert _proved(json.loads(res.out)) == SEVEN


def test_the_committed_example_regenerates_byte_for_byte(run_cli: RunCli,
                                                          tmp_path: Path) -> None:
    # the synthesised kernel is a committed certificate: CI regenerates it and compares
    # bytes, as `make demo` reproduces reports/
    out = tmp_path / "synthesized_2x4.py"
    res = run_cli(["synthesize", "--wiring", "cube_mesh", "--mesh", "2x4", "--out", str(out)])
    assert res.code == 0, res.err
    assert out.read_bytes() == (REPO_ROOT / "examples" / "synthesized_2x4.py").read_bytes()


def test_slow_links_make_the_reordered_fan_out_win(run_cli: RunCli, tmp_path: Path) -> None:
    # the best plan depends on the profile (design note §5): with inter-cube hops 4x
    # slower, the hand-written fan-out plan, re-ordered, beats the meeting segments
    hw = tmp_path / "slow.toml"
    hw.write_text('name = "slow links"\n[inter_cube]\nlatency_s = 2e-6\nbandwidth_Bps = 5e10\n'
                  '[intra_cube]\nlatency_s = 5e-7\nbandwidth_Bps = 1e11\n')
    res = run_cli(["synthesize", "--wiring", "cube_mesh", "--mesh", "2x4", "--hw", str(hw),
                   "--out", str(tmp_path / "k.py")])
    assert res.code == 0, res.err
    assert "chosen: fanout rows then columns (forward order)" in res.out
    assert "predicted latency: 12.005 us; lower bound: 11.755 us (D = 4 hops); gap 1.02x" \
        in res.out
    assert "profile: slow links" in (tmp_path / "k.py").read_text()


def test_the_bytes_objective_ranks_by_the_busiest_link(run_cli: RunCli,
                                                       tmp_path: Path) -> None:
    res = run_cli(["synthesize", "--pes", "6", "--objective", "bytes", "--json", "--out",
                   str(tmp_path / "k.py")])
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    loads = [c["max_link_bytes"] for c in doc["candidates"]]
    assert loads == sorted(loads) and doc["objective"] == "bytes"
