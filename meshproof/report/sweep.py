"""The report's sweep: trace, verify, simulate and draw every case; the `sweep-v1` JSON.

The JSON holds no wall-clock values and rounds floats to 6 significant digits, so a rerun
on the same machine writes the same bytes (and small BLAS differences elsewhere do not
show). A case whose schedule deadlocks is not simulated (the simulator refuses it); the
record says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meshproof import __version__
from meshproof.errors import MeshproofError, OutputError, SimulationRefused
from meshproof.model.hardware import DEFAULT_PROFILE
from meshproof.model.launch import build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.schedule import Schedule
from meshproof.model.trace import trace
from meshproof.panels import SCALES
from meshproof.report.cases import (
    STEP_MESHES,
    VALIDATION_CASES,
    Case,
    panel_cases,
    scaling_cases,
    step_cases,
)
from meshproof.report.messages import message_table
from meshproof.report.render import RenderOutcome, render_dot
from meshproof.report.schedule_diagram import schedule_diagram
from meshproof.report.topology_diagram import topology_diagram
from meshproof.sim.api import SimConfig, simulate
from meshproof.sim.inputs import InputKind
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.result import Verdict

SWEEP_SCHEMA = "meshproof/sweep-v1"
MAX_DIAGNOSTICS = 8     # per property in the JSON; the diagrams and `verify` show them all

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class SweepOptions:
    scale: str = "validation"
    cases: tuple[Case, ...] = VALIDATION_CASES
    panels: bool = True
    scaling: bool = True
    step_meshes: tuple[tuple[int, int], ...] = STEP_MESHES
    diagrams: bool = True
    renderer: str = "auto"
    verify_config: VerifyConfig = field(default_factory=VerifyConfig)
    seed: int = 0

    def units(self) -> int:
        """How many progress steps `run_sweep` reports (for a progress bar's total)."""
        n = len(self.cases)
        n += len(panel_cases(self.scale)) if self.panels else 0
        n += sum(len(scaling_cases(s)) for s in SCALES) if self.scaling else 0
        return n + len(step_cases(self.step_meshes))


def sig(x: float | None, digits: int = 6) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return float(f"{x:.{digits}g}")


def _schedule(case: Case) -> Schedule:
    kernel = resolve_kernel(case.kernel)
    return trace(kernel, build_launch(kernel, case.options))


def _verdict_json(v: Verdict) -> dict[str, Any]:
    props = []
    for p in v.properties:
        entry: dict[str, Any] = {"name": p.name, "status": p.status.value,
                                 "message": p.message}
        if p.counterexample is not None:
            diags = [d.format() for d in p.counterexample.diagnostics]
            entry["diagnostics"] = diags[:MAX_DIAGNOSTICS]
            entry["diagnostics_total"] = len(diags)
        props.append(entry)
    return {"ok": v.ok, "properties": props, "min_queue_depth": v.min_queue_depth,
            "rendezvous": v.rendezvous.value}


def _sim_json(schedule: Schedule, numerics: bool, seed: int,
              inputs: str = "normal") -> dict[str, Any]:
    try:
        result = simulate(schedule, SimConfig(seed=seed, numerics=numerics,
                                              inputs=InputKind(inputs)))
    except SimulationRefused as exc:
        return {"refused": str(exc)}
    out: dict[str, Any] = {"op_log": result.op_log.to_json(), "ok": result.ok}
    if result.numeric is not None:
        n = result.numeric
        out["numeric"] = {"rel_err": sig(n.rel_err), "max_abs_err": sig(n.max_abs_err),
                          "tolerance": sig(n.tolerance), "ok": n.ok, "message": n.message}
    if result.timing is not None:
        out["timing"] = {"latency_s": sig(result.timing.latency_s),
                         "comm_steps": result.timing.comm_steps}
    return out


def _draw(schedule: Schedule, verdict: Verdict | None, name: str, out_dir: Path,
          renderer: str) -> dict[str, Any]:
    sd = schedule_diagram(schedule, verdict)
    td = topology_diagram(schedule)
    sched = render_dot(sd.source, out_dir / f"{name}.svg", renderer=renderer)
    topo = render_dot(td.source, out_dir / f"{name}_topology.svg", engine="neato",
                      renderer=renderer)
    return {"schedule": _rel(sched, out_dir), "topology": _rel(topo, out_dir),
            "renderer": sched.renderer, "faults_drawn": sd.faults_drawn + td.faults_drawn}


def _rel(outcome: RenderOutcome, out_dir: Path) -> str:
    target = outcome.image or outcome.written[0]
    return f"{out_dir.name}/{target.name}"


def run_case(case: Case, options: SweepOptions, diagram_dir: Path | None) -> dict[str, Any]:
    record: dict[str, Any] = {"name": case.name, "kernel": case.kernel, "why": case.why,
                              "expect": "ok" if case.expect_ok else "violated",
                              "panel": case.panel, "scale": case.scale}
    try:
        schedule = _schedule(case)
        record["launch"] = schedule.launch.to_json()
        record["active_ranks"] = len(schedule.active)
        verdict = verify(schedule, options.verify_config)
        record["verdict"] = _verdict_json(verdict)
        record["hop_steps"] = message_table(schedule).comm_steps
        record["sim"] = _sim_json(schedule, case.scale == "validation", options.seed,
                                  case.inputs)
        if diagram_dir is not None:
            record["diagrams"] = _draw(schedule, verdict, case.name, diagram_dir,
                                       options.renderer)
    except OutputError:
        raise  # the report cannot be written: not a verdict on this kernel
    except MeshproofError as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
    record["healthy"] = healthy(record)
    record["as_expected"] = record["healthy"] == case.expect_ok
    return record


def healthy(record: dict[str, Any]) -> bool:
    """Proved everywhere and, when simulated, numerically within tolerance."""
    if "error" in record or not record.get("verdict", {}).get("ok", False):
        return False
    sim = record.get("sim") or {}
    return "refused" not in sim and bool(sim.get("ok", True))


def _sim_only(case: Case, seed: int, numerics: bool) -> dict[str, Any]:
    try:
        return _sim_json(_schedule(case), numerics, seed)
    except MeshproofError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def run_sweep(options: SweepOptions, diagram_dir: Path | None,
              progress: Progress | None = None) -> dict[str, Any]:
    def step(label: str) -> None:
        if progress is not None:
            progress(label)

    cases = []
    for case in options.cases:
        step(f"case {case.name}")
        cases.append(run_case(case, options, diagram_dir if options.diagrams else None))
    panels = []
    if options.panels:
        for case in panel_cases(options.scale):
            step(f"panel {case.panel} ({options.scale})")
            panels.append(run_case(case, options, diagram_dir if options.diagrams else None))
    scaling = []
    if options.scaling:
        # both scales: the timing model is cheap, and at validation shapes fixed per-op
        # overheads hide what more Q heads per cube cost
        for scale in SCALES:
            for case in scaling_cases(scale):
                step(f"scaling {case.name} ({scale})")
                sim = _sim_only(case, options.seed, False)
                scaling.append({"name": case.name, "panel": case.panel, "scale": scale,
                                "h_q": dict(case.options.args)["h_q"], "sim": sim})
    steps = []
    by_mesh: dict[tuple[int, int], dict[str, Any]] = {}
    for case in step_cases(options.step_meshes):
        step(f"steps {case.name}")
        rows, cols = (int(x) for x in case.name.rsplit("_", 1)[1].split("x"))
        rec = by_mesh.setdefault((rows, cols), {
            "mesh": f"{rows}x{cols}", "rows": rows, "cols": cols, "n": rows * cols,
            "diameter": (rows - 1) + (cols - 1)})
        sim = _sim_only(case, options.seed, False)
        kind = "1d" if case.name.startswith("steps_1d") else "2d"
        timing = sim.get("timing", {})
        rec[f"steps_{kind}"] = timing.get("comm_steps")
        rec[f"latency_{kind}_s"] = timing.get("latency_s")
        if "timing" not in sim:
            rec[f"error_{kind}"] = sim.get("refused") or sim.get("error")
    steps = [by_mesh[k] for k in sorted(by_mesh, key=lambda rc: (rc[0] * rc[1], rc))]
    return {
        "schema": SWEEP_SCHEMA,
        "meshproof_version": __version__,
        "scale": options.scale,
        "seed": options.seed,
        "hardware_profile": DEFAULT_PROFILE.name,
        "cases": cases,
        "panels": panels,
        "scaling": scaling,
        "steps_1d_vs_2d": steps,
    }
