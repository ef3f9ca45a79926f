"""The report's sweep: every case through the pipeline (`gate.pipeline.run_case`), judged
by the gate's judge, drawn; the `sweep-v1` JSON.

The JSON holds no wall-clock values, so a rerun on the same machine writes the same bytes.
Floats the timing model computes (exact float64 arithmetic over the IR) keep 6
significant digits; errors measured by the numpy simulation keep stability.MEASURED_DIGITS (2),
because BLAS and CPU differences move their third digit (2.72e-04 on one machine, 2.73e-04
on the next); a rerun also keeps the values already on file when they moved by less than
that noise (report/stability.py). A case whose schedule deadlocks is not simulated (the
simulator refuses it); the record says so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from meshproof import __version__
from meshproof.errors import MeshproofError, OutputError
from meshproof.gate.judge import Expectation, Numerics, judge
from meshproof.gate.matrix import resolve_case
from meshproof.gate.outcome import CaseOutcome
from meshproof.gate.pipeline import Pipeline, one_launch, run_case
from meshproof.kernels import BUILTIN_KERNELS
from meshproof.model.hardware import DEFAULT_PROFILE
from meshproof.model.schedule import Schedule
from meshproof.panels import CAUSAL_PANEL_NAMES, HEADLINE_SYSTEM, PANEL_NAMES, SCALES
from meshproof.report.cases import (
    STEP_MESHES,
    VALIDATION_CASES,
    ReportCase,
    panel_cases,
    scaling_cases,
    step_cases,
)
from meshproof.report.causal import causal_records
from meshproof.report.headline import (
    headline_contrasts,
    headline_panels,
    headline_placements,
)
from meshproof.report.messages import message_table
from meshproof.report.render import RenderOutcome, render_dot
from meshproof.report.schedule_diagram import schedule_diagram
from meshproof.report.stability import measured
from meshproof.report.topology_diagram import topology_diagram
from meshproof.sim.config import SimConfig
from meshproof.verify.api import VerifyConfig
from meshproof.verify.result import Verdict

SWEEP_SCHEMA = "meshproof/sweep-v1"
MAX_DIAGNOSTICS = 8     # per property in the JSON; the diagrams and `verify` show them all

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class SweepOptions:
    scale: str = "validation"
    # None: the scale's own (the kernels' cases at validation scale; at headline scale the
    # panels and the placement search, the kernels' cases being the validation report's)
    cases: tuple[ReportCase, ...] | None = None
    panels: bool = True
    placements: bool = True        # headline scale: every kernel at every placement
    scaling: bool = True
    step_meshes: tuple[tuple[int, int], ...] = STEP_MESHES
    diagrams: bool = True
    renderer: str = "reproducible"   # committed diagrams: the same bytes on every machine
    verify_config: VerifyConfig = field(default_factory=VerifyConfig)
    seed: int = 0
    pipeline: Pipeline = field(default_factory=Pipeline)

    @property
    def runs(self) -> tuple[ReportCase, ...]:
        """The kernel cases this sweep runs."""
        if self.cases is not None:
            return self.cases
        return VALIDATION_CASES if self.scale == "validation" else ()

    def units(self) -> int:
        """How many progress steps `run_sweep` reports (for a progress bar's total)."""
        n = len(self.runs)
        if self.scale == "headline":
            n += len(PANEL_NAMES) * self.panels + \
                (len(BUILTIN_KERNELS) + 2) * self.placements   # + the two contrasts
        else:
            n += len(panel_cases(self.scale)) if self.panels else 0
        n += len(CAUSAL_PANEL_NAMES) if self.panels else 0
        n += sum(len(scaling_cases(s)) for s in SCALES) if self.scaling else 0
        return n + len(step_cases(self.step_meshes))


def dumps_sweep(sweep: dict[str, Any]) -> str:
    return json.dumps(sweep, sort_keys=True, indent=2, ensure_ascii=False,
                      allow_nan=False) + "\n"


def sig(x: float | None, digits: int = 6) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return float(f"{x:.{digits}g}")


def _run(rc: ReportCase, options: SweepOptions, *, verify: bool) -> CaseOutcome:
    p = options.pipeline
    ref, launch = resolve_case(rc.case, resolver=p.resolver)
    sim_config = SimConfig(seed=options.seed, numerics=verify and rc.case.simulate,
                           inputs=rc.inputs)
    config = options.verify_config
    if config.rounding_tolerance is None and rc.case.rounding_tolerance is not None:
        # the case's own, stated
        config = replace(config, rounding_tolerance=rc.case.rounding_tolerance)
    return run_case(one_launch(ref, launch), simulate=True, verify=verify,
                    verify_config=config, sim_config=sim_config, pipeline=p)


def _verdict_record(outcome: CaseOutcome) -> dict[str, Any]:
    props = []
    for p in outcome.properties:
        entry: dict[str, Any] = {"name": p.name.value, "status": p.status.value,
                                 "message": p.message}
        if p.has_counterexample:
            entry["diagnostics"] = list(p.diagnostics[:MAX_DIAGNOSTICS])
            entry["diagnostics_total"] = len(p.diagnostics)
        if p.culprits:   # numeric_safety's bound by mechanism, whatever the verdict
            entry["culprits"] = list(p.culprits)
        props.append(entry)
    rendezvous = outcome.rendezvous
    return {"ok": outcome.ok, "properties": props, "min_queue_depth": outcome.min_queue_depth,
            "rendezvous": rendezvous.value if rendezvous else None}


def _sim_record(outcome: CaseOutcome) -> dict[str, Any]:
    if outcome.refused:
        return {"refused": outcome.refused}
    assert outcome.simulation is not None  # run_case simulated and was not refused
    result = outcome.simulation.together  # one launch: its whole run
    out: dict[str, Any] = {"op_log": result.op_log.to_json(), "ok": result.ok}
    if result.numeric is not None:
        n = result.numeric
        out["numeric"] = {"rel_err": measured(n.rel_err),
                          "max_abs_err": measured(n.max_abs_err),
                          "tolerance": sig(n.tolerance), "ok": n.ok, "message": n.message}
    if result.timing is not None:
        out["timing"] = {"latency_s": sig(result.timing.latency_s),
                         "comm_steps": result.timing.comm_steps}
    return out


def _draw(schedule: Schedule, verdict: Verdict, name: str, out_dir: Path,
          renderer: str) -> dict[str, Any]:
    sd = schedule_diagram(schedule, verdict)
    td = topology_diagram(schedule)
    sched = render_dot(sd.source, out_dir / f"{name}.svg", engine=sd.engine, renderer=renderer)
    topo = render_dot(td.source, out_dir / f"{name}_topology.svg", engine="neato",
                      renderer=renderer)
    return {"schedule": _rel(sched, out_dir), "topology": _rel(topo, out_dir),
            "renderer": sched.renderer, "faults_drawn": sd.faults_drawn + td.faults_drawn}


def _rel(outcome: RenderOutcome, out_dir: Path) -> str:
    target = outcome.image or outcome.written[0]
    return f"{out_dir.name}/{target.name}"


def run_report_case(rc: ReportCase, options: SweepOptions,
                    diagram_dir: Path | None) -> dict[str, Any]:
    case = rc.case
    record: dict[str, Any] = {"name": case.name, "kernel": case.kernel, "why": rc.why,
                              "expect": "violated" if case.expectation.names else "ok",
                              "panel": case.panel, "scale": case.scale}
    outcome = None
    try:
        outcome = _run(rc, options, verify=True)
        schedule, verified = outcome.schedule, outcome.verdict
        assert schedule is not None and verified is not None  # run here, not from a cache
        verdict = verified.verdicts[0]
        record["launch"] = schedule.launch.to_json()
        record["active_ranks"] = len(schedule.active)
        record["verdict"] = _verdict_record(outcome)
        record["hop_steps"] = message_table(schedule).comm_steps
        record["sim"] = _sim_record(outcome)
        if diagram_dir is not None:
            record["diagrams"] = _draw(schedule, verdict, case.name, diagram_dir,
                                       options.renderer)
    except OutputError:
        raise  # the report cannot be written: not a verdict on this kernel
    except MeshproofError as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
        outcome = None
    # healthy: every property proved and, when simulated, numerically within tolerance
    healthy = Expectation(numerics=Numerics.IN_TOLERANCE if case.simulate else
                          Numerics.UNCHECKED)
    record["healthy"] = outcome is not None and judge(healthy, outcome).met
    record["as_expected"] = outcome is not None and judge(case.expectation, outcome).met
    return record


def _sim_only(rc: ReportCase, options: SweepOptions) -> dict[str, Any]:
    try:
        return _sim_record(_run(rc, options, verify=False))
    except MeshproofError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def run_sweep(options: SweepOptions, diagram_dir: Path | None,
              progress: Progress | None = None) -> dict[str, Any]:
    def step(label: str) -> None:
        if progress is not None:
            progress(label)

    drawn = diagram_dir if options.diagrams else None
    cases = []
    for rc in options.runs:
        step(f"case {rc.name}")
        cases.append(run_report_case(rc, options, drawn))
    panels = []
    if options.panels and options.scale == "headline":
        # every group of every panel at once (meshproof.deploy); no 512-rank diagrams
        panels = headline_panels(options.pipeline, options.verify_config, step)
    elif options.panels:
        for rc in panel_cases(options.scale):
            step(f"panel {rc.case.panel} ({options.scale})")
            panels.append(run_report_case(rc, options, drawn))
    causal = causal_records(options.scale, options.pipeline, options.verify_config, step) \
        if options.panels else []
    scaling = []
    if options.scaling:
        # both scales: the timing model is cheap, and at validation shapes fixed per-op
        # overheads hide what more Q heads per cube cost
        for scale in SCALES:
            for sc in scaling_cases(scale):
                step(f"scaling {sc.case.name} ({scale})")
                scaling.append({"name": sc.case.name, "panel": sc.panel, "scale": scale,
                                "h_q": sc.h_q, "users": sc.users,
                                "sim": _sim_only(sc.case, options)})
    sweep: dict[str, Any] = {
        "schema": SWEEP_SCHEMA,
        "meshproof_version": __version__,
        "scale": options.scale,
        "seed": options.seed,
        "hardware_profile": DEFAULT_PROFILE.name,
        "cases": cases,
        "panels": panels,
        "causal": causal,
        "scaling": scaling,
        "steps_1d_vs_2d": _steps(options, step),
    }
    if options.scale == "headline" and options.placements:
        sweep["headline"] = {
            "system": HEADLINE_SYSTEM.shape_text,
            "contrasts": headline_contrasts(options.pipeline, options.verify_config, step),
            "placements": headline_placements(options.pipeline, options.verify_config, step)}
    return sweep


def _steps(options: SweepOptions, step: Progress) -> list[dict[str, Any]]:
    by_mesh: dict[tuple[int, int], dict[str, Any]] = {}
    for rc in step_cases(options.step_meshes):
        step(f"steps {rc.name}")
        rows, cols = (int(x) for x in rc.name.rsplit("_", 1)[1].split("x"))
        rec = by_mesh.setdefault((rows, cols), {
            "mesh": f"{rows}x{cols}", "rows": rows, "cols": cols, "n": rows * cols,
            "diameter": (rows - 1) + (cols - 1)})
        sim = _sim_only(rc, options)
        kind = "1d" if rc.name.startswith("steps_1d") else "2d"
        timing = sim.get("timing", {})
        rec[f"steps_{kind}"] = timing.get("comm_steps")
        rec[f"latency_{kind}_s"] = timing.get("latency_s")
        if "timing" not in sim:
            rec[f"error_{kind}"] = sim.get("refused") or sim.get("error")
    return [by_mesh[k] for k in sorted(by_mesh, key=lambda rc: (rc[0] * rc[1], rc))]
