"""Semantic analysis of attention kernels: exact normal forms of every stored output.

Public face for the three semantic properties (attention_equivalence, exactly_once_merge,
numeric_safety). `semantic_analysis` evaluates the schedule once into exact forms; the
properties read it. Nothing here runs kernel code: the schedule IR is the input.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshproof.model.channels import ChannelTable
from meshproof.model.problem import Problem, ProblemUnavailable, attention_problem
from meshproof.model.schedule import Schedule
from meshproof.verify.properties import CheckContext
from meshproof.verify.semantics.analysis import Analysis, OutputResult, analyse
from meshproof.verify.semantics.bounds import DEFAULT_INPUT_BOUND


@dataclass(frozen=True, slots=True)
class SemanticAnalysis:
    problem: Problem | None
    analysis: Analysis | None
    unavailable: str = ""       # why there is no attention problem to judge


def shared_semantics(ctx: CheckContext) -> SemanticAnalysis:
    """The analysis the three semantic properties share (ctx.shared caches it)."""
    return semantic_analysis(ctx.schedule, ctx.channels)


def semantic_analysis(schedule: Schedule, table: ChannelTable) -> SemanticAnalysis:
    spec = schedule.launch
    try:
        problem = attention_problem(schedule, spec.groups, spec.outputs, spec.softmax_scale)
    except ProblemUnavailable as exc:
        return SemanticAnalysis(None, None, str(exc))
    return SemanticAnalysis(problem, analyse(schedule, table, problem))


__all__ = ["DEFAULT_INPUT_BOUND", "Analysis", "OutputResult", "SemanticAnalysis",
           "semantic_analysis", "shared_semantics"]
