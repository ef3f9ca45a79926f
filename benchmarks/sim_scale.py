"""Scale benchmark of the reference simulator: a headline decode panel, with numerics.

single_user_decode (default): Llama-70B decode, one user: 64 cubes, each an independent
8-PE line (1 q head per cube), d_head 128. multi_user_decode: batch on batch (B=8), the 8
kv groups at once on 2x4 sub-meshes, PE p of every cube serving user p: 64 problems of 8
ranks, every user's output checked. Runs a quick 64K-context case first, then the 1M
headline (skip it with --quick), and prints for each: wall time per phase, peak RSS, and
the K/V bytes (as f16, what the kernel streams) per second of IR evaluation, as a
fraction of a numpy copy bandwidth measured in the same run. Targets (issue 4): >= 50% of
the copy bandwidth, peak RSS <= 3x the K/V bytes. `--json PATH` also writes the figures
and the machine (the headline report reads reports/headline/sim_scale.json).

BLAS runs single-threaded unless OPENBLAS_NUM_THREADS is set: on a 2-core machine shared
with other work, a second BLAS thread made small GEMVs 20-40x slower here.

    .venv/bin/python benchmarks/sim_scale.py            # 64K, then 1M context
    .venv/bin/python benchmarks/sim_scale.py --quick    # 64K only
    .venv/bin/python benchmarks/sim_scale.py --panel single_user_decode \
        --panel multi_user_decode --contexts 1048576 --json reports/headline/sim_scale.json
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from machine import machine

from meshproof.cli.options import resolve_launch, resolve_launches
from meshproof.deploy.deployment import build_deployment
from meshproof.deploy.simulate import simulate_deployment
from meshproof.model.trace import trace
from meshproof.sim.api import SimConfig, simulate
from meshproof.sim.result import NumericResult, SimResult

PANELS = ("single_user_decode", "multi_user_decode")
SCHEMA = "meshproof/sim-scale-v1"
COPY_BYTES = 1 << 28   # 256 MiB: far larger than the caches the copy should not fit in
GB = 1e9


def copy_bandwidth(repeats: int = 5) -> float:
    """Bytes per second of `np.copyto` between two warm float32 arrays (bytes copied)."""
    src = np.ones(COPY_BYTES // 4, np.float32)
    dst = np.zeros_like(src)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t)
    return COPY_BYTES / best


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def _opts(panel: str, context: int) -> dict[str, Any]:
    # both panels split a group's context over 8 ranks (8 PEs, or 8 cubes)
    return {"kernel": None, "panel": panel, "scale": "headline", "system_text": None,
            "pes": None, "wiring": None, "cubes": None, "cube_start": None, "mesh": None,
            "arg_items": (f"S_kv_per_rank={context // 8}",), "sharded": "k_ptr,v_ptr",
            "queue_depth": None}


def _simulate(panel: str, context: int) -> tuple[list[Any], list[SimResult], SimResult,
                                                float]:
    """Schedules, per-launch numeric results, the timing result, and tracing seconds."""
    opts = _opts(panel, context)
    listed = resolve_launches(dict(opts))
    t0 = time.perf_counter()
    if listed is None:
        kernel, launch = resolve_launch(**opts)
        schedule = trace(kernel, launch)
        t_trace = time.perf_counter() - t0
        result = simulate(schedule, SimConfig())
        return [schedule], [result], result, t_trace
    deployment = build_deployment(listed.name, listed.launches, trace)
    t_trace = time.perf_counter() - t0
    together = simulate_deployment(deployment, SimConfig())
    launches = [r for r in together.launches if r is not None]
    return list(deployment.schedules), launches, together.together, t_trace


def _worst(numerics: list[NumericResult]) -> dict[str, Any]:
    errs = [n.rel_err for n in numerics]
    abs_errs = [n.max_abs_err for n in numerics]
    ok = all(n.ok for n in numerics)
    return {"ok": ok, "rel_err": None if None in errs else max(e for e in errs if e is not None),
            "max_abs_err": None if None in abs_errs else max(
                e for e in abs_errs if e is not None),
            "tolerance": numerics[0].tolerance, "groups": sum(n.groups for n in numerics),
            "checked_ranks": sum(len(n.per_rank) for n in numerics)}


def run(panel: str, context: int) -> dict[str, Any]:
    # The machine may be shared: measure the copy bandwidth right before and after the
    # run and compare with their mean.
    before = copy_bandwidth()
    t1 = time.perf_counter()
    schedules, results, timed, t_trace = _simulate(panel, context)
    t_sim = time.perf_counter() - t1
    after = copy_bandwidth()
    copy_bps = (before + after) / 2
    spec = schedules[0].launch
    d, h_kv = int(spec.arg("d_head", 0) or 0), int(spec.arg("h_kv", 1) or 1)
    numerics = [r.numeric for r in results if r.numeric is not None]
    summary = _worst(numerics)
    groups = summary["groups"]
    kv_bytes_f16 = groups * context * h_kv * d * 2 * 2    # K and V, 2 bytes per element
    phases: dict[str, float] = {}
    for r in results + ([timed] if all(timed is not r for r in results) else []):
        for k, v in r.phases:
            phases[k] = phases.get(k, 0.0) + v
    evaluate = phases.get("evaluate", float("nan"))
    tim = timed.timing
    assert tim is not None
    ranks = sum(len(s.active) for s in schedules)
    print(f"\n== {panel}, {context // 1024}K context: {groups} groups, {len(schedules)} "
          f"launch(es), d_head {d}, {ranks} ranks")
    print(f"  numerics: {'ok' if summary['ok'] else 'OUT OF TOLERANCE'}, worst rel_err "
          f"{summary['rel_err']:.3g}, max_abs_err {summary['max_abs_err']:.3g} (tolerance "
          f"{summary['tolerance']:g}), {summary['checked_ranks']} checked ranks")
    print(f"  timing model: latency {tim.latency_s * 1e6:.1f} us, comm_steps "
          f"{tim.comm_steps}; op log gemm {timed.op_log.gemm} (= 2 x "
          f"{timed.op_log.gemm // 2} ranks)")
    print(f"  wall: trace {t_trace:.2f} s, simulate {t_sim - t_trace:.2f} s = "
          + ", ".join(f"{k} {v:.2f}" for k, v in sorted(phases.items())))
    eff = kv_bytes_f16 / evaluate
    end_to_end = kv_bytes_f16 / (t_sim - t_trace)
    rss = peak_rss_bytes()
    print(f"  K/V (f16) {kv_bytes_f16 / GB:.2f} GB; evaluated at {eff / GB:.2f} GB/s = "
          f"{100 * eff / copy_bps:.0f}% of numpy copy ({copy_bps / GB:.2f} GB/s: "
          f"{before / GB:.2f} before, {after / GB:.2f} after) [target >= 50%]")
    print(f"  end to end (inputs + float64 reference + evaluation + timing): "
          f"{end_to_end / GB:.2f} GB/s = {100 * end_to_end / copy_bps:.0f}% of copy")
    print(f"  peak RSS so far {rss / GB:.2f} GB = {rss / kv_bytes_f16:.2f} x K/V bytes "
          f"[target <= 3x]")
    return {"panel": panel, "context": context, "launches": len(schedules), "ranks": ranks,
            "d_head": d, "numeric": summary,
            "timing": {"latency_s": tim.latency_s, "comm_steps": tim.comm_steps,
                       "profile": tim.profile},
            "op_log": timed.op_log.to_json(),
            "wall_s": {"trace": round(t_trace, 3), "simulate": round(t_sim - t_trace, 3),
                       **{k: round(v, 3) for k, v in sorted(phases.items())}},
            "kv_bytes_f16": kv_bytes_f16, "evaluate_GBps": round(eff / GB, 3),
            "copy_GBps": round(copy_bps / GB, 3),
            "evaluate_fraction": round(eff / copy_bps, 4),
            "peak_rss_bytes": rss, "rss_ratio": round(rss / kv_bytes_f16, 4)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="64K context only")
    parser.add_argument("--contexts", type=int, nargs="*", default=None,
                        help="contexts to run (tokens), e.g. 65536 1048576")
    parser.add_argument("--panel", action="append", choices=PANELS, default=None,
                        help="headline decode panel(s) to run (default single_user_decode)")
    parser.add_argument("--json", type=Path, default=None,
                        help="also write the figures and the machine to this JSON file")
    args = parser.parse_args(argv)
    contexts = args.contexts or ([1 << 16] if args.quick else [1 << 16, 1 << 20])
    panels = args.panel or ["single_user_decode"]
    print("numpy copy bandwidth: np.copyto of 256 MiB float32, best of 5, bytes copied per "
          f"second; BLAS threads: {os.environ.get('OPENBLAS_NUM_THREADS')}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    host = machine()
    runs = [run(panel, context) for panel in panels for context in contexts]
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"schema": SCHEMA, "machine": host, "runs": runs},
                                        indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0 if all(r["numeric"]["ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
