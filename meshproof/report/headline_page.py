"""The headline report's own section of README.md, and its placement map figure.

Read from the sweep (`panels`, `steps_1d_vs_2d`, `headline`) and from two benchmark files
in the report directory, which hold wall-clock figures and so stay out of sweep.json:
`sim_scale.json` (benchmarks/sim_scale.py: the numeric decode runs at 1M context) and
`headline_verify.json` (benchmarks/headline_verify.py: the headline verify times). A
missing or unreadable file is a note saying how to make it, never an error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from matplotlib.colors import ListedColormap

from meshproof.report.figures import _figure, _save  # one figure style for the report

SIM_BENCH_FILE = "sim_scale.json"
VERIFY_BENCH_FILE = "headline_verify.json"
PLACEMENTS_FIGURE = "figures/headline_placements.png"


def _read(path: Path, schema: str) -> tuple[dict[str, Any] | None, str]:
    if not path.is_file():
        return None, "missing"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"unreadable ({type(exc).__name__})"
    if not isinstance(data, dict) or data.get("schema") != schema:
        return None, f"not a {schema} file"
    return data, ""


def _ranges(values: list[int]) -> str:
    """`0-7, 12, 16-23`."""
    if not values:
        return "none"
    parts, start, prev = [], values[0], values[0]
    for v in [*values[1:], None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ", ".join(parts)


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _latency(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} µs"


def _panels(panels: list[dict[str, Any]]) -> list[str]:
    out = ["### The four panels, every group at once", "",
           "Each panel verified with every property; a multi-user panel is its 8 kv groups "
           "launched at once (cube_start 0 and 8 of each SIP) plus `launch_separation` (no "
           "launch uses an endpoint or a link of another), and simulated together (one "
           "timing run of all launches).", "",
           "| panel | kernel | wiring | launches | ranks running / endpoints | busy cubes | "
           "every property | separation | min D | steps | modelled latency |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in panels:
        launches = p.get("launches", [])
        starts = [la["cube_start"] for la in launches]
        sep = p.get("separation", {})
        props = p.get("verdict", {}).get("properties", [])
        proved = sum(1 for x in props if x["status"] == "proved")
        timing = (p.get("sim") or {}).get("timing") or {}
        min_d = p.get("verdict", {}).get("min_queue_depth")
        out.append(
            f"| `{p['panel']}` | `{p['kernel']}` | `{p['launch']['wiring']}` | "
            f"{len(launches)} at cube_start {', '.join(map(str, starts))} | "
            f"{p.get('active_ranks')} / {p.get('endpoints')} | {p.get('busy_cubes')} | "
            f"{'✓' if proved == len(props) else '**✗**'} {proved} of {len(props)} | "
            f"{'✓' if sep.get('status') == 'proved' else '**✗** ' + _cell(sep.get('message'))} | "
            f"{'–' if min_d is None else min_d} | {timing.get('comm_steps', '–')} | "
            f"{_latency(timing.get('latency_s'))} |")
    out.append("")
    for p in panels:
        out.append(f"- `{p['panel']}`: {_cell(p['why'])}.")
    out += ["", "Modelled latency uses the assumed profile. The timing model charges every "
            "directed link on its own (spec/timing.md): PE p's links between two cubes do "
            "not share bandwidth with PE q's, so batch on batch (B=8) costs the same "
            "modelled time per step as B=1 (gqa_scaling.png); launch_separation proves the "
            "launches share no link at all."]
    return out


def _contrasts(contrasts: list[dict[str, Any]]) -> list[str]:
    out = ["", "### What the panels avoid, shown", ""]
    for c in contrasts:
        la = c["launch"]
        pes = c.get("pes", [])
        named = f"; PEs named: {_ranges(pes)}" if pes else ""
        lines = c.get("lines", [])
        out.append(f"- **{c['name']}**: {_cell(c['why'])}. `{c['kernel']}` on "
                   f"`{la['wiring']}`, cubes {la['cube_start']}.."
                   f"{la['cube_start'] + la['cubes'] - 1}: violated "
                   f"{', '.join(c['violated']) or 'nothing'}{named}; at "
                   f"{', '.join(f'`{x}`' for x in lines[:6])}.")
        out += [f"  - `{_cell(d)}`" for d in c.get("diagnostics", [])[:2]]
    return out


def _placements(placements: list[dict[str, Any]], system: str) -> list[str]:
    out = ["", f"### Placements on the headline system ({system})", "",
           "Every built-in kernel on its natural launch, verified (every property) at every "
           "cube_start where its cubes fit (`meshproof placements KERNEL`). *one trace*: "
           "the kernel reads its placement only as `program_id(1) - cube_start`, so one "
           "trace served every placement; proved placements that are another's schedule "
           "moved over the same links carry its proofs.", "",
           "| kernel | launch | placements | legal cube_starts | traced | first violation "
           "(first illegal placement) |", "|---|---|---|---|---|---|"]
    for k in placements:
        launch = f"`{k['wiring']}` " + (f"mesh {k['mesh']}" if k.get("mesh") else
                                        f"{k['cubes']} cube(s) x {k['pes']} PEs")
        bad = next((r for r in k["rows"] if not r["ok"]), None)
        first = f"cube_start {bad['cube_start']}: {_cell(bad['message'])}" if bad else "–"
        out.append(f"| `{k['kernel']}` | {launch} | {k['placements']} | "
                   f"{_ranges(k['legal'])} ({len(k['legal'])}) | "
                   f"{'one trace' if k['relocated'] else 'each'} | {first} |")
    sub = [k for k in placements if k.get("mesh")]
    if sub:
        out += ["", "The sub-mesh kernels, placement by placement (✓ legal; otherwise the "
                "first property violated):", "",
                "| cube_start | cubes | " + " | ".join(f"`{k['kernel']}`" for k in sub) + " |",
                "|---:|---|" + "---|" * len(sub)]
        for i, row in enumerate(sub[0]["rows"]):
            cells = []
            for k in sub:
                r = k["rows"][i] if i < len(k["rows"]) else None
                cells.append("–" if r is None else "✓" if r["ok"] else
                             (r["violated"][0] if r["violated"] else "?"))
            out.append(f"| {row['cube_start']} | {row['cubes']} | " + " | ".join(cells) + " |")
    return out


def _steps(sweep: dict[str, Any]) -> list[str]:
    rec = next((r for r in sweep.get("steps_1d_vs_2d", []) if r.get("mesh") == "4x4"), None)
    if rec is None:
        return []
    return ["", "### 1D vs 2D at 4x4", "",
            f"All-reduce over the 16 cubes of one SIP: the 1D line takes "
            f"{rec.get('steps_1d')} communication steps, the 2D row-then-column kernel "
            f"{rec.get('steps_2d')} (the mesh diameter is {rec.get('diameter')}); modelled "
            f"latency {_latency(rec.get('latency_1d_s'))} vs "
            f"{_latency(rec.get('latency_2d_s'))} (assumed profile)."]


def _machine(m: dict[str, Any]) -> str:
    return (f"{m.get('cpus')} x {m.get('cpu')}, {m.get('memory_gib')} GiB, {m.get('os')}, "
            f"Python {m.get('python')}, numpy {m.get('numpy')}, BLAS threads "
            f"{m.get('blas_threads')}, load average {m.get('load_average_1m')} at the start, "
            f"{m.get('date_utc')} UTC")


def _numerics(bench: dict[str, Any] | None, why: str) -> tuple[list[str], list[str]]:
    out = ["", "### Numerics at 1M context (the simulation benchmark)", ""]
    if bench is None:
        return [*out, f"Not available: {SIM_BENCH_FILE} is {why}."], [
            f"{SIM_BENCH_FILE} {why}: run `python benchmarks/sim_scale.py --panel "
            "single_user_decode --panel multi_user_decode --contexts 1048576 --json "
            f"reports/headline/{SIM_BENCH_FILE}`, then `meshproof report --scale headline "
            "--fast`"]
    out += ["| panel | context | launches | problems | checked ranks | worst rel err | "
            "max abs err | tolerance | numerics | simulate wall | evaluate | peak RSS |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in bench.get("runs", []):
        n = r.get("numeric", {})
        wall = r.get("wall_s", {})
        err = n.get("rel_err")
        out.append(
            f"| `{r.get('panel')}` | {r.get('context')} | {r.get('launches')} | "
            f"{n.get('groups')} | {n.get('checked_ranks')} | "
            f"{'–' if err is None else f'{err:.3g}'} | {n.get('max_abs_err', 0):.3g} | "
            f"{n.get('tolerance')} | {'✓ within' if n.get('ok') else '**✗ out of**'} "
            f"tolerance | {wall.get('simulate', 0):.0f} s | "
            f"{r.get('evaluate_GBps')} GB/s ({100 * r.get('evaluate_fraction', 0):.0f}% of "
            f"copy) | {r.get('peak_rss_bytes', 0) / 1e9:.2f} GB |")
    out += ["", f"Measured on {_machine(bench.get('machine', {}))}. Every problem gets its "
            "own inputs (normal, seed 0); the reference is dense float64 attention; the "
            "timing model is the assumed profile."]
    return out, []


def _verify_times(bench: dict[str, Any] | None, why: str) -> tuple[list[str], list[str]]:
    out = ["", "### Headline verify times", ""]
    if bench is None:
        return [*out, f"Not available: {VERIFY_BENCH_FILE} is {why}."], [
            f"{VERIFY_BENCH_FILE} {why}: run `python benchmarks/headline_verify.py --json "
            f"reports/headline/{VERIFY_BENCH_FILE}`, then `meshproof report --scale headline "
            "--fast`"]
    modes = [(k, bench[k]) for k in ("proofs_carried", "every_launch_checked") if k in bench]
    out += ["| panel | launches | ranks | trace | verify (proofs carried) | verify (every "
            "launch checked) |", "|---|---:|---:|---:|---:|---:|"]
    rows = {m: {r["panel"]: r for r in data["panels"]} for m, data in modes}
    first = modes[0][1]["panels"] if modes else []
    for r in first:
        other = rows.get("every_launch_checked", {}).get(r["panel"], {})
        out.append(f"| `{r['panel']}` | {r['launches']} | {r['ranks']} | {r['trace_s']:.1f} s "
                   f"| {r['verify_s']:.1f} s | "
                   f"{other.get('verify_s', float('nan')):.1f} s |")
    totals = ", ".join(f"{m.replace('_', ' ')} {d['total_s']:.1f} s" for m, d in modes)
    out += ["", f"The four panels together, tracing included: {totals} (target "
            f"{bench.get('target_s')} s). Measured on {_machine(bench.get('machine', {}))}; "
            "the machine is shared, so the load average matters."]
    return out, []


def placements_figure(placements: list[dict[str, Any]], path: Path) -> Path:
    """Kernels (rows) by cube_start (columns): legal, illegal, or no placement there."""
    width = max((k["placements"] for k in placements), default=1)
    grid = [[0.5] * width for _ in placements]
    for i, k in enumerate(placements):
        for r in k["rows"]:
            grid[i][r["cube_start"]] = 1.0 if r["ok"] else 0.0
    with _figure(12.0, 0.42 * len(placements) + 1.6) as (fig, ax):
        ax.imshow(grid, aspect="auto", interpolation="nearest",
                  cmap=ListedColormap(["#D55E00", "#f2f2f2", "#009E73"]), vmin=0, vmax=1)
        ax.set_yticks(range(len(placements)), [k["kernel"] for k in placements], fontsize=8)
        ax.set_xticks(range(0, width, 4))
        ax.set_xlabel("cube_start (green: every property proved; orange: a property "
                      "violated; grey: the launch does not fit)")
        ax.set_title("every built-in kernel at every placement of the headline system")
        ax.grid(visible=False)
        return _save(fig, path)


def headline_section(sweep: dict[str, Any], bench_dir: Path, out: Path
                     ) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """README lines, figures made, notes."""
    head = sweep.get("headline") or {}
    lines = ["", "## Headline: Llama-70B on 4 SIPs x 16 cubes x 8 PEs, 1M context", ""]
    lines += _panels(sweep.get("panels", []))
    lines += _contrasts(head.get("contrasts", []))
    made: list[tuple[str, str]] = []
    if head.get("placements"):
        lines += _placements(head["placements"], head.get("system", "?"))
        placements_figure(head["placements"], out / PLACEMENTS_FIGURE)
        made.append((PLACEMENTS_FIGURE, "Every built-in kernel at every placement of the "
                     "headline system"))
    lines += _steps(sweep)
    notes: list[str] = []
    for (schema, name), render in ((("meshproof/sim-scale-v1", SIM_BENCH_FILE), _numerics),
                                   (("meshproof/headline-verify-v1", VERIFY_BENCH_FILE),
                                    _verify_times)):
        data, why = _read(bench_dir / name, schema)
        more, extra = render(data, why)
        lines += more
        notes += extra
    return lines, made, notes
