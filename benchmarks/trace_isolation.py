"""Overhead of tracing in a child process (model/isolation.py) against tracing in-process.

For each case, alternates in-process and isolated traces (so machine load hits both alike)
and prints the medians, the difference (the isolation's cost per trace) and the ratio. The
parent imports verify/ and sim/ first, as the CLI and the gate do: a fork copies that
address space. Cases: the issue's `mesh_mlo_2d --mesh 2x4` (704 ops, a typical gate case)
and `--mesh 8x8` (the cost per op of bringing a bigger schedule home). --spawn also times
the fresh-interpreter start methods; --budget runs a runaway kernel into the 1M-op budget
in the child (about a minute).

    .venv/bin/python benchmarks/trace_isolation.py [--repeats N] [--spawn] [--budget]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import meshproof.sim.api
import meshproof.verify.api  # noqa: F401 - a realistic parent, as above
from meshproof.errors import TraceError
from meshproof.model.isolation import StartMethod, TraceLimits, trace_isolated
from meshproof.model.launch import Launch, LaunchOptions, build_launch
from meshproof.model.loader import KernelRef, resolve_kernel
from meshproof.model.topology import System
from meshproof.model.trace import trace

RUNAWAY = Path(__file__).resolve().parents[1] / "tests" / "kernels" / "runaway.py"


def median_seconds(call: object, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def compare(label: str, ref: KernelRef, launch: Launch, repeats: int,
            methods: list[StartMethod]) -> None:
    schedule = trace(ref, launch)
    assert trace_isolated(ref, launch) == schedule
    ops = sum(len(p.ops) for p in schedule.programs)
    for method in methods:
        inside: list[float] = []
        isolated: list[float] = []
        for _ in range(repeats):  # interleaved: load drifts hit both
            inside.append(median_seconds(lambda: trace(ref, launch), 1))
            isolated.append(median_seconds(lambda m=method: trace_isolated(ref, launch,
                                                                           start=m), 1))
        a, b = statistics.median(inside), statistics.median(isolated)
        print(f"{label:<22} {ops:>7} ops  {method.value:<10} in-process {a * 1e3:8.1f} ms  "
              f"isolated {b * 1e3:8.1f} ms  overhead {(b - a) * 1e3:7.1f} ms  "
              f"({(b - a) / ops * 1e6:5.1f} us/op)  ratio {b / a:5.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--spawn", action="store_true")
    parser.add_argument("--budget", action="store_true")
    args = parser.parse_args()
    methods = [StartMethod.FORK] + ([StartMethod.FORKSERVER, StartMethod.SPAWN]
                                    if args.spawn else [])
    ref = resolve_kernel("mesh_mlo_2d")
    for mesh, repeats in (("2x4", args.repeats), ("8x8", max(3, args.repeats // 5))):
        rows, cols = (int(n) for n in mesh.split("x"))
        system = System(1, max(rows, 4), max(cols, 4), 8)  # one SIP of that grid
        launch = build_launch(ref, LaunchOptions(system=system, mesh=mesh))
        compare(f"mesh_mlo_2d --mesh {mesh}", ref, launch, repeats, methods)
    if args.budget:
        runaway = resolve_kernel(f"{RUNAWAY}::many_ops")
        launch = build_launch(runaway, LaunchOptions(pes=1, args=(("n", 10**7),)))
        start = time.perf_counter()
        try:
            trace_isolated(runaway, launch, TraceLimits(wall_seconds=300, cpu_seconds=300))
        except TraceError as exc:
            print(f"op budget in the child: {time.perf_counter() - start:.1f} s: {exc}")
        else:
            print("op budget in the child: NOT enforced")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
