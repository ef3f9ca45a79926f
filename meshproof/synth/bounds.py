"""Lower bounds for the class of schedules searched (design note synthesis §3,
spec/synthesis.md §3).

The class: every rank computes its partial first (P), states move only as f32 m, ℓ, o
messages over links, merges are attention_parts.merge's 11 ops and the store ends the
kernel (F); a rank runs its ops one after another. Take ranks r, s at distance D (a
diameter). r's output depends on m_s and on o_s, each crossing >= D links (a send, the
link's latency, a recv per crossing), and somewhere on the way m_s enters a merge:
maximum, sub, exp, then the multiply into o and the add follow in sequence; o_s is
multiplied and added. Ops on a dependency chain run one after another, so

    T >= P + D·(send(m) + L + recv) + max + sub + exp + mul(o) + add(o) + F    (m-chain)
    T >= P + D·(send(o) + L + recv) + mul(o) + add(o) + F                      (o-chain)

The merge bound (spec/synthesis.md §3) adds what the serial output rank must still do
once s's first message is there: every rank's output is made by a last merge M of two
states covering V, on some rank q. If q is the output rank r, r receives an m, an ℓ and
an o message carrying s's partial (three recvs) after the first of them arrives, and all
11 ops of M depend on that m, so

    T >= P + D·(send(m) + L) + (D-1)·recv + 3·recv + merge(11 ops) + F          (merge)

and a q other than r only adds (its sends of ℓ and o and the hops on to r cost at least
the hop that the triangle inequality saves). The two-merge bound (small launches) follows
the farthest partial further: merged before the last merge, that merge's ℓ or o still
passes two ops of the last one; merged only by it, the other input (every other rank) is
a merge of its own. The all-ranks bound (small launches) uses that every rank is an output
rank: one receiving its output waits a hop after the earliest whole state, and if each
makes its own, the rank that merged some rank's farthest partial on the way runs two
merges (bounds_ranks.py). comm_steps >= D, because information crosses one link per
message. Every bound takes the cheapest link class of the launch.

With chunked variants in the class (o in K row chunks, spec/synthesis.md §3), each bound is
the smallest over the variants: a chunk's mul and add are cheaper, the o-chain becomes s's
K chunk sends one after another and then the last chunk's D hops, and the stores are K
blocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from meshproof.synth.bounds_ranks import MergeBounds, all_ranks, two_merges
from meshproof.synth.costs import BlockCosts
from meshproof.synth.graph import RankGraph

# positions in attention_parts.merge's 11 ops
_M_TAIL = (0, 1, 2, 8, 10)       # maximum, sub, exp, mul into o, add into o
# all-pairs breadth-first search up to here; beyond, the longest distance two sweeps find
EXACT_DIAMETER_RANKS = 1024
# relative: far above the rounding of summing a few dozen costs in double precision
ROUNDING_SLACK = 1e-12
# the two-merge and all-ranks refinements (spec/synthesis.md §3, bounds 4 and 5) try every
# rank as a merge's place: O(n^2) per output rank; past this many ranks they are skipped
# (the others hold)
TWO_MERGE_RANKS = 16


@dataclass(frozen=True, slots=True)
class LowerBound:
    latency_s: float
    steps: int          # the diameter D (exact up to EXACT_DIAMETER_RANKS; else a distance
                        # two sweeps found, still a lower bound)
    chain: str          # "m", "o", "merge", "two merges" or "all ranks": which bound gives it

    def to_json(self) -> dict[str, object]:
        return {"latency_s": self.latency_s, "steps": self.steps, "chain": self.chain}


def diameter(graph: RankGraph) -> int:
    if graph.n <= EXACT_DIAMETER_RANKS:
        return max(max(graph.distances(s)) for s in range(graph.n))
    first = graph.distances(0)
    far = max(range(graph.n), key=lambda v: (first[v], -v))
    return max(graph.distances(far))


def lower_bound(graph: RankGraph, costs: BlockCosts,
                variants: Sequence[BlockCosts] = ()) -> LowerBound:
    """The bound for the class of `costs` (unchunked) and of each chunked variant."""
    d = diameter(graph)
    every = (costs, *variants)
    partial = BlockCosts.total(costs.partial)
    if d == 0:
        store = min(sum(BlockCosts.total(s) for s in v.stores) for v in every)
        return LowerBound((partial + store) * (1.0 - ROUNDING_SLACK), 0, "m")
    classes = sorted({e.cls for e in graph.edges})

    def hop(nbytes: int, c: str) -> float:
        return costs.send + nbytes / costs.link(c).bandwidth_Bps + costs.link(c).latency_s \
            + costs.recv

    def chains(v: BlockCosts) -> tuple[float, float, float]:
        # every store follows every other op of its rank (the class), so a chain that ends
        # in a merge op is followed by all of the rank's store blocks
        stores = sum(BlockCosts.total(s) for s in v.stores)
        k = v.chunks
        layout = 1 if v.split else k      # o's chunks within one merge
        tail = min(v.merge[8 + 3 * c] + v.merge[10 + 3 * c] for c in range(layout))
        m_hop = min(hop(v.message_bytes[0], c) for c in classes)
        m_chain = partial + d * m_hop + sum(v.merge[i] for i in _M_TAIL[:3]) + tail + stores
        # o_s reaches r only in o messages, K chunks of it: s sends all K one after another
        # (the last then crosses >= D links), and r receives all K after the first arrives
        o_bytes = v.message_bytes[2]
        o_hop = min(hop(o_bytes, c) for c in classes)
        first = min(v.send + o_bytes / costs.link(c).bandwidth_Bps + costs.link(c).latency_s
                    for c in classes)
        fastest = v.send + o_bytes / max(costs.link(c).bandwidth_Bps for c in classes)
        forms = [(k - 1) * fastest + first + costs.recv + (d - 1) * o_hop,
                 first + (d - 1) * o_hop + k * costs.recv]
        if d >= 2 and not v.split:
            # a state's chunks move together (one transfer), so the rank before r on the
            # path receives and sends all K after the first arrives there
            latency = min(costs.link(c).latency_s for c in classes)
            forms.append(first + (d - 2) * o_hop + k * (costs.recv + fastest) + latency +
                         costs.recv)
        o_chain = partial + max(forms) + tail + stores
        # the merge bound: D hops to the output rank less the last recv, then its recvs of
        # s's m, ℓ and each chunk of o, the whole last merge and the stores, one after
        # another
        if v.split:
            # every chunk's state at r covers s: 3 recvs each; one merge's ops at least
            merged = partial + d * m_hop - costs.recv + \
                max(3 * costs.recv + sum(v.merge), 3 * k * costs.recv) + stores
        else:
            merged = partial + d * m_hop - costs.recv + (2 + k) * costs.recv + \
                sum(v.merge) + stores
        return m_chain, o_chain, merged

    per = [chains(v) for v in every]
    bounds = [("m", min(p[0] for p in per)), ("o", min(p[1] for p in per)),
              ("merge", min(p[2] for p in per))]
    if TWO_MERGE_RANKS >= graph.n >= 3:
        merges = [MergeBounds(graph, costs, v, classes) for v in every]
        bounds.append(("two merges", min(two_merges(b) for b in merges)))
        bounds.append(("all ranks", min(all_ranks(b) for b in merges)))
    chain, best = max(bounds, key=lambda b: b[1])
    # the timing run adds the same costs in another order: an exact tie (the merge bound
    # is met on a ring with slow links) must not come out a few ulps above it
    return LowerBound(best * (1.0 - ROUNDING_SLACK), d, chain)
