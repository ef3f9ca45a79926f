"""exactly_once_merge: every stored output counts each key row of its group exactly once.

Judged on what the outputs finally hold (their exact forms, verify/semantics), at the
granularity of key rows: a tile of a slice counts once, a partial parked in scratch keeps
its count, a constant factor is a weight (2.0 * x and x + x both count 2), a factor that is
0 on the machine drops the partial, a stored Q, max or zero counts every row 0 times, and
scores that add two shards' keys are no partial of either. Rescaling by exp(m_old - m_new)
is not merging and does not count (attention_equivalence judges it).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING

from meshproof.model.channel_table import ChannelTable
from meshproof.model.schedule import OpKind, Schedule, ValueRef
from meshproof.model.topology import Endpoint
from meshproof.verify.properties import CheckContext, Property
from meshproof.verify.result import Counterexample, Diagnostic, PropertyResult, Role, Status
from meshproof.verify.semantics.analysis import Analysis, OutputResult
from meshproof.verify.semantics.counts import Counts, count_rows
from meshproof.verify.semantics.crossings import pair_words
from meshproof.verify.semantics.events import Departure, Event
from meshproof.verify.shared_analysis import shared_semantics
from meshproof.verify.unwritten import never_written, once_complete, violated

if TYPE_CHECKING:
    from meshproof.verify.details import MergeCount
    from meshproof.verify.details import Witness as WitnessFacts
    from meshproof.verify.semantics.witness import Witness

NAME = Property.EXACTLY_ONCE_MERGE
CERTIFICATE = "exact normal form, key-row counts"
MAX_LISTED = 40
MAX_WITNESS_ROWS = 4     # runs of wrongly counted rows tried as V = 1 on them


def _vacuous(schedule: Schedule, outputs: tuple[str, ...]) -> bool:
    sharded = set(schedule.launch.sharded)
    for prog in schedule.programs:
        for op in prog.ops:
            if op.kind in (OpKind.EXP, OpKind.EXP2):
                return False
            if op.kind is OpKind.LOAD and op.ptr in sharded:
                return False
            if op.kind is OpKind.STORE and op.ptr in outputs:
                return False
    return True


class _Result:
    """Builds this property's results with the time since the check started."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def __call__(self, status: Status, message: str,
                 cex: Counterexample | None = None) -> PropertyResult:
        return PropertyResult(NAME, status, message, cex, time.perf_counter() - self.start,
                              CERTIFICATE)


def exactly_once_merge(ctx: CheckContext) -> PropertyResult:
    result = _Result()
    schedule = ctx.schedule

    if not schedule.active:
        return result(Status.UNKNOWN, "no rank ran any op (every rank returned at once): "
                      "nothing to certify; check the launch and the --arg values (n_ranks, "
                      "cube_start, rank_axis)")
    if _vacuous(schedule, schedule.launch.outputs):
        named = ", ".join(schedule.launch.sharded) or "none"
        return result(Status.PROVED, f"vacuous: no rank loads a sharded buffer ({named}), "
                      "computes a softmax partial or stores an output")
    unwritten = ctx.shared(never_written)
    if unwritten:   # never written, whatever the counts say
        return violated(NAME, ctx, unwritten, result.start)
    sem = ctx.shared(shared_semantics)
    if sem.analysis is None:
        return result(Status.UNKNOWN, sem.why_not("cannot count merges"))
    a = sem.analysis
    if not any(g.shards for g in a.problem.groups):
        named = ", ".join(schedule.launch.sharded)
        return result(Status.UNKNOWN, f"no rank loads a sharded buffer ({named}), yet the "
                      "kernel computes softmax partials or stores outputs: name its KV "
                      "buffers with --sharded K_PTR,V_PTR")
    if not a.outputs:
        return result(Status.UNKNOWN, "no rank stores an output "
                      f"({', '.join(a.problem.outputs)}): nothing to count; name the output "
                      "buffers with --outputs")
    return once_complete(ctx, _judge(schedule, ctx.channels, a, result))


@dataclass(slots=True)
class _Findings:
    diags: list[Diagnostic] = field(default_factory=list)
    counts: list[MergeCount] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    shown_lines: set[str] = field(default_factory=set)
    suspects: list[OutputResult] = field(default_factory=list)   # outputs to witness
    lost: bool = False     # an output waits on a message that never arrives

    def add(self, d: Diagnostic) -> None:
        if len(self.diags) < MAX_LISTED:
            self.diags.append(d)


