"""The headline report's runs (`meshproof report --scale headline`): the four panels as
deployments (every group of the multi-user panels at once), and every built-in kernel at
every placement on the headline system.

A panel record has the sweep's panel shape (README tables and op-log figures read it),
its properties summed over the launches (violated if any launch's is, unknown if any is
undecided), plus the launches and launch_separation. Headline numerics are not simulated
here: they are the simulation benchmark's (benchmarks/sim_scale.py, read by the page).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from meshproof.deploy.launches import panel_launches
from meshproof.deploy.placements import PlacementSearch, search_placements
from meshproof.gate.pipeline import Pipeline, run_case
from meshproof.kernels import BUILTIN_KERNELS
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.panels import HEADLINE_SYSTEM, PANEL_NAMES, get_panel
from meshproof.report.cases import REPORT_TOLERANCE
from meshproof.sim.config import SimConfig
from meshproof.verify.properties import VerifyConfig
from meshproof.verify.result import Status

Progress = Callable[[str], None]
# the sub-mesh kernels' table compares them placement by placement
SUBMESH_KERNELS = ("mesh_mlo_2d", "mesh_mlo_2d_batch", "mesh_kv_snake",
                   "mesh_mlo_2d_physical_rank")


def panel_record(name: str, scale: str, pipeline: Pipeline,
                 config: VerifyConfig) -> dict[str, Any]:
    panel = get_panel(name, scale)
    listed = panel_launches(panel, scale, resolver=pipeline.resolver)
    tolerance = config.rounding_tolerance if config.rounding_tolerance is not None else \
        REPORT_TOLERANCE
    outcome = run_case(listed, simulate=True, verify_config=replace(
        config, input_bound=panel.input_bound, rounding_tolerance=tolerance),
        sim_config=SimConfig(numerics=False),
        pipeline=pipeline)
    result, simulation = outcome.verdict, outcome.simulation
    assert result is not None and simulation is not None  # verified and simulated
    deployment = result.deployment
    together = simulation.together
    timing = together.timing
    return {
        "name": f"panel_{name}", "kernel": panel.kernel, "why": panel.description,
        "expect": "ok", "panel": name, "scale": scale,
        "launch": deployment.schedules[0].launch.to_json(),
        "active_ranks": sum(len(s.active) for s in deployment.schedules),
        "endpoints": deployment.endpoints,
        "busy_cubes": len({p.endpoint.cube for s in deployment.schedules for p in s.active}),
        "launches": [{"cube_start": v.launch.cube_start, "cubes": v.launch.n_cubes,
                      "ok": v.ok, "violated": [p.value for p in v.violated()],
                      "min_queue_depth": v.min_queue_depth} for v in result.verdicts],
        "separation": result.separation.to_json(timings=False),
        "verdict": {"ok": result.ok,
                    "properties": [{"name": p.name.value, "status": p.status.value,
                                    "message": p.message} for p in outcome.properties],
                    "min_queue_depth": outcome.min_queue_depth, "rendezvous": None},
        "sim": {"op_log": together.op_log.to_json(), "ok": True,
                "timing": {"latency_s": timing.latency_s, "comm_steps": timing.comm_steps}
                if timing else None},
        "healthy": result.ok, "as_expected": result.ok,
    }


def headline_panels(pipeline: Pipeline, config: VerifyConfig,
                    progress: Progress) -> list[dict[str, Any]]:
    out = []
    for name in PANEL_NAMES:
        progress(f"panel {name} (headline, every group)")
        out.append(panel_record(name, "headline", pipeline, config))
    return out


def _placement_record(search: PlacementSearch, opts: LaunchOptions) -> dict[str, Any]:
    first = search.rows[0].verdict.launch
    return {"kernel": search.kernel, "wiring": first.wiring, "cubes": first.n_cubes,
            "pes": first.pes,
            "mesh": f"{first.arg('mesh_rows')}x{first.arg('mesh_cols')}"
            if first.arg("mesh_rows") is not None else None,
            "placements": len(search.rows), "legal": list(search.legal),
            "relocated": search.relocated, "traced_how": search.traced_how,
            "rows": [{"cube_start": r.cube_start, "cubes": r.cubes_text(), "ok": r.ok,
                      "violated": list(r.violated), "message": r.message}
                     for r in search.rows]}


def headline_placements(pipeline: Pipeline, config: VerifyConfig,
                        progress: Progress) -> list[dict[str, Any]]:
    """Every built-in kernel on its natural launch (its default wiring, mesh or cubes and
    validation shapes), at every cube_start of the headline system."""
    out = []
    for name in BUILTIN_KERNELS:
        progress(f"placements {name} (headline system)")
        ref = pipeline.resolver(name)
        opts = LaunchOptions(system=HEADLINE_SYSTEM)
        search = search_placements(ref, opts, pipeline.tracer, pipeline.verifier, config)
        out.append(_placement_record(search, opts))
    return out


def _contrast(name: str, why: str, ref_name: str, opts: LaunchOptions, pipeline: Pipeline,
              config: VerifyConfig) -> dict[str, Any]:
    ref = pipeline.resolver(ref_name)
    schedule = pipeline.tracer(ref, build_launch(ref, opts))
    verdict = pipeline.verifier(schedule, config)
    first = next(p for p in verdict.properties if p.status is Status.VIOLATED) \
        if not verdict.ok else None
    diags = first.counterexample.diagnostics if first and first.counterexample else ()
    return {"name": name, "why": why, "kernel": ref_name, "launch": schedule.launch.to_json(),
            "violated": [p.value for p in verdict.violated()],
            "summary": f"{first.name.value}: {first.message}" if first else "all proved",
            "pes": sorted({d.endpoint.pe for d in diags if d.endpoint}),
            "lines": sorted({str(d.source) for d in diags if d.source}),
            "diagnostics": [d.format() for d in diags[:3]]}


def headline_contrasts(pipeline: Pipeline, config: VerifyConfig,
                       progress: Progress) -> list[dict[str, Any]]:
    """What the headline panels avoid, shown rather than assumed: the B=8 kernel on the
    cube_mesh install, and the 1D prefill line over a 2x4 kv group."""
    progress("contrast: batch on batch on cube_mesh")
    decode = get_panel("multi_user_decode", "headline")
    b8 = _contrast("b8_on_cube_mesh", "the B=8 decode kernel on cube_mesh, which links PE 0 "
                   "of each cube only (why the study's v1 silenced PEs 1-7)",
                   decode.kernel, replace(decode.launch_options(), wiring="cube_mesh"),
                   pipeline, replace(config, input_bound=decode.input_bound))
    progress("contrast: the 1D prefill line over a 2x4 group")
    prefill = get_panel("multi_user_prefill", "headline")
    args = {k: v for k, v in prefill.args if k not in ("mesh_rows", "mesh_cols", "users")}
    line = _contrast("line_over_2x4", "the 1D prefill line (mesh_kv) over the 8 cubes of a "
                     "2x4 kv group: it runs off row 0 (cube 3 E, cube 4 W)", "mesh_kv",
                     LaunchOptions(system=HEADLINE_SYSTEM, wiring="cube_mesh", cubes=8,
                                   args=tuple(sorted({**args, "rank_axis": 1}.items()))),
                     pipeline, replace(config, input_bound=prefill.input_bound))
    return [b8, line]
