"""The sparse 40-digit domain of a targeted witness (sparse_cone.py): each value holds its
needed elements only, as (sorted flat indices, mpmath numbers), inputs read by element.

Semantics as numeric.py (exact arithmetic approximated in 40 digits; casts are
identities; a value that depends on no input is what the machine holds in its dtype).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from meshproof.model.channel_table import ChannelTable
from meshproof.model.dependencies import Dependencies
from meshproof.model.evaluate import Evaluation
from meshproof.model.op_semantics import Binary, Compare, Lost, Reduction, Reload, Unary
from meshproof.model.problem import Problem
from meshproof.model.schedule import DType, Op, Schedule, ValueRef
from meshproof.verify.semantics.crossings import WrongPair
from meshproof.verify.semantics.numeric import mpmath_backend
from meshproof.verify.semantics.scalars import machine_value
from meshproof.verify.semantics.sparse_cone import (
    MP_DIGITS,
    Index,
    Reader,
    SparseTooLarge,
    _along,
    _dot_operands,
    _unravel,
    one_hot_reader,
    pair_element,
    reference_one_hot,
    sparse_needs,
    to_operand,
)
from meshproof.verify.semantics.witness import CONE_BUDGET, WITNESS_RTOL, Witness


def _mp() -> Any:
    import mpmath

    return mpmath


@dataclass(frozen=True, slots=True)
class Sparse:
    shape: tuple[int, ...]
    idx: Index                      # sorted flat indices held
    vals: np.ndarray[Any, Any]      # object array of mpf, aligned with idx
    constant: bool = False

    def at(self, want: Index) -> np.ndarray[Any, Any]:
        pos = np.searchsorted(self.idx, want)
        if len(want) and (pos.max(initial=0) >= len(self.idx) or
                          not np.array_equal(self.idx[np.minimum(pos, len(self.idx) - 1)],
                                             want)):
            raise KeyError("an element outside the cone was read")
        return self.vals[pos] if len(want) else np.zeros(0, dtype=object)


S = Sparse | None


class SparseDomain:
    """An OpSemantics over Sparse values, for the needs of one output element."""

    def __init__(self, problem: Problem, read: Reader, needs: dict[tuple[int, int], Index]
                 ) -> None:
        self.problem = problem
        self.read = read
        self.needs = needs
        mp = _mp()
        self._fns: dict[Unary, Callable[[Any], Any]] = {
            Unary.EXP: mp.exp, Unary.EXP2: lambda x: mp.power(2, x), Unary.LOG: mp.log,
            Unary.LOG2: lambda x: mp.log(x, 2), Unary.LOG1P: mp.log1p,
            Unary.SIGMOID: lambda x: 1 / (1 + mp.exp(-x)), Unary.NEG: lambda x: -x}

    def _need(self, rank: int, op: Op) -> Index:
        got = self.needs.get((rank, op.out)) if op.out is not None else None
        return got if got is not None else np.zeros(0, dtype=np.int64)

    def _make(self, op: Op, idx: Index, vals: list[Any] | np.ndarray[Any, Any],
              constant: bool) -> Sparse:
        arr = np.empty(len(idx), dtype=object)
        for i, v in enumerate(vals):
            arr[i] = _mp().mpf(machine_value(float(v), op.dtype)) if constant else v
        return Sparse(op.shape, idx, arr, constant)

    # --- sources -------------------------------------------------------------------------
    def const(self, rank: int, op: Op, value: float) -> S:
        v = _mp().mpf(machine_value(value, DType.F32))
        return Sparse((), np.zeros(1, dtype=np.int64), np.array([v], dtype=object), True)

    def cycle(self, rank: int, op: Op) -> S:
        return None

    def full(self, rank: int, op: Op) -> S:
        idx = self._need(rank, op)
        v = machine_value(op.fill if op.fill is not None else 0.0, op.dtype)
        return self._make(op, idx, [v] * len(idx), True)

    def arange(self, rank: int, op: Op) -> S:
        idx = self._need(rank, op)
        lo = int(op.fill or 0.0)
        return self._make(op, idx, [lo + int(i) for i in idx], True)

    def load(self, rank: int, op: Op, reload: Reload[S] | None) -> S:
        idx = self._need(rank, op)
        vals = np.empty(len(idx), dtype=object)
        filled = np.zeros(len(idx), dtype=bool)
        flat = idx + op.offset
        src = self._harness(rank, op.ptr or "", flat)
        if src is not None:
            ok, got = src
            for i in np.flatnonzero(ok):
                vals[i] = _mp().mpf(float(got[i]))
            filled |= ok
        for store, val in reload.stores if reload is not None else ():
            if val is None:
                return None
            inside = (flat >= store.offset) & (flat < store.offset + math.prod(val.shape))
            if inside.any():
                vals[inside] = val.at(flat[inside] - store.offset)
                filled |= inside
        if not filled.all():
            return None
        return Sparse(op.shape, idx, vals)

    def _harness(self, rank: int, ptr: str, flat: Index
                 ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]] | None:
        p = self.problem
        g = p.group_of[rank]
        if ptr == "q_ptr" and p.q_base(rank) is not None:
            base, rows, heads, tensor = p.q_base(rank) or 0, p.S_q, p.h_q, "q"
        elif ptr in (p.k_ptr, p.v_ptr) and p.kv_base(rank) is not None:
            base, rows, heads = p.kv_base(rank) or 0, p.S_kv_per_rank, p.h_kv
            tensor = "k" if ptr == p.k_ptr else "v"
        else:
            return None
        ok = flat < rows * heads * p.d_head
        r, h, f = np.unravel_index(np.where(ok, flat, 0), (rows, heads, p.d_head))
        return ok, self.read(tensor, g, r + base, h, f)

    # --- views ---------------------------------------------------------------------------
    def recv(self, rank: int, op: Op, sent: S | Lost) -> S:
        if sent is None or isinstance(sent, Lost):
            return None
        idx = self._need(rank, op)
        return Sparse(op.shape, idx, sent.at(idx), sent.constant)

    def cast(self, rank: int, op: Op, x: S) -> S:
        if x is None:
            return None
        idx = self._need(rank, op)
        return self._make(op, idx, x.at(idx), x.constant)

    def reshape(self, rank: int, op: Op, x: S) -> S:
        if x is None:
            return None
        idx = self._need(rank, op)
        return Sparse(op.shape, idx, x.at(idx), x.constant)

    def view_slice(self, rank: int, op: Op, x: S) -> S:
        if x is None:
            return None
        idx = self._need(rank, op)
        return Sparse(op.shape, idx, x.at(idx + op.offset), x.constant)

    def trans(self, rank: int, op: Op, x: S) -> S:
        if x is None:
            return None
        assert op.perm is not None
        idx = self._need(rank, op)
        coords = _unravel(idx, op.shape)
        xc: list[Index] = [np.zeros(0)] * len(coords)
        for i, p in enumerate(op.perm):
            xc[p] = coords[i]
        src = np.asarray(np.ravel_multi_index(tuple(xc), x.shape), dtype=np.int64) \
            if x.shape else np.zeros(len(idx), dtype=np.int64)
        return Sparse(op.shape, idx, x.at(src), x.constant)

    # --- arithmetic ----------------------------------------------------------------------
    def _elementwise(self, rank: int, op: Op, args: list[S], f: Callable[..., Any]) -> S:
        if any(a is None for a in args):
            return None
        idx = self._need(rank, op)
        cols = [a.at(to_operand(idx, op.shape, a.shape)) for a in args if a is not None]
        out = []
        for vals in zip(*cols, strict=True):
            try:
                out.append(f(*vals))
            except (ZeroDivisionError, ValueError):
                out.append(_mp().mpf("nan"))
        return self._make(op, idx, out, all(a is not None and a.constant for a in args))

    def unary(self, rank: int, op: Op, fn: Unary, x: S) -> S:
        return self._elementwise(rank, op, [x], self._fns[fn])

    def binary(self, rank: int, op: Op, fn: Binary, a: S, b: S) -> S:
        f: dict[Binary, Callable[[Any, Any], Any]] = {
            Binary.ADD: lambda x, y: x + y, Binary.SUB: lambda x, y: x - y,
            Binary.MUL: lambda x, y: x * y, Binary.DIV: lambda x, y: x / y,
            Binary.MAXIMUM: max, Binary.MINIMUM: min}
        return self._elementwise(rank, op, [a, b], f[fn])

    def compare(self, rank: int, op: Op, fn: Compare, a: S, b: S) -> S:
        f: dict[Compare, Callable[[Any, Any], Any]] = {
            Compare.LT: lambda x, y: x < y, Compare.LE: lambda x, y: x <= y,
            Compare.GT: lambda x, y: x > y, Compare.GE: lambda x, y: x >= y,
            Compare.EQ: lambda x, y: x == y, Compare.NE: lambda x, y: x != y}
        return self._elementwise(rank, op, [a, b], lambda x, y: 1.0 if f[fn](x, y) else 0.0)

    def where(self, rank: int, op: Op, cond: S, a: S, b: S) -> S:
        return self._elementwise(rank, op, [cond, a, b], lambda c, x, y: x if c != 0 else y)

    def reduce(self, rank: int, op: Op, fn: Reduction, x: S) -> S:
        if x is None:
            return None
        assert op.axis is not None
        idx = self._need(rank, op)
        rows = _along(idx, op.shape, x.shape, op.axis, op.keepdims)
        out = [max(x.at(r)) if fn is Reduction.MAX else _mp().fsum(x.at(r)) for r in rows]
        return self._make(op, idx, out, x.constant)

    def dot(self, rank: int, op: Op, a: S, b: S) -> S:
        if a is None or b is None:
            return None
        idx = self._need(rank, op)
        ia, ib = _dot_operands(idx, op.shape, a.shape, b.shape)
        out = [_mp().fdot(list(a.at(ra)), list(b.at(rb))) for ra, rb in zip(ia, ib,
                                                                            strict=True)]
        return self._make(op, idx, out, a.constant and b.constant)


def targeted_value(schedule: Schedule, table: ChannelTable, problem: Problem, rank: int,
                   vid: int, element: int, read: Reader, budget: int) -> float | None:
    """One element of a stored value in 40-digit arithmetic over its sparse cone (None:
    it never arrives); raises SparseTooLarge past `budget` scalar operations."""
    deps = Dependencies(schedule, table)
    shape_only: Evaluation[Any] = Evaluation(schedule, table, None, deps)  # type: ignore[arg-type]
    needs = sparse_needs(shape_only, rank, vid, element, budget)
    with _mp().workdps(MP_DIGITS):
        ev: Evaluation[Any] = Evaluation(schedule, table, SparseDomain(problem, read, needs),
                                         deps)
        val = ev.value(rank, vid)
        if val is None:
            return None
        got = val.at(np.array([element], dtype=np.int64))[0]
    return float(got)


PAIRS_TRIED = 8
FULL_PASS_LIMIT = 1 << 22     # elements of the largest value for the float64 search


def pair_witness(schedule: Schedule, table: ChannelTable, problem: Problem,
                 pairs: list[tuple[int, Op, tuple[int, int] | None, WrongPair]],
                 budget: int = CONE_BUDGET) -> Witness | None:
    """The first wrong pair (by query position, then key) shown on Q = 0, K = 0 and V = 1
    on its key row, its output element evaluated in 40-digit arithmetic over its sparse
    cone and compared with the masked reference."""
    order = sorted(pairs, key=lambda p: (p[3].query, p[3].key, p[0]))
    for rank, store, live, w in order[:PAIRS_TRIED]:
        placed = pair_element(problem, rank, store, live, w.query_row)
        arg = store.args[0] if store.args else None
        if placed is None or not isinstance(arg, ValueRef):
            continue
        element, coords = placed
        try:
            got = targeted_value(schedule, table, problem, rank, arg.id, element,
                                 one_hot_reader(w.key_row), budget)
        except SparseTooLarge:
            continue
        if got is None:
            continue
        with _mp().workdps(MP_DIGITS):
            want = reference_one_hot(problem, problem.group_of[rank], w.query_row,
                                     w.key_row)
            rel = float(abs(_mp().mpf(got) - want)) if math.isfinite(got) else math.inf
        if rel > WITNESS_RTOL:
            what = "position" if problem.mask is not None else "row"
            text = (f"Q = 0 and K = 0 (every score equal) and V = 1 on key row {w.key_row} "
                    f"(key {what} {w.key}), 0 elsewhere (query {what} {w.query}'s cone only")
            return Witness(text, None, mpmath_backend().name, rel, rank, store, coords, got,
                           float(want))
    return None


def small_schedule(schedule: Schedule) -> bool:
    """Whether the float64 witness search (every value of the schedule) fits memory."""
    return all(math.prod(op.shape) <= FULL_PASS_LIMIT for prog in schedule.programs
               for op in prog.ops)


__all__ = ["Sparse", "SparseDomain", "pair_witness", "small_schedule", "targeted_value"]
