"""The attention problem a launch computes: shapes, scale, groups, shards and outputs.

Shared by the verifier (what outputs must equal) and the simulator (what inputs to make
and what to compare with). A *group* is one attention problem: one Q, and KV split over
the group's shard ranks in rank order. By default the whole launch is one group; `cube`
makes each cube its own problem, `pe` each PE index (batch-on-batch: PE p of every cube
serves user p). Groups come from the launch, never from the wiring, so a kernel that
forgets its all-reduce on a wiring that does not join its ranks is wrong, not vacuous.

decode  -- every rank holds the whole Q (S_q rows); shard j holds KV rows
           [j*S_kv_per_rank, (j+1)*S_kv_per_rank) of its group.
prefill -- Q is split by sequence as well: the b-th Q-holding rank of a group holds rows
           [b*S_q, (b+1)*S_q); its output rows are the same.

A launch may declare a mask (model/masks.py): then each row has a sequence position --
key rows of shard j and (prefill) query rows of block b by the mask's layout, decode query
rows the last S_q positions of the group's keys -- and the reference attends to the keys
the predicate allows (`positions`, `allowed`).

Buffers are row-major (rows, heads, d): Q and O have h_q heads, K and V h_kv heads; q head
h reads kv head h // (h_q / h_kv) (blocked GQA).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from meshproof.model.masks import Allowed, Layout, Mask, Positions, block_positions
from meshproof.model.schedule import (
    DEFAULT_OUTPUTS,
    GroupMode,
    Harness,
    OpKind,
    RankProgram,
    Schedule,
)

# numeric_safety's assumption when none is given: |every input element| <= this
DEFAULT_INPUT_BOUND = 16.0
Q_PTR = "q_ptr"
O_PTR = "o_ptr"


class ProblemUnavailable(Exception):
    """The launch does not describe an attention problem; the message says why."""


@dataclass(frozen=True, slots=True)
class ProblemShape:
    """The shapes and scale of the attention problem a launch computes: what the verifier's
    Problem and the simulator's harness both read (`problem_shape` checks them, once)."""

    harness: Harness
    S_q: int
    S_kv_per_rank: int
    h_q: int
    h_kv: int
    d_head: int
    scale: float
    scale_source: str               # where the scale came from, in words

    @property
    def gqa(self) -> int:
        return self.h_q // self.h_kv


@dataclass(frozen=True, slots=True)
class ProblemGroup:
    index: int
    ranks: tuple[int, ...]       # rank indices (into Schedule.programs), in endpoint order
    shards: tuple[int, ...]      # the ranks holding KV, shard j = position j
    q_blocks: tuple[int, ...]    # prefill: the ranks holding Q rows, block b = position b

    @property
    def n_shards(self) -> int:
        return len(self.shards)


