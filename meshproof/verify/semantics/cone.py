"""The element cone of one output element, and its evaluation in 40-digit arithmetic.

A witness found in float64 is re-checked in high precision at every launch size by
evaluating only what the witnessed element depends on: masks of the needed elements of
every value are propagated backwards from the element (through elementwise ops with
broadcasting, reductions, dots, views, messages and reloads), then the masked domain
computes just those elements with mpmath. An output element of a 64x64 all-reduce needs one
query row of every rank's partial, not every rank's whole tensors.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from meshproof.model.evaluate import Evaluation
from meshproof.model.op_semantics import Binary, Key, Lost, Reduction, Unary
from meshproof.model.schedule import Const, Op, OpKind, ValueRef
from meshproof.verify.semantics.numeric import Num, Numeric, mpmath_backend

Mask = np.ndarray[Any, Any]


def _mp() -> Any:  # mpmath ships no types
    """mpmath, imported when 40-digit arithmetic is first needed."""
    import mpmath

    return mpmath


class ConeTooLarge(Exception):
    """The element's cone needs more scalar work than the budget allows."""


def _reduce_to(mask: Mask, shape: tuple[int, ...]) -> Mask:
    """A mask over a broadcast result folded onto one operand's shape (any over the axes
    the operand was broadcast along)."""
    nd = mask.ndim
    full = (1,) * (nd - len(shape)) + tuple(shape)
    axes = tuple(i for i, (m, s) in enumerate(zip(mask.shape, full, strict=True))
                 if s == 1 and m != 1)
    out = np.asarray(mask.any(axis=axes, keepdims=True)) if axes else mask
    return out.reshape(shape) if out.shape != shape else out


def _arg_masks(op: Op, out: Mask, shapes: list[tuple[int, ...]]) -> list[Mask]:
    """The needed elements of each operand for the needed elements `out` of op."""
    k = op.kind
    if k in (OpKind.RESHAPE, OpKind.RECV):
        return [out.reshape(shapes[0])]
    if k is OpKind.VIEW:   # the selected run of x's flat elements
        need = np.zeros(math.prod(shapes[0]), dtype=bool)
        need[op.offset:op.offset + out.size] = out.reshape(-1)
        return [need.reshape(shapes[0])]
    if k is OpKind.TRANS:
        assert op.perm is not None
        return [out.transpose(np.argsort(op.perm))]
    if k in (OpKind.MAX, OpKind.SUM):
        assert op.axis is not None
        m = out if op.keepdims else np.expand_dims(out, op.axis)
        m = np.asarray(m.any(axis=op.axis, keepdims=True))
        return [np.broadcast_to(m, shapes[0]).copy()]
    if k is OpKind.DOT:
        a_shape, b_shape = shapes
        rows = out.any(axis=-1, keepdims=True)          # (..., i, 1)
        cols = out.any(axis=-2, keepdims=True)          # (..., 1, j)
        a = np.broadcast_to(rows, (*out.shape[:-1], a_shape[-1]))
        b = np.broadcast_to(cols, (*out.shape[:-2], b_shape[-2], out.shape[-1]))
        return [_reduce_to(a, a_shape), _reduce_to(b, b_shape)]
    return [_reduce_to(out, s) for s in shapes]


def cone_order(ev: Evaluation[Any], rank: int, vid: int
               ) -> tuple[list[Key], dict[Key, tuple[int, ...]]]:
    """The cone of one value in dependency order (every value after what it reads), with
    each value's shape."""
    shapes: dict[Key, tuple[int, ...]] = {}
    order: list[Key] = []
    seen: set[Key] = set()
    stack: list[tuple[Key, bool]] = [((rank, vid), False)]
    while stack:
        key, done = stack.pop()
        if done:
            order.append(key)
            continue
        if key in seen:
            continue
        seen.add(key)
        shapes[key] = ev.defining[key[0]][key[1]].shape
        stack.append((key, True))
        stack.extend((d, False) for d in ev.deps(key) if d not in seen)
    return order, shapes


def element_cone(ev: Evaluation[Any], rank: int, vid: int, element: int,
                 budget: int) -> dict[Key, Mask]:
    """Per value of the cone, the elements one output element needs."""
    order, shapes = cone_order(ev, rank, vid)
    masks: dict[Key, Mask] = {k: np.zeros(shapes[k], dtype=bool) for k in order}
    masks[(rank, vid)].reshape(-1)[element] = True
    work = 0
    for key in reversed(order):        # every consumer before the values it reads
        op = ev.defining[key[0]][key[1]]
        need = masks[key]
        if not need.any():
            continue
        work += int(need.sum()) * (op.shape[-1] if op.kind is OpKind.DOT and op.shape else 1)
        if work > budget:
            raise ConeTooLarge(f"the element's cone needs over {budget} scalar operations")
        for dep, m in _dep_masks(ev, key, op, need, shapes):
            masks[dep] |= m
    return masks


