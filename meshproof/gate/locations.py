"""Where CI should point: kernel source files as paths a reader (GitHub, GitLab, an IDE)
can open, and the line of each case in a proof matrix.

A diagnostic's `file` is a display path (`model.loader.display_path`): relative to the
directory holding the meshproof package for the built-in kernels
(`meshproof/kernels/mesh_mlo.py`), else to the working directory, else absolute. CI
tools need a path relative to the checkout they run in, so `source_path` finds the file
again and `report_path` words it relative to the working directory when it lies inside
it, else absolute.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath
from urllib.parse import quote

# the directory holding the meshproof package, which display paths of built-ins start from
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
_CASE_NAME = re.compile(r"""^\s*name\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)')""")


def source_path(file: str) -> Path | None:
    """The file a display path names: absolute, under the meshproof package's directory
    (built-in kernels), or under the working directory; None when none of them exists."""
    path = Path(file)
    if path.is_absolute():
        return path if path.is_file() else None
    for base in (_PACKAGE_ROOT, Path.cwd()):
        candidate = base / path
        if candidate.is_file():
            return candidate.resolve()
    return None


def report_path(file: str | Path, base: Path | None = None) -> str:
    """`file` relative to `base` (default: the working directory) when inside it, POSIX
    separators; otherwise the absolute path. A display path is resolved first."""
    here = (base or Path.cwd()).resolve()
    found = source_path(str(file)) if isinstance(file, str) else file
    if found is None:
        return PurePosixPath(str(file)).as_posix()
    real = found.resolve()
    try:
        return real.relative_to(here).as_posix()
    except ValueError:
        return real.as_posix()


def artifact_uri(file: str | Path, base: Path | None = None) -> tuple[str, bool]:
    """A SARIF artifact URI for `file` and whether it is relative to the checkout root."""
    text = report_path(file, base)
    if text.startswith("/"):
        return "file://" + quote(text), False
    return quote(text), True


def suite_path(matrix: Path) -> str:
    """A matrix path as CI shows it: relative to the working directory, never absolute
    when it can be relative (`../other/proofs.toml` for a sibling checkout)."""
    real = matrix.resolve()
    try:
        return real.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        try:
            return Path(os.path.relpath(real, Path.cwd().resolve())).as_posix()
        except ValueError:  # another drive (Windows): no relative path exists
            return real.as_posix()


def case_lines(matrix: Path) -> dict[str, int]:
    """The 1-based line of each case's `name = "..."` in a matrix file (by case name)."""
    try:
        text = matrix.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    lines: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = _CASE_NAME.match(line)
        if match:
            name = match.group(1) if match.group(1) is not None else match.group(2)
            lines.setdefault(name.replace('\\"', '"'), number)
    return lines
