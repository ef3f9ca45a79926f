"""The gate's JUnit report (gate/junit.py): checked before the gate runs, normal permissions."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from helpers import RunCli, one_line_error

from meshproof.cli import gate_cmd

CASE = '[[case]]\nname = "a"\nkernel = "mesh_mlo_1d"\nexpect = "proved"\n'


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
