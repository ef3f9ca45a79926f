"""`synthesize`: search the families, order each plan, rank, emit the best as a kernel.

Deterministic: candidates are generated in a fixed order, ranked by the objective with
ties broken by plan name and rule, and emitted as the same bytes for the same launch.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from meshproof.errors import PlanError, SynthesisError
from meshproof.model.channels import derive_channels
from meshproof.model.hardware import HardwareProfile
from meshproof.model.launch import Launch, LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel_file
from meshproof.model.schedule import Scalar
from meshproof.model.trace import trace
from meshproof.sim.timing import check_profile, run_timing
from meshproof.synth.bounds import LowerBound, lower_bound
from meshproof.synth.costs import SIZE_NAMES, BlockCosts, block_costs, chunkable
from meshproof.synth.emit import emit_kernel, program_rows
from meshproof.synth.emit_chunks import emit_chunked_kernel
from meshproof.synth.emit_split import emit_split_kernel, program_rows_split
from meshproof.synth.emit_text import KERNEL_NAME, EmitInfo
from meshproof.synth.families import bfs_parent, candidate_plans, tree_plan
from meshproof.synth.graph import RankGraph, rank_graph
from meshproof.synth.order import Ordered, Rule, schedule_plan, schedule_split
from meshproof.synth.plan import CheckedPlan, Family, check_plan

SYNTH_SCHEMA = "meshproof/synthesis-v1"
SECOND_RULE_PLANS = 4
SECOND_RULE_MAX_RANKS = 1024     # past this, one list schedule per plan (each is ~n·25 ops)
# chunked variants (o in K row chunks, tl.view): the best few plans, each K that divides
# the rows; a chunked schedule has ~K/2 times the tasks, so only up to this many ranks
CHUNK_COUNTS = (2, 4, 8)
CHUNK_PLANS = 4
CHUNK_MAX_RANKS = 256
# reduce-scatter / all-gather: every state split by rows, chunk c reduced at its own rank
# (a tree rooted there) and broadcast back; K trees of O(n) transfers each
SPLIT_MAX_RANKS = 64
# measured (benchmarks/synthesis.py): 4 chunks lose to 2 on every shape (each chunk's merges
# are as many ops as a whole one's, on a serial rank), so only 2 unless --chunks asks
SPLIT_COUNTS = (2,)
REDUCE_SCATTER = "reduce_scatter"


class Objective(Enum):
    LATENCY = "latency"
    STEPS = "steps"
    BYTES = "bytes"


@dataclass(frozen=True, slots=True)
class Candidate:
    plan: str
    family: str
    rule: str
    latency_s: float
    steps: int              # the plan's longest chain of transfers
    max_link_bytes: int
    total_bytes: int
    chunks: int = 1          # o in this many row chunks (1: whole)

    def to_json(self) -> dict[str, object]:
        return {"plan": self.plan, "family": self.family, "rule": self.rule,
                "latency_s": self.latency_s, "steps": self.steps,
                "max_link_bytes": self.max_link_bytes, "total_bytes": self.total_bytes,
                "chunks": self.chunks}


@dataclass(frozen=True, slots=True)
class Synthesis:
    """The ranked candidates (best first), the bound, and the emitted kernel's text."""

    candidates: tuple[Candidate, ...]
    rejected: tuple[str, ...]          # plans the plan check refused, with the reason
    bound: LowerBound
    objective: Objective
    n_ranks: int
    depth: int
    profile: str
    sizes: tuple[tuple[str, Scalar], ...]
    wiring: str
    kernel_text: str

    @property
    def chosen(self) -> Candidate:
        return self.candidates[0]

    @property
    def gap(self) -> float:
        return self.chosen.latency_s / self.bound.latency_s

    def to_json(self, out: str, measured_s: float | None) -> dict[str, object]:
        return {"schema": SYNTH_SCHEMA, "out": out, "kernel": KERNEL_NAME,
                "objective": self.objective.value, "wiring": self.wiring,
                "n_ranks": self.n_ranks, "queue_depth": self.depth, "profile": self.profile,
                "sizes": dict(self.sizes), "chosen": self.chosen.to_json(),
                "predicted_latency_s": self.chosen.latency_s,
                "measured_latency_s": measured_s, "bound": self.bound.to_json(),
                "gap": self.gap, "candidates": [c.to_json() for c in self.candidates],
                "rejected": list(self.rejected)}


