"""A first-order forward rounding-error bound for every stored output.

Standard running-error analysis (first order in the unit roundoffs u: f16 2^-11, bf16 2^-8,
f32 2^-24), driven by what each value is in the exact forms:

- scores, maxima and log-sum-exp values carry an absolute error a;
- exponential weights and sums of them (ℓ) a relative error r;
- unnormalised outputs (o) an error relative to ℓ·max|V|;
- normalised outputs an error relative to max|V|.

Dots accumulate in f32 (n·u32 for n products), then round to their dtype; exp adds its
argument's absolute error to its relative error; a division o/ℓ adds the errors of both.
Inputs are exact (the harness gives f16-representable numbers). The output bound η means
|computed - exact| <= η·max|V| elementwise, under |inputs| <= B for the score errors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from meshproof.model.schedule import DType, Op, OpKind, ValueRef
from meshproof.verify.semantics.canon import CanonValue
from meshproof.verify.semantics.events import describe
from meshproof.verify.semantics.interp import Interpreter
from meshproof.verify.semantics.terms import Poly

UNIT = {DType.F16: 2.0 ** -11, DType.BF16: 2.0 ** -8, DType.F32: 2.0 ** -24}


class Kind(Enum):
    EXACT = "exact"
    ABS = "abs"          # scores, maxima: absolute error
    REL = "rel"          # weights and their sums: relative error
    OSCALE = "oscale"    # unnormalised o: error relative to ℓ·max|V|
    OUT = "out"          # normalised o: error relative to max|V|


@dataclass(frozen=True, slots=True)
class Err:
    kind: Kind
    eps: float
    dtype: DType


def _kind_of(form: Poly) -> Kind | None:
    what = describe(form)
    if what in ("a constant", "Q", "K", "V") or "/" in what:
        return Kind.EXACT
    if what in ("scores", "a running max (m)", "a log-sum-exp value"):
        return Kind.ABS
    if what in ("ℓ", "exponential weights", "softmax probabilities"):
        return Kind.REL
    if what == "o":
        return Kind.OSCALE
    if what == "o (normalised)":
        return Kind.OUT
    return None


_EXACT = Err(Kind.EXACT, 0.0, DType.F32)
_MISSING = Err(Kind.EXACT, math.nan, DType.F32)   # a memo miss (never a result: nan)


class ErrorBounds:
    """The error of every value, in the interpreter's evaluation order (each value after
    what it depends on). An error is a function of the op, the canonical values involved
    and the operands' errors, so equal situations are computed once (`_memo`)."""

    def __init__(self, interp: Interpreter, input_bound: float) -> None:
        self.interp = interp
        self.b = input_bound
        self.d = interp.problem.d_head
        self._defs, self._cvs = interp.table_of_values()
        self.errs: list[list[Err | None]] = [[None] * len(d) for d in self._defs]
        self._memo: dict[tuple[object, ...], Err | None] = {}
        self._received: dict[tuple[int, int, int], Err | None] = {}
        self._errs: dict[tuple[object, ...], Err] = {}   # errors interned: keyed by id
        self._done = False

    def result(self, rank: int, vid: int) -> Err | None:
        if not self._done:
            self._done = True
            self._run()
        return self.errs[rank][vid]

    def _run(self) -> None:
        """Every value's error in evaluation order. Inlined common cases: a message (the
        sent value's error, rounded into the recv's dtype) and an op of one or two tensor
        operands, whose situation was met before."""
        errs, defs, cvs, memo, received = self.errs, self._defs, self._cvs, self._memo, \
            self._received
        plain: dict[int, tuple[int, ...] | None] = {}
        recv = OpKind.RECV
        sources = self.interp.message_sources
        for r, v in self.interp.order():
            op = defs[r][v]
            cv = cvs[r][v]
            if op is None or cv.__class__ is not CanonValue:
                continue
            mine = errs[r]
            if op.kind is recv:
                src = sources(r).get(op.index)
                if src is not None:
                    sent = errs[src[0]][src[1]]
                    if sent is None:
                        continue
                    rkey = (id(sent), cv.id, id(op.dtype))
                    got = received.get(rkey)
                    if got is None:
                        got = received[rkey] = self._evaluate(r, v)
                    mine[v] = got
                    continue
            oid = id(op)
            ids = plain.get(oid, ())
            if ids == ():
                ids = plain[oid] = op.value_args if op.kind is not OpKind.LOAD and \
                    op.kind is not recv and len(op.value_args) == len(op.args) else None
            if ids is not None:
                rank_cvs = cvs[r]
                key: tuple[object, ...] | None = None
                if len(ids) == 1:
                    e, c = mine[ids[0]], rank_cvs[ids[0]]
                    if e is not None and c.__class__ is CanonValue:
                        key = (oid, cv.id, id(e), c.id)
                elif len(ids) == 2:
                    e, c = mine[ids[0]], rank_cvs[ids[0]]
                    e2, c2 = mine[ids[1]], rank_cvs[ids[1]]
                    if e is not None and e2 is not None and c.__class__ is CanonValue and \
                            c2.__class__ is CanonValue:
                        key = (oid, cv.id, id(e), c.id, id(e2), c2.id)
                if key is not None:
                    got = memo.get(key, _MISSING)
                    if got is not _MISSING:
                        mine[v] = got
                        continue
            mine[v] = self._evaluate(r, v)

    def _err(self, kind: Kind, eps: float, dtype: DType) -> Err:
        key = (id(kind), eps, id(dtype))  # enums are singletons: key them by identity
        e = self._errs.get(key)
        if e is None:
            e = self._errs[key] = Err(kind, eps, dtype)
        return e

    def _cv(self, rank: int, vid: int) -> CanonValue | None:
        cv = self._cvs[rank][vid]
        return cv if isinstance(cv, CanonValue) else None

    def _kind(self, cv: CanonValue | None) -> Kind | None:
        if cv is None:
            return None
        if "kind" not in cv.facts:
            cv.facts["kind"] = _kind_of(cv.form)
        return cv.facts["kind"]  # type: ignore[return-value]

    def _magnitude(self, cv: CanonValue | None) -> float:
        from meshproof.verify.semantics.bounds import magnitude

        if cv is None:
            return math.inf
        key = ("magnitude", self.b)
        if key not in cv.facts:
            m = magnitude(cv.form, self.b, self.d,
                          sizes={dg.id: dg.size for dg in cv.layout.digits})
            cv.facts[key] = math.inf if m is None else m
        return cv.facts[key]  # type: ignore[return-value]

    def _evaluate(self, rank: int, vid: int) -> Err | None:
        interp = self.interp
        op = self._defs[rank][vid]
        assert op is not None
        cv = self._cv(rank, vid)
        kind = self._kind(cv)
        if kind is None:
            return None
        errs = self.errs[rank]
        if op.kind is OpKind.RECV:
            src = interp.recv_source(rank, op)
            sent = self.errs[src[0]][src[1]] if isinstance(src, tuple) else None
            return None if sent is None else self._round(sent, kind, op, cv)
        if op.kind is OpKind.LOAD:
            source = interp.rank_memory(rank).loads.get(op.index)
            if source is not None:
                kept = errs[source.writers[0].value_args[0]]
                return None if kept is None else self._round(kept, kind, op, cv)
            return self._err(kind, UNIT[op.dtype] if op.dtype is DType.BF16 else 0.0,
                             op.dtype)
        args: list[Err] = []
        cvs: list[CanonValue | None] = []
        key: list[object] = [id(op), cv.id if cv is not None else -1]
        for a in op.args:
            if isinstance(a, ValueRef):
                e = errs[a.id]
                if e is None:
                    return None
                c = self._cv(rank, a.id)
                args.append(e)
                cvs.append(c)
                key.append(id(e))
                key.append(c.id if c is not None else -1)
            else:
                args.append(_EXACT)
                cvs.append(None)
        # errors are interned (equal errors are one object) and ops are the schedule's,
        # alive for the whole pass: identities are stable keys
        k = tuple(key)
        if k not in self._memo:
            got = self._combine(op, kind, args, cv, cvs)
            self._memo[k] = None if got is None else self._err(got.kind, got.eps, got.dtype)
        return self._memo[k]

    def _round(self, e: Err, kind: Kind, op: Op, cv: CanonValue | None) -> Err:
        """A value moved into op's dtype: one more rounding if it narrows."""
        extra = UNIT[op.dtype] if UNIT[op.dtype] > UNIT[e.dtype] else 0.0
        return self._err(kind, self._add_rounding(e.eps, extra, kind, cv), op.dtype)

    def _add_rounding(self, eps: float, u: float, kind: Kind, cv: CanonValue | None) -> float:
        if kind is Kind.ABS:
            return eps + u * self._magnitude(cv)
        return eps + u

    def _combine(self, op: Op, kind: Kind, args: list[Err], cv: CanonValue | None,
                 cvs: list[CanonValue | None]) -> Err | None:
        u = UNIT[op.dtype]
        u32 = UNIT[DType.F32]
        k = op.kind
        worst = max((a.eps for a in args), default=0.0)
        total = sum(a.eps for a in args)
        if k in (OpKind.CAST, OpKind.STORE, OpKind.SEND, OpKind.RESHAPE, OpKind.TRANS,
                 OpKind.NEG, OpKind.MAX, OpKind.MAXIMUM, OpKind.MINIMUM):
            if k is OpKind.CAST:
                return self._round(args[0], kind, op, cv)
            return Err(kind, worst, op.dtype)
        if k is OpKind.FULL:
            return Err(kind, 0.0, op.dtype)
        if k is OpKind.DOT:
            n = _shape(cvs[0])[-1] if _shape(cvs[0]) else 1
            if kind is Kind.ABS:
                # sum of n products of inputs bounded by B: n·u32·(n·B²) plus the rounding
                return Err(kind, total + n * u32 * n * self.b ** 2 + u * self._magnitude(cv),
                           op.dtype)
            return Err(kind, worst + n * u32 + u, op.dtype)
        if k in (OpKind.EXP, OpKind.EXP2):
            a = args[0]
            arg_abs = a.eps if a.kind is Kind.ABS else 0.0
            scale = math.log(2.0) if k is OpKind.EXP2 else 1.0
            return Err(Kind.REL, arg_abs * scale + u32 + u, op.dtype)
        if k is OpKind.SOFTMAX:
            a = args[0]
            n = self._axis_size(op, cvs[0])
            return Err(Kind.REL, 2 * a.eps + (n + 2) * u32 + u, op.dtype)
        if k is OpKind.SUM:
            n = self._axis_size(op, cvs[0])
            return Err(kind, worst + (n - 1) * u32 + u, op.dtype)
        if k is OpKind.LOG:
            return Err(Kind.ABS, worst + u * max(1.0, self._magnitude(cv)), op.dtype)
        if k in (OpKind.ADD, OpKind.SUB):
            if kind is Kind.ABS:
                return Err(kind, total + u * self._magnitude(cv), op.dtype)
            return Err(kind, worst + u, op.dtype)
        if k in (OpKind.MUL, OpKind.DIV):
            if kind is Kind.ABS and k is OpKind.MUL:
                mags = [self._magnitude(c) if isinstance(a, ValueRef) else abs(a.value)
                        for a, c in zip(op.args, cvs, strict=True)]
                spread = sum(a.eps * math.prod(m for j, m in enumerate(mags) if j != i)
                             for i, a in enumerate(args))
                return Err(kind, spread + u * self._magnitude(cv), op.dtype)
            if kind is Kind.ABS:
                return None
            return Err(kind, total + u, op.dtype)
        return None

    @staticmethod
    def _axis_size(op: Op, cv: CanonValue | None) -> int:
        assert op.axis is not None
        return 1 if cv is None else cv.layout.shape[op.axis]


def _shape(cv: CanonValue | None) -> tuple[int, ...]:
    return () if cv is None else cv.layout.shape


def output_error_bounds(interp: Interpreter, stores: list[tuple[int, Op]],
                        input_bound: float) -> list[float | None]:
    """Per stored output, η with |computed - exact| <= η·max|V|, or None."""
    eb = ErrorBounds(interp, input_bound)
    out: list[float | None] = []
    for rank, store in stores:
        arg = store.args[0]
        assert isinstance(arg, ValueRef)
        e = eb.result(rank, arg.id)
        out.append(None if e is None or e.kind is not Kind.OUT else
                   e.eps + (UNIT[store.dtype] if UNIT[store.dtype] > UNIT[e.dtype] else 0.0))
    return out
