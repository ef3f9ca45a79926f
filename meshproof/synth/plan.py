"""The plan IR: which partial states move over which links and merge where, before any
program order is chosen (design note synthesis §1), and its plan-level exactly-once check.

A *state* is a partial (m, ℓ, o) triplet on one rank covering a set of KV shards. States
0..n-1 are the ranks' own partials ({r} on rank r). A row either transfers a state over one
link unchanged, merges two states on one rank, or names a rank's output state. The check
is a disjoint-union check on shard sets (MSCCLang's multiset-of-origins check): it keeps
the search away from candidates that cannot prove. It is not the verdict; `meshproof
verify` of the emitted file is.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from meshproof.errors import PlanError
from meshproof.synth.graph import RankGraph


class RowKind(Enum):
    TRANSFER = "transfer"
    MERGE = "merge"
    OUTPUT = "output"


class Family(Enum):
    LINE_SEGMENT = "line_segment"
    ROWS_FIRST = "rows_first"
    COLUMNS_FIRST = "columns_first"
    ROWS_THEN_COLUMNS = "rows_then_columns"
    COLUMNS_THEN_ROWS = "columns_then_rows"
    TREE = "tree"
    FANOUT = "fanout"
    RING = "ring"
    HALVES = "halves"


@dataclass(frozen=True, slots=True)
class Row:
    """One plan row. TRANSFER: `args[0]` goes from `rank` to `dst` and becomes `out` there;
    MERGE: `args` (two states on `rank`) become `out`; OUTPUT: `args[0]` is `rank`'s output."""

    kind: RowKind
    rank: int
    args: tuple[int, ...]
    out: int | None = None
    dst: int | None = None

    def describe(self) -> str:
        if self.kind is RowKind.TRANSFER:
            return f"transfer of state {self.args[0]} from rank {self.rank} to rank {self.dst}"
        if self.kind is RowKind.MERGE:
            return f"merge on rank {self.rank} of states {self.args[0]} and {self.args[1]}"
        return f"output of rank {self.rank} (state {self.args[0]})"


@dataclass(frozen=True, slots=True)
class Plan:
    """A named plan over n ranks; rows in an order where every state is made before use."""

    name: str
    family: Family
    n: int
    rows: tuple[Row, ...]


@dataclass(frozen=True, slots=True)
class CheckedPlan:
    """A plan that passed `check_plan`: each state's rank and shard set, and its hop depth."""

    plan: Plan
    state_rank: tuple[int, ...]
    shards: tuple[frozenset[int], ...]
    depth: int                  # the longest chain of transfers (the plan's comm steps)


def check_plan(plan: Plan, graph: RankGraph) -> CheckedPlan:
    """Raise PlanError naming the first row that could not prove exactly-once merging (or
    uses a link the wiring lacks); else the plan's states."""
    n = plan.n
    if n != graph.n:
        raise PlanError(f"plan {plan.name} is for {n} ranks but the launch has {graph.n}")
    rank_of: dict[int, int] = {r: r for r in range(n)}
    shards: dict[int, frozenset[int]] = {r: frozenset({r}) for r in range(n)}
    hops: dict[int, int] = dict.fromkeys(range(n), 0)
    outputs: dict[int, int] = {}
    for i, row in enumerate(plan.rows):
        where = f"plan {plan.name}, row {i} ({row.describe()})"
        for a in row.args:
            if a not in shards:
                raise PlanError(f"{where}: state {a} is used before any row makes it; "
                                "order the rows so that states are made first")
            if rank_of[a] != row.rank:
                raise PlanError(f"{where}: state {a} is on rank {rank_of[a]}, not on rank "
                                f"{row.rank}; transfer it first")
        if row.kind is RowKind.OUTPUT:
            if row.rank in outputs:
                raise PlanError(f"{where}: rank {row.rank} already has an output (row "
                                f"{outputs[row.rank]}); keep one output row per rank")
            outputs[row.rank] = i
            missing = sorted(set(range(n)) - shards[row.args[0]])
            if missing:
                raise PlanError(f"{where}: the output misses the partial(s) of rank(s) "
                                f"{_ranks(missing)}; merge them before the output")
            continue
        if row.out is None or row.out in shards:
            raise PlanError(f"{where}: every transfer and merge makes a new state; state "
                            f"{row.out} is made twice")
        if row.kind is RowKind.TRANSFER:
            if row.dst is None or graph.port(row.rank, row.dst) is None:
                raise PlanError(f"{where}: the wiring has no link from rank {row.rank} to "
                                f"rank {row.dst}; route the state over linked ranks")
            rank_of[row.out] = row.dst
            shards[row.out] = shards[row.args[0]]
            hops[row.out] = hops[row.args[0]] + 1
            continue
        a, b = row.args
        twice = sorted(shards[a] & shards[b])
        if twice:
            raise PlanError(f"{where}: the partial(s) of rank(s) {_ranks(twice)} would be "
                            f"merged twice (both states hold them); merge disjoint states only")
        rank_of[row.out] = row.rank
        shards[row.out] = shards[a] | shards[b]
        hops[row.out] = max(hops[a], hops[b])
    lacking = sorted(set(range(n)) - set(outputs))
    if lacking:
        raise PlanError(f"plan {plan.name}: rank(s) {_ranks(lacking)} have no output row; "
                        "give every rank one output state")
    size = max(shards) + 1
    return CheckedPlan(plan, tuple(rank_of.get(s, -1) for s in range(size)),
                       tuple(shards.get(s, frozenset()) for s in range(size)),
                       max(hops[plan.rows[i].args[0]] for i in outputs.values()))


def _ranks(ranks: list[int]) -> str:
    shown = ", ".join(str(r) for r in ranks[:8])
    return shown + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")


class PlanBuilder:
    """Rows appended in a valid order; state ids handed out in sequence."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.rows: list[Row] = []
        self.rank_of: list[int] = list(range(n))

    def _new(self, rank: int) -> int:
        self.rank_of.append(rank)
        return len(self.rank_of) - 1

    def transfer(self, state: int, dst: int) -> int:
        out = self._new(dst)
        self.rows.append(Row(RowKind.TRANSFER, self.rank_of[state], (state,), out, dst))
        return out

    def merge(self, a: int, b: int) -> int:
        rank = self.rank_of[a]
        out = self._new(rank)
        self.rows.append(Row(RowKind.MERGE, rank, (a, b), out))
        return out

    def output(self, state: int) -> None:
        self.rows.append(Row(RowKind.OUTPUT, self.rank_of[state], (state,)))

    def build(self, name: str, family: Family) -> Plan:
        return Plan(name, family, self.n, tuple(self.rows))
