"""Attention harnesses: shapes from the launch, per-rank buffers (the float64 reference is
sim/reference.py).

decode  -- every rank of a group holds the whole Q (S_q rows); K/V are split by sequence:
           the j-th shard rank of the group holds KV rows [j*S_kv_per_rank, ...).
prefill -- Q is split by sequence too: the j-th rank holds Q rows [j*S_q, (j+1)*S_q)
           (S_q is the number of query rows per rank); no causal mask.

Buffers are row-major (S, heads, d). Inputs hold float16-representable numbers in float32
storage, so a kernel's f16 load needs no conversion (spec/simulator.md). The K and V
buffers are `Generated`: rows come from the input generator when a load asks for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from meshproof.errors import HarnessError
from meshproof.model.problem import (
    Problem,
    ProblemShape,
    ProblemUnavailable,
    attention_problem,
    problem_shape,
)
from meshproof.model.schedule import DType, Harness, OpKind, Schedule
from meshproof.sim.groups import Group
from meshproof.sim.inputs import GroupInput, InputKind, KVRows, group_input
from meshproof.sim.rounding import F32

Q_PTR, K_PTR, V_PTR, O_PTR = "q_ptr", "k_ptr", "v_ptr", "o_ptr"


def attention_shape(schedule: Schedule) -> ProblemShape:
    """The shapes and scale the harness builds inputs for (model/problem.py checks them,
    as for the verifier); a launch without them is bad input for the simulator."""
    try:
        return problem_shape(schedule, schedule.launch.softmax_scale)
    except ProblemUnavailable as exc:
        raise HarnessError(f"the {schedule.launch.harness.value} harness: {exc}") from None


@dataclass(frozen=True, slots=True)
class RankRole:
    """What the harness gives one rank: its KV shard and (prefill) its block of Q rows."""

    rank: int
    shard: int | None
    q_block: int | None
    checked: bool           # its o_ptr is compared with the reference


@dataclass(frozen=True, slots=True)
class GroupLayout:
    roles: tuple[RankRole, ...]     # in group order
    n_shards: int
    n_q_blocks: int
    shape: ProblemShape
    # (q_rows, kv_rows): the keys each query row may see under the launch's mask, from the
    # positions model/problem.py gives each rank's query and key rows; None: no mask
    allowed: npt.NDArray[np.bool_] | None = None

    @property
    def kv_rows(self) -> int:
        return self.n_shards * self.shape.S_kv_per_rank

    @property
    def q_rows(self) -> int:
        s = self.shape
        return s.S_q * self.n_q_blocks if s.harness is Harness.PREFILL else s.S_q

    def out_rows(self, role: RankRole) -> slice:
        if self.shape.harness is Harness.PREFILL and role.q_block is not None:
            s = self.shape.S_q
            return slice(role.q_block * s, (role.q_block + 1) * s)
        return slice(0, self.q_rows)

    @property
    def input_bytes(self) -> int:
        """float32 bytes of Q, K and V of one group (were they made whole)."""
        s = self.shape
        return 4 * s.d_head * (self.q_rows * s.h_q + 2 * self.kv_rows * s.h_kv)

    @property
    def q_bytes(self) -> int:
        return 4 * self.shape.d_head * self.q_rows * self.shape.h_q

    @property
    def kv_bytes_f16(self) -> int:
        """K and V of one group counted as f16 (what a kernel streams)."""
        return 2 * 2 * self.kv_rows * self.shape.h_kv * self.shape.d_head


def launch_problem(schedule: Schedule) -> Problem | None:
    """The launch's attention problem as the verifier derives it; None when no K and V
    buffers are named (then the load that needs one says what to pass)."""
    spec = schedule.launch
    try:
        return attention_problem(schedule, spec.groups, spec.outputs, spec.softmax_scale)
    except ProblemUnavailable:
        return None


def group_layout(schedule: Schedule, group: Group, shape: ProblemShape,
                 problem: Problem | None = None) -> GroupLayout:
    """Each rank's KV shard and Q block, as the verifier's attention problem assigns them
    (model/problem.py: one derivation, so the simulator checks the ranks the verifier
    judges, spec/semantics.md §1)."""
    if problem is None:
        problem = launch_problem(schedule)
    roles = []
    n_shards = n_q = 0
    for r in group.ranks:
        kv = None if problem is None else problem.kv_base(r)
        qb = None if problem is None else problem.q_base(r)
        shard = None if kv is None else kv // shape.S_kv_per_rank
        q_block = None if qb is None or shape.harness is not Harness.PREFILL else \
            qb // shape.S_q
        stores = any(op.kind is OpKind.STORE and op.ptr in schedule.launch.outputs
                     for op in schedule.programs[r].ops)
        # checked as the verifier judges: a rank that stores an output, and with prefill
        # a rank holding query rows (only it computes them)
        roles.append(RankRole(r, shard, q_block, stores or q_block is not None))
        n_shards += shard is not None
        n_q += q_block is not None
    allowed = None if problem is None or not group.ranks else \
        problem.allowed(problem.group_of[group.ranks[0]])
    return GroupLayout(tuple(roles), max(1, n_shards), max(1, n_q), shape, allowed)


@dataclass(frozen=True, slots=True)
class Buffer:
    """One pointer's memory for a batch of groups: (batch, elements) float32 holding
    numbers representable in `dtype`. `shared` buffers are views of harness inputs that
    several ranks see (copied before a rank writes); `fixed` ones cannot grow."""

    data: F32
    dtype: DType
    shared: bool = True
    fixed: bool = True


@dataclass(frozen=True, slots=True)
class Generated:
    """A harness K or V buffer that is never made whole: rows [row_lo, row_hi) of one
    `KVSource` (or a witness's `ArraySource`) per batch entry (f16 values). Loads of whole
    rows stream its pieces (sim/streamed.py); anything else makes the rows it needs."""

    sources: tuple[KVRows, ...]
    row_lo: int
    row_hi: int
    dtype: DType = DType.F16

    @property
    def row_elements(self) -> int:
        return self.sources[0].row_elements

    @property
    def n_elements(self) -> int:
        return (self.row_hi - self.row_lo) * self.row_elements

    def elements(self, start: int, stop: int) -> F32:
        """Elements [start, stop) of every batch entry: a new (batch, n) array."""
        re = self.row_elements
        r0, r1 = self.row_lo + start // re, self.row_lo + -(-stop // re)
        out = np.empty((len(self.sources), stop - start), np.float32)
        skip = start - (r0 - self.row_lo) * re
        for b, src in enumerate(self.sources):
            out[b] = src.block(r0, r1).reshape(-1)[skip:skip + stop - start]
        return out


Memory = dict[str, "Buffer | Generated"]


@dataclass(frozen=True, slots=True)
class GroupInputs:
    """Q, K, V of a batch of groups made whole: (batch, rows, heads, d), f16 values in
    float32 (for tests and small checks; the numeric run streams K and V instead)."""

    q: F32
    k: F32
    v: F32


@dataclass(frozen=True, slots=True)
class BatchInputs:
    """What the numeric run feeds a batch of groups: Q stacked (batch, rows, h_q, d) and
    each group's K and V sources."""

    q: F32
    groups: tuple[GroupInput, ...]


def batch_inputs(layout: GroupLayout, groups: tuple[int, ...], kind: InputKind,
                 seed: int, given: Mapping[int, GroupInput] | None = None) -> BatchInputs:
    """The inputs of `groups`: from the seeded generator, or `given` per group (a
    witness's inputs, shapes checked against the layout by the caller)."""
    s = layout.shape
    made = tuple(given[g] if given is not None else
                 group_input(seed, g, kind, layout.q_rows, layout.kv_rows, s.h_q, s.h_kv,
                             s.d_head, s.scale) for g in groups)
    q = np.stack([gi.q for gi in made]) if made else \
        np.empty((0, layout.q_rows, s.h_q, s.d_head), np.float32)
    return BatchInputs(q, made)


def make_inputs(layout: GroupLayout, groups: tuple[int, ...], kind: InputKind,
                seed: int) -> GroupInputs:
    """The inputs of `groups` made whole (what the numeric run streams)."""
    made = batch_inputs(layout, groups, kind, seed)
    k = np.stack([gi.k.block(0, gi.k.rows) for gi in made.groups])
    v = np.stack([gi.v.block(0, gi.v.rows) for gi in made.groups])
    return GroupInputs(made.q, k, v)


def kv_names(sharded: tuple[str, ...]) -> tuple[str, str]:
    """The buffers holding K and V: the first two `--sharded` names (default k_ptr, v_ptr)."""
    return (sharded[0], sharded[1]) if len(sharded) >= 2 else (K_PTR, V_PTR)


def rank_memory(layout: GroupLayout, role: RankRole, inputs: BatchInputs,
                sharded: tuple[str, ...], outputs: tuple[str, ...] = (O_PTR,)
                ) -> Memory:
    s = layout.shape
    b = inputs.q.shape[0]
    q = inputs.q
    if s.harness is Harness.PREFILL and role.q_block is not None:
        q = q[:, layout.out_rows(role)]
    mem: Memory = {Q_PTR: Buffer(q.reshape(b, -1), DType.F16)}
    k_name, v_name = kv_names(sharded)
    for name, sources in ((k_name, tuple(gi.k for gi in inputs.groups)),
                          (v_name, tuple(gi.v for gi in inputs.groups))):
        lo, hi = 0, layout.kv_rows
        if name in sharded and role.shard is not None:
            lo, hi = role.shard * s.S_kv_per_rank, (role.shard + 1) * s.S_kv_per_rank
        mem[name] = Generated(sources, lo, hi)
    rows_out = layout.out_rows(role)
    n_out = (rows_out.stop - rows_out.start) * s.h_q * s.d_head
    for name in outputs:
        mem[name] = Buffer(np.full((b, n_out), np.nan, np.float32), DType.F32, shared=False)
    return mem
