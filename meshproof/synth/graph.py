"""The rank graph a launch gives the synthesiser: launch-local ranks and the wiring's links
between them, each with its link class (spec/timing.md §2)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from meshproof.errors import SynthesisError
from meshproof.model.launch import Launch
from meshproof.model.topology import Direction, Endpoint
from meshproof.sim.timing import link_class


@dataclass(frozen=True, slots=True)
class Edge:
    """rank `src`'s port `dir` reaches rank `dst` over a link of class `cls`."""

    src: int
    dir: Direction
    dst: int
    cls: str


@dataclass(frozen=True, slots=True)
class RankGraph:
    """Launch-local ranks (row-major for a sub-mesh) and the links between them."""

    endpoints: tuple[Endpoint, ...]
    edges: tuple[Edge, ...]
    rank_axis: int                       # 1: PE 0 of each launched cube; 0: the PEs of one cube
    mesh: tuple[int, int] | None         # (rows, cols) when the launch is a sub-mesh
    adjacency: tuple[tuple[Edge, ...], ...]   # per rank, its out-edges (from `edges`)

    @property
    def n(self) -> int:
        return len(self.endpoints)

    def port(self, src: int, dst: int) -> Direction | None:
        """The direction from `src` to its neighbour `dst`, or None if they are not linked."""
        for e in self.out_edges(src):
            if e.dst == dst:
                return e.dir
        return None

    def out_edges(self, src: int) -> tuple[Edge, ...]:
        return self.adjacency[src]

    def link_class(self, src: int, d: Direction) -> str:
        for e in self.out_edges(src):
            if e.dir is d:
                return e.cls
        raise SynthesisError(f"rank {src} has no {d.value} link to another launched rank")

    def distances(self, source: int) -> list[int]:
        """Hop counts from `source` (-1: unreachable)."""
        dist = [-1] * self.n
        dist[source] = 0
        todo = deque([source])
        while todo:
            u = todo.popleft()
            for e in self.out_edges(u):
                if dist[e.dst] < 0:
                    dist[e.dst] = dist[u] + 1
                    todo.append(e.dst)
        return dist


def rank_graph(launch: Launch) -> RankGraph:
    """The ranks a decode merge runs on: PE 0 of each launched cube when the launch takes
    several cubes (the built-ins' rank_axis=1), else the launched PEs of its one cube."""
    spec = launch.spec
    if spec.n_cubes > 1:
        eps = tuple(Endpoint(spec.cube_start + i, 0) for i in range(spec.n_cubes))
        axis = 1
    else:
        eps = tuple(Endpoint(spec.cube_start, p) for p in range(spec.pes))
        axis = 0
    where = {ep: i for i, ep in enumerate(eps)}
    system = spec.system
    edges: list[Edge] = []
    for link in launch.wiring.links:
        if link.src in where and link.dst in where:
            cls = link_class(system, link.src, link.dst)
            assert cls is not None
            edges.append(Edge(where[link.src], link.dir, where[link.dst], cls))
    edges.sort(key=lambda e: (e.src, e.dir.value))
    rows_cols = _mesh(launch)
    per: list[list[Edge]] = [[] for _ in eps]
    for e in edges:
        per[e.src].append(e)
    graph = RankGraph(eps, tuple(edges), axis, rows_cols, tuple(tuple(p) for p in per))
    unreachable = [i for i, d in enumerate(graph.distances(0)) if d < 0]
    if unreachable:
        names = ", ".join(eps[i].describe() for i in unreachable[:6])
        raise SynthesisError(f"the wiring {launch.wiring.name} does not connect the launched "
                             f"ranks: {names} cannot be reached from {eps[0].describe()}; "
                             "launch ranks the wiring joins (or add the missing links)")
    return graph


def _mesh(launch: Launch) -> tuple[int, int] | None:
    args = dict(launch.call_args)
    rows, cols = args.get("mesh_rows"), args.get("mesh_cols")
    if isinstance(rows, int) and isinstance(cols, int) and rows * cols == launch.spec.n_cubes \
            and launch.spec.n_cubes > 1:
        return rows, cols
    return None
