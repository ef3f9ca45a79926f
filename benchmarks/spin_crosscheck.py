"""SPIN against meshproof on deadlock freedom: the built-ins at small sizes, D = 0..4.

    .venv/bin/python benchmarks/spin_crosscheck.py [--limit SECONDS] [--memory MIB]
    .venv/bin/python benchmarks/spin_crosscheck.py --rows 1x4,ring8     # chosen rows only

Rows: mesh_mlo_2d on a 1x4 and a 2x4 sub-mesh (cube_mesh) and ring_mlo on the 8-PE ring
(pe_ring), each at D = 1, 2, 3, 4 and the rendezvous case D = 0. For each, meshproof's
deadlock_freedom (the Kahn run and its Z3 certificate) and SPIN's exhaustive safety search
of the `meshproof export --promela` model (spin -a; cc -DSAFETY -DCOLLAPSE; pan: an
invalid end state is a deadlock), with both times. Then, per launch, the minimal depth
each finds among D = 0..4. SPIN is the Debian package `spin` (6.5.2); where it is not on
PATH (or no C compiler is) this says so and exits 0. A SPIN run past --limit seconds or
--memory MiB is reported as no answer, never as agreement. Prints figures; asserts
nothing about time.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from meshproof.model.channels import derive_channels
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.trace import trace
from meshproof.verify.api import verify
from meshproof.verify.promela import PromelaModel, promela_model
from meshproof.verify.properties import Property, VerifyConfig
from meshproof.verify.result import Status

ROWS = {
    "1x4": ("mesh_mlo_2d", {"mesh": "1x4", "wiring": "cube_mesh"}),
    "2x4": ("mesh_mlo_2d", {"mesh": "2x4", "wiring": "cube_mesh"}),
    "ring8": ("ring_mlo", {"wiring": "pe_ring"}),
}
DEPTHS = (1, 2, 3, 4, 0)


@dataclass(frozen=True)
class Spin:
    deadlock: bool | None       # None: no answer (limit, memory, incomplete search)
    seconds: float
    states: str
    note: str = ""


def run_spin(model: PromelaModel, workdir: Path, limit: float, memory: int) -> Spin:
    (workdir / "m.pml").write_text(model.text)
    start = time.perf_counter()
    subprocess.run(["spin", "-a", "m.pml"], cwd=workdir, check=True, capture_output=True)
    subprocess.run(["cc", "-O2", "-DSAFETY", "-DCOLLAPSE", f"-DMEMLIM={memory}", "-o", "pan",
                    "pan.c"], cwd=workdir, check=True, capture_output=True)
    try:
        # a path is at most every comm op once: that is the search depth needed
        out = subprocess.run(["./pan", "-n", f"-m{2 * model.comm_ops + 1000}"], cwd=workdir,
                             capture_output=True, text=True, timeout=limit).stdout
    except subprocess.TimeoutExpired:
        return Spin(None, time.perf_counter() - start, "?", f"past {limit:.0f} s")
    seconds = time.perf_counter() - start
    stored = re.search(r"(\d+) states, stored", out)
    states = stored.group(1) if stored else "?"
    errors = re.search(r"errors: (\d+)", out)
    if re.search(r"pan:\d+: invalid end state", out):   # a stuck state, with its trail
        return Spin(True, seconds, states)
    if "Search not completed" in out or "MEMLIM" in out or errors is None:
        return Spin(None, seconds, states, "search not completed: memory or depth limit")
    if int(errors.group(1)) == 0:
        return Spin(False, seconds, states)
    return Spin(None, seconds, states, "an error other than an invalid end state")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated: 1x4,2x4,ring8")
    parser.add_argument("--limit", type=float, default=600.0, help="seconds per SPIN run")
    parser.add_argument("--memory", type=int, default=3072, help="MiB per SPIN run")
    args = parser.parse_args()
    missing = [tool for tool in ("spin", "cc") if shutil.which(tool) is None]
    if missing:
        print(f"skipped: {' and '.join(missing)} not on PATH (SPIN is the Debian package "
              "`spin`: apt-get install spin)")
        return
    print(f"{'launch':<7} {'D':>2}  {'meshproof':<10} {'s':>6}  {'spin':<10} {'s':>8} "
          f"{'states':>10}  agree")
    agreed = total = 0
    for name in args.rows.split(","):
        kernel, options = ROWS[name]
        ref = resolve_kernel(kernel)
        free: dict[int, tuple[bool, bool | None]] = {}
        min_depth = None
        for depth in DEPTHS:
            schedule = trace(ref, build_launch(ref, LaunchOptions(queue_depth=depth,
                                                                  **options)))  # type: ignore[arg-type]
            start = time.perf_counter()
            verdict = verify(schedule, VerifyConfig(
                queue_depth=depth, only=frozenset({Property.DEADLOCK_FREEDOM})))
            ours_s = time.perf_counter() - start
            ours = verdict.properties[0].status is Status.VIOLATED
            min_depth = verdict.min_queue_depth
            with tempfile.TemporaryDirectory() as tmp:
                spin = run_spin(promela_model(schedule, derive_channels(schedule), depth),
                                Path(tmp), args.limit, args.memory)
            free[depth] = (not ours, None if spin.deadlock is None else not spin.deadlock)
            total += 1
            agree = spin.deadlock is not None and spin.deadlock == ours
            agreed += agree
            word = {True: "deadlock", False: "free", None: "no answer"}
            print(f"{name:<7} {depth:>2}  {word[ours]:<10} {ours_s:6.2f}  "
                  f"{word[spin.deadlock]:<10} {spin.seconds:8.1f} {spin.states:>10}  "
                  f"{'yes' if agree else 'NO'}{' (' + spin.note + ')' if spin.note else ''}",
                  flush=True)
        spin_min = next((d for d in sorted(free) if free[d][1]), None)
        answered = all(v[1] is not None for v in free.values())
        ours_min = min_depth if min_depth is not None and min_depth <= max(DEPTHS) else None
        print(f"{name:<7} minimal depth in 0..{max(DEPTHS)}: meshproof "
              f"{ours_min if ours_min is not None else 'none'}, spin "
              f"{spin_min if spin_min is not None else 'none'}"
              f"{'' if answered else ' (some runs gave no answer)'}; "
              f"{'agree' if answered and spin_min == ours_min else 'NOT shown to agree'}",
              flush=True)
    print(f"{agreed} of {total} rows agree")


if __name__ == "__main__":
    main()
