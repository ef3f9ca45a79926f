"""`meshproof synthesize` against the hand-written kernels, on the same launches and the
same timing model (issue 31): hand-written latency, synthesised latency and their ratio;
the lower bound and synthesised / bound; synthesis seconds; verify seconds and properties
proved for both. Latencies are the timing model's (exact, machine-independent); seconds
are wall clock on the shared 2-core machine and only rough.

    .venv/bin/python benchmarks/synthesis.py                 # 1x8 ... 16x16, dead link
    .venv/bin/python benchmarks/synthesis.py --full          # plus 64x64 (minutes)
    .venv/bin/python benchmarks/synthesis.py --rows 2x4,8x8 --no-verify

Every synthesised kernel's prediction is checked against sim.timing's run of the written
file (the script exits 1 if they differ). A second table puts the chunked variant (o in K
row chunks through tl.view, K in 2, 4, 8) and reduce-scatter / all-gather (every state
split by rows, chunk c reduced at its own rank) beside the best whole-o plan at the
headline sizes (h_q 64, h_kv 8, d_head 128: o is 32 KB per state), against the bound of
the whole class searched (every variant), with the largest bytes on any link of each and
the candidate the bytes objective's ranking (largest bytes on a link, then latency) puts
first among them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from meshproof.kernels import resolve_kernel
from meshproof.model.channels import derive_channels
from meshproof.model.hardware import DEFAULT_PROFILE
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import KernelRef, resolve_kernel_file
from meshproof.model.topology import parse_system
from meshproof.model.trace import trace
from meshproof.sim.timing import run_timing
from meshproof.synth.api import REDUCE_SCATTER, Objective, synthesize
from meshproof.synth.emit_text import KERNEL_NAME
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.result import Status

REPO = Path(__file__).resolve().parent.parent
DEAD_LINK = str(REPO / "examples" / "wirings" / "dead_link_2x4.toml")
HEADLINE = (("h_q", 64), ("h_kv", 8), ("d_head", 128))


@dataclass(frozen=True)
class Row:
    name: str
    hand: str | None          # the built-in on the same launch (None: there is none)
    opts: LaunchOptions
    input_bound: float = 16.0
    tolerance: float | None = None


def _mesh(r: int, c: int, system: str | None = None, args: tuple[tuple[str, object], ...] = (),
          wiring: str = "cube_mesh") -> LaunchOptions:
    return LaunchOptions(system=parse_system(system or f"1x{r}x{c}", 8), wiring=wiring,
                         mesh=f"{r}x{c}", args=args)   # type: ignore[arg-type]


ROWS = {
    "1x8": Row("1x8 (8 PEs, pe_line)", "mesh_mlo_1d", LaunchOptions(pes=8)),
    "ring8": Row("ring 8 (8 PEs, pe_ring)", "ring_mlo", LaunchOptions(pes=8, wiring="pe_ring")),
    "1x8cubes": Row("1x8 cubes (1x1x8, cube_mesh)", "mesh_mlo_1d", LaunchOptions(
        system=parse_system("1x1x8", 8), wiring="cube_mesh", cubes=8,
        args=(("rank_axis", 1),))),
    "2x4": Row("2x4", "mesh_mlo_2d", _mesh(2, 4, "1x4x4")),
    "4x4": Row("4x4", "mesh_mlo_2d", _mesh(4, 4, "1x4x4")),
    "8x8": Row("8x8 (1x8x8)", "mesh_mlo_2d", _mesh(8, 8)),
    "16x16": Row("16x16 (1x16x16)", "mesh_mlo_2d", _mesh(16, 16)),
    "64x64": Row("64x64 (1x64x64)", "mesh_mlo_2d", _mesh(64, 64)),
    "deadlink": Row("2x4, dead link 1-5 (TOML)", None, _mesh(2, 4, "1x4x4",
                                                          wiring=DEAD_LINK)),
    "8x8-headline": Row("8x8, h_q 64 / h_kv 8 / d 128", "mesh_mlo_2d",
                        _mesh(8, 8, args=HEADLINE), 4.0, 0.25),
}
QUICK = ("1x8", "ring8", "1x8cubes", "2x4", "4x4", "8x8", "16x16", "deadlink", "8x8-headline")
CHUNKED = ("1x8", "ring8", "1x8cubes", "2x4", "4x4", "8x8")


def _latency(kernel: KernelRef, opts: LaunchOptions) -> tuple[float, object]:
    launch = build_launch(kernel, opts)
    schedule = trace(kernel, launch)
    run = run_timing(schedule, derive_channels(schedule), DEFAULT_PROFILE,
                     launch.spec.queue_depth)
    return run.latency_s, schedule


def _verify(schedule: object, row: Row) -> tuple[str, float]:
    t0 = time.perf_counter()
    verdict = verify(schedule, VerifyConfig(input_bound=row.input_bound,  # type: ignore[arg-type]
                                            rounding_tolerance=row.tolerance))
    seconds = time.perf_counter() - t0
    proved = sum(p.status is Status.PROVED for p in verdict.properties)
    unknown = [p.name.value for p in verdict.properties if p.status is Status.UNKNOWN]
    return f"{proved}/{len(verdict.properties)}" + (f" ({', '.join(unknown)} unknown)"
                                                    if unknown else ""), seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default=None, help=f"comma-separated: {', '.join(ROWS)}")
    parser.add_argument("--full", action="store_true", help="include 64x64")
    parser.add_argument("--no-verify", action="store_true")
    args = parser.parse_args()
    names = args.rows.split(",") if args.rows else [*QUICK, *(["64x64"] if args.full else [])]
    bad = 0
    print("shape | hand us | synth us | synth/hand | bound us | synth/bound | plan | "
          "synth s | verify hand (s) | verify synth (s)")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            row = ROWS[name]
            base = resolve_kernel(row.hand or "mesh_mlo_2d")
            t0 = time.perf_counter()
            result = synthesize(build_launch(base, row.opts), DEFAULT_PROFILE,
                                Objective.LATENCY, name)
            synth_s = time.perf_counter() - t0
            path = Path(tmp) / f"{name}.py"
            path.write_text(result.kernel_text)
            measured, synth_schedule = _latency(resolve_kernel_file(f"{path}::{KERNEL_NAME}"),
                                                row.opts)
            if measured != result.chosen.latency_s:
                bad += 1
                print(f"  MISMATCH: predicted {result.chosen.latency_s} != sim.timing {measured}")
            hand_us, ratio, hand_verify = "-", "-", "-"
            if row.hand is not None:
                hand, hand_schedule = _latency(base, row.opts)
                hand_us = f"{hand * 1e6:.3f}"
                ratio = f"{measured / hand:.3f}"
                if not args.no_verify and name != "64x64":
                    text, secs = _verify(hand_schedule, row)
                    hand_verify = f"{text} ({secs:.1f})"
            synth_verify = "-"
            if not args.no_verify:
                text, secs = _verify(synth_schedule, row)
                synth_verify = f"{text} ({secs:.1f})"
            bound = result.bound.latency_s
            print(f"{row.name} | {hand_us} | {measured * 1e6:.3f} | {ratio} | "
                  f"{bound * 1e6:.3f} | {measured / bound:.3f} | {result.chosen.plan} | "
                  f"{synth_s:.1f} | {hand_verify} | {synth_verify}", flush=True)
    if not args.rows:
        bad += _chunked_table()
    return 1 if bad else 0


def _chunked_table() -> int:
    """Whole o against o in row chunks at the headline sizes; the chosen kernel re-measured."""
    print("\nchunked variant at h_q 64, h_kv 8, d_head 128 (o 32 KB per state)")
    print("shape | whole us (plan) | chunked us (plan) | chunked/whole | rs/ag us | bound us | "
          "best/bound | max link B whole/chunked/rs-ag | bytes ranking picks | synth s")
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in CHUNKED:
            row = ROWS[name]
            opts = replace(row.opts, args=(*row.opts.args, *HEADLINE))
            base = resolve_kernel(row.hand or "mesh_mlo_2d")
            t0 = time.perf_counter()
            result = synthesize(build_launch(base, opts), DEFAULT_PROFILE, Objective.LATENCY,
                                name)
            synth_s = time.perf_counter() - t0
            path = Path(tmp) / f"{name}.py"
            path.write_text(result.kernel_text)
            measured, _ = _latency(resolve_kernel_file(f"{path}::{KERNEL_NAME}"), opts)
            if measured != result.chosen.latency_s:
                bad += 1
                print(f"  MISMATCH: predicted {result.chosen.latency_s} != {measured}")
            whole = min((c for c in result.candidates if c.chunks == 1),
                        key=lambda c: c.latency_s)
            chunked = min((c for c in result.candidates
                           if c.chunks > 1 and c.family != REDUCE_SCATTER),
                          key=lambda c: c.latency_s, default=None)
            rs_best = min((c for c in result.candidates if c.family == REDUCE_SCATTER),
                          key=lambda c: c.latency_s, default=None)
            rs_ag = None if rs_best is None else rs_best.latency_s
            link_bytes = "/".join("-" if c is None else str(c.max_link_bytes)
                                  for c in (whole, chunked, rs_best))
            # the bytes objective ranks by the largest bytes on any link, then latency
            by_bytes = min(result.candidates,
                           key=lambda c: (c.max_link_bytes, c.latency_s, c.steps, c.plan, c.rule))
            picks = f"{by_bytes.plan} ({by_bytes.max_link_bytes} B, " \
                    f"{by_bytes.latency_s * 1e6:.3f} us)"
            bound = result.bound.latency_s
            text = "-" if chunked is None else \
                f"{chunked.latency_s * 1e6:.3f} ({chunked.chunks} chunks)"
            ratio = "-" if chunked is None else f"{chunked.latency_s / whole.latency_s:.3f}"
            rs_text = "-" if rs_ag is None else f"{rs_ag * 1e6:.3f}"
            print(f"{row.name} | {whole.latency_s * 1e6:.3f} ({whole.plan}) | {text} | "
                  f"{ratio} | {rs_text} | {bound * 1e6:.3f} | {measured / bound:.3f} | "
                  f"{link_bytes} | {picks} | {synth_s:.1f}", flush=True)
    return bad


if __name__ == "__main__":
    sys.exit(main())
