"""meshproof installed without its checkout (issue 10, item 11): what the wheel ships is
the `meshproof` package's Python files and `py.typed` (pyproject.toml's packages.find and
package-data), nothing of benchmarks/, spec/ or tests/.

The package is copied by those rules into a temporary site directory and run from a
directory outside the checkout, as `pip install meshproof` and a user's project would.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from helpers import REPO_ROOT


def _shipped(site: Path) -> None:
    """Copy what the wheel holds into `site`."""
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = config["tool"]["setuptools"]
    assert setuptools["packages"]["find"]["include"] == ["meshproof*"]
    data = set(setuptools["package-data"]["meshproof"])
    for path in sorted((REPO_ROOT / "meshproof").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and \
                (path.suffix == ".py" or path.name in data):
            target = site / path.relative_to(REPO_ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("installed")
    site, work = root / "site-packages", root / "project"
    _shipped(site)
    work.mkdir()
    return site, work


def meshproof(installed: tuple[Path, Path], *args: str) -> subprocess.CompletedProcess[str]:
    site, work = installed
    code = ("import sys, meshproof; from meshproof.cli import main; "
            f"assert meshproof.__file__.startswith({str(site)!r}), meshproof.__file__; "
            "sys.exit(main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", code, *args], cwd=work, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(site)}, timeout=300)


def test_diagnostics_name_files_the_user_can_open(installed: tuple[Path, Path]) -> None:
    # They read `meshproof/kernels/mesh_mlo.py:…`, relative to site-packages.
    done = meshproof(installed, "verify", "mesh_mlo_1d_recv_first", "--only",
                     "deadlock_freedom")
    assert done.returncode == 1, done.stderr
    paths = set(re.findall(r"^(\S+\.py):\d+: rank", done.stdout, re.MULTILINE))
    assert paths, done.stdout
    for path in paths:
        assert Path(path).is_absolute() and Path(path).is_file(), path
    # a kernel of the user's own project is named as they name it
    _, work = installed
    shutil.copy(REPO_ROOT / "tests" / "kernels" / "misbehaving.py", work / "mine.py")
    done = meshproof(installed, "trace", "mine.py::nope")
    assert done.returncode == 2 and "mine.py has no function 'nope'" in done.stderr


def test_the_report_points_only_at_files_that_exist(installed: tuple[Path, Path]) -> None:
    _, work = installed
    report = work / "rep"
    report.mkdir()
    shutil.copy(REPO_ROOT / "reports" / "sweep.json", report / "sweep.json")
    shutil.copytree(REPO_ROOT / "reports" / "diagrams", report / "diagrams")
    done = meshproof(installed, "report", "--fast", "--out", "rep")
    assert done.returncode == 0, done.stderr
    readme = (report / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)\)", readme)
    assert links
    assert [link for link in links if not (report / link).exists()] == []
    # the proof-time figure needs the checkout's benchmark: the note says so, and names
    # no script the user does not have
    assert "benchmarks/verify_scale.py) is part of meshproof's source checkout" in \
        done.stderr + readme
    assert "`python benchmarks/verify_scale.py`" not in readme


def test_the_shipped_package_holds_no_checkout_files(installed: tuple[Path, Path]) -> None:
    site, _ = installed
    names = {p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file()}
    assert "meshproof/kernels/mesh_mlo.py" in names and "meshproof/py.typed" in names
    assert not any(n.startswith(("tests/", "benchmarks/", "spec/")) for n in names)
