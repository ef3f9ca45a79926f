"""Outputs that are never written, whatever the queue depth and the inputs.

The semantic properties (attention_equivalence, exactly_once_merge) read the dataflow as
if every op completes. An output store that its rank never reaches, because the rank (or
a rank it waits on) is blocked at every queue depth, is never written: no input and no
buffering makes it written, so both properties are violated without sampling
(spec/properties.md §5–§6). When the schedule deadlocks only at the judged depth, their
verdicts stand, and say they hold once the schedule completes.

The facts come from model/blocking.py (one run at unbounded depth, the root cause of each
stuck rank), shared by both properties through `ctx.shared`.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from meshproof.model.blocking import Blocking, RootCause, blocking
from meshproof.model.schedule import Op, OpKind, Schedule
from meshproof.verify.kahn import progress_at_depth
from meshproof.verify.properties import CheckContext, Property
from meshproof.verify.result import Counterexample, Diagnostic, PropertyResult, Role, Status

CERTIFICATE = "the Kahn-network run at unbounded queue depth: the rank never reaches the store"
MAX_LISTED = 8


@dataclass(frozen=True, slots=True)
class NeverWritten:
    """An output store its rank never reaches, and the op that stops it."""

    rank: int
    store: Op
    root: RootCause


def shared_blocking(ctx: CheckContext) -> Blocking:
    """The launch's blocking at every depth (ctx.shared caches it)."""
    return blocking(ctx.schedule, ctx.channels)


def never_written(ctx: CheckContext) -> tuple[NeverWritten, ...]:
    """The first output store of each rank that the rank never reaches (ctx.shared)."""
    schedule = ctx.schedule
    outputs = set(schedule.launch.outputs)
    b = ctx.shared(shared_blocking)
    found: list[NeverWritten] = []
    for rank in sorted(b.forever):
        ops = schedule.programs[rank].ops
        store = next((op for op in ops[b.forever[rank]:]
                      if op.kind is OpKind.STORE and op.ptr in outputs), None)
        if store is not None:
            found.append(NeverWritten(rank, store, b.roots[rank]))
    return tuple(found)


def describe(schedule: Schedule, item: NeverWritten) -> str:
    """`the output at LINE on (cube, pe) is never written: (cube, pe) is blocked at LINE
    (send N: pe_line has no N link here)`."""
    ep = schedule.programs[item.rank].endpoint
    return (f"the output at {item.store.source} on {ep.describe()} is never written: "
            f"{item.root.describe(schedule)}")


def violated(name: Property, ctx: CheckContext, items: tuple[NeverWritten, ...],
             start: float) -> PropertyResult:
    """The property violated: these outputs are never written, on any input."""
    from meshproof.verify.details import AttentionDetails, MergeDetails  # for a counterexample only

    schedule = ctx.schedule
    role = Role.MERGE if name is Property.EXACTLY_ONCE_MERGE else Role.DEPARTURE
    diags = []
    roots: set[tuple[int, int]] = set()
    for item in items[:MAX_LISTED]:
        ep = schedule.programs[item.rank].endpoint
        diags.append(Diagnostic("the output stored here is never written, whatever the "
                                "inputs and the queue depth: " +
                                item.root.describe(schedule), role, item.store.source, ep,
                                item.store.index, OpKind.STORE))
        root = item.root
        if (root.rank, root.op) in roots:
            continue
        roots.add((root.rank, root.op))
        prog = schedule.programs[root.rank]
        op = prog.ops[root.op]
        diags.append(Diagnostic(f"blocked here at every queue depth ({root.why(schedule, op)})",
                                Role.BLOCKED, op.source, prog.endpoint, op.index, op.kind,
                                op.dir))
    summary = describe(schedule, items[0])
    if len(items) > 1:
        summary += f" (and {len(items) - 1} more output(s) never written)"
    details = MergeDetails(()) if name is Property.EXACTLY_ONCE_MERGE else \
        AttentionDetails(None, len(items))
    return PropertyResult(name, Status.VIOLATED, summary,
                          Counterexample(summary, tuple(diags), details),
                          time.perf_counter() - start, CERTIFICATE)


def once_complete(ctx: CheckContext, result: PropertyResult) -> PropertyResult:
    """A proved semantic verdict on a schedule that deadlocks at the judged depth (but
    reaches every output store at some depth) says it holds once the schedule completes."""
    if result.status is not Status.PROVED or not ctx.shared(progress_at_depth).deadlock:
        return result
    b = ctx.shared(shared_blocking)
    if b.minimal_depth is not None:
        note = (f"; they hold once the schedule completes: it deadlocks at queue depth "
                f"{ctx.depth} and completes at depth >= {b.minimal_depth}")
    else:
        note = (f"; they hold for the outputs as stored: every output store is reached, "
                f"though the schedule deadlocks at queue depth {ctx.depth} (and at every "
                "depth) after them")
    return dataclasses.replace(result, message=result.message + note)


__all__ = ["NeverWritten", "describe", "never_written", "once_complete", "shared_blocking",
           "violated"]