def synthesize(launch: Launch, hw: HardwareProfile, objective: Objective,
               launch_flags: str, chunks: int | None = None) -> Synthesis:
    """Search, order, rank and emit. `chunks`: only candidates with o in that many row
    chunks (1: whole; None: every variant that fits the sizes)."""
    check_profile(hw)
    spec = launch.spec
    args = dict(launch.call_args)
    if args.get("msg_dtype", "f32") != "f32":
        raise SynthesisError(f"synthesize emits f32 messages; drop --arg msg_dtype="
                             f"{args['msg_dtype']}")
    missing = [k for k in SIZE_NAMES if not isinstance(args.get(k), int)]
    if missing:
        raise SynthesisError(f"synthesize needs integer sizes {', '.join(missing)}: pass "
                             + " ".join(f"--arg {k}=N" for k in missing))
    sizes = tuple((k, args[k]) for k in SIZE_NAMES)
    graph = rank_graph(launch)
    costs = block_costs(sizes, hw, spec.system)
    if chunks is not None and chunks != 1 and not chunkable(dict(sizes), chunks):
        raise SynthesisError(f"o does not split into {chunks} row chunks at these sizes "
                             f"({', '.join(f'{k}={v}' for k, v in sizes)}): chunks need "
                             "S_q == 1 or h_kv == 1 and whole rows of the (h_kv, S_q*group) "
                             "rows; pass another --chunks or none")
    counts = CHUNK_COUNTS if chunks is None else (chunks,) if chunks > 1 else ()
    variants = [block_costs(sizes, hw, spec.system, k) for k in counts
                if (chunks is not None or graph.n <= CHUNK_MAX_RANKS)
                and chunkable(dict(sizes), k)]
    splits = [block_costs(sizes, hw, spec.system, k, split=True) for k in counts
              if (chunks is not None or (graph.n <= SPLIT_MAX_RANKS and k in SPLIT_COUNTS))
              and chunkable(dict(sizes), k)]
    bound = lower_bound(graph, costs, [*variants, *splits]) if chunks is None or \
        chunks == 1 else lower_bound(graph, variants[0], splits)
    found: list[tuple[Candidate, CheckedPlan, Ordered]] = []
    rejected: list[str] = []
    checked_plans: list[CheckedPlan] = []
    for plan in candidate_plans(graph):
        try:
            checked_plans.append(check_plan(plan, graph))
        except PlanError as exc:
            rejected.append(str(exc))
    # every plan under the forward rule; the best few under the critical rule too
    for rule in Rule:
        if rule is not Rule.FORWARD and graph.n > SECOND_RULE_MAX_RANKS:
            break
        if rule is not Rule.FORWARD:
            found.sort(key=lambda f: _rank_key(f[0], objective))
            checked_plans = [f[1] for f in found[:SECOND_RULE_PLANS]]
        for checked in checked_plans:
            ordered = schedule_plan(checked, graph, costs, spec.queue_depth, rule)
            found.append((Candidate(checked.plan.name, checked.plan.family.value,
                                    rule.value, ordered.latency_s, checked.depth,
                                    ordered.max_link_bytes, ordered.total_bytes),
                          checked, ordered))
    split_plans: dict[int, tuple[CheckedPlan, ...]] = {}
    if found:
        found.sort(key=lambda f: _rank_key(f[0], objective))
        found += _chunked(found, variants, graph, spec.queue_depth)
        found += _reduce_scatter(splits, graph, spec.queue_depth, split_plans)
        if chunks is not None:
            found = [f for f in found if f[0].chunks == chunks]
    if not found:
        raise SynthesisError(f"no plan of any family fits the {graph.n} ranks of wiring "
                             f"{launch.wiring.name}: {'; '.join(rejected[:2])}")
    found.sort(key=lambda f: _rank_key(f[0], objective))
    best, checked, ordered = found[0]
    info = EmitInfo(best.plan, best.rule, hw.name, sizes, spec.queue_depth,
                    launch.wiring.name, launch_flags, best.latency_s, bound.latency_s,
                    len(found))
    if id(ordered) in split_plans:
        split_rows, split_merges = program_rows_split(split_plans[id(ordered)], ordered)
        text = emit_split_kernel(graph, split_rows, split_merges, info, best.chunks)
    else:
        rows, merges = program_rows(checked, ordered)
        text = emit_kernel(graph, rows, merges, info) if best.chunks == 1 else \
            emit_chunked_kernel(graph, rows, merges, info, best.chunks)
    return Synthesis(tuple(f[0] for f in found), tuple(rejected), bound, objective, graph.n,
                     spec.queue_depth, hw.name, sizes, launch.wiring.name, text)


