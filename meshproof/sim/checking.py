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

import threading
import time
from collections.abc import Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from meshproof.errors import HarnessError, TimeBudgetExceeded
from meshproof.model.channel_table import ChannelTable
from meshproof.model.problem import ProblemShape
from meshproof.model.schedule import OpKind, Schedule
from meshproof.model.tolerance import TOLERANCE_RULE, tolerance_for
from meshproof.model.topology import Endpoint
from meshproof.model.witness_file import Witness
from meshproof.sim.config import NumericProgress
from meshproof.sim.groups import Group, find_groups, group_classes
from meshproof.sim.harness import (
    O_PTR,
    Buffer,
    GroupLayout,
    Memory,
    attention_shape,
    batch_inputs,
    group_layout,
    kv_names,
    launch_problem,
    rank_memory,
)
from meshproof.sim.inputs import InputKind
from meshproof.sim.memory import GIB, MemoryEstimate, available_bytes, estimate_batch
from meshproof.sim.numerics import GroupEvaluator, GroupPlan, plan_group
from meshproof.sim.reference import reference
from meshproof.sim.result import NumericResult, RankNumeric, WitnessReplay
from meshproof.sim.rounding import F32
from meshproof.sim.witness import ReplayPlan, plan_replay, replay_value

# the norm-relative error allowed, by the narrowest dtype used (spec/simulator.md), is
# model/tolerance.py's table, shared with numeric_safety's default tolerance


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

    shape: ProblemShape
    tolerance: float
    dtypes: tuple[str, ...]
    groups: tuple[Group, ...]
    classes: tuple[ClassPlan, ...]
    replay: ReplayPlan | None = None    # --witness: its inputs replace the seeded ones

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
                  kind: InputKind = InputKind.NORMAL, workers: int = 1,
                  witness: Witness | None = None) -> NumericPlan:
    """Shapes, groups, classes and batches; refuses (HarnessError) a run that cannot fit
    in `memory_limit` bytes (None: the memory this machine has available). With several
    `workers` (batches evaluated at once, in threads) a class is split into at least that
    many batches where it can be, and that many batches must fit at once. A `witness`
    whose inputs do not fit the launch is refused here (WitnessFileError)."""
    shape = attention_shape(schedule)
    if witness is None and kind is InputKind.PEAKED and shape.scale == 0.0:
        # peaked keys are placed to score ln(kv rows) + 5 - i *after* scaling
        raise HarnessError("peaked inputs need a non-zero softmax scale (with scale 0 every "
                           "score is 0 and no key can dominate); pass another "
                           "--softmax-scale or --inputs normal")
    tol, dtypes = tolerance_for(schedule)
    groups = find_groups(schedule, table)
    problem = launch_problem(schedule)
    replay = plan_replay(schedule, problem, groups, witness) if witness is not None else None
    available = memory_limit if memory_limit is not None else available_bytes()
    plans = []
    generated = frozenset(kv_names(schedule.launch.sharded))
    for cls in group_classes(schedule, table, groups):
        rep = groups[cls.representative]
        layout = group_layout(schedule, rep, shape, problem)
        plan = plan_group(schedule, table, rep, generated, shape.h_kv * shape.d_head)
        one = estimate_batch(plan, layout, 1)
        per_group = one.outputs + one.intermediates + layout.q_bytes
        batch = min(len(cls.members), max(1, chunk_bytes // max(1, per_group)),
                    -(-len(cls.members) // max(1, workers)))
        memory = estimate_batch(plan, layout, batch)
        at_once = max(1, min(workers, -(-len(cls.members) // batch)))
        # smaller batches give the same numbers (spec/simulator.md §3): shrink to fit
        while available is not None and batch > 1 and at_once * memory.total > available:
            batch = max(1, batch // 2)
            memory = estimate_batch(plan, layout, batch)
        if available is not None and memory.total > available:
            raise HarnessError(_too_big(schedule, shape, len(rep.ranks), memory, available))
        plans.append(ClassPlan(cls.members, layout, plan, batch, memory))
    return NumericPlan(shape, tol, dtypes, groups, tuple(plans), replay)


def _too_big(schedule: Schedule, shape: ProblemShape, ranks: int, memory: MemoryEstimate,
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
                 progress: Callable[[NumericProgress], None] | None = None,
                 workers: int = 1, deadline: float | None = None,
                 overrun: str = "") -> NumericResult:
    """Evaluate every class batch by batch and compare with the reference; `progress` is
    told the K/V bytes (as f16) and groups done as the run goes. With `workers` > 1,
    that many batches run at once in threads (numpy and BLAS release the GIL); results
    do not depend on it. `phases` sums the batches' seconds (thread-seconds). Past
    `deadline` (time.monotonic()) the run stops at its next streamed piece or batch with
    TimeBudgetExceeded(`overrun` and how far it got)."""
    with _one_blas_thread():
        return _run(schedule, plan, seed, kind, phases, progress, workers, deadline, overrun)


def _one_blas_thread() -> Any:
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


@dataclass(frozen=True, slots=True)
class _BatchResult:
    per_rank: tuple[RankNumeric, ...]
    max_abs_v: float
    phases: tuple[tuple[str, float], ...]
    witness: WitnessReplay | None = None


class _Cancelled(Exception):
    """Another batch failed or the run was interrupted: stop this one."""


def _run(schedule: Schedule, plan: NumericPlan, seed: int, kind: InputKind,
         phases: MutableMapping[str, float],
         progress: Callable[[NumericProgress], None] | None, workers: int,
         deadline: float | None = None, overrun: str = "") -> NumericResult:
    groups = plan.groups
    total, n_groups = plan.kv_bytes_f16, len(groups)
    lock = threading.Lock()
    cancel = threading.Event()
    done = [0, 0, 0]    # K/V bytes streamed in running batches, groups done, bytes done

    def streamed(nbytes: int) -> None:
        if deadline is not None and time.monotonic() > deadline:
            # every batch sees the deadline itself, so each ends with this error
            raise TimeBudgetExceeded(f"{overrun} ({_share(done[2] + done[0], total)} of the "
                                     f"K/V streamed, {done[1]} of {n_groups} group(s) done)")
        if cancel.is_set():
            raise _Cancelled
        with lock:
            done[0] += nbytes
            if progress is not None:
                progress(NumericProgress(min(done[2] + done[0], total), total, done[1],
                                         n_groups))

    def finished(members: int, nbytes: int, streamed_bytes: int) -> None:
        # a kernel may read K/V more or less than once: count the batch as done
        with lock:
            done[0] -= streamed_bytes
            done[1] += members
            done[2] += nbytes
        streamed(0)

    jobs = [(cls, cls.members[c0:c0 + cls.batch]) for cls in plan.classes
            for c0 in range(0, len(cls.members), cls.batch)]

    def job(item: tuple[ClassPlan, tuple[int, ...]]) -> _BatchResult:
        cls, members = item
        counted = [0]
        streamed(0)     # the budget and cancellation, before each batch

        def tick(nbytes: int) -> None:
            counted[0] += nbytes
            streamed(nbytes)

        result = _run_batch(schedule, plan, cls, members, seed, kind, tick)
        finished(len(members), len(members) * cls.layout.kv_bytes_f16, counted[0])
        return result

    if workers > 1 and len(jobs) > 1:
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="meshproof-sim")
        try:
            results = list(pool.map(job, jobs))
        except BaseException:
            cancel.set()     # the other batches stop at their next streamed dot
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    else:
        results = [job(item) for item in jobs]
    per_rank = [r for res in results for r in res.per_rank]
    for res in results:
        for name, dt in res.phases:
            phases[name] = phases.get(name, 0.0) + dt
    per_rank.sort(key=lambda r: r.endpoint)
    shape = plan.shape
    return NumericResult(
        harness=shape.harness.value, inputs="witness" if plan.replay else kind.value,
        seed=seed, softmax_scale=shape.scale,
        scale_source=shape.scale_source,
        dtypes=plan.dtypes, tolerance=plan.tolerance, tolerance_rule=TOLERANCE_RULE,
        groups=len(groups), classes=len(plan.classes), per_rank=tuple(per_rank),
        max_abs_v=max((res.max_abs_v for res in results), default=0.0),
        witness=next((res.witness for res in results if res.witness is not None), None))


def _share(done: int, total: int) -> str:
    return f"{100.0 * done / total:.0f} %" if total else "none"


def _run_batch(schedule: Schedule, plan: NumericPlan, cls: ClassPlan,
               members: tuple[int, ...], seed: int, kind: InputKind,
               tick: Callable[[int], None]) -> _BatchResult:
    """One batch of one class: inputs, reference, evaluation, comparison."""
    layout = cls.layout
    t0 = time.perf_counter()
    try:
        given = plan.replay.given if plan.replay is not None else None
        inputs = batch_inputs(layout, members, kind, seed, given)
        max_abs_v = max((gi.v.max_abs() for gi in inputs.groups), default=0.0)
        t1 = time.perf_counter()
        expected = reference(inputs.groups, layout.shape.scale, layout.allowed)
        t2 = time.perf_counter()
        memories = [rank_memory(layout, role, inputs, schedule.launch.sharded,
                                schedule.launch.outputs)
                    for role in layout.roles]
        GroupEvaluator(cls.plan, memories, len(members), tick).run()
    except MemoryError:
        # the estimate can fall short of the real peak: say what was expected and how to
        # shrink the run, never a traceback
        raise HarnessError(
            f"out of memory simulating {schedule.launch.kernel} (estimated "
            f"{cls.memory.total / GIB:.1f} GiB for {len(members)} group(s) at once: "
            f"{cls.memory.breakdown()}); lower S_kv_per_rank (or S_q, d_head, the head "
            "counts) with --arg, or skip the numerics (`meshproof simulate "
            "--no-numerics`)") from None
    t3 = time.perf_counter()
    per_rank = _check_batch(schedule, plan, layout, members, memories, expected)
    replayed = None if plan.replay is None else replay_value(
        plan.replay, schedule, layout, members, plan.groups, memories, expected)
    t4 = time.perf_counter()
    return _BatchResult(tuple(per_rank), max_abs_v, (
        ("inputs", t1 - t0), ("reference", t2 - t1), ("evaluate", t3 - t2),
        ("compare", t4 - t3)), replayed)


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
