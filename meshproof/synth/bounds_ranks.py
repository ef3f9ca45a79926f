"""The merge-level lower bounds of spec/synthesis.md §3 (bounds 4 and 5) for small
launches: they follow the farthest partial through the merges, and bound 5 argues over all
ranks at once (every rank is an output rank), which the bounds per output rank do not see.

Times are lower bounds on when something can exist on a rank. `first(q, u)` is the
earliest arrival at q of a message that depends on u's partial; `hz` a whole hop of the
smallest message (send, link latency, recv); `msgs` the messages of one state (m, ℓ, o, or
m, ℓ and K chunks of o); `merge` attention_parts.merge's ops; `two` the cheapest pair of a
merge's ops from an input's ℓ (or o chunk) to the output's.
"""

from __future__ import annotations

from meshproof.synth.costs import BlockCosts
from meshproof.synth.graph import RankGraph


class MergeBounds:
    """One variant's costs on one rank graph, and the bounds built from them."""

    def __init__(self, graph: RankGraph, costs: BlockCosts, v: BlockCosts,
                 classes: list[str]) -> None:
        self.n = graph.n
        self.dist = [graph.distances(u) for u in range(self.n)]
        self.partial = BlockCosts.total(costs.partial)
        self.recv = costs.recv
        small = min(v.message_bytes)
        self.h = min(v.send + small / costs.link(c).bandwidth_Bps + costs.link(c).latency_s
                     for c in classes)
        self.hz = self.h + self.recv             # a whole hop of the smallest message
        self.msgs = len(v.message_bytes)
        self.mr = self.msgs * self.recv          # the recvs of one state
        self.merge = sum(v.merge)
        self.stores = sum(BlockCosts.total(s) for s in v.stores)
        fastest = max(costs.link(c).bandwidth_Bps for c in classes)
        self.sends = sum(v.send + b / fastest for b in v.message_bytes)   # one state out
        chunk_pairs = [min(v.merge[8 + 3 * c], v.merge[9 + 3 * c]) + v.merge[10 + 3 * c]
                       for c in range(1 if v.split else v.chunks)]
        self.two = min(min(v.merge[5], v.merge[6]) + v.merge[7], *chunk_pairs)

    def at(self, k: int) -> float:
        """The earliest arrival of a message depending on a partial k >= 1 hops away."""
        return self.partial + k * self.h + (k - 1) * self.recv

    def first(self, q: int, u: int) -> float:
        k = self.dist[u][q]
        return self.partial if k == 0 else self.at(k)

    def farthest(self, r: int) -> list[int]:
        far = max(self.dist[r])
        return [u for u in range(self.n) if self.dist[r][u] == far]

    def earlier(self, s: int, r: int) -> float:
        """s's partial merged first by a merge M1 on q1 before the last merge: M1's recvs
        of s's state and its ops after s's message arrives, the later of its ℓ and o over
        d(q1, r) hops, then two ops of the last merge (on r)."""
        return min((self.first(q1, s) + self.mr if q1 != s else
                    self.partial + self.h + self.mr) + self.merge + self.dist[q1][r] * self.hz
                   for q1 in range(self.n)) + self.two

    def once(self, s: int, q: int) -> float:
        """The last merge, on q, merges s's partial unmerged with X covering every other
        rank, made by a merge on p: when the merged state can be whole on q."""
        s_in = self.first(q, s) + (self.mr if q != s else 0.0)
        best = float("inf")
        for p in range(self.n):
            others = [self.first(p, u) for u in range(self.n) if u not in (s, p)]
            if not others:
                continue
            x_at = max(others)
            if p == q:
                start = min(x_at, self.first(q, s))
                own = self.mr + (self.mr if q != s else 0.0)
                t = start + own + 2 * self.merge
            else:
                z_x = x_at + self.mr + self.merge + self.dist[p][q] * self.hz + self.two
                t = max(z_x, s_in + self.merge)
            best = min(best, t)
        return best

    def whole(self, q: int) -> float:
        """When a state covering every rank, made by a merge on q, can be whole there."""
        return max(min(self.earlier(s, q), self.once(s, q)) for s in self.farthest(q))

    def made(self, y: int, shards: set[int]) -> float:
        """When a state covering `shards` made by a merge on y can be whole: after the
        farthest member's message arrives, that state's recvs and the merge's ops (a merge
        has two inputs, so some member is not y)."""
        return max((self.first(y, u) for u in shards if u != y), default=self.at(1)) + \
            self.mr + self.merge


def two_merges(b: MergeBounds) -> float:
    """Bound 4: for every output rank r and a farthest s, the farthest partial is merged
    before the last merge or only by it (on some q, then carried to r)."""
    best = 0.0
    for r in range(b.n):
        for s in b.farthest(r):
            once = min(b.once(s, q) + b.dist[q][r] * b.hz for q in range(b.n))
            best = max(best, min(b.earlier(s, r), once) + b.stores)
    return best


def all_ranks(b: MergeBounds) -> float:
    """Bound 5 (spec/synthesis.md §3): either some rank's output is made elsewhere and
    carried to it, or every rank makes its own output with a last merge M_r; then for each
    r the input of M_r holding r's farthest partial is that partial unmerged, or made on r
    by a second merge, or made by a merge M1 on another rank x, which then runs two merges
    of its own (M1 and M_x)."""
    received = min(b.whole(q) for q in range(b.n)) + b.hz + b.stores
    two = [max(_two_on(b, x, s) for s in b.farthest(x)) for x in range(b.n)]
    own = 0.0
    for r in range(b.n):
        others = min(two[x] for x in range(b.n) if x != r)
        own = max(own, max(min(b.once(s, r) + b.stores, _second_late(b, r, s), others)
                           for s in b.farthest(r)))
    return min(received, own)


def _second_late(b: MergeBounds, x: int, s: int) -> float:
    """x runs two merges whose results hold s's partial (or one holding it and M_x): both,
    and the recvs of a state holding s, after s's first message arrives."""
    return b.first(x, s) + b.mr + 2 * b.merge + b.stores


def _two_on(b: MergeBounds, x: int, s: int) -> float:
    """A rank x that makes its own output by M_x = merge(A, B), s in B, and runs another
    merge M1 whose result leaves x."""
    # M1 holding s, or B made on x: both merges after s's partial arrives
    late = _second_late(b, x, s)
    # B is s's partial unmerged: the once bound for x's output
    raw = b.once(s, x) + b.stores
    # B received; M1's inputs C, D hold no s. Every op counted here waits for a message
    # (recvs; a merge has an input that was received; M1's result leaves after its first
    # op): M_x, M1, B's recvs and the sends of M1's result, and a received C; anything
    # more (C or another input made by a merge, or one more received state) costs at
    # least min(recvs, merge) twice
    base = 2 * b.merge + b.mr + b.sends
    extra = b.at(1) + base + 2 * min(b.mr, b.merge) + b.stores
    # just those: C received, D = x's partial, A in {x's partial, C, M1's result}, so B
    # holds every rank farther from x than C's farthest (rho hops); B made on some y != x
    # reaches x, and two ops of M_x follow
    tight = float("inf")
    for rho in range(1, max(b.dist[x]) + 1):
        work = b.at(rho) + base + b.mr + b.stores
        shards = {u for u in range(b.n) if b.dist[x][u] > rho} | {s}
        carried = min(b.made(y, shards) + b.dist[y][x] * b.hz for y in range(b.n)
                      if y != x) + b.two + b.stores
        tight = min(tight, max(work, carried))
    return min(late, raw, extra, tight)
