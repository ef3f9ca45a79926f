"""The numeric check: per class of identical groups, build inputs, run the IR, compare.

Groups of one class are evaluated together (a leading batch axis), as many at once as
`chunk_bytes` of working set allows. K and V are streamed through the evaluator and never
held (sim/numerics.py); the float64 reference reads the input generator's pool
(sim/reference.py), so a 1M-context panel runs at memory speed in bounded memory.
BLAS runs single-threaded during the run (threadpoolctl): the evaluator's GEMVs are
memory-bound, and a second BLAS thread on a shared 2-core machine made them 20-40x
slower; the CLI and the benchmark run exactly this.
"""

from __future__ import annotations

import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from meshproof.errors import HarnessError
from meshproof.model.channels import ChannelTable
from meshproof.model.schedule import DType, OpKind, Schedule
from meshproof.model.topology import Endpoint
from meshproof.sim.config import NumericProgress
from meshproof.sim.groups import Group, find_groups, group_classes
from meshproof.sim.harness import (
    O_PTR,
    AttentionShape,
    Buffer,
    GroupLayout,
    Memory,
    batch_inputs,
    group_layout,
    kv_names,
    rank_memory,
)
from meshproof.sim.inputs import InputKind
from meshproof.sim.memory import GIB, MemoryEstimate, available_bytes, estimate_batch
from meshproof.sim.numerics import GroupEvaluator, GroupPlan, plan_group
from meshproof.sim.reference import reference
from meshproof.sim.result import NumericResult, RankNumeric
from meshproof.sim.rounding import F32

# Norm-relative error allowed, by the narrowest dtype the schedule uses (spec/simulator.md).
TOLERANCE = {DType.BF16: 5e-2, DType.F16: 1e-2, DType.F32: 1e-5}
TOLERANCE_RULE = ("rel_err = ||o - ref||2 / ||ref||2 per checked rank; allowed: 5e-2 if the "
                  "schedule uses bf16, else 1e-2 if it uses f16, else 1e-5 (all f32)")


def tolerance_for(schedule: Schedule) -> tuple[float, tuple[str, ...]]:
    used = {op.dtype for prog in schedule.programs for op in prog.ops}
    for dt in (DType.BF16, DType.F16):
        if dt in used:
            return TOLERANCE[dt], tuple(sorted(d.value for d in used))
    return TOLERANCE[DType.F32], tuple(sorted(d.value for d in used))


@dataclass(frozen=True, slots=True)
class ClassPlan:
    """How one class of identical groups is evaluated: its layout, op plan and batch."""

    members: tuple[int, ...]        # group indices
    layout: GroupLayout
    plan: GroupPlan
    batch: int                      # groups evaluated together
    memory: MemoryEstimate          # what one batch keeps alive


@dataclass(frozen=True, slots=True)
class NumericPlan:
    """Everything decided before any array is allocated (bad shapes and sizes fail here)."""

    shape: AttentionShape
    tolerance: float
    dtypes: tuple[str, ...]
    groups: tuple[Group, ...]
    classes: tuple[ClassPlan, ...]

    @property
    def kv_bytes_f16(self) -> int:
        """K and V of every group, counted as f16."""
        return sum(len(c.members) * c.layout.kv_bytes_f16 for c in self.classes)

    @property
    def memory(self) -> MemoryEstimate:
        """The largest batch's estimate (classes run one after another)."""
        return max((c.memory for c in self.classes), key=lambda m: m.total,
                   default=MemoryEstimate(0, 0, 0, 0))


