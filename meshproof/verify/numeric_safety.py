"""numeric_safety: exp arguments <= 0, 16-bit values within range, empty partials finite,
and the outputs' rounding error within a tolerance.

Static (no sampling for "proved"), at the launch's real sizes, under a stated
assumption: every input element satisfies |x| <= B (`--input-bound`, default 16) and, when
given, every score |scale·q·kᵀ| <= S (`--score-bound`). Proved needs no hazard and the
rounding bound η·max|V| + τ (rounding.py) within T·max|V| (`--tolerance`, default the
simulator's: model/tolerance.py); a bound above T is unknown (the bound is sound, not
tight: nothing shows an input that exceeds T). Hazard violations come with a witness
input inside the assumption that reaches them (spec/semantics.md §7).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from meshproof.model.channel_table import ChannelTable
from meshproof.model.dependencies import Dependencies
from meshproof.model.evaluate import Evaluation
from meshproof.model.schedule import Op, Schedule
from meshproof.model.tolerance import source_of, tolerance_for, tolerance_of
from meshproof.verify.properties import CheckContext, Property
from meshproof.verify.result import (
    Counterexample,
    Diagnostic,
    NumericResult,
    PropertyResult,
    Role,
    Status,
)
from meshproof.verify.semantics import SemanticAnalysis
from meshproof.verify.semantics.bounds import assume, assumption_text, score_cap
from meshproof.verify.semantics.culprits import Culprit, ranked, sentence
from meshproof.verify.semantics.culprits import sites as culprit_sites
from meshproof.verify.semantics.rat import Rat
from meshproof.verify.semantics.rounding import ROUNDING_ASSUMPTIONS
from meshproof.verify.semantics.rounding_output import NoBound, OutputBound, output_error_bounds
from meshproof.verify.semantics.safety import Finding, Hazard, Safety, check_safety
from meshproof.verify.semantics.situation_facts import Held
from meshproof.verify.semantics.situations import Forms, Situations
from meshproof.verify.semantics.symbolic_core import Opaque
from meshproof.verify.shared_analysis import shared_semantics

if TYPE_CHECKING:
    from meshproof.verify.semantics.rounding_witness import RoundingWitness

NAME = Property.NUMERIC_SAFETY
CERTIFICATE = "max-domination and interval bounds on the exact forms"


def numeric_safety(ctx: CheckContext) -> PropertyResult:
    start = time.perf_counter()
    schedule, table, config = ctx.schedule, ctx.channels, ctx.config
    sem = ctx.shared(shared_semantics)
    input_bound = assume(config.input_bound, config.score_bound,
                         sem.problem.scale if sem.problem is not None else 1.0)
    a = sem.analysis
    # the one walk over every op: the hazards, and the dtypes and ops the tolerance and the
    # culprits read
    safety = check_safety(schedule, table, a.problem, a.forms, input_bound,
                          [(o.rank, o.store) for o in a.outputs]) \
        if a is not None and sem.problem is not None else None
    tol, tol_from = _tolerance(ctx, safety)
    assumed = assumption_text(input_bound)
    assumption = f"{assumed}; tolerance {_sci(tol)}·max|V| ({tol_from})"
    bound: list[float | None] = [None, None]
    blame: list[tuple[Culprit, ...]] = [()]

    def result(status: Status, message: str, cex: Counterexample | None = None
               ) -> PropertyResult:
        return NumericResult(NAME, status, message, cex, time.perf_counter() - start,
                             CERTIFICATE, config.input_bound, bound[0], bound[1],
                             config.score_bound, tol, assumption, blame[0])

    if a is None or safety is None:
        return result(Status.UNKNOWN, sem.why_not("no attention problem to bound") +
                      f" ({assumption})")
    empty = _empty_partials(schedule, table, sem, input_bound) if a.problem and \
        schedule.launch.empty_shards else []
    findings = safety.violations + empty
    if findings:
        diags = tuple(_diag(schedule, f) for f in findings)
        first = findings[0]
        summary = (f"{len(findings)} numeric hazard(s) ({assumption}): {first.op.source}: "
                   f"{first.message}")
        from meshproof.verify.details import Hazard as HazardFacts
        from meshproof.verify.details import NumericDetails  # for a counterexample only

        facts = tuple(HazardFacts(f.hazard.value, schedule.programs[f.rank].endpoint,
                                  f.op.source, f.bound, f.limit) for f in findings)
        return result(Status.VIOLATED, summary,
                      Counterexample(summary, diags, NumericDetails(facts, input_bound)))
    if safety.unknown:
        return result(Status.UNKNOWN, f"cannot bound every value ({assumption}): " +
                      "; ".join(safety.unknown[:3]))
    extra = f"; an empty slice on {len(schedule.launch.empty_shards)} rank(s) stays finite" \
        if schedule.launch.empty_shards else ""
    etas = output_error_bounds(a.forms, [(o.rank, o.store) for o in a.outputs], input_bound)
    # the bound is due for outputs whose exact value is attention; the others are
    # attention_equivalence's to report
    lost = [e for e, o in zip(etas, a.outputs, strict=True)
            if isinstance(e, NoBound) and e.attention and o.verdict.equal]
    known = [e for e in etas if isinstance(e, OutputBound)]
    eta_all = max((e.eta for e in known), default=None)
    if known:
        blame[0] = _culprits(safety.firsts, a.forms, max(known, key=lambda e: e.eta).parts)
    elif any(e.parts for e in lost):
        blame[0] = _culprits(safety.firsts, a.forms, next(e.parts for e in lost if e.parts))
    if lost or (eta_all is not None and eta_all >= tol):
        # imported for a bound above the tolerance only: a proved run never loads it
        from meshproof.verify.semantics.rounding_witness import find_rounding_witness

        judged = [(o.rank, o.store) for o in a.outputs if o.verdict.equal]
        witness = find_rounding_witness(schedule, table, a.problem, judged, input_bound,
                                        score_cap(input_bound), tol)
        if witness is not None:
            if known and len(known) == len(etas):
                bound[0], bound[1] = eta_all, max(e.tau for e in known)
            stated = f"rounding bound {_sci(eta_all)}·max|V|" if eta_all is not None else \
                "no rounding bound stated: " + lost[0].reason.split(": ", 1)[-1]
            return _violated(schedule, witness, tol, stated, assumption, result, blame[0],
                             eta_all)
    if lost:
        # the outputs compute attention, but how far their rounding takes them is not shown
        return result(Status.UNKNOWN, f"cannot bound the rounding error of {len(lost)} "
                      f"output(s) ({assumption}): {lost[0].reason}")
    if known and len(known) == len(etas):
        eta, tau = max(e.eta for e in known), max(e.tau for e in known)
        bound[0], bound[1] = eta, tau
        stated = f"|computed - exact| <= {eta:.3g}·max|V| + {tau:.2g}"
        # η·M + τ <= T·M exactly when M >= τ / (T - η); vacuous past M = B
        least = tau / (tol - eta) if eta < tol else math.inf
        if least > config.input_bound:
            return result(Status.UNKNOWN, _over_tolerance(eta, tau, tol, tol_from, assumed,
                                                          stated) + _blamed(blame[0]))
        extra += (f"; rounding bound of the outputs: {stated}, within the "
                  f"tolerance {_sci(tol)}·max|V| wherever max|V| >= {_sci(least)} "
                  f"({ROUNDING_ASSUMPTIONS}){_shares(blame[0])}")
    return result(Status.PROVED,
                  f"every exp argument is <= 0 ({safety.exp_checked} exp ops, by "
                  f"max-domination) and every f16/bf16 value stays finite "
                  f"({safety.narrow_checked} ops) for {assumption}{extra}")


def _shares(culprits: tuple[Culprit, ...]) -> str:
    """The largest shares of a bound within the tolerance, briefly."""
    top = [f"{c.mechanism.name.lower().replace('_', ' ')} {c.share:.0%}" for c in culprits[:3]]
    return f"; largest shares: {', '.join(top)}" if top else ""


def _blamed(culprits: tuple[Culprit, ...]) -> str:
    said = sentence(culprits)
    return f"; {said}" if said else ""


def _violated(schedule: Schedule, w: RoundingWitness, tol: float, said: str,
              assumption: str, result: Callable[..., PropertyResult],
              culprits: tuple[Culprit, ...], eta: float | None) -> PropertyResult:
    """numeric_safety violated by a rounding witness, at the store's line and rank."""
    from meshproof.verify.details import RoundingDetails  # for a counterexample only

    ep = schedule.programs[w.rank].endpoint
    t, h, e = w.element
    message = (f"with {w.family} ({assumption}) the output stored at {w.store.source} on "
               f"{ep.label} is {w.machine:.6g} at query row {t}, head {h}, feature {e} on "
               f"the simulator's arithmetic, where attention is {w.exact:.6g} (40 digits): "
               f"an error of {_sci(w.error)}·max|V| (max|V| = {w.max_v:g}), above the "
               f"tolerance {_sci(tol)}·max|V| ({said}); the inputs are in the verdict's "
               f"JSON (witness.inputs){_blamed(culprits)}")
    diag = Diagnostic(message, Role.NUMERIC, w.store.source, ep, w.store.index, w.store.kind)
    small = input_elements_of(w) <= 65_536
    inputs = {name: {str(g): x.tolist() for g, x in sorted(getattr(w.inputs, name).items())}
              for name in ("q", "k", "v")} if small else None
    details = RoundingDetails(w.family, str(w.store.source), w.element, w.machine, w.exact,
                              w.max_v, w.error, tol, eta, inputs, ep)
    return result(Status.VIOLATED, message, Counterexample(message, (diag,), details))


