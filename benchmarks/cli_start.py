"""How long a whole `meshproof verify` process takes next to importing z3 and numpy alone,
and how long `meshproof --help` takes.

    .venv/bin/python benchmarks/cli_start.py [--runs 15]

The commands run as fresh processes with the same interpreter, alternating, so machine
load hits them alike; the ratio of the medians is printed (goal <= 2.5x), by wall time
and by CPU time (user + system of the process and the children it waited for: the trace
child included), which a loaded machine disturbs less. The verify command is the
issue's: `meshproof verify mesh_mlo_2d --mesh 2x4 --queue-depth 3` (192 comm ops:
tracing, all seven properties, the Z3 certificates and stuck-state search). `--help`
has an absolute goal, <= 0.3 s wall.

Bytecode caching is on for both, as for an installed package (z3's and numpy's .pyc files
come with their wheels; a first warm-up run writes meshproof's): an environment that sets
PYTHONDONTWRITEBYTECODE would otherwise make every run recompile meshproof from source.

The console script runs verify with one OpenBLAS thread (meshproof.cli.SERIAL_BLAS_COMMANDS):
a bare `import numpy` starts OpenBLAS's pool, whose worker spins ~2^28 cycles (~0.1 s) on
a core before it sleeps. That spin is the baseline's CPU above its wall time on an idle
machine, and wall time on a busy one; the ratio is printed against the issue's baseline
and against the baseline with one BLAS thread too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

GOAL = 2.5
HELP_GOAL_S = 0.3
MESHPROOF = str(Path(sys.executable).with_name("meshproof"))
BASELINE = [sys.executable, "-c", "import z3, numpy"]
SERIAL_BASELINE_NAME = "  ... with one BLAS thread (as verify runs)"
VERIFY = [MESHPROOF, "verify", "mesh_mlo_2d", "--mesh", "2x4", "--queue-depth", "3"]
HELP = [MESHPROOF, "--help"]


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
# The console script runs verify with one OpenBLAS thread (meshproof.cli._serial_blas);
# a bare `import numpy` starts the pool, whose worker spins ~0.1 s on a core. Both
# baselines are timed: the (the pool) and the like-for-like one (no pool).
SERIAL_ENV = {**ENV, "OPENBLAS_NUM_THREADS": "1"}


def _seconds(command: list[str], terminal: bool = False,
             env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, with the children it reaped).
    `terminal`: stderr is a pseudo-terminal, as for a person running the command (the
    progress display then arms its timer)."""
    master, slave = os.openpty() if terminal else (-1, -1)
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                             stderr=slave if terminal else subprocess.PIPE, env=env or ENV)
    if terminal:
        os.close(slave)
        err = b""
    else:
        assert child.stderr is not None
        err = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    if terminal:
        with contextlib.suppress(OSError):  # what the command wrote (an error line)
            err = os.read(master, 1 << 16)
        os.close(master)
    child.returncode = os.waitstatus_to_exitcode(status)
    # 3 is a verdict too: at the simulator's tolerance the command leaves
    # numeric_safety unknown (its bound 3.0e-2·max|V| is above 1e-2, issue 19)
    if child.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(command)} exited {child.returncode}: "
                         f"{err.decode(errors='replace').strip()}")
    return elapsed, usage.ru_utime + usage.ru_stime


# Run in a fresh interpreter: the CPU seconds of each phase of the verify command, read
# with process_time between the imports and around the command (the trace child's from
# RUSAGE_CHILDREN), then the properties' own seconds from the verdict's JSON.
_PHASES = """
import dataclasses, gc, io, json, resource, sys, time
from contextlib import redirect_stdout
gc.set_threshold(50_000, *gc.get_threshold()[1:])  # as the console script (entry) does
made = []
process_class = dataclasses._process_class
def timed(cls, *args, **kwargs):
    start = time.process_time()
    try:
        return process_class(cls, *args, **kwargs)
    finally:
        made.append(time.process_time() - start)
dataclasses._process_class = timed
t0 = time.process_time()
import numpy, z3
t1 = time.process_time()
import click, rich.console, rich.table
t2 = time.process_time()
from meshproof.cli import GC_THRESHOLD, main
assert gc.get_threshold()[0] == GC_THRESHOLD, "keep this in step with meshproof.cli.entry"
gc.disable()  # as entry does: the command's module imported with the collector paused,
import meshproof.cli.verify_cmd
gc.freeze()   # then frozen
gc.enable()
t3 = time.process_time()
dataclass_s, dataclasses_made = sum(made), len(made)
out = io.StringIO()
with redirect_stdout(out):
    main([*sys.argv[1:], "--json"])
t4 = time.process_time()
child = resource.getrusage(resource.RUSAGE_CHILDREN)
props = {p["name"]: p["seconds"] for p in json.loads(out.getvalue())["properties"]}
print(json.dumps({"interpreter": t0, "numpy, z3": t1 - t0, "click, rich": t2 - t1,
                  "meshproof modules": t3 - t2, "the command": t4 - t3,
                  "trace child": child.ru_utime + child.ru_stime, "properties": props,
                  "dataclasses": [dataclasses_made, dataclass_s]}))
"""


