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
    (0 m, 1 ℓ, 2 o) of a send or recv, or the index of a merge op."""

    kind: TaskKind
    rank: int
    row: int
    part: int = 0
    dir: Direction | None = None     # SEND/RECV: the port on this rank


@dataclass(frozen=True, slots=True)
class Ordered:
    """A plan's per-rank program order and its predicted timing."""

    programs: tuple[tuple[Task, ...], ...]
    latency_s: float
    rule: Rule
    max_link_bytes: int
    total_bytes: int


def schedule_plan(checked: CheckedPlan, graph: RankGraph, costs: BlockCosts, depth: int,
                  rule: Rule) -> Ordered:
    if depth < 1:
        raise SynthesisError(f"synthesize orders sends for a queue depth D >= 1, got {depth}; "
                             "pass --queue-depth 1 or more")
    return _Scheduler(checked, graph, costs, depth, rule).run()


Key = tuple[float, float, float, int, int]


class _Scheduler:
    def __init__(self, checked: CheckedPlan, graph: RankGraph, costs: BlockCosts,
                 depth: int, rule: Rule) -> None:
        self.plan = checked.plan
        self.costs = costs
        self.depth = depth
        self.rule = rule
        self.tasks: list[Task] = []
        self.chan: dict[int, tuple[int, Direction]] = {}   # transfer row -> (src, dir)
        self.cls: dict[tuple[int, Direction], str] = {}
        self._build(graph)
        n = graph.n
        self.clock = [BlockCosts.total(costs.partial)] * n
        self.left = [0] * n
        for t in self.tasks:
            self.left[t.rank] += 1
        self.enabled: list[list[int]] = [[] for _ in range(n)]
        for i, w in enumerate(self.waits):
            if w == 0:
                self.enabled[self.tasks[i].rank].append(i)
        self.sent: dict[tuple[int, Direction], list[int]] = {}    # task ids in send order
        self.got: dict[tuple[int, Direction], int] = {}
        self.arrival: dict[int, float] = {}                       # send task -> arrival
        self.recv_end: dict[tuple[int, Direction], list[float]] = {}
        self.done: list[list[Task]] = [[] for _ in range(n)]

    def _build(self, graph: RankGraph) -> None:
        """Tasks in plan-row order, each with the tasks it waits for by value."""
        maker: dict[tuple[int, str], int] = {}      # (state, component) -> task
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

        for r_i, row in enumerate(self.plan.rows):
            if row.kind is RowKind.TRANSFER:
                assert row.dst is not None and row.out is not None
                d = graph.port(row.rank, row.dst)
                assert d is not None
                self.chan[r_i] = (row.rank, d)
                self.cls[(row.rank, d)] = graph.link_class(row.rank, d)
                prev: int | None = None
                for p, comp in enumerate(COMPONENTS):
                    # m, ℓ, o leave in that order
                    prev = add(Task(TaskKind.SEND, row.rank, r_i, p, d),
                               [maker.get((row.args[0], comp)), prev])
                for p, comp in enumerate(COMPONENTS):
                    maker[(row.out, comp)] = add(Task(TaskKind.RECV, row.dst, r_i, p,
                                                      d.opposite), [])
            elif row.kind is RowKind.MERGE:
                assert row.out is not None
                side = {"a": row.args[0], "b": row.args[1]}
                ops: list[int] = []
                for p, deps in enumerate(MERGE_DEPS):
                    ids = [ops[int(name)] if s == "t" else maker.get((side[s], name))
                           for s, name in deps]
                    ops.append(add(Task(TaskKind.MERGE_OP, row.rank, r_i, p), ids))
                for comp, p in MADE_BY.items():
                    maker[(row.out, comp)] = ops[p]
            else:
                add(Task(TaskKind.STORE, row.rank, r_i),
                    [maker.get((row.args[0], "l")), maker.get((row.args[0], "o"))])
        self.succ = succ
        self.waits = waits
        self.level = self._levels()

    def _cost(self, task: Task) -> float:
        c = self.costs
        if task.kind is TaskKind.MERGE_OP:
            return c.merge[task.part]
        if task.kind is TaskKind.STORE:
            return BlockCosts.total(c.store)
        return c.send if task.kind is TaskKind.SEND else c.recv

    def _levels(self) -> list[float]:
        """Per task, its longest path to the end (with a link's latency on messages)."""
        level = [0.0] * len(self.tasks)
        latency = max(link.latency_s for _, link in self.costs.links)
        for i in range(len(self.tasks) - 1, -1, -1):
            task = self.tasks[i]
            after = max((level[s] for s in self.succ[i]), default=0.0)
            if task.kind is TaskKind.SEND:
                after = max(after, latency + level[i + 3])   # its recv
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
        for i in self.enabled[r]:
            start = self._ready(i)
            if start is None:
                continue
            task = self.tasks[i]
            kind, urgency = float(task.kind.value), -self.level[i]
            key: Key = (start, kind, urgency, task.row, i) if self.rule is Rule.FORWARD \
                else (start, urgency, kind, task.row, i)
            if found is None or key < found[0]:
                found = (key, i)
        return found

    def _ready(self, i: int) -> float | None:
        """When task i could start, or None if a message or queue room is not committed."""
        task = self.tasks[i]
        r = task.rank
        if task.kind is TaskKind.STORE:
            return self.clock[r] if self.left[r] == 1 else None
        if task.kind is TaskKind.MERGE_OP:
            return self.clock[r]
        ch = self.chan[task.row]
        if task.kind is TaskKind.SEND:
            k = len(self.sent.get(ch, []))
            if k < self.depth:
                return self.clock[r]
            done = self.recv_end.get(ch, [])
            return max(self.clock[r], done[k - self.depth]) if k - self.depth < len(done) \
                else None
        order = self.sent.get(ch, [])
        at = self.got.get(ch, 0)
        if at >= len(order):
            return None
        head = self.tasks[order[at]]
        if (head.row, head.part) != (task.row, task.part):
            return None
        return max(self.clock[r], self.arrival[order[at]])

    def _commit(self, i: int) -> set[int]:
        """Run task i as run_timing does; the ranks whose readiness may change."""
        task = self.tasks[i]
        r = task.rank
        start = self._ready(i)
        assert start is not None
        touched: set[int] = set()
        if task.kind is TaskKind.MERGE_OP:
            t = start + self.costs.merge[task.part]
        elif task.kind is TaskKind.STORE:
            t = BlockCosts.total(self.costs.store, start)
        elif task.kind is TaskKind.SEND:
            ch = self.chan[task.row]
            link = self.costs.link(self.cls[ch])
            t = start + self.costs.send + \
                self.costs.message_bytes[task.part] / link.bandwidth_Bps
            self.arrival[i] = t + link.latency_s
            self.sent.setdefault(ch, []).append(i)
            dst = self.plan.rows[task.row].dst
            assert dst is not None
            touched.add(dst)
        else:
            ch = self.chan[task.row]
            t = start + self.costs.recv
            self.recv_end.setdefault(ch, []).append(t)
            self.got[ch] = self.got.get(ch, 0) + 1
            touched.add(ch[0])
        self.clock[r] = t
        self.left[r] -= 1
        self.enabled[r].remove(i)
        self.done[r].append(task)
        for s in self.succ[i]:
            self.waits[s] -= 1
            if self.waits[s] == 0:
                self.enabled[self.tasks[s].rank].append(s)
                touched.add(self.tasks[s].rank)
        return touched

    def _result(self) -> Ordered:
        per_link: dict[tuple[int, Direction], int] = {}
        for ch, ids in self.sent.items():
            per_link[ch] = sum(self.costs.message_bytes[self.tasks[i].part] for i in ids)
        return Ordered(tuple(tuple(d) for d in self.done), max(self.clock), self.rule,
                       max(per_link.values(), default=0), sum(per_link.values()))


assert len(MERGE_DEPS) == MERGE_OPS
