"""The numeric check: per class of identical groups, build inputs, run the IR, compare.

Groups of one class are evaluated together, `chunk_bytes` of float32 inputs at a time, so
memory stays bounded at 1M context while small launches run in one batch.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping

import numpy as np
import numpy.typing as npt

from meshproof.model.channels import ChannelTable
from meshproof.model.schedule import DType, OpKind, Schedule
from meshproof.model.topology import Endpoint
from meshproof.sim.groups import find_groups, group_classes
from meshproof.sim.harness import (
    O_PTR,
    AttentionShape,
    GroupInputs,
    group_layout,
    make_inputs,
    rank_memory,
    reference,
)
from meshproof.sim.inputs import InputKind
from meshproof.sim.numerics import GroupEvaluator, plan_group
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


def run_numerics(schedule: Schedule, table: ChannelTable, seed: int, kind: InputKind,
                 chunk_bytes: int, phases: MutableMapping[str, float]) -> NumericResult:
    shape = AttentionShape.from_schedule(schedule)
    tol, dtypes = tolerance_for(schedule)
    groups = find_groups(schedule, table)
    classes = group_classes(schedule, table, groups)
    per_rank: list[RankNumeric] = []
    for cls in classes:
        rep = groups[cls.representative]
        layout = group_layout(schedule, rep, shape)
        plan = plan_group(schedule, table, rep)
        per_chunk = max(1, chunk_bytes // max(1, layout.input_bytes))
        inputs: GroupInputs | None = None
        for c0 in range(0, len(cls.members), per_chunk):
            members = cls.members[c0:c0 + per_chunk]
            t0 = time.perf_counter()
            inputs = make_inputs(layout, members, kind, seed, reuse=inputs)
            t1 = time.perf_counter()
            expected = reference(layout, inputs)
            t2 = time.perf_counter()
            memories = [rank_memory(layout, role, inputs, schedule.launch.sharded)
                        for role in layout.roles]
            GroupEvaluator(plan, memories, len(members)).run()
            t3 = time.perf_counter()
            for pos, role in enumerate(layout.roles):
                if not role.checked:
                    continue
                got = memories[pos][O_PTR].data
                want = expected[:, layout.out_rows(role)].reshape(len(members), -1)
                stores = any(op.kind is OpKind.STORE and op.ptr == O_PTR
                             for op in schedule.programs[role.rank].ops)
                for b, g in enumerate(members):
                    rank = groups[g].ranks[pos]
                    per_rank.append(_compare(schedule.programs[rank].endpoint, g, got[b],
                                             want[b], tol, stores))
            del memories
            t4 = time.perf_counter()
            for name, dt in (("inputs", t1 - t0), ("reference", t2 - t1),
                             ("evaluate", t3 - t2), ("compare", t4 - t3)):
                phases[name] = phases.get(name, 0.0) + dt
    per_rank.sort(key=lambda r: r.endpoint)
    return NumericResult(
        harness=shape.harness, inputs=kind.value, seed=seed, softmax_scale=shape.scale,
        dtypes=dtypes, tolerance=tol, tolerance_rule=TOLERANCE_RULE, groups=len(groups),
        classes=len(classes), per_rank=tuple(per_rank))


def _compare(endpoint: Endpoint, group: int, got: F32, want: npt.NDArray[np.float64],
             tol: float, stores: bool) -> RankNumeric:
    n = int(want.size)
    if not stores:
        return RankNumeric(endpoint, group, None, None, n, False,
                           "never stores o_ptr although it holds a KV shard")
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
