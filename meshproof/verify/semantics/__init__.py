"""Semantic analysis of attention kernels: exact normal forms of every stored output.

The public face of the three semantic properties (attention_equivalence, exactly_once_merge,
numeric_safety): `semantic_analysis` evaluates the schedule once into exact forms and the
properties read it. Nothing here runs kernel code: the schedule IR is the input.

Reading order (each module imports only those before it; tests/test_layering.py checks
that there is no cycle and that nothing here imports the rest of verify/):

- index.py     digits, affine index forms, mixed-radix layouts
- reasons.py   why a form is outside the algebra (NotModelled, Undefined)
- atom_base.py interned atoms and frames; tensor_atoms.py: Q/K/V elements, scores,
               scrambled dots
- atoms.py     linear forms of atoms
- maxima.py    maxima over linear forms
- inequalities.py  a guard: a conjunction of affine inequalities over a box
- guards.py    masks as guards: positions (Idx), indicators (Ind), penalties (Pen)
- poly_terms.py  monomials and polynomials (the terms); poly_atoms.py: row sums over key
               rows, logarithms; poly_intervals.py: refinement and coarsening of row sums;
               poly_divide.py: exact division
- poly.py      exponential polynomials: arithmetic and normalisation
- rat.py       the normal form `Rat` (rational functions of polynomials), built and viewed
- rational.py  its arithmetic, exp and log; rational_max.py: max and min
- masks.py     the symbolic rules of tl.arange, comparisons and tl.where
- tiles.py     key tiles: a sum over a tile's keys (a guarded row sum), then over the tiles
- reduce.py    sums over key rows, contractions into scores, maxima over rows
- views.py     what a form is, in the words of an online softmax
- domination.py  max-domination: exp arguments <= 0
- order.py     lower bounds by max-domination
- bounds.py    magnitude bounds under |inputs| <= B
- layouts.py   values: a layout and a form
- events.py    departures, recorded where a kernel stops being an online softmax
- budget.py    the analysis's time and memory budget
- symbolic_core.py  the symbolic domain's frame: Opaque, the guard around every op, the
               harness's inputs; symbolic_arith.py: its unary and binary arithmetic
- symbolic.py  the symbolic domain of model/evaluate.py
- readers.py   what the interval and rounding rules read (protocols)
- ranges.py    the interval domain; rounding.py: the rounding-error domain
- canon.py     canonical values (digits renamed, key rows shifted), hash-consed
- situation_facts.py, situation_memo.py  a value's facts and handle; the memo's machinery
- situations.py  the situation memo: forms, intervals and rounding errors once per
               situation, shared by every rank that meets it
- masked_ref.py  the masked reference (guarded sums over the keys a mask allows)
- partials.py  a form as partials, typed mismatches; partial_weights.py: their weights
- judge.py     the identity with attention, and why not; counts.py: key-row counts
- crossings.py masked key counts at every query, read at end-point crossings
- mask_departure.py  the tl.where (or dot) that decides a wrong masked pair
- numeric.py, cone.py, witness.py   numeric domains and witnesses in 40-digit arithmetic
- sparse_cone.py, sparse_eval.py   targeted witnesses: one element over a sparse cone
- hazards.py, safety.py   numeric_safety's checks
- analysis.py  the analysis the properties share (verify/shared_analysis.py caches it)
"""

from __future__ import annotations

from dataclasses import dataclass

from meshproof.model.channel_table import ChannelTable
from meshproof.model.op_semantics import OpsProgress
from meshproof.model.problem import (
    DEFAULT_INPUT_BOUND,
    Problem,
    ProblemUnavailable,
    attention_problem,
)
from meshproof.model.schedule import Schedule
from meshproof.verify.semantics.analysis import Analysis, OutputResult, analyse
from meshproof.verify.semantics.bounds import assume
from meshproof.verify.semantics.budget import Budget, OutOfBudget


@dataclass(frozen=True, slots=True)
class SemanticAnalysis:
    problem: Problem | None
    analysis: Analysis | None
    unavailable: str = ""       # why there is no analysis: no attention problem, or ...
    stopped: bool = False       # ... its budget ran out (then `unavailable` says where)

    def why_not(self, what: str) -> str:
        """Why a property has nothing to judge, in the words a verdict uses."""
        if self.stopped:
            return (f"{self.unavailable}; check the protocol alone with --skip "
                    "exactly_once_merge,attention_equivalence,numeric_safety, or give more "
                    "time with --timeout")
        return f"{what}: {self.unavailable}"


def semantic_analysis(schedule: Schedule, table: ChannelTable, budget: Budget | None = None,
                      input_bound: float = DEFAULT_INPUT_BOUND,
                      score_bound: float | None = None,
                      progress: OpsProgress | None = None) -> SemanticAnalysis:
    """The analysis under |inputs| <= input_bound and, if given, |scale·q·kᵀ| <= score_bound
    (bounds.assume: the intervals and rounding errors read both); `progress` is told the
    ops evaluated of all."""
    spec = schedule.launch
    try:
        problem = attention_problem(schedule, spec.groups, spec.outputs, spec.softmax_scale)
    except ProblemUnavailable as exc:
        return SemanticAnalysis(None, None, str(exc))
    input_bound = assume(input_bound, score_bound, problem.scale)
    try:
        return SemanticAnalysis(problem, analyse(schedule, table, problem, budget,
                                                 input_bound=input_bound, progress=progress))
    except OutOfBudget as exc:
        return SemanticAnalysis(problem, None, str(exc), stopped=True)
    except MemoryError:
        return SemanticAnalysis(problem, None, "the semantic analysis ran out of memory",
                                stopped=True)


__all__ = ["DEFAULT_INPUT_BOUND", "Analysis", "OutputResult", "SemanticAnalysis",
           "semantic_analysis"]
