"""Streamed K/V: a value made of generated K/V rows that is never held whole, and the
dot that reads it piece by piece.

A streamed value (`Streamed`) is a recipe, not an array: rows of each batch entry's
source, loaded, then transposed / reshaped. A `dot` with one streamed operand runs piece
by piece over the generator's tiles (views into its pool, so nothing is copied), writing
the output's slice (the streamed axis is a free axis of the dot, e.g. the scores' keys)
or accumulating the float32 partial products (the streamed axis is contracted, e.g.
P·V), or writing the output's slice along a batch axis of the dot (V split into key
tiles: the tile axis, each piece whole tiles, so every tile's product is the one the
whole value gives). Any other use makes the value whole first (`Streamed.whole`). Which
values stream is the plan's choice (stream_plan.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from meshproof.sim.inputs import KVRows, KVSource
from meshproof.sim.pool_scores import PoolScores
from meshproof.sim.rounding import F32


@dataclass(frozen=True, slots=True)
class Streamed:
    """A value made of generated K/V rows that is never held whole: rows
    [row_lo, row_hi) of each batch entry's source, loaded as `base` (rows first), then
    transposed / reshaped by `steps`; `shape` and `axis` (where the rows are) now, `unit`
    rows per index along it (> 1: split into key tiles of that many rows)."""

    sources: tuple[KVRows, ...]
    row_lo: int
    row_hi: int
    base: tuple[int, ...]
    steps: tuple[tuple[str, tuple[int, ...], int, int], ...]
    shape: tuple[int, ...]
    axis: int
    unit: int = 1

    def then(self, kind: str, arg: tuple[int, ...], shape: tuple[int, ...],
             axis: int, unit: int = 1) -> Streamed:
        return Streamed(self.sources, self.row_lo, self.row_hi, self.base,
                        (*self.steps, (kind, arg, axis, unit)), shape, axis, unit)

    def _shaped(self, x: F32, rows: int) -> F32:
        x = x.reshape(rows, *self.base[1:])
        for kind, arg, axis, unit in self.steps:
            if kind == "T":
                x = x.transpose(arg)
            else:
                shape = list(arg)
                shape[axis] = rows // unit
                x = x.reshape(shape)
        return x

    def parts(self, b: int) -> Iterator[tuple[int, int, F32]]:
        """Batch entry b piece by piece: (first, end) along `axis`, the piece."""
        src = self.sources[b]
        if self.unit > 1:
            yield from self._tiles(src)
            return
        for p in src.pieces(self.row_lo, self.row_hi):
            yield p.row_lo - self.row_lo, p.row_hi - self.row_lo, \
                self._shaped(p.data, p.row_hi - p.row_lo)

    def _tiles(self, src: KVRows) -> Iterator[tuple[int, int, F32]]:
        """Whole key tiles, (first, end) along the tile axis: the whole tiles inside one
        of the generator's pieces as one view of it (the key tiles and the generator's
        tiles align when the rows start at a multiple of the key tile); a tile that
        straddles two pieces is copied together from its parts."""
        unit, tile_lo = self.unit, 0
        pending: list[F32] = []
        for p in src.pieces(self.row_lo, self.row_hi):
            lo, hi, data = p.row_lo - self.row_lo, p.row_hi - self.row_lo, p.data
            if pending or lo % unit:       # the rest of a tile begun in earlier pieces
                take = min(hi, tile_lo + unit) - lo
                pending.append(data[:take])
                lo, data = lo + take, data[take:]
                if lo == tile_lo + unit:
                    yield tile_lo // unit, lo // unit, \
                        self._shaped(np.concatenate(pending), unit)
                    pending = []
            whole = (hi - lo) // unit * unit
            if whole:
                yield lo // unit, (lo + whole) // unit, self._shaped(data[:whole], whole)
            if lo + whole < hi:            # a tile this piece only begins
                tile_lo = lo + whole
                pending = [data[whole:]]
        assert not pending, "the rows are whole key tiles (the plan follows no other split)"

    def whole(self) -> F32:
        rows = self.row_hi - self.row_lo
        out = np.empty((len(self.sources), *self.shape), np.float32)
        for b, src in enumerate(self.sources):
            out[b] = self._shaped(src.block(self.row_lo, self.row_hi), rows)
        return out

    @property
    def nbytes_f16(self) -> int:
        return 2 * len(self.sources) * math.prod(self.shape)


def flat_dot(mode: str, x: F32, piece: F32, target: F32, lo: int, hi: int) -> bool:
    """The streamed dot of a piece with no leading axes of its own as one 2-D BLAS call,
    the dense operand's leading axes folded into its rows (a decode step's query heads):
    numpy's stacked matmul of the same shapes is 2x slower for one query row and 12x for
    eight (GQA heads sharing a KV head). False: not such a piece (the caller's stacked
    path runs). The sum over d or over key rows is still one float32 dot per element."""
    if mode not in ("b_free", "b_sum") or math.prod(piece.shape[:-2]) != 1:
        return False
    p2 = piece.reshape(piece.shape[-2:])
    if mode == "b_free":          # x (..., n, d) . piece (d, r) -> target[..., lo:hi]
        dest = target[..., lo:hi]
        if dest.shape != (*x.shape[:-1], piece.shape[-1]):
            return False
        dest[...] = (p2.T @ x.reshape(-1, x.shape[-1]).T).T.reshape(dest.shape)
        return True
    xs = x[..., lo:hi]            # b_sum: (..., n, r) . piece (r, d), accumulated
    if target.shape != (*xs.shape[:-1], piece.shape[-1]):
        return False
    target += (xs.reshape(-1, xs.shape[-1]) @ p2).reshape(target.shape)
    return True


def dot_mode(a: F32 | Streamed, b: F32 | Streamed) -> str | None:
    """How a dot streams: which operand, and whether its streamed axis is free or
    contracted (None: it does not; both operands are made whole)."""
    if isinstance(b, Streamed) and not isinstance(a, Streamed) and len(b.shape) >= 2 and \
            np.ndim(a) >= 3:
        if b.axis < len(b.shape) - 2:
            return "b_batch" if _batch_axis(a, b) else None
        return {len(b.shape) - 1: "b_free", len(b.shape) - 2: "b_sum"}.get(b.axis)
    if isinstance(a, Streamed) and not isinstance(b, Streamed) and len(a.shape) >= 2 and \
            np.ndim(b) >= 3:
        if a.axis < len(a.shape) - 2:
            return "a_batch" if _batch_axis(b, a) else None
        return {len(a.shape) - 2: "a_free", len(a.shape) - 1: "a_sum"}.get(a.axis)
    return None


def _batch_axis(dense: F32, streamed: Streamed) -> bool:
    """The streamed axis is a batch axis of the dot that the dense operand has too (not
    broadcast), so a piece's product is the output's slice along it."""
    shape = np.shape(dense)[1:]
    return len(shape) == len(streamed.shape) and \
        shape[streamed.axis] == streamed.shape[streamed.axis]


def streamed_dot(shape: tuple[int, ...], batch: int, a: F32 | Streamed, b: F32 | Streamed,
             mode: str, on_streamed: Callable[[int], None] | None = None,
             pool_scores: PoolScores | None = None) -> F32:
    """A dot with one streamed operand, piece by piece (see the module docstring):
    a free streamed axis fills the output's slice, a contracted one accumulates the
    float32 partial products in piece order. `shape`: the output's, without the batch
    axis; `on_streamed` is told the f16 bytes of K/V read (progress); `pool_scores`
    shares the scores of whole pool tiles between the ranks of a batch (pool_scores.py)."""
    streamed = b if mode[0] == "b" else a
    dense = a if mode[0] == "b" else b
    assert isinstance(streamed, Streamed) and not isinstance(dense, Streamed)
    out = np.zeros((batch, *shape), np.float32)
    part = None
    for k in range(batch):
        x, target = dense[k], out[k]
        x_t = x.swapaxes(-1, -2)
        source = streamed.sources[k]
        for lo, hi, piece in streamed.parts(k):
            if pool_scores is not None and mode == "b_free" and \
                    isinstance(source, KVSource) and math.prod(piece.shape[:-2]) == 1 and \
                    pool_scores.fill(source.seed, source.d, x,
                                     piece.reshape(piece.shape[-2:]).T, target[..., lo:hi]):
                continue
            if flat_dot(mode, x, piece, target, lo, hi):
                continue
            if mode == "b_free":
                # (piece^T x^T)^T: BLAS reads the piece in its stored (rows, d)
                # layout, twice as fast here as x @ piece for several query rows
                target[..., lo:hi] = np.matmul(piece.swapaxes(-1, -2), x_t
                                               ).swapaxes(-1, -2)
            elif mode in ("b_batch", "a_batch"):
                # the tile axis is a batch axis: each tile's product as the whole dot's
                at = (slice(None),) * streamed.axis + (slice(lo, hi),)
                target[at] = np.matmul(x[at], piece) if mode == "b_batch" else \
                    np.matmul(piece, x[at])
            elif mode == "a_free":
                target[..., lo:hi, :] = np.matmul(piece, x)
            else:
                if part is None:
                    part = np.empty(shape, np.float32)
                if mode == "b_sum":
                    np.matmul(x[..., lo:hi], piece, out=part)
                else:
                    np.matmul(piece, x[..., lo:hi, :], out=part)
                target += part
    if on_streamed is not None:
        on_streamed(streamed.nbytes_f16)
    return out
