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

This module is the domain: its OpSemantics, the kind of each value, the rounding every op
adds and the attribution by mechanism. The error record and what the rules read of the
analysis are rounding_err.py's; the rules, one per op kind, rounding_rules.py's.
"""

from __future__ import annotations

from dataclasses import replace

from meshproof.model.evaluate import Binary, Compare, Key, Lost, Reduction, Reload, Unary
from meshproof.model.schedule import DType, Op, OpKind, ValueRef
from meshproof.verify.semantics.culprits import Mechanism, attributed, mechanism_of, moved
from meshproof.verify.semantics.mask_exactness import exact_mask_value
from meshproof.verify.semantics.relations import Relation
from meshproof.verify.semantics.rounding_err import (
    _VIEWS,
    ROUNDING_ASSUMPTIONS,
    Err,
    Kind,
    _form_kind,
    _partners,
    _pure_input,
    _sum_parts,
    rounded_err,
    with_parts,
)
from meshproof.verify.semantics.rounding_rules import _RULES, HANDLED_BEFORE, RoundingRules
from meshproof.verify.semantics.rounding_rules_partners import PartnersBound
from meshproof.verify.semantics.symbolic_core import Opaque
from meshproof.verify.semantics.ulp import TINY, UNIT, half_ulp
from meshproof.verify.semantics.views import describe


class ErrorBounds(RoundingRules):
    """The rounding domain: per value its `Err`, computed from its operands' errors and
    read off the symbolic forms of the value and its operands (an OpSemantics of
    model/evaluate.py over the analysis's symbolic evaluation)."""

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
            return with_parts(out, tilt, own)
        if out.kind is Kind.OUT and op.kind is OpKind.DIV and len(weights) == 2 and \
                rel is Relation.PARTNERS:
            o, ell = weights
            bound = _partners(o, ell)
            shared, mine = bound.tilt + bound.argument + bound.rescale, bound.own
            tilted = o if o.eps >= ell.eps else ell
            # rule E's share goes to the exp argument, rule F's to the rescale factors, the
            # rest of the tilt keeps its own
            tilt_parts = attributed([(tilted.eps, tilted.parts)], shared, mech, False) \
                if not (bound.argument or bound.rescale) else _split(tilted, bound)
            own_parts = attributed([(o.own, o.own_parts), (ell.own, ell.own_parts)], mine,
                                   mech, False)
            both = _sum_parts(tilt_parts, own_parts)
            return with_parts(out, attributed([(shared + mine, both)], out.eps, mech, False),
                              out.own_parts)
        flat = [(a.eps + a.own, _sum_parts(a.parts, a.own_parts)) for a in args]
        return with_parts(out, attributed(flat, out.eps, mech, union), out.own_parts)

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
            return rounded_err(e, e.eps + half_ulp(e.dtype, mag) +
                               (half_ulp(DType.F32, mag) if extra else 0.0), e.floor, e.own)
        u, tiny = UNIT[e.dtype] + (UNIT[DType.F32] if extra else 0.0), TINY[e.dtype]
        if e.kind is Kind.OUT:
            return rounded_err(e, e.eps + u * (1.0 + e.eps), e.floor + tiny, e.own)
        if shared or e.kind is Kind.EXACT:   # an input's rounding: relative, in eps
            return rounded_err(e, e.eps + u, e.floor + tiny, e.own)
        return rounded_err(e, e.eps, e.floor + tiny, e.own + u)

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
                args = [replace(args[0], arg=0.0, kstar=0.0, resc=None)]   # axis may move
            return replace(args[0], kind=kind, dtype=op.dtype) if kind is not Kind.ABS or \
                args[0].kind is Kind.ABS else Err(kind, args[0].eps, op.dtype, args[0].floor)
        worst = max(args, key=lambda a: a.eps + a.own + a.ref)
        return Err(kind, max(a.eps for a in args), op.dtype, max(a.floor for a in args),
                   max(a.own for a in args), max(a.ref for a in args)) \
            if kind is not Kind.ABS else Err(kind, worst.eps, op.dtype)


def _split(tilted: Err, bound: PartnersBound) -> tuple[float, ...]:
    """The tilt's parts when rules E and F bound some of it: their shares taken from the
    exp argument's and the rescale factors', the rest scaled to the tilt term."""
    rsc = tilted.resc.rsc if tilted.resc is not None and bound.rescale else 0.0
    parts = tilted.parts
    if rsc:
        parts = moved(parts, Mechanism.RESCALE, rsc, max(tilted.eps - rsc, 0.0), 0.0)
    parts = moved(parts, Mechanism.EXP, tilted.arg if bound.argument else 0.0, bound.tilt,
                  bound.argument)
    return moved(parts, Mechanism.RESCALE, 0.0, bound.tilt + bound.argument, bound.rescale)


__all__ = ["HANDLED_BEFORE", "ROUNDING_ASSUMPTIONS", "Err", "ErrorBounds", "Kind"]