def _judge(schedule: Schedule, table: ChannelTable, a: Analysis,
           result: _Result) -> PropertyResult:
    f = _Findings()
    for out in a.outputs:
        _judge_output(schedule, a, out, f)
    structural = bool(f.lost) or bool(a.silent_groups)
    for g in a.silent_groups:
        f.diags.append(Diagnostic(f"no rank of group {g} stores an output: its "
                                  f"{a.problem.groups[g].n_shards} shard(s) are never merged",
                                  Role.MERGE))
    if not f.diags and not f.unknown:
        n = max(a.problem.kv_rows(g.index) for g in a.problem.groups)
        mask = a.problem.mask
        if mask is not None:
            points = sum(o.counts.points for o in a.outputs if o.counts is not None)
            return result(Status.PROVED,
                          f"{len(a.outputs)} stored output(s) each count every key the "
                          f"{mask.text} mask allows exactly once and every key it hides zero "
                          f"times, numerator and denominator alike, at every query position "
                          f"({points} point(s) read at end-point crossings; up to {n} key "
                          "rows per group)")
        return result(Status.PROVED,
                      f"{len(a.outputs)} stored output(s) each count every key row of their "
                      f"group exactly once, numerator and denominator alike (up to {n} key "
                      f"rows in {max(g.n_shards for g in a.problem.groups)} shard(s) per group)")
    # the witness search is imported for a failing count only: a proved run never loads it
    from meshproof.verify.semantics.witness import WitnessTooLarge

    try:
        witness = None if structural else _witness(schedule, table, a, f)
    except WitnessTooLarge as exc:
        why = f.unknown[:3] or [d.message for d in f.diags[:2]]
        return result(Status.UNKNOWN, "the counts look wrong (" + "; ".join(why) + f"), and {exc}")
    if not structural and witness is None:
        why = f.unknown[:3] or [d.message for d in f.diags[:2]]
        return result(Status.UNKNOWN, "cannot show a wrong count with an input (Q = 0, every "
                      "score equal, and V = 1 on the rows counted wrong): " + "; ".join(why))
    worst = max((r.numerator for r in f.counts), default=None)
    zeros = sum(1 for r in f.counts if r.numerator == 0)
    ranks = {d.endpoint for d in f.diags if d.endpoint} | {c.endpoint for c in f.counts}
    summary = f"{len(f.counts) or len(f.diags) or 1} wrong merge count(s) on " \
              f"{len(ranks) or 1} rank(s)"
    if f.counts:
        summary += f" (max count {_num(worst or 0)}, {zeros} run(s) of key rows never merged)"
    diags = list(f.diags)
    for o in f.suspects:
        if not any(d.source == o.store.source for d in diags) and o.opaque is None:
            ep = schedule.programs[o.rank].endpoint
            diags.append(Diagnostic("the stored output is not one ratio of sums of partials "
                                    "(partials normalised separately and merged, or "
                                    "multiplied): its key rows are not each counted once",
                                    Role.MERGE, o.store.source, ep, o.store.index,
                                    OpKind.STORE))
            for e in _merge_events(a, o, missing=False)[:3]:
                diags.append(Diagnostic(e.message, Role.MERGE, e.op.source,
                                        schedule.programs[e.rank].endpoint, e.op.index,
                                        e.op.kind))
            break
    if witness is not None:
        ep = schedule.programs[witness.rank].endpoint
        diags.append(Diagnostic("witness: " + _witness_text(witness, ep.describe(), a),
                                Role.NOTE, witness.store.source, ep, witness.store.index,
                                OpKind.STORE))
    from meshproof.verify.details import MergeDetails  # for a counterexample only

    facts = _facts(schedule, witness) if witness is not None else None
    return result(Status.VIOLATED, summary,
                  Counterexample(summary, tuple(diags), MergeDetails(tuple(f.counts), facts)))


