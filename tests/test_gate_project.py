"""The gate with the real verifier and simulator: the project's own proofs.toml must pass
(this is how `make test` fails when a proof breaks), flipped expectations fail, and
undecided solver calls give exit 3."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import gate_cache_dir

from meshproof.cli import main
from meshproof.gate.matrix import load_matrix
from meshproof.kernels import BUILTIN_KERNELS
from meshproof.panels import ALL_PANEL_NAMES
from meshproof.verify.properties import PROPERTY_NAMES, Property

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "gate"


def test_project_matrix_covers_every_kernel_and_panel() -> None:
    cases = load_matrix(ROOT / "proofs.toml").cases
    # masked kernels are gated too, on all seven properties (spec/semantics.md §8)
    gated = set(BUILTIN_KERNELS)
    assert {c.kernel for c in cases} >= gated
    assert {c.panel for c in cases if c.panel} == set(ALL_PANEL_NAMES)
    for name, info in BUILTIN_KERNELS.items():
        if info.known_bad and name in gated:  # a known-bad kernel must be caught somewhere
            assert any(c.kernel == name and c.expectation.names for c in cases), name


def test_project_gate_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No cache (CI runs on a fresh clone); two worker processes exercise --jobs."""
    junit = tmp_path / "gate.xml"
    code = main(["gate", str(ROOT / "proofs.toml"), "--no-cache", "--jobs", "2",
                 "--junit", str(junit)])
    out = capsys.readouterr().out
    assert code == 0, out
    cases = load_matrix(ROOT / "proofs.toml").cases
    expected_tests = sum(len(PROPERTY_NAMES) + (1 if c.simulate else 0)
                         + (1 if c.is_deployment else 0) + (1 if c.synthesized else 0)
                         for c in cases)
    root = ET.parse(junit).getroot()
    assert root.get("tests") == str(expected_tests)
    assert (root.get("failures"), root.get("errors")) == ("0", "0")
    # a known-bad case passes *because* its counterexample is there
    numerics = root.find(".//testcase[@classname='bad-normalised-merge'][@name='numerics']")
    assert numerics is not None and numerics.find("system-out") is not None
    dead = root.find(".//testcase[@classname='bad-recv-first'][@name='deadlock_freedom']")
    assert dead is not None
    text = dead.findtext("system-out") or ""
    assert "meshproof/kernels/mesh_mlo.py:" in text and "rank (cube 0, pe " in text
    # the B=8 decode panel is gated as its 8 launches, their separation a testcase
    separated = root.find(".//testcase[@classname='panel-multi-user-decode-headline-8-"
                          "launches'][@name='launch_separation']")
    assert separated is not None and len(separated) == 0  # passed


@pytest.fixture
def real(tmp_path: Path) -> Path:
    shutil.copytree(DATA / "kernels", tmp_path / "kernels")
    shutil.copy(DATA / "real.toml", tmp_path / "proofs.toml")
    return tmp_path / "proofs.toml"


def test_small_real_matrix_passes_then_fails_when_flipped(
        real: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gate", str(real)]) == 0
    text = real.read_text()
    flipped = text.replace('expect = ["exactly_once_merge", "attention_equivalence"]',
                           'expect = ["attention_equivalence"]', 1)
    assert flipped != text
    real.write_text(flipped)
    junit = tmp_path / "gate.xml"
    capsys.readouterr()
    assert main(["gate", str(real), "--junit", str(junit)]) == 1  # re-judged from the cache
    assert "pair-double-merge: FAILED" in capsys.readouterr().out
    failing = [c for c in ET.parse(junit).getroot().iter("testcase")
               if c.find("failure") is not None]
    assert [(c.get("classname"), c.get("name")) for c in failing] == \
        [("pair-double-merge", "exactly_once_merge")]
    failure = failing[0].find("failure")
    assert failure is not None
    assert "pair-double-merge" in (failure.get("message") or "")
    # the counterexample names the user's own file and line
    assert "kernels/user_kernels.py:" in (failure.text or "")


def test_undecided_solver_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junit = tmp_path / "gate.xml"
    assert main(["gate", str(DATA / "unknown.toml"), "--junit", str(junit)]) == 3
    assert not list(gate_cache_dir().glob("*.json"))  # unknowns are never cached
    out = capsys.readouterr().out
    assert "2d-2x4-rlimit-1" in out and "gate UNKNOWN" in out
    errors = [c for c in ET.parse(junit).getroot().iter("testcase")
              if c.find("error") is not None]
    assert {c.get("classname") for c in errors} == {"2d-2x4-rlimit-1", "2d-4x4-timeout-1us"}


def test_numerics_is_a_checked_property() -> None:
    """bad-normalised-merge: caught statically, and the simulation is judged too."""
    case = next(c for c in load_matrix(ROOT / "proofs.toml").cases
                if c.name == "bad-normalised-merge")
    assert case.simulate and case.violated == (Property.EXACTLY_ONCE_MERGE,
                                               Property.ATTENTION_EQUIVALENCE)
    assert case.numerics_violated
    assert case.expected_text == "exactly_once_merge, attention_equivalence, numerics"