@dataclass(frozen=True, slots=True)
class Problem(ProblemShape):
    """The shapes (ProblemShape) and the groups: who holds which KV shard and Q block."""

    mode: GroupMode
    groups: tuple[ProblemGroup, ...]
    group_of: tuple[int, ...]       # per rank: its group index
    k_ptr: str
    v_ptr: str
    outputs: tuple[str, ...]
    empty: frozenset[int] = frozenset()     # rank indices whose KV slice is empty
    mask: Mask | None = None                # the launch's mask; None: every key allowed

    def kv_rows(self, group: int) -> int:
        return self.groups[group].n_shards * self.S_kv_per_rank

    def q_rows(self, group: int) -> int:
        g = self.groups[group]
        if self.harness is Harness.PREFILL:
            return self.S_q * max(1, len(g.q_blocks))
        return self.S_q

    def q_base(self, rank: int) -> int | None:
        """First Q row of `rank`'s q buffer (and output rows); None if it holds none."""
        g = self.groups[self.group_of[rank]]
        if self.harness is Harness.PREFILL:
            return g.q_blocks.index(rank) * self.S_q if rank in g.q_blocks else None
        return 0

    def kv_base(self, rank: int) -> int | None:
        g = self.groups[self.group_of[rank]]
        return g.shards.index(rank) * self.S_kv_per_rank if rank in g.shards else None

    def positions(self, group: int) -> tuple[Positions, Positions]:
        """Sequence positions of the group's query rows and key rows, in row order."""
        g = self.groups[group]
        layout = self.mask.layout if self.mask is not None else Layout.CONTIGUOUS
        n_kv = max(1, g.n_shards)
        keys = np.concatenate([block_positions(layout, j, n_kv, self.S_kv_per_rank)
                               for j in range(n_kv)])
        if self.harness is Harness.PREFILL:
            n_q = max(1, len(g.q_blocks))
            queries = np.concatenate([block_positions(layout, b, n_q, self.S_q)
                                      for b in range(n_q)])
        else:   # decode: the queries are the sequence's last S_q positions
            queries = n_kv * self.S_kv_per_rank - self.S_q + np.arange(self.S_q)
        return queries, keys

    def rank_positions(self, rank: int) -> tuple[Positions | None, Positions | None]:
        """Sequence positions of one rank's query rows and key slice (None: it holds none),
        the slices of `positions` the harness gives the rank."""
        queries, keys = self.positions(self.group_of[rank])
        qb, kb = self.q_base(rank), self.kv_base(rank)
        q = None if qb is None else queries[qb:qb + self.S_q]
        k = None if kb is None else keys[kb:kb + self.S_kv_per_rank]
        return q, k

    @property
    def position_rows(self) -> bool:
        """Whether the verifier indexes Q, K, V and the output's rows by sequence position
        (a masked prefill in the zigzag layout: a block's two chunks are affine in the
        digits (half, row), and the keys a query merges are one interval of positions)."""
        return self.mask is not None and self.mask.layout is Layout.ZIGZAG and \
            self.harness is Harness.PREFILL

    def allowed(self, group: int) -> Allowed | None:
        """(query rows, key rows) of the group: which keys each query attends to; None
        without a mask (all of them)."""
        if self.mask is None:
            return None
        queries, keys = self.positions(group)
        return self.mask.allowed(queries, keys)

    def describe_groups(self) -> str:
        n = len(self.groups)
        sizes = sorted({(len(g.ranks), g.n_shards) for g in self.groups})
        parts = ", ".join(f"{r} rank(s) with {s} KV shard(s)" for r, s in sizes)
        return f"{n} group(s) by {self.mode.value} ({parts})"


def _dim(schedule: Schedule, name: str, default: int | None = None) -> int:
    value = schedule.launch.arg(name, default)
    if value is None:
        raise ProblemUnavailable(f"the kernel {schedule.launch.kernel} has no argument {name}: "
                                 f"meshproof cannot tell the attention shapes; pass --arg "
                                 f"{name}=N")
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ProblemUnavailable(f"kernel argument {name}={value!r} must be a positive int "
                                 f"for the attention problem; pass --arg {name}=N with N >= 1")
    return value


def problem_shape(schedule: Schedule, softmax_scale: float | None = None) -> ProblemShape:
    """The launch's attention shapes and scale, checked (ProblemUnavailable, with the
    fix): the one place the kernel arguments d_head, h_q, h_kv, S_q, S_kv_per_rank and
    sm_scale are read as an attention problem."""
    spec = schedule.launch
    d_head = _dim(schedule, "d_head")
    h_q, h_kv = _dim(schedule, "h_q", 1), _dim(schedule, "h_kv", 1)
    if h_q % h_kv:
        raise ProblemUnavailable(f"h_q={h_q} must be a multiple of h_kv={h_kv} (each kv head "
                                 "serves h_q/h_kv q heads); pass --arg h_q=... a multiple of "
                                 "h_kv")
    sm_scale = spec.arg("sm_scale")
    if sm_scale is not None and not (
            isinstance(sm_scale, (int, float)) and not isinstance(sm_scale, bool) and
            math.isfinite(sm_scale)):
        raise ProblemUnavailable(f"sm_scale={sm_scale!r} must be a finite number; pass "
                                 "--softmax-scale X (or leave it out for 1/sqrt(d_head))")
    S_q, S_kv = _dim(schedule, "S_q"), _dim(schedule, "S_kv_per_rank")
    scale, source = reference_scale(schedule, softmax_scale, d_head)
    return ProblemShape(spec.harness, S_q, S_kv, h_q, h_kv, d_head, scale, source)


