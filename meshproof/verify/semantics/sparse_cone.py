"""Targeted witnesses: one output element in 40-digit arithmetic over sparse index sets.

For a (query, key) pair a masked output counts wrong (crossings.py), the input is Q = 0
(every score 0, every rescale 1), K = 0 and V = 1 on the key's row (0 elsewhere): the
output at that query is then the share of V the kernel merges, against the masked
reference's 1/|A(p)| for an allowed key and 0 for a hidden one. Only that output element's
cone is evaluated: the elements every value must provide are propagated back from it as
sorted flat index sets (one query row of every score tile, the K and V rows it reads), and
each value holds only those, in mpmath. No float64 pass over the schedule and no array of
a whole tile: memory follows the cone, which a work budget bounds, whatever the tile size.
Inputs are read element by element, never materialised.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from meshproof.model.evaluate import Evaluation
from meshproof.model.op_semantics import Key, Lost
from meshproof.model.problem import Problem
from meshproof.model.schedule import Const, Op, OpKind, ValueRef
from meshproof.verify.semantics.cone import cone_order

Index = np.ndarray[Any, Any]
MP_DIGITS = 40
# (tensor "q"/"k"/"v", group, rows, heads, features) -> float64 values
Reader = Callable[[str, int, Index, Index, Index], np.ndarray[Any, Any]]


class SparseTooLarge(Exception):
    """The element's cone needs more scalar work than the budget allows."""


def _mp() -> Any:
    import mpmath

    return mpmath


def _unravel(idx: Index, shape: tuple[int, ...]) -> list[Index]:
    return list(np.unravel_index(idx, shape)) if shape else []


def _ravel(coords: list[Index], shape: tuple[int, ...], n: int) -> Index:
    if not shape:
        return np.zeros(n, dtype=np.int64)
    return np.asarray(np.ravel_multi_index(tuple(coords), shape), dtype=np.int64)


def to_operand(idx: Index, out: tuple[int, ...], arg: tuple[int, ...]) -> Index:
    """Flat indices of a broadcast operand of shape `arg` read at the result's `idx`."""
    coords = _unravel(idx, out)
    pad = len(out) - len(arg)
    zero = np.zeros(len(idx), dtype=np.int64)
    return _ravel([coords[pad + i] if n != 1 else zero for i, n in enumerate(arg)], arg,
                  len(idx))


def _along(idx: Index, out: tuple[int, ...], arg: tuple[int, ...], axis: int,
           keepdims: bool) -> Index:
    """(len(idx), n): the operand's flat indices along `axis` of each result index."""
    coords = _unravel(idx, out)
    if not keepdims:
        coords.insert(axis % len(arg), np.zeros(len(idx), dtype=np.int64))
    ax = axis % len(arg)
    n = arg[ax]
    rows = []
    for v in range(n):
        c = list(coords)
        c[ax] = np.full(len(idx), v, dtype=np.int64)
        rows.append(_ravel(c, arg, len(idx)))
    return np.stack(rows, axis=1) if rows else np.zeros((len(idx), 0), dtype=np.int64)


def _dot_operands(idx: Index, out: tuple[int, ...], a: tuple[int, ...], b: tuple[int, ...]
                  ) -> tuple[Index, Index]:
    """(len(idx), k) flat indices of a's row and b's column for each result index."""
    coords = _unravel(idx, out)
    batch, i, j = coords[:-2], coords[-2], coords[-1]
    k = a[-1]
    zero = np.zeros(len(idx), dtype=np.int64)

    def side(shape: tuple[int, ...], row: Index | None, col: Index | None) -> Index:
        pad = len(batch) - (len(shape) - 2)
        bc = [batch[pad + d] if n != 1 else zero for d, n in enumerate(shape[:-2])]
        out_rows = []
        for f in range(k):
            fv = np.full(len(idx), f, dtype=np.int64)
            tail: list[Index] = [row, fv] if row is not None else \
                [fv, col if col is not None else fv]
            out_rows.append(_ravel([*bc, *tail], shape, len(idx)))
        return np.stack(out_rows, axis=1) if out_rows else np.zeros((len(idx), 0), np.int64)
    return side(a, i, None), side(b, None, j)


