"""synth/halves.py: two parts reduce to segments of their own, each part's state reaches
every rank, every rank merges the two. On a ring both arcs carry a half, which beats one
meeting segment; the kernel it writes proves like any other."""

from __future__ import annotations

from pathlib import Path

from helpers import REPO_ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from meshproof.kernels import resolve_kernel
from meshproof.model.hardware import DEFAULT_PROFILE
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel_file
from meshproof.model.topology import parse_system
from meshproof.model.trace import trace
from meshproof.synth.api import Objective, synthesize
from meshproof.synth.emit_text import KERNEL_NAME
from meshproof.synth.graph import rank_graph
from meshproof.synth.halves import halves_plans
from meshproof.synth.plan import Family, check_plan
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.result import Status

RING = LaunchOptions(pes=8, wiring="pe_ring")


def test_on_the_ring_the_halves_beat_one_meeting_segment_and_prove(tmp_path: Path) -> None:
    launch = build_launch(resolve_kernel("ring_mlo"), RING)
    result = synthesize(launch, DEFAULT_PROFILE, Objective.LATENCY, "")
    assert result.chosen.family == Family.HALVES.value
    assert result.chosen.steps == 5          # one segment of the ring takes 7
    segment = min(c.latency_s for c in result.candidates
                  if c.family == Family.LINE_SEGMENT.value)
    assert result.chosen.latency_s < segment
    path = tmp_path / "ring.py"
    path.write_text(result.kernel_text, encoding="utf-8")
    kernel = resolve_kernel_file(f"{path}::{KERNEL_NAME}")
    schedule = trace(kernel, build_launch(kernel, RING))
    verdict = verify(schedule, VerifyConfig())
    assert [p.status for p in verdict.properties] == [Status.PROVED] * 7


def test_on_the_dead_link_wafer_the_halves_route_around_the_gap() -> None:
    """Every halves plan on the 2x4 wafer with link 1-5 dead passes the plan check (no
    transfer over the missing link), and the search picks one: its bound gap is the
    issue's 1.2 at most."""
    wiring = str(REPO_ROOT / "examples" / "wirings" / "dead_link_2x4.toml")
    launch = build_launch(resolve_kernel("mesh_mlo_2d"), LaunchOptions(
        system=parse_system("1x4x4", 8), wiring=wiring, mesh="2x4"))
    graph = rank_graph(launch)
    plans = list(halves_plans(graph))
    assert plans
    for plan in plans:
        check_plan(plan, graph)
    result = synthesize(launch, DEFAULT_PROFILE, Objective.LATENCY, "")
    assert result.chosen.family == Family.HALVES.value
    assert result.gap <= 1.2


@settings(max_examples=10, deadline=None)
@given(st.integers(4, 8), st.sampled_from(["pe_line", "pe_ring"]))
def test_every_halves_plan_passes_the_plan_check(pes: int, wiring: str) -> None:
    launch = build_launch(resolve_kernel("mesh_mlo_1d"), LaunchOptions(pes=pes, wiring=wiring))
    graph = rank_graph(launch)
    plans = list(halves_plans(graph))
    assert plans
    for plan in plans:
        checked = check_plan(plan, graph)
        assert checked.plan.family is Family.HALVES
