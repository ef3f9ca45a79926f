"""Plan families the search ranges over (design note synthesis §4, §5).

- line segments: a line reduces towards a 1-2 rank meeting segment, which exchanges, then
  broadcasts back;
- 2D segments, nested (rows then columns, or the transpose): every row all-reduces into its
  meeting columns, those columns all-reduce the whole rows, the rows broadcast back;
- 2D segments as one tree (rows first or columns first): each rank's state travels along
  its row to the meeting columns, then along its column to the meeting rows; the meeting
  block exchanges (E/W, then N/S), then the result is broadcast back down the same tree;
- tree: the same reduce-exchange-broadcast over a breadth-first spanning tree of any
  wiring, rooted at a rank or a link (a wafer with a dead link);
- halves (halves.py): two parts reduce to segments of their own, each part's state reaches
  every rank, every rank merges the two;
- fan-out: the hand-written kernels' plan (each rank forwards what it received and merges
  every partial), left for the list scheduler to re-order; on a line, a mesh or a ring
  (two arcs).
A family that needs a link the wiring lacks yields no plan; `check_plan` re-checks all.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence

from meshproof.model.topology import Direction
from meshproof.synth.graph import RankGraph
from meshproof.synth.halves import halves_plans
from meshproof.synth.plan import Family, Plan, PlanBuilder

Parent = list[int | None]
Pair = tuple[int, int]
# past this many ranks on an axis only the central meeting segments are searched: the best
# segments are the central 1-2 ranks (design note synthesis §7)
FULL_SEARCH_AXIS = 4
# past this many, only the central one or two (a list schedule at 64x64 is ~100k ops)
CENTRAL_AXIS = 8
# the fan-out sends every partial to every rank: O(n·(rows+cols)) transfers
FANOUT_MAX_RANKS = 64
# breadth-first trees are tried on wirings no structured family fits (a dead link), and
# alongside them up to this many ranks
TREE_ALONGSIDE_RANKS = 16
TREE_MAX_RANKS = 256


def candidate_plans(graph: RankGraph) -> Iterator[Plan]:
    """Every plan of every family that fits the graph, in a deterministic order."""
    line = _is_line(graph)
    mesh = graph.mesh is not None and _is_mesh(graph)
    if line:
        yield from _line_segments(graph)
        if graph.n <= FANOUT_MAX_RANKS:
            yield from _fanouts(graph, [list(range(graph.n))], "fanout line")
    if mesh and graph.mesh is not None:
        yield from _mesh_segments(graph)
        if graph.n <= FANOUT_MAX_RANKS:
            yield _fanout_2d(graph, *graph.mesh)
    if graph.n > 2 and _links(graph, [(i, (i + 1) % graph.n) for i in range(graph.n)]):
        yield _ring_fanout(graph)
    if not (line or mesh) or graph.n <= TREE_ALONGSIDE_RANKS:
        yield from _trees(graph)
    yield from halves_plans(graph)


def _links(graph: RankGraph, pairs: Sequence[Pair]) -> bool:
    return all(graph.port(a, b) is not None for a, b in pairs)


def _is_line(graph: RankGraph) -> bool:
    return graph.mesh is None and _links(graph, [(i, i + 1) for i in range(graph.n - 1)])


def _is_mesh(graph: RankGraph) -> bool:
    assert graph.mesh is not None
    rows, cols = graph.mesh
    pairs = [(r * cols + c, r * cols + c + 1) for r in range(rows) for c in range(cols - 1)]
    pairs += [(r * cols + c, (r + 1) * cols + c) for r in range(rows - 1) for c in range(cols)]
    return _links(graph, pairs)


def _segments(count: int) -> list[tuple[int, int]]:
    """Meeting segments [a, b] (one or two ranks) along an axis of `count` ranks."""
    mid = (count - 1) // 2
    if count <= FULL_SEARCH_AXIS:
        starts = range(count)
    elif count <= CENTRAL_AXIS:
        starts = range(max(0, mid - 1), min(count, mid + 2))
    else:   # the centre: two ranks on an even axis, one on an odd one
        return [(mid, mid + 1)] if count % 2 == 0 else [(mid, mid)]
    out = [(a, a) for a in starts] + [(a, a + 1) for a in starts if a + 1 < count]
    return sorted(set(out))


def tree_plan(graph: RankGraph, name: str, family: Family, parent: Parent,
              rounds: Sequence[Sequence[Pair]]) -> Plan:
    """Reduce up the tree `parent` (roots: None), exchange among the roots in `rounds`
    (each pair swaps its states and merges), then broadcast the result down the tree."""
    n = graph.n
    children: list[list[int]] = [[] for _ in range(n)]
    for v, p in enumerate(parent):
        if p is not None:
            children[p].append(v)
    height = [0] * n
    order = _bottom_up(parent, children)
    for v in order:
        height[v] = 1 + max((height[c] for c in children[v]), default=-1)
    b = PlanBuilder(n)
    acc = list(range(n))
    for v in order:
        # nearest subtrees first: their states arrive first, so merge message by message
        for c in sorted(children[v], key=lambda c: (height[c], c)):
            acc[v] = b.merge(acc[v], b.transfer(acc[c], v))
    for pairs in rounds:
        moved = [(x, y, b.transfer(acc[x], y), b.transfer(acc[y], x)) for x, y in pairs]
        for x, y, to_y, to_x in moved:
            acc[x] = b.merge(acc[x], to_x)
            acc[y] = b.merge(acc[y], to_y)
    full = list(acc)
    for v in reversed(order):
        # the deepest subtree first: its chain is the longest
        for c in sorted(children[v], key=lambda c: (-height[c], c)):
            full[c] = b.transfer(full[v], c)
    for v in range(n):
        b.output(full[v])
    return b.build(name, family)


def _bottom_up(parent: Parent, children: list[list[int]]) -> list[int]:
    """Ranks with every child before its parent (reverse breadth-first from the roots)."""
    todo = deque(v for v, p in enumerate(parent) if p is None)
    seen: list[int] = []
    while todo:
        v = todo.popleft()
        seen.append(v)
        todo.extend(sorted(children[v]))
    return list(reversed(seen))


def _line_segments(graph: RankGraph) -> Iterator[Plan]:
    n = graph.n
    for a, b in _segments(n):
        parent: Parent = [i + 1 if i < a else i - 1 if i > b else None for i in range(n)]
        rounds = [[(a, b)]] if b > a else []
        yield tree_plan(graph, f"segment [{a},{b}]", Family.LINE_SEGMENT, parent, rounds)


def _mesh_segments(graph: RankGraph) -> Iterator[Plan]:
    assert graph.mesh is not None
    rows, cols = graph.mesh
    large = graph.n > CENTRAL_AXIS ** 2 * 4
    for r1, r2 in _segments(rows):
        for c1, c2 in _segments(cols):
            yield _nested(graph, (r1, r2), (c1, c2), rows_first=True)
            if large:
                # one list schedule of ~n·25 ops per plan; and rows first keeps every
                # merged state a run of whole rows, contiguous launch-local ranks (and key
                # rows), which keeps the semantic analysis's forms small
                continue
            yield _nested(graph, (r1, r2), (c1, c2), rows_first=False)
            for family in (Family.ROWS_FIRST, Family.COLUMNS_FIRST):
                yield _mesh_tree(graph, (r1, r2), (c1, c2), family)


def _mesh_tree(graph: RankGraph, rseg: tuple[int, int], cseg: tuple[int, int],
               family: Family) -> Plan:
    """One tree into the meeting block: along rows then columns (or the other way)."""
    assert graph.mesh is not None
    rows, cols = graph.mesh
    (r1, r2), (c1, c2) = rseg, cseg
    parent: Parent = []
    for r in range(rows):
        for c in range(cols):
            along_row = c + 1 if c < c1 else c - 1 if c > c2 else None
            along_col = r + 1 if r < r1 else r - 1 if r > r2 else None
            if family is Family.ROWS_FIRST:
                parent.append(r * cols + along_row if along_row is not None else
                              along_col * cols + c if along_col is not None else None)
            else:
                parent.append(along_col * cols + c if along_col is not None else
                              r * cols + along_row if along_row is not None else None)
    east_west = [(r * cols + c1, r * cols + c2) for r in range(r1, r2 + 1)] if c2 > c1 else []
    north_south = [(r1 * cols + c, r2 * cols + c) for c in range(c1, c2 + 1)] if r2 > r1 else []
    rounds = [east_west, north_south] if family is Family.ROWS_FIRST else \
        [north_south, east_west]
    label = "rows first" if family is Family.ROWS_FIRST else "columns first"
    return tree_plan(graph, f"{label}, segments [{r1},{r2}]x[{c1},{c2}]", family, parent,
                     [p for p in rounds if p])


def _nested(graph: RankGraph, rseg: tuple[int, int], cseg: tuple[int, int],
            rows_first: bool) -> Plan:
    """Design note §4's 2D segments: every row all-reduces into its meeting columns (they
    exchange, so both hold the whole row), each meeting column all-reduces those rows
    (into its meeting rows, which exchange, then back along the column), then each row's
    meeting ranks broadcast along the row. Columns first is the transpose."""
    assert graph.mesh is not None
    rows, cols = graph.mesh
    outer = [[r * cols + c for c in range(cols)] for r in range(rows)]
    inner_of = [[r * cols + c for r in range(rows)] for c in range(cols)]
    (a1, a2), (b1, b2) = (cseg, rseg) if rows_first else (rseg, cseg)
    if not rows_first:
        outer, inner_of = inner_of, outer
    b = PlanBuilder(graph.n)
    acc = list(range(graph.n))
    for line in outer:
        _reduce_to_segment(b, acc, line, a1, a2)
    for k in range(a1, a2 + 1):
        line = inner_of[k]
        _reduce_to_segment(b, acc, line, b1, b2)
        _broadcast_from_segment(b, acc, line, b1, b2)
    for line in outer:
        _broadcast_from_segment(b, acc, line, a1, a2)
    for v in range(graph.n):
        b.output(acc[v])
    label = "rows then columns" if rows_first else "columns then rows"
    family = Family.ROWS_THEN_COLUMNS if rows_first else Family.COLUMNS_THEN_ROWS
    return b.build(f"{label}, segments [{rseg[0]},{rseg[1]}]x[{cseg[0]},{cseg[1]}]", family)


def _reduce_to_segment(b: PlanBuilder, acc: list[int], line: list[int], s1: int,
                       s2: int) -> None:
    """Prefixes travel up to s1 and suffixes down to s2; the segment ends exchange, so
    acc[line[s1]] and acc[line[s2]] hold the whole line."""
    for i in range(s1):
        acc[line[i + 1]] = b.merge(acc[line[i + 1]], b.transfer(acc[line[i]], line[i + 1]))
    for i in range(len(line) - 1, s2, -1):
        acc[line[i - 1]] = b.merge(acc[line[i - 1]], b.transfer(acc[line[i]], line[i - 1]))
    if s2 > s1:
        x, y = line[s1], line[s2]
        to_y, to_x = b.transfer(acc[x], y), b.transfer(acc[y], x)
        acc[x], acc[y] = b.merge(acc[x], to_x), b.merge(acc[y], to_y)


def _broadcast_from_segment(b: PlanBuilder, acc: list[int], line: list[int], s1: int,
                            s2: int) -> None:
    """The segment ends send the whole line's state outwards, forwarded unchanged."""
    for i in range(s1 - 1, -1, -1):
        acc[line[i]] = b.transfer(acc[line[i + 1]], line[i])
    for i in range(s2 + 1, len(line)):
        acc[line[i]] = b.transfer(acc[line[i - 1]], line[i])