def plan_numerics(schedule: Schedule, table: ChannelTable, chunk_bytes: int,
                  memory_limit: int | None = None,
                  kind: InputKind = InputKind.NORMAL) -> NumericPlan:
    """Shapes, groups, classes and batches; refuses (HarnessError) a run that cannot fit
    in `memory_limit` bytes (None: the memory this machine has available)."""
    shape = AttentionShape.from_schedule(schedule)
    if kind is InputKind.PEAKED and shape.scale == 0.0:
        # peaked keys are placed to score ln(kv rows) + 5 - i *after* scaling
        raise HarnessError("peaked inputs need a non-zero softmax scale (with scale 0 every "
                           "score is 0 and no key can dominate); pass another "
                           "--softmax-scale or --inputs normal")
    tol, dtypes = tolerance_for(schedule)
    groups = find_groups(schedule, table)
    available = memory_limit if memory_limit is not None else available_bytes()
    plans = []
    generated = frozenset(kv_names(schedule.launch.sharded))
    for cls in group_classes(schedule, table, groups):
        rep = groups[cls.representative]
        layout = group_layout(schedule, rep, shape)
        plan = plan_group(schedule, table, rep, generated, shape.h_kv * shape.d_head)
        one = estimate_batch(plan, layout, 1)
        per_group = one.outputs + one.intermediates + layout.q_bytes
        batch = min(len(cls.members), max(1, chunk_bytes // max(1, per_group)))
        memory = estimate_batch(plan, layout, batch)
        # smaller batches give the same numbers (spec/simulator.md §3): shrink to fit
        while available is not None and batch > 1 and memory.total > available:
            batch = max(1, batch // 2)
            memory = estimate_batch(plan, layout, batch)
        if available is not None and memory.total > available:
            raise HarnessError(_too_big(schedule, shape, len(rep.ranks), memory, available))
        plans.append(ClassPlan(cls.members, layout, plan, batch, memory))
    return NumericPlan(shape, tol, dtypes, groups, tuple(plans))


def _too_big(schedule: Schedule, shape: AttentionShape, ranks: int, memory: MemoryEstimate,
             available: int) -> str:
    sizes = ", ".join(f"{k}={v}" for k, v in (
        ("S_q", shape.S_q), ("S_kv_per_rank", shape.S_kv_per_rank), ("h_q", shape.h_q),
        ("h_kv", shape.h_kv), ("d_head", shape.d_head)))
    return (f"the numeric simulation of {schedule.launch.kernel} needs about "
            f"{memory.total / GIB:.1f} GiB at once for one group of {ranks} rank(s) "
            f"({memory.breakdown()}) with {sizes}, more than the {available / GIB:.1f} GiB "
            "available; lower S_kv_per_rank (or S_q, d_head, the head counts) with --arg, "
            "or skip the numerics (`meshproof simulate --no-numerics` runs the timing model "
            "and op log alone)")


def run_numerics(schedule: Schedule, plan: NumericPlan, seed: int, kind: InputKind,
                 phases: MutableMapping[str, float],
                 progress: Callable[[NumericProgress], None] | None = None) -> NumericResult:
    """Evaluate every class batch by batch and compare with the reference; `progress` is
    told the K/V bytes (as f16) and groups done as the run goes."""
    with _one_blas_thread():
        return _run(schedule, plan, seed, kind, phases, progress)


def _one_blas_thread() -> Any:
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def _run(schedule: Schedule, plan: NumericPlan, seed: int, kind: InputKind,
         phases: MutableMapping[str, float],
         progress: Callable[[NumericProgress], None] | None) -> NumericResult:
    groups = plan.groups
    per_rank: list[RankNumeric] = []
    max_abs_v = 0.0
    total, n_groups = plan.kv_bytes_f16, len(groups)
    done = [0, 0]       # K/V bytes streamed, groups finished
    finished = 0        # K/V bytes of the finished batches

    def streamed(nbytes: int) -> None:
        done[0] += nbytes
        if progress is not None:
            progress(NumericProgress(min(done[0], total), total, done[1], n_groups))

    for cls in plan.classes:
        layout = cls.layout
        for c0 in range(0, len(cls.members), cls.batch):
            members = cls.members[c0:c0 + cls.batch]
            t0 = time.perf_counter()
            try:
                inputs = batch_inputs(layout, members, kind, seed)
                for gi in inputs.groups:
                    max_abs_v = max(max_abs_v, gi.v.max_abs())
                t1 = time.perf_counter()
                expected = reference(inputs.groups, layout.shape.scale)
                t2 = time.perf_counter()
                memories = [rank_memory(layout, role, inputs, schedule.launch.sharded,
                                        schedule.launch.outputs)
                            for role in layout.roles]
                GroupEvaluator(cls.plan, memories, len(members), streamed).run()
            except MemoryError:
                # the estimate can fall short of the real peak: say what was expected and
                # how to shrink the run, never a traceback
                raise HarnessError(
                    f"out of memory simulating {schedule.launch.kernel} (estimated "
                    f"{cls.memory.total / GIB:.1f} GiB for {len(members)} group(s) at once: "
                    f"{cls.memory.breakdown()}); lower S_kv_per_rank (or S_q, d_head, the "
                    "head counts) with --arg, or skip the numerics (`meshproof simulate "
                    "--no-numerics`)") from None
            t3 = time.perf_counter()
            per_rank += _check_batch(schedule, plan, layout, members, memories, expected)
            del memories
            t4 = time.perf_counter()
            for name, dt in (("inputs", t1 - t0), ("reference", t2 - t1),
                             ("evaluate", t3 - t2), ("compare", t4 - t3)):
                phases[name] = phases.get(name, 0.0) + dt
            # a kernel may read K/V more or less than once: count the batch as done
            finished += len(members) * layout.kv_bytes_f16
            done[0], done[1] = finished, done[1] + len(members)
            streamed(0)
    per_rank.sort(key=lambda r: r.endpoint)
    shape = plan.shape
    return NumericResult(
        harness=shape.harness.value, inputs=kind.value, seed=seed, softmax_scale=shape.scale,
        scale_source=shape.scale_source,
        dtypes=plan.dtypes, tolerance=plan.tolerance, tolerance_rule=TOLERANCE_RULE,
        groups=len(groups), classes=len(plan.classes), per_rank=tuple(per_rank),
        max_abs_v=max_abs_v)


def _check_batch(schedule: Schedule, plan: NumericPlan, layout: GroupLayout,
                 members: tuple[int, ...], memories: list[Memory],
                 expected: npt.NDArray[np.float64]) -> list[RankNumeric]:
    """Every checked rank of a batch against its rows of the reference."""
    groups = plan.groups
    out: list[RankNumeric] = []
    if not any(role.checked for role in layout.roles):
        # no rank of this attention problem stores an output: nothing holds it
        for g in members:
            first = schedule.programs[groups[g].ranks[0]].endpoint
            out.append(RankNumeric(first, g, None, None, 0, False,
                                   f"no rank of this attention problem stores "
                                   f"{', '.join(schedule.launch.outputs)}"))
    for pos, role in enumerate(layout.roles):
        if not role.checked:
            continue
        want = expected[:, layout.out_rows(role)].reshape(len(members), -1)
        for name in schedule.launch.outputs:
            buf = memories[pos][name]
            assert isinstance(buf, Buffer)  # outputs are the harness's float32 buffers
            stores = any(op.kind is OpKind.STORE and op.ptr == name
                         for op in schedule.programs[role.rank].ops)
            for b, g in enumerate(members):
                rank = groups[g].ranks[pos]
                out.append(_compare(schedule.programs[rank].endpoint, g, buf.data[b],
                                    want[b], plan.tolerance, stores, name))
    return out


def _compare(endpoint: Endpoint, group: int, got: F32, want: npt.NDArray[np.float64],
             tol: float, stores: bool, output: str = O_PTR) -> RankNumeric:
    n = int(want.size)
    if not stores:
        return RankNumeric(endpoint, group, None, None, n, False,
                           f"never stores {output} although it holds query rows")
    g64 = got.astype(np.float64)
    bad = int(np.count_nonzero(~np.isfinite(g64)))
    if bad:
        return RankNumeric(endpoint, group, None, None, n, False,
                           f"{bad} of {n} output elements are nan/inf (non-finite or never "
                           "written)")
    diff = g64 - want
    ref_norm = float(np.linalg.norm(want))
    err_norm = float(np.linalg.norm(diff))
    rel = err_norm / ref_norm if ref_norm > 0.0 else err_norm
    max_abs = float(np.max(np.abs(diff))) if n else 0.0
    return RankNumeric(endpoint, group, rel, max_abs, n, rel <= tol)
