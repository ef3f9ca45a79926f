"""The cost of `--recheck cvc5`: re-check seconds as a ratio of verify seconds.

    .venv/bin/python benchmarks/recheck.py              # 2x4, 8x8, 16x16
    .venv/bin/python benchmarks/recheck.py --full       # and 64x64 (minutes, ~2 GB)

mesh_mlo_2d on one SIP of each grid (cube_mesh), queue depth 3, all seven properties: one
verify without a re-check, then the same with `recheck=cvc5`, traced once and run in this
process. Prints the seconds of both, the re-check's own seconds (the protocol properties'
queries; the semantic ones are not SMT: spec/verify.md) and queries, the ratio of the two
verify times (goal: at most 1.5x at 16x16, issue 32), and the ratio of the re-check to
the protocol properties' own verify seconds. Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.topology import System
from meshproof.model.trace import trace
from meshproof.verify.api import verify
from meshproof.verify.properties import (
    PROTOCOL_PROPERTIES,
    RecheckSolver,
    VerifyConfig,
)
from meshproof.verify.result import RecheckStatus

MESHES = ((2, 4), (8, 8), (16, 16))
FULL = ((64, 64),)
GOAL = 1.5


def row(rows: int, cols: int) -> None:
    ref = resolve_kernel("mesh_mlo_2d")
    launch = build_launch(ref, LaunchOptions(mesh=f"{rows}x{cols}", wiring="cube_mesh",
                                             system=System(1, rows, cols, 8), queue_depth=3))
    schedule = trace(ref, launch)
    start = time.perf_counter()
    plain = verify(schedule, VerifyConfig())
    t_plain = time.perf_counter() - start
    protocol = sum(p.seconds for p in plain.properties if p.name in PROTOCOL_PROPERTIES)
    start = time.perf_counter()
    checked = verify(schedule, VerifyConfig(recheck=RecheckSolver.CVC5))
    t_checked = time.perf_counter() - start
    agreed = all(r.status is RecheckStatus.AGREED for r in checked.rechecks
                 if r.name in PROTOCOL_PROPERTIES)
    queries = sum(r.queries for r in checked.rechecks)
    own = sum(r.seconds for r in checked.rechecks)
    ratio = t_checked / t_plain
    note = f"  (goal <= {GOAL}x)" if (rows, cols) == (16, 16) else ""
    print(f"{rows:>3}x{cols:<3} {schedule_ops(checked):>9} {t_plain:>9.2f} {t_checked:>12.2f} "
          f"{own:>10.2f} {queries:>7} {ratio:>6.2f}x {own / protocol:>9.2f}x  "
          f"{'agreed' if agreed and plain.ok == checked.ok else 'NOT AGREED'}{note}",
          flush=True)


def schedule_ops(verdict: object) -> str:
    message = next(p.message for p in verdict.properties  # type: ignore[attr-defined]
                   if p.name.value == "direction_legality")
    return message.split()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="also 64x64")
    args = parser.parse_args()
    print("mesh_mlo_2d, cube_mesh, D=3, every property; ratio = verify with --recheck / "
          "without; vs protocol = re-check s / the protocol properties' verify s")
    print(f"{'mesh':<7} {'comm ops':>9} {'verify s':>9} {'+recheck s':>12} {'recheck s':>10} "
          f"{'queries':>7} {'ratio':>7} {'vs protocol':>10}")
    for rows, cols in MESHES + (FULL if args.full else ()):
        row(rows, cols)


if __name__ == "__main__":
    main()
