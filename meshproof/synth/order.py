"""List scheduling at op granularity: one program order per rank for a checked plan, timed
as `run_timing` times it (spec/timing.md): each rank is a serial processor; a recv starts
when its message has arrived, the k-th send on a link when the (k-D)-th recv there is done.

Each transfer is three messages (m, ℓ, o, sent in that order) and each merge its 11 ops, so
a rank can forward m before ℓ and o arrive and merge message by message (design note
synthesis §4). Tasks are committed in order of their start time across all ranks; a task
is ready only when everything it waits for is committed, so the order found is an
execution at queue depth D: the emitted kernel is deadlock-free at D by construction
(verify proves it). Ties among a rank's ready tasks: "forward" puts sends first,
"critical" the task with the longest remaining path.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from enum import Enum

from meshproof.errors import SynthesisError
from meshproof.model.topology import Direction
from meshproof.synth.costs import MERGE_OPS, BlockCosts
from meshproof.synth.graph import RankGraph
from meshproof.synth.plan import CheckedPlan, RowKind

COMPONENTS = ("m", "l", "o")
# attention_parts.merge's ops for c = merge(a, b): (input values, component it makes)
# a value is (side, name): side "a"/"b"/"c" a state's component, "t" an earlier op's index
MERGE_DEPS: tuple[tuple[tuple[str, str], ...], ...] = (
    (("a", "m"), ("b", "m")),          # 0 m_c = maximum(m_a, m_b)
    (("a", "m"), ("t", "0")),          # 1 m_a - m_c
    (("t", "1"),),                     # 2 alpha = exp(.)
    (("b", "m"), ("t", "0")),          # 3 m_b - m_c
    (("t", "3"),),                     # 4 beta = exp(.)
    (("a", "l"), ("t", "2")),          # 5 l_a * alpha
    (("b", "l"), ("t", "4")),          # 6 l_b * beta
    (("t", "5"), ("t", "6")),          # 7 l_c = sum
    (("a", "o"), ("t", "2")),          # 8 o_a * alpha
    (("b", "o"), ("t", "4")),          # 9 o_b * beta
    (("t", "8"), ("t", "9")),          # 10 o_c = sum
)
MADE_BY = {"m": 0, "l": 7, "o": 10}    # the merge op that makes each component of c


def components(chunks: int) -> tuple[str, ...]:
    """The messages of one transfer, in the order they leave: m, ℓ, then o (or its row
    chunks o0, o1, ... with `chunks` > 1)."""
    return COMPONENTS if chunks == 1 else ("m", "l", *(f"o{c}" for c in range(chunks)))


def merge_deps(chunks: int) -> tuple[tuple[tuple[str, str], ...], ...]:
    """MERGE_DEPS with o in `chunks` row chunks: the 8 ops on m and ℓ, then (o_a·α, o_b·β,
    sum) per chunk (the factors' rows are views, which cost nothing)."""
    if chunks == 1:
        return MERGE_DEPS
    out = list(MERGE_DEPS[:8])
    for c in range(chunks):
        base = 8 + 3 * c
        out += [(("a", f"o{c}"), ("t", "2")), (("b", f"o{c}"), ("t", "4")),
                (("t", str(base)), ("t", str(base + 1)))]
    return tuple(out)


def made_by(chunks: int) -> dict[str, int]:
    if chunks == 1:
        return MADE_BY
    return {"m": 0, "l": 7, **{f"o{c}": 10 + 3 * c for c in range(chunks)}}


class Rule(Enum):
    FORWARD = "forward"
    CRITICAL = "critical"


class TaskKind(Enum):
    SEND = 0
    RECV = 1
    MERGE_OP = 2
    STORE = 3


@dataclass(frozen=True, slots=True)
class Task:
    """One op of one rank: `row` is the plan row it comes from; `part` the component
    (0 m, 1 ℓ, 2 o; 2 + c chunk c of o) of a send or recv, the index of a merge op, or the
    chunk a store stores."""

    kind: TaskKind
    rank: int
    row: int
    part: int = 0
    dir: Direction | None = None     # SEND/RECV: the port on this rank
    chunk: int = 0                   # split states: the chunk whose plan the row is of


@dataclass(frozen=True, slots=True)
class Ordered:
    """A plan's per-rank program order and its predicted timing."""

    programs: tuple[tuple[Task, ...], ...]
    latency_s: float
    rule: Rule
    max_link_bytes: int
    total_bytes: int
    chunks: int = 1
    split: bool = False


def schedule_plan(checked: CheckedPlan, graph: RankGraph, costs: BlockCosts, depth: int,
                  rule: Rule) -> Ordered:
    if depth < 1:
        raise SynthesisError(f"synthesize orders sends for a queue depth D >= 1, got {depth}; "
                             "pass --queue-depth 1 or more")
    return _Scheduler((checked,), graph, costs, depth, rule).run()


def schedule_split(plans: tuple[CheckedPlan, ...], graph: RankGraph, costs: BlockCosts,
                   depth: int, rule: Rule) -> Ordered:
    """K row chunks of every state, each chunk an independent (m, ℓ, o) state that follows
    its own plan (`costs.split`, one plan per chunk): reduce-scatter / all-gather when chunk
    c's plan is a tree rooted at its own rank."""
    if depth < 1:
        raise SynthesisError(f"synthesize orders sends for a queue depth D >= 1, got {depth}; "
                             "pass --queue-depth 1 or more")
    assert costs.split and len(plans) == costs.chunks
    return _Scheduler(plans, graph, costs, depth, rule).run()


Key = tuple[float, float, float, int, int]
_SEND, _RECV, _MERGE, _STORE = (k.value for k in TaskKind)


class _Scheduler:
    def __init__(self, checked: tuple[CheckedPlan, ...], graph: RankGraph, costs: BlockCosts,
                 depth: int, rule: Rule) -> None:
        self.plans = tuple(c.plan for c in checked)
        self.plan = self.plans[0]
        self.costs = costs
        self.depth = depth
        self.rule = rule
        self.comps = COMPONENTS if costs.split else components(costs.chunks)
        self.tasks: list[Task] = []
        # (chunk, transfer row) -> (src, dir)
        self.chan: dict[tuple[int, int], tuple[int, Direction]] = {}
        self.cls: dict[tuple[int, Direction], str] = {}
        self._build(graph)
        n = graph.n
        self.clock = [BlockCosts.total(costs.partial)] * n
        self._arrays()
        self.left = [0] * n
        for r in self.t_rank:
            self.left[r] += 1
        self.enabled: list[list[int]] = [[] for _ in range(n)]
        for i, w in enumerate(self.waits):
            if w == 0:
                self.enabled[self.t_rank[i]].append(i)
        n_ch = len(self.ch_src)
        self.sent: list[list[int]] = [[] for _ in range(n_ch)]   # send tasks in order
        self.got = [0] * n_ch                                    # messages received
        self.recv_end: list[list[float]] = [[] for _ in range(n_ch)]
        self.arrival = [0.0] * len(self.tasks)                   # per send task
        self.done: list[list[Task]] = [[] for _ in range(n)]

    def _arrays(self) -> None:
        """The hot loop reads plain lists, not the Task records (enum hashing is slow)."""
        ids: dict[tuple[int, Direction], int] = {}
        self.ch_src: list[int] = []
        self.ch_bw: list[float] = []
        self.ch_lat: list[float] = []
        for key in sorted(self.cls, key=lambda k: (k[0], k[1].value)):
            ids[key] = len(self.ch_src)
            link = self.costs.link(self.cls[key])
            self.ch_src.append(key[0])
            self.ch_bw.append(link.bandwidth_Bps)
            self.ch_lat.append(link.latency_s)
        self.t_kind = [t.kind.value for t in self.tasks]
        self.t_rank = [t.rank for t in self.tasks]
        self.t_row = [t.row for t in self.tasks]
        self.t_part = [t.part for t in self.tasks]
        self.t_ch = [ids[self.chan[(t.chunk, t.row)]] if t.kind.value <= 1 else -1
                     for t in self.tasks]
        self.t_dst = [self.plans[t.chunk].rows[t.row].dst or 0 for t in self.tasks]

    def _build(self, graph: RankGraph) -> None:
        """Tasks in plan-row order, each with the tasks it waits for by value."""
        maker: dict[tuple[int, int, str], int] = {}     # (chunk, state, component) -> task
        succ: list[list[int]] = []
        waits: list[int] = []

        def add(task: Task, deps: list[int | None]) -> int:
            i = len(self.tasks)
            self.tasks.append(task)
            succ.append([])
            real = [d for d in deps if d is not None]
            for d in real:
                succ[d].append(i)
            waits.append(len(real))
            return i

        split = self.costs.split
        deps_of = MERGE_DEPS if split else merge_deps(self.costs.chunks)
        made = MADE_BY if split else made_by(self.costs.chunks)
        for ch, plan in enumerate(self.plans):
            for r_i, row in enumerate(plan.rows):
                if row.kind is RowKind.TRANSFER:
                    assert row.dst is not None and row.out is not None
                    d = graph.port(row.rank, row.dst)
                    assert d is not None
                    self.chan[(ch, r_i)] = (row.rank, d)
                    self.cls[(row.rank, d)] = graph.link_class(row.rank, d)
                    sends: list[int] = []
                    for p, comp in enumerate(self.comps):
                        # m, ℓ, o leave in that order
                        sends.append(add(Task(TaskKind.SEND, row.rank, r_i, p, d, ch),
                                         [maker.get((ch, row.args[0], comp)),
                                          sends[-1] if sends else None]))
                    for p, comp in enumerate(self.comps):
                        # a recv is considered once its message is sent (then in FIFO order)
                        maker[(ch, row.out, comp)] = add(
                            Task(TaskKind.RECV, row.dst, r_i, p, d.opposite, ch), [sends[p]])
                elif row.kind is RowKind.MERGE:
                    assert row.out is not None
                    side = {"a": row.args[0], "b": row.args[1]}
                    ops: list[int] = []
                    for p, deps in enumerate(deps_of):
                        ids = [ops[int(name)] if s_ == "t" else maker.get((ch, side[s_], name))
                               for s_, name in deps]
                        ops.append(add(Task(TaskKind.MERGE_OP, row.rank, r_i, p, None, ch),
                                       ids))
                    for comp, p in made.items():
                        maker[(ch, row.out, comp)] = ops[p]
                elif split:
                    add(Task(TaskKind.STORE, row.rank, r_i, ch, None, ch),
                        [maker.get((ch, row.args[0], "l")), maker.get((ch, row.args[0], "o"))])
                else:
                    for c, comp in enumerate(self.comps[2:]):
                        add(Task(TaskKind.STORE, row.rank, r_i, c),
                            [maker.get((ch, row.args[0], "l")),
                             maker.get((ch, row.args[0], comp))])
        self.succ = succ
        self.waits = waits
        self.level = self._levels()

    def _cost(self, task: Task) -> float:
        c = self.costs
        if task.kind is TaskKind.MERGE_OP:
            return c.merge[task.part]
        if task.kind is TaskKind.STORE:
            return BlockCosts.total(c.stores[task.part])
        return c.send if task.kind is TaskKind.SEND else c.recv

    def _levels(self) -> list[float]:
        """Per task, its longest path to the end (with a link's latency on messages)."""
        level = [0.0] * len(self.tasks)
        latency = max(link.latency_s for _, link in self.costs.links)
        for i in range(len(self.tasks) - 1, -1, -1):
            task = self.tasks[i]
            after = max((level[s] for s in self.succ[i]), default=0.0)
            if task.kind is TaskKind.SEND:
                after = max(after, latency + level[i + len(self.comps)])   # its recv
            level[i] = self._cost(task) + after
        return level

    def run(self) -> Ordered:
        heap: list[tuple[Key, int, int]] = []
        version = [0] * len(self.clock)
        for r in range(len(self.clock)):
            self._push(heap, version, r)
        while heap:
            _key, ver, r = heapq.heappop(heap)
            if ver != version[r]:
                continue
            best = self._best(r)
            if best is None:
                continue
            for t in {r, *self._commit(best[1])}:
                version[t] += 1
                self._push(heap, version, t)
        if any(self.left):
            raise SynthesisError(f"the list schedule of plan {self.plan.name} stopped with "
                                 f"{sum(self.left)} op(s) left at queue depth {self.depth}; "
                                 "raise --queue-depth")
        return self._result()

    def _push(self, heap: list[tuple[Key, int, int]], version: list[int], r: int) -> None:
        best = self._best(r)
        if best is not None:
            heapq.heappush(heap, (best[0], version[r], r))

    def _best(self, r: int) -> tuple[Key, int] | None:
        found: tuple[Key, int] | None = None
        forward = self.rule is Rule.FORWARD
        for i in self.enabled[r]:
            start = self._ready(i)
            if start is None:
                continue
            kind, urgency = float(self.t_kind[i]), -self.level[i]
            key: Key = (start, kind, urgency, self.t_row[i], i) if forward \
                else (start, urgency, kind, self.t_row[i], i)
            if found is None or key < found[0]:
                found = (key, i)
        return found

    def _ready(self, i: int) -> float | None:
        """When task i could start, or None if a message or queue room is not committed."""
        kind = self.t_kind[i]
        r = self.t_rank[i]
        if kind == _MERGE:
            return self.clock[r]
        if kind == _STORE:   # the stores end the program (spec/synthesis.md §3's class)
            return self.clock[r] if self.left[r] <= self.costs.chunks else None
        ch = self.t_ch[i]
        if kind == _SEND:
            k = len(self.sent[ch]) - self.depth
            if k < 0:
                return self.clock[r]
            done = self.recv_end[ch]
            return max(self.clock[r], done[k]) if k < len(done) else None
        order = self.sent[ch]
        at = self.got[ch]
        # a transfer's recvs are its sends' ids + len(comps) (built in that order)
        if at >= len(order) or order[at] + len(self.comps) != i:
            return None
        return max(self.clock[r], self.arrival[order[at]])

    def _commit(self, i: int) -> set[int]:
        """Run task i as run_timing does; the ranks whose readiness may change."""
        kind = self.t_kind[i]
        r = self.t_rank[i]
        start = self._ready(i)
        assert start is not None
        touched: set[int] = set()
        if kind == _MERGE:
            t = start + self.costs.merge[self.t_part[i]]
        elif kind == _STORE:
            t = BlockCosts.total(self.costs.stores[self.t_part[i]], start)
        elif kind == _SEND:
            ch = self.t_ch[i]
            t = start + self.costs.send + \
                self.costs.message_bytes[self.t_part[i]] / self.ch_bw[ch]
            self.arrival[i] = t + self.ch_lat[ch]
            self.sent[ch].append(i)
            touched.add(self.t_dst[i])
        else:
            ch = self.t_ch[i]
            t = start + self.costs.recv
            self.recv_end[ch].append(t)
            self.got[ch] += 1
            touched.add(self.ch_src[ch])
        self.clock[r] = t
        self.left[r] -= 1
        self.enabled[r].remove(i)
        self.done[r].append(self.tasks[i])
        for s in self.succ[i]:
            self.waits[s] -= 1
            if self.waits[s] == 0:
                self.enabled[self.t_rank[s]].append(s)
                touched.add(self.t_rank[s])
        return touched

    def _result(self) -> Ordered:
        per_link = [sum(self.costs.message_bytes[self.t_part[i]] for i in ids)
                    for ids in self.sent]
        return Ordered(tuple(tuple(d) for d in self.done), max(self.clock), self.rule,
                       max(per_link, default=0), sum(per_link), self.costs.chunks,
                       self.costs.split)


assert len(MERGE_DEPS) == MERGE_OPS
