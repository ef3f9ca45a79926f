"""exactly_once_merge: every stored output counts each shard of its group exactly once.

The provenance interpreter (provenance.py) decides; Z3 re-derives the counts from the
count equations of the dataflow (`cnt_c{cube}p{pe}_v{id}_s{shard}`) and is asked for a
stored output with a count other than 1. UNSAT proves the property; the two must agree.
Launches whose equation system is too large skip the Z3 cross-check and say so.
"""

from __future__ import annotations

import time

import numpy as np

from meshproof.errors import InternalError
from meshproof.model.schedule import OpKind, Schedule
from meshproof.verify.properties import CheckContext, Property
from meshproof.verify.provenance import Cls, ProvenanceResult, StoreFact, analyse
from meshproof.verify.result import (
    Counterexample,
    Diagnostic,
    MergeCount,
    MergeDetails,
    PropertyResult,
    Role,
    Status,
)
from meshproof.verify.z3util import Budget, SatResult, SmtLib, check

MAX_Z3_TERMS = 60_000
MAX_LISTED = 48


def _judged(res: ProvenanceResult) -> list[StoreFact]:
    return [s for s in res.stores if s.value.cls in (Cls.ADDITIVE, Cls.RATIO, Cls.LOST,
                                                     Cls.OPAQUE)]


def _bad_counts(fact: StoreFact) -> list[tuple[int, int, int | None]]:
    """(shard column, numerator count, denominator count) where a count is not as expected."""
    out = []
    num = fact.value.counts
    den = fact.value.den
    for col in range(len(fact.expected)):
        want = int(fact.expected[col])
        n = int(num[col])
        d = int(den[col]) if den is not None else None
        if n != want or (d is not None and d != want):
            out.append((col, n, d))
    return out


