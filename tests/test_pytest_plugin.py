"""The pytest plugin (meshproof/pytest_plugin.py): a proof matrix collected as test items,
run with the real verifier on the small matrices of tests/data/gate."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import RECV_FIRST_EXPECT, TEST_DATA

GATE_DATA = TEST_DATA / "gate"
N_PROPERTIES = 7


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    shutil.copytree(GATE_DATA / "kernels", pytester.path / "kernels")
    shutil.copy(GATE_DATA / "real.toml", pytester.path / "proofs.toml")
    return pytester.path


def test_a_matrix_is_one_item_per_case_and_property(pytester: pytest.Pytester,
                                                    project: Path) -> None:
    """The correct idiom: every expectation holds, every item passes."""
    result = pytester.runpytest_inprocess("proofs.toml", "-p", "no:cacheprovider",
                                          "--collect-only", "-q")
    ids = [line for line in result.outlines if line.startswith("proofs.toml::")]
    assert len(ids) == 5 * N_PROPERTIES
    assert "proofs.toml::pair-recv-first::deadlock_freedom" in ids
    result = pytester.runpytest_inprocess("proofs.toml", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5 * N_PROPERTIES)


def test_a_failure_prints_the_counterexample_at_the_kernel_line(
        pytester: pytest.Pytester, project: Path) -> None:
    """The realistic mistake: a known-bad kernel listed as proved."""
    matrix = project / "proofs.toml"
    matrix.write_text(matrix.read_text().replace(RECV_FIRST_EXPECT,
                                                 'expect = "proved"'))
    result = pytester.runpytest_inprocess("proofs.toml", "-p", "no:cacheprovider",
                                          "-k", "recv and deadlock")
    result.assert_outcomes(failed=1, deselected=5 * N_PROPERTIES - 1)
    result.stdout.fnmatch_lines([
        "*pair-recv-first: deadlock_freedom expected proved, got violated*",
        "kernels/user_kernels.py:*: rank (cube 0, pe 0): error: blocked at recv E*"])


def test_x_stops_at_the_first_failure(pytester: pytest.Pytester, project: Path) -> None:
    matrix = project / "proofs.toml"
    matrix.write_text(matrix.read_text().replace('expect = ["exactly_once_merge", '
                                                 '"attention_equivalence"]',
                                                 'expect = "proved"'))
    result = pytester.runpytest_inprocess("proofs.toml", "-p", "no:cacheprovider", "-x")
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 1 and outcomes["passed"] < 5 * N_PROPERTIES


def test_tool_meshproof_matrices_are_run_by_plain_pytest(pytester: pytest.Pytester,
                                                         project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.meshproof]\nmatrices = ["proofs.toml"]\n')
    (project / "wiring.toml").write_text('[[link]]\nsrc = [0, 0]\ndir = "E"\n'
                                         'dst = [0, 1]\n')  # not a matrix: left alone
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=5 * N_PROPERTIES)


def test_an_unknown_property_fails(pytester: pytest.Pytester) -> None:
    """Unknown is never passed."""
    text = (GATE_DATA / "unknown.toml").read_text()
    (pytester.path / "unknown.toml").write_text(text.split("\n\n[[case]]")[0] + "\n")
    result = pytester.runpytest_inprocess("unknown.toml", "-p", "no:cacheprovider",
                                          "-k", "deadlock_freedom")
    result.assert_outcomes(failed=1, deselected=N_PROPERTIES - 1)
    result.stdout.fnmatch_lines(["*deadlock_freedom is unknown (not proved)*"])


def test_a_broken_matrix_is_a_one_line_collection_error(pytester: pytest.Pytester) -> None:
    (pytester.path / "proofs.toml").write_text(
        '[[case]]\nname = "a"\nkernel = "mesh_mlo_1d"\nexpcet = "proved"\n')
    result = pytester.runpytest_inprocess("proofs.toml", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*meshproof: error: *unknown key 'expcet' (did you mean "
                                 "'expect'?)*"])
