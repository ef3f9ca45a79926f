"""Key tiles: a sum over a tile's keys, then over the tiles (blocked accumulation).

A kernel that accumulates a long key axis in tiles (as flash-attention does with its
BLOCK_N: the f32 rounding of a sum then grows with the tile and the number of tiles, not
with every key) reshapes the key axis into (tile, key-in-tile) digits, sums over the inner
digit and then over the tile digit. The inner sum is a sum over key rows whose range moves
with the tile digit t: the rows ``c + N·t + i`` for i in [0, N). It is written as one
guarded row sum over every tile's rows whose guard, ``c + N·t <= b <= c + N·t + N - 1``,
keeps tile t's (guards.py: the same constraints as a mask's, on BOUND and a free digit).
The sum over t of such a row sum, when t enters nothing else, is the union of the tiles:
for every b exactly one t in [0, T) satisfies both constraints, so
``Σ_t Σ_b body(b)·Ind(tile t ∋ b)·Ind(G) = Σ_{b ∈ [c, c + N·T)} body(b)·Ind(G)``, an
identity. Anything else (a tile digit of another coefficient, a guard that constrains t
otherwise, t elsewhere in the term) is left to the caller's refusal: never a verdict.

Frames move the tile constraints as any constraint on BOUND (γ' = γ - δ_k), with the row
sum's interval, so the lemma of spec/semantics.md §9 holds.
"""

from __future__ import annotations

from collections.abc import Mapping

from meshproof.verify.semantics.guards import Guard, Ind
from meshproof.verify.semantics.index import BOUND, Aff
from meshproof.verify.semantics.poly_atoms import RowSum
from meshproof.verify.semantics.poly_terms import Monomial, _powers


def tile_guard(row: Aff, over: frozenset[int], n: int,
               sizes: Mapping[int, int]) -> tuple[Guard, int, int] | None:
    """For a key row ``c + (digits of over, n rows) + n·t``: the guard that keeps tile t's
    rows and the rows of every tile, [c, c + n·T); None if the row is not such a tiling."""
    extra = row.without(over)
    if len(extra.terms) != 1:
        return None
    t, k = extra.terms[0]
    size = sizes.get(t)
    if t == BOUND or k != n or size is None or size < 2:
        return None
    c = row.const
    lower = Aff(c, ((BOUND, -1), (t, n)))            # c + n·t - b <= 0
    upper = Aff(-c - n + 1, ((BOUND, 1), (t, -n)))    # b - c - n·t - (n - 1) <= 0
    g = Guard.make((lower, upper), {t: (0, size - 1)})
    if not isinstance(g, Guard):
        return None
    return g, c, c + n * size


def _tile_pair(g: Guard, t: int) -> tuple[int, int, tuple[Aff, ...]] | None:
    """(n, c, the other constraints) if g's constraints on t are exactly one tile's."""
    on_t = [c for c in g.constraints if c.coeff(t)]
    rest = tuple(c for c in g.constraints if not c.coeff(t))
    if len(on_t) != 2:
        return None
    lows = [c for c in on_t if c.coeff(BOUND) == -1]
    highs = [c for c in on_t if c.coeff(BOUND) == 1]
    if len(lows) != 1 or len(highs) != 1:
        return None
    low, high = lows[0], highs[0]
    n = low.coeff(t)
    if n < 1 or high.coeff(t) != -n or len(low.terms) != 2 or len(high.terms) != 2:
        return None
    c = low.const
    if -high.const - c + 1 != n:         # tile t holds exactly [c + n·t, c + n·t + n)
        return None
    return n, c, rest


def tile_union(m: Monomial, dep: frozenset[int],
               sizes: Mapping[int, int]) -> tuple[bool, Monomial | None]:
    """Σ over the tile digit of a term whose only dependence on it is one tiled row sum's
    guard: (True, the row sum over the union of the tiles, None if no row is left: 0);
    (False, None) when the term is not that."""
    no = (False, None)
    if len(dep) != 1 or m.unit.digits & dep:
        return no
    (t,) = tuple(dep)
    tiled = [(a, k) for a, k in m.vars if a.digits & dep]
    if len(tiled) != 1 or tiled[0][1] != 1 or not isinstance(tiled[0][0], RowSum):
        return no
    rs = tiled[0][0]
    g = rs.guard
    bare = [(a, k) for a, k in rs.body.vars if not isinstance(a, Ind)]
    if g is None or t in Monomial(rs.body.unit, tuple(bare)).digits:
        return no
    pair = _tile_pair(g, t)
    if pair is None:
        return no
    n, c, rest = pair
    lo, hi = max(rs.lo, c), min(rs.hi, c + n * sizes[t])
    if rest:
        kept = Guard.make(rest, g.ranges)
        if kept is False:
            return True, None
        if isinstance(kept, Guard):
            bare.append((Ind.make(kept), 1))
    if hi <= lo:
        return True, None
    total = RowSum.guarded(Monomial(rs.body.unit, _powers(bare)), lo, hi)
    if total is None:
        return True, None
    others = [(a, k) for a, k in m.vars if not a.digits & dep]
    return True, Monomial(m.unit, _powers([*others, (total, 1)]))


__all__ = ["tile_guard", "tile_union"]
