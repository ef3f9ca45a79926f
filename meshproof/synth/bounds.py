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
the hop that the triangle inequality saves). comm_steps >= D, because information crosses
one link per message. Every bound takes the cheapest link class of the launch.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshproof.synth.costs import BlockCosts
from meshproof.synth.graph import RankGraph

# positions in attention_parts.merge's 11 ops
_M_TAIL = (0, 1, 2, 8, 10)       # maximum, sub, exp, mul into o, add into o
_O_TAIL = (8, 10)
# all-pairs breadth-first search up to here; beyond, the longest distance two sweeps find
EXACT_DIAMETER_RANKS = 1024
# relative: far above the rounding of summing a few dozen costs in double precision
ROUNDING_SLACK = 1e-12


@dataclass(frozen=True, slots=True)
class LowerBound:
    latency_s: float
    steps: int          # the diameter D (exact up to EXACT_DIAMETER_RANKS; else a distance
                        # two sweeps found, still a lower bound)
    chain: str          # "m", "o" or "merge": which bound gives the latency

    def to_json(self) -> dict[str, object]:
        return {"latency_s": self.latency_s, "steps": self.steps, "chain": self.chain}


def diameter(graph: RankGraph) -> int:
    if graph.n <= EXACT_DIAMETER_RANKS:
        return max(max(graph.distances(s)) for s in range(graph.n))
    first = graph.distances(0)
    far = max(range(graph.n), key=lambda v: (first[v], -v))
    return max(graph.distances(far))


def lower_bound(graph: RankGraph, costs: BlockCosts) -> LowerBound:
    d = diameter(graph)
    partial = BlockCosts.total(costs.partial)
    store = BlockCosts.total(costs.store)
    if d == 0:
        return LowerBound((partial + store) * (1.0 - ROUNDING_SLACK), 0, "m")
    classes = sorted({e.cls for e in graph.edges})
    m_bytes, _l_bytes, o_bytes = costs.message_bytes

    def hop(nbytes: int) -> float:
        return min(costs.send + nbytes / costs.link(c).bandwidth_Bps +
                   costs.link(c).latency_s + costs.recv for c in classes)

    m_chain = partial + d * hop(m_bytes) + sum(costs.merge[i] for i in _M_TAIL) + store
    o_chain = partial + d * hop(o_bytes) + sum(costs.merge[i] for i in _O_TAIL) + store
    # the merge bound: D hops to the output rank less the last recv, then its three recvs
    # of s's m, ℓ and o, the whole last merge and the store, one after another
    merged = partial + d * hop(m_bytes) - costs.recv + 3 * costs.recv + \
        sum(costs.merge) + store
    bounds = (("m", m_chain), ("o", o_chain), ("merge", merged))
    chain, best = max(bounds, key=lambda b: b[1])
    # the timing run adds the same costs in another order: an exact tie (the merge bound
    # is met on a ring with slow links) must not come out a few ulps above it
    return LowerBound(best * (1.0 - ROUNDING_SLACK), d, chain)
