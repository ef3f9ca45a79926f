"""A first-order forward rounding-error bound for every stored output.

Standard running-error analysis, first order in the unit roundoffs u (f16 2^-11, bf16 2^-8,
f32 2^-24), with the absolute floor of every rounding (half the smallest subnormal spacing:
f16 2^-25, bf16 2^-134, f32 2^-150) so that subnormal values are covered too. Each value
carries (eps, floor), read by what it is in the exact forms:

- scores, maxima, log-sum-exp values: |error| <= eps (absolute);
- exponential weights and sums of them (ℓ): |error| <= eps·|value| + floor;
- unnormalised outputs o: |error| <= eps·sum_j p_j|v_j| + floor;
- normalised outputs: |error| <= eps·max|V| + floor.

Dots accumulate in f32 (n·u32 for n products), then round to their dtype; exp turns its
argument's absolute error into a relative one; o / ℓ needs ℓ >= 1 (max-domination) to keep
the floors bounded. Inputs are exact (the harness gives f16-representable numbers); |v| <=
B (the input bound) bounds the floors of products with V. The output bound (η, τ) means
|computed - exact| <= η·max|V| + τ elementwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from meshproof.model.evaluate import Binary, Compare, Key, Lost, Reduction, Reload, Unary
from meshproof.model.schedule import DType, Op, OpKind, ValueRef
from meshproof.verify.semantics.atoms import Input, Lin
from meshproof.verify.semantics.bounds import lin_interval
from meshproof.verify.semantics.layouts import Value
from meshproof.verify.semantics.order import at_least_one, lower_bound
from meshproof.verify.semantics.rational import Rat
from meshproof.verify.semantics.readers import RoundingReader, WhyStore
from meshproof.verify.semantics.symbolic import Opaque
from meshproof.verify.semantics.views import convex_output, describe

UNIT = {DType.F16: 2.0 ** -11, DType.BF16: 2.0 ** -8, DType.F32: 2.0 ** -24}
TINY = {DType.F16: 2.0 ** -25, DType.BF16: 2.0 ** -134, DType.F32: 2.0 ** -150}
_VIEWS = (OpKind.STORE, OpKind.SEND, OpKind.RESHAPE, OpKind.TRANS, OpKind.NEG, OpKind.MAX,
          OpKind.MAXIMUM, OpKind.MINIMUM)


class Kind(Enum):
    EXACT = "exact"
    ABS = "abs"          # scores, maxima: absolute error
    REL = "rel"          # weights and their sums: relative error plus a floor
    OSCALE = "oscale"    # unnormalised o: relative to sum p|v|, plus a floor
    OUT = "out"          # normalised o: relative to max|V|, plus a floor


@dataclass(frozen=True, slots=True)
class Err:
    kind: Kind
    eps: float
    dtype: DType
    floor: float = 0.0


@dataclass(frozen=True, slots=True)
class OutputBound:
    """|computed - exact| <= eta·max|V| + tau for one stored output."""

    eta: float
    tau: float


@dataclass(frozen=True, slots=True)
class NoBound:
    """Why no rounding bound is stated for one stored output. `attention` is whether the
    output's exact value is a normalised attention output (then the missing bound matters:
    numeric_safety is unknown); else attention_equivalence judges it and no bound is due."""

    reason: str
    attention: bool


def _pure_input(form: Rat) -> bool:
    """An input element itself (Q, K or V at some coordinates): exact as loaded."""
    lin = form.as_lin()
    return lin is not None and lin.const == 0 and len(lin.coeffs) == 1 and \
        lin.coeffs[0][1] == 1 and isinstance(lin.coeffs[0][0], Input)


def _positive_terms(form: Rat) -> bool:
    """A finite value whose terms all weigh positively: a sum of such cannot cancel."""
    return not form.inf and all(c > 0 for _, c in form.num.terms)


def _form_kind(form: Rat) -> Kind | None:
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
        return self._round(sent, kind, op.dtype, key)

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
            return Err(Kind.ABS, u * self._mag(key), op.dtype) if u else \
                Err(kind, 0.0, op.dtype)
        return Err(kind, u, op.dtype, TINY[op.dtype] if u else 0.0)

    def full(self, rank: int, op: Op) -> Err | None:
        return self._compute(rank, op, [])

    def cast(self, rank: int, op: Op, x: Err | None) -> Err | None:
        return self._compute(rank, op, [x])

    def reshape(self, rank: int, op: Op, x: Err | None) -> Err | None:
        return self._compute(rank, op, [x])

    def trans(self, rank: int, op: Op, x: Err | None) -> Err | None:
        return self._compute(rank, op, [x])

    def unary(self, rank: int, op: Op, fn: Unary, x: Err | None) -> Err | None:
        return self._compute(rank, op, [x])

    def binary(self, rank: int, op: Op, fn: Binary, a: Err | None, b: Err | None
               ) -> Err | None:
        return self._compute(rank, op, [a, b])

    def reduce(self, rank: int, op: Op, fn: Reduction, x: Err | None) -> Err | None:
        return self._compute(rank, op, [x])

    def softmax(self, rank: int, op: Op, x: Err | None) -> Err | None:
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
                f"holds {describe(res.form)}"
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
        out = self._combine(op, kind, [a for a in args if a is not None], key)
        if out is None:
            self._fail(key, op, f"{op.kind.value} of {kind.value} values is outside the "
                       "first-order analysis")
        return out

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
                return Err(kind, e.eps, dtype, e.floor)
            # bf16 -> f16: as many digits, but f16's subnormals are coarser
            if kind is Kind.ABS:
                return Err(kind, e.eps + TINY[dtype], dtype)
            return Err(kind, e.eps, dtype, e.floor + TINY[dtype])
        return self._rounded(Err(kind, e.eps, dtype, e.floor), key)

    def _rounded(self, e: Err, key: Key) -> Err:
        """The rounding of an op's result to its dtype."""
        u, tiny = UNIT[e.dtype], TINY[e.dtype]
        if e.kind is Kind.ABS:
            return Err(e.kind, e.eps + u * self._mag(key) + tiny, e.dtype)
        return Err(e.kind, e.eps + u, e.dtype, e.floor + tiny)

    def _combine(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        k = op.kind
        if k in _VIEWS:
            return Err(kind, max(a.eps for a in args), op.dtype,
                       max(a.floor for a in args))
        if k is OpKind.CAST:
            return self._round(args[0], kind, op.dtype, key)
        if k is OpKind.FULL:
            return Err(kind, 0.0, op.dtype)
        if kind is Kind.EXACT:
            if not _pure_input(self._form(key)):
                return Err(kind, 0.0, op.dtype)   # constants: what the machine holds
            kind = Kind.ABS   # arithmetic that gives back an input (q·2·0.5) still rounds
        out = self._exact_part(op, kind, args, key)
        return None if out is None else self._rounded(out, key)

    def _exact_part(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        """The error of the op computed exactly from inexact operands (plus the f32
        accumulation of dots and sums); its own rounding is added by the caller."""
        k, u32, dt = op.kind, UNIT[DType.F32], op.dtype
        if k is OpKind.DOT:
            return self._dot(op, kind, args, key)
        if k in (OpKind.EXP, OpKind.EXP2):
            a = args[0]
            arg = self._abs_err(op, key, 0, a) if a.kind in (Kind.ABS, Kind.EXACT) else 0.0
            # |exp(x + δ)/exp(x) - 1| <= expm1(|δ|): exact, not only first order
            return Err(Kind.REL, _expm1(arg * (math.log(2.0) if k is OpKind.EXP2 else 1.0)) +
                       u32, dt)
        if k is OpKind.SOFTMAX:
            n = self._axis_size(op, key)
            return Err(Kind.REL, _expm1(2 * args[0].eps) + (n + 2) * u32, dt)
        if k is OpKind.SUM and kind is Kind.ABS and args[0].kind in (Kind.ABS, Kind.EXACT):
            # n values off by eps each, accumulated in f32 (a split contraction's parts)
            n = self._axis_size(op, key)
            arg = self._abs_err(op, key, 0, args[0])
            return Err(kind, n * arg + n * u32 * n * self._arg_mag(op, key, 0), dt)
        if k is OpKind.SUM and kind is Kind.REL:
            n = self._axis_size(op, key)
            return Err(kind, args[0].eps + (n - 1) * u32, dt, n * args[0].floor)
        if k is OpKind.LOG:
            a = args[0]
            if a.kind is not Kind.REL or not self._at_least_one(op, key, 0):
                return None
            return Err(Kind.ABS, a.eps + a.floor, dt)   # |d log X| <= dX / X, X >= 1
        if k in (OpKind.ADD, OpKind.SUB):
            return self._add(op, kind, args, key)
        if k is OpKind.MUL:
            return self._mul(op, kind, args, key)
        if k is OpKind.DIV:
            return self._div(op, kind, args, key)
        return None

    def _add(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        dt = op.dtype
        if kind is Kind.ABS:
            return Err(kind, sum(self._abs_err(op, key, i, a) for i, a in enumerate(args)), dt)
        # A relative error survives a sum only if nothing cancels: an addition of values
        # whose terms all weigh positively. A constant added to ℓ or o (ℓ + 2048 sent in
        # f16), or a difference, is rounded at a magnitude the reference does not bound.
        if op.kind is not OpKind.ADD:
            self._fail(key, op, f"a difference of {kind.value} values may cancel, so its "
                       "rounding is not bounded relative to the result")
            return None
        for i, a in enumerate(op.args):
            if not isinstance(a, ValueRef):
                if a.value:
                    self._fail(key, op, f"the constant {a.value:g} added here is rounded with "
                               "the value, at a magnitude the first-order bound does not "
                               "cover")
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
        # positive sums keep the worst relative error; sums of outputs add theirs
        eps = max(a.eps for a in args) if kind is Kind.REL else sum(a.eps for a in args)
        return Err(kind, eps, dt, sum(a.floor for a in args))

    def _mul(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        mags = [self._arg_mag(op, key, i) for i in range(len(op.args))]
        if kind is Kind.ABS:
            consts = [a.kind is Kind.EXACT for a in args]
            if not any(consts):
                return None
            spread = sum(_scaled(self._abs_err(op, key, i, a),
                                 _prod(m for j, m in enumerate(mags) if j != i))
                         for i, a in enumerate(args))
            return Err(kind, spread, op.dtype)
        floor = sum(_scaled(a.floor, _prod(m for j, m in enumerate(mags) if j != i))
                    for i, a in enumerate(args))
        return Err(kind, sum(a.eps for a in args), op.dtype, floor)

    def _div(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        num, den = args
        if den.kind is Kind.EXACT:
            c = self._arg_mag(op, key, 1)
            if not c:
                return None
            # an absolute error is divided with the value; a relative one is not changed
            eps = self._abs_err(op, key, 0, num) / c if kind is Kind.ABS else num.eps
            return Err(kind, eps + (den.eps if den.kind is Kind.EXACT else 0.0), op.dtype,
                       num.floor / c)
        low = min(1.0, self._lower_bound(op, key, 1))   # ℓ >= low: the floors over ℓ
        if low <= 0:
            # ℓ may be tiny: the floors would not stay bounded
            self._fail(key, op, "the divisor has no positive lower bound by max-domination, "
                       "so the rounding floors are not bounded")
            return None
        if kind is Kind.OUT and num.kind is Kind.OSCALE and den.kind is Kind.REL:
            return Err(kind, num.eps + den.eps, op.dtype,
                       (num.floor + self.b * den.floor) / low)
        if kind is num.kind is den.kind is Kind.REL:
            return Err(kind, num.eps + den.eps, op.dtype,
                       (num.floor + self._arg_mag(op, key, 0) * den.floor) / low)
        return None

    def _dot(self, op: Op, kind: Kind, args: list[Err], key: Key) -> Err | None:
        n = self._inner(op, key)
        u32 = UNIT[DType.F32]
        a, b = args
        if kind is Kind.ABS:
            # n products of bounded inputs, accumulated in f32
            ma, mb = self._arg_mag(op, key, 0), self._arg_mag(op, key, 1)
            ea, eb = self._abs_err(op, key, 0, a), self._abs_err(op, key, 1, b)
            return Err(kind, n * (ea * mb + eb * ma) + n * u32 * n * ma * mb, op.dtype)
        if kind is Kind.OSCALE and a.kind is Kind.REL and b.kind is Kind.EXACT:
            # V rounded by a cast (relative b.eps per element) weighs like p's own error
            return Err(kind, a.eps + b.eps + n * u32, op.dtype, n * a.floor * self.b)
        return None

    def _inner(self, op: Op, key: Key) -> int:
        arg = op.args[0]
        assert isinstance(arg, ValueRef)
        res = self._res((key[0], arg.id))
        if res is None or isinstance(res, Opaque) or not res.layout.shape:
            return 1
        return res.layout.shape[-1]

    def _axis_size(self, op: Op, key: Key) -> int:
        arg = op.args[0]
        assert isinstance(arg, ValueRef) and op.axis is not None
        res = self._res((key[0], arg.id))
        if res is None or isinstance(res, Opaque):
            return 1
        return res.layout.shape[op.axis]


class ErrorReader(Protocol):
    """The finished analysis, as the output bound reads it."""

    def canonical(self, key: Key) -> Value | Opaque | None: ...

    def err(self, key: Key) -> Err | None: ...

    def why(self, key: Key) -> str | None: ...


def output_error_bounds(forms: ErrorReader, stores: list[tuple[int, Op]],
                        input_bound: float) -> list[OutputBound | NoBound]:
    """Per stored output, (η, τ) with |computed - exact| <= η·max|V| + τ, or why not."""
    out: list[OutputBound | NoBound] = []
    for rank, store in stores:
        arg = store.args[0]
        assert isinstance(arg, ValueRef)
        key = (rank, arg.id)
        res = forms.canonical(key)
        attention = res is not None and not isinstance(res, Opaque) and convex_output(res.form)
        e = forms.err(key)
        if e is None or e.kind is not Kind.OUT:
            out.append(NoBound(forms.why(key) or f"{store.source}: the stored value is not a "
                               "normalised output", attention))
            continue
        if UNIT[store.dtype] > UNIT[e.dtype]:
            e = Err(e.kind, e.eps + UNIT[store.dtype], store.dtype,
                    e.floor + TINY[store.dtype])
        if not (math.isfinite(e.eps) and math.isfinite(e.floor)) or e.eps >= 1:
            out.append(NoBound(f"{store.source}: the first-order bound is {e.eps:.3g}·max|V| "
                               "or more: no digit of the output is guaranteed", attention))
            continue
        if e.floor >= (1 - e.eps) * input_bound:
            # η·max|V| + τ >= max|V| even at the largest max|V| the inputs allow
            out.append(NoBound(f"{store.source}: the first-order bound's absolute part "
                               f"{e.floor:.3g} is at least max|V| can be (|inputs| <= "
                               f"{input_bound:g}): no digit of the output is guaranteed",
                               attention))
            continue
        out.append(OutputBound(e.eps, e.floor))
    return out


def _prod(xs: Iterable[float]) -> float:
    """A product of magnitudes (inf where unbounded)."""
    return math.prod(xs)


def _scaled(err: float, mag: float) -> float:
    """err · mag with 0 · inf = 0: no error, however large the value."""
    return 0.0 if not err else err * mag


def _expm1(x: float) -> float:
    try:
        return math.expm1(x)
    except OverflowError:
        return math.inf