def _z3_counts(schedule: Schedule, res: ProvenanceResult,
               budget: Budget) -> tuple[SatResult, str, int]:
    """Ask Z3 for a stored output whose count is not 1, from the count equations alone."""
    group = res.group
    shard_group = {col: group[r] for col, r in enumerate(res.shards)}
    progs = schedule.programs

    cols_by_group: dict[int, list[int]] = {}
    for col, g in sorted(shard_group.items()):
        cols_by_group.setdefault(g, []).append(col)
    needed: set[tuple[int, int]] = set()
    stack = [(s.rank, s.op.args[0].id) for s in _judged(res)  # type: ignore[union-attr]
             if s.value.cls in (Cls.ADDITIVE, Cls.RATIO)]
    while stack:
        key = stack.pop()
        if key in needed:
            continue
        needed.add(key)
        stack.extend(res.values[key].deps)
    terms = sum(len(cols_by_group.get(group[r], ())) for r, _ in needed)
    sampled = ""
    if terms > MAX_Z3_TERMS:
        # Shards are independent columns of the count equations: check an evenly spaced,
        # deterministic subset that fits the budget rather than none at all.
        all_cols = sorted(shard_group)
        keep = max(1, len(all_cols) * MAX_Z3_TERMS // terms)
        chosen = {all_cols[int(i * len(all_cols) / keep)] for i in range(keep)}
        cols_by_group = {g: [c for c in cols if c in chosen] for g, cols in cols_by_group.items()}
        terms = sum(len(cols_by_group.get(group[r], ())) for r, _ in needed)
        sampled = f"; {len(chosen)} of {len(all_cols)} shards sampled"
    names: dict[tuple[int, int, int, str], str] = {}

    def var(key: tuple[int, int], col: int, part: str = "") -> str:
        full = (key[0], key[1], col, part)
        if full not in names:
            ep = progs[key[0]].endpoint
            names[full] = (f"cnt{part}_c{ep.cube}p{ep.pe}_v{key[1]}_"
                           f"s{progs[res.shards[col]].endpoint.label}")
        return names[full]

    equations: list[str] = []
    for key in sorted(needed):
        prov = res.values[key]
        for col in cols_by_group.get(group[key[0]], ()):
            here = var(key, col)
            if prov.rule == "source":
                equations.append(f"(= {here} {int(prov.counts[col] > 0)})")
            elif prov.rule == "add":
                equations.append(f"(= {here} (+ {' '.join(var(d, col) for d in prov.deps)}))")
            elif prov.rule == "ratio":
                equations.append(f"(= {here} {var(prov.deps[0], col)})")
                equations.append(f"(= {var(key, col, '_den')} {var(prov.deps[1], col)})")
            elif prov.rule == "copy" and prov.deps:
                equations.append(f"(= {here} {var(prov.deps[0], col)})")
                if prov.cls is Cls.RATIO:
                    equations.append(f"(= {var(key, col, '_den')} "
                                     f"{var(prov.deps[0], col, '_den')})")
            else:
                raise InternalError(f"exactly_once_merge: value {key} has no count rule")
    wrong: list[str] = []
    for fact in _judged(res):
        if fact.value.cls not in (Cls.ADDITIVE, Cls.RATIO):
            continue
        key = (fact.rank, fact.op.args[0].id)  # type: ignore[union-attr]
        for col in cols_by_group.get(group[fact.rank], ()):
            wrong.append(f"(not (= {var(key, col)} 1))")
            if fact.value.cls is Cls.RATIO:
                wrong.append(f"(not (= {var(key, col, '_den')} 1))")
    smt = SmtLib("exactly-once merge counts")
    smt.declare(sorted(names.values()))
    smt.group("count_equations")
    for e in equations:
        smt.add(e)
    smt.group("some_output_count_not_one")
    smt.add(f"(or {' '.join(wrong)} false)")
    outcome = check(smt.solver(budget))
    return outcome.result, outcome.reason + sampled, terms


def exactly_once_merge(ctx: CheckContext) -> PropertyResult:
    start = time.perf_counter()
    schedule, budget = ctx.schedule, ctx.budget
    res = analyse(schedule, ctx.channels)
    progs = schedule.programs
    if not schedule.active:
        # Typically a wrong --arg (n_ranks, cube_start, rank_axis) makes every rank return
        # at once: "all proved" would hide that the kernel never ran.
        return PropertyResult(Property.EXACTLY_ONCE_MERGE, Status.UNKNOWN,
                              "no rank ran any op (every rank returned at once): nothing to "
                              "certify; check the launch and the --arg values (n_ranks, "
                              "cube_start, rank_axis)", seconds=time.perf_counter() - start,
                              certificate="provenance")
    if not res.shards:
        named = ', '.join(schedule.launch.sharded) or 'none'
        # Without shards every value is a constant, so a kernel whose KV buffers are named
        # otherwise would pass unchecked: softmax partials with no shard are not certified.
        partial = next((op for p in progs for op in p.ops
                        if op.kind in (OpKind.EXP, OpKind.SOFTMAX)), None)
        if partial is not None:
            return PropertyResult(
                Property.EXACTLY_ONCE_MERGE, Status.UNKNOWN,
                f"no rank loads a sharded buffer ({named}), yet the kernel computes softmax "
                f"partials ({partial.kind.value} at {partial.source}): name its KV buffers "
                "with --sharded a_ptr,b_ptr", seconds=time.perf_counter() - start,
                certificate="provenance")
        return PropertyResult(Property.EXACTLY_ONCE_MERGE, Status.PROVED,
                              f"vacuous: no rank loads a sharded buffer ({named}) and no rank "
                              "computes a softmax partial",
                              seconds=time.perf_counter() - start, certificate="provenance")
    diags: list[Diagnostic] = []
    counts: list[MergeCount] = []
    unknown: list[str] = []
    judged = _judged(res)
    for fact in judged:
        ep = progs[fact.rank].endpoint
        if fact.value.cls is Cls.OPAQUE:
            unknown.append(f"rank {ep.describe()} stores at {fact.op.source} a value the "
                           f"counting rules do not cover ({fact.value.why})")
            continue
        if fact.value.cls is Cls.LOST:
            diags.append(Diagnostic(f"stored output depends on a message that never arrives "
                                    f"({fact.value.why})", Role.MERGE, fact.op.source, ep,
                                    fact.op.index, OpKind.STORE))
            continue
        for col, n, d in _bad_counts(fact):
            shard_ep = progs[res.shards[col]].endpoint
            counts.append(MergeCount(ep, shard_ep, n, d))
            if len(diags) < MAX_LISTED:
                verb = "never merged" if n == 0 else "merged more than once" if n > 1 else \
                    "numerator and denominator disagree"
                den_text = f" and {d} in the denominator" if d is not None else ""
                diags.append(Diagnostic(
                    f"output counts the partial of shard {shard_ep.describe()} {n} time(s) in "
                    f"the numerator{den_text} (expected 1): {verb}", Role.MERGE,
                    fact.op.source, ep, fact.op.index, OpKind.STORE, peer=shard_ep))
    for mix in res.mixing:
        diags.append(Diagnostic(mix.message, Role.MERGE, mix.op.source,
                                progs[mix.rank].endpoint, mix.op.index, mix.op.kind))
    if res.cyclic_ranks:
        eps = ", ".join(progs[r].endpoint.label for r in res.cyclic_ranks[:8])
        unknown.append(f"values on {len(res.cyclic_ranks)} rank(s) ({eps}) depend on "
                       "themselves through messages")
    z3_result, z3_reason, terms = (SatResult.UNKNOWN, "", 0)
    if not unknown:
        z3_result, z3_reason, terms = _z3_counts(schedule, res, budget)
    seconds = time.perf_counter() - start
    count_violation = bool(counts)
    if z3_result is SatResult.UNSAT and count_violation:
        raise InternalError("exactly_once_merge: the provenance interpreter finds a wrong count "
                            "but Z3's count equations say every output counts 1")
    if z3_result is SatResult.SAT and not count_violation:
        raise InternalError("exactly_once_merge: Z3 finds a wrong count the provenance "
                            "interpreter does not")
    if z3_result is SatResult.UNKNOWN and z3_reason:
        unknown.append(f"Z3 count check returned unknown ({z3_reason})")
        cert = "provenance interpreter"
    else:
        cert = f"provenance interpreter + z3 count equations ({terms} terms, " \
               f"{z3_result.value}{z3_reason})"
    n_out = len([f for f in judged if f.value.cls in (Cls.ADDITIVE, Cls.RATIO)])
    if diags:
        bad_ranks = sorted({d.endpoint for d in diags if d.endpoint} |
                           {c.endpoint for c in counts})
        worst = max((c.numerator for c in counts), default=None)
        n_lost = sum(1 for d in diags if "never arrives" in d.message)
        summary = f"{len(counts) or len(diags) - n_lost} wrong merge count(s) on " \
                  f"{len(bad_ranks)} rank(s)"
        if n_lost:
            summary = f"{n_lost} stored output(s) depend on messages that never arrive" + \
                      (f"; {summary}" if counts else "")
        if counts:
            zeros = sum(1 for c in counts if c.numerator == 0)
            summary += f" (max count {worst}, {zeros} never merged)"
        return PropertyResult(Property.EXACTLY_ONCE_MERGE, Status.VIOLATED, summary,
                              Counterexample(summary, tuple(diags), MergeDetails(tuple(counts))),
                              seconds, cert)
    if unknown:
        return PropertyResult(Property.EXACTLY_ONCE_MERGE, Status.UNKNOWN,
                              "cannot certify merging: " + "; ".join(unknown[:3]), None,
                              seconds, cert)
    if n_out == 0:
        return PropertyResult(Property.EXACTLY_ONCE_MERGE, Status.UNKNOWN,
                              "no stored output is a merged partial (nothing to check: store "
                              "o / ℓ or the unnormalised o)", None, seconds, cert)
    n_shards = int(np.max([int(f.expected.sum()) for f in judged]))
    return PropertyResult(Property.EXACTLY_ONCE_MERGE, Status.PROVED,
                          f"{n_out} stored output(s) each count every one of their group's "
                          f"shards exactly once (up to {n_shards} shards per group)",
                          None, seconds, cert)
