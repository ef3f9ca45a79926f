"""Scale benchmark of the reference simulator: the headline single-user decode panel.

Llama-70B decode, one user: 64 cubes, each an independent 8-PE line (1 q head per cube),
d_head 128. Runs a quick 64K-context case first, then the 1M headline (skip it with
--quick), and prints for each: wall time per phase, peak RSS, and the K/V bytes (as f16,
what the kernel streams) per second of IR evaluation, as a fraction of a numpy copy
bandwidth measured in the same run. Targets (issue 4): >= 50% of the copy bandwidth, peak
RSS <= 3x the K/V bytes.

BLAS runs single-threaded unless OPENBLAS_NUM_THREADS is set: on a 2-core machine shared
with other work, a second BLAS thread made small GEMVs 20-40x slower here.

    .venv/bin/python benchmarks/sim_scale.py            # 64K, then 1M context
    .venv/bin/python benchmarks/sim_scale.py --quick    # 64K only
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import resource
import sys
import time

import numpy as np

from meshproof.cli.options import resolve_launch
from meshproof.model.trace import trace
from meshproof.sim.api import SimConfig, simulate

PANEL = "single_user_decode"
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


def run(context: int) -> dict[str, float]:
    n_pes = 8
    kernel, launch = resolve_launch(
        kernel=None, panel=PANEL, scale="headline", system_text=None, pes=None, wiring=None,
        cubes=None, cube_start=None, mesh=None,
        arg_items=(f"S_kv_per_rank={context // n_pes}",), sharded="k_ptr,v_ptr",
        queue_depth=None)
    t0 = time.perf_counter()
    schedule = trace(kernel, launch)
    t_trace = time.perf_counter() - t0
    # The machine may be shared: measure the copy bandwidth right before and after the
    # run and compare with their mean.
    before = copy_bandwidth()
    t1 = time.perf_counter()
    result = simulate(schedule, SimConfig())
    t_sim = time.perf_counter() - t1
    after = copy_bandwidth()
    copy_bps = (before + after) / 2
    spec = schedule.launch
    d, h_kv = int(spec.arg("d_head", 0) or 0), int(spec.arg("h_kv", 1) or 1)
    groups = result.numeric.groups if result.numeric else 0
    kv_bytes_f16 = groups * context * h_kv * d * 2 * 2    # K and V, 2 bytes per element
    phases = dict(result.phases)
    evaluate = phases.get("evaluate", float("nan"))
    num, tim = result.numeric, result.timing
    assert num is not None and tim is not None
    print(f"\n== {PANEL}, {context // 1024}K context: {groups} groups x {n_pes} PEs, "
          f"d_head {d}, {len(schedule.active)} ranks")
    print(f"  numerics: {'ok' if num.ok else 'OUT OF TOLERANCE'}, rel_err {num.rel_err:.3g}, "
          f"max_abs_err {num.max_abs_err:.3g} (tolerance {num.tolerance:g})")
    print(f"  timing model: latency {tim.latency_s * 1e6:.1f} us, comm_steps "
          f"{tim.comm_steps}; op log gemm {result.op_log.gemm} (= 2 x "
          f"{result.op_log.gemm // 2} ranks)")
    print(f"  wall: trace {t_trace:.2f} s, simulate {t_sim:.2f} s = "
          + ", ".join(f"{k} {v:.2f}" for k, v in sorted(phases.items())))
    eff = kv_bytes_f16 / evaluate
    end_to_end = kv_bytes_f16 / t_sim
    rss = peak_rss_bytes()
    print(f"  K/V (f16) {kv_bytes_f16 / GB:.2f} GB; evaluated at {eff / GB:.2f} GB/s = "
          f"{100 * eff / copy_bps:.0f}% of numpy copy ({copy_bps / GB:.2f} GB/s: "
          f"{before / GB:.2f} before, {after / GB:.2f} after) [target >= 50%]")
    print(f"  end to end (inputs + float64 reference + evaluation + timing): "
          f"{end_to_end / GB:.2f} GB/s = {100 * end_to_end / copy_bps:.0f}% of copy")
    print(f"  peak RSS so far {rss / GB:.2f} GB = {rss / kv_bytes_f16:.2f} x K/V bytes "
          f"[target <= 3x]")
    return {"evaluate_fraction": eff / copy_bps, "rss_ratio": rss / kv_bytes_f16}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="64K context only")
    parser.add_argument("--contexts", type=int, nargs="*", default=None,
                        help="contexts to run (tokens), e.g. 65536 1048576")
    args = parser.parse_args(argv)
    contexts = args.contexts or ([1 << 16] if args.quick else [1 << 16, 1 << 20])
    print("numpy copy bandwidth: np.copyto of 256 MiB float32, best of 5, bytes copied per "
          f"second; BLAS threads: {os.environ.get('OPENBLAS_NUM_THREADS')}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for context in contexts:
        run(context)
    return 0


if __name__ == "__main__":
    sys.exit(main())
