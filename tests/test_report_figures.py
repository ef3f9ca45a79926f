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


def test_the_imbalance_figure_draws_each_kernels_busy_time_per_rank(tmp_path: Path) -> None:
    def timing(busy: list[float]) -> dict[str, object]:
        return {"latency_s": max(busy), "per_rank": [
            {"cube": 0, "pe": p, "busy_s": b} for p, b in enumerate(busy)]}
    runs = [("naive", timing([1e-6 * (i + 1) for i in range(8)])),
            ("zigzag", timing([4.5e-6] * 8))]
    first = figures.imbalance_figure(runs, tmp_path / "a.png", "8-PE ring")
    second = figures.imbalance_figure(runs, tmp_path / "b.png", "8-PE ring")
    assert first.read_bytes() == second.read_bytes() and first.stat().st_size > 1000
