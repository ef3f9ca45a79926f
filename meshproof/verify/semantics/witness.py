"""Witnesses: concrete inputs on which a stored output differs from attention.

The schedule is evaluated on seeded inputs with the same semantics as the algebra (exact
arithmetic, casts are identities, values that depend on no input are what the machine
holds), in float64 and, for launches small enough, again in 40-digit arithmetic (mpmath),
and compared with the reference evaluated in the same precision. A difference far above
the evaluation's own rounding (relative 1e-6) is a witness; none found leaves the
property unknown, never violated.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mpmath
import numpy as np

from meshproof.model.channels import ChannelTable
from meshproof.model.problem import Problem
from meshproof.model.schedule import Const, DType, Op, OpKind, Schedule, ValueRef
from meshproof.verify.semantics.dataflow import Dataflow, Key
from meshproof.verify.semantics.scalars import machine_value

WITNESS_RTOL = 1e-6
MP_DIGITS = 40
MP_BUDGET = 300_000          # scalar operations above which only float64 is used
SEEDS = (0, 1, 2)

Array = np.ndarray[Any, Any]


class _Lost(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Inputs:
    q: dict[int, Array]      # per group: (q_rows, h_q, d)
    k: dict[int, Array]      # per group: (kv_rows, h_kv, d)
    v: dict[int, Array]


@dataclass(frozen=True, slots=True)
class Backend:
    name: str
    exp: Callable[[Array], Array]
    log: Callable[[Array], Array]
    lift: Callable[[Array], Array]

    def const(self, x: float) -> Any:
        return mpmath.mpf(x) if self.name != "float64" else x


def _vec(f: Callable[[Any], Any]) -> Callable[[Array], Array]:
    v = np.vectorize(f, otypes=[object])
    return lambda a: v(a)


FLOAT64 = Backend("float64", np.exp, np.log, lambda a: np.asarray(a, dtype=np.float64))
MPMATH = Backend(f"{MP_DIGITS}-digit", _vec(mpmath.exp), _vec(mpmath.log),
                 lambda a: np.vectorize(mpmath.mpf, otypes=[object])(np.asarray(a, np.float64)))


def make_inputs(problem: Problem, seed: int) -> Inputs:
    """N(0,1) inputs rounded to f16 (so the simulator can be fed the same numbers)."""
    q, k, v = {}, {}, {}
    for g in problem.groups:
        rng = np.random.default_rng([seed, g.index, 7])
        rows_q, rows_kv = problem.q_rows(g.index), problem.kv_rows(g.index)
        q[g.index] = rng.standard_normal((rows_q, problem.h_q, problem.d_head)).astype(
            np.float16).astype(np.float64)
        k[g.index] = rng.standard_normal((max(rows_kv, 1), problem.h_kv, problem.d_head)
                                         ).astype(np.float16).astype(np.float64)
        v[g.index] = rng.standard_normal((max(rows_kv, 1), problem.h_kv, problem.d_head)
                                         ).astype(np.float16).astype(np.float64)
    return Inputs(q, k, v)


def reference(problem: Problem, inputs: Inputs, group: int, be: Backend) -> Array:
    """Attention of group `group`: (q_rows, h_q, d)."""
    q, k, v = (be.lift(x[group]) for x in (inputs.q, inputs.k, inputs.v))
    n = problem.kv_rows(group)
    k, v = k[:n], v[:n]
    out = np.empty(q.shape, dtype=q.dtype)
    scale = be.const(problem.scale)
    for h in range(problem.h_q):
        g = h // problem.gqa
        s = (q[:, h, :] @ k[:, g, :].T) * scale
        m = s.max(axis=-1, keepdims=True)
        p = be.exp(s - m)
        out[:, h, :] = (p @ v[:, g, :]) / p.sum(axis=-1, keepdims=True)
    return out


class NumericEval(Dataflow[Array | None]):
    """Values of every rank on concrete inputs; None for a value that never arrives."""

    def __init__(self, schedule: Schedule, table: ChannelTable, problem: Problem,
                 inputs: Inputs, be: Backend) -> None:
        super().__init__(schedule, table)
        self.problem = problem
        self.inputs = inputs
        self.be = be
        self.constant: set[Key] = set()

    def cycle(self, key: Key) -> Array | None:
        return None

    def _buffer(self, rank: int, ptr: str) -> Array | None:
        p = self.problem
        g = p.group_of[rank]
        if ptr == "q_ptr" and p.q_base(rank) is not None:
            b = p.q_base(rank) or 0
            return self.be.lift(self.inputs.q[g][b:b + p.S_q]).reshape(-1)
        base = p.kv_base(rank)
        if ptr in (p.k_ptr, p.v_ptr) and base is not None:
            src = self.inputs.k[g] if ptr == p.k_ptr else self.inputs.v[g]
            return self.be.lift(src[base:base + p.S_kv_per_rank]).reshape(-1)
        return None

    def _load(self, rank: int, op: Op) -> Array | None:
        n = math.prod(op.shape)
        lo = op.offset
        dtype = np.float64 if self.be is FLOAT64 else object
        region = np.zeros(n, dtype=dtype)
        filled = np.zeros(n, dtype=bool)
        buf = self._buffer(rank, op.ptr or "")
        if buf is not None and lo < buf.size:
            m = min(n, buf.size - lo)
            region[:m] = buf[lo:lo + m]
            filled[:m] = True
        source = self.rank_memory(rank).loads.get(op.index)
        for w in source.writers if source else ():
            val = self.values.get((rank, w.value_args[0]))
            if val is None:
                return None
            flat = np.asarray(val).reshape(-1)
            a, b = max(lo, w.offset), min(lo + n, w.offset + flat.size)
            region[a - lo:b - lo] = flat[a - w.offset:b - w.offset]
            filled[a - lo:b - lo] = True
        if not filled.all():
            return None
        return region.reshape(op.shape)

    def evaluate(self, key: Key) -> Array | None:
        rank = key[0]
        op = self.defining[key]
        try:
            out = self._op(rank, op)
        except _Lost:
            return None
        except (FloatingPointError, ZeroDivisionError):
            # 0/0 on real inputs: the value is undefined, which is a witness by itself
            out = np.full(op.shape, self.be.const(float("nan")),
                          dtype=np.float64 if self.be is FLOAT64 else object)
        if out is not None and all((rank, a.id) in self.constant for a in op.args
                                   if isinstance(a, ValueRef)) and \
                op.kind not in (OpKind.LOAD, OpKind.RECV):
            self.constant.add(key)
            out = self._machine(out, op)
        return out

    def _machine(self, x: Array, op: Op) -> Array:
        held = np.vectorize(lambda v: machine_value(float(v), op.dtype), otypes=[np.float64])(x)
        return self.be.lift(held)

    def _arg(self, rank: int, a: ValueRef | Const, op: Op) -> Any:
        if isinstance(a, Const):
            return self.be.const(machine_value(a.value, DType.F32))
        v = self.values.get((rank, a.id))
        if v is None:
            raise _Lost
        return v

    def _op(self, rank: int, op: Op) -> Array | None:  # noqa: C901 - one case per op kind
        k = op.kind
        be = self.be
        if k is OpKind.RECV:
            src = self.recv_source(rank, op)
            if isinstance(src, str):
                return None
            if src in self.constant:
                self.constant.add((rank, op.out or 0))
            sent = self.values.get(src)
            if sent is None or sent.shape == op.shape:
                return sent
            if sent.size != math.prod(op.shape):
                return None
            return np.asarray(sent).reshape(op.shape)
        if k is OpKind.LOAD:
            return self._load(rank, op)
        if k is OpKind.FULL:
            return be.lift(np.full(op.shape, machine_value(op.fill or 0.0, op.dtype)))
        x = [self._arg(rank, a, op) for a in op.args]
        if k in (OpKind.CAST, OpKind.STORE, OpKind.SEND):
            return np.asarray(x[0])
        if k is OpKind.RESHAPE:
            return np.asarray(x[0]).reshape(op.shape)
        if k is OpKind.TRANS:
            return np.transpose(x[0], op.perm)
        if k is OpKind.NEG:
            return -np.asarray(x[0])
        if k is OpKind.EXP:
            return np.asarray(be.exp(np.asarray(x[0])))
        if k is OpKind.EXP2:
            return np.asarray(be.exp(np.asarray(x[0]) * be.const(math.log(2.0))))
        if k is OpKind.LOG:
            return np.asarray(be.log(np.asarray(x[0])))
        if k is OpKind.MAX:
            return np.asarray(np.max(x[0], axis=op.axis, keepdims=op.keepdims))
        if k is OpKind.SUM:
            return np.asarray(np.sum(x[0], axis=op.axis, keepdims=op.keepdims))
        if k is OpKind.SOFTMAX:
            e = be.exp(x[0] - np.max(x[0], axis=op.axis, keepdims=True))
            return np.asarray(e / np.sum(e, axis=op.axis, keepdims=True))
        if k is OpKind.DOT:
            return np.asarray(np.matmul(x[0], x[1]))
        ops = {OpKind.ADD: np.add, OpKind.SUB: np.subtract, OpKind.MUL: np.multiply,
               OpKind.DIV: np.divide, OpKind.MAXIMUM: np.maximum, OpKind.MINIMUM: np.minimum}
        return np.asarray(ops[k](x[0], x[1]))


@dataclass(frozen=True, slots=True)
class Witness:
    seed: int
    precision: str
    rel_err: float
    rank: int
    store: Op
    element: tuple[int, int, int]     # (query row, q head, feature)
    got: float
    want: float

    def describe(self, endpoint_text: str) -> str:
        t, h, e = self.element
        return (f"on seeded N(0,1) inputs (seed {self.seed}, evaluated in {self.precision}) "
                f"the output at {self.store.source} on rank {endpoint_text} differs from "
                f"attention by {self.rel_err:.3g} (relative): O[{t}, {h}, {e}] is "
                f"{self.got:.6g}, attention gives {self.want:.6g}")


def _compare(schedule: Schedule, problem: Problem, ev: NumericEval, rank: int, store: Op,
             seed: int, live: tuple[int, int] | None = None) -> Witness | None:
    arg = store.args[0]
    assert isinstance(arg, ValueRef)
    got = ev.result(rank, arg.id)
    g = problem.group_of[rank]
    base = problem.q_base(rank)
    if base is None:
        return None
    ref = reference(problem, ev.inputs, g, ev.be)[base:base + problem.S_q].reshape(-1)
    n = math.prod(store.shape)
    if got is None or store.offset + n > ref.size:
        return None
    want = np.asarray(ref[store.offset:store.offset + n], dtype=float)
    values = np.asarray(got, dtype=float).reshape(-1)
    lo, hi = (0, n) if live is None else (live[0] - store.offset, live[1] - store.offset)
    values, want = values[lo:hi], want[lo:hi]   # only what a later store did not rewrite
    diff = np.abs(values - want)
    scale = float(np.max(np.abs(want))) if want.size else 1.0
    scale = scale or 1.0
    if not np.all(np.isfinite(diff)):
        worst = int(np.argmin(np.isfinite(diff)))
        rel = math.inf
    else:
        worst = int(np.argmax(diff))
        rel = float(diff[worst]) / scale
    if rel <= WITNESS_RTOL:
        return None
    flat = store.offset + lo + worst
    t, rest = divmod(flat, problem.h_q * problem.d_head)
    h, e = divmod(rest, problem.d_head)
    return Witness(seed, ev.be.name, rel, rank, store, (base + t, h, e),
                   float(values[worst]), float(want[worst]))


def _work(schedule: Schedule) -> int:
    total = 0
    for prog in schedule.programs:
        for op in prog.ops:
            total += math.prod(op.shape) * (op.shape[-1] if op.kind is OpKind.DOT and op.shape
                                            else 1)
    return total


def find_witness(schedule: Schedule, table: ChannelTable, problem: Problem,
                 stores: list[tuple[int, Op, tuple[int, int] | None]]) -> Witness | None:
    """The first store (in the given order) that differs from attention on some seed,
    judged on the elements it still holds at the end (`live`, None: all of them)."""
    for seed in SEEDS:
        ev = NumericEval(schedule, table, problem, make_inputs(problem, seed), FLOAT64)
        with np.errstate(all="ignore"):
            for rank, store, live in stores:
                w = _compare(schedule, problem, ev, rank, store, seed, live)
                if w is None:
                    continue
                if _work(schedule) <= MP_BUDGET:
                    with mpmath.workdps(MP_DIGITS):
                        mp = NumericEval(schedule, table, problem, ev.inputs, MPMATH)
                        confirmed = _compare(schedule, problem, mp, rank, store, seed, live)
                    if confirmed is None:
                        continue
                    return confirmed
                return w
    return None