def _witness(schedule: Schedule, table: ChannelTable, a: Analysis,
             f: _Findings) -> Witness | None:
    """An input under which the named rows' weight in the output differs from their
    softmax weight: Q = 0 (every score equal) and V = 1 on those rows, else Q = 0 and a
    seeded random 0/1 per row (any uneven weight shows)."""
    from meshproof.verify.semantics.sparse_eval import pair_witness, small_schedule
    from meshproof.verify.semantics.witness import (
        SEEDS,
        check_witness_size,
        equal_scores,
        find_witness,
    )

    pairs = [(o.rank, o.store, o.live, o.counts.wrong) for o in f.suspects
             if o.counts is not None and o.counts.wrong is not None]
    found = pair_witness(schedule, table, a.problem, pairs) if pairs else None
    if found is not None or (a.problem.mask is not None and not small_schedule(schedule)):
        return found
    check_witness_size(schedule, a.problem)   # before the families are made
    rows = list(dict.fromkeys(c.rows for c in f.counts))[:MAX_WITNESS_ROWS]
    families = [equal_scores(a.problem, r) for r in rows] + \
        [equal_scores(a.problem, None, seed) for seed in SEEDS]
    stores = [(o.rank, o.store, o.live) for o in f.suspects[:16]]
    return find_witness(schedule, table, a.problem, stores, families)


def _witness_text(w: Witness, endpoint: str, a: Analysis) -> str:
    t, h, e = w.element
    return (f"on {w.inputs}, evaluated in {w.precision}) the output at {w.store.source} on "
            f"rank {endpoint} is O[{t}, {h}, {e}] = {w.got:.6g}, softmax gives {w.want:.6g} "
            f"(relative difference {w.rel_err:.3g}): the key rows are not each weighted once")


def _facts(schedule: Schedule, w: Witness) -> WitnessFacts:
    from meshproof.verify.details import Witness as WitnessFacts

    return WitnessFacts(w.inputs.replace(" (seed", ", seed"), w.precision, w.rel_err,
                        schedule.programs[w.rank].endpoint, w.store.source, w.element, w.got,
                        w.want)