def _breakdown() -> str:
    """Where the verify command's CPU time goes (one run, in a fresh interpreter)."""
    done = subprocess.run([sys.executable, "-c", _PHASES, *VERIFY[1:]], capture_output=True,
                          text=True, check=False, env=SERIAL_ENV)  # as entry runs it
    if done.returncode != 0:
        raise SystemExit(f"the phase breakdown failed: {done.stderr.strip()}")
    phases = json.loads(done.stdout)
    props = phases.pop("properties")
    made, made_s = phases.pop("dataclasses")
    slow = sorted(props.items(), key=lambda kv: -kv[1])[:3]
    return ("  CPU by phase: " + ", ".join(f"{k} {v:.3f} s" for k, v in phases.items())
            + f"\n  of the imports, {made} dataclasses made ({made_s:.3f} s: Python 3.11 "
            "compiles each one's generated methods one exec at a time)"
            + "\n  of the command, the properties' own wall seconds: "
            + ", ".join(f"{k} {v:.3f}" for k, v in slow)
            + " (exactly_once_merge runs the semantic analysis the last three share)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs of each command")
    args = parser.parse_args()
    commands = {"python -c 'import z3, numpy'": BASELINE,
                SERIAL_BASELINE_NAME: BASELINE,
                "meshproof verify mesh_mlo_2d --mesh 2x4 --queue-depth 3": VERIFY,
                "  ... with stderr a terminal": VERIFY,
                "meshproof --help": HELP}
    at_terminal = {"  ... with stderr a terminal"}
    for command in commands.values():
        _seconds(command)  # warm the page cache and write meshproof's .pyc files
    wall: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, command in commands.items():
            w, c = _seconds(command, name in at_terminal,
                            SERIAL_ENV if name == SERIAL_BASELINE_NAME else ENV)
            wall[name].append(w)
            cpu[name].append(c)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs after the runs")
    for name in commands:
        print(f"{name}: wall median {statistics.median(wall[name]):.3f} s, min "
              f"{min(wall[name]):.3f} s; CPU median {statistics.median(cpu[name]):.3f} s, "
              f"min {min(cpu[name]):.3f} s")
    base, verify = next(iter(commands)), list(commands)[2]
    by_wall = statistics.median(wall[verify]) / statistics.median(wall[base])
    by_cpu = statistics.median(cpu[verify]) / statistics.median(cpu[base])
    by_min = min(wall[verify]) / min(wall[base])
    print(f"ratio verify / import z3, numpy: {by_wall:.2f}x by median wall, {by_min:.2f}x by "
          f"min wall, {by_cpu:.2f}x by median CPU (goal <= {GOAL}x): "
          f"{'met' if by_wall <= GOAL else 'MISSED'}")
    serial = statistics.median(wall[SERIAL_BASELINE_NAME])
    print(f"  against the baseline with one BLAS thread too: "
          f"{statistics.median(wall[verify]) / serial:.2f}x by median wall, "
          f"{statistics.median(cpu[verify]) / statistics.median(cpu[SERIAL_BASELINE_NAME]):.2f}x"
          " by median CPU (the pool's spin is CPU time on any machine, and wall time on a "
          "busy one)")
    tty = statistics.median(wall["  ... with stderr a terminal"])
    print(f"  with stderr a terminal: {tty / statistics.median(wall[base]):.2f}x by median wall"
          " (the progress display's timer is paused while the trace forks; "
          "before, its thread made the trace start a fork server, a second start-up)")
    print(_breakdown())
    helped = statistics.median(wall["meshproof --help"])
    print(f"meshproof --help: {helped:.3f} s median wall (goal <= {HELP_GOAL_S} s): "
          f"{'met' if helped <= HELP_GOAL_S else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
