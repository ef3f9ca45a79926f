"""synth/api.py, order.py, emit.py, bounds.py: the list scheduler's prediction is
`sim.timing`'s latency of the emitted file; the search beats the hand-written kernels and
stays above its lower bound; the same launch gives the same bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshproof.errors import SynthesisError
from meshproof.kernels import resolve_kernel
from meshproof.model.channels import derive_channels
from meshproof.model.hardware import DEFAULT_PROFILE, HardwareProfile, LinkCost
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.topology import parse_system
from meshproof.model.trace import trace
from meshproof.sim.timing import run_timing
from meshproof.synth.api import Objective, measure, synthesize
from meshproof.synth.bounds_ranks import MergeBounds, two_merges
from meshproof.synth.costs import SIZE_NAMES, block_costs
from meshproof.synth.graph import rank_graph


def _opts(kind: str, a: int, b: int, depth: int) -> tuple[str, LaunchOptions]:
    if kind == "line":
        return "mesh_mlo_1d", LaunchOptions(pes=a, queue_depth=depth)
    return "mesh_mlo_2d", LaunchOptions(system=parse_system(f"1x{a}x{b}", 8),
                                        wiring="cube_mesh", mesh=f"{a}x{b}",
                                        queue_depth=depth)


def _hand_latency(kernel: str, opts: LaunchOptions) -> float:
    ref = resolve_kernel(kernel)
    launch = build_launch(ref, opts)
    schedule = trace(ref, launch)
    return run_timing(schedule, derive_channels(schedule), DEFAULT_PROFILE,
                      launch.spec.queue_depth).latency_s


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.builds(lambda n: ("line", n, 0), st.integers(2, 8)),
                 st.builds(lambda r, c: ("mesh", r, c), st.integers(1, 3), st.integers(2, 4))),
       st.integers(1, 4), st.sampled_from(["default", "slow links"]))
def test_the_prediction_is_sim_timing_of_the_emitted_file(
        tmp_path: Path, shape: tuple[str, int, int], depth: int, profile: str) -> None:
    hw = DEFAULT_PROFILE if profile == "default" else HardwareProfile(
        op_overhead_s=5e-9, inter_cube=LinkCost(2e-6, 5e10), intra_cube=LinkCost(5e-7, 1e11))
    kernel, opts = _opts(*shape, depth)
    result = synthesize(build_launch(resolve_kernel(kernel), opts), hw, Objective.LATENCY, "")
    path = tmp_path / f"k_{shape[0]}_{shape[1]}_{shape[2]}_{depth}_{profile[0]}.py"
    path.write_text(result.kernel_text)
    assert measure(path, opts, hw) == result.chosen.latency_s


@settings(max_examples=10, deadline=None)
@given(st.one_of(st.builds(lambda n: ("line", n, 0), st.integers(2, 8)),
                 st.builds(lambda n: ("ring", n, 0), st.integers(3, 8)),
                 st.builds(lambda r, c: ("mesh", r, c), st.integers(1, 3), st.integers(2, 4))),
       st.integers(1, 4),
       st.tuples(st.sampled_from([1e-9, 5e-9, 5e-8]), st.sampled_from([1e-8, 1e-7, 2e-6]),
                 st.sampled_from([1e9, 1e11]), st.sampled_from([1e-7, 5e-7, 2e-6]),
                 st.sampled_from([1e9, 5e10])),
       st.sampled_from([(1, 16, 1, 1, 8), (2, 32, 4, 2, 16), (1, 8, 8, 1, 64)]))
def test_the_bound_is_at_most_every_candidates_latency(
        shape: tuple[str, int, int], depth: int,
        profile: tuple[float, float, float, float, float],
        sizes: tuple[int, int, int, int, int]) -> None:
    """The lower bound is proved for the class searched (spec/synthesis.md §3), so no
    candidate the search ranks, each `simulate`'s latency of its kernel (the test above),
    may beat it: on random launches, profiles (cheap or dear ops, fast or slow links) and
    sizes (long o messages make the o-chain the largest)."""
    overhead, intra_l, intra_b, inter_l, inter_b = profile
    hw = HardwareProfile(op_overhead_s=overhead, intra_cube=LinkCost(intra_l, intra_b),
                         inter_cube=LinkCost(inter_l, inter_b))
    kind, a, b = shape
    if kind == "ring":
        kernel, opts = "ring_mlo", LaunchOptions(pes=a, wiring="pe_ring", queue_depth=depth)
    else:
        kernel, opts = _opts(kind, a, b, depth)
    names = ("S_q", "S_kv_per_rank", "h_q", "h_kv", "d_head")
    opts = LaunchOptions(**{**{f: getattr(opts, f) for f in ("pes", "wiring", "system",
                                                               "mesh", "queue_depth")},
                            "args": tuple(zip(names, sizes, strict=True))})
    result = synthesize(build_launch(resolve_kernel(kernel), opts), hw, Objective.LATENCY, "")
    assert all(result.bound.latency_s <= c.latency_s for c in result.candidates), \
        (result.bound, min(c.latency_s for c in result.candidates))


@pytest.mark.parametrize(("kind", "a", "b"), [("line", 8, 0), ("mesh", 2, 4), ("mesh", 4, 4)])
def test_the_chosen_kernel_beats_the_hand_written_one_above_the_bound(
        kind: str, a: int, b: int) -> None:
    kernel, opts = _opts(kind, a, b, 4)
    result = synthesize(build_launch(resolve_kernel(kernel), opts), DEFAULT_PROFILE,
                        Objective.LATENCY, "")
    hand = _hand_latency(kernel, opts)
    assert result.bound.latency_s <= result.chosen.latency_s <= 0.75 * hand
    assert result.candidates == tuple(sorted(result.candidates,
                                             key=lambda c: (c.latency_s, c.max_link_bytes,
                                                            c.steps, c.plan, c.rule)))


def test_the_same_launch_gives_the_same_bytes() -> None:
    kernel, opts = _opts("mesh", 2, 4, 4)
    texts = {synthesize(build_launch(resolve_kernel(kernel), opts), DEFAULT_PROFILE,
                        Objective.LATENCY, "--mesh 2x4").kernel_text for _ in range(2)}
    assert len(texts) == 1
    text = texts.pop()
    assert "plan: columns then rows, segments [0,1]x[1,2]" in text
    assert "predicted latency: 6.307 us; lower bound: 5.755 us (gap 1.10x)" in text


def test_the_bytes_objective_prefers_the_least_loaded_link() -> None:
    kernel, opts = _opts("line", 6, 0, 4)
    result = synthesize(build_launch(resolve_kernel(kernel), opts), DEFAULT_PROFILE,
                        Objective.BYTES, "")
    assert result.chosen.max_link_bytes == min(c.max_link_bytes for c in result.candidates)


def test_a_rendezvous_queue_is_refused_with_the_fix() -> None:
    kernel, opts = _opts("line", 4, 0, 0)
    with pytest.raises(SynthesisError, match="queue depth D >= 1, got 0; pass --queue-depth 1"):
        synthesize(build_launch(resolve_kernel(kernel), opts), DEFAULT_PROFILE,
                   Objective.LATENCY, "")


def test_ranks_the_wiring_does_not_join_are_refused() -> None:
    launch = build_launch(resolve_kernel("mesh_mlo_1d"), LaunchOptions(
        cubes=2, wiring="pe_line", args=(("rank_axis", 1),)))
    with pytest.raises(SynthesisError, match="the wiring pe_line does not connect the "
                       "launched ranks"):
        synthesize(launch, DEFAULT_PROFILE, Objective.LATENCY, "")


def test_on_the_ring_the_two_merge_bound_is_above_the_merge_bound() -> None:
    """The 8-ring's farthest partial is merged before the last merge (two ops of it still
    follow) or only by it (whose other input is a merge of its own): 4.255 us, two ops
    above the merge bound's 4.155 (the all-ranks bound, tests/test_synth_bounds.py, is
    higher still); on a line the forwarding structure meets the merge bound, which then
    stays the bound."""
    launch = build_launch(resolve_kernel("ring_mlo"), LaunchOptions(pes=8, wiring="pe_ring"))
    graph = rank_graph(launch)
    args = dict(launch.call_args)
    costs = block_costs(tuple((k, args[k]) for k in SIZE_NAMES), DEFAULT_PROFILE,
                        launch.spec.system)
    merges = MergeBounds(graph, costs, costs, sorted({e.cls for e in graph.edges}))
    assert round(two_merges(merges) * 1e6, 3) == 4.255
    ring = synthesize(launch, DEFAULT_PROFILE, Objective.LATENCY, "")
    assert ring.bound.latency_s >= two_merges(merges) * (1 - 1e-9)
    assert ring.bound.latency_s <= min(c.latency_s for c in ring.candidates)
    line = synthesize(build_launch(resolve_kernel("mesh_mlo_1d"), LaunchOptions(pes=8)),
                      DEFAULT_PROFILE, Objective.LATENCY, "")
    assert line.bound.chain == "merge"