def input_elements_of(w: RoundingWitness) -> int:
    return sum(x.size for part in (w.inputs.q, w.inputs.k, w.inputs.v) for x in part.values())


def _culprits(firsts: list[tuple[int, Op]], forms: Forms, parts: tuple[float, ...]
              ) -> tuple[Culprit, ...]:
    """The bound's mechanisms by share, each with the kernel lines where it happens (one
    look per distinct op, at the first rank that runs it: `Safety.firsts`; ranks that
    trace a line alike share its op)."""
    ops: list[tuple[Op, str, Rat | None]] = []
    for r, op in firsts:
        assert op.out is not None
        e = forms.err((r, op.out))
        if e is None:
            continue
        res = forms.canonical((r, op.out))
        form = None if res is None or isinstance(res, Opaque) else res.form
        ops.append((op, e.kind.value, form))
    return ranked(parts, culprit_sites(ops))


def _tolerance(ctx: CheckContext, safety: Safety | None) -> tuple[float, str]:
    """T and where it comes from: --tolerance, else the simulator's for this schedule (from
    the dtypes the safety walk saw, when there was one)."""
    if ctx.config.rounding_tolerance is not None:
        return ctx.config.rounding_tolerance, "stated"
    tol, used = tolerance_for(ctx.schedule) if safety is None else \
        tolerance_of(safety.dtypes)
    return tol, source_of(used)


