"""Attention harnesses: shapes from the launch, per-rank buffers, the float64 reference.

decode  -- every rank of a group holds the whole Q (S_q rows); K/V are split by sequence:
           the j-th shard rank of the group holds KV rows [j*S_kv_per_rank, ...).
prefill -- Q is split by sequence too: the j-th rank holds Q rows [j*S_q, (j+1)*S_q)
           (S_q is the number of query rows per rank); no causal mask.

Buffers are row-major (S, heads, d). Inputs hold float16-representable numbers in float32
storage, so a kernel's f16 load needs no conversion (spec/simulator.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from meshproof.errors import HarnessError
from meshproof.model.problem import holds_shard, reference_scale
from meshproof.model.schedule import DType, Harness, OpKind, Schedule
from meshproof.sim.groups import Group
from meshproof.sim.inputs import InputKind, fill_inputs
from meshproof.sim.rounding import F32

F64 = npt.NDArray[np.float64]
Q_PTR, K_PTR, V_PTR, O_PTR = "q_ptr", "k_ptr", "v_ptr", "o_ptr"
# float64 bytes per reference chunk of K (or V): large enough that the per-chunk numpy
# calls cost little next to the float32 -> float64 conversion.
REF_CHUNK_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class AttentionShape:
    harness: Harness
    S_q: int
    S_kv_per_rank: int
    h_q: int
    h_kv: int
    d_head: int
    scale: float
    scale_source: str = ""      # where the reference's scale comes from, in words

    @property
    def group_size(self) -> int:
        return self.h_q // self.h_kv

    @staticmethod
    def from_schedule(schedule: Schedule) -> AttentionShape:
        spec = schedule.launch

        def dim(name: str, default: int | None = None) -> int:
            value = spec.arg(name, default)
            if value is None:
                raise HarnessError(
                    f"the {spec.harness.value} harness needs kernel argument {name} (the kernel "
                    f"{spec.kernel} has none); pass --arg {name}=N")
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise HarnessError(f"kernel argument {name}={value!r} must be a positive int "
                                   f"for the simulator's harness; pass --arg {name}=N with "
                                   "N >= 1")
            return value

        d_head = dim("d_head")
        h_q, h_kv = dim("h_q", 1), dim("h_kv", 1)
        if h_q % h_kv:
            raise HarnessError(f"h_q={h_q} must be a multiple of h_kv={h_kv} (each kv head "
                               "serves h_q/h_kv q heads); pass --arg h_q=... a multiple of h_kv")
        sm_scale = spec.arg("sm_scale")
        if sm_scale is not None and not (
                isinstance(sm_scale, (int, float)) and not isinstance(sm_scale, bool) and
                math.isfinite(sm_scale)):
            raise HarnessError(f"sm_scale={sm_scale!r} must be a finite number; pass "
                               "--softmax-scale X (or leave it out for 1/sqrt(d_head))")
        scale, source = reference_scale(schedule, spec.softmax_scale, d_head)
        return AttentionShape(spec.harness, dim("S_q"), dim("S_kv_per_rank"), h_q, h_kv,
                              d_head, scale, source)


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
    shape: AttentionShape

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
        """float32 bytes of Q, K and V of one group."""
        s = self.shape
        return 4 * s.d_head * (self.q_rows * s.h_q + 2 * self.kv_rows * s.h_kv)


def group_layout(schedule: Schedule, group: Group, shape: AttentionShape) -> GroupLayout:
    sharded = set(schedule.launch.sharded)
    loads: list[set[str]] = []
    stores: list[bool] = []
    for r in group.ranks:
        ops = schedule.programs[r].ops
        loads.append({op.ptr for op in ops if op.kind is OpKind.LOAD and op.ptr})
        stores.append(any(op.kind is OpKind.STORE and op.ptr in schedule.launch.outputs
                          for op in ops))
    shard_ranks = [r for r in group.ranks
                   if holds_shard(schedule.programs[r], sharded, schedule.launch.outputs)]
    q_ranks = [r for r, ld in zip(group.ranks, loads, strict=True) if Q_PTR in ld]
    roles = []
    for r, st in zip(group.ranks, stores, strict=True):
        shard = shard_ranks.index(r) if r in shard_ranks else None
        q_block = q_ranks.index(r) if shape.harness is Harness.PREFILL and r in q_ranks else None
        # checked as the verifier judges (spec/semantics.md §1): a rank that stores an
        # output, and with prefill a rank holding query rows (only it computes them)
        roles.append(RankRole(r, shard, q_block, st or q_block is not None))
    return GroupLayout(tuple(roles), max(1, len(shard_ranks)), max(1, len(q_ranks)), shape)


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
class GroupInputs:
    """Q, K, V of a batch of groups: (batch, rows, heads, d), f16 values in float32."""

    q: F32
    k: F32
    v: F32


def make_inputs(layout: GroupLayout, groups: tuple[int, ...], kind: InputKind, seed: int,
                reuse: GroupInputs | None = None) -> GroupInputs:
    """Inputs of `groups`; refills `reuse` when its shapes fit (fresh pages cost more than
    the fill itself on some machines)."""
    s = layout.shape
    b = len(groups)
    q_shape = (b, layout.q_rows, s.h_q, s.d_head)
    kv_shape = (b, layout.kv_rows, s.h_kv, s.d_head)
    if reuse is not None and reuse.q.shape[1:] == q_shape[1:] and \
            reuse.k.shape[1:] == kv_shape[1:] and reuse.q.shape[0] >= b:
        inputs = GroupInputs(reuse.q[:b], reuse.k[:b], reuse.v[:b])
    else:
        inputs = GroupInputs(np.empty(q_shape, np.float32), np.empty(kv_shape, np.float32),
                             np.empty(kv_shape, np.float32))
    for i, g in enumerate(groups):
        fill_inputs(inputs.q[i], inputs.k[i], inputs.v[i], kind, seed, g, s.scale)
    return inputs


def kv_names(sharded: tuple[str, ...]) -> tuple[str, str]:
    """The buffers holding K and V: the first two `--sharded` names (default k_ptr, v_ptr)."""
    return (sharded[0], sharded[1]) if len(sharded) >= 2 else (K_PTR, V_PTR)


def rank_memory(layout: GroupLayout, role: RankRole, inputs: GroupInputs,
                sharded: tuple[str, ...], outputs: tuple[str, ...] = (O_PTR,)
                ) -> dict[str, Buffer]:
    s = layout.shape
    b = inputs.q.shape[0]
    q = inputs.q
    if s.harness is Harness.PREFILL and role.q_block is not None:
        q = q[:, layout.out_rows(role)]
    mem = {Q_PTR: Buffer(q.reshape(b, -1), DType.F16)}
    for name, full in zip(kv_names(sharded), (inputs.k, inputs.v), strict=True):
        part = full
        if name in sharded and role.shard is not None:
            rows = s.S_kv_per_rank
            part = full[:, role.shard * rows:(role.shard + 1) * rows]
        mem[name] = Buffer(part.reshape(b, -1), DType.F16)
    rows_out = layout.out_rows(role)
    n_out = (rows_out.stop - rows_out.start) * s.h_q * s.d_head
    for name in outputs:
        mem[name] = Buffer(np.full((b, n_out), np.nan, np.float32), DType.F32, shared=False)
    return mem


def reference_chunk_rows(batch: int, shape: AttentionShape) -> int:
    """KV rows per step of the reference's online softmax."""
    return max(64, REF_CHUNK_BYTES // (8 * batch * shape.h_kv * shape.d_head))


def reference(layout: GroupLayout, inputs: GroupInputs) -> F64:
    """Dense float64 GQA attention: (batch, q_rows, h_q, d). Online softmax over chunks
    of KV rows, so K and V are never converted to float64 as a whole."""
    s = layout.shape
    b, rows = inputs.q.shape[0], layout.q_rows
    g = s.group_size
    qh = inputs.q.astype(np.float64).reshape(b, rows, s.h_kv, g, s.d_head)
    qh = qh.transpose(0, 2, 1, 3, 4).reshape(b, s.h_kv, rows * g, s.d_head) * s.scale
    m = np.full((b, s.h_kv, rows * g, 1), -np.inf)
    ell = np.zeros((b, s.h_kv, rows * g, 1))
    acc = np.zeros((b, s.h_kv, rows * g, s.d_head))
    chunk = reference_chunk_rows(b, s)
    kbuf = np.empty((b, chunk, s.h_kv, s.d_head))
    vbuf = np.empty_like(kbuf)
    for c0 in range(0, layout.kv_rows, chunk):
        n = min(chunk, layout.kv_rows - c0)
        kc, vc = kbuf[:, :n], vbuf[:, :n]
        np.copyto(kc, inputs.k[:, c0:c0 + n])
        np.copyto(vc, inputs.v[:, c0:c0 + n])
        scores = qh @ kc.transpose(0, 2, 3, 1)            # (b, h_kv, rows*g, n)
        m_new = np.maximum(m, scores.max(axis=-1, keepdims=True))
        alpha = np.exp(m - m_new)
        p = np.exp(scores - m_new)
        ell = ell * alpha + p.sum(axis=-1, keepdims=True)
        acc = acc * alpha + p @ vc.transpose(0, 2, 1, 3)
        m = m_new
    out = acc / ell                                        # (b, h_kv, rows*g, d)
    out = out.reshape(b, s.h_kv, rows, g, s.d_head).transpose(0, 2, 1, 3, 4)
    return np.ascontiguousarray(out.reshape(b, rows, s.h_q, s.d_head))
