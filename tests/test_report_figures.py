"""Figures (report/figures.py): the same bytes whatever the user's matplotlib settings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import matplotlib

from meshproof.report import figures


def test_figures_ignore_the_users_matplotlib_settings(tmp_path: Path) -> None:
    steps = [{"mesh": "1x4", "rows": 1, "cols": 4, "n": 4, "diameter": 3, "steps_1d": 3,
              "steps_2d": 3, "latency_1d_s": 1e-6, "latency_2d_s": 1e-6}]
    figures.steps_figure(steps, tmp_path / "a.png")
    with matplotlib.rc_context({"lines.linewidth": 7.0, "figure.facecolor": "red",
                                "font.size": 20.0, "savefig.dpi": 300.0}):
        figures.steps_figure(steps, tmp_path / "b.png")
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()


def test_drawing_leaves_the_matplotlib_backend_alone() -> None:
    code = ("import matplotlib; matplotlib.use('svg'); import meshproof.report.figures, "
            "meshproof.report.xdot_paint; print(matplotlib.get_backend())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "svg"
