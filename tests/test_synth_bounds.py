"""synth/bounds.py, bounds_ranks.py: the lower bound of spec/synthesis.md §3 is at most the
latency of every schedule of the class, not only of the plans the families build: random
plans (any transfers and disjoint merges until every rank holds every partial) on small
lines, rings and meshes, list-scheduled under random profiles, never beat it; and on the
8-ring the all-ranks bound lifts the gap under the issue's 1.2."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from meshproof.kernels import resolve_kernel
from meshproof.model.hardware import DEFAULT_PROFILE, HardwareProfile, LinkCost
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.topology import Direction, System, parse_system
from meshproof.synth.api import Objective, synthesize
from meshproof.synth.bounds import lower_bound
from meshproof.synth.costs import SIZE_NAMES, block_costs
from meshproof.synth.families import candidate_plans
from meshproof.synth.graph import Edge, RankGraph, rank_graph
from meshproof.synth.order import Rule, schedule_plan
from meshproof.synth.plan import Family, Plan, PlanBuilder, check_plan


def random_plan(graph: RankGraph, rng: random.Random) -> Plan:
    """Random transfers of states a neighbour lacks and random merges of disjoint states
    (8n steps), then rank 0 gathers every partial it lacks and broadcasts its whole state
    to ranks that lack one; each rank outputs one of its whole states."""
    n = graph.n
    b = PlanBuilder(n)
    held: list[list[tuple[int, frozenset[int]]]] = [[(r, frozenset({r}))] for r in range(n)]
    everyone = frozenset(range(n))

    def move(state: tuple[int, frozenset[int]], path: list[int]) -> tuple[int, frozenset[int]]:
        for dst in path[1:]:
            state = (b.transfer(state[0], dst), state[1])
            held[dst].append(state)
        return state

    for _ in range(8 * n):
        r = rng.randrange(n)
        pairs = [(a, c) for a in held[r] for c in held[r] if a[0] < c[0] and not a[1] & c[1]
                 and not any(s == a[1] | c[1] for _, s in held[r])]
        if pairs and rng.random() < 0.5:
            a, c = rng.choice(pairs)
            held[r].append((b.merge(a[0], c[0]), a[1] | c[1]))
            continue
        e = rng.choice(graph.out_edges(r))
        moves = [a for a in held[r] if not any(a[1] <= s for _, s in held[e.dst])]
        if moves:
            move(rng.choice(moves), [r, e.dst])
    if not any(s == everyone for _, s in held[0]):
        acc = max(held[0], key=lambda a: (len(a[1]), -a[0]))
        for u in range(n):
            if u not in acc[1]:
                got = move((u, frozenset({u})), _path(graph, u, 0))
                acc = (b.merge(acc[0], got[0]), acc[1] | got[1])
                held[0].append(acc)
    whole = next(a for a in held[0] if a[1] == everyone)
    for r in range(1, n):
        if not any(s == everyone for _, s in held[r]):
            move(whole, _path(graph, 0, r))
    for r in range(n):
        b.output(rng.choice([i for i, s in held[r] if s == everyone]))
    return b.build("random", Family.TREE)


def _path(graph: RankGraph, src: int, dst: int) -> list[int]:
    """A shortest path from src to dst."""
    dist = graph.distances(dst)
    path = [src]
    while path[-1] != dst:
        path.append(min(e.dst for e in graph.out_edges(path[-1])
                        if dist[e.dst] == dist[path[-1]] - 1))
    return path


def ring(n: int) -> RankGraph:
    """A closed ring of n PEs (pe_ring closes only at 8): the 8-ring's first n endpoints,
    rank i's E port to i+1 and W port to i-1 (mod n), intra-cube links."""
    eight = rank_graph(build_launch(resolve_kernel("ring_mlo"),
                                    LaunchOptions(pes=8, wiring="pe_ring")))
    adjacency = tuple((Edge(i, Direction.E, (i + 1) % n, "intra_cube"),
                       Edge(i, Direction.W, (i - 1) % n, "intra_cube")) for i in range(n))
    return RankGraph(eight.endpoints[:n], tuple(e for out in adjacency for e in out), 0,
                     None, adjacency)


def graph_of(kind: str, n: int) -> tuple[RankGraph, System]:
    if kind == "ring":
        return ring(n), parse_system("1x1x1", 8)
    if kind == "line":
        launch = build_launch(resolve_kernel("mesh_mlo_1d"), LaunchOptions(pes=n))
    else:
        launch = build_launch(resolve_kernel("mesh_mlo_2d"), LaunchOptions(
            system=parse_system("1x4x4", 8), wiring="cube_mesh", mesh=f"2x{(n + 1) // 2}"))
    return rank_graph(launch), launch.spec.system


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(["line", "mesh", "ring"]), st.integers(3, 8),
       st.integers(0, 2**32 - 1), st.integers(1, 4),
       st.tuples(st.sampled_from([1e-9, 5e-9, 5e-8]), st.sampled_from([1e-8, 1e-7, 2e-6]),
                 st.sampled_from([1e9, 1e11]), st.sampled_from([1e-7, 5e-7, 2e-6])),
       st.sampled_from([(1, 16, 1, 1, 8), (1, 8, 8, 1, 64)]))
def test_the_bound_is_at_most_any_plans_schedule(
        kind: str, n: int, seed: int, depth: int,
        profile: tuple[float, float, float, float],
        sizes: tuple[int, int, int, int, int]) -> None:
    """Random plans and every family's plans, on lines, 2xC meshes and closed rings of 3 to
    8 ranks, under random profiles and queue depths: the bound is below each schedule."""
    overhead, intra_l, intra_b, inter_l = profile
    hw = HardwareProfile(op_overhead_s=overhead, intra_cube=LinkCost(intra_l, intra_b),
                         inter_cube=LinkCost(inter_l, 5e10))
    graph, system = graph_of(kind, n)
    costs = block_costs(tuple(zip(SIZE_NAMES, sizes, strict=True)), hw, system)
    bound = lower_bound(graph, costs).latency_s
    rng = random.Random(seed)
    plans = [random_plan(graph, rng) for _ in range(4)] + list(candidate_plans(graph))
    for plan in plans:
        checked = check_plan(plan, graph)
        for rule in Rule:
            latency = schedule_plan(checked, graph, costs, depth, rule).latency_s
            assert bound <= latency, (kind, n, plan.name, bound, latency)


def test_on_the_8_ring_the_all_ranks_bound_meets_the_issues_gap() -> None:
    """Every rank of the ring is an output rank: either one receives its output made
    elsewhere (a hop after the earliest whole state) or each makes its own, and then some
    rank runs two merges; 4.455 us against the per-rank bounds' 4.255, gap 1.19."""
    ring = synthesize(build_launch(resolve_kernel("ring_mlo"),
                                   LaunchOptions(pes=8, wiring="pe_ring")),
                      DEFAULT_PROFILE, Objective.LATENCY, "")
    assert ring.bound.chain == "all ranks"
    assert round(ring.bound.latency_s * 1e6, 3) == 4.455
    assert ring.gap <= 1.2
