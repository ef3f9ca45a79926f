"""The halves family: split the ranks into two connected parts, reduce each part to a
meeting segment of its own, send each part's state to every rank over a breadth-first
tree of the whole wiring, and let every rank merge the two once.

Against one meeting segment for the whole launch it trades the last reduce hops, each of
which merges on the way, for forwarding: on a ring both arcs carry a half, so the
farthest partial needs fewer merging hops (spec/synthesis.md §2).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence

from meshproof.synth.graph import RankGraph
from meshproof.synth.plan import Family, Plan, PlanBuilder

# each rank receives both halves' states: O(n) transfers per half and a breadth-first
# search per candidate root; at 8x8 the four plans per split cost 3x the search's time and
# the central segments win there (benchmarks/synthesis.py), so only small launches
HALVES_MAX_RANKS = 16

Roots = tuple[int, ...]


def halves_plans(graph: RankGraph) -> Iterator[Plan]:
    """The halves plans of every split that fits the graph, in a fixed order."""
    if not 4 <= graph.n <= HALVES_MAX_RANKS:
        return
    for label, parts in _splits(graph):
        choices = [_roots(graph, part) for part in parts]
        if any(not c for c in choices):
            continue   # a part the wiring does not connect
        for ra in choices[0]:
            for rb in choices[1]:
                yield _halves(graph, parts, (ra, rb),
                              f"halves {label}, segments {list(ra)} and {list(rb)}")


def _splits(graph: RankGraph) -> list[tuple[str, tuple[list[int], list[int]]]]:
    n = graph.n
    if graph.mesh is None:   # launch order: a line or a ring
        return [("of the line", (list(range(n // 2)), list(range(n // 2, n))))]
    rows, cols = graph.mesh
    out = []
    if cols >= 2:
        left = [v for v in range(n) if v % cols < cols // 2]
        out.append(("left/right", (left, [v for v in range(n) if v % cols >= cols // 2])))
    if rows >= 2:
        top = [v for v in range(n) if v // cols < rows // 2]
        out.append(("top/bottom", (top, [v for v in range(n) if v // cols >= rows // 2])))
    return out


def _distances(graph: RankGraph, sources: Sequence[int], allowed: set[int]) -> dict[int, int]:
    dist = {s: 0 for s in sources}
    todo = deque(sources)
    while todo:
        u = todo.popleft()
        for e in graph.out_edges(u):
            if e.dst in allowed and e.dst not in dist:
                dist[e.dst] = dist[u] + 1
                todo.append(e.dst)
    return dist


def _roots(graph: RankGraph, part: list[int]) -> list[Roots]:
    """The part's best single rank and best linked pair: the fewest hops to reach the
    part, then to reach every rank; [] when the part is not connected."""
    inside, everyone = set(part), set(range(graph.n))

    def cost(roots: Roots) -> tuple[int, int, Roots]:
        within = _distances(graph, roots, inside)
        if len(within) < len(part):
            return (graph.n + 1, 0, roots)
        return (max(within.values()), max(_distances(graph, roots, everyone).values()), roots)

    singles = sorted(cost((v,)) for v in part)
    pairs = sorted(cost((e.src, e.dst)) for v in part for e in graph.out_edges(v)
                   if e.dst in inside and e.src < e.dst)
    return [c[2] for c in (singles[:1] + pairs[:1]) if c[0] <= graph.n]


def _parents(graph: RankGraph, roots: Roots, allowed: set[int]) -> dict[int, int]:
    """Breadth-first parents from `roots` inside `allowed` (the nearer neighbour with the
    smallest rank)."""
    dist = _distances(graph, roots, allowed)
    parent: dict[int, int] = {}
    for v, d in dist.items():
        if d > 0:
            parent[v] = min(e.dst for e in graph.out_edges(v) if dist.get(e.dst) == d - 1)
    return parent


def _halves(graph: RankGraph, parts: tuple[list[int], list[int]],
            roots: tuple[Roots, Roots], name: str) -> Plan:
    n = graph.n
    b = PlanBuilder(n)
    acc = list(range(n))
    everyone = set(range(n))
    held: list[dict[int, int]] = []
    for part, root in zip(parts, roots, strict=True):
        parent = _parents(graph, root, set(part))
        depth = _distances(graph, root, set(part))
        # deepest ranks first: every child is merged into its parent before the parent
        # sends on, nearest subtrees first (their states arrive first)
        for v in sorted(parent, key=lambda v: (-depth[v], v)):
            acc[parent[v]] = b.merge(acc[parent[v]], b.transfer(acc[v], parent[v]))
        if len(root) == 2:
            x, y = root
            to_y, to_x = b.transfer(acc[x], y), b.transfer(acc[y], x)
            acc[x], acc[y] = b.merge(acc[x], to_x), b.merge(acc[y], to_y)
        spread = _parents(graph, root, everyone)
        reach = _distances(graph, root, everyone)
        state = {r: acc[r] for r in root}
        for v in sorted(spread, key=lambda v: (reach[v], v)):
            state[v] = b.transfer(state[spread[v]], v)
        held.append(state)
    for v in range(n):
        b.output(b.merge(held[0][v], held[1][v]))
    return b.build(name, Family.HALVES)
