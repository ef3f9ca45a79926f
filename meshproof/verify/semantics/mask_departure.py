"""Which op decides a wrong (query, key) pair of a masked output (spec/semantics.md §8).

For the first pair an output counts wrong (crossings.py), the output's cone is searched
for the score tiles that hold the pair: a `tl.where` whose scores (q·kᵀ at query row t and
key row j, affine in the tile's digits) contain (query row, key row) is evaluated there --
its guard keeps the key or hides it -- and named with the comparison its condition comes
from; if no `tl.where` holds the pair, the dot whose unmasked scores hold it is named (the
host classified the block wrong: a fully allowed block that should be masked).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from meshproof.model.evaluate import Evaluation
from meshproof.model.problem import Problem
from meshproof.model.schedule import COMPARISONS, Op, OpKind, ValueRef
from meshproof.verify.semantics.crossings import WrongPair
from meshproof.verify.semantics.events import Departure, Event
from meshproof.verify.semantics.guards import Pen
from meshproof.verify.semantics.index import Aff, Layout
from meshproof.verify.semantics.layouts import Value
from meshproof.verify.semantics.symbolic_core import Opaque
from meshproof.verify.semantics.tensor_atoms import Score

Lookup = Callable[[int, int], Value | Opaque]


def _solve(targets: list[tuple[Aff, int]], sizes: dict[int, int]) -> dict[int, int] | None:
    """Digit values at which every affine form takes its target (mixed radix: the
    digits of a form by decreasing coefficient), or None."""
    point: dict[int, int] = {}
    for aff, want in targets:
        rest = want - aff.const - sum(c * point[d] for d, c in aff.terms if d in point)
        for d, c in sorted(((d, c) for d, c in aff.terms if d not in point),
                           key=lambda x: -abs(x[1])):
            if c <= 0:
                return None
            v = min(rest // c, sizes[d] - 1)
            if v < 0:
                return None
            point[d] = v
            rest -= c * v
        if rest != 0:
            return None
    return point


def _condition(ev: Evaluation[Any], rank: int, op: Op) -> Op | None:
    """The comparison a tl.where's condition comes from (through reshapes and casts)."""
    arg = op.args[0] if op.args else None
    seen = 0
    while isinstance(arg, ValueRef) and seen < 16:
        src = ev.defining[rank].get(arg.id)
        if src is None:
            return None
        if src.kind in COMPARISONS:
            return src
        if src.kind not in (OpKind.RESHAPE, OpKind.CAST, OpKind.TRANS) or not src.args:
            return src if src.kind is OpKind.MUL else None
        arg = src.args[0]
        seen += 1
    return None


def _sizes(layout: Layout) -> dict[int, int]:
    return {d.id: d.size for d in layout.digits}


def mask_departure(problem: Problem, ev: Evaluation[Any], value: Lookup, rank: int,
                   vid: int, w: WrongPair) -> Event | None:
    """The tl.where (or dot) that decides the pair, as an event at its line."""
    what = "position" if problem.mask is not None else "row"
    pair = f"key {what} {w.key} for query {what} {w.query}"
    keys = sorted(ev.cone([(rank, vid)]), key=lambda k: (k[0] != rank, k))
    tiles: list[tuple[int, Op]] = []
    for r, v in keys:
        op = ev.defining[r].get(v)
        if op is None or op.kind not in (OpKind.WHERE, OpKind.DOT):
            continue
        held = value(r, v)
        if isinstance(held, Opaque):
            continue
        lin = held.form.as_lin()
        if lin is None:
            continue
        scores = [a for a, _ in lin.coeffs if isinstance(a, Score)]
        if len(scores) != 1:
            continue
        s = scores[0]
        if s.group != problem.group_of[rank]:
            continue
        q, k = (w.query, w.key) if problem.position_rows else (w.query_row, w.key_row)
        point = _solve([(s.t, q), (s.j, k)], _sizes(held.layout))
        if point is None:
            continue
        if op.kind is OpKind.DOT:
            tiles.append((r, op))
            continue
        pens = [a for a, _ in lin.coeffs if isinstance(a, Pen)]
        full = {d: point.get(d, 0) for p in pens for d in p.guard.digits}
        keeps = all(p.guard.holds(full) for p in pens)
        if keeps != bool(w.expected):
            cond = _condition(ev, r, op)
            because = f" (its condition is the comparison at {cond.source})" \
                if cond is not None else ""
            verb = "keeps" if keeps else "hides"
            return Event(Departure.MASK, r, op, f"the tl.where here {verb} {pair}{because}")
    if tiles and w.expected == 0:
        r, op = tiles[-1]
        return Event(Departure.MASK, r, op,
                     f"the scores here hold {pair} unmasked: no tl.where hides it (the "
                     "host folds this block as fully allowed)")
    return None


__all__ = ["mask_departure"]
