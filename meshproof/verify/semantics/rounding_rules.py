"""The rounding rules, one per op kind (spec/semantics.md §7): the exact part of an op on
inexact operands, from the operands' errors and the forms the analysis reads
(`ErrorReader`); the op's own rounding is added by rounding.py, which dispatches here
through `_RULES`.
"""


import math
from collections.abc import Callable
from dataclasses import replace

from meshproof.model.evaluate import Key
from meshproof.model.schedule import DType, Op, OpKind, ValueRef
from meshproof.verify.semantics.bounds import lin_interval
from meshproof.verify.semantics.order import lower_bound
from meshproof.verify.semantics.relations import Relation
from meshproof.verify.semantics.rounding_err import (
    _LN2,
    _VIEWS,
    Err,
    ErrorReader,
    Kind,
    _expm1,
    _normalised,
    _out_times,
    _positive_terms,
    _prod,
    _scaled,
)
from meshproof.verify.semantics.rounding_rules_exparg import exp_argument_bound
from meshproof.verify.semantics.rounding_rules_rescale import factor_of, pending, settle
from meshproof.verify.semantics.symbolic_core import Opaque
from meshproof.verify.semantics.ulp import EXP_ULP, UNIT, accumulation, half_ulp
from meshproof.verify.semantics.views import convex_output


class RoundingRules(ErrorReader):
    """The rules of the rounding domain, each a function of the op, the result's kind, the
    operands' errors and the result's key."""

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
            if dt is None or not isinstance(x, ValueRef):
                return out
            if rel.relation is not Relation.MAXED:
                # a rescale factor: its shape, for rule F where it rescales a partial
                return replace(out, fx=factor_of(dt, scale, a.eps, a.lead, a.ref,
                                                 self._arg_mag(op, key, 0),
                                                 self.sym.interval((key[0], x.id))[1]))
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
                           kstar=a.kstar if last else 0.0, fx=None, resc=None)
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
        # rule F: only where every operand is referenced at the same machine number (then
        # at the same exact point, so the union's exact form is P's normaliser)
        resc = None if len(kept) == 1 or self._related().relation is not Relation.SAME \
            else settle([(a.eps, a.arg, a.resc) for a in kept], tilt,
                        self._result_low(key) if kind is Kind.REL else None)
        return Err(kind, tilt, dt, sum(a.floor for a in kept), max(a.own for a in kept),
                   first.ref, arg=max(tilt - rest, 0.0), kstar=max(a.kstar for a in kept),
                   resc=resc)

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
            offset = 0.0
            if rel.relation is Relation.SAME:
                # exp(x̃ - ỹ) from X's own reference point x̃: C moves to ỹ exactly
                tilt = x.eps + f.eps - f.lead + f.own
            elif rel.relation is Relation.NARROWED:
                # from a narrowing of it: off by the narrowing, alike for every key of X
                offset = rel.offset
                tilt = x.eps + f.eps - f.lead + f.own + offset
            elif rel.relation is Relation.OTHER:
                # from another point: X's C and x̃'s error join the tilt
                tilt = x.eps + x.ref + f.eps + f.own
            else:
                # no rescale known: both common factors join the tilt, C = 1
                return Err(kind, x.eps + x.ref + f.eps + f.ref, op.dtype, floor,
                           x.own + f.own)
            # rule F: the factor's rounding is pending until a union settles it
            resc = None if f.fx is None or rel.relation is Relation.OTHER else pending(
                x.resc, x.arg, f.fx, f.eps - f.lead + f.own, x.eps + offset,
                mags[1 - rel.factor] if kind is Kind.REL and len(args) == 2 else math.inf)
            return Err(kind, tilt, op.dtype, floor, x.own, f.ref, arg=x.arg, kstar=x.kstar,
                       resc=resc)
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

    def _result_low(self, key: Key) -> float:
        """A lower bound of the result's exact value, by max-domination (0: none)."""
        res = self._res(key)
        if res is None or isinstance(res, Opaque):
            return 0.0
        return lower_bound(res.form, lambda lin: (lambda iv: None if iv is None else iv[0])(
            lin_interval(lin, self.b, self.d)))

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

    def _inexact_mask(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        """Positions and indicators are exact (_mask_value) and never reach a rule: one
        that does holds something else (a position at or above 2^24)."""
        self._fail(key, op, f"{op.kind.value} at {op.source} holds a position or mask value "
                   "that f32 may not hold exactly (positions must stay below 2^24)")
        return None

    def _no_rule(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        self._fail(key, op, f"no rounding rule for {op.kind.value} at {op.source}")
        return None


Rule = Callable[[RoundingRules, Op, Kind, list[Err], Key], Err | None]

# One rounding rule per op kind: the exact part of the op on inexact operands (its own
# rounding is added by the caller). Views, casts and constants are handled before the
# table; masks have no rounding rule yet (spec/semantics.md §8): `_no_rule` says so.
_RULES: dict[OpKind, Rule] = {
    OpKind.DOT: RoundingRules._dot,
    OpKind.EXP: RoundingRules._exp,
    OpKind.EXP2: RoundingRules._exp,
    OpKind.SUM: RoundingRules._sum,
    OpKind.LOG: RoundingRules._log,
    OpKind.LOG2: RoundingRules._log,
    OpKind.ADD: RoundingRules._add,
    OpKind.SUB: RoundingRules._add,
    OpKind.MUL: RoundingRules._mul,
    OpKind.DIV: RoundingRules._div,
    OpKind.LOG1P: RoundingRules._log1p,
    OpKind.SIGMOID: RoundingRules._sigmoid,
    OpKind.ARANGE: RoundingRules._inexact_mask,
    OpKind.LT: RoundingRules._inexact_mask,
    OpKind.LE: RoundingRules._inexact_mask,
    OpKind.GT: RoundingRules._inexact_mask,
    OpKind.GE: RoundingRules._inexact_mask,
    OpKind.EQ: RoundingRules._inexact_mask,
    OpKind.NE: RoundingRules._inexact_mask,
}
# handled before the table: views and maxima (they move no value), casts and constants;
# loads and recvs by their own methods (an input as loaded, a message as sent)
HANDLED_BEFORE = frozenset({*_VIEWS, OpKind.CAST, OpKind.FULL, OpKind.LOAD, OpKind.RECV,
                            OpKind.WHERE})

