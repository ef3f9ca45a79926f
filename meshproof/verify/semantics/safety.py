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
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

import numpy as np

from meshproof.model.channel_table import ChannelTable
from meshproof.model.evaluate import Evaluation
from meshproof.model.problem import Problem
from meshproof.model.schedule import DType, Op, OpKind, Schedule, SourceLoc, ValueRef
from meshproof.verify.semantics import rational as R
from meshproof.verify.semantics.bounds import assumption_text, score_cap
from meshproof.verify.semantics.domination import nonpositive
from meshproof.verify.semantics.hazards import opaque_suspects, suspects, undefined_outputs
from meshproof.verify.semantics.order import ratio_at_most_one
from meshproof.verify.semantics.reasons import NotModelled, Undefined
from meshproof.verify.semantics.situation_facts import _FID
from meshproof.verify.semantics.situations import Forms
from meshproof.verify.semantics.symbolic_core import LN2, Opaque
from meshproof.verify.semantics.views import describe

if TYPE_CHECKING:  # a witness search's types
    from meshproof.verify.semantics.numeric import Inputs, Num

DTYPE_MAX = {DType.F16: 65504.0, DType.BF16: 3.3895313892515355e38, DType.F32: 3.4028235e38}


class Hazard(Enum):
    EXP_POSITIVE = "exp_positive"
    OVERFLOW = "overflow"
    EMPTY_PARTIAL = "empty_partial"
    UNDEFINED_OUTPUT = "undefined_output"


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
    # what numeric_safety's tolerance and culprits read, from the same walk (~1 s at 64x64):
    # each distinct op with a result at its first rank, in walk order; the dtypes used
    firsts: list[tuple[int, Op]] = field(default_factory=list)
    dtypes: set[DType] = field(default_factory=set)


def constant_inputs(problem: Problem, q: float, k: float, v: float) -> Inputs:
    from meshproof.verify.semantics.numeric import Inputs  # for a witness search only

    def full(rows: int, heads: int, x: float) -> np.ndarray:
        return np.full((max(rows, 1), heads, problem.d_head), x, dtype=np.float64)
    return Inputs({g.index: full(problem.q_rows(g.index), problem.h_q, q) for g in problem.groups},
                  {g.index: full(problem.kv_rows(g.index), problem.h_kv, k)
                   for g in problem.groups},
                  {g.index: full(problem.kv_rows(g.index), problem.h_kv, v)
                   for g in problem.groups})


def families(problem: Problem, b: float) -> list[tuple[str, Inputs]]:
    """The witness families, each inside the assumption: with a score bound, Q and K of
    the constant families shrink to the largest f16 c with d·c² within it, and a family
    whose scores pass it (seeded inputs at a small S) is left out."""
    from meshproof.verify.semantics.witness import make_inputs  # a search: not a proof's cost

    cap = score_cap(b)
    c = _largest_q(cap, problem.d_head, float(b))
    qk = f"Q = K = V = {b:g}" if c == b else f"Q = K = {c:g}, V = {b:g}"
    neg = f"Q = {b:g}, K = {-b:g}" if c == b else f"Q = {c:g}, K = {-c:g}, V = {b:g}"
    out = [(f"{qk} (every score equal, every weight 1)", constant_inputs(problem, c, c, b)),
           (f"{neg} (every score negative)", constant_inputs(problem, c, -c, b)),
           ("seeded N(0,1) inputs", make_inputs(problem, 0))]
    hidden = _hidden_above(problem, c, b)
    if hidden is not None:
        out.append(hidden)
    return [(name, x) for name, x in out if scores_within(x, cap)]


def _hidden_above(problem: Problem, c: float, b: float) -> tuple[str, Inputs] | None:
    """Under a mask: Q = c, K = c at the keys the mask hides from the first query that has
    both kinds and -c at the keys it allows (a hidden key scores above every allowed one:
    what an exp of unmasked scores minus the masked max gets wrong)."""
    if problem.mask is None:
        return None
    base = constant_inputs(problem, c, -c, b)
    k = dict(base.k)
    found = False
    for g in problem.groups:
        n = problem.kv_rows(g.index)
        queries, keys = problem.positions(g.index)
        allowed = problem.mask.allowed(queries, keys[:n])
        mixed = [row for row in allowed if row.any() and not row.all()]
        if not mixed or g.index not in k:
            continue
        signs = np.where(mixed[0], -c, c)
        k[g.index] = np.broadcast_to(signs[:, None, None], k[g.index][:n].shape).copy()
        found = True
    if not found:
        return None
    from meshproof.verify.semantics.numeric import Inputs  # for a witness search only

    return (f"Q = {c:g}, K = {c:g} at the keys the mask hides and {-c:g} at those it allows "
            f"(a hidden key scores above every allowed one), V = {b:g}",
            Inputs(base.q, k, base.v))