def _judge_output(schedule: Schedule, a: Analysis, out: OutputResult, f: _Findings) -> None:
    ep = schedule.programs[out.rank].endpoint
    where = (out.store.source, ep, out.store.index, OpKind.STORE)
    if out.opaque is not None:
        if out.opaque.lost:
            f.lost = True
            f.add(Diagnostic(f"the stored output depends on a message that never arrives "
                             f"({out.opaque.op.source}: {out.opaque.reason})", Role.MERGE,
                             *where))
        else:
            f.suspects.append(out)
            f.unknown.append(f"rank {ep.describe()} stores at {out.store.source} a value "
                             f"outside the rules ({out.opaque.op.source}: {out.opaque.reason})")
        return
    if out.form is None:
        f.unknown.append(f"rank {ep.describe()} stores at {out.store.source} a value that "
                         f"cannot be placed in the output ({'; '.join(out.verdict.texts)})")
        return
    if out.counts is not None:
        _judge_masked(schedule, a, out, f)
        return
    c = count_rows(out.form, a.problem, a.problem.group_of[out.rank])
    if c is None:
        f.suspects.append(out)
        f.unknown.append(f"rank {ep.describe()} stores at {out.store.source} a value that is "
                         "not one ratio of sums of partials, so its key rows have no count")
        return
    before = len(f.diags) + len(f.counts)
    if c.foreign:
        f.add(Diagnostic("the stored output counts keys of another attention problem "
                         "(another group's KV)", Role.MERGE, *where))
    if c.mixed:
        f.add(Diagnostic("the stored output applies the weights of one key row to V of "
                         "another row: weights and values of different shards", Role.MERGE,
                         *where))
    if c.no_denominator:
        f.add(Diagnostic("the output is not divided by one softmax denominator ℓ (never "
                         "divided, or partials divided separately): no key row is merged "
                         "into a denominator", Role.MERGE, *where))
    bad = _bad_runs(c)
    if not bad:
        if len(f.diags) + len(f.counts) > before:
            f.suspects.append(out)
        return
    f.suspects.append(out)
    from meshproof.verify.details import MergeCount  # for a counterexample only

    size = a.problem.S_kv_per_rank
    for lo, hi, n, d in bad:
        # one count per shard: split runs at shard boundaries
        for start in range(lo, hi, size) if size else (lo,):
            a0, b0 = start, min(hi, (start // size + 1) * size) if size else hi
            shard = _shard(schedule, a, out.rank, a0)
            f.counts.append(MergeCount(ep, shard, (a0, b0), n, d))
            f.add(_count_diag(out, ep, shard, a0, b0, n, d))
    for e in _merge_events(a, out):
        if str(e.op.source) not in f.shown_lines:
            f.shown_lines.add(str(e.op.source))
            f.add(Diagnostic(e.message, Role.MERGE, e.op.source,
                             schedule.programs[e.rank].endpoint, e.op.index, e.op.kind))


def _judge_masked(schedule: Schedule, a: Analysis, out: OutputResult, f: _Findings) -> None:
    """A masked (or masking) output: each allowed key once and each hidden key zero times
    at every query (semantics/crossings.py), the first wrong pair named."""
    assert out.counts is not None
    ep = schedule.programs[out.rank].endpoint
    if out.counts.unknown is not None:
        f.suspects.append(out)
        f.unknown.append(f"rank {ep.describe()} stores at {out.store.source} a value whose "
                         f"key counts cannot be read: {out.counts.unknown}")
        return
    w = out.counts.wrong
    if w is None:
        return
    f.suspects.append(out)
    from meshproof.verify.details import MergeCount  # for a counterexample only

    shard = _shard(schedule, a, out.rank, w.key_row)
    f.counts.append(MergeCount(ep, shard, (w.key_row, w.key_row + 1), w.num, w.den))
    f.add(Diagnostic(f"output {pair_words(a.problem, w)}", Role.MERGE, out.store.source, ep,
                     out.store.index, OpKind.STORE, peer=shard))
    e = a.mask_event(out)
    if e is not None and str(e.op.source) not in f.shown_lines:
        f.shown_lines.add(str(e.op.source))
        f.add(Diagnostic(e.message, Role.MERGE, e.op.source,
                         schedule.programs[e.rank].endpoint, e.op.index, e.op.kind))


def _bad_runs(c: Counts) -> list[tuple[int, int, float, float | None]]:
    out: list[tuple[int, int, float, float | None]] = []
    points = sorted({p for lo, hi, _ in c.num + (c.den or ()) for p in (lo, hi)})
    for lo, hi in pairwise(points):
        n = _at(c.num, lo)
        d = _at(c.den, lo) if c.den is not None else None
        if not math.isclose(n, 1.0) or (d is not None and not math.isclose(d, 1.0)):
            if out and out[-1][1] == lo and out[-1][2:] == (n, d):
                out[-1] = (out[-1][0], hi, n, d)
            else:
                out.append((lo, hi, n, d))
    return out


def _at(runs: tuple[tuple[int, int, float], ...] | None, x: int) -> float:
    for lo, hi, c in runs or ():
        if lo <= x < hi:
            return c
    return 0.0


def _shard(schedule: Schedule, a: Analysis, rank: int, row: int) -> Endpoint | None:
    g = a.problem.groups[a.problem.group_of[rank]]
    j = row // a.problem.S_kv_per_rank
    return schedule.programs[g.shards[j]].endpoint if 0 <= j < len(g.shards) else None


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.4g}"


def _count_diag(out: OutputResult, ep: Endpoint, shard: Endpoint | None, lo: int, hi: int,
                n: float, d: float | None) -> Diagnostic:
    verb = "never merged" if n == 0 else "merged more than once" if n > 1 else \
        "weighted less than once" if n < 1 else "numerator and denominator disagree"
    den = f" and {_num(d)} in the denominator" if d is not None else ""
    who = f"shard {shard.describe()} (key rows {lo}..{hi - 1})" if shard else \
        f"key rows {lo}..{hi - 1}"
    return Diagnostic(f"output counts the partial of {who} {_num(n)} time(s) in the "
                      f"numerator{den} (expected 1): {verb}", Role.MERGE, out.store.source, ep,
                      out.store.index, OpKind.STORE, peer=shard)


_WHY = (Departure.OVERLAP, Departure.WEIGHTED, Departure.MACHINE_ZERO, Departure.CONTRACTION)


def _merge_events(a: Analysis, out: OutputResult, missing: bool = True) -> list[Event]:
    """The lines where the double or missing merge happens: double merges, weights and
    machine zeros in the output's cone, else the last merge on the storing rank."""
    arg = out.store.args[0]
    assert isinstance(arg, ValueRef)
    events = a.cone_events(out.rank, arg.id)
    seen: set[str] = set()
    picked = []
    for e in events:
        if e.kind in _WHY and str(e.op.source) not in seen:
            seen.add(str(e.op.source))
            picked.append(e)
    if picked or not missing:
        return picked[:6]
    merges = [e for e in events if e.kind is Departure.MERGE and e.rank == out.rank]
    if merges:
        last = max(merges, key=lambda e: e.op.index)
        return [Event(last.kind, last.rank, last.op, f"the last merge into this output is at "
                      f"{last.op.source}: the missing rows never reach it")]
    return []


