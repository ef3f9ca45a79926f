"""No size of a launch ends in exit 70 (issue 28, item 2).

`verify`, `simulate` and `trace` of the 1D built-in over shard sizes up to 10^12 keys per
rank and heads up to 65,536 features, each in a fresh process under `ulimit -v 4000000`
(about 3.8 GiB of address space): every run ends in a verdict, a refusal or a bad-input
line (exit 0-3), never an internal error (70), a traceback or a memory kill. simulate
runs with --time-budget, so the long ones are refused up front (exit 3) by their estimate.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

ADDRESS_SPACE = 4_000_000 * 1024        # ulimit -v 4000000 (KiB)
SHARDS = (10**4, 10**6, 10**8, 10**10, 10**11, 10**12)
HEADS = (8, 4096, 65536)
# make test runs verify at the grid's corners and centre; make bench (pytest -m scale) the
# whole grid for all three commands
CORNERS = ((10**4, 8), (10**4, 65536), (10**8, 4096), (10**12, 8), (10**12, 65536))
GRID = tuple((s_kv, d) for s_kv in SHARDS for d in HEADS)


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _meshproof() -> list[str]:
    exe = Path(sys.executable).with_name("meshproof")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "meshproof"]


@pytest.mark.parametrize(("command", "sizes"), [
    pytest.param("verify", CORNERS, id="verify-corners"),
    pytest.param("verify", GRID, id="verify-grid", marks=pytest.mark.scale),
    pytest.param("simulate", GRID, id="simulate-grid", marks=pytest.mark.scale),
    pytest.param("trace", GRID, id="trace-grid", marks=pytest.mark.scale)])
def test_no_launch_size_ends_in_exit_70_or_a_memory_kill(
        command: str, sizes: tuple[tuple[int, int], ...], tmp_path: Path) -> None:
    extra = ["--time-budget", "20"] if command == "simulate" else []
    failures = []
    for s_kv, d in sizes:
        args = [*_meshproof(), command, "mesh_mlo_1d", "--arg", f"S_kv_per_rank={s_kv}",
                "--arg", f"d_head={d}", *extra]
        done = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True,
                              timeout=600, preexec_fn=_limited, check=False)
        err = done.stderr
        if done.returncode not in (0, 1, 2, 3) or "Traceback" in err or \
                "internal error" in err:
            failures.append(f"S_kv_per_rank={s_kv} d_head={d}: exit {done.returncode}: "
                            f"{err.strip()[-300:]}")
        elif done.returncode in (2, 3) and command == "simulate":
            # a refusal is one line that says why
            assert len(err.strip().splitlines()) <= 2, err
    assert failures == [], "\n".join(failures)

