"""pytest plugin (entry point `pytest11`): a proof matrix is a test file.

`pytest proofs.toml` — or listing matrices in `pyproject.toml`,

    [tool.meshproof]
    matrices = ["proofs.toml"]

and running `pytest` — collects one test item per case × property (plus `numerics` for a
case that simulates), `proofs.toml::CASE::PROPERTY`. So `-k`, `-x`, xdist, pytest's own
`--junitxml` and IDE runners work as for any test. Each case runs once through the gate's
pipeline and is judged by the gate's judge; an item passes when its property came out as
the matrix expects, fails with the counterexample in `file:line` form when it did not,
and fails when its property is unknown (never passed). Results come from the gate's
cache (`--meshproof-no-cache` re-proves).

A `.toml` file is collected only when it is named on the command line or listed in
`[tool.meshproof] matrices`, and only when it is a proof matrix (`[[case]]` tables), so
other TOML files of a project (wirings, profiles) are left alone.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from meshproof.gate.matrix import GateCase
    from meshproof.gate.results import CaseResult

NO_CACHE = "--meshproof-no-cache"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("meshproof", "meshproof proof matrices")
    group.addoption(NO_CACHE, action="store_true", default=False,
                    help="re-prove every matrix case (neither read nor write the gate cache)")


def _configured(config: pytest.Config) -> list[Path]:
    """The matrices `[tool.meshproof] matrices` lists (relative to the rootdir)."""
    pyproject = config.rootpath / "pyproject.toml"
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    setting = data.get("tool", {}).get("meshproof", {}).get("matrices", [])
    if isinstance(setting, str):
        setting = [setting]
    if not isinstance(setting, list):
        raise pytest.UsageError(f"{pyproject}: [tool.meshproof] matrices must be a list of "
                                "paths, e.g. matrices = [\"proofs.toml\"]")
    return [(config.rootpath / str(p)).resolve() for p in setting]


def pytest_configure(config: pytest.Config) -> None:
    matrices = _configured(config)
    config.stash[_MATRICES] = set(matrices)
    # `pytest` with no paths runs the configured matrices too; named paths are run as given
    if matrices and config.args_source is not pytest.Config.ArgsSource.ARGS:
        roots = [Path(a).resolve() for a in config.args]
        for m in matrices:
            if not any(m == r or r in m.parents for r in roots):
                config.args.append(str(m))


_MATRICES = pytest.StashKey[set[Path]]()


def _is_matrix(path: Path) -> bool:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return True  # let the matrix loader say what is wrong with it
    return "case" in data


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix != ".toml":
        return None
    named = parent.session.isinitpath(file_path)
    if not named and file_path.resolve() not in parent.config.stash.get(_MATRICES, set()):
        return None
    if not named and not _is_matrix(file_path):
        return None
    return MatrixFile.from_parent(parent, path=file_path)


class MatrixError(Exception):
    """A matrix that cannot be used: one line, as `meshproof gate` says it."""


class MatrixFile(pytest.File):
    """A proof matrix: one collector per case."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        from meshproof.errors import MeshproofError
        from meshproof.gate.locations import case_lines
        from meshproof.gate.matrix import load_matrix
        from meshproof.gate.runner import check_matrix

        try:
            matrix = load_matrix(self.path)
            check_matrix(matrix)
        except MeshproofError as exc:
            raise self.CollectError(f"meshproof: error: {exc}") from None
        lines = case_lines(self.path)
        for case in matrix.cases:
            yield CaseCollector.from_parent(self, name=case.name, case=case,
                                            line=lines.get(case.name, 1))


class CaseCollector(pytest.Collector):
    """One matrix case: run once (through the gate's pipeline), judged per property."""

    def __init__(self, *, case: GateCase, line: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.line = line
        self._result: CaseResult | None = None

    def collect(self) -> Iterator[pytest.Item]:
        from meshproof.gate.judge import NUMERICS
        from meshproof.gate.outcome import SEPARATION
        from meshproof.verify.properties import PROPERTY_NAMES

        names = [*PROPERTY_NAMES, *((NUMERICS,) if self.case.simulate else ()),
                 *((SEPARATION,) if self.case.is_deployment else ())]
        for name in names:
            yield PropertyItem.from_parent(self, name=name)

    def result(self) -> CaseResult:
        if self._result is None:
            from meshproof.gate.runner import default_cache, evaluate

            cache = None if self.config.getoption(NO_CACHE) else default_cache()
            self._result = evaluate(self.case, cache=cache)
        return self._result


class PropertyFailed(Exception):
    """The property did not come out as the matrix expects; the text says why, in
    `file:line` form."""


class PropertyItem(pytest.Item):
    """One property (or the numerics) of one case."""

    parent: CaseCollector

    def runtest(self) -> None:
        from meshproof.gate.judge import NUMERICS, CaseStatus
        from meshproof.gate.junit import (
            Kind,
            numerics_outcome,
            property_outcome,
            separation_outcome,
        )
        from meshproof.gate.outcome import SEPARATION
        from meshproof.verify.properties import Property

        result = self.parent.result()
        if result.status is CaseStatus.ERROR:
            raise PropertyFailed(f"{self.parent.case.name}: the case raised: {result.error}")
        outcome = numerics_outcome(result) if self.name == NUMERICS else \
            separation_outcome(result) if self.name == SEPARATION else \
            property_outcome(result, Property(self.name))
        if outcome.kind is Kind.PASS:
            if outcome.text:
                self.add_report_section("call", "counterexample (expected)", outcome.text)
            return
        raise PropertyFailed("\n".join(part for part in (outcome.message, outcome.text)
                                       if part))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        if isinstance(excinfo.value, PropertyFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.parent.line - 1, f"{self.parent.case.name}::{self.name}"