def _over_tolerance(eta: float, tau: float, tol: float, tol_from: str, assumed: str,
                    stated: str) -> str:
    what = f"bound {_sci(eta)}·max|V|" if eta >= tol else \
        f"bound {_sci(eta)}·max|V| + {_sci(tau)} (its absolute part, at every max|V|)"
    return (f"the rounding {what} exceeds the tolerance {_sci(tol)}·max|V| "
            f"({tol_from}) for {assumed}: {stated} is shown ({ROUNDING_ASSUMPTIONS}), not that "
            f"the error stays within {_sci(tol)}·max|V|, and no input tried exceeds it; state "
            "the score range (--score-bound, score_bound), a smaller input bound, or a wider "
            "tolerance")


def _sci(x: float) -> str:
    """3.1e-2, 1e-2, 6.1e-5: two digits, a short exponent."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    mant, exp = f"{x:.1e}".split("e")
    mant = mant.rstrip("0").rstrip(".")
    return mant if int(exp) == 0 else f"{mant}e{int(exp)}"


def _diag(schedule: Schedule, f: Finding) -> Diagnostic:
    ep = schedule.programs[f.rank].endpoint
    return Diagnostic(f.message, Role.NUMERIC, f.op.source, ep, f.op.index, f.op.kind)


def _empty_partials(schedule: Schedule, table: ChannelTable, sem: SemanticAnalysis,
                    input_bound: float) -> list[Finding]:
    """Re-evaluate with the named ranks' slices empty: no exp(-inf - (-inf)), no 0/0."""
    assert sem.problem is not None
    index = schedule.rank_index()
    empty = frozenset(index[e] for e in schedule.launch.empty_shards if e in index)
    problem = dataclasses.replace(sem.problem, empty=empty)
    deps = Dependencies(schedule, table)
    domain = Situations(schedule, problem, input_bound, dependencies=deps)
    ev: Evaluation[Held] = Evaluation(schedule, table, domain, deps)
    domain.attach(ev)
    ev.run()
    forms = Forms(ev, domain)
    out: list[Finding] = []
    seen: set[str] = set()
    for r, prog in enumerate(schedule.programs):
        for op in prog.ops:
            if op.out is None:
                continue
            res = forms.value(r, op.out)
            if isinstance(res, Opaque) and res.op is op and res.undefined is not None and \
                    str(op.source) not in seen:
                seen.add(str(op.source))
                out.append(Finding(Hazard.EMPTY_PARTIAL, r, op,
                                   f"with the KV slice of {_names(schedule, empty)} empty, "
                                   f"{op.kind.value} {res.reason} (FlashInfer #4051: guard "
                                   "the max of an empty partial)"))
    return out


def _names(schedule: Schedule, ranks: frozenset[int]) -> str:
    return ", ".join(schedule.programs[r].endpoint.label for r in sorted(ranks))


__all__ = ["NAME", "Safety", "numeric_safety"]
