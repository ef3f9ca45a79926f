"""The study's figures, drawn with matplotlib from the sweep JSON (never from live runs).

Deterministic: matplotlib's default style (a user's matplotlibrc does not leak in) plus
fixed rcParams (font, sizes, DPI), the Agg renderer, no `Software` entry in the PNG
metadata, a fixed SVG hash salt. Figures are `matplotlib.figure.Figure` objects, not
pyplot ones: importing this module neither switches the process's backend nor keeps
figures alive in pyplot's registry. Each function returns the path it wrote.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib.style
from matplotlib import rc_context
from matplotlib.figure import Figure
from matplotlib.ticker import ScalarFormatter

from meshproof.outputs import write_bytes
from meshproof.report import style

OP_SERIES = ("gemm", "ipcq_send", "ipcq_recv", "dma_read", "dma_write")
RC: dict[str, Any] = {
    "font.family": "DejaVu Sans", "font.size": 10, "axes.titlesize": 11,
    "axes.labelsize": 10, "legend.fontsize": 9, "xtick.labelsize": 9, "ytick.labelsize": 9,
    "figure.dpi": 100, "savefig.dpi": 120, "axes.grid": True, "grid.alpha": 0.3,
    "axes.spines.top": False, "axes.spines.right": False, "svg.hashsalt": "meshproof",
    "path.simplify": False,
}


@contextmanager
def _style() -> Iterator[None]:
    """matplotlib's defaults, then RC: the same bytes whatever the user's matplotlibrc."""
    with matplotlib.style.context("default"), rc_context(RC):  # type: ignore[arg-type]
        yield


@contextmanager
def _figure(width: float, height: float, ncols: int = 1) -> Iterator[tuple[Figure, Any]]:
    with _style():
        fig = Figure(figsize=(width, height), layout="constrained")
        yield fig, fig.subplots(1, ncols)


def _save(fig: Figure, path: Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    write_bytes(path, buf.getvalue())
    return path


def _bar_labels(ax: Any, bars: Any) -> None:
    ax.bar_label(bars, fmt="%d", padding=2, fontsize=8)


def op_log_figure(panel: str, op_log: dict[str, int], path: Path, subtitle: str = "") -> Path:
    with _figure(6.0, 3.6) as (fig, ax):
        values = [int(op_log.get(k, 0)) for k in OP_SERIES]
        bars = ax.bar(OP_SERIES, values, color=style.SERIES_COLOURS[:len(OP_SERIES)])
        _bar_labels(ax, bars)
        ax.set_ylabel("ops issued (all ranks)")
        ax.set_title(f"op log: {panel}" + (f"\n{subtitle}" if subtitle else ""))
        ax.set_ylim(0, max([*values, 1]) * 1.18)
        ax.grid(axis="x", visible=False)
        return _save(fig, path)


def comparison_figure(panels: list[tuple[str, dict[str, int]]], path: Path) -> Path:
    with _figure(8.5, 4.2) as (fig, ax):
        n = len(panels)
        width = 0.8 / max(n, 1)
        xs = range(len(OP_SERIES))
        for i, (name, log) in enumerate(panels):
            values = [int(log.get(k, 0)) for k in OP_SERIES]
            bars = ax.bar([x - 0.4 + width * (i + 0.5) for x in xs], values, width,
                          label=name, color=style.SERIES_COLOURS[i % len(style.SERIES_COLOURS)])
            _bar_labels(ax, bars)
        ax.set_xticks(list(xs), OP_SERIES)
        ax.set_ylabel("ops issued (all ranks)")
        ax.set_title("op log across the four GQA panels")
        top = max([int(v) for _, log in panels for v in log.values()] + [1])
        ax.set_ylim(0, top * 1.15)
        ax.grid(axis="x", visible=False)
        ax.legend(loc="upper right", frameon=False)
        return _save(fig, path)


def _series(record: dict[str, Any]) -> tuple[str, int]:
    """(panel, B): records before batch on batch have one user per cube."""
    return record["panel"], int(record.get("users", 1))


def _series_label(series: tuple[str, int]) -> str:
    return f"{series[0]} B={series[1]}"


def scaling_figure(records: list[dict[str, Any]], path: Path) -> Path:
    """multi_user panels over Q heads per cube, with B users per cube: latency (top) and
    op counts (bottom), at validation shapes (left) and headline shapes (right)."""
    scales = [s for s in ("validation", "headline") if any(r.get("scale", "validation") == s
                                                          for r in records)]
    series = sorted({_series(r) for r in records})
    with _style():
        fig = Figure(figsize=(6.2 * len(scales), 7.4), layout="constrained")
        grid = fig.subplots(2, len(scales), squeeze=False)
        for col, scale in enumerate(scales):
            rows = [r for r in records if r.get("scale", "validation") == scale]
            _scaling_latency(grid[0][col], rows, series, scale)
            _scaling_ops(grid[1][col], rows, series, scale)
        grid[1][-1].legend(frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.suptitle("multi_user panels over Q heads per cube, B users per cube (one kv "
                     "group)")
        return _save(fig, path)


def _scaling_latency(ax: Any, rows: list[dict[str, Any]], series: list[tuple[str, int]],
                     scale: str) -> None:
    unit, factor = ("µs", 1e6) if scale == "validation" else ("ms", 1e3)
    for i, key in enumerate(series):
        pts = sorted((r["h_q"], r["sim"]["timing"]["latency_s"] * factor) for r in rows
                     if _series(r) == key and (r.get("sim") or {}).get("timing"))
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", label=_series_label(key),
                    color=style.SERIES_COLOURS[i % len(style.SERIES_COLOURS)],
                    linestyle="-" if key[1] == 1 else "--")
            for x, y in pts:
                ax.annotate(f"{y:.3g}", (x, y), textcoords="offset points", xytext=(0, 7),
                            ha="center", fontsize=8)
    ax.set_xticks(sorted({r["h_q"] for r in rows}))
    ax.set_xlabel("Q heads per cube")
    ax.set_ylabel(f"modelled latency ({unit})")
    ax.set_title(f"modelled latency, {scale} shapes")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.12)
    ax.legend(frameon=False, loc="center right")


def _scaling_ops(ax: Any, rows: list[dict[str, Any]], series: list[tuple[str, int]],
                 scale: str) -> None:
    groups = [(key, r) for key in series for r in sorted(
        (r for r in rows if _series(r) == key), key=lambda r: r["h_q"])]
    width = 0.8 / len(OP_SERIES)
    for j, op in enumerate(OP_SERIES):
        vals = [int((r.get("sim") or {}).get("op_log", {}).get(op, 0)) for _, r in groups]
        xs = [k - 0.4 + width * (j + 0.5) for k in range(len(groups))]
        ax.bar(xs, vals, width, label=op, color=style.SERIES_COLOURS[j])
    ax.set_xticks(range(len(groups)),
                  [f"{'dec' if 'decode' in p else 'pre'} B={b}\nh_q={r['h_q']}"
                   for (p, b), r in groups], fontsize=7)
    ax.set_ylabel("ops issued (all ranks)")
    ax.set_yscale("log")
    ax.set_title(f"op counts, {scale} shapes")
    ax.grid(axis="x", visible=False)


def steps_figure(records: list[dict[str, Any]], path: Path) -> Path:
    """Communication steps and modelled latency: 1D line vs 2D mesh vs the diameter."""
    labels = [f"{r['mesh']}\n({r['n']} cubes)" for r in records]
    xs = list(range(len(records)))
    with _figure(11.0, 4.2, ncols=2) as (fig, (ax0, ax1)):
        def line(ax: Any, key: str, label: str, colour: str, **kw: Any) -> None:
            pts = [(x, r[key]) for x, r in zip(xs, records, strict=True)
                   if r.get(key) is not None]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker=kw.pop("marker", "o"), label=label,
                        color=colour, **kw)

        line(ax0, "steps_1d", "1D line (n-1)", style.SERIES_COLOURS[0])
        line(ax0, "steps_2d", "2D row-then-column", style.SERIES_COLOURS[1])
        line(ax0, "diameter", "mesh diameter (R-1)+(C-1): lower bound", "#555555",
             linestyle="--", marker="x")
        for x, r in zip(xs, records, strict=True):
            for key, dy in (("steps_1d", 6), ("steps_2d", -13)):
                if r.get(key) is not None:
                    ax0.annotate(str(r[key]), (x, r[key]), textcoords="offset points",
                                 xytext=(7, dy), fontsize=8)
        ax0.set_xticks(xs, labels)
        ax0.set_xlabel("cube mesh R x C")
        ax0.set_ylabel("communication steps")
        ax0.set_title("communication steps (longest chain of hops)")
        ax0.set_yscale("log", base=2)
        ax0.yaxis.set_major_formatter(ScalarFormatter())
        ax0.legend(frameon=False, loc="upper left")
        for key, label, colour in (("latency_1d_s", "1D line", style.SERIES_COLOURS[0]),
                                   ("latency_2d_s", "2D row-then-column",
                                    style.SERIES_COLOURS[1])):
            pts = [(x, r[key] * 1e6) for x, r in zip(xs, records, strict=True)
                   if r.get(key) is not None]
            if pts:
                ax1.plot(*zip(*pts, strict=True), marker="o", label=label, color=colour)
        ax1.set_xticks(xs, labels)
        ax1.set_xlabel("cube mesh R x C")
        ax1.set_ylabel("modelled latency (µs)")
        ax1.set_title("modelled all-reduce latency (decode, validation shapes)")
        ax1.set_ylim(bottom=0)
        ax1.legend(frameon=False, loc="upper left")
        return _save(fig, path)


def _linear_guide(ax: Any, series: dict[str, list[tuple[int, float]]]) -> None:
    """A dashed slope-1 line (seconds proportional to ranks) through the widest total-time
    series, fitted in log space: on log-log axes, linear cost runs parallel to it."""
    totals = [pts for name, pts in series.items()
              if name.endswith(("all seven properties", "all five properties")) and pts]
    if not totals:
        return
    pts = sorted(max(totals, key=lambda p: max(x for x, _ in p) / min(x for x, _ in p)))
    if len(pts) < 2:
        return
    upper = pts[len(pts) // 2:]   # fitted where cost is per rank, not start-up
    c = math.exp(sum(math.log(y / x) for x, y in upper) / len(upper))
    # drawn across every series, so that series measured further out can be read against it
    xs = [min(x for p in series.values() for x, _ in p),
          max(x for p in series.values() for x, _ in p)]
    ax.plot(xs, [c * x for x in xs], linestyle=(0, (4, 3)), color="0.55", linewidth=1,
            label="linear guide (seconds ∝ ranks)")


def verify_time_figure(series: dict[str, list[tuple[int, float]]],
                       baselines: list[tuple[str, float, float]], path: Path) -> Path:
    """Proof time vs ranks (one colour per kernel family, one line style per measure), and
    the deadlock certificate check against the stuck-state search where measured."""
    families = sorted({name.split(" · ")[0] for name in series})
    styles = {"all five properties": "-", "deadlock_freedom": "--",
              "exactly_once_merge": ":", "trace + all seven properties": "-",
              "trace": "-.", "semantic analysis": ":",
              "trace + the four protocol properties": (0, (6, 2, 1, 2, 1, 2))}
    ncols = 2 if baselines else 1
    # the legend sits below the plot, outside its axes: it never covers a line
    with _figure(6.8 * ncols, 4.4 + 0.16 * (len(series) + 1) / 2, ncols=ncols) as (fig, axes):
        ax = axes[0] if baselines else axes
        for name, pts in sorted(series.items()):
            family, _, measure = name.partition(" · ")
            pts = sorted(pts)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=4,
                    label=name, linestyle=styles.get(measure, "-"),
                    color=style.SERIES_COLOURS[families.index(family)
                                               % len(style.SERIES_COLOURS)])
        _linear_guide(ax, series)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.set_xlabel("ranks")
        ax.set_ylabel("seconds (wall clock, benchmark machine)")
        ax.set_title("verification time vs ranks (verify benchmark)")
        ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncols=2,
                  fontsize=8)
        if baselines:
            ax1 = axes[1]
            xs = list(range(len(baselines)))
            w = 0.38
            b1 = ax1.bar([x - w / 2 for x in xs], [b[1] for b in baselines], w,
                         label="order certificate check", color=style.SERIES_COLOURS[2])
            b2 = ax1.bar([x + w / 2 for x in xs], [b[2] for b in baselines], w,
                         label="stuck-state search", color=style.SERIES_COLOURS[5])
            ax1.bar_label(b1, fmt="%.3g s", padding=2, fontsize=8)
            ax1.bar_label(b2, fmt="%.3g s", padding=2, fontsize=8)
            ax1.set_xticks(xs, [b[0] for b in baselines])
            ax1.set_ylabel("seconds")
            ax1.set_title("deadlock freedom: certificate check vs search")
            ax1.set_ylim(0, max(b[2] for b in baselines) * 1.2)
            ax1.grid(axis="x", visible=False)
            ax1.legend(frameon=False, loc="upper left")
        return _save(fig, path)


def imbalance_figure(runs: list[tuple[str, dict[str, Any]]], path: Path,
                     subtitle: str = "") -> Path:
    """Per-rank busy time of causal ring prefill kernels side by side (the causal load
    imbalance: the naive ring's last ranks do most of the work, a balanced layout such as
    zigzag evens it out), each kernel's latency as a dashed line. `runs`: (label, the
    `timing` object of its `simulate --json`)."""
    with _figure(7.5, 4.0) as (fig, ax):
        n = len(runs)
        width = 0.8 / max(n, 1)
        for i, (label, timing) in enumerate(runs):
            ranks = timing["per_rank"]
            busy = [float(r["busy_s"]) * 1e6 for r in ranks]
            colour = style.SERIES_COLOURS[i % len(style.SERIES_COLOURS)]
            ax.bar([x - 0.4 + width * (i + 0.5) for x in range(len(busy))], busy, width,
                   label=f"{label} (latency {float(timing['latency_s']) * 1e6:.3g} µs)",
                   color=colour)
            ax.axhline(float(timing["latency_s"]) * 1e6, color=colour, linestyle="--",
                       linewidth=1)
        names = [f"pe {r['pe']}" for r in runs[0][1]["per_rank"]] if runs else []
        ax.set_xticks(list(range(len(names))), names)
        ax.set_ylabel("busy time per rank (µs)")
        ax.set_title("causal prefill: per-rank busy time" +
                     (f"\n{subtitle}" if subtitle else ""))
        ax.grid(axis="x", visible=False)
        ax.legend(loc="upper left", frameon=False)
        return _save(fig, path)
