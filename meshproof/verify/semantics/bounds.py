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
from meshproof.verify.semantics.canon import CanonValue
from meshproof.verify.semantics.index import BOUND, Digit
from meshproof.verify.semantics.interp import Interpreter, Opaque
from meshproof.verify.semantics.judge import decompose
from meshproof.verify.semantics.order import at_least_one, nonpositive, ratio_at_most_one
from meshproof.verify.semantics.scalars import Pieces, Ranges
from meshproof.verify.semantics.terms import QK, Input, Lin, Log, Max, Poly, Pos, Scrambled
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


def _lin_bound(lin: Lin, b: float, d: int, depth: int = 0) -> float | None:
    if lin.infinite:
        return None
    total = abs(float(lin.const))
    for atom, c in lin.coeffs:
        ab = _atom_bound(atom, b, d, depth)
        if ab is None:
            return None
        total += abs(float(c)) * ab
    return total


def _atom_bound(atom: object, b: float, d: int, depth: int) -> float | None:
    if depth > 8:
        return None
    if isinstance(atom, Input):
        return b
    if isinstance(atom, QK):
        return d * b * b
    if isinstance(atom, Scrambled):
        return None if atom.bound is None else atom.bound * b * b
    if isinstance(atom, Max):
        bounds = [_lin_bound(e.body, b, d, depth + 1) for e in atom.elems]
        return None if any(x is None for x in bounds) else max(x for x in bounds if x is not None)
    if isinstance(atom, Log):
        hi = magnitude(atom.arg, b, d, depth + 1)
        return None if hi is None else max(abs(math.log(max(hi, 1.0))), 0.0) + 1.0
    if isinstance(atom, Pos):
        return magnitude(atom.arg, b, d, depth + 1)
    return None


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
        sup = _exp_sup(body.lin, b, d, depth, sizes or {}, rows)
        if sup is None:
            return None
        term = weight * sup
        for atom, k in body.factors:
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
    checks: dict[int, tuple[Op, str, int]] = {}   # per distinct op: what to check, on what
    for r, prog in enumerate(schedule.programs):
        for op in prog.ops:
            check = checks.get(id(op)) or checks.setdefault(id(op), _check_of(op))
            what, vid = check[1], check[2]
            if not what:
                continue
            # the common case, inlined: a canonical value already shown safe
            cv = interp.canonical(r, vid)[0]
            if what == "exp":
                if cv.__class__ is CanonValue and cv.facts.get(("exp_dominated", op.kind)):
                    out.exp_checked += 1
                    continue
                _check_exp(schedule, table, problem, interp, r, op, b, out, evals, seen)
            else:
                bound = cv.facts.get(("magnitude_bound", b)) if cv.__class__ is CanonValue \
                    else None
                if isinstance(bound, float) and bound <= DTYPE_MAX[op.dtype]:
                    out.narrow_checked += 1
                    continue
                _check_narrow(schedule, table, problem, interp, r, op, b, d, out, evals, seen)
    return out


def _check_of(op: Op) -> tuple[Op, str, int]:
    """Which check an op needs ("exp", "narrow" or "") and the value it reads."""
    if op.kind in (OpKind.EXP, OpKind.EXP2):
        arg = op.args[0]
        assert isinstance(arg, ValueRef)
        return op, "exp", arg.id
    if op.dtype in (DType.F16, DType.BF16) and op.kind is not OpKind.LOAD and \
            (op.out is not None or op.kind in (OpKind.SEND, OpKind.STORE)):
        if op.out is not None:
            return op, "narrow", op.out
        arg = op.args[0]
        assert isinstance(arg, ValueRef)
        return op, "narrow", arg.id
    return op, "", 0


def _value_of(interp: Interpreter, rank: int, op: Op) -> CanonValue | Opaque:
    """The op's value (a store's or send's operand), as a canonical value: every check
    here is unchanged by a shift of key rows, so it is made once per canonical value."""
    if op.out is not None:
        return interp.canonical(rank, op.out)[0]
    arg = op.args[0]
    assert isinstance(arg, ValueRef)
    return interp.canonical(rank, arg.id)[0]


def _dominated(cv: CanonValue, kind: OpKind) -> bool:
    """The exp argument is provably <= 0 (max-domination, or exp(...) a ratio <= 1)."""
    key = ("exp_dominated", kind)
    hit = cv.facts.get(key)
    if hit is None:
        hit = cv.facts[key] = _dominated_form(cv.form, kind, cv.layout.digits)
    return bool(hit)


def _dominated_form(form: Poly, kind: OpKind, digits: tuple[Digit, ...]) -> bool:
    from meshproof.verify.semantics import algebra as alg
    from meshproof.verify.semantics.interp import LN2

    if kind is OpKind.EXP2:
        form = alg.scale(form, LN2)
    lin = form.as_lin()
    if lin is None:
        return False
    if nonpositive(lin, {dg.id: dg.size for dg in digits}):
        return True
    try:
        return ratio_at_most_one(alg.exp(form))
    except Exception:
        return False


def _magnitude_of(cv: CanonValue, b: float, d: int) -> float | None:
    key = ("magnitude_bound", b)
    if key not in cv.facts:
        cv.facts[key] = magnitude(cv.form, b, d, sizes={dg.id: dg.size
                                                        for dg in cv.layout.digits})
    return cv.facts[key]  # type: ignore[return-value]


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
    res = interp.canonical(rank, arg.id)[0]
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
    if _dominated(res, op.kind):
        return
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
    limit = DTYPE_MAX[op.dtype]
    bound = _magnitude_of(res, b, d)
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
