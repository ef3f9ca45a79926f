"""Static numeric safety: exp arguments <= 0, 16-bit values within range.

Everything is judged on the exact forms at the launch's real sizes, with one assumption
stated in the verdict: every input element satisfies |x| <= B (`--input-bound`, default
16). Magnitude bounds follow the forms (bounds.py). A bound above a dtype's finite max, or
an exp argument not shown <= 0, is a violation only with a witness input that reaches it
(Q = K = V = B makes every score equal and every weight 1, which attains the bounds; Q = B,
K = -B makes every score negative; seeded N(0,1)); otherwise unknown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from meshproof.model.channels import ChannelTable
from meshproof.model.evaluate import Evaluation
from meshproof.model.problem import Problem
from meshproof.model.schedule import DType, Op, OpKind, Schedule, ValueRef
from meshproof.verify.semantics import rational as R
from meshproof.verify.semantics.numeric import Inputs, Num
from meshproof.verify.semantics.order import nonpositive, ratio_at_most_one
from meshproof.verify.semantics.ranges import value_ranges
from meshproof.verify.semantics.reasons import NotModelled, Undefined
from meshproof.verify.semantics.symbolic import LN2, Opaque, Result
from meshproof.verify.semantics.views import describe
from meshproof.verify.semantics.witness import make_inputs, numeric_evaluation

DTYPE_MAX = {DType.F16: 65504.0, DType.BF16: 3.3895313892515355e38, DType.F32: 3.4028235e38}


class Hazard(Enum):
    EXP_POSITIVE = "exp_positive"
    OVERFLOW = "overflow"
    EMPTY_PARTIAL = "empty_partial"


@dataclass(frozen=True, slots=True)
class Finding:
    hazard: Hazard
    rank: int
    op: Op
    message: str
    bound: float | None = None
    limit: float | None = None


@dataclass(slots=True)
class Safety:
    violations: list[Finding] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    exp_checked: int = 0
    narrow_checked: int = 0


def constant_inputs(problem: Problem, q: float, k: float, v: float) -> Inputs:
    def full(rows: int, heads: int, x: float) -> np.ndarray:
        return np.full((max(rows, 1), heads, problem.d_head), x, dtype=np.float64)
    return Inputs({g.index: full(problem.q_rows(g.index), problem.h_q, q) for g in problem.groups},
                  {g.index: full(problem.kv_rows(g.index), problem.h_kv, k)
                   for g in problem.groups},
                  {g.index: full(problem.kv_rows(g.index), problem.h_kv, v)
                   for g in problem.groups})


def families(problem: Problem, b: float) -> list[tuple[str, Inputs]]:
    return [(f"Q = K = V = {b:g} (every score equal, every weight 1)",
             constant_inputs(problem, b, b, b)),
            (f"Q = {b:g}, K = {-b:g} (every score negative)", constant_inputs(problem, b, -b, b)),
            ("seeded N(0,1) inputs", make_inputs(problem, 0))]


class _Checks:
    def __init__(self, schedule: Schedule, table: ChannelTable, problem: Problem,
                 symbolic: Evaluation[Result], b: float) -> None:
        self.schedule, self.table, self.problem = schedule, table, problem
        self.sym, self.b = symbolic, b
        self.ranges = value_ranges(symbolic, b, problem.d_head)
        self.out = Safety()
        self.evals: dict[str, Evaluation[Num | None]] = {}
        self.seen: set[tuple[str, str]] = set()

    def numeric(self, name: str, inputs: Inputs) -> Evaluation[Num | None]:
        if name not in self.evals:
            self.evals[name] = numeric_evaluation(self.schedule, self.table, self.problem,
                                                  inputs)
        return self.evals[name]

    def search(self, rank: int, vid: int, reaches: object) -> tuple[str, float] | None:
        """The first input family whose value at (rank, vid) passes `reaches`."""
        assert callable(reaches)
        with np.errstate(all="ignore"):
            for name, inputs in families(self.problem, self.b):
                val = self.numeric(name, inputs).value(rank, vid)
                if val is None:
                    continue
                top = reaches(np.asarray(val.data, dtype=float))
                if top is not None:
                    return name, top
        return None

    def check_exp(self, rank: int, op: Op) -> None:
        arg = op.args[0]
        assert isinstance(arg, ValueRef)
        res = self.sym.value(rank, arg.id)
        self.out.exp_checked += 1
        sig = ("exp", str(op.source))
        if isinstance(res, Opaque) and res.lost:
            return   # it waits on a message that never arrives: it never runs
        if isinstance(res, Opaque):
            if sig not in self.seen:
                self.seen.add(sig)
                self.out.unknown.append(f"{op.source}: the argument of {op.kind.value} is not "
                                        f"known exactly ({res.reason})")
            return
        form = R.scale(res.form, LN2) if op.kind is OpKind.EXP2 else res.form
        lin = form.as_lin()
        sizes = {dg.id: dg.size for dg in res.layout.digits}
        if lin is not None and nonpositive(lin, sizes):
            return
        if lin is not None:
            try:
                if ratio_at_most_one(R.exp(form)):
                    return
            except (NotModelled, Undefined):
                pass
        if sig in self.seen:
            return
        self.seen.add(sig)
        found = self.search(rank, arg.id, lambda v: (t if (t := float(np.nanmax(v))) > 1e-9
                                                     else None))
        if found is not None:
            name, top = found
            scale = " · ln 2" if op.kind is OpKind.EXP2 else ""
            self.out.violations.append(Finding(
                Hazard.EXP_POSITIVE, rank, op,
                f"the argument of {op.kind.value}{scale} is not dominated by a max "
                f"subtracted from it: with {name} it reaches {top:.4g} > 0 (exp may "
                "overflow; subtract the running max, e.g. max(m, m_in), not m + m_in)",
                top, 0.0))
            return
        self.out.unknown.append(f"{op.source}: cannot show that the argument of "
                                f"{op.kind.value} is <= 0 (it is not a value minus a max over "
                                "a set containing it)")

    def check_narrow(self, rank: int, op: Op) -> None:
        vid = op.out if op.out is not None else op.args[0].id  # type: ignore[union-attr]
        res = self.sym.value(rank, vid)
        self.out.narrow_checked += 1
        sig = ("narrow", str(op.source))
        if isinstance(res, Opaque) and res.lost:
            return
        if isinstance(res, Opaque):
            if sig not in self.seen:
                self.seen.add(sig)
                self.out.unknown.append(f"{op.source}: the {op.dtype.value} value of "
                                        f"{op.kind.value} is not known exactly, so it cannot "
                                        f"be bounded ({res.reason})")
            return
        if res.form.inf:
            return   # -inf (a running max before the first tile) is exact in every dtype
        limit = DTYPE_MAX[op.dtype]
        lo, hi = self.ranges.value(rank, vid)
        bound = None if math.isinf(lo) or math.isinf(hi) else max(abs(lo), abs(hi))
        if bound is not None and bound <= limit:
            return
        if sig in self.seen:
            return
        self.seen.add(sig)
        found = self.search(rank, vid, lambda v: (t if (t := float(np.nanmax(np.abs(v))))
                                                  > limit else None))
        if found is not None:
            name, top = found
            self.out.violations.append(Finding(
                Hazard.OVERFLOW, rank, op,
                f"{describe(res.form)} in {op.dtype.value} can reach {top:.6g} > {limit:g}, "
                f"the largest finite {op.dtype.value} (with {name}; bound {_fmt(bound)} for "
                f"|inputs| <= {self.b:g}): keep it in f32", bound, limit))
            return
        self.out.unknown.append(f"{op.source}: the {op.dtype.value} value of {op.kind.value} "
                                f"has no bound below {limit:g} for |inputs| <= {self.b:g} "
                                f"(bound {_fmt(bound)})")


def check_safety(schedule: Schedule, table: ChannelTable, problem: Problem,
                 symbolic: Evaluation[Result], input_bound: float) -> Safety:
    checks = _Checks(schedule, table, problem, symbolic, input_bound)
    for r, prog in enumerate(schedule.programs):
        for op in prog.ops:
            if op.kind in (OpKind.EXP, OpKind.EXP2):
                checks.check_exp(r, op)
            elif op.dtype in (DType.F16, DType.BF16) and op.kind is not OpKind.LOAD and \
                    (op.out is not None or op.kind in (OpKind.SEND, OpKind.STORE)):
                checks.check_narrow(r, op)
    return checks.out


def _fmt(x: float | None) -> str:
    return "none" if x is None else f"{x:.6g}"
