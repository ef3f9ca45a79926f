"""The symbolic domain's frame: what a value is (`Value` or `Opaque`), the guard around
every op (errors become opaque values, forms past the size bound too, constants are folded to
what the machine holds) and the harness's inputs as exact forms. symbolic.py builds the op
rules on it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from meshproof.model.evaluate import Dependencies
from meshproof.model.problem import Problem
from meshproof.model.schedule import Op, OpKind, Schedule, ValueRef
from meshproof.verify.semantics.budget import Budget, unbounded
from meshproof.verify.semantics.events import Departure, Recorder, Silent
from meshproof.verify.semantics.index import DigitSource, Layout
from meshproof.verify.semantics.layouts import Value, buffer
from meshproof.verify.semantics.rational import Rat
from meshproof.verify.semantics.reasons import NotModelled, Undefined, UndefinedKind
from meshproof.verify.semantics.scalars import machine_value
from meshproof.verify.semantics.strided import stride_form
from meshproof.verify.semantics.tensor_atoms import Input


@dataclass(frozen=True, slots=True)
class Opaque:
    """A value whose exact form is not known: `reason` in words, at `op` of `rank`."""

    reason: str
    rank: int
    op: Op
    lost: bool = False                       # it depends on a message that never arrives
    undefined: UndefinedKind | None = None   # it is undefined on the machine (0/0, ...)


Result = Value | Opaque
UNDERFLOW_WATCH = 2.0 ** -60     # constant factors below this get the underflow check
F16_MAX = 65504.0
F32_TINY = 2.0 ** -149            # the smallest positive f32
EXP_UNDERFLOW = math.log(F32_TINY) - 1.0   # exp below this is 0 in f32
SIGMOID_FLAT = 89.0     # sigmoid(x) for x below -this is 0 in f32 (exp(-x) overflows)
SIGMOID_ONE = 18.0      # ... and above this it rounds to 1
LN2 = Fraction(math.log(2.0))     # ln 2 as the nearest double, used consistently
INV_LN2 = 1 / LN2                 # its exact reciprocal: exp2(log2 x) = x exactly
SCALAR = Layout((), ())
# A form larger than this cannot be the normal form of a merge that simplifies (correct
# merges stay under a hundred characters per partial at any size): past it the value is
# opaque, so a form that grows with every merge costs bounded time and memory.
FORM_LIMIT = 20_000
TERM_LIMIT = 256


def _const(v: float) -> Rat:
    return Rat.const(Fraction(v) if math.isfinite(v) else v)


class SymbolicCore:
    """The exact-form domain of one schedule and attention problem: its state and the
    guard around every op."""

    def __init__(self, schedule: Schedule, problem: Problem,
                 budget: Budget | None = None, record: bool = True,
                 dependencies: Dependencies | None = None) -> None:
        self.schedule = schedule
        self.problem = problem
        self.budget = budget if budget is not None else unbounded()
        self.src = DigitSource()
        self.rec = Recorder() if record else Silent()
        self.private = False      # the last op read rank context (a scrambled dot's label)
        self._buffers: dict[tuple[int, str], Value | None] = {}
        self.dependencies = dependencies  # the op defining each value (events only)

    # --- the guard around every op -------------------------------------------------------
    def _run(self, rank: int, op: Op, compute: Callable[[], Result]) -> Result:
        self.rec.key = (rank, op.out if op.out is not None else -1)
        try:
            out = compute()
        except Undefined as exc:
            self.rec.add(Departure.OPAQUE, op, f"line {op.source.line}: tl.{op.kind.value} "
                         f"{exc}")
            return Opaque(str(exc), rank, op, undefined=exc.kind)
        except NotModelled as exc:
            self.rec.add(Departure.OPAQUE, op, f"line {op.source.line}: tl.{op.kind.value} "
                         f"{exc}")
            return Opaque(str(exc), rank, op)
        if isinstance(out, Value):
            # long chains of shifted guarded row sums (striped shards) as one atom each
            strided = stride_form(out.form)
            if strided is not out.form:
                out = Value(out.layout, strided)
            self.budget.tick(op, len(out.form.key))
        if isinstance(out, Value) and (len(out.form.key) > FORM_LIMIT or
                                       len(out.form.num.terms) > TERM_LIMIT):
            reason = (f"grows past the algebra's size bound ({len(out.form.num.terms)} terms, "
                      f"{len(out.form.key)} characters): the merge does not simplify (a "
                      "normalisation or weight that never cancels)")
            self.rec.add(Departure.OPAQUE, op, f"line {op.source.line}: tl.{op.kind.value} "
                         f"{reason}")
            return Opaque(reason, rank, op)
        return self._fold(out, op) if isinstance(out, Value) else out

    def _fold(self, value: Value, op: Op) -> Value:
        """A value that depends on no input is what the machine holds in its dtype."""
        c = constant_value(value.form)
        if c is None:
            return value
        held = machine_value(c, op.dtype)
        exact = value.form.as_const()
        if isinstance(exact, Fraction) and held == float(exact):
            return value
        if c and not held:
            self.rec.machine_zero(op, c, op.dtype.value)
        if held != held:
            raise Undefined(UndefinedKind.NAN_CONSTANT, "computes nan from constants")
        return Value(value.layout, _const(held))

    def _op_of(self, rank: int, vid: int) -> Op | None:
        if self.dependencies is None:
            self.dependencies = Dependencies(self.schedule, None)  # type: ignore[arg-type]
        return self.dependencies.defining(rank).get(vid)

    def _defining(self, rank: int, vid: int) -> OpKind | None:
        op = self._op_of(rank, vid)
        return None if op is None else op.kind

    def _view_source(self, rank: int, arg: ValueRef | object) -> Op | None:
        """The reshape an operand went through (following trans, cast, recv)."""
        while isinstance(arg, ValueRef):
            op = self._op_of(rank, arg.id)
            if op is None:
                return None
            if op.kind is OpKind.RESHAPE:
                return op
            if op.kind not in (OpKind.TRANS, OpKind.CAST) or not op.args:
                return None
            arg = op.args[0]
        return None

    # --- the harness's inputs ------------------------------------------------------------
    def input_buffer(self, rank: int, ptr: str) -> Value | None:
        """The harness's content of `ptr` on `rank`, or None if it fills none."""
        if (rank, ptr) in self._buffers:
            return self._buffers[(rank, ptr)]
        p = self.problem
        g = p.group_of[rank]
        value: Value | None = None
        # a zigzag prefill's rows are read as positions (Problem.position_rows)
        q_pos, k_pos = p.rank_positions(rank) if p.position_rows else (None, None)
        if ptr == "q_ptr" and p.q_base(rank) is not None:
            base = 0 if q_pos is not None else p.q_base(rank) or 0
            value = buffer((p.S_q, p.h_q, p.d_head),
                           lambda c: Rat.atom(Input.make("Q", g, (c[0].shift(base), c[1], c[2]))),
                           self.src, None if q_pos is None else q_pos.tolist())
        elif ptr in (p.k_ptr, p.v_ptr) and p.kv_base(rank) is not None:
            base = 0 if k_pos is not None else p.kv_base(rank) or 0
            # an empty slice (numeric_safety's --empty-shard) holds no keys: its scores
            # are -inf, which the algebra then follows (max = -inf, exp(-inf - x) = 0)
            name = ("K" if ptr == p.k_ptr else "V") + ("x" if rank in p.empty else "")
            value = buffer((p.S_kv_per_rank, p.h_kv, p.d_head),
                           lambda c: Rat.atom(Input.make(name, g, (c[0].shift(base), c[1],
                                                                   c[2]))),
                           self.src, None if k_pos is None else k_pos.tolist())
        self._buffers[(rank, ptr)] = value
        return value


def constant_value(form: Rat) -> float | None:
    """The value of a form that depends on no input (also exp or log of constants), as a
    float; None if it depends on an input (or is infinite: kept exact)."""
    if form.inf or form.den:
        return None
    total = 0.0
    for m, c in form.num.terms:
        if m.unit.coeffs or m.vars:
            return None
        with np.errstate(over="ignore"):
            try:
                total += float(c) * math.exp(float(m.unit.const))
            except OverflowError:
                total += math.inf if c > 0 else -math.inf
    return total