def _arg_needs(ev: Evaluation[Any], key: Key, op: Op, idx: Index,
               shapes: dict[Key, tuple[int, ...]]) -> list[tuple[Key, Index]]:
    rank = key[0]
    k = op.kind
    if k is OpKind.RECV:
        src = ev.recv_source(rank, op)
        return [] if isinstance(src, Lost) else [(src, idx)]
    if k is OpKind.LOAD:
        source = ev.rank_memory(rank).loads.get(op.index)
        out = []
        for w in source.writers if source else ():
            dep = (rank, w.value_args[0])
            flat = idx + op.offset - w.offset
            keep = (flat >= 0) & (flat < math.prod(shapes[dep]))
            out.append((dep, flat[keep]))
        return out
    refs = [(i, a) for i, a in enumerate(op.args) if isinstance(a, ValueRef)]
    arg = [(1,) if isinstance(a, Const) else shapes[(rank, a.id)] for a in op.args]
    if k in (OpKind.RESHAPE, OpKind.CAST):
        return [((rank, refs[0][1].id), idx)]
    if k is OpKind.VIEW:   # flat element i of the view is x's flat element offset + i
        return [((rank, refs[0][1].id), idx + op.offset)]
    if k is OpKind.TRANS:
        assert op.perm is not None
        coords = _unravel(idx, op.shape)
        xc: list[Index] = [np.zeros(0)] * len(coords)
        for i, p in enumerate(op.perm):
            xc[p] = coords[i]
        return [((rank, refs[0][1].id), _ravel(xc, arg[0], len(idx)))]
    if k in (OpKind.MAX, OpKind.SUM):
        assert op.axis is not None
        keepdims = bool(op.keepdims)
        return [((rank, refs[0][1].id),
                 _along(idx, op.shape, arg[0], op.axis, keepdims).ravel())]
    if k is OpKind.DOT:
        ia, ib = _dot_operands(idx, op.shape, arg[0], arg[1])
        return [((rank, op.args[0].id), ia.ravel()),  # type: ignore[union-attr]
                ((rank, op.args[1].id), ib.ravel())]  # type: ignore[union-attr]
    return [((rank, a.id), to_operand(idx, op.shape, arg[i])) for i, a in refs]


def sparse_needs(ev: Evaluation[Any], rank: int, vid: int, element: int,
                 budget: int) -> dict[Key, Index]:
    """Per value of the cone, the sorted flat indices one output element needs."""
    order, shapes = cone_order(ev, rank, vid)
    parts: dict[Key, list[Index]] = {(rank, vid): [np.array([element], dtype=np.int64)]}
    needs: dict[Key, Index] = {}
    work = 0
    for key in reversed(order):        # every consumer before the values it reads
        got = parts.pop(key, None)
        if not got:
            continue
        idx = np.unique(np.concatenate(got))
        needs[key] = idx
        op = ev.defining[key[0]][key[1]]
        a0 = op.args[0] if op.args else None
        inner = shapes[(key[0], a0.id)][-1] if op.kind is OpKind.DOT and \
            isinstance(a0, ValueRef) else 1      # a dot's contraction length
        work += len(idx) * inner
        if work > budget:
            raise SparseTooLarge(f"the element's cone needs over {budget} scalar operations")
        for dep, m in _arg_needs(ev, key, op, idx, shapes):
            parts.setdefault(dep, []).append(m)
    return needs


def pair_element(problem: Problem, rank: int, store: Op, live: tuple[int, int] | None,
                 query_row: int) -> tuple[int, tuple[int, int, int]] | None:
    """The first element of `store` (still held) at the group's query row: its index in
    the stored value and its (query row, q head, feature)."""
    base = problem.q_base(rank)
    if base is None:
        return None
    n = math.prod(store.shape)
    lo, hi = (store.offset, store.offset + n) if live is None else live
    for h in range(problem.h_q):
        for e in range(problem.d_head):
            flat = ((query_row - base) * problem.h_q + h) * problem.d_head + e
            if lo <= flat < hi:
                return flat - store.offset, (query_row, h, e)
    return None


def one_hot_reader(key_row: int) -> Reader:
    """Q = 0, K = 0 and V = 1 on one key row (0 elsewhere), read element by element."""
    def read(tensor: str, group: int, rows: Index, heads: Index, feats: Index
             ) -> np.ndarray[Any, Any]:
        if tensor != "v":
            return np.zeros(len(rows))
        return np.asarray(rows == key_row, dtype=np.float64)
    return read


def reference_one_hot(problem: Problem, group: int, query_row: int, key_row: int) -> Any:
    """The masked reference at a query row under Q = 0 and V one-hot: every score 0, so
    the output is the share of the allowed keys that row b is (0 if hidden or none)."""
    n = problem.kv_rows(group)
    if problem.mask is None:
        allowed = np.ones(n, dtype=bool)
    else:
        queries, keys = problem.positions(group)
        allowed = problem.mask.allowed(queries[query_row:query_row + 1], keys[:n])[0]
    count = int(allowed.sum())
    if not count or not 0 <= key_row < n or not allowed[key_row]:
        return _mp().mpf(0)
    return _mp().mpf(1) / count
