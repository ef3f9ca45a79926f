"""The symbolic domain's arithmetic: unary functions (exp, log, sigmoid, ...) and binary
operations, with the machine's underflow and saturation where every f16 input makes them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

from meshproof.model.op_semantics import Binary, Unary
from meshproof.model.schedule import Op, OpKind, ValueRef
from meshproof.verify.semantics import masks as M
from meshproof.verify.semantics import rational as R
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.layouts import Value, broadcast, separate
from meshproof.verify.semantics.maxima import Max
from meshproof.verify.semantics.rat import ONE_RAT, ZERO_RAT, Rat
from meshproof.verify.semantics.rational_max import make_max, maximum
from meshproof.verify.semantics.reasons import NotModelled
from meshproof.verify.semantics.symbolic_core import (
    EXP_UNDERFLOW,
    F16_MAX,
    F32_TINY,
    INV_LN2,
    LN2,
    SIGMOID_FLAT,
    SIGMOID_ONE,
    UNDERFLOW_WATCH,
    Opaque,
    Result,
    SymbolicCore,
)
from meshproof.verify.semantics.views import describe

_BINARY: dict[Binary, Callable[[Rat, Rat], Rat]] = {
    Binary.ADD: R.add, Binary.SUB: R.sub, Binary.MUL: R.mul, Binary.DIV: R.div,
    Binary.MAXIMUM: maximum, Binary.MINIMUM: lambda a, b: maximum(a, b, is_min=True),
}


class SymbolicArithmetic(SymbolicCore):
    """The unary and binary ops of the exact-form domain."""

    def unary(self, rank: int, op: Op, fn: Unary, x: Result) -> Result:
        if isinstance(x, Opaque):
            return x
        return self._run(rank, op, lambda: Value(x.layout, self._unary(op, fn, x.form)))

    def _unary(self, op: Op, fn: Unary, f: Rat) -> Rat:
        if fn not in (Unary.EXP, Unary.EXP2) and M.penalised(f):
            raise NotModelled(f"takes {fn.value} of masked scores (-inf where the mask hides "
                              "a key)")
        match fn:
            case Unary.EXP:
                self.rec.exponent(op, f)
                return self._exp(op, f)
            case Unary.EXP2:   # exp2(x) = exp(x ln 2)
                arg = R.scale(f, LN2)
                self.rec.exponent(op, arg)
                return self._exp(op, arg)
            case Unary.LOG:
                return R.log(f)
            case Unary.LOG2:   # log2(x) = log(x) / ln 2
                return R.scale(R.log(f), INV_LN2)
            case Unary.LOG1P:
                return R.log(R.add(ONE_RAT, f))
            case Unary.SIGMOID:   # 1 / (1 + exp(-x)); sigmoid(-inf) = 0, sigmoid(inf) = 1
                if f.inf:
                    return ZERO_RAT if f.inf < 0 else ONE_RAT
                held = self._saturated(op, f)
                if held is not None:
                    return held
                return R.reciprocal(R.add(ONE_RAT, self._exp(op, R.neg(f))))
            case Unary.NEG:
                return R.neg(f)

    def _exp(self, op: Op, arg: Rat) -> Rat:
        """exp(arg), or 0 where arg is below the f32 underflow for every f16 input (the
        weight of a guarded empty partial, exp(-1e30 - m)): the machine holds 0."""
        lin = arg.as_lin()
        if lin is not None and not lin.infinite and lin.const < EXP_UNDERFLOW and \
                lin.coeffs:
            from meshproof.verify.semantics.bounds import lin_interval

            iv = lin_interval(lin, F16_MAX, self.problem.d_head)
            if iv is not None and iv[1] < EXP_UNDERFLOW:
                self.rec.machine_zero(op, math.exp(max(iv[1], -745.0)),
                                      "f32 (for every input: exp of at most "
                                      f"{iv[1]:.3g})")
                return ZERO_RAT
        return R.exp(arg)

    def _saturated(self, op: Op, x: Rat) -> Rat | None:
        """sigmoid(x) is what the machine holds for every f16 input when x is far out:
        0 below -89 (exp(-x) overflows f32), 1 above 18 (1 - exp(-x) rounds to 1)."""
        lin = x.as_lin()
        if lin is None or lin.infinite or not lin.coeffs or \
                abs(float(lin.const)) < SIGMOID_FLAT:
            return None
        from meshproof.verify.semantics.bounds import lin_interval

        iv = lin_interval(lin, F16_MAX, self.problem.d_head)
        if iv is not None and iv[1] < -SIGMOID_FLAT:
            self.rec.machine_zero(op, 0.0, "f32 (sigmoid of at most "
                                  f"{iv[1]:.3g}, for every input)")
            return ZERO_RAT
        if iv is not None and iv[0] > SIGMOID_ONE:
            return ONE_RAT
        return None

    def binary(self, rank: int, op: Op, fn: Binary, a: Result, b: Result) -> Result:
        if isinstance(a, Opaque):
            return a
        if isinstance(b, Opaque):
            return b
        return self._run(rank, op, lambda: self._binary(rank, fn, a, b, op))

    def _binary(self, rank: int, fn: Binary, a: Value, b: Value, op: Op | None) -> Value:
        # operands line up by axis position, never by digit ids they happen to share; equal
        # layouts (canonical operands of one shape: the common case) already line up
        if a.layout == b.layout:
            layout, fa, fb = a.layout, a.form, b.form
        else:
            # a digit both layouts hold at the same aligned axis (the same digits, sizes
            # and position) is the same index in both, whether its id is shared by descent
            # or by canonical numbering (canon.py: CANON + position), so only a digit held
            # elsewhere is renamed; renaming the rest made broadcast unify every axis again
            # and substitute both forms (a tenth of a zigzag ring's situations)
            b = separate(a.layout, b, self.src)
            layout, sa, sb = broadcast(a.layout, b.layout, self.src)
            fa, fb = a.form.subst(sa), b.form.subst(sb)
        if fn is Binary.MAXIMUM:
            d = self.problem.d_head
            guarded = _guard(fa, fb, d) or _guard(fb, fa, d)
            if guarded is not None:
                return Value(layout, guarded)
        masked = M.penalised(fa) or M.penalised(fb)
        if masked:
            M.check_binary(fn.value, fa, fb)
        try:
            out = _BINARY[fn](fa, fb)
        except NotModelled as exc:
            if fn in (Binary.MAXIMUM, Binary.MINIMUM):
                raise NotModelled(f"of {describe(fa)} and {describe(fb)}: {exc}") from None
            raise
        if masked and fn is not Binary.MAXIMUM:
            out = M.penalty_result(out, fa, fb)
        if fn in (Binary.MAXIMUM, Binary.MINIMUM):
            out = self._unreachable_floor(out)
        if op is not None:
            self._note(rank, fn, op, fa, fb, out)
            if fn in (Binary.MUL, Binary.DIV):
                out = self._underflow(op, fa, fb, out)
        return Value(layout, out)

    def _unreachable_floor(self, m: Rat) -> Rat:
        """max(x, -1e30) is x for every f16 input when x can never be that low (a guard of
        the running max): the constant member never attains the max."""
        lin = m.as_lin()
        if lin is None or len(lin.coeffs) != 1 or lin.coeffs[0][1] != 1 or lin.const:
            return m
        atom = lin.coeffs[0][0]
        if not isinstance(atom, Max) or atom.is_min:
            return m
        consts = [e for e in atom.elems if e.rows is None and not e.body.coeffs]
        others = [e for e in atom.elems if e not in consts]
        if not consts or not others:
            return m
        from meshproof.verify.semantics.bounds import lin_interval

        lows = [lin_interval(e.body, F16_MAX, self.problem.d_head) for e in others]
        top = max(float(e.body.const) for e in consts)
        if any(iv is not None and iv[0] > top for iv in lows):
            return make_max(others, False)
        return m

    def _underflow(self, op: Op, fa: Rat, fb: Rat, out: Rat) -> Rat:
        """A value scaled by a tiny constant may be below the smallest f32 for every input:
        the machine holds 0 (the harness's inputs are f16 numbers, |x| <= 65504)."""
        from meshproof.verify.semantics.bounds import magnitude

        tiny = [abs(float(c)) for c in (fa.as_const(), fb.as_const())
                if isinstance(c, Fraction) and c]
        if not tiny or min(tiny) >= UNDERFLOW_WATCH or out.is_zero or out.inf:
            return out
        bound = magnitude(out, F16_MAX, self.problem.d_head)
        if bound is not None and bound < F32_TINY:
            self.rec.machine_zero(op, bound, "f32 (for every input: the value is at most "
                                  "that)")
            return ZERO_RAT
        return out

    def _note(self, rank: int, fn: Binary, op: Op, fa: Rat, fb: Rat, out: Rat) -> None:
        if fn in (Binary.ADD, Binary.SUB):
            self.rec.added(op, fa, fb, out)
        elif fn is Binary.DIV:
            self.rec.divided(op, fa, fb, out)
        elif fn is Binary.MUL:
            for this, other, arg in ((fa, fb, 0), (fb, fa, 1)):
                c = other.as_const()
                if isinstance(c, Fraction):
                    src = op.args[arg]
                    received = isinstance(src, ValueRef) and \
                        self._defining(rank, src.id) is OpKind.RECV
                    self.rec.weighted(op, float(c), this, received)


def _guard(x: Rat, floor: Rat, d_head: int) -> Rat | None:
    """maximum(x, c) is x when x is a positive sum provably >= c (ℓ >= 1 >= eps). A
    constant member of a max below every score any f16 input can make (maximum(m, -1e30))
    never attains it."""
    from meshproof.verify.semantics.bounds import lin_interval
    from meshproof.verify.semantics.order import lower_bound

    c = floor.as_const()
    if not isinstance(c, Fraction) or x.as_lin() is not None or R.sign(x) <= 0:
        return None
    if c <= 0:
        return x

    def low_of(member: Lin) -> float | None:
        iv = lin_interval(member, F16_MAX, d_head)
        return None if iv is None else iv[0]
    return x if c <= 1 and lower_bound(x, low_of) >= 1 else None