def _trees(graph: RankGraph) -> Iterator[Plan]:
    """Breadth-first trees rooted at the most central ranks and links of any wiring."""
    n = graph.n
    if n > TREE_MAX_RANKS:
        return  # all-pairs breadth-first search would not pay
    dist = [graph.distances(s) for s in range(n)]
    ecc = [max(d) for d in dist]
    nodes = sorted(range(n), key=lambda v: (ecc[v], v))[:2]
    edges = sorted({(min(e.src, e.dst), max(e.src, e.dst)) for e in graph.edges},
                   key=lambda uv: (max(min(dist[uv[0]][w], dist[uv[1]][w]) for w in range(n)),
                                   uv))[:4]
    roots: list[tuple[int, ...]] = [(v,) for v in nodes] + list(edges)
    for root in roots:
        for prefer in ((Direction.E, Direction.W, Direction.N, Direction.S),
                       (Direction.N, Direction.S, Direction.E, Direction.W)):
            parent = bfs_parent(graph, root, prefer)
            rounds = [[(root[0], root[1])]] if len(root) == 2 else []
            label = "rows" if prefer[0] is Direction.E else "columns"
            yield tree_plan(graph, f"tree at {list(root)}, {label} first", Family.TREE,
                            parent, rounds)


def bfs_parent(graph: RankGraph, roots: tuple[int, ...],
               prefer: tuple[Direction, ...] = (Direction.E, Direction.W, Direction.N,
                                                Direction.S)) -> Parent:
    """Multi-source breadth-first tree; a rank's parent is its first neighbour one hop
    nearer the roots, in the direction order `prefer`."""
    n = graph.n
    dist = [-1] * n
    todo = deque(roots)
    for r in roots:
        dist[r] = 0
    while todo:
        u = todo.popleft()
        for e in graph.out_edges(u):
            if dist[e.dst] < 0:
                dist[e.dst] = dist[u] + 1
                todo.append(e.dst)
    parent: Parent = []
    rank = {d: i for i, d in enumerate(prefer)}
    for v in range(n):
        nearer = [e for e in graph.out_edges(v) if dist[e.dst] == dist[v] - 1]
        nearer.sort(key=lambda e: (rank[e.dir], e.dst))
        parent.append(nearer[0].dst if nearer and dist[v] > 0 else None)
    return parent


