"""The semantic analysis of a launch: every stored output's exact form, judged.

One analysis serves three properties: attention_equivalence (is each output attention
over its group's KV), exactly_once_merge (does each output count every key row once) and
numeric_safety (exp arguments, magnitudes, empty partials).
"""

from __future__ import annotations

from dataclasses import dataclass

from meshproof.model.channels import ChannelTable
from meshproof.model.problem import Problem
from meshproof.model.schedule import Harness, Op, OpKind, Schedule, ValueRef
from meshproof.verify.semantics.events import Departure, Event
from meshproof.verify.semantics.index import Aff, unify_axis
from meshproof.verify.semantics.interp import Interpreter, Opaque, output_coords
from meshproof.verify.semantics.judge import Shape, Verdict, compare, decompose
from meshproof.verify.semantics.layouts import Value


@dataclass(frozen=True, slots=True)
class OutputResult:
    rank: int
    store: Op
    verdict: Verdict
    shape: Shape | None          # None when the stored value is opaque
    opaque: Opaque | None = None


_RELEVANT = {
    "weigh": (Departure.OVERLAP, Departure.WEIGHTED, Departure.MACHINE_ZERO),
    "reference": (Departure.REFERENCE_POINTS,),
    "normalised": (Departure.NORMALISED_TWICE, Departure.MERGES_NORMALISED),
    "scale": (Departure.SCALE,),
    "score": (Departure.CONTRACTION, Departure.SCALE),
    "never divided": (),
}
MAX_EXPLAINED = 8


@dataclass(frozen=True, slots=True)
class Analysis:
    problem: Problem
    outputs: tuple[OutputResult, ...]
    interp: Interpreter
    silent_groups: tuple[int, ...]       # groups in which no rank stores an output
    unwritten: tuple[tuple[int, str, tuple[tuple[int, int], ...]], ...] = ()
    # (rank, output buffer, element ranges it never writes) on ranks that must write it

    def cone_events(self, rank: int, vid: int) -> list[Event]:
        """Departure events of every value the given value depends on, in program order."""
        seen: set[tuple[int, int]] = set()
        stack = [(rank, vid)]
        out: list[Event] = []
        interp = self.interp
        while stack:
            key = stack.pop()
            if key in seen:
                continue
            seen.add(key)
            out.extend(interp.events(key))
            stack.extend(interp.deps(key))
        return sorted(out, key=lambda e: (e.op.index, e.rank))

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
                                   f"{op.source}: {op.kind.value} {result.opaque.reason}")]
        wanted: list[Departure] = []
        for reason in result.verdict.reasons:
            for word, kinds in _RELEVANT.items():
                if word in reason:
                    wanted.extend(kinds)
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
                e = Event(e.kind, e.rank, e.op, f"{e.message}; the reference scale is "
                          f"{self.problem.scale:.6g} ({self.problem.scale_source})", e.value)
            out.append(e)
        return out[:MAX_EXPLAINED]


def _coords_for(interp: Interpreter, rank: int, store: Op, value: Value
                ) -> tuple[Value, tuple[Aff, Aff, Aff]] | str:
    placed = output_coords(interp.problem, rank, store.offset, store.shape, interp.src)
    if isinstance(placed, str):
        return placed
    layout, coords = placed
    form = value.form
    for va, oa in zip(value.layout.axes, layout.axes, strict=True):
        unified = unify_axis(va, oa, interp.src) if (va or oa) else ((), {}, {})
        if unified is None:
            return "stores a value whose axes do not line up with the output's"
        _, s_val, s_out = unified
        form = form.subst(s_val)
        t, h, e = (c.substitute(s_val).substitute(s_out) for c in coords)
        coords = (t, h, e)
    return Value(value.layout, form), coords


def analyse(schedule: Schedule, table: ChannelTable, problem: Problem) -> Analysis:
    interp = Interpreter(schedule, table, problem)
    outputs: list[OutputResult] = []
    storing: set[int] = set()
    # A stored value's judgment follows from its form, the store's place in the output and
    # the rank's group and query rows: outputs of the same situation are judged once.
    judged: dict[tuple[object, ...], tuple[Verdict, Shape | None]] = {}
    for r, prog in enumerate(schedule.programs):
        stores = [op for op in prog.ops if op.kind is OpKind.STORE and
                  op.ptr in problem.outputs]
        if not stores:
            continue
        live = interp.rank_memory(r).live_stores
        for op in stores:
            if op.index not in live:
                continue
            storing.add(problem.group_of[r])
            arg = op.args[0]
            assert isinstance(arg, ValueRef)
            cv, delta = interp.canonical(r, arg.id)
            if isinstance(cv, Opaque):
                outputs.append(OutputResult(r, op, Verdict(False, (cv.reason,)), None, cv))
                continue
            key = (cv.id, delta, op.offset, op.shape, problem.group_of[r], problem.q_base(r))
            if key not in judged:
                judged[key] = _judge(interp, r, op, interp.result(r, arg.id))
            verdict, shape = judged[key]
            outputs.append(OutputResult(r, op, verdict, shape))
    silent = tuple(g.index for g in problem.groups if g.index not in storing and g.shards)
    return Analysis(problem, tuple(outputs), interp, silent, _unwritten(schedule, problem))


def _judge(interp: Interpreter, rank: int, store: Op, res: Value | Opaque
           ) -> tuple[Verdict, Shape | None]:
    assert isinstance(res, Value)
    placed = _coords_for(interp, rank, store, res)
    if isinstance(placed, str):
        return Verdict(False, (placed,)), None
    value, coords = placed
    sizes = {d.id: d.size for d in value.layout.digits}
    problem = interp.problem
    verdict = compare(value.form, problem, problem.group_of[rank], coords, sizes)
    return verdict, decompose(value.form)


def _unwritten(schedule: Schedule, problem: Problem
               ) -> tuple[tuple[int, str, tuple[tuple[int, int], ...]], ...]:
    """Output elements never stored, on ranks that store the buffer (and, for prefill, on
    every rank that holds query rows: only it computes them)."""
    size = problem.S_q * problem.h_q * problem.d_head
    out = []
    for r, prog in enumerate(schedule.programs):
        stores = [op for op in prog.ops if op.kind is OpKind.STORE]
        for ptr in problem.outputs:
            spans = sorted((op.offset, op.offset + op.nbytes // op.dtype.itemsize)
                           for op in stores if op.ptr == ptr)
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
