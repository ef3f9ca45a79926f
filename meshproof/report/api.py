"""The report directory: `write_report(out, ...)` builds it in a temp directory next to
`out` and swaps it in only when complete, so an existing report is never half-overwritten.
(The diagrams alone: `meshproof.report.diagrams`.)
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from meshproof import interrupts
from meshproof.errors import OutputError
from meshproof.outputs import check_writable_dir, followed, write_text
from meshproof.panels import SCALES
from meshproof.report.html import HTML_FILE, write_html
from meshproof.report.pages import write_pages
from meshproof.report.stability import keep_stable_values
from meshproof.report.sweep import SWEEP_SCHEMA, Progress, SweepOptions, dumps_sweep, run_sweep

# What the report owns inside its directory; anything else there (e.g. the verify
# benchmark's JSON) is carried over untouched.
OWNED = ("README.md", "sweep.json", "figures", "diagrams", HTML_FILE)


def _outputs(sweep: dict[str, Any], tmp: Path, out: Path, fast: bool) -> list[str]:
    if not fast:
        return write_pages(sweep, tmp, tmp)
    try:
        return write_pages(sweep, tmp, tmp)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # a sweep.json edited by hand can break the records in ways its shape check
        # does not see; name what failed rather than print a traceback
        raise OutputError(f"{out / 'sweep.json'} is not a complete {SWEEP_SCHEMA} file "
                          f"({type(exc).__name__}: {exc}); rerun `meshproof report` without "
                          "--fast") from None


@dataclass(frozen=True, slots=True)
class ReportOutcome:
    out: Path
    sweep: dict[str, Any]
    notes: tuple[str, ...]

    @property
    def runs(self) -> int:
        return len(self.sweep["cases"]) + len(self.sweep["panels"])

    @property
    def unexpected(self) -> tuple[str, ...]:
        return tuple(r["name"] for r in self.sweep["cases"] + self.sweep["panels"]
                     if not r.get("as_expected"))


def _check_out(out: Path) -> Path:
    """Refuse an --out the swap would harm: a file, a path under a file, a directory that
    cannot be written (the rule of every output, meshproof/outputs.py), the working
    directory (or one of its parents: it would be renamed away under the shell), or a
    directory that holds a README.md, figures/ or diagrams/ but no sweep.json (not a
    report: the swap would replace the user's README). Returns the directory to write: a
    symbolic link's target, so the link keeps pointing at the new report."""
    given = out
    out = followed(out)
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {given} is a file, not a directory; pass a directory path")
    parent = out.parent if str(out.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise OutputError(f"--out {given}: {parent} is a file, not a directory; pass a "
                          "directory path")
    check_writable_dir(out, "--out", what="the report ")
    resolved, here = out.resolve(), Path.cwd().resolve()
    if resolved == here or resolved in here.parents:
        raise OutputError(f"--out {out or '.'} is the current directory or contains it; "
                          "pass a subdirectory such as reports/")
    if out.is_dir() and not (out / "sweep.json").is_file():
        clash = sorted(name for name in OWNED if (out / name).exists())
        if clash:
            raise OutputError(f"--out {out} is not a meshproof report (no sweep.json) but "
                              f"holds {', '.join(clash)}, which the report would replace; "
                              "pass a new directory or an existing report")
    return out


def _make_temp(out: Path) -> Path:
    parent = out.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = parent / f".{out.name}.tmp-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        probe = tmp / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise OutputError(f"cannot write the report next to {out}: "
                          f"{exc.strerror or exc}; pass a writable --out directory") from None
    return tmp


def _carry_over(out: Path, tmp: Path, keep: tuple[str, ...]) -> None:
    """Copy entries of the existing report dir that the new one should keep."""
    if not out.is_dir():
        return
    for entry in sorted(out.iterdir()):
        if entry.name in keep or entry.name not in OWNED:
            target = tmp / entry.name
            if entry.is_dir():
                shutil.copytree(entry, target, symlinks=True)
            else:
                shutil.copy2(entry, target, follow_symlinks=False)


def _swap(tmp: Path, out: Path) -> None:
    """Replace `out` by `tmp`: two renames, the old tree removed only afterwards. The new
    directory keeps the old one's permissions."""
    old = out.absolute().parent / f".{out.name}.old-{os.getpid()}"
    interrupts.check()  # an interrupted report is never swapped in
    try:
        if out.exists():
            os.chmod(tmp, stat.S_IMODE(out.stat().st_mode))
            os.replace(out, old)
        os.replace(tmp, out)
    except OSError as exc:
        if old.exists() and not out.exists():
            os.replace(old, out)  # put the previous report back
        raise OutputError(f"cannot move the new report into {out}: "
                          f"{exc.strerror or exc}; the previous report is unchanged; pass "
                          "another --out directory") from None
    shutil.rmtree(old, ignore_errors=True)


def load_sweep(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise OutputError(f"{path} does not exist: run `meshproof report` without --fast "
                          "first")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OutputError(f"{path} is not a readable sweep JSON ({type(exc).__name__}); "
                          "rerun `meshproof report` without --fast") from None
    if not isinstance(data, dict) or data.get("schema") != SWEEP_SCHEMA:
        raise OutputError(f"{path} is not a {SWEEP_SCHEMA} file; rerun `meshproof report` "
                          "without --fast")
    problem = _sweep_shape_problem(data)
    if problem:
        raise OutputError(f"{path} is not a complete {SWEEP_SCHEMA} file ({problem}); rerun "
                          "`meshproof report` without --fast")
    return data


def _sweep_shape_problem(data: dict[str, Any]) -> str:
    """What a hand-edited or truncated sweep lacks that the README and figures read."""
    if data.get("scale") not in SCALES:
        return f"scale {data.get('scale')!r} is not one of {', '.join(SCALES)}"
    for key in ("cases", "panels", "scaling", "steps_1d_vs_2d"):
        items = data.get(key, [])
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            return f"{key} must be a list of objects"
    for key in ("cases", "panels"):
        for i, record in enumerate(data.get(key, [])):
            missing = [k for k in ("name", "kernel", "why", "expect") if
                       not isinstance(record.get(k), str)]
            if missing:
                return f"{key}[{i}] lacks {', '.join(missing)}"
    return ""


def _previous_sweep(out: Path) -> dict[str, Any] | None:
    """The report on file, whose measured numbers a rerun keeps if they only moved by
    noise (report/stability.py); None when there is none, or it is not usable."""
    try:
        return load_sweep(out / "sweep.json") if (out / "sweep.json").is_file() else None
    except OutputError:
        return None


def write_report(out: Path, *, scale: str = "validation", fast: bool = False,
                 options: SweepOptions | None = None,
                 progress: Progress | None = None, html: bool = False) -> ReportOutcome:
    """Run the sweep (or reuse `out/sweep.json` with `fast`) and write the report to `out`;
    with `html`, also the single-file `report.html` beside README.md."""
    if scale not in SCALES:
        raise OutputError(f"unknown scale {scale!r}: use one of {', '.join(SCALES)}")
    out = _check_out(out)
    sweep: dict[str, Any]
    if fast:
        sweep = load_sweep(out / "sweep.json")
    tmp = _make_temp(out)
    try:
        if fast:
            _carry_over(out, tmp, ("sweep.json", "diagrams"))
        else:
            _carry_over(out, tmp, ())
            opts = replace(options or SweepOptions(), scale=scale)
            sweep = keep_stable_values(run_sweep(opts, tmp / "diagrams", progress),
                                       _previous_sweep(out))
            write_text(tmp / "sweep.json", dumps_sweep(sweep))
        # the verify benchmark's JSON, if any, was carried over into tmp
        notes = _outputs(sweep, tmp, out, fast)
        if html:
            write_html(tmp)
        _swap(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ReportOutcome(out, sweep, tuple(notes))
