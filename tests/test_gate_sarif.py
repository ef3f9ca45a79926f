"""SARIF 2.1.0 from `verify --sarif` and `gate --sarif` (gate/sarif.py, gate/findings.py),
validated against the OASIS schema shipped in tests/data."""

from __future__ import annotations

import json
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers import RECV_FIRST_EXPECT, TEST_DATA, RunCli, line_of, one_line_error

from meshproof.errors import InternalError
from meshproof.gate import sarif
from meshproof.gate.judge import NUMERICS
from meshproof.verify.properties import Property

SCHEMA = TEST_DATA / "sarif-schema-2.1.0.json"
MLO = Path(__file__).resolve().parents[1] / "meshproof" / "kernels" / "mesh_mlo.py"
GATE_DATA = TEST_DATA / "gate"


@cache
def _validator() -> jsonschema.Draft4Validator:
    return jsonschema.Draft4Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))


def valid_sarif(path: Path) -> dict[str, Any]:
    log = json.loads(path.read_text(encoding="utf-8"))
    errors = sorted(_validator().iter_errors(log), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]
    return log


def _results(log: dict[str, Any]) -> list[dict[str, Any]]:
    runs = log["runs"]
    assert len(runs) == 1
    return list(runs[0]["results"])


def _place(result: dict[str, Any]) -> tuple[str, int]:
    phys = result["locations"][0]["physicalLocation"]
    return phys["artifactLocation"]["uri"], phys["region"]["startLine"]


def test_every_property_and_numerics_has_a_rule() -> None:
    ids = [r["id"] for r in sarif.rules()]
    assert ids == [*(p.value for p in Property), NUMERICS]
    assert all(r["shortDescription"]["text"] and r["fullDescription"]["text"]
               for r in sarif.rules())


def test_a_property_without_a_description_is_an_internal_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    text = dict(sarif.RULE_TEXT)
    del text[Property.NUMERIC_SAFETY.value]
    monkeypatch.setattr(sarif, "RULE_TEXT", text)
    with pytest.raises(InternalError, match="no SARIF rule description for numeric_safety"):
        sarif.rules()


def test_verify_sarif_locates_a_deadlock_at_the_kernel_line(run_cli: RunCli,
                                                            tmp_path: Path) -> None:
    """The realistic mistake: ranks that receive before they send."""
    out = tmp_path / "out" / "verify.sarif"
    res = run_cli(["verify", "mesh_mlo_1d_recv_first", "--sarif", str(out)])
    assert res.code == 1, res.err
    log = valid_sarif(out)
    results = _results(log)
    dead = [r for r in results if r["ruleId"] == "deadlock_freedom"]
    assert len(dead) == 8  # one per blocked rank
    recv_line = line_of(MLO, "m = tl.recv(dir=direction")
    assert {_place(r) for r in dead} == {("meshproof/kernels/mesh_mlo.py", recv_line)}
    first = dead[0]
    assert first["level"] == "error"
    assert first["message"]["text"].startswith("rank (cube 0, pe 0): blocked at recv E")
    related = [loc["message"]["text"] for loc in first["relatedLocations"]]
    assert any(text.startswith("the matching send") for text in related)
    assert any(text.startswith("what it waits for") for text in related)
    (flow,) = first["codeFlows"]
    steps = flow["threadFlows"][0]["locations"]
    ranks = [s["location"]["logicalLocations"][0]["name"] for s in steps]
    assert ranks == ["c0p0", "c0p1"]  # the wait-for cycle, in order
    # the rank of each result, in its message and as a logical location
    names = {r["locations"][0]["logicalLocations"][0]["name"] for r in dead}
    assert names == {f"c0p{p}" for p in range(8)}
    fingerprints = [r["partialFingerprints"][sarif.FINGERPRINT] for r in results]
    assert len(set(fingerprints)) == len(fingerprints)


def test_verify_sarif_of_a_correct_kernel_has_no_results(run_cli: RunCli,
                                                         tmp_path: Path) -> None:
    """The correct idiom: the fan-out on its line is proved, so nothing is reported."""
    out = tmp_path / "ok.sarif"
    assert run_cli(["verify", "mesh_mlo_1d", "--sarif", str(out), "--tolerance", "0.1"]).code == 0
    log = valid_sarif(out)
    assert _results(log) == []
    assert [r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]][-1] == NUMERICS


def test_verify_sarif_is_byte_identical_across_runs(run_cli: RunCli, tmp_path: Path) -> None:
    a, b = tmp_path / "a.sarif", tmp_path / "b.sarif"
    for path in (a, b):
        run_cli(["verify", "mesh_kv_skip_last", "--sarif", str(path)])
    assert a.read_bytes() == b.read_bytes()
    results = _results(valid_sarif(a))
    departures = [r for r in results if r["ruleId"] == "attention_equivalence"]
    assert departures and all(r["properties"]["role"] == "departure" for r in departures)
    related = [loc["message"]["text"] for r in departures
               for loc in r.get("relatedLocations", [])]
    assert any(text.startswith("witness:") for text in related)