def _fanouts(graph: RankGraph, lines: list[list[int]], name: str) -> Iterator[Plan]:
    b = PlanBuilder(graph.n)
    acc = list(range(graph.n))
    for line in lines:
        _fanout_line(b, acc, line)
    for v in range(graph.n):
        b.output(acc[v])
    yield b.build(name, Family.FANOUT)


def _fanout_line(b: PlanBuilder, acc: list[int], line: list[int]) -> None:
    """The hand-written fan-out along `line`: every state reaches every rank, forwarded
    unchanged; each rank merges its own with the nearer ones first."""
    k = len(line)
    start = [acc[v] for v in line]
    up: dict[tuple[int, int], int] = {}     # (origin index, at index) -> state
    for j in range(k):
        up[(j, j)] = start[j]
        for i in range(j + 1, k):
            up[(j, i)] = b.transfer(up[(j, i - 1)], line[i])
        for i in range(j - 1, -1, -1):
            up[(j, i)] = b.transfer(up[(j, i + 1)], line[i])
    for i, v in enumerate(line):
        state = start[i]
        for step in range(1, k):
            for j in (i - step, i + step):
                if 0 <= j < k:
                    state = b.merge(state, up[(j, i)])
        acc[v] = state


def _fanout_2d(graph: RankGraph, rows: int, cols: int) -> Plan:
    lines = [[r * cols + c for c in range(cols)] for r in range(rows)]
    b = PlanBuilder(graph.n)
    acc = list(range(graph.n))
    for line in lines:
        _fanout_line(b, acc, line)
    for c in range(cols):
        _fanout_line(b, acc, [r * cols + c for r in range(rows)])
    for v in range(graph.n):
        b.output(acc[v])
    return b.build("fanout rows then columns", Family.FANOUT)


def _ring_fanout(graph: RankGraph) -> Plan:
    """Fan-out over a ring in two arcs: each state travels ⌈(n-1)/2⌉ hops one way and
    ⌊(n-1)/2⌋ the other, so every rank gets every partial once."""
    n = graph.n
    ahead, behind = n // 2, (n - 1) // 2
    b = PlanBuilder(n)
    got: dict[tuple[int, int], int] = {}
    for j in range(n):
        cur = j
        for s in range(1, ahead + 1):
            cur = b.transfer(cur, (j + s) % n)
            got[(j, (j + s) % n)] = cur
        cur = j
        for s in range(1, behind + 1):
            cur = b.transfer(cur, (j - s) % n)
            got[(j, (j - s) % n)] = cur
    for i in range(n):
        state = i
        for s in range(1, ahead + 1):
            for j in ((i - s) % n, (i + s) % n):
                if (j, i) in got and j != i:
                    state = b.merge(state, got.pop((j, i)))
        b.output(state)
    return b.build("ring, two arcs", Family.RING)
