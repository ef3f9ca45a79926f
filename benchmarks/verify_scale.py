"""Seconds per property as launches grow, and the cost of asking Z3 to *search*.

    .venv/bin/python benchmarks/verify_scale.py [--quick] [--json reports/verify_scale.json]
    .venv/bin/python benchmarks/verify_scale.py --ratio-only    # just the 8x8 ratio below

Rows: mesh_mlo_2d on square-ish meshes 2x4 ... 16x16 (one SIP of that grid, cube_mesh)
and mesh_mlo_1d on 8 ... 64 ranks (one cube of that many PEs, pe_line), at queue depth 3.
Baselines (same run): the stuck-state search, where Z3 looks for a deadlocked reachable
state on its own, at 4x4 and 8x8; the ratio shows what checking the simulation's order
certificate saves. The JSON feeds the report's verify_time.png.

Last, at 8x8: the stuck-state search alone against one whole `meshproof verify` process
(start-up, tracing, every property) on the same schedule, with and without
exactly_once_merge (goal: the process >= 10x faster than the search).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from meshproof.model.channels import derive_channels
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.progress import run
from meshproof.model.topology import System
from meshproof.model.trace import trace
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.deadlock_encoding import DeadlockModel, stuck_state
from meshproof.verify.z3util import Budget, check

MESHES_2D = ((2, 4), (4, 4), (4, 8), (8, 8), (12, 12), (16, 16))
RANKS_1D = (8, 16, 32, 64)
BASELINE_MESHES = ((4, 4), (8, 8))
BASELINE_TIMEOUT_S = 300.0
RATIO_GOAL = 10.0
RATIO_RUNS = 3
VERIFY_8X8 = [str(Path(sys.executable).with_name("meshproof")), "verify", "mesh_mlo_2d",
              "--system", "1x8x8", "--mesh", "8x8", "--wiring", "cube_mesh",
              "--queue-depth", "3"]
# bytecode caching on, as for an installed package (see benchmarks/cli_start.py)
PROCESS_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _schedule_2d(rows: int, cols: int):  # type: ignore[no-untyped-def]
    kernel = resolve_kernel("mesh_mlo_2d")
    opts = LaunchOptions(system=System(1, rows, cols, 8), wiring="cube_mesh",
                         mesh=f"{rows}x{cols}", queue_depth=3)
    return trace(kernel, build_launch(kernel, opts))


def _schedule_1d(n: int):  # type: ignore[no-untyped-def]
    kernel = resolve_kernel("mesh_mlo_1d")
    opts = LaunchOptions(system=System(1, 1, 1, n), wiring="pe_line", pes=n, queue_depth=3)
    return trace(kernel, build_launch(kernel, opts))


def _row(label: str, ranks: int, schedule) -> dict[str, object]:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    verdict = verify(schedule, VerifyConfig(stuck_state_max_ops=0))
    total = time.perf_counter() - start
    comm = sum(len(p.comm_ops) for p in schedule.programs)
    row: dict[str, object] = {"case": label, "ranks": ranks, "comm_ops": comm,
                              "seconds_total": round(total, 3), "ok": verdict.ok,
                              "min_queue_depth": verdict.min_queue_depth}
    for p in verdict.properties:
        row[p.name.value] = round(p.seconds, 3)
        row[f"{p.name.value}_status"] = p.status.value
    return row


def _baseline(rows: int, cols: int) -> dict[str, object]:
    schedule = _schedule_2d(rows, cols)
    table = derive_channels(schedule)
    progress = run(schedule, table, 3)
    model = DeadlockModel(schedule, table, progress.comm)
    start = time.perf_counter()
    solver, _ = stuck_state(model, 3, Budget(BASELINE_TIMEOUT_S, 2_000_000_000))
    outcome = check(solver)
    return {"case": f"2d {rows}x{cols}", "search_seconds": round(time.perf_counter() - start, 3),
            "search_result": outcome.result.value, "comm_ops": len(model.ops)}


def _process_seconds(command: list[str]) -> float:
    """Median wall-clock seconds of `command` as a fresh process (after one warm-up)."""
    samples = []
    for attempt in range(RATIO_RUNS + 1):
        start = time.perf_counter()
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=PROCESS_ENV, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} exited {done.returncode}: "
                             f"{done.stderr.decode(errors='replace').strip()}")
        if attempt:  # the first run warms the caches
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def print_process_ratio(search_seconds: float) -> None:
    """The 8x8 ratio: stuck-state search alone vs one whole verify process."""
    print(f"\n8x8: stuck-state Z3 search alone {search_seconds:.2f} s vs one `meshproof verify` "
          "process (median of 3)")
    for label, extra in (("all properties", []),
                         ("without exactly_once_merge", ["--skip", "exactly_once_merge"])):
        seconds = _process_seconds([*VERIFY_8X8, *extra])
        ratio = search_seconds / seconds
        print(f"  {label:<27} {seconds:6.2f} s -> search / process = {ratio:4.1f}x "
              f"(goal >= {RATIO_GOAL:.0f}x): {'met' if ratio >= RATIO_GOAL else 'MISSED'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="stop at 8x8 / 32 ranks")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    parser.add_argument("--ratio-only", action="store_true",
                        help="only the 8x8 search vs whole-process ratio")
    args = parser.parse_args()
    if args.ratio_only:
        print_process_ratio(float(_baseline(8, 8)["search_seconds"]))  # type: ignore[arg-type]
        return 0
    meshes = [m for m in MESHES_2D if not args.quick or m[0] * m[1] <= 64]
    ranks_1d = [n for n in RANKS_1D if not args.quick or n <= 32]
    rows: list[dict[str, object]] = []
    print(f"{'case':>12} {'ranks':>5} {'comm ops':>8} {'legal':>6} {'confine':>7} "
          f"{'match':>6} {'deadlock':>8} {'merge':>6} {'total':>7}  min D")
    for r, c in meshes:
        t0 = time.perf_counter()
        schedule = _schedule_2d(r, c)
        trace_s = time.perf_counter() - t0
        row = _row(f"2d {r}x{c}", r * c, schedule)
        row["trace_seconds"] = round(trace_s, 3)
        rows.append(row)
        _print(row)
    for n in ranks_1d:
        row = _row(f"1d {n}", n, _schedule_1d(n))
        rows.append(row)
        _print(row)
    print("\nbaseline: Z3 stuck-state search (Z3 finds the answer itself) vs the checked "
          "order certificate")
    baselines = []
    for r, c in BASELINE_MESHES:
        if args.quick and r * c > 16:
            continue
        base = _baseline(r, c)
        cert = next(x for x in rows if x["case"] == base["case"])
        ratio = float(base["search_seconds"]) / max(float(cert["deadlock_freedom"]), 1e-6)  # type: ignore[arg-type]
        base["certificate_seconds"] = cert["deadlock_freedom"]
        base["ratio"] = round(ratio, 1)
        baselines.append(base)
        print(f"{base['case']:>12}: search {base['search_seconds']:>8.2f} s "
              f"({base['search_result']}) vs certificate {cert['deadlock_freedom']:>6.2f} s "
              f"-> {ratio:.1f}x")
    search_8x8 = next((b for b in baselines if b["case"] == "2d 8x8"), None) or _baseline(8, 8)
    print_process_ratio(float(search_8x8["search_seconds"]))  # type: ignore[arg-type]
    big = next((x for x in rows if x["case"] == "2d 16x16"), None)
    if big is not None:
        total = float(big["seconds_total"]) + float(big["trace_seconds"])  # type: ignore[arg-type]
        print(f"\n16x16 fully verified (trace + all properties): {total:.1f} s "
              f"(target <= 30 s): {'met' if total <= 30 else 'MISSED'}")
    if args.json is not None:
        payload = {"schema": "meshproof/verify-scale-v1", "rows": rows, "baselines": baselines,
                   "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}}
        fd, tmp = tempfile.mkstemp(dir=args.json.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(payload, fh, indent=2, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, args.json)
        print(f"wrote {args.json}")
    return 0


def _print(row: dict[str, object]) -> None:
    print(f"{row['case']:>12} {row['ranks']:>5} {row['comm_ops']:>8} "
          f"{row['direction_legality']:>6.2f} {row['launch_confinement']:>7.2f} "
          f"{row['channel_matching']:>6.2f} {row['deadlock_freedom']:>8.2f} "
          f"{row['exactly_once_merge']:>6.2f} {row['seconds_total']:>7.2f}  "
          f"{row['min_queue_depth']}")


if __name__ == "__main__":
    raise SystemExit(main())