def _dep_masks(ev: Evaluation[Any], key: Key, op: Op, need: Mask,
               shapes: dict[Key, tuple[int, ...]]) -> list[tuple[Key, Mask]]:
    rank = key[0]
    if op.kind is OpKind.RECV:
        src = ev.recv_source(rank, op)
        return [] if isinstance(src, Lost) else [(src, need.reshape(shapes[src]))]
    if op.kind is OpKind.LOAD:
        source = ev.rank_memory(rank).loads.get(op.index)
        out = []
        flat = need.reshape(-1)
        for w in source.writers if source else ():
            dep = (rank, w.value_args[0])
            m = np.zeros(math.prod(shapes[dep]), dtype=bool)
            lo, hi = max(op.offset, w.offset), min(op.offset + flat.size, w.offset + m.size)
            if lo < hi:
                m[lo - w.offset:hi - w.offset] = flat[lo - op.offset:hi - op.offset]
            out.append((dep, m.reshape(shapes[dep])))
        return out
    refs = [a for a in op.args if isinstance(a, ValueRef)]
    arg_shapes = [(1,) if isinstance(a, Const) else shapes[(rank, a.id)] for a in op.args]
    masks = _arg_masks(op, need, arg_shapes)
    return [((rank, a.id), m) for a, m in zip(op.args, masks, strict=True)
            if isinstance(a, ValueRef) and a in refs]


class Masked(Numeric):
    """The numeric domain computing only the masked elements of every value (the others
    hold a placeholder that no needed element reads)."""

    def __init__(self, base: Numeric, masks: dict[Key, Mask]) -> None:
        super().__init__(base.problem, base.inputs, base.be)
        self.masks = masks

    def _mask(self, rank: int, op: Op) -> Mask | None:
        return self.masks.get((rank, op.out)) if op.out is not None else None

    def _elementwise(self, rank: int, op: Op, args: list[Num | None], f: Any) -> Num | None:
        if any(a is None for a in args):
            return None
        mask = self._mask(rank, op)
        out = np.full(op.shape, self.be.const(0.0), dtype=object)
        if mask is None or not mask.any():
            return Num(out)
        views = [np.broadcast_to(np.asarray(a.data, dtype=object), op.shape)
                 for a in args if a is not None]
        where = np.nonzero(mask)
        try:
            out[where] = f(*(v[where] for v in views))
        except (ZeroDivisionError, ValueError):
            out[where] = _mp().mpf("nan")
        return self._out(op, out, *args)

    def unary(self, rank: int, op: Op, fn: Unary, x: Num | None) -> Num | None:
        be = self.be
        funcs = {Unary.EXP: be.exp, Unary.EXP2: be.exp2, Unary.LOG: be.log,
                 Unary.LOG2: be.log2, Unary.LOG1P: be.log1p,
                 Unary.SIGMOID: lambda a: 1 / (1 + be.exp(-a)), Unary.NEG: lambda a: -a}
        return self._elementwise(rank, op, [x], funcs[fn])

    def binary(self, rank: int, op: Op, fn: Binary, a: Num | None, b: Num | None
               ) -> Num | None:
        funcs = {Binary.ADD: lambda x, y: x + y, Binary.SUB: lambda x, y: x - y,
                 Binary.MUL: lambda x, y: x * y, Binary.DIV: lambda x, y: x / y,
                 Binary.MAXIMUM: np.vectorize(max, otypes=[object]),
                 Binary.MINIMUM: np.vectorize(min, otypes=[object])}
        return self._elementwise(rank, op, [a, b], funcs[fn])

    def reduce(self, rank: int, op: Op, fn: Reduction, x: Num | None) -> Num | None:
        if x is None:
            return None
        mask = self._mask(rank, op)
        assert op.axis is not None
        data = np.moveaxis(np.asarray(x.data, dtype=object), op.axis, -1)
        out = np.full(data.shape[:-1], self.be.const(0.0), dtype=object)
        need = np.ones(out.shape, dtype=bool) if mask is None else \
            (mask if not op.keepdims else np.squeeze(mask, axis=op.axis)).reshape(out.shape)
        for idx in zip(*np.nonzero(need), strict=True):
            row = list(data[idx])
            out[idx] = max(row) if fn is Reduction.MAX else _mp().fsum(row)
        if op.keepdims:
            out = np.expand_dims(out, op.axis)
        return self._out(op, out, x)

    def dot(self, rank: int, op: Op, a: Num | None, b: Num | None) -> Num | None:
        if a is None or b is None:
            return None
        mask = self._mask(rank, op)
        x, y = np.asarray(a.data, dtype=object), np.asarray(b.data, dtype=object)
        batch = op.shape[:-2]
        xb = np.broadcast_to(x, (*batch, *x.shape[-2:]))
        yb = np.broadcast_to(y, (*batch, *y.shape[-2:]))
        out = np.full(op.shape, self.be.const(0.0), dtype=object)
        need = np.ones(op.shape, dtype=bool) if mask is None else mask
        for idx in zip(*np.nonzero(need), strict=True):
            *bi, i, j = idx
            out[idx] = _mp().fdot(list(xb[(*bi, i)]), list(yb[(*bi, slice(None), j)]))
        return self._out(op, out, a, b)


def high_precision(ev: Evaluation[Num | None], rank: int, vid: int, element: int,
                   budget: int) -> float | None:
    """The element in 40-digit arithmetic, evaluating only its cone (None: it never
    arrives); raises ConeTooLarge past `budget` scalar operations."""
    domain = ev.domain
    assert isinstance(domain, Numeric)
    masks = element_cone(ev, rank, vid, element, budget)
    with _mp().workdps(40):
        mp = Numeric(domain.problem, domain.inputs, mpmath_backend())
        cone: Evaluation[Num | None] = Evaluation(ev.schedule, ev.table, Masked(mp, masks))
        val = cone.value(rank, vid)
    if val is None:
        return None
    return float(np.asarray(val.data, dtype=object).reshape(-1)[element])


__all__ = ["ConeTooLarge", "Masked", "element_cone", "high_precision"]
