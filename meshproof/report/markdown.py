"""The report's README.md: verdict tables, the study's facts checked, the figures.

Built from the sweep JSON only, so `--fast` can rewrite it; no dates or durations, so a
rerun writes the same bytes.
"""

from __future__ import annotations

from typing import Any

from meshproof.verify.properties import PROPERTY_NAMES

# column heads of the verdict table; a property without one is headed by its name
_ABBREV = {"direction_legality": "dir", "launch_confinement": "conf",
           "channel_matching": "match", "deadlock_freedom": "deadlock",
           "exactly_once_merge": "merge", "attention_equivalence": "attention",
           "numeric_safety": "numeric"}
_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                 "nine")


def _words(n: int) -> str:
    return _NUMBER_WORDS[n] if n < len(_NUMBER_WORDS) else str(n)


_GLYPH = {"proved": "✓", "violated": "**✗**", "unknown": "?"}


def _status(record: dict[str, Any], prop: str) -> str:
    for p in record.get("verdict", {}).get("properties", []):
        if p["name"] == prop:
            return _GLYPH.get(str(p["status"]), str(p["status"]))
    return "–"


def _num(sim: dict[str, Any]) -> str:
    if not sim:
        return "–"
    if "refused" in sim:
        return "not run (deadlock)"
    if "error" in sim:
        return "error"
    n = sim.get("numeric")
    if not n:
        return "–"
    if n["rel_err"] is None:
        return "**non-finite ✗**"
    # two significant digits: a measured error moves in its third digit from one BLAS
    # or CPU to the next (stability.MEASURED_DIGITS)
    return f"{n['rel_err']:.1e} " + ("✓" if n["ok"] else "**✗**")


def _steps(sim: dict[str, Any]) -> str:
    t = (sim or {}).get("timing")
    return str(t["comm_steps"]) if t else "–"


def _latency(sim: dict[str, Any]) -> str:
    t = (sim or {}).get("timing")
    if not t or t["latency_s"] is None:
        return "–"
    seconds = float(t["latency_s"])
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} µs"


def _launch(record: dict[str, Any]) -> str:
    la = record.get("launch")
    if not la:
        return "–"
    first, n = la["cube_start"], la["cubes"]
    cubes = f"c{first}" if n == 1 else f"c{first}-{first + n - 1}"
    args = la.get("args", {})
    extra = []
    if args.get("mesh_rows") is not None:
        extra.append(f"mesh {args['mesh_rows']}x{args['mesh_cols']}")
    elif args.get("n_ranks") is not None:
        extra.append(f"n={args['n_ranks']}")
    if args.get("rank_axis") == 1:
        extra.append("rank_axis=1")
    extra.append(f"D={la['queue_depth']}")
    launches = record.get("launches") or []
    if len(launches) > 1:   # several launches at once: the first, and how many
        extra.append(f"+ {len(launches) - 1} more launch(es) at cube_start "
                     + ", ".join(str(x["cube_start"]) for x in launches[1:]))
    return " ".join([f"`{la['wiring']}`", la["system"], f"{cubes} ×{la['pes']}", *extra])


def _diagrams(record: dict[str, Any]) -> str:
    d = record.get("diagrams")
    if not d:
        return "–"
    return f"[schedule]({d['schedule']}) · [topology]({d['topology']})"


def _expect(record: dict[str, Any]) -> str:
    mark = "✓" if record.get("as_expected") else "**UNEXPECTED**"
    return f"{record['expect']} {mark}"


def _first_problem(record: dict[str, Any]) -> str:
    if "error" in record:
        return str(record["error"])
    for p in record.get("verdict", {}).get("properties", []):
        if p["status"] != "proved":
            return f"{p['name']} {p['status']}: {p['message']}"
    n = (record.get("sim") or {}).get("numeric")
    if n and not n["ok"]:
        return f"numerics: {n['message']}"
    return "all properties proved" + (", numerics within tolerance" if n else "")


def numeric_culprits(records: list[dict[str, Any]]) -> list[str]:
    """Per run, numeric_safety's verdict and its bound's shares by mechanism with their
    kernel lines (largest first), beside a proved verdict too: where a kernel's rounding
    error comes from, and so what would lower it."""
    out: list[str] = []
    for r in records:
        for p in r.get("verdict", {}).get("properties", []):
            if p["name"] == "numeric_safety" and p.get("culprits"):
                out.append(f"- `{r['name']}`: numeric_safety {p['status']}; the rounding "
                           "bound's shares: " + "; ".join(_cell(c) for c in p["culprits"]))
    return out


# a list longer than this (the 1,344 illegal ops of a case name 56 endpoints) is folded
FOLD_OVER, FOLD_KEEP = 12, 8


