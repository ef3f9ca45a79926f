"""Shared fixtures for meshproof's tests (plain helpers: tests/helpers.py).

Golden files: `golden(name, text)` compares `text` with tests/golden/<name>. Run
`pytest --regen-golden` (or set MESHPROOF_REGEN_GOLDEN=1) to rewrite the files instead,
then review the diff before committing it.

Slow tests: the ones tests/slow_tests.txt names are marked `slow` here (`make test-fast`
leaves them out; `make test` runs everything). A run that meets a test over 5 s not marked
slow says so in its summary (tests/README.md).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import GOLDEN_DIR, REPO_ROOT, SEEDS_DIR, CliResult, Golden, RunCli

from meshproof.cli import main

pytest_plugins = ("pytester",)  # tests/test_pytest_plugin.py runs pytest on matrices


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--regen-golden", action="store_true", default=False,
                     help="rewrite tests/golden/* from the current output instead of comparing")


SLOW_LIST = Path(__file__).parent / "slow_tests.txt"
SLOW_SECONDS = 5.0   # every test over this is marked slow


def _slow_names() -> set[str]:
    """`file::function` of every slow test (all its parameters), from tests/slow_tests.txt."""
    lines = SLOW_LIST.read_text(encoding="utf-8").splitlines()
    return {line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()}


def _base_name(item: pytest.Item) -> str:
    return item.nodeid.split("[")[0]


_STALE: list[str] = []


@pytest.hookimpl(tryfirst=True)  # before -m deselects: every collected test is seen
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow = _slow_names()
    for item in items:
        if _base_name(item) in slow:
            item.add_marker(pytest.mark.slow)
    if [Path(a).name for a in config.args] == ["tests"] and not config.option.keyword:
        _STALE[:] = sorted(slow - {_base_name(item) for item in items})


_TIMES: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _TIMES[report.nodeid.split("[")[0]] = _TIMES.get(report.nodeid.split("[")[0], 0.0) + \
        report.duration


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,
                            config: pytest.Config) -> None:
    slow = _slow_names()
    unmarked = sorted(name for name, seconds in _TIMES.items()
                      if seconds > SLOW_SECONDS and name not in slow)
    if _STALE:
        terminalreporter.write_line(
            f"tests/slow_tests.txt names tests that do not exist: {', '.join(_STALE)}",
            yellow=True)
    if unmarked:
        terminalreporter.write_line(
            f"tests over {SLOW_SECONDS:g} s not marked slow (add them to "
            f"tests/slow_tests.txt): {', '.join(unmarked)}", yellow=True)


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


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path_factory: pytest.TempPathFactory,
                          monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own gate cache (`MESHPROOF_CACHE_DIR`): none reads another's
    entries, and none writes into the user's ~/.cache or the checkout. And none sees the
    CI runner's GitHub variables (the gate would print annotations into golden output)."""
    directory = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("MESHPROOF_CACHE_DIR", str(directory))
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return directory


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> RunCli:
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