def _exp_advice(problem: Problem) -> str:
    if problem.mask is not None:
        return ("subtract a max over every key the exp reads: apply the mask (tl.where) "
                "to the scores before both the max and the exp")
    return "subtract the running max, e.g. max(m, m_in), not m + m_in"


def _largest_q(cap: float, d: int, b: float) -> float:
    """The largest f16 value c <= b with d·c² <= cap."""
    if d * b * b <= cap:
        return b
    c = np.float16(math.sqrt(cap / d))
    while c > 0 and float(c) * float(c) * d > cap:
        c = np.nextafter(c, np.float16(0))
    return float(c)


def scores_within(inputs: Inputs, cap: float) -> bool:
    """Every raw score q·kᵀ of one group (any heads) within `cap` (in chunks of K rows)."""
    if math.isinf(cap):
        return True
    for g, q in inputs.q.items():
        qs = q.reshape(-1, q.shape[-1])
        ks = inputs.k[g].reshape(-1, q.shape[-1])
        for i in range(0, ks.shape[0], 1 << 15):
            if qs.size and ks.size and float(np.abs(qs @ ks[i:i + (1 << 15)].T).max()) > cap:
                return False
    return True


class _Checks:
    def __init__(self, schedule: Schedule, table: ChannelTable, problem: Problem,
                 symbolic: Forms, b: float) -> None:
        self.schedule, self.table, self.problem = schedule, table, problem
        self.sym, self.b = symbolic, b
        self.out = Safety()
        self.evals: dict[str, Evaluation[Num | None]] = {}
        self.seen: set[tuple[str, str]] = set()
        self.exp_cands: dict[SourceLoc, list[tuple[int, Op]]] = {}
        self.narrow_cands: dict[SourceLoc, list[tuple[int, Op, int, float | None]]] = {}

    def numeric(self, name: str, inputs: Inputs) -> Evaluation[Num | None]:
        from meshproof.verify.semantics.witness import numeric_evaluation  # searches only

        if name not in self.evals:
            self.evals[name] = numeric_evaluation(self.schedule, self.table, self.problem,
                                                  inputs)
        return self.evals[name]

    def search(self, cands: list[tuple[int, int]], reaches: Callable[[np.ndarray], float | None]
               ) -> tuple[str, float, int] | None:
        """The first input family under which some candidate (rank, value id) passes
        `reaches`, with the value and the rank: every rank is tried (a stale reference
        point or another rank's max shows on some ranks only)."""
        from meshproof.verify.semantics.witness import WitnessTooLarge, check_witness_size

        try:
            check_witness_size(self.schedule, self.problem)   # before any input is made
        except WitnessTooLarge as exc:
            if str(exc) not in self.out.unknown:
                self.out.unknown.append(str(exc))
            return None
        with np.errstate(all="ignore"):
            for name, inputs in families(self.problem, self.b):
                ev = self.numeric(name, inputs)
                for rank, vid in cands:
                    val = ev.value(rank, vid)
                    if val is None:
                        continue
                    top = reaches(np.asarray(val.data, dtype=float))
                    if top is not None:
                        return name, top, rank
        return None

    def _opaque(self, sig: tuple[str, str], text: str) -> None:
        if sig not in self.seen:
            self.seen.add(sig)
            self.out.unknown.append(text)

    def candidate(self, rank: int, op: Op) -> None:
        """An op not shown safe on this rank: judged with a witness search."""
        if op.kind in EXPS:
            self.exp_cands.setdefault(op.source, []).append((rank, op))
            return
        vid = _checked_value(op)
        lo, hi = self.sym.interval((rank, vid))
        bound = None if math.isinf(lo) or math.isinf(hi) else max(abs(lo), abs(hi))
        self.narrow_cands.setdefault(op.source, []).append((rank, op, vid, bound))

    def check_exp(self, rank: int, op: Op) -> bool:
        """Whether the exp's argument is not shown <= 0 (then it is a candidate)."""
        arg = op.args[0]
        assert isinstance(arg, ValueRef)
        res = self.sym.canonical_value(rank, arg.id)
        if isinstance(res, Opaque) and res.lost:
            return False   # it waits on a message that never arrives: it never runs
        if isinstance(res, Opaque):
            self._opaque(("exp", str(op.source)), f"{op.source}: the argument of "
                         f"{op.kind.value} is not known exactly ({res.reason})")
            return False
        form = R.scale(res.form, LN2) if op.kind is OpKind.EXP2 else res.form
        lin = form.as_lin()
        sizes = {dg.id: dg.size for dg in res.layout.digits}
        if lin is not None and nonpositive(lin, sizes):
            return False
        if lin is not None:
            try:
                if ratio_at_most_one(R.exp(form)):
                    return False
            except (NotModelled, Undefined):
                pass
        return True

    def judge_exps(self) -> None:
        for source, cands in self.exp_cands.items():
            op = cands[0][1]
            found = self.search([(r, o.args[0].id) for r, o in cands],  # type: ignore[union-attr]
                                lambda v: (t if (t := float(np.nanmax(v))) > 1e-9 else None))
            if found is None:
                self.out.unknown.append(f"{source}: cannot show that the argument of "
                                        f"{op.kind.value} is <= 0 (it is not a value minus a "
                                        "max over a set containing it)")
                continue
            name, top, rank = found
            op = next(o for r, o in cands if r == rank)
            scale = " · ln 2" if op.kind is OpKind.EXP2 else ""
            self.out.violations.append(Finding(
                Hazard.EXP_POSITIVE, rank, op,
                f"the argument of {op.kind.value}{scale} is not dominated by a max "
                f"subtracted from it: with {name} it reaches {top:.4g} > 0 (exp may "
                f"overflow; {_exp_advice(self.problem)})", top, 0.0))

    def check_narrow(self, rank: int, op: Op) -> bool:
        """Whether the 16-bit value is not shown within its dtype's range."""
        vid = _checked_value(op)
        res = self.sym.canonical_value(rank, vid)
        if isinstance(res, Opaque) and res.lost:
            return False
        if isinstance(res, Opaque) and res.undefined is not None:
            return False   # an undefined value: check_outputs judges where it goes
        if isinstance(res, Opaque):
            self._opaque(("narrow", str(op.source)), f"{op.source}: the {op.dtype.value} "
                         f"value of {op.kind.value} is not known exactly, so it cannot be "
                         f"bounded ({res.reason})")
            return False
        if res.form.inf:
            return False   # -inf (a running max before the first tile) is exact in every dtype
        lo, hi = self.sym.interval((rank, vid))
        bound = None if math.isinf(lo) or math.isinf(hi) else max(abs(lo), abs(hi))
        return not (bound is not None and bound <= DTYPE_MAX[op.dtype])

    def judge_narrows(self) -> None:
        for source, cands in self.narrow_cands.items():
            op = cands[0][1]
            limit = DTYPE_MAX[op.dtype]
            found = self.search([(r, vid) for r, _, vid, _ in cands], _above(limit))
            bound = cands[0][3]
            if found is None:
                self.out.unknown.append(f"{source}: the {op.dtype.value} value of "
                                        f"{op.kind.value} has no bound below {limit:g} for "
                                        f"{assumption_text(self.b)} (bound {_fmt(bound)})")
                continue
            name, top, rank = found
            op, vid, bound = next((o, v, bd) for r, o, v, bd in cands if r == rank)
            res = self.sym.canonical_value(rank, vid)
            what = describe(res.form) if not isinstance(res, Opaque) else "the value"
            self.out.violations.append(Finding(
                Hazard.OVERFLOW, rank, op,
                f"{what} in {op.dtype.value} can reach {top:.6g} > {limit:g}, the largest "
                f"finite {op.dtype.value} (with {name}; bound {_fmt(bound)} for "
                f"{assumption_text(self.b)}): keep it in f32", bound, limit))

    def check_outputs(self, stores: list[tuple[int, Op]]) -> None:
        """No stored output is nan or infinite on the machine (hazards.py)."""
        found = suspects(self.schedule, self.sym)
        if not found and self.out.unknown:
            # a value not bounded may still be undefined on the machine: try them
            found = opaque_suspects(self.schedule, self.sym)
        if not found:
            return
        bad = undefined_outputs(self.schedule, self.table, self.problem, stores, found,
                                families(self.problem, self.b))
        if bad is None:
            first = found[0]
            self.out.unknown.append(f"{first.op.source}: {first.why}; no input tried makes "
                                    "an output nan or infinite on the machine")
            return
        cause = bad.cause
        why = f": {cause.why} at {cause.op.source} (tl.{cause.op.kind.value})" if cause else ""
        where = cause if cause is not None else None
        self.out.violations.append(Finding(
            Hazard.UNDEFINED_OUTPUT, where.rank if where else bad.rank,
            where.op if where else bad.store,
            f"with {bad.family} the output stored at {bad.store.source} is {bad.value:g} on "
            f"the machine (element {bad.element}){why}", None, None))


