"""GitHub Actions output of the gate (gate/github.py): annotations at the kernel line and
the step summary."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import RECV_FIRST_EXPECT, TEST_DATA, line_of

from meshproof.cli import main
from meshproof.gate.github import command

GATE_DATA = TEST_DATA / "gate"


@pytest.fixture
def matrix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(GATE_DATA / "kernels", tmp_path / "kernels")
    shutil.copy(GATE_DATA / "real.toml", tmp_path / "proofs.toml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return tmp_path / "proofs.toml"


def _flip(matrix: Path) -> None:
    text = matrix.read_text(encoding="utf-8")
    matrix.write_text(text.replace(RECV_FIRST_EXPECT, 'expect = "proved"'),
                      encoding="utf-8")


def _commands(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("::")]


def test_workflow_commands_are_escaped() -> None:
    assert command("error", "50% done\nnext", file="a,b:c.py", line=3, title="x: y") == \
        "::error file=a%2Cb%3Ac.py,line=3,title=x%3A y::50%25 done%0Anext"
    assert command("warning", "plain") == "::warning::plain"


def test_an_unexpected_deadlock_is_annotated_at_the_recv(
        matrix: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The realistic mistake: the recv-first variant listed as proved."""
    _flip(matrix)
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert main(["gate", "proofs.toml", "--no-cache"]) == 1
    commands = _commands(capsys.readouterr().out)
    assert commands, "no annotations printed"
    assert all(c.startswith("::error file=kernels/user_kernels.py,line=") for c in commands)
    # deadlocked at every depth, so its outputs are never written either
    assert {c.split("title=pair-recv-first%3A ")[1].split(" violated::rank (cube 0, pe ")[0]
            for c in commands} == {"deadlock_freedom", "exactly_once_merge",
                                   "attention_equivalence"}
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n### meshproof gate `proofs.toml`: FAILED")
    assert "| `pair-recv-first` | proved | deadlock_freedom, exactly_once_merge, " \
        "attention_equivalence | ❌ failed |" in text


def test_a_met_gate_prints_no_annotation(matrix: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The correct idiom: every expectation met, nothing to annotate."""
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert main(["gate", "proofs.toml", "--no-cache", "--github"]) == 0
    assert _commands(capsys.readouterr().out) == []
    assert "passed" in summary.read_text(encoding="utf-8").splitlines()[0]


def test_no_github_wins_over_the_environment(matrix: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    _flip(matrix)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert main(["gate", "proofs.toml", "--no-cache", "--no-github"]) == 1
    assert _commands(capsys.readouterr().out) == []


def test_a_proved_known_bad_case_is_annotated_at_its_matrix_line(
        matrix: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = matrix.read_text(encoding="utf-8")
    matrix.write_text(text.replace(
        'name = "1d-line-4"\nkernel = "mesh_mlo_1d"\npes = 4\nexpect = "proved"',
        'name = "1d-line-4"\nkernel = "mesh_mlo_1d"\npes = 4\nexpect = ["deadlock_freedom"]'),
        encoding="utf-8")
    assert main(["gate", "proofs.toml", "--no-cache", "--github", "--json"]) == 1
    captured = capsys.readouterr()
    assert _commands(captured.out) == []  # --json owns stdout
    (cmd,) = _commands(captured.err)
    line = line_of(matrix, 'name = "1d-line-4"')
    assert cmd.startswith(f"::error file=proofs.toml,line={line},")
    assert "expected violated, got proved" in cmd
