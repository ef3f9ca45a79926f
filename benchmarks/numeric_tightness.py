"""How tight numeric_safety's rounding bound is (issue 27): per kernel and input bound B,
the stated bound η (relative to max|V|), the worst error an input search finds on the
simulator's arithmetic, and their ratio. A found error above the bound would be a false
"proved": the script exits 1 if it ever sees one.

The search: the verdict's witness families (seeded uniform in [-B, B]; ±B with V split in
sign; the families aimed at the bound's mechanisms, rounding_witness_families.py: p at f16
midpoints, keys and maxima at both ends of an f16 cell, V constant along the keys) plus
`--seeds` more seeded uniform draws and ±B draws, 24 constant-V draws and 8 constant-V scans
(`constant_v_scan`: seeded Q and K, V constant at the 64 lowest f16 values of the top
binade) per seed, then
`--climb` steps of a hill
climb from the worst (one input element at a time, kept when the error grows), evaluated with
model/machine.py against float64 attention. It is a lower bound of the true worst error,
so the ratio is an upper bound of the bound's slack.

    .venv/bin/python benchmarks/numeric_tightness.py               # all rows
    .venv/bin/python benchmarks/numeric_tightness.py --seeds 4 --cost 16   # quicker

It then times numeric_safety on mesh_mlo_2d (16x16 and 64x64): the shared semantic analysis
with the rounding domain (and the value numbers) plus the property's check on that analysis
(its hazards, output bound and culprits; the channel table is the pipeline's, not
numeric_safety's, and is not counted), against the same analysis with the rounding domain
and the value numbers switched off. The times are this process's CPU seconds, not wall
time: on a shared machine the wall clock measures the neighbours too. The process runs
with the console script's collector threshold (cli.GC_THRESHOLD), as `meshproof verify`
does: at the default threshold the rounding domain's objects trigger collections no verify
pays, which on a loaded machine put 64x64 at 1.56-1.76x where it is 1.40x as verify runs
it (2026-12-08, load 2.5). `--repeat N` runs the
cost rows N times and prints their median; `--cost-only` leaves out the tightness rows:

    .venv/bin/python benchmarks/numeric_tightness.py --cost-only --cost 16 --repeat 5
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from meshproof.cli import GC_THRESHOLD
from meshproof.model.channels import derive_channels
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.problem import Problem
from meshproof.model.trace import trace
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.properties import Property
from meshproof.verify.result import NumericResult
from meshproof.verify.semantics import semantic_analysis
from meshproof.verify.semantics.numeric import Inputs
from meshproof.verify.semantics.rounding_witness import (
    climb,
    families,
    signed_v,
    worst_element,
)
from meshproof.verify.semantics.rounding_witness_families import constant_v, constant_v_scan

ROOT = Path(__file__).resolve().parents[1]
DESIGN = str(ROOT / "examples" / "f16_design.py") + "::mesh_f16_design"
DESIGN_ARGS = {"mesh_rows": 2, "mesh_cols": 4, "S_q": 1, "S_kv_per_rank": 16, "h_q": 1,
               "h_kv": 1, "d_head": 8}
ROWS: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    ("mesh_mlo_1d (f32 messages)", "mesh_mlo_1d", {}, {}),
    ("mesh_mlo_1d msg_dtype=f16", "mesh_mlo_1d", {"msg_dtype": "f16"}, {}),
    ("mesh_mlo_2d 2x4 (f32 messages)", "mesh_mlo_2d", {}, {}),
    ("mesh_mlo_2d 2x4 msg_dtype=f16", "mesh_mlo_2d", {"msg_dtype": "f16"}, {}),
    ("f16 design (f16 scores, f16 messages)", DESIGN, DESIGN_ARGS,
     {"wiring": "cube_mesh", "cubes": 8}),
    ("f16 design with f32 messages", DESIGN, {**DESIGN_ARGS, "msg_dtype": "f32"},
     {"wiring": "cube_mesh", "cubes": 8}),
]
BOUNDS = (1.0, 2.0, 4.0, 16.0)


def _draw(rng: np.random.Generator, x: dict[int, np.ndarray], b: float, signs: bool
          ) -> dict[int, np.ndarray]:
    out = {}
    for g, a in x.items():
        r = rng.uniform(-b, b, a.shape)
        r = np.where(r >= 0, b, -b) if signs else r
        out[g] = np.clip(r.astype(np.float16).astype(np.float64), -b, b)
    return out


def _extra(problem: Problem, b: float, seeds: int) -> list[tuple[str, Inputs]]:
    out = [x for s in range(seeds)   # V constant along the keys: 24 draws per seed
           for x in constant_v(problem, b, 1 + s, 24)]
    per = max(64 // problem.d_head, 1)   # inputs per scan: the 64 lowest constants
    out += [x for s in range(8 * seeds)  # of the top binade, for 8 Q and K per seed
            for x in constant_v_scan(problem, b, 1 + s, per)]
    base = families(problem, b, float("inf"))[0][1]
    for s in range(seeds):
        rng = np.random.default_rng(1000 + s)
        signs = bool(s % 2)
        out.append((f"draw {s}", Inputs(_draw(rng, base.q, b, signs),
                                        _draw(rng, base.k, b, signs),
                                        _draw(rng, base.v, b, False))))
    return out


def row(kernel: str, args: dict[str, Any], opts: dict[str, Any], b: float,
        seeds: int, climb_steps: int) -> tuple[float | None, float, float]:
    ref = resolve_kernel(kernel)
    schedule = trace(ref, build_launch(ref, LaunchOptions(args=tuple(sorted(args.items())),
                                                          **opts)))
    start = time.perf_counter()
    v = verify(schedule, VerifyConfig(queue_depth=schedule.launch.queue_depth,
                                      only=frozenset({Property.NUMERIC_SAFETY}), input_bound=b))
    p = v.property(Property.NUMERIC_SAFETY.value)
    assert isinstance(p, NumericResult)
    table = derive_channels(schedule)
    sem = semantic_analysis(schedule, table, None, b)
    assert sem.analysis is not None and sem.problem is not None
    stores = [(o.rank, o.store) for o in sem.analysis.outputs if o.verdict.equal]
    tried = families(sem.problem, b, float("inf")) + _extra(sem.problem, b, seeds)
    worst = worst_element(schedule, table, sem.problem, stores, tried)
    if worst is not None and climb_steps:
        worst = signed_v(schedule, table, sem.problem, worst, b)
        worst = climb(schedule, table, sem.problem, worst, b, float("inf"), climb_steps)
        worst = signed_v(schedule, table, sem.problem, worst, b)
    return p.error_bound, worst.error if worst else 0.0, time.perf_counter() - start


class _NoRounding:
    """The rounding domain switched off: every method gives no error (for the timing)."""

    def __getattr__(self, name: str) -> object:
        return lambda *a, **k: None


def cost(side: int) -> tuple[float, float, float]:
    """For mesh_mlo_2d on a side x side mesh, in this process: the semantic analysis with
    the rounding domain (and value numbers), the same without them, and numeric_safety's
    checks after the analysis (hazards, the output bound, culprits: the property's check
    on the analysis it shares, the channel table given, as verify runs it)."""
    import meshproof.verify.semantics.situation_memo as situation_memo
    from meshproof.model.topology import System
    from meshproof.verify.properties import CheckContext
    from meshproof.verify.registry import CHECKS
    from meshproof.verify.semantics.relations import NONE, ValueNumbers
    from meshproof.verify.shared_analysis import shared_semantics
    from meshproof.verify.z3util import Budget

    ref = resolve_kernel("mesh_mlo_2d")
    opts = LaunchOptions(system=System(1, side, side, 8), wiring="cube_mesh",
                         mesh=f"{side}x{side}", queue_depth=3)
    schedule = trace(ref, build_launch(ref, opts))
    table = derive_channels(schedule)
    start = time.process_time()
    sem = semantic_analysis(schedule, table, None, 16.0)
    with_rounding = time.process_time() - start
    config = VerifyConfig(queue_depth=3, only=frozenset({Property.NUMERIC_SAFETY}))
    ctx = CheckContext(schedule, table, config, Budget(config.timeout_s, config.rlimit))
    ctx.memo[shared_semantics] = sem
    start = time.process_time()
    CHECKS[Property.NUMERIC_SAFETY](ctx)
    checks = time.process_time() - start
    del ctx, sem   # the run without starts from the same heap as the run with
    with mock.patch.object(situation_memo, "ErrorBounds", lambda *a, **k: _NoRounding()), \
            mock.patch.object(ValueNumbers, "note", lambda *a, **k: None), \
            mock.patch.object(ValueNumbers, "related", lambda *a, **k: NONE):
        start = time.process_time()
        semantic_analysis(schedule, table, None, 16.0)
        without = time.process_time() - start
    return with_rounding, without, checks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=12)
    ap.add_argument("--cost", default="16,64",
                    help="mesh sides of mesh_mlo_2d to time numeric_safety at ('' for none)")
    ap.add_argument("--climb", type=int, default=400, help="hill-climb steps per row")
    ap.add_argument("--cost-only", action="store_true", help="no tightness rows")
    ap.add_argument("--repeat", type=int, default=1, help="cost rows per side (median)")
    a = ap.parse_args()
    # The console script's collector settings (cli.entry): the rounding domain's objects
    # would otherwise be charged the default threshold's extra collections, which no
    # `meshproof verify` pays.
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    unsound = 0 if a.cost_only else tightness(a.seeds, a.climb)
    for side in (int(x) for x in a.cost.split(",") if x):
        runs = [cost(side) for _ in range(max(1, a.repeat))]
        for full, bare, checks in runs:
            print(f"mesh_mlo_2d {side}x{side}: semantic analysis {full:.2f} s with the "
                  f"rounding domain, {bare:.2f} s without ({full / bare:.2f}x); "
                  f"numeric_safety's checks after it {checks:.2f} s; all numeric work "
                  f"against the rest: {(full + checks) / bare:.2f}x (goal <= 1.5x)")
        if len(runs) > 1:
            ratio = statistics.median((f + c) / b for f, b, c in runs)
            print(f"mesh_mlo_2d {side}x{side}: median over {len(runs)} runs "
                  f"{ratio:.2f}x (goal <= 1.5x)")
    return 1 if unsound else 0


def tightness(seeds: int, climb: int) -> int:
    """The tightness rows; the number of rows where an input beats the bound."""
    ratios: list[float] = []
    unsound = 0
    print(f"{'row':42} {'B':>4} {'bound':>10} {'found':>10} {'ratio':>7}")
    for name, kernel, args, opts in ROWS:
        for b in BOUNDS:
            eta, found, _ = row(kernel, args, opts, b, seeds, climb)
            ratio = eta / found if eta is not None and found > 0 else float("nan")
            if eta is not None and found > eta:
                unsound += 1
            if eta is not None and found > 0:
                ratios.append(ratio)
            shown = f"{eta:.3g}" if eta is not None else "none"
            print(f"{name:42} {b:4g} {shown:>10} {found:10.3g} {ratio:7.2f}")
    if ratios:
        print(f"\nbound / found over {len(ratios)} rows: median {statistics.median(ratios):.2f}, "
              f"max {max(ratios):.2f}, min {min(ratios):.2f}")
    print(f"rows where an input beats the bound: {unsound} (must be 0)")
    return unsound


if __name__ == "__main__":
    sys.exit(main())