def group_ranks(schedule: Schedule, mode: GroupMode) -> list[list[int]]:
    by_key: dict[int, list[int]] = {}
    for r, prog in enumerate(schedule.programs):
        key = 0 if mode is GroupMode.LAUNCH else \
            prog.endpoint.cube if mode is GroupMode.CUBE else prog.endpoint.pe
        by_key.setdefault(key, []).append(r)
    return [by_key[k] for k in sorted(by_key)]


def reference_scale(schedule: Schedule, softmax_scale: float | None,
                    d_head: int) -> tuple[float, str]:
    sm = schedule.launch.arg("sm_scale")
    if isinstance(sm, (int, float)) and not isinstance(sm, bool) and math.isfinite(sm):
        if softmax_scale is not None and float(sm) == softmax_scale:
            return softmax_scale, f"--softmax-scale {softmax_scale:g}, which the kernel's " \
                "sm_scale receives"
        usual = 1.0 / math.sqrt(d_head)
        # a default such as sm_scale=1.0 is what the reference follows: say so
        aside = "" if abs(float(sm) - usual) <= usual * 2.0 ** -20 else \
            f"; not 1/sqrt(d_head) = {usual:g}"
        return float(sm), f"the kernel's sm_scale = {float(sm):g}{aside}"
    if softmax_scale is not None:
        return softmax_scale, f"--softmax-scale {softmax_scale:g}"
    return 1.0 / math.sqrt(d_head), f"1/sqrt(d_head) = 1/sqrt({d_head})"


def holds_shard(program: RankProgram, sharded: Collection[str | None],
                outputs: Collection[str | None]) -> bool:
    """Whether the launch gives this rank a KV slice: every rank that takes part in its
    group -- loads K or V, sends, receives, or stores an output -- holds one (idle PEs that
    do nothing stay out), so a slice a rank never loads is a slice never merged."""
    for op in program.ops:
        if op.kind is OpKind.LOAD and op.ptr in sharded:
            return True
        if op.kind in (OpKind.SEND, OpKind.RECV):
            return True
        if op.kind is OpKind.STORE and op.ptr in outputs:
            return True
    return False


def attention_problem(schedule: Schedule, mode: GroupMode = GroupMode.LAUNCH,
                      outputs: tuple[str, ...] = DEFAULT_OUTPUTS,
                      softmax_scale: float | None = None) -> Problem:
    spec = schedule.launch
    harness = spec.harness
    if len(spec.sharded) < 2:
        raise ProblemUnavailable("name the K and V buffers with --sharded K_PTR,V_PTR (two "
                                 f"buffers; got {', '.join(spec.sharded) or 'none'})")
    k_ptr, v_ptr = spec.sharded[0], spec.sharded[1]
    shape = problem_shape(schedule, softmax_scale)
    groups: list[ProblemGroup] = []
    group_of = [0] * len(schedule.programs)
    sharded = set(spec.sharded)
    for gi, ranks in enumerate(group_ranks(schedule, mode)):
        shards, q_blocks = [], []
        for r in ranks:
            group_of[r] = gi
            prog = schedule.programs[r]
            loads = {op.ptr for op in prog.ops if op.kind is OpKind.LOAD}
            if holds_shard(prog, sharded, outputs):
                shards.append(r)
            if Q_PTR in loads:
                q_blocks.append(r)
        groups.append(ProblemGroup(gi, tuple(ranks), tuple(shards), tuple(q_blocks)))
    # empty slices (--empty-shard) are numeric_safety's question only: it re-evaluates
    # with `empty` set; every other analysis judges the launch as it is
    return Problem(harness, shape.S_q, shape.S_kv_per_rank, shape.h_q, shape.h_kv,
                   shape.d_head, shape.scale, shape.scale_source, mode, tuple(groups),
                   tuple(group_of), k_ptr, v_ptr, outputs, mask=spec.mask)
