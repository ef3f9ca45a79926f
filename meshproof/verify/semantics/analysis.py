"""The semantic analysis of a launch: every stored output's exact form, judged.

One analysis serves three properties: attention_equivalence (is each output attention
over its group's KV), exactly_once_merge (does each output count every key row once) and
numeric_safety (exp arguments, magnitudes, empty partials).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from meshproof.model.channels import ChannelTable
from meshproof.model.evaluate import Dependencies, Evaluation, OpsProgress
from meshproof.model.problem import DEFAULT_INPUT_BOUND, Problem
from meshproof.model.schedule import Harness, Op, OpKind, Schedule, ValueRef
from meshproof.verify.semantics.budget import Budget
from meshproof.verify.semantics.crossings import MaskedCounts, count_masked, guarded, pair_words
from meshproof.verify.semantics.events import Departure, Event
from meshproof.verify.semantics.index import (
    Aff,
    DigitSource,
    Layout,
    flat_slice,
    regroup,
    unify_axis,
)
from meshproof.verify.semantics.judge import Mismatch, Reason, Shape, Verdict, compare, decompose
from meshproof.verify.semantics.layouts import Value, buffer, read
from meshproof.verify.semantics.mask_departure import mask_departure
from meshproof.verify.semantics.rational import ZERO_RAT, Rat
from meshproof.verify.semantics.reasons import NotModelled
from meshproof.verify.semantics.situation_facts import Held
from meshproof.verify.semantics.situations import Forms, Situations
from meshproof.verify.semantics.strided import expand_form
from meshproof.verify.semantics.symbolic import Symbolic
from meshproof.verify.semantics.symbolic_core import Opaque, Result


@dataclass(frozen=True, slots=True)
class OutputResult:
    rank: int
    store: Op
    verdict: Verdict
    shape: Shape | None          # None when the stored value is opaque
    opaque: Opaque | None = None
    misplaced: bool = False      # it writes outside the output buffer
    form: Rat | None = None      # the judged form (of the live part of the store)
    live: tuple[int, int] | None = None   # the elements still held, when a later store
                                          # rewrote the rest
    counts: MaskedCounts | None = None    # masked (or masking) outputs: the key counts at
                                          # every query, and the first wrong pair


_D = Departure
_RELEVANT: dict[Mismatch, tuple[Departure, ...]] = {
    Mismatch.UNEVEN: (_D.OVERLAP, _D.WEIGHTED, _D.MACHINE_ZERO),
    Mismatch.NUM_DEN_DIFFER: (_D.OVERLAP, _D.WEIGHTED, _D.MACHINE_ZERO),
    Mismatch.MIXED_ROWS: (_D.OVERLAP, _D.WEIGHTED, _D.MACHINE_ZERO),
    Mismatch.REFERENCE_POINTS: (_D.REFERENCE_POINTS,),
    Mismatch.NORMALISED_TWICE: (_D.NORMALISED_TWICE, _D.MERGES_NORMALISED),
    Mismatch.SCALE: (_D.SCALE, _D.CONTRACTION, _D.REFERENCE_POINTS),
    Mismatch.SCALES_DIFFER: (_D.SCALE, _D.CONTRACTION),
    Mismatch.NOT_A_PARTIAL: (_D.CONTRACTION, _D.SCALE),
    Mismatch.WRONG_QUERY: (_D.CONTRACTION, _D.SCALE),
    Mismatch.NOT_A_MERGE: (_D.CONTRACTION, _D.SCALE),
}
MAX_EXPLAINED = 8


class _Explaining:
    """The unmemoised symbolic evaluation that records departure events, built the first
    time an output needs explaining (only failing outputs do)."""

    def __init__(self, schedule: Schedule, table: ChannelTable, problem: Problem) -> None:
        self.args = (schedule, table, problem)
        self.evaluation: Evaluation[Result] | None = None

    def get(self) -> Evaluation[Result]:
        if self.evaluation is None:
            schedule, table, problem = self.args
            deps = Dependencies(schedule, table)
            self.evaluation = Evaluation(schedule, table,
                                         Symbolic(schedule, problem, dependencies=deps), deps)
        return self.evaluation


@dataclass(frozen=True, slots=True)
class Analysis:
    problem: Problem
    outputs: tuple[OutputResult, ...]
    forms: Forms
    silent_groups: tuple[int, ...]       # groups in which no rank stores an output
    unwritten: tuple[tuple[int, str, tuple[tuple[int, int], ...]], ...] = ()
    # (rank, output buffer, element ranges it never writes) on ranks that must write it
    explaining: _Explaining | None = None

    @property
    def evaluation(self) -> Evaluation[Held]:
        return self.forms.evaluation

    def value(self, rank: int, vid: int) -> Value | Opaque:
        return self.forms.value(rank, vid)

    def cone_events(self, rank: int, vid: int) -> list[Event]:
        """Departure events of every value the given value depends on, in program order
        (from an unmemoised evaluation of that value's cone, which records them)."""
        assert self.explaining is not None
        ev = self.explaining.get()
        ev.value(rank, vid)
        domain = ev.domain
        assert isinstance(domain, Symbolic)
        events = domain.rec.events
        out: list[Event] = []
        for key in ev.cone([(rank, vid)]):
            out.extend(events.get(key, ()))
        return sorted(out, key=lambda e: (e.op.index, e.rank))

    def mask_event(self, result: OutputResult) -> Event | None:
        """The tl.where (or dot) that decides the first wrong pair of a masked output."""
        if result.counts is None or result.counts.wrong is None:
            return None
        arg = result.store.args[0]
        assert isinstance(arg, ValueRef)
        return mask_departure(self.problem, self.evaluation, self.value, result.rank,
                              arg.id, result.counts.wrong)

    def explain(self, result: OutputResult) -> list[Event]:
        """Where the output departs from attention: the events of its cone that explain
        the judge's findings, at their lines (first occurrence of each line)."""
        arg = result.store.args[0]
        assert isinstance(arg, ValueRef)
        events = self.cone_events(result.rank, arg.id)
        if result.opaque is not None:
            first = next((e for e in events if e.kind is Departure.OPAQUE), None)
            op = result.opaque.op
            return [first or Event(Departure.OPAQUE, result.opaque.rank, op,
                                   f"line {op.source.line}: tl.{op.kind.value} "
                                   f"{result.opaque.reason}")]
        masked = self.mask_event(result)
        if masked is not None:
            return [masked]
        wanted = {k for reason in result.verdict.reasons for k in _RELEVANT.get(reason.kind, ())}
        shown: set[tuple[str, str]] = set()
        out: list[Event] = []
        for e in events:
            if e.kind not in wanted:
                continue
            if e.kind is Departure.SCALE and abs(e.value - self.problem.scale) <= \
                    1e-6 * self.problem.scale:
                continue
            sig = (e.kind.value, str(e.op.source))
            if sig in shown:
                continue
            shown.add(sig)
            if e.kind is Departure.SCALE:
                e = Event(e.kind, e.rank, e.op, f"{e.message}; the reference uses "
                          f"{self.problem.scale:.6g} ({self.problem.scale_source})", e.value)
            out.append(e)
        return _one_sided(out)[:MAX_EXPLAINED]


def _one_sided(events: list[Event]) -> list[Event]:
    """'the received ℓ is scaled by 2 at line 40' gains ', its o is not' when only one of
    ℓ and o is weighted at that line."""
    weighted: dict[tuple[int, float], set[str]] = {}
    for e in events:
        if e.kind is Departure.WEIGHTED:
            what = "ℓ" if "ℓ" in e.message.split(" is scaled")[0] else \
                "o" if " o is" in e.message else ""
            weighted.setdefault((e.op.source.line, e.value), set()).add(what)
    out = []
    for e in events:
        kinds = weighted.get((e.op.source.line, e.value), set())
        if e.kind is Departure.WEIGHTED and len(kinds) == 1 and kinds <= {"ℓ", "o"}:
            other = "o" if kinds == {"ℓ"} else "ℓ"
            e = Event(e.kind, e.rank, e.op, f"{e.message}, its {other} is not", e.value)
        out.append(e)
    return out


@dataclass(frozen=True, slots=True)
class Unplaced:
    """Why a store's elements have no place in the output, in words; `outside`: it
    writes past the end of the output buffer (a lost write, not a wrong value)."""

    message: str
    outside: bool = False


def output_coords(problem: Problem, rank: int, offset: int, shape: tuple[int, ...],
                  src: DigitSource) -> tuple[Layout, tuple[Aff, Aff, Aff]] | Unplaced:
    """For a store of `shape` at `offset` into an output buffer of `rank`: a layout of
    `shape` and the (query row, q head, feature) each of its elements lands on."""
    base = problem.q_base(rank)
    if base is None:
        return Unplaced("stores an output on a rank that holds no query rows")
    coords: dict[str, tuple[Aff, Aff, Aff]] = {}

    q_pos = problem.rank_positions(rank)[0] if problem.position_rows else None
    shift = 0 if q_pos is not None else base

    def make(c: tuple[Aff, ...]) -> Rat:
        coords["c"] = (c[0].shift(shift), c[1], c[2])
        return ZERO_RAT

    out = buffer((problem.S_q, problem.h_q, problem.d_head), make, src,
                 None if q_pos is None else q_pos.tolist())
    layout = out.layout
    total = layout.size()
    count = math.prod(shape)
    if offset + count > total:
        return Unplaced(f"stores beyond the end of the output ({offset + count} > {total} "
                        "elements)", outside=True)
    c3 = coords["c"]
    if not (offset == 0 and count == total):
        box = flat_slice(layout, offset, count, src)
        if box is None:
            return Unplaced("stores elements that straddle rows of the output")
        flat = box.flat
        t, h, e = (a.substitute(box.subst) for a in c3)
        c3 = (t, h, e)
    else:
        flat = layout.flat()
    regrouped = regroup(flat, shape, src)
    if regrouped is None:
        return Unplaced(f"stores a {shape} value into the output in an order that mixes "
                        "indices")
    new_layout, s = regrouped
    t, h, e = (a.substitute(s) for a in c3)
    return new_layout, (t, h, e)


def _coords_for(domain: Symbolic, rank: int, offset: int, value: Value
                ) -> tuple[Value, tuple[Aff, Aff, Aff]] | Unplaced:
    placed = output_coords(domain.problem, rank, offset, value.layout.shape, domain.src)
    if isinstance(placed, Unplaced):
        return placed
    layout, coords = placed
    form = expand_form(value.form)    # the judge and the counts read row sums only
    for va, oa in zip(value.layout.axes, layout.axes, strict=True):
        unified = unify_axis(va, oa, domain.src) if (va or oa) else ((), {}, {})
        if unified is None:
            return Unplaced("stores a value whose axes do not line up with the output's")
        _, s_val, s_out = unified
        form = form.subst(s_val)
        t, h, e = (c.substitute(s_val).substitute(s_out) for c in coords)
        coords = (t, h, e)
    return Value(value.layout, form), coords


def analyse(schedule: Schedule, table: ChannelTable, problem: Problem,
            budget: Budget | None = None, memo: bool = True,
            input_bound: float = DEFAULT_INPUT_BOUND,
            progress: OpsProgress | None = None) -> Analysis:
    deps = Dependencies(schedule, table)
    situations = Situations(schedule, problem, input_bound, budget, memo, deps)
    ev: Evaluation[Held] = Evaluation(schedule, table, situations, deps)
    situations.attach(ev)
    ev.run(progress)
    forms = Forms(ev, situations)
    domain = situations.algebra
    outputs: list[OutputResult] = []
    storing: set[int] = set()
    for r, prog in enumerate(schedule.programs):
        memory = ev.rank_memory(r)
        for op in prog.ops:
            if op.kind is not OpKind.STORE or op.ptr not in problem.outputs:
                continue
            if op.index not in memory.live_stores:
                continue
            storing.add(problem.group_of[r])
            arg = op.args[0]
            assert isinstance(arg, ValueRef)
            res = forms.value(r, arg.id)
            if isinstance(res, Opaque):
                outputs.append(OutputResult(r, op, Verdict(False, (
                    Reason(Mismatch.DIFFERS, res.reason),)), None, res))
                continue
            outputs.extend(_judge_store(domain, r, op, res, memory.live_ranges[op.index]))
    silent = tuple(g.index for g in problem.groups if g.index not in storing and g.shards)
    return Analysis(problem, tuple(outputs), forms, silent, _unwritten(schedule, problem),
                    _Explaining(schedule, table, problem))


def _judge_store(domain: Symbolic, rank: int, store: Op, value: Value,
                 live: tuple[tuple[int, int], ...]) -> list[OutputResult]:
    """A store judged on what it still holds: whole, or each range a later store left."""
    size = math.prod(store.shape)
    parts: list[tuple[int, Value | Unplaced, tuple[int, int] | None]] = []
    if live == ((store.offset, store.offset + size),):
        parts.append((store.offset, value, None))
    else:
        for lo, hi in live:
            try:
                parts.append((lo, read(value, lo - store.offset, (hi - lo,), domain.src),
                              (lo, hi)))
            except NotModelled as exc:
                parts.append((lo, Unplaced(f"keeps elements {lo}..{hi - 1} that {exc}"),
                              (lo, hi)))
    out = []
    problem = domain.problem
    for offset, part, rows in parts:
        placed = _coords_for(domain, rank, offset, part) if isinstance(part, Value) else part
        if isinstance(placed, Unplaced):
            out.append(OutputResult(rank, store, Verdict(False, (
                Reason(Mismatch.DIFFERS, placed.message),)), None, misplaced=placed.outside,
                live=rows))
            continue
        judged, coords = placed
        sizes = {d.id: d.size for d in judged.layout.digits}
        group = problem.group_of[rank]
        verdict = compare(judged.form, problem, group, coords, sizes)
        counts = None
        if problem.mask is not None or guarded(judged.form):
            counts = count_masked(judged.form, problem, group, coords[0], sizes)
            if not verdict.equal and counts.wrong is not None:
                rest = tuple(r for r in verdict.reasons if r.kind is not Mismatch.DIFFERS)
                verdict = Verdict(False, (Reason(Mismatch.MASK, pair_words(
                    problem, counts.wrong)), *rest))
        out.append(OutputResult(rank, store, verdict, decompose(judged.form), None, False,
                                judged.form, rows, counts))
    return out


def _unwritten(schedule: Schedule, problem: Problem
               ) -> tuple[tuple[int, str, tuple[tuple[int, int], ...]], ...]:
    """Output elements never stored, on ranks that store the buffer (and, for prefill, on
    every rank that holds query rows: only it computes them)."""
    size = problem.S_q * problem.h_q * problem.d_head
    out = []
    for r, prog in enumerate(schedule.programs):
        for ptr in problem.outputs:
            spans = sorted((op.offset, op.offset + op.nbytes // op.dtype.itemsize)
                           for op in prog.ops if op.kind is OpKind.STORE and op.ptr == ptr)
            must = bool(spans) or (problem.harness is Harness.PREFILL and
                                   r in problem.groups[problem.group_of[r]].q_blocks)
            if not must:
                continue
            gaps: list[tuple[int, int]] = []
            pos = 0
            for lo, hi in spans:
                if lo > pos:
                    gaps.append((pos, min(lo, size)))
                pos = max(pos, hi)
            if pos < size:
                gaps.append((pos, size))
            if gaps:
                out.append((r, ptr, tuple(gaps)))
    return tuple(out)
