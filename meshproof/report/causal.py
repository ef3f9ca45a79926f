"""The causal prefill panels side by side: the per-rank imbalance and the balanced speed-up.

`causal_records` runs the two causal panels (meshproof/panels.py: naive and zigzag ring
prefill under a causal mask) at the report's scale: at validation scale verified
(attention_equivalence, exactly_once_merge and numeric_safety, spec/semantics.md §8) and
timed, at headline scale timed only (the 1M-token
proof is `meshproof verify --panel … --scale headline`, benchmarks/masked_scale.py).
Every cube of a panel runs the same independent ring, so the per-rank figures are those
of the first cube. `imbalance` reads a record's busy time per rank; `imbalance_lines`
says in words what the figure shows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from meshproof.deploy.launches import panel_launches
from meshproof.gate.pipeline import Pipeline, run_case
from meshproof.panels import CAUSAL_LAYOUTS, CAUSAL_PANEL_NAMES, get_panel
from meshproof.sim.config import SimConfig
from meshproof.verify.properties import Property, VerifyConfig

Progress = Callable[[str], None]
JUDGED = (Property.ATTENTION_EQUIVALENCE, Property.EXACTLY_ONCE_MERGE,
          Property.NUMERIC_SAFETY)
FIGURE = "figures/causal_imbalance.png"


def _sig(x: float) -> float:
    return float(f"{x:.6g}")     # as the sweep keeps modelled times (sweep.sig)


def causal_records(scale: str, pipeline: Pipeline, config: VerifyConfig,
                   progress: Progress) -> list[dict[str, Any]]:
    out = []
    for name in CAUSAL_PANEL_NAMES:
        progress(f"causal panel {name} ({scale})")
        panel = get_panel(name, scale)
        listed = panel_launches(panel, scale, resolver=pipeline.resolver)
        verify = scale == "validation"
        outcome = run_case(listed, simulate=True, verify=verify,
                           verify_config=replace(config, only=frozenset(JUDGED),
                                                 input_bound=panel.input_bound),
                           sim_config=SimConfig(numerics=False), pipeline=pipeline)
        result = outcome.simulation.together if outcome.simulation is not None else None
        timing = result.timing if result is not None else None
        first = min((r.endpoint.cube for r in timing.per_rank), default=0) if timing else 0
        record: dict[str, Any] = {
            "panel": name, "kernel": panel.kernel, "layout": CAUSAL_LAYOUTS[name],
            "scale": scale, "why": panel.description,
            "properties": [{"name": p.name.value, "status": p.status.value}
                           for p in outcome.properties] if verify else None,
            "timing": None if timing is None else {
                "latency_s": _sig(timing.latency_s), "comm_steps": timing.comm_steps,
                "per_rank": [{"cube": r.endpoint.cube, "pe": r.endpoint.pe,
                              "busy_s": _sig(r.busy_s)} for r in timing.per_rank
                             if r.endpoint.cube == first]},
            "refused": outcome.refused or None,
        }
        out.append(record)
    return out


def imbalance(record: dict[str, Any]) -> tuple[float, float, float] | None:
    """(least busy rank, busiest rank, latency) of a causal record, in seconds."""
    timing = record.get("timing")
    if not timing or not timing.get("per_rank"):
        return None
    busy = [float(r["busy_s"]) for r in timing["per_rank"]]
    return min(busy), max(busy), float(timing["latency_s"])


def _us(seconds: float) -> str:
    if seconds >= 1.0:
        return f"{seconds:.3g} s"
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} µs"


def imbalance_lines(records: list[dict[str, Any]]) -> list[str]:
    """The section's README lines: each layout's per-rank busy range and latency, the
    proofs (validation scale), and the balanced speed-up in words."""
    by = {r["layout"]: r for r in records}
    lines = ["", "### Causal prefill: the per-rank imbalance", "",
             f"![per-rank busy time]({FIGURE})", ""]
    for r in records:
        figs = imbalance(r)
        proofs = r.get("properties")
        proved = "" if proofs is None else " " + ", ".join(
            f"{p['name']} {p['status']}" for p in proofs) + ";"
        if figs is None:
            lines.append(f"- `{r['panel']}` (`{r['kernel']}`):{proved} not timed "
                         f"({r.get('refused') or 'no timing'}).")
            continue
        lo, hi, latency = figs
        lines.append(f"- `{r['panel']}` (`{r['kernel']}`):{proved} busy time per rank "
                     f"{_us(lo)} to {_us(hi)}, latency {_us(latency)}.")
    naive, zigzag = (imbalance(by[k]) if k in by else None for k in ("naive", "zigzag"))
    if naive is not None and zigzag is not None:
        speed = naive[2] / zigzag[2] if zigzag[2] > 0 else float("nan")
        lines += ["", f"The naive ring's ranks are unevenly loaded: its busiest rank works "
                  f"{naive[1] / naive[0]:.2g}× as long as its least busy one "
                  f"({_us(naive[0])} → {_us(naive[1])}), because rank i folds i + 1 of the "
                  f"n blocks; zigzag gives every rank the same blocks "
                  f"({_us(zigzag[0])} → {_us(zigzag[1])}, {zigzag[1] / zigzag[0]:.2g}×). "
                  f"Balanced, the prefill finishes in {_us(zigzag[2])} instead of "
                  f"{_us(naive[2])}: {max(speed, 1 / speed):.2f}× "
                  f"{'faster' if speed >= 1 else 'slower'} (modelled, default profile)."]
    return lines


def imbalance_runs(records: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(label, timing) pairs for figures.imbalance_figure."""
    return [(r["layout"], r["timing"]) for r in records if imbalance(r) is not None]


__all__ = ["FIGURE", "causal_records", "imbalance", "imbalance_lines", "imbalance_runs"]
