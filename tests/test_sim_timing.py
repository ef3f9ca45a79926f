"""Timing model, communication steps, op log and the Perfetto trace."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
from helpers import trace_kernel

from meshproof.deploy.launches import resolve_launches
from meshproof.errors import ConfigError, SimulationRefused
from meshproof.model.channels import derive_channels
from meshproof.model.hardware import DEFAULT_PROFILE, HardwareProfile, LinkCost
from meshproof.model.launch_options import LaunchOptions
from meshproof.model.schedule import DType, Op, OpKind, SourceLoc
from meshproof.model.topology import System
from meshproof.model.trace import trace
from meshproof.sim.api import SimConfig, simulate
from meshproof.sim.oplog import op_log
from meshproof.sim.perfetto import perfetto_trace, write_trace
from meshproof.sim.timing import op_cost

TIMING_ONLY = SimConfig(numerics=False)


@pytest.mark.parametrize("n", [2, 3, 5, 8, 16])
def test_comm_steps_of_the_1d_line_is_n_minus_1(n: int) -> None:
    schedule = trace_kernel("mesh_mlo_1d", system=System(1, 4, 4, max(8, n)), pes=n)
    result = simulate(schedule, TIMING_ONLY)
    assert result.timing is not None
    assert result.timing.comm_steps == n - 1


@pytest.mark.parametrize(("mesh", "steps", "line"), [("2x4", 4, 7), ("4x4", 6, 15),
                                                     ("1x4", 3, 3), ("3x4", 5, 11)])
def test_comm_steps_of_the_2d_mesh_is_its_diameter(mesh: str, steps: int, line: int) -> None:
    schedule = trace_kernel("mesh_mlo_2d", mesh=mesh, wiring="cube_mesh")
    result = simulate(schedule, TIMING_ONLY)
    assert result.timing is not None
    rows, cols = (int(x) for x in mesh.split("x"))
    assert result.timing.comm_steps == steps == (cols - 1) + (rows - 1)
    assert line == rows * cols - 1


@pytest.mark.parametrize("panel", ["single_user_decode", "multi_user_decode"])
def test_decode_panels_emit_two_gemms_per_rank(panel: str) -> None:
    ((kernel, launch),) = resolve_launches(LaunchOptions(panel=panel)).launches
    schedule = trace(kernel, launch)
    n_ranks = len(schedule.active)
    assert n_ranks == (8 if panel == "single_user_decode" else 4)
    log = op_log(schedule)
    assert log.gemm == 2 * n_ranks
    assert log.dma_write == n_ranks and log.dma_read == 3 * n_ranks
    assert log.ipcq_send == log.ipcq_recv > 0


def test_headline_single_user_decode_emits_two_gemms_per_rank() -> None:
    ((kernel, launch),) = resolve_launches(LaunchOptions(panel="single_user_decode",
                                                         scale="headline")).launches
    schedule = trace(kernel, launch)
    assert len(schedule.active) == 512
    assert op_log(schedule).gemm == 1024


def test_busy_plus_wait_is_finish_and_the_critical_path_spans_the_latency() -> None:
    result = simulate(trace_kernel("mesh_mlo_2d", mesh="2x4", wiring="cube_mesh"), TIMING_ONLY)
    tim = result.timing
    assert tim is not None
    for r in tim.per_rank:
        assert r.busy_s + r.wait_s == pytest.approx(r.finish_s, rel=1e-9)
        assert r.busy_s > 0
    assert max(r.finish_s for r in tim.per_rank) == pytest.approx(tim.latency_s)
    path = tim.critical_path
    assert path[0].start_s == 0.0
    assert path[-1].end_s == pytest.approx(tim.latency_s)
    for a, b in itertools.pairwise(path):
        assert a.end_s <= b.start_s + 1e-15
    assert any(s.via == "message" for s in path)
    # 2x4 cube mesh: the messages cross inter-cube links only
    assert {link.link_class for link in tim.links} == {"inter_cube"}
    assert sum(link.messages for link in tim.links) == result.op_log.ipcq_send


def test_a_slower_profile_is_slower_and_steps_do_not_change() -> None:
    schedule = trace_kernel("mesh_mlo_1d")
    fast = simulate(schedule, TIMING_ONLY)
    slow_hw = HardwareProfile(name="slow links", intra_cube=LinkCost(1e-5, 1e9))
    slow = simulate(schedule, SimConfig(numerics=False, hardware=slow_hw))
    assert fast.timing is not None and slow.timing is not None
    assert slow.timing.latency_s > fast.timing.latency_s + 6 * 1e-5
    assert slow.timing.comm_steps == fast.timing.comm_steps == 7
    assert slow.timing.profile == "slow links"


def test_bytes_per_link_add_up() -> None:
    result = simulate(trace_kernel("mesh_mlo_1d"), TIMING_ONLY)
    assert result.timing is not None
    links = {link.name: link for link in result.timing.links}
    assert set(links) == {f"c0p{p}_E" for p in range(7)} | {f"c0p{p}_W" for p in range(1, 8)}
    # the end ranks forward only their own triplet; (m, l, o) = 4 + 4 + 32 bytes each
    assert links["c0p0_E"].messages == 3 and links["c0p0_E"].bytes == 40
    assert links["c0p3_E"].messages == 3 * 4


PINGPONG = '''
def pingpong(q_ptr, k_ptr, v_ptr, o_ptr, *, tl):
    x = tl.load(q_ptr, shape=(1, 4), dtype="f32")
    if tl.program_id(axis=0) == 0:
        tl.send(dir="E", src=x)
        y = tl.recv(dir="E", shape=(1, 4), dtype="f32")
    else:
        y = tl.recv(dir="W", shape=(1, 4), dtype="f32")
        tl.send(dir="W", src=y + x)
'''


def test_rendezvous_depth_zero_runs_pingpong(tmp_path: Path) -> None:
    path = tmp_path / "pingpong.py"
    path.write_text(PINGPONG, encoding="utf-8")
    zero = simulate(trace_kernel(f"{path}::pingpong", pes=2, queue_depth=0), TIMING_ONLY)
    one = simulate(trace_kernel(f"{path}::pingpong", pes=2, queue_depth=1), TIMING_ONLY)
    assert zero.timing is not None and one.timing is not None
    assert zero.timing.comm_steps == one.timing.comm_steps == 2
    assert {s.via for s in zero.timing.critical_path} >= {"rendezvous"}
    assert zero.timing.latency_s >= one.timing.latency_s


def test_perfetto_trace_has_a_process_per_rank_and_a_flow_pair_per_message(
        tmp_path: Path) -> None:
    schedule = trace_kernel("mesh_mlo_1d")
    result = simulate(schedule, TIMING_ONLY)
    assert result.run is not None
    out = tmp_path / "trace.json"
    write_trace(out, perfetto_trace(schedule, derive_channels(schedule), result.run))
    doc = json.loads(out.read_text(encoding="utf-8"))
    events = doc["traceEvents"]
    names = [e for e in events if e["ph"] == "M" and e["name"] == "process_name"]
    assert len(names) == len(schedule.active) == 8
    assert len({e["pid"] for e in names}) == 8
    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) == sum(len(p.ops) for p in schedule.programs)
    assert all(isinstance(e["ts"], float | int) and e["dur"] >= 0 for e in slices)
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert len(starts) == len(ends) == result.op_log.ipcq_send == 168
    assert set(starts) == set(ends)
    for i, s in starts.items():
        assert s["ts"] <= ends[i]["ts"] and s["pid"] != ends[i]["pid"]
    assert [p.name for p in tmp_path.iterdir()] == ["trace.json"]  # no temp file left


def test_timing_refuses_deadlock_too() -> None:
    with pytest.raises(SimulationRefused):
        simulate(trace_kernel("mesh_mlo_1d_recv_first"), TIMING_ONLY)


def test_profile_check_guards_the_library_too() -> None:
    bad = HardwareProfile(name="x", inter_cube=LinkCost(1e-7, math.nan))
    with pytest.raises(ConfigError, match=r"inter_cube.bandwidth_Bps must be a finite"):
        simulate(trace_kernel("mesh_mlo_1d"), SimConfig(hardware=bad))
    # numerics alone do not use the profile
    assert simulate(trace_kernel("mesh_mlo_1d"),
                    SimConfig(hardware=bad, timing=False)).ok


@pytest.mark.parametrize("kind", list(OpKind))
def test_every_op_kind_has_a_cost(kind: OpKind) -> None:
    """op_cost is a match over OpKind ending in assert_never: an op kind added without a
    cost fails mypy there, and here (it was an if-chain that charged an unknown op the
    overhead of a send without a word)."""
    op = Op(0, kind, (), None if kind in (OpKind.SEND, OpKind.STORE) else 1, (4, 8),
            DType.F32, SourceLoc("k.py", 1), nbytes=128)
    cost = op_cost(op, ((4, 8), (8, 8)), DEFAULT_PROFILE)
    assert math.isfinite(cost) and cost >= 0
    if kind not in (OpKind.RESHAPE, OpKind.VIEW):   # metadata views are free
        assert cost > 0
