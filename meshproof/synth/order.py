"""List scheduling: one program order per rank for a checked plan, timed as `run_timing`
times it (spec/timing.md): each rank is a serial processor; a recv starts when its message
has arrived, the k-th send on a link when the (k-D)-th recv there is done.

Tasks are committed in order of their start time across all ranks; a task is ready only
when everything it waits for is already committed, so the order found is an execution at
queue depth D: the emitted kernel is deadlock-free at D by construction (verify proves it).
Two priority rules break ties among a rank's ready tasks: "forward" (sends first, the
design's forward-before-merge) and "critical" (the longest remaining path first).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from enum import Enum

from meshproof.errors import SynthesisError
from meshproof.model.topology import Direction
from meshproof.synth.costs import BlockCosts
from meshproof.synth.graph import RankGraph
from meshproof.synth.plan import CheckedPlan, RowKind


class Rule(Enum):
    FORWARD = "forward"
    CRITICAL = "critical"


class TaskKind(Enum):
    SEND = 0
    RECV = 1
    MERGE = 2
    STORE = 3


@dataclass(frozen=True, slots=True)
class Task:
    """One instruction of one rank: `row` is the plan row it comes from."""

    kind: TaskKind
    rank: int
    row: int
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


class _Scheduler:
    def __init__(self, checked: CheckedPlan, graph: RankGraph, costs: BlockCosts,
                 depth: int, rule: Rule) -> None:
        self.plan = checked.plan
        self.rank_of = checked.state_rank
        self.costs = costs
        self.depth = depth
        self.rule = rule
        n = graph.n
        self.pending: list[list[Task]] = [[] for _ in range(n)]
        self.chan: dict[int, tuple[int, Direction]] = {}   # transfer row -> (src, dir)
        self.cls: dict[tuple[int, Direction], str] = {}
        for i, row in enumerate(self.plan.rows):
            if row.kind is RowKind.TRANSFER:
                assert row.dst is not None
                d = graph.port(row.rank, row.dst)
                assert d is not None
                self.chan[i] = (row.rank, d)
                self.cls[(row.rank, d)] = graph.link_class(row.rank, d)
                self.pending[row.rank].append(Task(TaskKind.SEND, row.rank, i, d))
                self.pending[row.dst].append(Task(TaskKind.RECV, row.dst, i, d.opposite))
            elif row.kind is RowKind.MERGE:
                self.pending[row.rank].append(Task(TaskKind.MERGE, row.rank, i))
            else:
                self.pending[row.rank].append(Task(TaskKind.STORE, row.rank, i))
        self.level = self._bottom_levels()
        start = BlockCosts.total(costs.partial)
        self.clock = [start] * n
        self.have = [s < n for s in range(len(self.rank_of))]   # own partials exist
        self.sent: dict[tuple[int, Direction], list[int]] = {}   # transfers in send order
        self.got: dict[tuple[int, Direction], int] = {}          # transfers received
        self.arrival: dict[tuple[int, Direction], list[float]] = {}   # per message
        self.recv_end: dict[tuple[int, Direction], list[float]] = {}
        self.done: list[list[Task]] = [[] for _ in range(n)]

    def _bottom_levels(self) -> dict[int, float]:
        """Per plan row, an estimate of the work after it (for the critical rule)."""
        c = self.costs
        merge = BlockCosts.total(c.merge)
        hop = 3 * (c.send + c.recv) + c.link("inter_cube").latency_s
        after: dict[int, float] = {}
        level: dict[int, float] = {}
        users: dict[int, list[int]] = {}
        for i, row in enumerate(self.plan.rows):
            for a in row.args:
                users.setdefault(a, []).append(i)
        for i in range(len(self.plan.rows) - 1, -1, -1):
            row = self.plan.rows[i]
            own = hop if row.kind is RowKind.TRANSFER else merge \
                if row.kind is RowKind.MERGE else 0.0
            nxt = max((level[u] for u in users.get(row.out, [])), default=0.0) \
                if row.out is not None else 0.0
            level[i] = own + nxt
            after[i] = nxt
        return level

    def run(self) -> Ordered:
        heap: list[tuple[tuple[float, float, int, int], int, int]] = []
        version = [0] * len(self.pending)
        for r in range(len(self.pending)):
            self._push(heap, version, r)
        left = sum(len(p) for p in self.pending)
        while heap:
            _key, ver, r = heapq.heappop(heap)
            if ver != version[r]:
                continue
            task = self._best(r)
            if task is None:
                continue
            touched = self._commit(task[1])
            left -= 1
            for t in {r, *touched}:
                version[t] += 1
                self._push(heap, version, t)
        if left:
            raise SynthesisError(f"the list schedule of plan {self.plan.name} stopped with "
                                 f"{left} task(s) left at queue depth {self.depth}; "
                                 "raise --queue-depth")
        return self._result()

    def _push(self, heap: list[tuple[tuple[float, float, int, int], int, int]],
              version: list[int], r: int) -> None:
        best = self._best(r)
        if best is not None:
            heapq.heappush(heap, (best[0], version[r], r))

    def _best(self, r: int) -> tuple[tuple[float, float, int, int], Task] | None:
        found: tuple[tuple[float, float, int, int], Task] | None = None
        for task in self.pending[r]:
            start = self._ready(task)
            if start is None:
                continue
            urgency = -self.level[task.row]
            key = (start, float(task.kind.value), urgency, task.row) \
                if self.rule is Rule.FORWARD else (start, urgency, task.kind.value, task.row)
            key = (key[0], float(key[1]), int(key[2]), int(key[3]))
            if found is None or key < found[0]:
                found = (key, task)
        return found

    def _ready(self, task: Task) -> float | None:
        """When `task` could start, or None if something it waits for is not committed."""
        row = self.plan.rows[task.row]
        r = task.rank
        if task.kind is TaskKind.STORE:
            return self.clock[r] if len(self.pending[r]) == 1 else None
        if task.kind is TaskKind.MERGE:
            return self.clock[r] if all(self.have[a] for a in row.args) else None
        ch = self.chan[task.row]
        if task.kind is TaskKind.SEND:
            if not self.have[row.args[0]]:
                return None
            k = 3 * len(self.sent.get(ch, []))
            done = self.recv_end.get(ch, [])
            if k + 2 - self.depth >= len(done):
                return None
            room = done[k - self.depth] if k >= self.depth else 0.0
            return max(self.clock[r], room)
        order = self.sent.get(ch, [])
        at = self.got.get(ch, 0)
        if at >= len(order) or order[at] != task.row:
            return None
        return max(self.clock[r], self.arrival[ch][3 * at])

    def _commit(self, task: Task) -> set[int]:
        """Run `task`'s ops as run_timing does; the ranks whose readiness may change."""
        r = task.rank
        row = self.plan.rows[task.row]
        c = self.costs
        t = self.clock[r]
        touched: set[int] = set()
        if task.kind is TaskKind.MERGE or task.kind is TaskKind.STORE:
            t = BlockCosts.total(c.merge if task.kind is TaskKind.MERGE else c.store, t)
            if row.out is not None:
                self.have[row.out] = True
        elif task.kind is TaskKind.SEND:
            ch = self.chan[task.row]
            link = c.link(self.cls[ch])
            done = self.recv_end.get(ch, [])
            arrivals = self.arrival.setdefault(ch, [])
            for nbytes in c.message_bytes:
                k = len(arrivals)
                start = max(t, done[k - self.depth]) if k >= self.depth else t
                t = start + c.send + nbytes / link.bandwidth_Bps
                arrivals.append(t + link.latency_s)
            self.sent.setdefault(ch, []).append(task.row)
            assert row.dst is not None
            touched.add(row.dst)
        else:
            ch = self.chan[task.row]
            at = self.got.get(ch, 0)
            ends = self.recv_end.setdefault(ch, [])
            for j in range(3):
                t = max(t, self.arrival[ch][3 * at + j]) + c.recv
                ends.append(t)
            self.got[ch] = at + 1
            assert row.out is not None
            self.have[row.out] = True
            touched.add(ch[0])
        self.clock[r] = t
        self.pending[r].remove(task)
        self.done[r].append(task)
        return touched

    def _result(self) -> Ordered:
        per_link: dict[tuple[int, Direction], int] = {}
        size = sum(self.costs.message_bytes)
        for ch, rows in self.sent.items():
            per_link[ch] = size * len(rows)
        return Ordered(tuple(tuple(d) for d in self.done), max(self.clock), self.rule,
                       max(per_link.values(), default=0), sum(per_link.values()))
