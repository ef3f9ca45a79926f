"""synth with o in row chunks (costs.chunkable/chunk costs, order.py's chunked tasks,
emit_chunks.py, the bound over the variants) and with every state split by rows
(reduce-scatter / all-gather: emit_split.py, order.schedule_split): the prediction is
`sim.timing`'s latency of the emitted file, the kernels are proved like any other, chunks
are offered only where views select them exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshproof.errors import SynthesisError
from meshproof.kernels import resolve_kernel
from meshproof.model.hardware import DEFAULT_PROFILE
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel_file
from meshproof.model.topology import parse_system
from meshproof.model.trace import trace
from meshproof.synth.api import Objective, _reduce_scatter, measure, synthesize
from meshproof.synth.costs import block_costs, chunkable
from meshproof.synth.emit_split import emit_split_kernel, program_rows_split
from meshproof.synth.emit_text import KERNEL_NAME, EmitInfo
from meshproof.synth.graph import rank_graph
from meshproof.synth.plan import CheckedPlan
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.result import Status

# four rows of o (h_q 4 over one kv head): 2 or 4 chunks
SIZES = (("S_q", 1), ("S_kv_per_rank", 8), ("h_q", 4), ("h_kv", 1), ("d_head", 8))


def _opts(kind: str, a: int, b: int, depth: int) -> tuple[str, LaunchOptions]:
    if kind == "line":
        return "mesh_mlo_1d", LaunchOptions(pes=a, queue_depth=depth, args=SIZES)
    return "mesh_mlo_2d", LaunchOptions(system=parse_system(f"1x{a}x{b}", 8),
                                        wiring="cube_mesh", mesh=f"{a}x{b}",
                                        queue_depth=depth, args=SIZES)


@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.builds(lambda n: ("line", n, 0), st.integers(2, 6)),
                 st.builds(lambda r, c: ("mesh", r, c), st.integers(1, 2), st.integers(2, 4))),
       st.integers(1, 4), st.sampled_from([2, 4]))
def test_the_chunked_prediction_is_sim_timing_of_the_emitted_file(
        tmp_path: Path, shape: tuple[str, int, int], depth: int, chunks: int) -> None:
    kernel, opts = _opts(*shape, depth)
    result = synthesize(build_launch(resolve_kernel(kernel), opts), DEFAULT_PROFILE,
                        Objective.LATENCY, "", chunks=chunks)
    assert all(c.chunks == chunks for c in result.candidates)
    assert f"o in {chunks} chunks" in result.chosen.plan
    assert result.bound.latency_s <= result.chosen.latency_s
    path = tmp_path / f"k_{shape[0]}_{shape[1]}_{shape[2]}_{depth}_{chunks}.py"
    path.write_text(result.kernel_text)
    assert measure(path, opts, DEFAULT_PROFILE) == result.chosen.latency_s


def test_a_chunked_kernel_is_proved(tmp_path: Path) -> None:
    """A chunked kernel's views are exact element selections: all seven properties."""
    kernel, opts = _opts("mesh", 2, 2, 2)
    result = synthesize(build_launch(resolve_kernel(kernel), opts), DEFAULT_PROFILE,
                        Objective.LATENCY, "", chunks=2)
    path = tmp_path / "chunked.py"
    path.write_text(result.kernel_text)
    ref = resolve_kernel_file(f"{path}::{KERNEL_NAME}")
    verdict = verify(trace(ref, build_launch(ref, opts)), VerifyConfig())
    assert [p.name.value for p in verdict.properties if p.status is not Status.PROVED] == []


def test_chunks_only_where_views_select_whole_rows_that_store_in_place() -> None:
    sizes = dict(SIZES)
    assert chunkable(sizes, 2) and chunkable(sizes, 4)
    assert not chunkable(sizes, 3)                               # 4 rows
    assert not chunkable(sizes, 8)                               # a chunk under one row
    assert not chunkable({**sizes, "S_q": 2, "h_kv": 2, "h_q": 4}, 2)   # stored strided
    assert chunkable({**sizes, "h_q": 64, "h_kv": 8}, 8)        # the headline sizes
    kernel, opts = _opts("line", 4, 0, 2)
    with pytest.raises(SynthesisError, match="does not split into 3 row chunks"):
        synthesize(build_launch(resolve_kernel(kernel), opts), DEFAULT_PROFILE,
                   Objective.LATENCY, "", chunks=3)


def test_validation_sizes_offer_no_chunks() -> None:
    """One row of o: the search is what it was (the gate's committed kernel keeps its
    bytes)."""
    kernel, opts = _opts("line", 4, 0, 2)
    opts = LaunchOptions(pes=4, queue_depth=2)
    result = synthesize(build_launch(resolve_kernel(kernel), opts), DEFAULT_PROFILE,
                        Objective.LATENCY, "")
    assert {c.chunks for c in result.candidates} == {1}


def test_reduce_scatter_all_gather_is_predicted_and_proved(tmp_path: Path) -> None:
    """Every state split by rows; chunk c reduced at its own rank and broadcast back (a
    tree per chunk): the prediction is sim.timing's run of the written file, and the
    kernel proves all seven properties (each chunk its own attention problem's rows)."""
    kernel, opts = _opts("line", 4, 0, 2)
    launch = build_launch(resolve_kernel(kernel), opts)
    graph = rank_graph(launch)
    costs = block_costs(SIZES, DEFAULT_PROFILE, launch.spec.system, 2, split=True)
    plans: dict[int, tuple[CheckedPlan, ...]] = {}
    [(cand, _checked, ordered)] = _reduce_scatter([costs], graph, 2, plans)
    assert cand.family == "reduce_scatter" and cand.plan.startswith(
        "reduce-scatter / all-gather at ranks [1, 3]")
    rows, merges = program_rows_split(plans[id(ordered)], ordered)
    info = EmitInfo(cand.plan, cand.rule, DEFAULT_PROFILE.name, SIZES, 2, "pe_line",
                    "--pes 4", cand.latency_s, cand.latency_s, 1)
    path = tmp_path / "rs.py"
    path.write_text(emit_split_kernel(graph, rows, merges, info, 2))
    assert measure(path, opts, DEFAULT_PROFILE) == cand.latency_s
    ref = resolve_kernel_file(f"{path}::{KERNEL_NAME}")
    verdict = verify(trace(ref, build_launch(ref, opts)), VerifyConfig())
    assert [p.name.value for p in verdict.properties if p.status is not Status.PROVED] == []


def test_the_bytes_objective_ranks_the_chunked_candidates_by_their_busiest_link() -> None:
    """At the headline sizes on the 8-ring the halves plan carries two states over some
    links; under --objective bytes the chunked and split candidates are ranked with the
    rest by the largest bytes on a link, then latency, and one state per link wins."""
    launch = build_launch(resolve_kernel("ring_mlo"), LaunchOptions(
        pes=8, wiring="pe_ring", args=(("h_q", 64), ("h_kv", 8), ("d_head", 128))))
    result = synthesize(launch, DEFAULT_PROFILE, Objective.BYTES, "")
    assert {c.chunks for c in result.candidates} >= {1, 2, 4}
    assert result.candidates == tuple(sorted(
        result.candidates, key=lambda c: (c.max_link_bytes, c.latency_s, c.steps, c.plan,
                                          c.rule)))
    halves = min(c.max_link_bytes for c in result.candidates if c.family == "halves")
    assert result.chosen.max_link_bytes < halves