def test_unwritable_sarif_fails_before_any_work(run_cli: RunCli, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    err = one_line_error(run_cli(["verify", "mesh_mlo_1d", "--sarif",
                                  str(tmp_path / "afile" / "x.sarif")]))
    assert "afile is a file, not a directory" in err


@pytest.fixture
def real_matrix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """real.toml and its user kernels, copied into a working directory of their own."""
    shutil.copytree(GATE_DATA / "kernels", tmp_path / "kernels")
    shutil.copy(GATE_DATA / "real.toml", tmp_path / "proofs.toml")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "proofs.toml"


def test_gate_sarif_suppresses_expected_violations_and_reports_unexpected_ones(
        real_matrix: Path, tmp_path: Path) -> None:
    from meshproof.cli import main

    out = tmp_path / "gate.sarif"
    assert main(["gate", "proofs.toml", "--no-cache", "--sarif", str(out)]) == 0
    results = _results(valid_sarif(out))
    # every result comes from a case that expects it: all suppressed, justified by the matrix
    assert results and all(r.get("suppressions") for r in results)
    assert {r["ruleId"] for r in results} >= {"exactly_once_merge", "deadlock_freedom"}
    # flip one expectation: the known-bad kernel's violation is now an alert
    text = real_matrix.read_text(encoding="utf-8")
    real_matrix.write_text(text.replace(RECV_FIRST_EXPECT, 'expect = "proved"'),
                           encoding="utf-8")
    assert main(["gate", "proofs.toml", "--no-cache", "--sarif", str(out)]) == 1
    results = _results(valid_sarif(out))
    alerts = [r for r in results if not r.get("suppressions")]
    assert alerts and {r["ruleId"] for r in alerts} == {
        "deadlock_freedom", "exactly_once_merge", "attention_equivalence"}
    kernel = real_matrix.parent / "kernels" / "user_kernels.py"
    for r in alerts:
        if r["ruleId"] != "deadlock_freedom":
            continue
        uri, line = _place(r)
        assert uri == "kernels/user_kernels.py"  # relative to the working directory
        assert "recv" in kernel.read_text(encoding="utf-8").splitlines()[line - 1]
        assert r["message"]["text"].startswith("pair-recv-first: rank (cube 0, pe ")


def test_gate_sarif_reports_a_proved_known_bad_case_at_its_matrix_line(
        real_matrix: Path, tmp_path: Path) -> None:
    from meshproof.cli import main

    text = real_matrix.read_text(encoding="utf-8")
    real_matrix.write_text(text.replace(
        'name = "1d-line-4"\nkernel = "mesh_mlo_1d"\npes = 4\nexpect = "proved"',
        'name = "1d-line-4"\nkernel = "mesh_mlo_1d"\npes = 4\nexpect = ["deadlock_freedom"]'),
        encoding="utf-8")
    out = tmp_path / "gate.sarif"
    assert main(["gate", "proofs.toml", "--no-cache", "--sarif", str(out)]) == 1
    alerts = [r for r in _results(valid_sarif(out)) if not r.get("suppressions")]
    assert len(alerts) == 1
    assert _place(alerts[0]) == ("proofs.toml", line_of(real_matrix, 'name = "1d-line-4"'))
    assert "got proved" in alerts[0]["message"]["text"]


def test_results_beyond_githubs_limit_are_left_out_and_said(
        run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sarif, "MAX_RESULTS", 3)
    out = tmp_path / "capped.sarif"
    run_cli(["verify", "mesh_mlo_1d_recv_first", "--sarif", str(out), "--tolerance", "0.1"])
    log = valid_sarif(out)
    run = log["runs"][0]
    assert len(run["results"]) == 3
    # 8 blocked ranks, and 8 outputs never written (with their root) for each of the two
    # semantic properties
    assert run["properties"] == {"results_total": 26, "results_truncated": True}
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert "23 of 26 results left out" in notes[-1]["message"]["text"]


def test_a_kernel_outside_the_working_directory_gets_an_absolute_uri(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from meshproof.cli import main

    kernels = tmp_path / "elsewhere"
    shutil.copytree(GATE_DATA / "kernels", kernels)
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    out = tmp_path / "o.sarif"
    spec = f"{kernels / 'user_kernels.py'}::pair_decode_recv_first"
    main(["verify", spec, "--pes", "2", "--arg", "S_q=1", "--arg", "S_kv_per_rank=8",
          "--arg", "h_q=1", "--arg", "h_kv=1", "--arg", "d_head=4", "--sarif", str(out)])
    results = _results(valid_sarif(out))
    assert results
    artifact = results[0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact["uri"].startswith("file:///") and "uriBaseId" not in artifact


def test_cached_and_parallel_runs_write_the_same_sarif(real_matrix: Path,
                                                       tmp_path: Path) -> None:
    """The findings travel in the outcome: a cache hit or a worker process loses none."""
    from meshproof.cli import main

    text = real_matrix.read_text(encoding="utf-8")
    real_matrix.write_text(text.replace(RECV_FIRST_EXPECT, 'expect = "proved"'),
                           encoding="utf-8")
    fresh, cached, parallel = (tmp_path / f"{n}.sarif" for n in ("a", "b", "c"))
    assert main(["gate", "proofs.toml", "--sarif", str(fresh)]) == 1
    assert main(["gate", "proofs.toml", "--sarif", str(cached)]) == 1   # from the cache
    assert main(["gate", "proofs.toml", "--no-cache", "--jobs", "2", "--sarif",
                 str(parallel)]) == 1
    assert fresh.read_bytes() == cached.read_bytes() == parallel.read_bytes()
    assert any("relatedLocations" in r for r in _results(valid_sarif(fresh)))