def _chunked(found: list[tuple[Candidate, CheckedPlan, Ordered]],
             variants: list[BlockCosts], graph: RankGraph, depth: int
             ) -> list[tuple[Candidate, CheckedPlan, Ordered]]:
    """The best few plans (found is ranked) with o in K row chunks, forward rule."""
    plans: list[CheckedPlan] = []
    for _c, checked, _o in found:
        if checked not in plans:
            plans.append(checked)
    out = []
    for v in variants:
        for checked in plans[:CHUNK_PLANS]:
            ordered = schedule_plan(checked, graph, v, depth, Rule.FORWARD)
            out.append((Candidate(f"{checked.plan.name}, o in {v.chunks} chunks",
                                  checked.plan.family.value, Rule.FORWARD.value,
                                  ordered.latency_s, checked.depth, ordered.max_link_bytes,
                                  ordered.total_bytes, v.chunks), checked, ordered))
    return out


def _reduce_scatter(splits: list[BlockCosts], graph: RankGraph, depth: int,
                    plans: dict[int, tuple[CheckedPlan, ...]]
                    ) -> list[tuple[Candidate, CheckedPlan, Ordered]]:
    """Every state split by rows into K chunks; chunk c is reduced at its own root (the
    centres of K equal runs of the launch-local ranks) over a breadth-first tree and
    broadcast back down it. `plans` gets each candidate's per-chunk plans."""
    out = []
    for v in splits:
        k = v.chunks
        roots = sorted({(2 * c + 1) * graph.n // (2 * k) for c in range(k)})
        if len(roots) < k:
            continue
        trees = tuple(check_plan(tree_plan(graph, f"tree at [{r}]", Family.TREE,
                                           bfs_parent(graph, (r,)), []), graph)
                      for r in roots)
        ordered = schedule_split(trees, graph, v, depth, Rule.FORWARD)
        plans[id(ordered)] = trees
        out.append((Candidate(f"reduce-scatter / all-gather at ranks {roots}, {k} chunks",
                              REDUCE_SCATTER, Rule.FORWARD.value, ordered.latency_s,
                              max(t.depth for t in trees), ordered.max_link_bytes,
                              ordered.total_bytes, k), trees[0], ordered))
    return out


def _rank_key(c: Candidate, objective: Objective) -> tuple[float, float, float, str, str]:
    if objective is Objective.STEPS:
        return (c.steps, c.latency_s, c.max_link_bytes, c.plan, c.rule)
    if objective is Objective.BYTES:
        return (c.max_link_bytes, c.latency_s, c.steps, c.plan, c.rule)
    return (c.latency_s, c.max_link_bytes, c.steps, c.plan, c.rule)


def measure(path: Path, opts: LaunchOptions, hw: HardwareProfile) -> float:
    """`sim.timing`'s latency of the written kernel at the launch `opts` describes: the
    file traced like any kernel (in this process), then `run_timing`."""
    kernel = resolve_kernel_file(f"{path}::{KERNEL_NAME}")
    launch = build_launch(kernel, opts)
    schedule = trace(kernel, launch)
    run = run_timing(schedule, derive_channels(schedule), hw, launch.spec.queue_depth)
    return run.latency_s
