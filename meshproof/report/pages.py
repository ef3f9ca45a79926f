"""From a sweep to pages: the figures and README.md (what `--fast` redoes).

`verify_time.png` comes from the verify benchmark's JSON when the report directory holds
one (`verify_scale.json`); otherwise the README says the figure was skipped and why.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from meshproof.model.loader import display_path
from meshproof.outputs import write_text
from meshproof.report import figures
from meshproof.report.causal import FIGURE as CAUSAL_FIGURE
from meshproof.report.causal import imbalance_lines, imbalance_runs
from meshproof.report.facts import study_facts
from meshproof.report.headline_page import headline_section
from meshproof.report.markdown import render_readme

VERIFY_BENCH_FILE = "verify_scale.json"
_X_KEYS = ("ranks", "n_ranks", "endpoints")
_SERIES_KEYS = ("series", "method", "check", "property", "kernel", "name")
_Y_KEYS = ("seconds", "verify_s", "time_s", "wall_s")
_FAMILIES = {"1d": "mesh_mlo_1d", "2d": "mesh_mlo_2d"}
_V1_MEASURES = (("seconds_total", "all five properties"),
                ("deadlock_freedom", "deadlock_freedom"),
                ("exactly_once_merge", "exactly_once_merge"))
# meshproof/verify-scale-v2: the trace and the shared semantic analysis have their own lines
_V2_MEASURES = (("pipeline_seconds", "trace + all seven properties"),
                ("trace_seconds", "trace"),
                ("semantics_seconds", "semantic analysis"),
                ("deadlock_freedom", "deadlock_freedom"))
_PROTOCOL_TOTAL = "trace + the four protocol properties"


def verify_time_series(data: Any) -> dict[str, list[tuple[int, float]]]:
    """(ranks, seconds) points per series, from the verify benchmark's records.

    `meshproof/verify-scale-v1` (benchmarks/verify_scale.py): `rows` of {case ("2d 4x8",
    "1d 32"), ranks, seconds_total, and seconds per property}; series "2d · all five
    properties", "2d · deadlock_freedom", "2d · exactly_once_merge", and the same for 1d.
    `-v2` rows also have pipeline_seconds, trace_seconds and semantics_seconds: series
    "· trace + all seven properties", "· trace", "· semantic analysis", "· deadlock_freedom";
    a row that says `not_measured: ["semantics", ...]` gives "· trace + the four protocol
    properties" instead of the seven.
    Otherwise: a list of records (or one under `results`, `runs`, `points`, `rows`) with
    ranks (`ranks`/`n_ranks`), seconds (`seconds`/`verify_s`/...) and optionally a series
    name (`series`/`method`/...).
    """
    rows: Any = data
    if isinstance(data, dict):
        rows = next((data[k] for k in ("results", "runs", "points", "rows")
                     if isinstance(data.get(k), list)), [])
    series: dict[str, list[tuple[int, float]]] = {}
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict):
            continue
        x = next((row[k] for k in _X_KEYS if isinstance(row.get(k), int)), None)
        if x is None:
            continue
        if isinstance(row.get("seconds_total"), (int, float)) and isinstance(row.get("case"),
                                                                              str):
            family = row["case"].split()[0]
            family = _FAMILIES.get(family, family)
            measures: tuple[tuple[str, str], ...] = \
                _V2_MEASURES if "pipeline_seconds" in row else _V1_MEASURES
            if "semantics" in (row.get("not_measured") or ()):
                # measured without the semantic analysis: its total is the protocol part
                measures = tuple((k, _PROTOCOL_TOTAL if k == "pipeline_seconds" else label)
                                 for k, label in measures)
            for key, label in measures:
                y = row.get(key)
                if isinstance(y, (int, float)) and y > 0:
                    series.setdefault(f"{family} · {label}", []).append((int(x), float(y)))
            continue
        y = next((row[k] for k in _Y_KEYS if isinstance(row.get(k), (int, float))), None)
        if y is None or y <= 0:
            continue
        name = next((str(row[k]) for k in _SERIES_KEYS if row.get(k) is not None), "verify")
        series.setdefault(name, []).append((int(x), float(y)))
    return series


def search_baselines(data: Any) -> list[tuple[str, float, float]]:
    """(case, certificate check s, stuck-state search s) from the benchmark, if present."""
    out = []
    for b in data.get("baselines", []) if isinstance(data, dict) else []:
        if isinstance(b, dict) and isinstance(b.get("certificate_seconds"), (int, float)) \
                and isinstance(b.get("search_seconds"), (int, float)):
            out.append((str(b.get("case", "?")), float(b["certificate_seconds"]),
                        float(b["search_seconds"])))
    return out


def write_pages(sweep: dict[str, Any], out: Path, bench_dir: Path) -> list[str]:
    """Figures and README.md into `out`; returns the notes the README carries."""
    fig_dir = out / "figures"
    made: list[tuple[str, str]] = []
    notes: list[str] = []
    panels = [p for p in sweep.get("panels", []) if (p.get("sim") or {}).get("op_log")]
    for p in panels:
        name = p["panel"]
        figures.op_log_figure(name, p["sim"]["op_log"], fig_dir / f"gqa_op_log_{name}.png",
                              _panel_subtitle(p, sweep["scale"]))
        made.append((f"figures/gqa_op_log_{name}.png", f"Op log: {name}"))
    if panels:
        figures.comparison_figure([(p["panel"], p["sim"]["op_log"]) for p in panels],
                                  fig_dir / "gqa_comparison.png")
        made.append(("figures/gqa_comparison.png", "Op log across the panels"))
    scaling = [r for r in sweep.get("scaling", []) if (r.get("sim") or {}).get("timing")]
    if scaling:
        figures.scaling_figure(scaling, fig_dir / "gqa_scaling.png")
        made.append(("figures/gqa_scaling.png",
                     "multi_user panels over Q heads per cube, B = 1 and 8 users per cube: "
                     "modelled latency and op counts"))
    steps = sweep.get("steps_1d_vs_2d", [])
    if steps:
        figures.steps_figure(steps, fig_dir / "steps_1d_vs_2d.png")
        made.append(("figures/steps_1d_vs_2d.png",
                     "Communication steps and modelled latency: 1D vs 2D vs the diameter"))
    bench = bench_dir / VERIFY_BENCH_FILE
    series: dict[str, list[tuple[int, float]]] = {}
    baselines: list[tuple[str, float, float]] = []
    if bench.is_file():
        try:
            bench_data = json.loads(bench.read_text(encoding="utf-8"))
            series = verify_time_series(bench_data)
            baselines = search_baselines(bench_data)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            notes.append(f"verify_time.png not drawn: {VERIFY_BENCH_FILE} is unreadable "
                         f"({type(exc).__name__})")
        else:
            if not series:
                notes.append(f"verify_time.png not drawn: {VERIFY_BENCH_FILE} holds no "
                             "(ranks, seconds) records")
    else:
        notes.append(f"verify_time.png not drawn: no verify benchmark results "
                     f"({VERIFY_BENCH_FILE}) in this directory; {_how_to_benchmark()}")
    if series:
        figures.verify_time_figure(series, baselines, fig_dir / "verify_time.png")
        made.append(("figures/verify_time.png",
                     f"Proof time vs ranks (from {VERIFY_BENCH_FILE}; wall clock)"))
    if sweep["scale"] != "validation":
        notes.append(f"numerics are not simulated by the report at {sweep['scale']} scale "
                     "(1M-token context): the panels are traced, verified and timed; the "
                     "numeric decode runs are the simulation benchmark's (sim_scale.json)")
    notes.append("modelled latencies use the default hardware profile: assumed numbers, "
                 "not measured hardware (see `meshproof simulate --hw`)")
    renderers = {(r.get("diagrams") or {}).get("renderer") for r in
                 sweep.get("cases", []) + sweep.get("panels", [])} - {None}
    if "none" in renderers:
        notes.append("no graphviz renderer was available: diagrams are .dot files only")
    extra: list[str] = []
    if sweep["scale"] == "headline":
        extra, more, headline_notes = headline_section(sweep, bench_dir, out)
        made += more
        notes += headline_notes
    runs = imbalance_runs(sweep.get("causal", []))
    if runs:
        scale = sweep["scale"]
        figures.imbalance_figure(runs, out / CAUSAL_FIGURE,
                                 "64 cubes x 8-PE rings, 1M tokens (one cube shown)"
                                 if scale == "headline" else "one 8-PE ring (validation)")
        made.append((CAUSAL_FIGURE, "Causal prefill: per-rank busy time, naive vs zigzag"))
        extra += imbalance_lines(sweep["causal"])
    readme = render_readme(sweep, made, notes, study_facts(sweep), extra)
    write_text(out / "README.md", readme)
    return notes


def _panel_subtitle(record: dict[str, Any], scale: str) -> str:
    launch = record["launch"]
    args = launch.get("args", {})
    ranks = (f"mesh {args['mesh_rows']}x{args['mesh_cols']}" if args.get("mesh_rows")
             else f"n={args.get('n_ranks')}")
    return (f"{record['kernel']} on {launch['wiring']}, S_q={args.get('S_q')}, {ranks}, "
            f"rank_axis={args.get('rank_axis', 0)} ({scale})")


# The verify benchmark ships with meshproof's source checkout, not with its wheel.
_BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "verify_scale.py"


def _how_to_benchmark() -> str:
    if _BENCHMARK.is_file():  # a checkout: name the script so that it can be run
        return (f"run `python {display_path(_BENCHMARK)}` (or `make bench`), then "
                "`meshproof report --fast`")
    return ("the benchmark (benchmarks/verify_scale.py) is part of meshproof's source "
            "checkout, not of the installed package")
