"""Undefined outputs on the machine: 0/0, inf - inf, log 0, overflow, a denominator that
underflows to 0.

Checked on every stored output, whatever the other properties say. The interval domain
(ranges.py) names the ops that could go wrong for some input with |x| <= B: a divisor or a
logarithm's argument whose lower bound is below the smallest number of its dtype (ℓ =
Σ exp(s - c) with a reference point c above every score: exp(-724) is 0 in f32), an exp
whose argument can pass the dtype's overflow threshold, a value beyond its dtype's range.
If there is any, the launch is evaluated the way the machine computes it (model/machine.py:
float32, rounded to each op's dtype) on inputs within the assumption that push those ops
to their limits; a stored output that is nan or infinite there is a violation, at the
first op of its cone that failed. Ops that could fail where no input tried makes an output
undefined leave numeric_safety unknown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from meshproof.model.channel_table import ChannelTable
from meshproof.model.evaluate import Evaluation
from meshproof.model.problem import Problem
from meshproof.model.schedule import DType, Op, OpKind, Schedule, ValueRef
from meshproof.verify.semantics.ranges import Interval
from meshproof.verify.semantics.situations import Forms
from meshproof.verify.semantics.symbolic_core import Opaque

if TYPE_CHECKING:  # a witness search's types
    from meshproof.model.machine import Buffers
    from meshproof.verify.semantics.numeric import Inputs

# the smallest positive number and the largest finite one of each dtype, and the exp
# argument past which exp overflows it
TINY = {DType.F16: 2.0 ** -24, DType.BF16: 2.0 ** -133, DType.F32: 2.0 ** -149}
HUGE = {DType.F16: 65504.0, DType.BF16: 3.3895313892515355e38, DType.F32: 3.4028235e38}
EXP_LIMIT = {dt: math.log(v) for dt, v in HUGE.items()}


@dataclass(frozen=True, slots=True)
class Suspect:
    rank: int
    op: Op
    why: str        # what could go wrong, in words


@dataclass(frozen=True, slots=True)
class Undefined:
    """A stored output that is nan or infinite on the machine for one input family."""

    rank: int
    store: Op
    family: str
    element: int
    value: float
    cause: Suspect | None      # the first suspect op of its cone that failed there


def _low(iv: Interval) -> float:
    return min(abs(iv[0]), abs(iv[1])) if iv[0] * iv[1] > 0 else 0.0


def suspects(schedule: Schedule, symbolic: Forms) -> list[Suspect]:
    """The ops that could be undefined or overflow for some input within the bound.

    What makes an op suspect is a function of its situation (its result's and operands'
    facts), so the situations are tried first, one (rank, op) each; only if one is suspect
    are the ranks walked, for the rank-by-rank list the cause search reads."""
    if not any(_why(symbolic, r, op) for r, op in symbolic.fresh if op.out is not None):
        return []
    out: list[Suspect] = []
    for r, prog in enumerate(schedule.programs):
        for op in prog.ops:
            if op.out is None:
                continue
            why = _why(symbolic, r, op)
            if why:
                out.append(Suspect(r, op, why))
    return out


def opaque_suspects(schedule: Schedule, symbolic: Forms) -> list[Suspect]:
    """The ops whose exact form is not known at the op itself (not inherited, not a lost
    message): where nothing else is suspect but a value could not be bounded, these are
    where the machine may fail (a running max that may be -inf for a fully masked query:
    exp(-inf - (-inf))), to be tried on the machine like any suspect."""
    out: list[Suspect] = []
    for r, prog in enumerate(schedule.programs):
        for op in prog.ops:
            if op.out is None:
                continue
            res = symbolic.canonical((r, op.out))
            if isinstance(res, Opaque) and res.op is op and not res.lost:
                out.append(Suspect(r, op, f"it {res.reason}"))
    return out


def _why(symbolic: Forms, r: int, op: Op) -> str:
    assert op.out is not None
    res = symbolic.canonical((r, op.out))
    if isinstance(res, Opaque) and res.lost:
        return ""   # it waits on a message that never arrives: it never runs
    if isinstance(res, Opaque) and res.undefined is not None and res.op is op:
        return f"it {res.reason}"
    return _suspect(symbolic, r, op)


def _arg(ranges: Forms, rank: int, op: Op, i: int) -> Interval | None:
    a = op.args[i]
    if not isinstance(a, ValueRef):
        return (a.value, a.value)
    return ranges.interval((rank, a.id))


def _suspect(ranges: Forms, rank: int, op: Op) -> str:
    iv = ranges.interval((rank, op.out or 0))
    tiny = TINY[op.dtype]
    if op.kind is OpKind.DIV:
        den = _arg(ranges, rank, op, 1)
        if den is not None and _low(den) < tiny and not (den[0] == den[1] != 0):
            return f"the divisor can be 0 in {op.dtype.value} (its bound {_iv(den)})"
    if op.kind in (OpKind.LOG, OpKind.LOG2):
        x = _arg(ranges, rank, op, 0)
        if x is not None and x[0] < tiny and x[1] > 0:
            return f"the argument of {op.kind.value} can be 0 in {op.dtype.value} " \
                   f"(its bound {_iv(x)})"
    if op.kind in (OpKind.EXP, OpKind.EXP2):
        x = _arg(ranges, rank, op, 0)
        scale = math.log(2.0) if op.kind is OpKind.EXP2 else 1.0
        if x is not None and x[1] * scale > EXP_LIMIT[op.dtype]:
            return f"exp overflows {op.dtype.value} past {EXP_LIMIT[op.dtype]:.4g} (its " \
                   f"argument's bound {_iv(x)})"
    if math.isfinite(iv[0]) and math.isfinite(iv[1]) and \
            max(abs(iv[0]), abs(iv[1])) > HUGE[op.dtype]:
        return f"the value can pass the largest finite {op.dtype.value} (bound {_iv(iv)})"
    return ""


def _iv(iv: Interval) -> str:
    return f"[{iv[0]:.3g}, {iv[1]:.3g}]"


def machine_buffers(problem: Problem, inputs: Inputs, ranks: int) -> Buffers:
    from meshproof.model.machine import Buffers  # for a witness search only

    out: dict[int, dict[str, np.ndarray]] = {}
    for r in range(ranks):
        g = problem.group_of[r]
        bufs: dict[str, np.ndarray] = {}
        qb = problem.q_base(r)
        if qb is not None:
            bufs["q_ptr"] = inputs.q[g][qb:qb + problem.S_q].astype(np.float32).reshape(-1)
        kb = problem.kv_base(r)
        if kb is not None and r not in problem.empty:
            rows = slice(kb, kb + problem.S_kv_per_rank)
            bufs[problem.k_ptr] = inputs.k[g][rows].astype(np.float32).reshape(-1)
            bufs[problem.v_ptr] = inputs.v[g][rows].astype(np.float32).reshape(-1)
        out[r] = bufs
    return Buffers(out)


def undefined_outputs(schedule: Schedule, table: ChannelTable, problem: Problem,
                      stores: list[tuple[int, Op]], found: list[Suspect],
                      families: list[tuple[str, Inputs]]) -> Undefined | None:
    """The first stored output that is nan or infinite on the machine for some family."""
    from meshproof.model.machine import Machine  # for a witness search only

    at = {(s.rank, s.op.out): s for s in found}
    for name, inputs in families:
        ev = Evaluation(schedule, table, Machine(machine_buffers(problem, inputs,
                                                                 len(schedule.programs))))
        for rank, store in stores:
            arg = store.args[0]
            assert isinstance(arg, ValueRef)
            val = ev.value(rank, arg.id)
            if val is None:
                continue
            bad = ~np.isfinite(val.reshape(-1))
            if not bad.any():
                continue
            i = int(np.argmax(bad))
            return Undefined(rank, store, name, i, float(val.reshape(-1)[i]),
                             _cause(ev, at, rank, arg.id))
    return None


def _cause(ev: Evaluation[np.ndarray | None], at: dict[tuple[int, int | None], Suspect],
           rank: int, vid: int) -> Suspect | None:
    """The earliest suspect of the output's cone whose machine value failed."""
    failed = []
    for key in ev.cone([(rank, vid)]):
        s = at.get(key)
        if s is None:
            continue
        val = ev.get(key)
        if val is not None and (not np.all(np.isfinite(val)) or _zero_divisor(ev, s)):
            failed.append(s)
    return min(failed, key=lambda s: (s.op.index, s.rank)) if failed else None


def _zero_divisor(ev: Evaluation[np.ndarray | None], s: Suspect) -> bool:
    if s.op.kind is not OpKind.DIV:
        return False
    a = s.op.args[1]
    if not isinstance(a, ValueRef):
        return a.value == 0
    val = ev.get((s.rank, a.id))
    return val is not None and bool(np.any(val == 0))
