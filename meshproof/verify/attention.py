"""attention_equivalence: every stored output is attention over its group's KV.

Proved by an exact identity (verify/semantics: the output's normal form is the
reference's numerator and denominator times one common factor), violated only with a
witness input re-evaluated in high precision, unknown otherwise (spec/properties.md §6).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from meshproof.model.channel_table import ChannelTable
from meshproof.model.problem import Problem
from meshproof.model.schedule import OpKind, Schedule
from meshproof.verify.properties import CheckContext, Property
from meshproof.verify.result import Counterexample, Diagnostic, PropertyResult, Role, Status
from meshproof.verify.semantics import SemanticAnalysis
from meshproof.verify.semantics.analysis import Analysis, OutputResult
from meshproof.verify.shared_analysis import shared_semantics
from meshproof.verify.unwritten import never_written, once_complete, violated

if TYPE_CHECKING:
    from meshproof.verify.details import AttentionDetails
    from meshproof.verify.details import Witness as WitnessFacts
    from meshproof.verify.semantics.witness import Witness

NAME = Property.ATTENTION_EQUIVALENCE
CERTIFICATE = "exact normal form (exponential polynomials over scores, maxima, logs)"
MAX_WITNESS_STORES = 16


def _unknown(message: str, start: float) -> PropertyResult:
    return PropertyResult(NAME, Status.UNKNOWN, message, seconds=time.perf_counter() - start,
                          certificate=CERTIFICATE)


def attention_equivalence(ctx: CheckContext) -> PropertyResult:
    start = time.perf_counter()
    if ctx.schedule.active:
        # an output no rank ever reaches is never written, whatever the algebra says
        unwritten = ctx.shared(never_written)
        if unwritten:
            return violated(NAME, ctx, unwritten, start)
    return once_complete(ctx, _judge(ctx.schedule, ctx.channels, ctx.shared(shared_semantics),
                                     start))


def _judge(schedule: Schedule, table: ChannelTable, sem: SemanticAnalysis,
           start: float) -> PropertyResult:
    if sem.analysis is None:
        return _unknown(sem.why_not("no attention problem to compare with"), start)
    a = sem.analysis
    if not schedule.active:
        return _unknown("no rank ran any op (every rank returned at once): nothing to "
                        "certify; check the launch and the --arg values (n_ranks, cube_start, "
                        "rank_axis)", start)
    if not a.outputs:
        outs = ", ".join(a.problem.outputs)
        return _unknown(f"no rank stores an output ({outs}): nothing to compare with "
                        "attention; name the output buffers with --outputs", start)
    bad = [o for o in a.outputs if not o.verdict.equal]
    silent = a.silent_groups
    if not bad and a.unwritten:
        return _unwritten(schedule, a, start)
    if not bad and not silent:
        p = a.problem
        ranks = len({o.rank for o in a.outputs})
        return PropertyResult(
            NAME, Status.PROVED,
            f"{len(a.outputs)} stored output(s) on {ranks} rank(s) equal "
            f"softmax(scale·q·Kᵀ)·V over {_keys(p)} for all inputs, scale "
            f"{p.scale:.6g} ({p.scale_source}); {p.describe_groups()}",
            seconds=time.perf_counter() - start, certificate=CERTIFICATE)
    if not bad:
        g = silent[0]
        return PropertyResult(
            NAME, Status.VIOLATED,
            f"{len(silent)} group(s) store no output: group {g} "
            f"({_ranks(schedule, a, g)}) never writes {', '.join(a.problem.outputs)}",
            Counterexample(f"group {g} stores no output", (), _details(None, 0)),
            time.perf_counter() - start, CERTIFICATE)
    lost = [o for o in bad if (o.opaque is not None and o.opaque.lost) or o.misplaced]
    if lost:
        return _lost(schedule, a, lost, start)
    reason = bad[0].verdict.reasons[0] if bad[0].verdict.reasons else "differs from attention"
    # the witness search is imported here, for a failing output only: a proved run (the
    # common case, and the start-up benchmark's) never loads it
    from meshproof.verify.semantics.sparse_eval import pair_witness, small_schedule
    from meshproof.verify.semantics.witness import WitnessTooLarge, find_witness

    pairs = [(o.rank, o.store, o.live, o.counts.wrong) for o in bad
             if o.counts is not None and o.counts.wrong is not None]
    witness = pair_witness(schedule, table, a.problem, pairs) if pairs else None
    if witness is None and (a.problem.mask is None or small_schedule(schedule)):
        try:
            witness = find_witness(schedule, table, a.problem,
                                   [(o.rank, o.store, o.live) for o in bad[:MAX_WITNESS_STORES]])
        except WitnessTooLarge as exc:
            return _unknown(f"cannot certify {len(bad)} of {len(a.outputs)} stored output(s) "
                            f"({reason}), and {exc}", start)
    first = bad[0] if witness is None else next(o for o in bad if o.rank == witness.rank and
                                                o.store.index == witness.store.index)
    diags = _diagnostics(schedule, a, first, witness)
    reason = first.verdict.reasons[0] if first.verdict.reasons else "differs from attention"
    seconds = time.perf_counter() - start
    if witness is None:
        return PropertyResult(
            NAME, Status.UNKNOWN,
            f"cannot certify {len(bad)} of {len(a.outputs)} stored output(s) ({reason}), and "
            "no input tried shows a difference from attention", None, seconds, CERTIFICATE)
    summary = (f"{len(bad)} of {len(a.outputs)} stored output(s) are not attention: "
               f"{reason}")
    details = _details(_witness_facts(schedule, witness), len(bad))
    return PropertyResult(NAME, Status.VIOLATED, summary,
                          Counterexample(summary, tuple(diags), details), seconds, CERTIFICATE)


def _lost(schedule: Schedule, a: Analysis, lost: list[OutputResult],
          start: float) -> PropertyResult:
    """Outputs that wait on a message that never arrives are never written, on any input:
    the rank blocks at that recv."""
    diags = []
    for o in lost[:8]:
        ep = schedule.programs[o.rank].endpoint
        if o.opaque is None:
            diags.append(Diagnostic(
                f"the store here {o.verdict.reasons[0]}: whatever the inputs, the output "
                "buffer's elements are not the ones written", Role.DEPARTURE, o.store.source,
                ep, o.store.index, OpKind.STORE))
            continue
        diags.append(Diagnostic(
            f"the output stored here waits on a message that never arrives "
            f"({o.opaque.op.source}: {o.opaque.reason}): the rank blocks there, so the "
            "output is never written, whatever the inputs", Role.DEPARTURE, o.store.source,
            ep, o.store.index, OpKind.STORE))
    waiting = sum(1 for o in lost if o.opaque is not None)
    if waiting == len(lost):
        summary = f"{len(lost)} stored output(s) depend on messages that never arrive"
    elif waiting == 0:
        summary = f"{len(lost)} store(s) land outside the output buffer the harness reads"
    else:
        summary = (f"{len(lost)} stored output(s) are never written where the harness reads "
                   f"them ({waiting} wait on messages that never arrive, {len(lost) - waiting} "
                   "store outside the output buffer)")
    return PropertyResult(NAME, Status.VIOLATED, summary,
                          Counterexample(summary, tuple(diags),
                                         _details(None, len(lost))),
                          time.perf_counter() - start, CERTIFICATE)


def _unwritten(schedule: Schedule, a: Analysis, start: float) -> PropertyResult:
    diags = []
    d = a.problem.d_head
    row = a.problem.h_q * d
    for rank, ptr, gaps in a.unwritten:
        ep = schedule.programs[rank].endpoint
        spans = ", ".join(f"{lo}..{hi - 1}" for lo, hi in gaps[:4])
        first = gaps[0][0]
        diags.append(Diagnostic(
            f"elements {spans} of {ptr} (first: query row {first // row}, q head "
            f"{first % row // d}) are never stored: every input leaves them unwritten",
            Role.DEPARTURE, None, ep))
    summary = f"{len(a.unwritten)} rank(s) leave part of their output unwritten"
    return PropertyResult(NAME, Status.VIOLATED, summary,
                          Counterexample(summary, tuple(diags), _details(None, 0)),
                          time.perf_counter() - start, CERTIFICATE)


def _keys(p: Problem) -> str:
    if p.mask is None:
        return "their group's keys"
    return f"the keys the {p.mask.text} mask allows at each query position"


def _ranks(schedule: Schedule, a: Analysis, group: int) -> str:
    eps = [schedule.programs[r].endpoint.label for r in a.problem.groups[group].ranks]
    return ", ".join(eps[:4]) + ("..." if len(eps) > 4 else "")


def _diagnostics(schedule: Schedule, a: Analysis, out: OutputResult,
                 witness: Witness | None) -> list[Diagnostic]:
    ep = schedule.programs[out.rank].endpoint
    diags: list[Diagnostic] = []
    store = out.store
    for reason in out.verdict.reasons:
        diags.append(Diagnostic(f"the output stored here is not attention: {reason}",
                                Role.DEPARTURE, store.source, ep, store.index, OpKind.STORE))
    for event in a.explain(out):
        diags.append(Diagnostic(event.message, Role.DEPARTURE, event.op.source,
                                schedule.programs[event.rank].endpoint, event.op.index,
                                event.op.kind))
    if witness is not None:
        diags.append(Diagnostic("witness: " + witness.describe(ep.describe()), Role.NOTE,
                                store.source, ep, store.index, OpKind.STORE))
    return diags


def _details(witness: WitnessFacts | None, outputs: int) -> AttentionDetails:
    from meshproof.verify.details import AttentionDetails  # for a counterexample only

    return AttentionDetails(witness, outputs)


def _witness_facts(schedule: Schedule, w: Witness) -> WitnessFacts:
    from meshproof.verify.details import Witness as WitnessFacts

    return WitnessFacts(w.inputs.replace(" (seed", ", seed").rstrip(), w.precision, w.rel_err,
                        schedule.programs[w.rank].endpoint, w.store.source, w.element, w.got,
                        w.want)
