"""The numeric run's cost, estimated before any work (sim/cost.py), and --time-budget
(issue 28, item 4): a long simulation says so first, and a budget refuses it up front or
stops it, unknown (exit 3), in one line."""

from __future__ import annotations

import time

import pytest
from helpers import RunCli, trace_kernel

import meshproof.sim.cost as cost
from meshproof.errors import TimeBudgetExceeded
from meshproof.sim.api import simulate
from meshproof.sim.config import SimConfig
from meshproof.sim.cost import CostEstimate, bytes_text, duration_text, estimate_cost


def _kv_bytes(ranks: int, s_kv: int, d: int) -> int:
    return ranks * s_kv * d * 2 * 2        # K and V, as f16


def test_the_estimate_reads_the_launch() -> None:
    """13 TB of K/V for the issue's launch; its dots dominate the work."""
    schedule = trace_kernel("mesh_mlo_1d", args=(("S_kv_per_rank", 10**8), ("d_head", 4096)))
    est = estimate_cost(schedule, _kv_bytes(8, 10**8, 4096))
    assert est.describe().startswith("about 13 TB of K/V to stream and 13,107 GFLOP: about ")
    assert est.describe().endswith(" minutes on this machine")
    small = trace_kernel("mesh_mlo_1d")
    assert estimate_cost(small, _kv_bytes(8, 16, 8)).seconds < 0.01
    # twice the keys, twice the work
    double = trace_kernel("mesh_mlo_1d", args=(("S_kv_per_rank", 2 * 10**8),
                                                ("d_head", 4096)))
    assert estimate_cost(double, _kv_bytes(8, 2 * 10**8, 4096)).seconds == \
        pytest.approx(2 * est.seconds, rel=1e-6)


def test_sizes_and_durations_in_words() -> None:
    assert bytes_text(13.1e12) == "13 TB" and bytes_text(2.5e9) == "2.5 GB"
    assert duration_text(1200) == "20 minutes" and duration_text(3 * 86400) == "3 days"
    assert duration_text(40) == "40 seconds" and duration_text(1) == "1 second"


def test_a_budget_the_estimate_passes_is_refused_before_any_work(run_cli: RunCli) -> None:
    start = time.monotonic()
    res = run_cli(["simulate", "mesh_mlo_1d", "--arg", "S_kv_per_rank=100000000", "--arg",
                   "d_head=4096", "--time-budget", "60"])
    assert res.code == 3, res.err
    assert time.monotonic() - start < 30
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and res.out == ""
    assert lines[0].startswith("meshproof: error: refused: the numeric run has about 13 TB "
                               "of K/V to stream")
    assert "past --time-budget 60 s" in lines[0]


def test_a_run_past_its_budget_stops_there(monkeypatch: pytest.MonkeyPatch) -> None:
    """An estimate that falls short (here: rates made a thousand times too fast) is caught
    by the run itself at the budget."""
    monkeypatch.setattr(cost, "FLOPS_PER_S", 1e15)
    monkeypatch.setattr(cost, "ELEMENTS_PER_S", 1e15)
    schedule = trace_kernel("mesh_mlo_1d", args=(("S_kv_per_rank", 10**6), ("d_head", 4096)))
    start = time.monotonic()
    with pytest.raises(TimeBudgetExceeded, match=r"stopped at --time-budget 0.5 s before the "
                       r"numeric run finished; no result \(\d+ % of the K/V streamed"):
        simulate(schedule, SimConfig(timing=False, time_budget_s=0.5))
    assert time.monotonic() - start < 10


def test_a_long_run_states_its_estimate_first(run_cli: RunCli,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ANNOUNCE_S the estimate is one stderr line before the work (rates made slow
    here, so a small launch counts as long); a short run prints nothing more."""
    seen: list[CostEstimate] = []
    simulate(trace_kernel("mesh_mlo_1d"), SimConfig(timing=False, estimate=seen.append))
    assert len(seen) == 1 and seen[0].seconds < cost.ANNOUNCE_S
    quiet = run_cli(["simulate", "mesh_mlo_1d"])
    assert quiet.code == 0 and quiet.err == ""
    monkeypatch.setattr(cost, "FLOPS_PER_S", 1.0)
    loud = run_cli(["simulate", "mesh_mlo_1d"])
    assert loud.code == 0
    assert loud.err.startswith("meshproof: about ") and " on this machine" in loud.err
    assert len(loud.err.strip().splitlines()) == 1
