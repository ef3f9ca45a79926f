"""Static numeric safety: exp arguments, magnitudes of 16-bit values, empty partials.

Everything is judged on the exact forms at the launch's real sizes, with one assumption
stated in the verdict: every input element satisfies |x| <= B (`--input-bound`, default
16). Magnitude bounds follow the forms: |QK| <= d*B^2, a maximum is bounded by its
members, a sum of exp(e - M) terms with every exponent provably <= 0 is at most its number
of terms, a normalised value is a convex combination of V rows, so at most B. A bound
above a dtype's finite max is a violation only with a witness input that reaches it (the
inputs Q = K = V = B make every score equal and every weight 1, which attains these
bounds); otherwise unknown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction

import numpy as np

from meshproof.model.channels import ChannelTable
from meshproof.model.problem import Problem
from meshproof.model.schedule import DType, Op, OpKind, Schedule, ValueRef
from meshproof.verify.semantics.index import BOUND
from meshproof.verify.semantics.interp import Interpreter, Opaque
from meshproof.verify.semantics.judge import decompose
from meshproof.verify.semantics.layouts import Value
from meshproof.verify.semantics.order import (
    at_least_one,
    log_exponent,
    nonpositive,
    ratio_at_most_one,
)
from meshproof.verify.semantics.scalars import Pieces, Ranges, Weight
from meshproof.verify.semantics.terms import QK, Body, Input, Lin, Log, Max, Poly, Pos, Scrambled
from meshproof.verify.semantics.witness import FLOAT64, Inputs, NumericEval

DEFAULT_INPUT_BOUND = 16.0
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


Interval = tuple[float, float]


def _lin_interval(lin: Lin, b: float, d: int, depth: int = 0) -> Interval | None:
    """[lo, hi] of a linear form for every input with |x| <= b (None: unbounded)."""
    if lin.infinite:
        return None
    lo = hi = float(lin.const)
    for atom, c in lin.coeffs:
        iv = _atom_interval(atom, b, d, depth)
        if iv is None:
            return None
        k = float(c)
        lo, hi = (lo + k * iv[0], hi + k * iv[1]) if k >= 0 else \
            (lo + k * iv[1], hi + k * iv[0])
    return lo, hi


lin_interval = _lin_interval


def _lin_bound(lin: Lin, b: float, d: int, depth: int = 0) -> float | None:
    iv = _lin_interval(lin, b, d, depth)
    return None if iv is None else max(abs(iv[0]), abs(iv[1]))


def _atom_interval(atom: object, b: float, d: int, depth: int) -> Interval | None:
    if depth > 8:
        return None
    if isinstance(atom, Input):
        return -b, b
    if isinstance(atom, QK):
        return -d * b * b, d * b * b
    if isinstance(atom, Scrambled):
        return None if atom.bound is None else (-atom.bound * b * b, atom.bound * b * b)
    if isinstance(atom, Max):
        # a max lies between its members' largest lower and largest upper bound (so a
        # floor member of -1e30 does not widen it)
        ivs = [_lin_interval(e.body, b, d, depth + 1) for e in atom.elems]
        if any(iv is None for iv in ivs):
            return None
        los = [iv[0] for iv in ivs if iv is not None]
        his = [iv[1] for iv in ivs if iv is not None]
        return (min(los), min(his)) if atom.is_min else (max(los), max(his))
    if isinstance(atom, Log):
        # log X needs X bounded away from 0 as well as above: X >= 1 by max-domination
        hi = magnitude(atom.arg, b, d, depth + 1)
        if hi is None or not at_least_one(atom.arg):
            return None
        return 0.0, math.log(max(hi, 1.0))
    if isinstance(atom, Pos):
        hi = magnitude(atom.arg, b, d, depth + 1)
        return None if hi is None else (0.0, hi)
    return None


def _atom_bound(atom: object, b: float, d: int, depth: int) -> float | None:
    iv = _atom_interval(atom, b, d, depth)
    return None if iv is None else max(abs(iv[0]), abs(iv[1]))


def _exp_sup(lin: Lin, b: float, d: int, depth: int, sizes: dict[int, int],
             rows: Ranges | None) -> float | None:
    if nonpositive(lin, sizes, rows):
        return 1.0
    bound = _lin_bound(lin, b, d, depth)
    if bound is None or bound > 700:
        return None
    return math.exp(bound)


def magnitude(form: Poly, b: float, d: int, depth: int = 0,
              sizes: dict[int, int] | None = None) -> float | None:
    """An upper bound on |value| for every input with |x| <= b (None: none found)."""
    if form.inf:
        return None
    lin = form.as_lin()
    if lin is not None:
        return _lin_bound(lin, b, d, depth)
    shape = decompose(form)
    if shape.den is not None and not shape.stray and not shape.normalised_twice and \
            shape.num and _convex(shape):
        return b
    total = 0.0
    for body, w in form.terms:
        weight = sum(abs(pw.value()) * (hi - lo) for lo, hi, pw in w.parts) \
            if isinstance(w, Pieces) else abs(w.value())
        rows = Ranges(tuple((lo, hi) for lo, hi, _ in w.parts)) if isinstance(w, Pieces) \
            else None
        factors = body.factors
        ups = [(a, k) for a, k in factors if isinstance(a, Pos) and k > 0]
        shift = _exp_part(w)
        if ups and nonpositive(log_exponent(Body(body.expo, tuple(ups))), sizes or {}, rows):
            # exp(L) * X^k <= 1 when L + k log X <= 0 (e.g. exp(m_a - mx) * l_a in a
            # log-sum-exp merge): the positive powers are inside the bound
            sup: float | None = 1.0
            factors = tuple(f for f in factors if f not in ups)
        elif shift and not ups and nonpositive(body.lin + Lin.make(shift, ()), sizes or {},
                                               rows):
            # a weight r·exp(c) whose exp(c) belongs to the exponent: e^20·exp(m - (m' +
            # 20)) <= |r| when m <= m' (a reference point above the max)
            sup = 1.0
            weight = _without_exp(w)
        else:
            sup = _exp_sup(body.lin, b, d, depth, sizes or {}, rows)
        if sup is None:
            return None
        term = weight * sup
        for atom, k in factors:
            if isinstance(atom, Pos) and k < 0:
                if not at_least_one(atom.arg):
                    return None
                continue   # 1 / X <= 1 when X >= 1 (max-domination)
            ab = _atom_bound(atom, b, d, depth)
            if ab is None:
                return None
            term *= ab ** k
        total += term
    return total


def _without_exp(w: Weight | Pieces) -> float:
    """|w| with its common exp(c) left out (it went into the exponent)."""
    if isinstance(w, Pieces):
        return sum(abs(float(r)) * (hi - lo) for lo, hi, pw in w.parts for _, r in pw.parts)
    return sum(abs(float(r)) for _, r in w.parts)


def _exp_part(w: Weight | Pieces) -> Fraction:
    """c when every weight of w is r·exp(c) for one c (0 otherwise)."""
    weights = [pw for _, _, pw in w.parts] if isinstance(w, Pieces) else [w]
    cs = {c for pw in weights for c, _ in pw.parts}
    return next(iter(cs)) if len(cs) == 1 else Fraction(0)


def convex_output(form: Poly) -> bool:
    """The form is a convex combination of V rows (numerator = common denominator's
    partials times V), normalised once: what an attention output is, whatever its rows."""
    shape = decompose(form)
    return shape.den is not None and not shape.stray and not shape.normalised_twice and \
        bool(shape.num) and _convex(shape)


def _convex(shape: object) -> bool:
    """numerator partials = denominator partials times V: a convex combination."""
    num = [(p.score, p.rest, p.weights) for p in shape.num]  # type: ignore[attr-defined]
    den = [(p.score, p.rest, p.weights) for p in shape.den]  # type: ignore[attr-defined]
    return sorted(map(repr, num)) == sorted(map(repr, den))


def constant_inputs(problem: Problem, q: float, k: float, v: float) -> Inputs:
    def full(rows: int, heads: int, x: float) -> np.ndarray:
        return np.full((max(rows, 1), heads, problem.d_head), x, dtype=np.float64)
    return Inputs({g.index: full(problem.q_rows(g.index), problem.h_q, q) for g in problem.groups},
                  {g.index: full(problem.kv_rows(g.index), problem.h_kv, k)
                   for g in problem.groups},
                  {g.index: full(problem.kv_rows(g.index), problem.h_kv, v)
                   for g in problem.groups})


def _families(problem: Problem, b: float) -> list[tuple[str, Inputs]]:
    from meshproof.verify.semantics.witness import make_inputs

    return [(f"Q = K = V = {b:g} (every score equal, every weight 1)",
             constant_inputs(problem, b, b, b)),
            (f"Q = {b:g}, K = {-b:g} (every score negative)", constant_inputs(problem, b, -b, b)),
            ("seeded N(0,1) inputs", make_inputs(problem, 0))]


def check_safety(schedule: Schedule, table: ChannelTable, problem: Problem,
                 interp: Interpreter, input_bound: float) -> Safety:
    out = Safety()
    b, d = input_bound, problem.d_head
    evals: dict[str, NumericEval] = {}
    seen: set[tuple[str, str]] = set()
    for r, prog in enumerate(schedule.programs):
        for op in prog.ops:
            if op.kind in (OpKind.EXP, OpKind.EXP2):
                _check_exp(schedule, table, problem, interp, r, op, b, out, evals, seen)
            elif op.dtype in (DType.F16, DType.BF16) and op.kind is not OpKind.LOAD and \
                    (op.out is not None or op.kind in (OpKind.SEND, OpKind.STORE)):
                _check_narrow(schedule, table, problem, interp, r, op, b, d, out, evals, seen)
    return out


def _value_of(interp: Interpreter, rank: int, op: Op) -> Value | Opaque:
    if op.out is not None:
        return interp.result(rank, op.out)
    arg = op.args[0]
    assert isinstance(arg, ValueRef)
    return interp.result(rank, arg.id)


def _numeric(schedule: Schedule, table: ChannelTable, problem: Problem,
             evals: dict[str, NumericEval], name: str, inputs: Inputs) -> NumericEval:
    if name not in evals:
        evals[name] = NumericEval(schedule, table, problem, inputs, FLOAT64)
    return evals[name]


def _check_exp(schedule: Schedule, table: ChannelTable, problem: Problem, interp: Interpreter,
               rank: int, op: Op, b: float, out: Safety, evals: dict[str, NumericEval],
               seen: set[tuple[str, str]]) -> None:
    arg = op.args[0]
    assert isinstance(arg, ValueRef)
    res = interp.result(rank, arg.id)
    out.exp_checked += 1
    sig = ("exp", str(op.source))
    if isinstance(res, Opaque) and res.lost:
        return   # it waits on a message that never arrives: it never runs, cannot overflow
    if isinstance(res, Opaque):
        if sig not in seen:
            seen.add(sig)
            out.unknown.append(f"{op.source}: the argument of {op.kind.value} is not known "
                               f"exactly ({res.reason})")
        return
    form = res.form
    if op.kind is OpKind.EXP2:
        from meshproof.verify.semantics import algebra as alg
        from meshproof.verify.semantics.interp import LN2

        form = alg.scale(form, LN2)
    lin = form.as_lin()
    sizes = {dg.id: dg.size for dg in res.layout.digits}
    if lin is not None and nonpositive(lin, sizes):
        return
    if lin is not None:
        from meshproof.verify.semantics import algebra as alg

        try:
            if ratio_at_most_one(alg.exp(form)):
                return
        except Exception:
            pass
    if sig in seen:
        return
    seen.add(sig)
    with np.errstate(all="ignore"):
        for name, inputs in _families(problem, b):
            ev = _numeric(schedule, table, problem, evals, name, inputs)
            val = ev.result(rank, arg.id)
            if val is None:
                continue
            top = float(np.nanmax(np.asarray(val, dtype=float)))
            if top > 1e-9:
                scale = " · ln 2" if op.kind is OpKind.EXP2 else ""
                out.violations.append(Finding(
                    Hazard.EXP_POSITIVE, rank, op,
                    f"the argument of {op.kind.value}{scale} is not dominated by a max "
                    f"subtracted from it: with {name} it reaches {top:.4g} > 0 (exp may "
                    "overflow; subtract the running max, e.g. max(m, m_in), not m + m_in)",
                    top, 0.0))
                return
    out.unknown.append(f"{op.source}: cannot show that the argument of {op.kind.value} is "
                       "<= 0 (it is not a value minus a max over a set containing it)")


def _check_narrow(schedule: Schedule, table: ChannelTable, problem: Problem,
                  interp: Interpreter, rank: int, op: Op, b: float, d: int, out: Safety,
                  evals: dict[str, NumericEval], seen: set[tuple[str, str]]) -> None:
    res = _value_of(interp, rank, op)
    out.narrow_checked += 1
    sig = ("narrow", str(op.source))
    if isinstance(res, Opaque) and res.lost:
        return
    if isinstance(res, Opaque):
        if sig not in seen:
            seen.add(sig)
            out.unknown.append(f"{op.source}: the {op.dtype.value} value of {op.kind.value} is "
                               f"not known exactly, so it cannot be bounded ({res.reason})")
        return
    if res.form.inf:
        return   # -inf (a running max before the first tile) is exact in every dtype
    limit = DTYPE_MAX[op.dtype]
    bound = magnitude(res.form, b, d, sizes={dg.id: dg.size for dg in res.layout.digits})
    if bound is not None and bound <= limit:
        return
    if sig in seen:
        return
    seen.add(sig)
    with np.errstate(all="ignore"):
        for name, inputs in _families(problem, b):
            ev = _numeric(schedule, table, problem, evals, name, inputs)
            key = (rank, op.out) if op.out is not None else \
                (rank, op.args[0].id)  # type: ignore[union-attr]
            val = ev.result(*key)
            if val is None:
                continue
            top = float(np.nanmax(np.abs(np.asarray(val, dtype=float))))
            if top > limit:
                what = _what(res.form)
                out.violations.append(Finding(
                    Hazard.OVERFLOW, rank, op,
                    f"{what} in {op.dtype.value} can reach {top:.6g} > {limit:g}, the "
                    f"largest finite {op.dtype.value} (with {name}; bound "
                    f"{_fmt(bound)} for |inputs| <= {b:g}): keep it in f32",
                    bound, limit))
                return
    out.unknown.append(f"{op.source}: the {op.dtype.value} value of {op.kind.value} has no "
                       f"bound below {limit:g} for |inputs| <= {b:g} (bound {_fmt(bound)})")


def _fmt(x: float | None) -> str:
    return "none" if x is None else f"{x:.6g}"


def _what(form: Poly) -> str:
    from meshproof.verify.semantics.events import describe

    return describe(form)


__all__ = [
    "BOUND",
    "DEFAULT_INPUT_BOUND",
    "Finding",
    "Fraction",
    "Hazard",
    "Safety",
    "check_safety",
    "magnitude",
]
