"""The gate's JUnit report (gate/junit.py): checked before the gate runs, normal permissions."""

from __future__ import annotations

import os
import stat
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from helpers import RunCli, line_of, one_line_error

from meshproof.cli import gate_cmd

# its rounding bound, 3.3e-2·max|V|, is judged at the case's own tolerance
CASE = '[[case]]\nname = "a"\nkernel = "mesh_mlo_1d"\ntolerance = 0.1\nexpect = "proved"\n'


def _gate(run_cli: RunCli, tmp_path: Path, text: str, *extra: str) -> Any:
    matrix = tmp_path / "proofs.toml"
    matrix.write_text(text, encoding="utf-8")
    return run_cli(["gate", str(matrix), "--no-cache", *extra])


@pytest.mark.parametrize("junit", ["afile/x.xml", "afile/deeper/x.xml"])
def test_unwritable_junit_fails_before_the_gate_runs(run_cli: RunCli, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     junit: str) -> None:
    (tmp_path / "afile").write_text("x", encoding="utf-8")

    def not_reached(*_: object, **__: object) -> None:
        raise AssertionError("the gate ran although --junit cannot be written")

    monkeypatch.setattr(gate_cmd, "run_gate", not_reached)
    err = one_line_error(_gate(run_cli, tmp_path, CASE, "--junit", str(tmp_path / junit)))
    assert "afile is a file, not a directory" in err


def test_junit_is_written_with_normal_permissions(run_cli: RunCli, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        res = _gate(run_cli, tmp_path, CASE, "--junit", str(tmp_path / "ci" / "proofs.xml"))
    finally:
        os.umask(old)
    assert res.code == 0, res.err
    report = tmp_path / "ci" / "proofs.xml"
    assert stat.S_IMODE(report.stat().st_mode) == 0o644
    assert report.read_text(encoding="utf-8").count("<testcase ") == 7


def test_a_failing_testcase_carries_the_kernel_file_and_line(
        run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The realistic mistake: a known-bad kernel listed as proved; CI links the failure to
    the recv that blocks."""
    matrix = tmp_path / "proofs.toml"
    matrix.write_text('[[case]]\nname = "bad"\nkernel = "mesh_mlo_1d_recv_first"\n'
                      'expect = "proved"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    from meshproof.cli import main

    assert main(["gate", "proofs.toml", "--no-cache", "--junit", "j.xml"]) == 1
    root = ET.parse(tmp_path / "j.xml").getroot()
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == "proofs.toml"
    failing = [c for c in root.iter("testcase") if c.find("failure") is not None]
    # deadlocked at every depth: its outputs are never written either
    assert [c.get("name") for c in failing] == ["deadlock_freedom", "exactly_once_merge",
                                                "attention_equivalence"]
    kernel = Path(__file__).resolve().parents[1] / "meshproof" / "kernels" / "mesh_mlo.py"
    assert failing[0].get("file") == kernel.as_posix()  # outside the working directory
    assert failing[0].get("line") == str(line_of(kernel, "m = tl.recv(dir=direction"))


def test_proved_testcases_carry_no_location_and_the_suite_is_relative(
        run_cli: RunCli, tmp_path: Path) -> None:
    """The correct idiom: nothing to point at when everything is proved."""
    junit = tmp_path / "ok.xml"
    res = _gate(run_cli, tmp_path, CASE, "--junit", str(junit))
    assert res.code == 0, res.err
    root = ET.parse(junit).getroot()
    assert all(c.get("file") is None for c in root.iter("testcase"))
    suite = root.find("testsuite")
    assert suite is not None
    name = suite.get("name") or ""
    assert not name.startswith("/") and name.endswith("proofs.toml")


def test_a_property_the_case_skips_is_a_skipped_testcase(tmp_path: Path) -> None:
    from meshproof.gate.junit import Kind, property_outcome
    from meshproof.gate.matrix import load_matrix
    from meshproof.gate.runner import run_gate
    from meshproof.verify.properties import Property

    matrix = tmp_path / "m.toml"
    matrix.write_text('[[case]]\nname = "naive"\nkernel = "ring_prefill_causal_naive"\n'
                      'skip = ["numeric_safety"]\nexpect = "proved"\n', encoding="utf-8")
    gate = run_gate(load_matrix(matrix))
    (result,) = gate.results
    assert property_outcome(result, Property.NUMERIC_SAFETY).kind is Kind.SKIPPED
    assert property_outcome(result, Property.ATTENTION_EQUIVALENCE).kind is Kind.PASS
