"""synth/plan.py and synth/families.py: the plan-level exactly-once check refuses plans
that cannot prove (a double merge, a missing partial, a dead link) and accepts every plan
the families build."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshproof.errors import PlanError
from meshproof.kernels import resolve_kernel
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.topology import parse_system
from meshproof.synth.families import candidate_plans, tree_plan
from meshproof.synth.graph import RankGraph, rank_graph
from meshproof.synth.plan import Family, PlanBuilder, check_plan


def _line(pes: int) -> RankGraph:
    launch = build_launch(resolve_kernel("mesh_mlo_1d"), LaunchOptions(pes=pes))
    return rank_graph(launch)


def _mesh(rows: int, cols: int) -> RankGraph:
    launch = build_launch(resolve_kernel("mesh_mlo_2d"), LaunchOptions(
        system=parse_system(f"1x{rows}x{cols}", 8), wiring="cube_mesh", mesh=f"{rows}x{cols}"))
    return rank_graph(launch)


def test_a_plan_that_merges_a_partial_twice_is_refused_at_its_row() -> None:
    # a realistic mistake: rank 1 forwards its running state (which holds rank 0's partial)
    # back to rank 0, which merges it into a state that already has rank 0's partial
    b = PlanBuilder(2)
    at1 = b.merge(1, b.transfer(0, 1))          # rank 1: {0, 1}
    back = b.transfer(at1, 0)
    at0 = b.merge(0, back)                       # rank 0: {0} + {0, 1}
    b.output(at0)
    b.output(at1)
    plan = b.build("forwards its running state", Family.LINE_SEGMENT)
    with pytest.raises(PlanError, match=r"row 3 \(merge on rank 0 of states 0 and 4\): the "
                       r"partial\(s\) of rank\(s\) 0 would be merged twice"):
        check_plan(plan, _line(2))


def test_a_plan_whose_output_misses_a_partial_is_refused() -> None:
    b = PlanBuilder(3)
    s1 = b.merge(1, b.transfer(0, 1))            # rank 1 never hears of rank 2
    b.output(b.transfer(s1, 0))
    b.output(s1)
    b.output(2)
    with pytest.raises(PlanError, match=r"row 3 \(output of rank 0 \(state 5\)\): the output "
                       r"misses the partial\(s\) of rank\(s\) 2"):
        check_plan(b.build("short", Family.LINE_SEGMENT), _line(3))


def test_a_transfer_over_a_link_the_wiring_lacks_is_refused() -> None:
    b = PlanBuilder(3)
    b.transfer(0, 2)                             # ranks 0 and 2 are not neighbours
    with pytest.raises(PlanError, match="the wiring has no link from rank 0 to rank 2"):
        check_plan(b.build("jump", Family.LINE_SEGMENT), _line(3))


def test_a_reduce_exchange_broadcast_tree_is_accepted() -> None:
    graph = _line(8)
    parent: list[int | None] = [1, 2, 3, None, None, 4, 5, 6]
    checked = check_plan(tree_plan(graph, "segment [3,4]", Family.LINE_SEGMENT, parent,
                                   [[(3, 4)]]), graph)
    assert checked.depth == 7
    outputs = [row.args[0] for row in checked.plan.rows if row.kind.value == "output"]
    assert all(checked.shards[s] == frozenset(range(8)) for s in outputs)


@settings(max_examples=12, deadline=None)
@given(st.one_of(st.builds(lambda n: ("line", n, 0), st.integers(2, 8)),
                 st.builds(lambda r, c: ("mesh", r, c), st.integers(1, 4), st.integers(2, 4))))
def test_every_plan_the_families_build_passes_the_check(shape: tuple[str, int, int]) -> None:
    kind, a, b = shape
    graph = _line(a) if kind == "line" else _mesh(a, b)
    plans = list(candidate_plans(graph))
    assert plans
    for plan in plans:
        check_plan(plan, graph)
