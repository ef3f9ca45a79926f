"""A rigorous forward rounding-error bound for every stored output (spec/semantics.md §7).

Each value carries what its kind needs, read from its exact form:

- scores, maxima, log-sum-exp values (ABS): |error| <= eps; for a difference x - y, `lead`
  and `ref` are the parts of eps that are x's and y's errors;
- weights, ℓ, o (REL, OSCALE): relative to the exact terms of their form, in log space,
  the machine value is C·Σ_j T_j·e^(φ_j) + F with |φ_j| <= eps + own, |log C| <= ref and
  |F| <= floor. C is the common factor of the machine reference point (p = exp(s - m̃) is
  off by e^-(m̃ - m) for every key alike); eps is the *tilt*, shared with partners (the
  score errors, exp and its argument, the rescale factors); own is this value's alone
  (casts, accumulation, its own products and sums);
- normalised outputs (OUT): |error| <= eps·max|V| + floor.

Three identities make the bound tight (relations.py says when they apply): a rescale by
exp(x̃ - ỹ) from the partial's own reference point x̃ moves C exactly (the error of a max
never enters a weight); o / ℓ of the same reference point cancels C; and o / ℓ of
partners (the same machine weights, the same factors) costs only 2·tanh(S/4)·max|V| for a
tilt of spread S (the tilt lemma) plus expm1(own_o + own_ℓ)·max|V|. Roundings add in log
space (|log(1 + δ)| <= u), so the bound holds for every input within the assumption, not
to first order only. Dots and sums accumulate in f32 in any order (ulp.py). The output
bound (η, τ) means |computed - exact| <= η·max|V| + τ elementwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import Enum

from meshproof.model.evaluate import Binary, Compare, Key, Lost, Reduction, Reload, Unary
from meshproof.model.schedule import DType, Op, OpKind, ValueRef
from meshproof.verify.semantics.atoms import Input, Lin
from meshproof.verify.semantics.bounds import lin_interval
from meshproof.verify.semantics.culprits import Mechanism, attributed, mechanism_of, moved
from meshproof.verify.semantics.layouts import Value
from meshproof.verify.semantics.mask_exactness import exact_mask_value, finite_magnitude
from meshproof.verify.semantics.order import at_least_one, lower_bound
from meshproof.verify.semantics.rational import Rat
from meshproof.verify.semantics.readers import RoundingReader, WhyStore
from meshproof.verify.semantics.relations import Related, Relation
from meshproof.verify.semantics.rounding_rules_exparg import exp_argument_bound
from meshproof.verify.semantics.rounding_rules_partners import PartnersBound, partners_bound
from meshproof.verify.semantics.symbolic import Opaque
from meshproof.verify.semantics.ulp import EXP_ULP, TINY, UNIT, accumulation, half_ulp
from meshproof.verify.semantics.views import convex_output, describe

_VIEWS = (OpKind.STORE, OpKind.SEND, OpKind.RESHAPE, OpKind.VIEW, OpKind.TRANS, OpKind.NEG,
          OpKind.MAX, OpKind.MAXIMUM, OpKind.MINIMUM)
_LN2 = math.log(2.0)
ROUNDING_ASSUMPTIONS = ("inputs f16 or bf16 values as loaded, f32 exp within 1 ulp, "
                        "round to nearest, f32 accumulation in any order")


class Kind(Enum):
    EXACT = "exact"
    ABS = "abs"          # scores, maxima: absolute error
    REL = "rel"          # weights and their sums: relative error plus a floor
    OSCALE = "oscale"    # unnormalised o: relative to sum p|v|, plus a floor
    OUT = "out"          # normalised o: relative to max|V|, plus a floor


@dataclass(frozen=True, slots=True)
class Err:
    kind: Kind
    eps: float              # ABS: absolute; REL/OSCALE: the tilt (log); OUT: η
    dtype: DType
    floor: float = 0.0
    own: float = 0.0        # REL/OSCALE: this value's own log error
    ref: float = 0.0        # REL/OSCALE: |log C|; ABS: the subtracted operand's part of eps
    lead: float = 0.0       # ABS: the leading operand's part; REL of an exp: the same, in log
    # REL/OSCALE: the part of eps that is the rounding of exp arguments s̃ - max s̃, which
    # moves the weights by at most kstar in total variation (rule E); 0: no rule E
    arg: float = 0.0
    kstar: float = 0.0
    # eps and own by mechanism (culprits.py), each summing to its error; not part of the
    # facts' identity, so attribution never splits a situation of the memo
    parts: tuple[float, ...] = field(default=(), compare=False)
    own_parts: tuple[float, ...] = field(default=(), compare=False)

    @property
    def total(self) -> float:
        """REL/OSCALE: the whole log error of one term, the reference point included."""
        return self.eps + self.own + self.ref


def _pure_input(form: Rat) -> bool:
    """An input element itself (Q, K or V at some coordinates): exact as loaded."""
    lin = form.as_lin()
    return lin is not None and lin.const == 0 and len(lin.coeffs) == 1 and \
        lin.coeffs[0][1] == 1 and isinstance(lin.coeffs[0][0], Input)


def _positive_terms(form: Rat) -> bool:
    """A finite value whose terms all weigh positively: a sum of such cannot cancel."""
    return not form.inf and all(c > 0 for _, c in form.num.terms)


def _form_kind(form: Rat) -> Kind | None:
    masked = exact_mask_value(form)
    if masked is not None:
        return Kind.EXACT if masked else None
    what = describe(form)
    if what in ("a constant", "an infinite constant") or _pure_input(form):
        return Kind.EXACT   # -inf and exp(-inf) = 0 of a running state started at -inf
    if what in ("Q", "K", "V") or "/" in what:
        return Kind.ABS     # q * scale in f16: rounded like any other linear form
    if what in ("scores", "a running max (m)", "a log-sum-exp value"):
        return Kind.ABS
    if what in ("ℓ", "exponential weights", "softmax probabilities",
                "a normalised sum of exponentials"):
        return Kind.REL
    if what == "o":
        return Kind.OSCALE
    if what == "o (normalised)":
        return Kind.OUT
    return None


class _Reasons(dict[Key, str]):
    """Why values have no rounding bound, when no memo holds them."""


class ErrorBounds:
    """The rounding domain: per value its `Err`, computed from its operands' errors and
    read off the symbolic forms of the value and its operands (an OpSemantics of
    model/evaluate.py over the analysis's symbolic evaluation)."""

    def __init__(self, symbolic: RoundingReader, input_bound: float, d_head: int,
                 why: WhyStore | None = None) -> None:
        self.sym = symbolic
        self.b = input_bound
        self.d = d_head
        self.why: WhyStore = why if why is not None else _Reasons()   # why no bound
        self._kinds: dict[str, Kind | None] = {}

    def _res(self, key: Key) -> Value | Opaque | None:
        return self.sym.canonical(key)

    def _fail(self, key: Key, op: Op, reason: str) -> None:
        self.why.setdefault(key, f"{op.source}: {reason}")

    def _mag(self, key: Key) -> float:
        res = self._res(key)
        if res is None or isinstance(res, Opaque):
            return math.inf
        lo, hi = self.sym.interval(key)
        if math.isinf(lo) or math.isinf(hi):
            # a masked value is -inf (exact) or its finite part: round at that's magnitude
            return finite_magnitude(res.form, self.b, self.d)
        return max(abs(lo), abs(hi))

    def _form(self, key: Key) -> Rat:
        res = self._res(key)
        assert res is not None and not isinstance(res, Opaque)
        return res.form

    def _arg_mag(self, op: Op, key: Key, i: int) -> float:
        a = op.args[i]
        return self._mag((key[0], a.id)) if isinstance(a, ValueRef) else abs(a.value)

    def _abs_err(self, op: Op, key: Key, i: int, a: Err) -> float:
        """Operand i's error as an absolute one: an input rounded by a cast (kind EXACT,
        relative eps) is off by eps·|x|, not by eps."""
        return a.eps * self._arg_mag(op, key, i) if a.kind is Kind.EXACT and a.eps else a.eps

    def _lower_bound(self, op: Op, key: Key, i: int) -> float:
        a = op.args[i]
        if not isinstance(a, ValueRef):
            return abs(a.value)

        def low_of(lin: Lin) -> float | None:
            iv = lin_interval(lin, self.b, self.d)
            return None if iv is None else iv[0]

        res = self._res((key[0], a.id))
        return 0.0 if res is None or isinstance(res, Opaque) else lower_bound(res.form, low_of)

    def _at_least_one(self, op: Op, key: Key, i: int) -> bool:
        a = op.args[i]
        if not isinstance(a, ValueRef):
            return abs(a.value) >= 1
        res = self._res((key[0], a.id))
        return res is not None and not isinstance(res, Opaque) and at_least_one(res.form)

    # --- OpSemantics -----------------------------------------------------------------------
    def const(self, rank: int, op: Op, value: float) -> Err | None:
        return Err(Kind.EXACT, 0.0, DType.F32)

    def cycle(self, rank: int, op: Op) -> Err | None:
        return None

    def recv(self, rank: int, op: Op, sent: Err | Lost | None) -> Err | None:
        key = (rank, op.out or 0)
        kind = self._kind_of(key, op)
        if kind is None:
            return None
        if sent is None or isinstance(sent, Lost):
            src = self.sym.recv_source(rank, op)
            self._inherit(key, op, [src] if isinstance(src, tuple) else [])
            return None
        return self._attributed(op, [sent], self._round(sent, kind, op.dtype, key), key)

    def load(self, rank: int, op: Op, reload: Reload[Err | None] | None) -> Err | None:
        key = (rank, op.out or 0)
        kind = self._kind_of(key, op)
        if kind is None:
            return None
        if reload is not None:
            store, kept = reload.stores[0]
            if kept is None:
                self._inherit(key, op, [(rank, store.value_args[0])])
                return None
            return self._round(kept, kind, op.dtype, key)
        u = UNIT[op.dtype] if op.dtype is DType.BF16 else 0.0   # inputs are f16 values
        if kind is Kind.ABS or kind is Kind.EXACT:
            out = Err(Kind.ABS, u * self._mag(key), op.dtype) if u else \
                Err(kind, 0.0, op.dtype)
        else:
            out = Err(kind, u, op.dtype, TINY[op.dtype] if u else 0.0)
        return self._attributed(op, [], out, key)

    def full(self, rank: int, op: Op) -> Err | None:
        return self._compute(rank, op, [])

    def cast(self, rank: int, op: Op, x: Err | None) -> Err | None:
        return self._compute(rank, op, [x])

    def reshape(self, rank: int, op: Op, x: Err | None) -> Err | None:
        return self._compute(rank, op, [x])

    def trans(self, rank: int, op: Op, x: Err | None) -> Err | None:
        return self._compute(rank, op, [x])

    def view_slice(self, rank: int, op: Op, x: Err | None) -> Err | None:
        return self._compute(rank, op, [x])

    def unary(self, rank: int, op: Op, fn: Unary, x: Err | None) -> Err | None:
        return self._compute(rank, op, [x])

    def binary(self, rank: int, op: Op, fn: Binary, a: Err | None, b: Err | None
               ) -> Err | None:
        return self._compute(rank, op, [a, b])

    def reduce(self, rank: int, op: Op, fn: Reduction, x: Err | None) -> Err | None:
        return self._compute(rank, op, [x])

    def dot(self, rank: int, op: Op, a: Err | None, b: Err | None) -> Err | None:
        return self._compute(rank, op, [a, b])

    # masks have no symbolic form yet (spec/semantics.md §8): _kind_of says why no bound
    def arange(self, rank: int, op: Op) -> Err | None:
        return self._compute(rank, op, [])

    def compare(self, rank: int, op: Op, fn: Compare, a: Err | None, b: Err | None
                ) -> Err | None:
        return self._compute(rank, op, [a, b])

    def where(self, rank: int, op: Op, cond: Err | None, a: Err | None, b: Err | None
              ) -> Err | None:
        return self._compute(rank, op, [cond, a, b])

    def _kind_of(self, key: Key, op: Op) -> Kind | None:
        res = self._res(key)
        if res is None or isinstance(res, Opaque):
            kind = None
        else:
            text = res.form.key
            if text not in self._kinds:
                self._kinds[text] = _form_kind(res.form)
            kind = self._kinds[text]
        if kind is None:
            what = "is outside the algebra" if res is None or isinstance(res, Opaque) else \
                "holds positions that f32 may not hold exactly (at or above 2^24)" \
                if exact_mask_value(res.form) is False else f"holds {describe(res.form)}"
            self._fail(key, op, f"{op.kind.value} {what}, which the rounding analysis does "
                       "not model")
        return kind

    def _compute(self, rank: int, op: Op, args: list[Err | None]) -> Err | None:
        key = (rank, op.out or 0)
        kind = self._kind_of(key, op)
        if kind is None:
            return None
        keys = [(rank, a.id) for a in op.args if isinstance(a, ValueRef)]
        if any(a is None for a in args):
            self._inherit(key, op, keys)
            return None
        present = [a for a in args if a is not None]
        out = self._combine(op, kind, present, key)
        if out is None:
            self._fail(key, op, f"{op.kind.value} of {kind.value} values is outside the "
                       "rounding analysis")
            return None
        return self._attributed(op, present, out, key)

    def _attributed(self, op: Op, args: list[Err], out: Err, key: Key) -> Err:
        """The result's errors by mechanism: the operands' shares, and this op's own
        increase at its mechanism (culprits.py)."""
        res = self._res(key)
        form = None if res is None or isinstance(res, Opaque) else res.form
        rel = self._related().relation
        mech = mechanism_of(op, out.kind.value, form, rel.name.lower())
        union = op.kind in (*_VIEWS, OpKind.ADD) and out.kind is not Kind.ABS
        weights = [a for a in args if a.kind in (Kind.REL, Kind.OSCALE)]
        if out.kind in (Kind.REL, Kind.OSCALE):
            tilt = attributed([(a.eps, a.parts) for a in args], out.eps, mech, union)
            own = attributed([(a.own, a.own_parts) for a in weights], out.own, mech, union)
            return replace(out, parts=tilt, own_parts=own)
        if out.kind is Kind.OUT and op.kind is OpKind.DIV and len(weights) == 2 and \
                rel is Relation.PARTNERS:
            o, ell = weights
            bound = _partners(o, ell)
            shared, mine = bound.tilt + bound.argument, bound.own
            tilted = o if o.eps >= ell.eps else ell
            # rule E's share goes to the exp argument, the rest of the tilt keeps its own
            tilt_parts = attributed([(tilted.eps, tilted.parts)], shared, mech, False) \
                if not bound.argument else moved(tilted.parts, Mechanism.EXP, tilted.arg,
                                                 bound.tilt, bound.argument)
            own_parts = attributed([(o.own, o.own_parts), (ell.own, ell.own_parts)], mine,
                                   mech, False)
            both = _sum_parts(tilt_parts, own_parts)
            return replace(out, parts=attributed([(shared + mine, both)], out.eps, mech,
                                                 False))
        flat = [(a.eps + a.own, _sum_parts(a.parts, a.own_parts)) for a in args]
        return replace(out, parts=attributed(flat, out.eps, mech, union))

    def _inherit(self, key: Key, op: Op, keys: list[Key]) -> None:
        for k in keys:
            why = self.why.get(k)
            if why is not None:
                self.why.setdefault(key, why)
                return
        self._fail(key, op, f"{op.kind.value} of a value without a bound")

    def _round(self, e: Err, kind: Kind, dtype: DType, key: Key) -> Err:
        """A value moved into `dtype`: one more rounding if it narrows."""
        if UNIT[dtype] <= UNIT[e.dtype]:
            if TINY[dtype] <= TINY[e.dtype]:
                return replace(e, kind=kind, dtype=dtype)
            # bf16 -> f16: as many digits, but f16's subnormals are coarser
            if kind is Kind.ABS:
                return replace(e, kind=kind, eps=e.eps + TINY[dtype], dtype=dtype)
            return replace(e, kind=kind, dtype=dtype, floor=e.floor + TINY[dtype])
        return self._rounded(replace(e, kind=kind, dtype=dtype), key)

    def _rounded(self, e: Err, key: Key, shared: bool = False, twice: bool = False) -> Err:
        """The rounding of an op's result to its dtype: absolute at the result's magnitude
        (monotone rounding, rule H), else one relative rounding in log space -- shared by
        partners (`shared`: a weight before o and ℓ part ways) or the value's own.
        `twice`: an op computed in f32 and then rounded to a 16-bit dtype (the f32 result
        of a sum of 16-bit values need not be exact): both roundings count."""
        extra = twice and e.dtype is not DType.F32
        if e.kind is Kind.ABS:
            mag = self._mag(key)
            return replace(e, eps=e.eps + half_ulp(e.dtype, mag) +
                           (half_ulp(DType.F32, mag) if extra else 0.0))
        u, tiny = UNIT[e.dtype] + (UNIT[DType.F32] if extra else 0.0), TINY[e.dtype]
        if e.kind is Kind.OUT:
            return replace(e, eps=e.eps + u * (1.0 + e.eps), floor=e.floor + tiny)
        if shared or e.kind is Kind.EXACT:   # an input's rounding: relative, in eps
            return replace(e, eps=e.eps + u, floor=e.floor + tiny)
        return replace(e, own=e.own + u, floor=e.floor + tiny)

    def _combine(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        k = op.kind
        if k in _VIEWS:
            return self._view(op, kind, args)
        if k is OpKind.WHERE:
            # a select moves one branch's value: its error, never a new rounding (the
            # condition is an exact indicator, or the op is outside the algebra)
            return self._view(op, kind, args[1:])
        if k is OpKind.CAST:
            return self._round(args[0], kind, op.dtype, key)
        if k is OpKind.FULL:
            return Err(kind, 0.0, op.dtype)
        if kind is Kind.EXACT:
            if not _pure_input(self._form(key)):
                return Err(kind, 0.0, op.dtype)   # constants: what the machine holds
            kind = Kind.ABS   # arithmetic that gives back an input (q·2·0.5) still rounds
        rule = _RULES.get(k)
        out = None if rule is None else rule(self, op, kind, args, key)
        if out is None:
            return None
        return self._rounded(out, key, shared=k in (OpKind.EXP, OpKind.EXP2), twice=True)

    def _view(self, op: Op, kind: Kind, args: list[Err]) -> Err:
        """Views and maxima move no value: the worst operand's error. A max of exact
        machine numbers is exact; of inexact ones off by at most the larger error."""
        if len(args) == 1:
            if op.kind in (OpKind.RESHAPE, OpKind.VIEW, OpKind.TRANS) and args[0].kstar:
                args = [replace(args[0], arg=0.0, kstar=0.0)]   # the key axis may move
            return replace(args[0], kind=kind, dtype=op.dtype) if kind is not Kind.ABS or \
                args[0].kind is Kind.ABS else Err(kind, args[0].eps, op.dtype, args[0].floor)
        worst = max(args, key=lambda a: a.eps + a.own + a.ref)
        return Err(kind, max(a.eps for a in args), op.dtype, max(a.floor for a in args),
                   max(a.own for a in args), max(a.ref for a in args)) \
            if kind is not Kind.ABS else Err(kind, worst.eps, op.dtype)

    # --- the rules, one per op kind (the exact part; the caller adds the op's rounding) --
    def _exp(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        a = args[0]
        scale = _LN2 if op.kind is OpKind.EXP2 else 1.0
        if a.kind not in (Kind.ABS, Kind.EXACT):
            return None
        arg = self._abs_err(op, key, 0, a) * scale
        rel = self._related()
        if rel.relation in (Relation.SAME, Relation.MAXED) and a.kind is Kind.ABS:
            # exp(x̃ - ỹ): the error of ỹ is a common factor of every key (C), x̃'s a tilt
            ref = a.ref * scale
            out = Err(Kind.REL, arg - ref + EXP_ULP, op.dtype, ref=ref, lead=a.lead * scale)
            x = op.args[0]
            dt = self._dtype_of(key[0], x.id) if isinstance(x, ValueRef) else None
            if rel.relation is not Relation.MAXED or dt is None:
                return out
            # exp(s̃ - max s̃): the subtraction's rounding (the rest of a's error beyond s̃'s
            # and m̃'s) weighed by the keys it moves (rule E); z = m̃ - s̃ <= |s - m| + both
            k = exp_argument_bound(rel.keys, dt, self._arg_mag(op, key, 0) + a.lead + a.ref,
                                   scale, a.lead)
            return replace(out, arg=max(a.eps - a.lead - a.ref, 0.0) * scale, kstar=k)
        # |exp(x + δ)/exp(x)| = e^δ exactly: the argument's error as a tilt
        return Err(Kind.REL, arg + EXP_ULP, op.dtype)

    def _sigmoid(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        """1/(1 + exp(-x)) in f32: d log σ/dx = 1 - σ in (0, 1), so x's absolute error is
        a relative one of σ; exp's ulp, the sum and the division add theirs."""
        a = args[0]
        if kind is not Kind.REL or a.kind not in (Kind.ABS, Kind.EXACT):
            return None
        return Err(Kind.REL, self._abs_err(op, key, 0, a) + EXP_ULP + 2 * UNIT[DType.F32],
                   op.dtype)

    def _log1p(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        """log(1 + X) of a positive weight X: |Δ| <= X·(e^t - 1)/(1 + X) + F <= expm1(t)
        + F for X's log error t and floor F; log1p's own ulp at the result's magnitude."""
        a = args[0]
        if kind is not Kind.ABS or a.kind is not Kind.REL:
            return None
        return Err(Kind.ABS, _expm1(a.total) + a.floor +
                   half_ulp(DType.F32, self._mag(key)), op.dtype)

    def _sum(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        n = self._axis_size(op, key)
        a = args[0]
        if kind is Kind.ABS and a.kind in (Kind.ABS, Kind.EXACT):
            # n values off by eps each, accumulated in f32 (a split contraction's parts)
            return Err(kind, n * self._abs_err(op, key, 0, a) +
                       accumulation(n, self._arg_mag(op, key, 0)), op.dtype)
        if kind in (Kind.REL, Kind.OSCALE) and a.kind is kind:
            # each term passes at most n - 1 f32 roundings, in any order (rule G); rule E
            # only over the keys' (last) axis
            last = op.axis is not None and op.axis == len(self._shape_of(op, key)) - 1
            return replace(a, dtype=op.dtype, own=a.own + max(n - 1, 0) * UNIT[DType.F32],
                           floor=n * a.floor, lead=0.0, arg=a.arg if last else 0.0,
                           kstar=a.kstar if last else 0.0)
        return None

    def _log(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        a = args[0]
        if a.kind is not Kind.REL or not self._at_least_one(op, key, 0):
            return None
        t = a.total
        if t > 0.5 or a.floor > 0.1:
            return None
        # X >= 1: |log X̃ - log X| <= |log C| + max|φ| + |F|/(X̃ - |F|), X̃ - |F| >= 1/2;
        # `ref` keeps |log C|, which m̃ + log X̃ cancels when X is referenced at m̃
        k = 1.0 / _LN2 if op.kind is OpKind.LOG2 else 1.0
        return Err(Kind.ABS, (t + 2.0 * a.floor) * k, op.dtype, ref=a.ref * k)

    def _add(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        dt = op.dtype
        if kind is Kind.ABS:
            errs = [self._abs_err(op, key, i, a) for i, a in enumerate(args)]
            rel = self._related()
            if op.kind is OpKind.ADD and rel.relation is Relation.SAME and len(args) == 2:
                # m̃ + log X̃ with X referenced at m̃: log X̃ = log Σ e^(s_j + φ_j) - m̃
                lse = args[rel.factor]
                return Err(kind, max(lse.eps - lse.ref, 0.0), dt)
            if op.kind is OpKind.SUB and len(errs) == 2:
                return Err(kind, errs[0] + errs[1], dt, lead=errs[0], ref=errs[1])
            return Err(kind, sum(errs), dt)
        # A relative error survives a sum only if nothing cancels: an addition of values
        # whose terms all weigh positively. A constant added to ℓ or o (ℓ + 2048 sent in
        # f16), or a difference, is rounded at a magnitude the reference does not bound.
        if op.kind is not OpKind.ADD:
            self._fail(key, op, f"a difference of {kind.value} values may cancel, so its "
                       "rounding is not bounded relative to the result")
            return None
        kept: list[Err] = []
        for i, a in enumerate(op.args):
            if not isinstance(a, ValueRef):
                if a.value:
                    self._fail(key, op, f"the constant {a.value:g} added here is rounded with "
                               "the value, at a magnitude the bound does not cover")
                    return None
                continue
            res = self._res((key[0], a.id))
            if res is not None and not isinstance(res, Opaque) and res.form.is_zero:
                continue   # ℓ·exp(-inf) = 0 of a running state started at -inf / 0
            if res is None or isinstance(res, Opaque) or not _positive_terms(res.form) or \
                    args[i].kind is Kind.EXACT:
                self._fail(key, op, "an operand of this sum may cancel the other, so its "
                           "rounding is not bounded relative to the result")
                return None
            kept.append(args[i])
        if not kept:
            return Err(kind, 0.0, dt)
        if kind is Kind.OUT:
            floor = sum(a.floor for a in kept)
            if convex_output(self._form(key)):
                # a convex combination Σ w_i·o_i (Σ w_i = 1) of normalised values, each off
                # by at most `own` per unit weight (design §10: the log-sum-exp merge)
                return Err(kind, max(a.own if a.own > 0 else a.eps for a in kept), dt, floor)
            return Err(kind, sum(a.eps for a in kept), dt, floor)
        first = kept[0]
        shift = 0.0 if len(kept) == 1 or self._related().relation is Relation.SAME else \
            sum(a.ref for a in kept)   # other keys' C relative to the first's
        tilt = max([first.eps, *(a.eps + shift for a in kept[1:])])
        # rule E over a union: the rest of the tilt is the worst operand's, K* the largest
        # (a mediant of the blocks' ratios)
        rest = max([first.eps - first.arg, *(a.eps - a.arg + shift for a in kept[1:])])
        return Err(kind, tilt, dt, sum(a.floor for a in kept), max(a.own for a in kept),
                   first.ref, arg=max(tilt - rest, 0.0), kstar=max(a.kstar for a in kept))

    def _mul(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        mags = [self._arg_mag(op, key, i) for i in range(len(op.args))]
        consts = [not isinstance(a, ValueRef) for a in op.args]
        if kind is Kind.ABS:
            exact = [a.kind is Kind.EXACT for a in args]
            if not any(exact):
                return None
            spread = sum(_scaled(self._abs_err(op, key, i, a),
                                 _prod(m for j, m in enumerate(mags) if j != i))
                         for i, a in enumerate(args))
            if any(consts) and len(args) == 2:
                # a difference scaled by a constant keeps its parts, scaled
                c = mags[consts.index(True)]
                x = args[consts.index(False)]
                return Err(kind, spread, op.dtype, lead=x.lead * c, ref=x.ref * c)
            return Err(kind, spread, op.dtype)
        floor = sum(_scaled(a.floor, _prod(m for j, m in enumerate(mags) if j != i))
                    for i, a in enumerate(args))
        if kind is Kind.OUT and len(weights := [a for a in args if a.kind in (
                Kind.REL, Kind.OSCALE)]) == 2:
            # o · (1/ℓ): a normalisation, judged as o / ℓ (relations.py relates them)
            rel = self._related()
            inv, o = args[rel.factor], args[1 - rel.factor]
            if o.kind is not Kind.OSCALE or inv.kind is not Kind.REL:
                return None
            eta = _normalised(o, inv, rel.relation)
            inv_mag = self._arg_mag(op, key, rel.factor)
            if not math.isfinite(inv_mag):
                return None
            # the floors: F(o)·|1/ℓ̃| + |o|·F(1/ℓ), and |o| <= B·ℓ
            return Err(kind, eta, op.dtype, o.floor * inv_mag + self.b * inv.floor)
        if kind is Kind.OUT:
            unit = _out_times(args)
            if unit is None:
                return None
            wmax = max(m for a, m in zip(args, mags, strict=True) if a.kind is not Kind.OUT)
            if not math.isfinite(wmax):
                return None
            return Err(kind, max(wmax, 0.0) * unit, op.dtype, floor, own=unit)
        weights = [a for a in args if a.kind in (Kind.REL, Kind.OSCALE)]
        if len(weights) == 2:
            rel = self._related()
            f, x = (args[rel.factor], args[1 - rel.factor]) if len(args) == 2 else weights
            if rel.relation is Relation.SAME:
                # exp(x̃ - ỹ) from X's own reference point x̃: C moves to ỹ exactly
                tilt = x.eps + f.eps - f.lead + f.own
            elif rel.relation is Relation.NARROWED:
                # from a narrowing of it: off by the narrowing, alike for every key of X
                tilt = x.eps + f.eps - f.lead + f.own + rel.offset
            elif rel.relation is Relation.OTHER:
                # from another point: X's C and x̃'s error join the tilt
                tilt = x.eps + x.ref + f.eps + f.own
            else:
                # no rescale known: both common factors join the tilt, C = 1
                return Err(kind, x.eps + x.ref + f.eps + f.ref, op.dtype, floor,
                           x.own + f.own)
            return Err(kind, tilt, op.dtype, floor, x.own, f.ref, arg=x.arg, kstar=x.kstar)
        # by exact values (constants, inputs): the terms keep their errors
        w = weights[0] if weights else args[0]
        extra = sum(a.eps for a in args if a is not w and a.kind is Kind.EXACT)
        # rule E survives a product by V (o's terms) or by constants; per-key exact
        # factors of weights (a mask) could drop a block's max key
        keep = kind is Kind.OSCALE or all(not isinstance(x, ValueRef) for x, e in zip(
            op.args, args, strict=True) if e is not w)
        return Err(kind, w.eps, op.dtype, floor, w.own + extra, w.ref,
                   arg=w.arg if keep else 0.0, kstar=w.kstar if keep else 0.0)

    def _div(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        num, den = args
        if num.kind is Kind.EXACT and not isinstance(op.args[0], ValueRef) and \
                kind is Kind.REL and den.kind is Kind.REL:
            # c / X: every per-key error and the common factor flip sign, same size; the
            # floor F of X moves 1/X by at most F/X̃_low²
            low = min(1.0, self._lower_bound(op, key, 1))
            low_m = low * math.exp(-min(den.total, 700.0)) - den.floor
            if low_m <= 0:
                return None
            c = abs(op.args[0].value)
            return Err(kind, den.eps, op.dtype, c * den.floor / (low_m * low_m), den.own,
                       den.ref, arg=den.arg, kstar=den.kstar)
        if den.kind is Kind.EXACT:
            c = self._arg_mag(op, key, 1)
            if not c:
                return None
            if kind is Kind.ABS:
                e = self._abs_err(op, key, 0, num) / c
                return Err(kind, e, op.dtype, lead=num.lead / c, ref=num.ref / c)
            return replace(num, kind=kind, dtype=op.dtype, floor=num.floor / c,
                           own=num.own + den.eps)
        low = min(1.0, self._lower_bound(op, key, 1))   # the exact ℓ >= low
        if low <= 0:
            # ℓ may be tiny: the floors would not stay bounded
            self._fail(key, op, "the divisor has no positive lower bound by max-domination, "
                       "so the rounding floors are not bounded")
            return None
        rel = self._related().relation
        if kind is Kind.OUT and num.kind is Kind.OSCALE and den.kind is Kind.REL:
            eta = _normalised(num, den, rel)
            return Err(kind, eta, op.dtype, self._floors(num, den, low, (1.0 + eta) * self.b))
        if kind is num.kind is den.kind is Kind.REL:
            eps = num.eps + num.own + den.eps + den.own
            if rel not in (Relation.SAME, Relation.PARTNERS):
                eps += num.ref + den.ref
            return Err(kind, eps, op.dtype,
                       self._floors(num, den, low, self._arg_mag(op, key, 0) / low))
        return None

    def _floors(self, num: Err, den: Err, low: float, ratio: float) -> float:
        """(|F_num| + |ratio|·|F_den|) / ℓ̃_low, with the machine ℓ̃ >= low·e^-(its log
        error) - F_den."""
        low_m = low * math.exp(-min(den.total, 700.0)) - den.floor
        if low_m <= 0:
            return math.inf
        return (num.floor + ratio * den.floor) / low_m

    def _dot(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        n = self._inner(op, key)
        a, b = args
        if kind is Kind.ABS:
            # n products of bounded inputs (exact in f32 for 16-bit operands), accumulated
            # in f32 in any order (rule G)
            ma, mb = self._arg_mag(op, key, 0), self._arg_mag(op, key, 1)
            ea, eb = self._abs_err(op, key, 0, a), self._abs_err(op, key, 1, b)
            prod = 0.0 if self._narrow_operands(op, key) else n * half_ulp(DType.F32, ma * mb)
            return Err(kind, n * (ea * mb + eb * ma + ea * eb) + prod +
                       accumulation(n, (ma + ea) * (mb + eb)), op.dtype)
        if kind is Kind.OSCALE and a.kind is Kind.REL and b.kind is Kind.EXACT:
            # V rounded by a cast (relative b.eps per element) weighs like p's own error;
            # every term passes at most n - 1 f32 roundings, in any order
            prod = 0.0 if self._narrow_operands(op, key) else UNIT[DType.F32]
            return Err(kind, a.eps, op.dtype, n * a.floor * self.b,
                       a.own + b.eps + prod + max(n - 1, 0) * UNIT[DType.F32], a.ref,
                       arg=a.arg, kstar=a.kstar)   # p·V contracts p's key axis
        return None

    def _narrow_operands(self, op: Op, key: Key) -> bool:
        """Both operands 16-bit: their products are exact in f32."""
        for a in op.args:
            if not isinstance(a, ValueRef):
                return False
            res = self._res((key[0], a.id))
            if res is None or isinstance(res, Opaque) or self._dtype_of(key[0], a.id) not in \
                    (DType.F16, DType.BF16):
                return False
        return True

    def _dtype_of(self, rank: int, vid: int) -> DType | None:
        return self.sym.dtype_of(rank, vid)

    def _related(self) -> Related:
        return self.sym.related()

    def _inexact_mask(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        """Positions and indicators are exact (_mask_value) and never reach a rule: one
        that does holds something else (a position at or above 2^24)."""
        self._fail(key, op, f"{op.kind.value} at {op.source} holds a position or mask value "
                   "that f32 may not hold exactly (positions must stay below 2^24)")
        return None

    def _no_rule(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        self._fail(key, op, f"no rounding rule for {op.kind.value} at {op.source}")
        return None

    def _inner(self, op: Op, key: Key) -> int:
        arg = op.args[0]
        assert isinstance(arg, ValueRef)
        res = self._res((key[0], arg.id))
        if res is None or isinstance(res, Opaque) or not res.layout.shape:
            return 1
        return res.layout.shape[-1]

    def _shape_of(self, op: Op, key: Key) -> tuple[int, ...]:
        arg = op.args[0]
        res = self._res((key[0], arg.id)) if isinstance(arg, ValueRef) else None
        return () if res is None or isinstance(res, Opaque) else res.layout.shape

    def _axis_size(self, op: Op, key: Key) -> int:
        arg = op.args[0]
        assert isinstance(arg, ValueRef) and op.axis is not None
        res = self._res((key[0], arg.id))
        if res is None or isinstance(res, Opaque):
            return 1
        return res.layout.shape[op.axis]


Rule = Callable[[ErrorBounds, Op, Kind, list[Err], Key], Err | None]

# One rounding rule per op kind: the exact part of the op on inexact operands (its own
# rounding is added by the caller). Views, casts and constants are handled before the
# table; masks have no rounding rule yet (spec/semantics.md §8): `_no_rule` says so.
_RULES: dict[OpKind, Rule] = {
    OpKind.DOT: ErrorBounds._dot,
    OpKind.EXP: ErrorBounds._exp,
    OpKind.EXP2: ErrorBounds._exp,
    OpKind.SUM: ErrorBounds._sum,
    OpKind.LOG: ErrorBounds._log,
    OpKind.LOG2: ErrorBounds._log,
    OpKind.ADD: ErrorBounds._add,
    OpKind.SUB: ErrorBounds._add,
    OpKind.MUL: ErrorBounds._mul,
    OpKind.DIV: ErrorBounds._div,
    OpKind.LOG1P: ErrorBounds._log1p,
    OpKind.SIGMOID: ErrorBounds._sigmoid,
    OpKind.ARANGE: ErrorBounds._inexact_mask,
    OpKind.LT: ErrorBounds._inexact_mask,
    OpKind.LE: ErrorBounds._inexact_mask,
    OpKind.GT: ErrorBounds._inexact_mask,
    OpKind.GE: ErrorBounds._inexact_mask,
    OpKind.EQ: ErrorBounds._inexact_mask,
    OpKind.NE: ErrorBounds._inexact_mask,
}
# handled before the table: views and maxima (they move no value), casts and constants;
# loads and recvs by their own methods (an input as loaded, a message as sent)
HANDLED_BEFORE = frozenset({*_VIEWS, OpKind.CAST, OpKind.FULL, OpKind.LOAD, OpKind.RECV,
                            OpKind.WHERE})


def _prod(xs: Iterable[float]) -> float:
    """A product of magnitudes (inf where unbounded)."""
    return math.prod(xs)


def _scaled(err: float, mag: float) -> float:
    """err · mag with 0 · inf = 0: no error, however large the value."""
    return 0.0 if not err else err * mag


def _sum_parts(a: tuple[float, ...], b: tuple[float, ...]) -> tuple[float, ...]:
    if not a or not b:
        return a or b
    return tuple(x + y for x, y in zip(a, b, strict=True))


def _normalised(o: Err, ell: Err, rel: Relation) -> float:
    """η of o / ℓ (design rules B and D): partners share their tilt, which then costs
    only 2·tanh(S/4)·max|V| (S <= twice the tilt bound); otherwise every per-key error
    counts, and the reference points' common factors unless they are the same number."""
    if rel is Relation.PARTNERS:
        return _partners(o, ell).eta
    t = o.eps + o.own + ell.eps + ell.own
    if rel is not Relation.SAME:
        t += o.ref + ell.ref
    return _expm1(t)


def _partners(o: Err, ell: Err) -> PartnersBound:
    return partners_bound(max(o.eps, ell.eps), max(o.eps - o.arg, ell.eps - ell.arg),
                          max(o.kstar, ell.kstar), o.own + ell.own)


def _out_times(args: list[Err]) -> float | None:
    """A normalised value times a weight w (an lse merge's exp(lse_i - lse)), per unit of
    w: |õ·w̃ - o·w| <= w·(η·e^t + e^t - 1)·max|V| for w's log error t."""
    outs = [a for a in args if a.kind is Kind.OUT]
    rest = [a for a in args if a.kind is not Kind.OUT]
    if len(outs) != 1 or len(rest) != 1:
        return None
    w = rest[0]
    t = w.total if w.kind in (Kind.REL, Kind.OSCALE) else w.eps
    grow = math.exp(min(t, 700.0))
    return outs[0].eps * grow + grow - 1.0


def _expm1(x: float) -> float:
    try:
        return math.expm1(x)
    except OverflowError:
        return math.inf