EXPS = (OpKind.EXP, OpKind.EXP2)


def _narrow(op: Op) -> bool:
    """A 16-bit value the machine holds (loads of inputs are exact as given)."""
    return op.dtype in (DType.F16, DType.BF16) and op.kind is not OpKind.LOAD and \
        (op.out is not None or op.kind in (OpKind.SEND, OpKind.STORE))


def check_safety(schedule: Schedule, table: ChannelTable, problem: Problem,
                 symbolic: Forms, input_bound: float,
                 stores: list[tuple[int, Op]] | None = None) -> Safety:
    """Every exp and 16-bit op of every rank, each judged once per situation: the checks
    read only the canonical form and the interval of a value, which its facts id names.
    The same walk gathers `Safety.firsts` and `Safety.dtypes`."""
    checks = _Checks(schedule, table, problem, symbolic, input_bound)
    firsts = checks.out.firsts
    dtype_ids: set[int] = set()
    # id(op) -> 0 not checked, else (1 exp or 2 narrow) | the checked value's id << 2
    kinds: dict[int, int] = {}
    done: dict[tuple[int, int | None], bool] = {}   # (id(op), facts id) -> candidate?
    exps = narrows = 0
    held = symbolic.evaluation.values   # per rank: value id -> Held (its facts id inside)
    for r, prog in enumerate(schedule.programs):
        values = held[r]
        for op in prog.ops:
            kind = kinds.get(id(op))
            if kind is None:   # the op's first rank
                kind = kinds[id(op)] = _kind(op)
                dtype_ids.add(id(op.dtype))   # by identity: an Enum hashes in Python
                if op.out is not None:
                    firsts.append((r, op))
            if not kind:
                continue
            x = values.get(kind >> 2)   # symbolic.fid((r, vid)) without its two calls
            key = (id(op), None if x is None else x & _FID)
            if kind & 1:
                exps += 1
            else:
                narrows += 1
            hit = done.get(key)
            if hit is None:
                hit = done[key] = checks.check_exp(r, op) if kind & 1 else \
                    checks.check_narrow(r, op)
            if hit:
                checks.candidate(r, op)
    checks.out.exp_checked, checks.out.narrow_checked = exps, narrows
    checks.out.dtypes.update(d for d in DType if id(d) in dtype_ids)
    checks.judge_exps()
    checks.judge_narrows()
    if stores:
        checks.check_outputs(stores)
    return checks.out


def _kind(op: Op) -> int:
    """check_safety's code of an op: 0 not checked, else 1 (exp) or 2 (16-bit) | the id
    of the value its check reads << 2."""
    kind = 1 if op.kind in EXPS else 2 if _narrow(op) else 0
    return kind | (_checked_value(op) << 2) if kind else 0


def _checked_value(op: Op) -> int:
    """The value an op's check reads: an exp's argument, else what the op holds."""
    if op.kind in EXPS or op.out is None:
        arg = op.args[0]
        assert isinstance(arg, ValueRef)
        return arg.id
    return op.out


def _above(limit: float) -> Callable[[np.ndarray], float | None]:
    def reaches(v: np.ndarray) -> float | None:
        top = float(np.nanmax(np.abs(v)))
        return top if top > limit else None
    return reaches


def _fmt(x: float | None) -> str:
    return "none" if x is None else f"{x:.6g}"
