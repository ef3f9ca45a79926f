"""Shared fixtures for meshproof's tests.

Golden files: `golden(name, text)` compares `text` with tests/golden/<name>. Run
`pytest --regen-golden` (or set MESHPROOF_REGEN_GOLDEN=1) to rewrite the files instead,
then review the diff before committing it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from meshproof.cli import main
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.schedule import Schedule
from meshproof.model.trace import trace

REPO_ROOT = Path(__file__).resolve().parents[1]
TESTS_DIR = REPO_ROOT / "tests"
GOLDEN_DIR = TESTS_DIR / "golden"
TEST_KERNELS = TESTS_DIR / "kernels"
TEST_DATA = TESTS_DIR / "data"
SEEDS_DIR = REPO_ROOT / ".." / "shared" / "seeds"

Golden = Callable[[str, str], None]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--regen-golden", action="store_true", default=False,
                     help="rewrite tests/golden/* from the current output instead of comparing")


def _regen(config: pytest.Config) -> bool:
    return bool(config.getoption("--regen-golden")) or \
        os.environ.get("MESHPROOF_REGEN_GOLDEN", "") == "1"


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Golden:
    """`golden(name, text)`: assert `text` equals tests/golden/<name> (or rewrite it)."""
    regen = _regen(request.config)

    def check(name: str, text: str) -> None:
        path = GOLDEN_DIR / name
        if regen:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return
        if not path.is_file():
            pytest.fail(f"golden file tests/golden/{name} is missing; create it with "
                        "`pytest --regen-golden` and review it")
        expected = path.read_text(encoding="utf-8")
        assert text == expected, (f"output differs from tests/golden/{name}; if the change "
                                  "is intended, rerun with --regen-golden and review the diff")

    return check


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
            ) -> Callable[[Sequence[str]], CliResult]:
    """Run `meshproof ARGS` in-process from the repo root; return exit code, stdout, stderr."""
    monkeypatch.chdir(REPO_ROOT)

    def run(args: Sequence[str]) -> CliResult:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def seeds_dir() -> Path:
    """../shared/seeds next to the repo; the test is skipped where it is absent."""
    if not (SEEDS_DIR / "attention_mesh_mlo.py").is_file():
        pytest.skip("../shared/seeds/attention_mesh_mlo.py is not present")
    return SEEDS_DIR.resolve()


def trace_kernel(kernel: str, **options: object) -> Schedule:
    """Trace a built-in or `path::function` kernel with LaunchOptions(**options)."""
    ref = resolve_kernel(kernel)
    return trace(ref, build_launch(ref, LaunchOptions(**options)))  # type: ignore[arg-type]


def kernel_spec(name: str) -> str:
    """`<file>::<function>` of tests/kernels as an absolute kernel spec."""
    file, _, func = name.partition("::")
    return f"{TEST_KERNELS / file}::{func}"


def line_of(path: Path, marker: str) -> int:
    """The 1-based line of the unique line in `path` containing `marker`."""
    hits = [i for i, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if marker in text]
    assert len(hits) == 1, f"marker {marker!r} occurs {len(hits)} times in {path}"
    return hits[0]