def fold_list(text: str) -> str:
    """`text` with a long comma-separated list cut to its first FOLD_KEEP items and a
    count of the rest (sweep.json keeps every one)."""
    parts = text.split(", ")
    if len(parts) <= FOLD_OVER:
        return text
    return ", ".join(parts[:FOLD_KEEP]) + f", … and {len(parts) - FOLD_KEEP} more " \
        "(sweep.json lists them all)"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def verdict_table(records: list[dict[str, Any]]) -> list[str]:
    heads = ["case", "kernel", "launch", "expected", *(_ABBREV.get(p, p) for p in PROPERTY_NAMES),
             "min D", "rel err", "steps", "latency", "diagrams"]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for r in records:
        v = r.get("verdict", {})
        min_d = v.get("min_queue_depth")
        row = [f"`{r['name']}`", f"`{r['kernel']}`", _launch(r), _expect(r),
               *(_status(r, p) for p in PROPERTY_NAMES),
               "–" if min_d is None else str(min_d), _num(r.get("sim") or {}),
               _steps(r.get("sim") or {}), _latency(r.get("sim") or {}), _diagrams(r)]
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return lines


def op_log_table(records: list[dict[str, Any]]) -> list[str]:
    keys = ("gemm", "ipcq_send", "ipcq_recv", "dma_read", "dma_write")
    lines = ["| panel | " + " | ".join(keys) + " |", "|---|" + "---:|" * len(keys)]
    for r in records:
        log = (r.get("sim") or {}).get("op_log", {})
        lines.append(f"| `{r['panel']}` | " + " | ".join(str(log.get(k, "–")) for k in keys)
                     + " |")
    return lines


def render_readme(sweep: dict[str, Any], figures: list[tuple[str, str]],
                  notes: list[str], facts: list[tuple[str, bool, str]],
                  sections: list[str] | None = None) -> str:
    """`sections`: more markdown lines, placed before the figures (the headline's)."""
    scale = sweep["scale"]
    cases, panels = sweep["cases"], sweep["panels"]
    intro = (f"Every built-in kernel verified ({_words(len(PROPERTY_NAMES))} properties, "
             "Z3) and simulated (numpy reference, modelled timing) on the launch that shows "
             "what it does, plus the four GQA Llama-70B panels. Regenerate with `meshproof "
             "report` (or `make demo`); `meshproof report --fast` redraws the figures and "
             "this page from `sweep.json` without re-running.")
    if scale == "headline":
        intro = (f"The four GQA Llama-70B panels at the study's shapes, every group of each "
                 f"verified ({_words(len(PROPERTY_NAMES))} properties) and timed at once, "
                 "and every built-in kernel at every placement of the headline system. "
                 "Regenerate with `meshproof report --scale headline`; add `--fast` to "
                 "redraw the figures and this page from `sweep.json` and the benchmark "
                 "files without re-running.")
    out = [f"# meshproof report ({scale} scale)", "", intro, ""]
    n_bad = sum(1 for r in cases + panels if not r.get("as_expected"))
    out.append(f"**{len(cases) + len(panels)} runs; " + (
        "all as expected.**" if n_bad == 0 else f"{n_bad} NOT as expected.**"))
    out += ["", "Legend: ✓ proved · **✗** violated · ? unknown (never counted as proved) · "
            "*expected* is the verdict the case is meant to show (known-bad kernels are "
            "expected to be caught) · *min D* the smallest deadlock-free queue depth · "
            "*rel err* ‖out − ref‖/‖ref‖ against dense float64 attention · *steps* the "
            "longest chain of dependent hops · *latency* modelled with the assumed hardware "
            f"profile ({sweep.get('hardware_profile', 'default')}).", "",
            ]
    if cases:
        out += ["## Kernels", ""]
        out += verdict_table(cases)
        out += ["", "What each case shows:", ""]
        for r in cases:
            out.append(f"- `{r['name']}`: {r['why']}. Result: "
                       f"{_cell(fold_list(_first_problem(r)))}")
    if panels:
        out += ["", f"## GQA panels ({scale})", ""] if cases else [f"## GQA panels ({scale})", ""]
        out += verdict_table(panels)
        out += ["", "Op log per panel:", ""]
        out += op_log_table(panels)
    culprits = numeric_culprits(cases + panels)
    if culprits:
        out += ["", "## Where the rounding error comes from", "",
                "numeric_safety's bound by mechanism (share of the bound, kernel lines), "
                "for every run whose bound is known:", ""]
        out += culprits
    if facts:
        out += ["", "## Facts from the study, checked", ""]
        for text, ok, got in facts:
            out.append(f"- {'✓' if ok else '**✗**'} {text}" + (f" (got: {got})" if got else ""))
    out += sections or []
    out += ["", "## Figures", ""]
    for rel, caption in figures:
        out += [f"### {caption}", "", f"![{caption}]({rel})", ""]
    if notes:
        out += ["## Notes", ""]
        out += [f"- {n}" for n in notes]
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"
