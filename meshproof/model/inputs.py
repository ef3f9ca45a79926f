"""The seeded attention inputs: a counter-based generator, reproducible per block of rows.

Shared by the simulator (which streams K/V through it at memory speed) and the verifier
(whose witness search can regenerate exactly the rows it needs), so a witness input
printed by `meshproof verify` is the one `meshproof simulate --seed` feeds. Normative text:
spec/simulator.md §5.

Every tensor is row-major `(rows, heads, d)`, holding float16-representable numbers in
float32, and is seen as `rows * heads` *vectors* of `d` elements (vector `r * heads + h`
is row r, head h). What a vector holds depends only on `(seed, group, tensor, vector
index, d)` — never on how many rows, groups or batches are generated together — so any
row range of any tensor regenerates alone and equals the same rows of a whole-tensor draw
(`normal_block`).

- `q` (and any tensor not named `k` or `v`): i.i.d. N(0,1), rounded to f16, drawn per
  block of `Q_BLOCK_VECTORS` vectors from a Philox generator keyed by
  `(seed, group, tensor, block)`.
- `k`, `v`: *tiles* of a pool. The pool holds `POOL_ELEMENTS` f16-rounded N(0,1) draws
  of `seed` (seen as `R = POOL_ELEMENTS // d` pool rows of d elements); the *signed* pool
  is the pool followed by its negation (2R rows). Tile t of a tensor is its vectors
  `[t*T, (t+1)*T)`, `T = tile_vectors(d)`, and holds the signed-pool rows
  `[src_t, src_t + T)`, where `src_t` is a splitmix64 hash of `(seed, group, tensor, t)`
  (a counter-based generator: no state, any tile computed alone). Every element is
  N(0,1)-distributed; tiles are not independent of each other (pool rows recur at long
  context). Drawing fresh normals runs at ~0.1 G/s; tiles are views into the pool, so
  the simulator streams them at memory speed, and `U = pool @ q` (one float64 GEMV per
  query) gives the float64 score of every key.

`peaks` adds the "attention sink" keys of `--inputs peaked` (a few rows of K replaced).
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

POOL_ELEMENTS = 1 << 23          # f16-rounded N(0,1) draws per seed (32 MiB as float32)
TILE_ELEMENTS = 1 << 20          # elements per K/V tile (4 MiB as float32)
Q_BLOCK_VECTORS = 1 << 12        # vectors per Philox block of a directly drawn tensor
PEAKED_KEYS = 4
QUERY_SHIFT = 3.0                # the common query component of peaked inputs
TENSOR_CODES = {"q": 1, "k": 2, "v": 3, "peaks": 4}
POOLED = ("k", "v")              # tensors made of pool tiles

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_T = TypeVar("_T")
# the simulator's numeric threads start together: without it both would build one pool
_POOL_LOCK = threading.RLock()


class InputKind(Enum):
    NORMAL = "normal"     # Q, K, V ~ N(0,1)
    PEAKED = "peaked"     # as NORMAL, plus a few keys per KV head whose scores dominate
    UNIFORM = "uniform"   # Q = 0: every score equal, so ℓ equals the number of keys


def _round_f16(x: npt.NDArray[np.floating]) -> F32:
    with np.errstate(over="ignore"):
        return x.astype(np.float16).astype(np.float32)


def _mix(z: int) -> int:
    """splitmix64's finaliser on a Python int."""
    z = (z + _GOLDEN) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _key(seed: int, group: int, tensor: str) -> int:
    code = TENSOR_CODES.get(tensor)
    if code is None:
        raise ValueError(f"unknown input tensor {tensor!r}: use one of "
                         f"{', '.join(TENSOR_CODES)}")
    return _mix(_mix(_mix(seed & _MASK) ^ (group + 1)) ^ code)


def _hash(key: int, counters: I64) -> npt.NDArray[np.uint64]:
    """splitmix64 of (key, counter), vectorised over counters."""
    z = counters.astype(np.uint64) * np.uint64(_GOLDEN) + np.uint64(key)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


# --- the pool --------------------------------------------------------------------------

def _built_once(build: Callable[[int, int], _T]) -> Callable[[int, int], _T]:
    """`build(seed, d)` cached (the last two), built by one thread while others wait."""
    cached = functools.lru_cache(maxsize=2)(build)

    @functools.wraps(build)
    def once(seed: int, d: int) -> _T:
        with _POOL_LOCK:
            return cached(seed, d)
    return once


def pool_rows(d: int) -> int:
    """R: rows of d elements in the pool (at least one tile's worth)."""
    return max(POOL_ELEMENTS // d, tile_vectors(d))


def tile_vectors(d: int) -> int:
    """T: vectors per tile of a K/V tensor with vectors of d elements."""
    return max(1, TILE_ELEMENTS // d)


@_built_once
def signed_pool(seed: int, d: int) -> F32:
    """(2R, d) float32, read-only: the pool's R rows, then their negations."""
    rows = pool_rows(d)
    rng = np.random.default_rng([seed, 0, 0])
    pool = rng.standard_normal(rows * d, dtype=np.float32).reshape(rows, d)
    signed = np.empty((2 * rows, d), np.float32)
    signed[:rows] = _round_f16(pool)
    np.negative(signed[:rows], out=signed[rows:])
    signed.flags.writeable = False
    return signed


@_built_once
def pool64(seed: int, d: int) -> F64:
    """(R, d) float64, read-only: the pool's rows (exact: they are f16 values)."""
    out = signed_pool(seed, d)[:pool_rows(d)].astype(np.float64)
    out.flags.writeable = False
    return out


@_built_once
def pool_row_max(seed: int, d: int) -> F64:
    """(R,) max |x| of every pool row (for max |V| without reading V): max(max x, -min x),
    which makes no array the pool's size (page faults cost more than the reads here)."""
    rows = signed_pool(seed, d)[:pool_rows(d)]
    out: F64 = np.maximum(rows.max(axis=1), -rows.min(axis=1)).astype(np.float64)
    out.flags.writeable = False
    return out


def tile_sources(seed: int, group: int, tensor: str, t0: int, t1: int, d: int) -> I64:
    """Signed-pool row where tiles t0..t1-1 of a pooled tensor start (>= R: negated)."""
    rows, tv = pool_rows(d), tile_vectors(d)
    z = _hash(_key(seed, group, tensor), np.arange(t0, t1, dtype=np.int64))
    offset = (z >> np.uint64(1)) % np.uint64(rows - tv + 1)
    negate = z & np.uint64(1)
    return (offset + negate * np.uint64(rows)).astype(np.int64)


# --- rows of a tensor -------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RowPatch:
    """Rows replaced after the draw: `values[i]` (heads, d) is row `rows[i]`."""

    rows: tuple[int, ...]
    values: F32


@dataclass(frozen=True, slots=True)
class Piece:
    """Rows [row_lo, row_hi) of a tensor as (rows, heads, d) float32; `view` says it is a
    read-only view into the signed pool (no copy was made)."""

    row_lo: int
    row_hi: int
    data: F32
    view: bool


def _check(row_lo: int, row_hi: int, heads: int, d: int) -> None:
    if not (0 <= row_lo <= row_hi and heads >= 1 and d >= 1):
        raise ValueError(f"bad row range [{row_lo}, {row_hi}) or shape (heads {heads}, "
                         f"d {d}); need 0 <= row_lo <= row_hi, heads >= 1, d >= 1")


def pieces(seed: int, group: int, tensor: str, row_lo: int, row_hi: int, heads: int,
           d: int, patch: RowPatch | None = None) -> Iterator[Piece]:
    """Rows [row_lo, row_hi) of a pooled tensor (k, v) in row order, split where tiles
    end: each piece that lies inside one tile (and no patched row) is a view of the pool;
    a row that straddles two tiles, or a piece holding a patched row, is a copy."""
    _check(row_lo, row_hi, heads, d)
    if tensor not in POOLED:
        raise ValueError(f"{tensor!r} is not a pooled tensor; use normal_block")
    if row_hi == row_lo:
        return
    tv = tile_vectors(d)
    v_lo, v_hi = row_lo * heads, row_hi * heads
    t0, t1 = v_lo // tv, -(-v_hi // tv)
    src = tile_sources(seed, group, tensor, t0, t1, d)
    signed = signed_pool(seed, d)
    patched = set(patch.rows) if patch is not None else set()
    row = row_lo
    while row < row_hi:
        t = row * heads // tv
        tile_end = (t + 1) * tv
        # whole rows inside tile t, starting at `row`
        end = min(row_hi, tile_end // heads)
        if end > row and row * heads >= t * tv:
            a = int(src[t - t0]) + row * heads - t * tv
            data = signed[a:a + (end - row) * heads].reshape(end - row, heads, d)
            piece = Piece(row, end, data, True)
        else:  # one row straddling a tile boundary: copy its vectors
            end = row + 1
            data = np.empty((1, heads, d), np.float32)
            for h in range(heads):
                v = row * heads + h
                tt = v // tv
                data[0, h] = signed[int(src[tt - t0]) + v - tt * tv]
            piece = Piece(row, end, data, False)
        if patched and any(piece.row_lo <= r < piece.row_hi for r in patched):
            piece = _patched(piece, patch)
        yield piece
        row = end


def _patched(piece: Piece, patch: RowPatch | None) -> Piece:
    assert patch is not None
    data = piece.data.copy()
    for r, value in zip(patch.rows, patch.values, strict=True):
        if piece.row_lo <= r < piece.row_hi:
            data[r - piece.row_lo] = value
    return Piece(piece.row_lo, piece.row_hi, data, False)


def normal_block(seed: int, group: int, tensor: str, row_lo: int, row_hi: int, heads: int,
                 d: int, patch: RowPatch | None = None) -> F32:
    """Rows [row_lo, row_hi) of `tensor` ("q", "k" or "v") of `group` for `seed`: a new
    (rows, heads, d) float32 array of f16-representable N(0,1) values, equal to the same
    rows of a whole-tensor draw (whatever the tensor's length, batch or other groups)."""
    _check(row_lo, row_hi, heads, d)
    out = np.empty((row_hi - row_lo, heads, d), np.float32)
    if tensor in POOLED:
        for p in pieces(seed, group, tensor, row_lo, row_hi, heads, d, patch):
            out[p.row_lo - row_lo:p.row_hi - row_lo] = p.data
        return out
    flat = out.reshape(-1, d)
    v_lo, v_hi = row_lo * heads, row_hi * heads
    key = _key(seed, group, tensor)
    for b in range(v_lo // Q_BLOCK_VECTORS, -(-v_hi // Q_BLOCK_VECTORS)):
        lo, hi = max(v_lo, b * Q_BLOCK_VECTORS), min(v_hi, (b + 1) * Q_BLOCK_VECTORS)
        words = np.array([key, b & _MASK], dtype=np.uint64)
        rng = np.random.Generator(np.random.Philox(key=words))
        n_block = (min(v_hi, (b + 1) * Q_BLOCK_VECTORS) - b * Q_BLOCK_VECTORS) * d
        draw = rng.standard_normal(n_block, dtype=np.float32)
        start = (lo - b * Q_BLOCK_VECTORS) * d
        flat[lo - v_lo:hi - v_lo] = _round_f16(draw[start:start + (hi - lo) * d]
                                               ).reshape(-1, d)
    if patch is not None:
        for r, value in zip(patch.rows, patch.values, strict=True):
            if row_lo <= r < row_hi:
                out[r - row_lo] = value
    return out


@_built_once
def _window_max(seed: int, d: int) -> F64:
    """(R,) the max of `pool_row_max` over rows [i, i + T) (clipped at R), for every i."""
    out = pool_row_max(seed, d).copy()
    span = 1
    tv = tile_vectors(d)
    while span < tv:  # doubling: out[i] = max over [i, i + 2 * span)
        step = min(span, tv - span)
        np.maximum(out[:-step], out[step:], out=out[:-step])
        span += step
    out.flags.writeable = False
    return out


def max_abs(seed: int, group: int, tensor: str, row_lo: int, row_hi: int, heads: int,
            d: int) -> float:
    """max |x| over rows [row_lo, row_hi) of a pooled tensor, from per-pool-row maxima
    (reads no tensor data)."""
    _check(row_lo, row_hi, heads, d)
    if row_hi == row_lo:
        return 0.0
    tv, rows = tile_vectors(d), pool_rows(d)
    v_lo, v_hi = row_lo * heads, row_hi * heads
    t0, t1 = v_lo // tv, -(-v_hi // tv)
    src = tile_sources(seed, group, tensor, t0, t1, d) % rows
    row_max = pool_row_max(seed, d)
    best = 0.0
    # the first and last tile may be partial; every tile between is a whole window
    for i in {0, t1 - t0 - 1}:
        t = t0 + i
        lo, hi = max(v_lo, t * tv) - t * tv, min(v_hi, (t + 1) * tv) - t * tv
        best = max(best, float(row_max[src[i] + lo:src[i] + hi].max()))
    if t1 - t0 > 2:
        best = max(best, float(_window_max(seed, d)[src[1:-1]].max()))
    return best


# --- peaked inputs ------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Peaks:
    """The "attention sink" of one group: per kv head h a unit vector `e[h]`; every query
    of h's q heads gets the component QUERY_SHIFT along it, and K rows `positions` are
    replaced by `keys` (positions, h_kv, d), scoring ln(kv rows) + 5 - i."""

    positions: tuple[int, ...]
    e: F64            # (h_kv, d)
    keys: F32         # (len(positions), h_kv, d), f16 values

    @property
    def patch(self) -> RowPatch:
        return RowPatch(self.positions, self.keys)


def peaks(seed: int, group: int, kv_rows: int, h_kv: int, d: int, scale: float) -> Peaks:
    rng = np.random.default_rng([seed, group + 1, TENSOR_CODES["peaks"]])
    n = min(PEAKED_KEYS, kv_rows)
    positions = tuple(int(p) for p in rng.choice(kv_rows, size=n, replace=False))
    gain = math.log(kv_rows) + 5.0
    e = np.empty((h_kv, d))
    keys = np.empty((n, h_kv, d), np.float32)
    for h in range(h_kv):
        draw = rng.standard_normal(size=(int(d),))
        e[h] = draw / float(np.linalg.norm(draw))
        for i in range(n):
            keys[i, h] = _round_f16(e[h] * ((gain - i) / (scale * QUERY_SHIFT)))
    return Peaks(positions, e, keys)


def shift_queries(q: F32, pk: Peaks) -> None:
    """Give every query of kv head h's q heads the component QUERY_SHIFT along e[h]
    (its own component along e[h] replaced), rounded to f16; q is (rows, h_q, d)."""
    h_kv = pk.e.shape[0]
    g = q.shape[1] // h_kv
    for h in range(h_kv):
        e = pk.e[h]
        heads = q[:, h * g:(h + 1) * g, :]
        along = heads.astype(np.float64) @ e
        shifted = heads + (QUERY_SHIFT - along)[..., None] * e
        heads[...] = _round_f16(shifted)


def queries(seed: int, group: int, kind: InputKind, rows: int, h_q: int, d: int,
            pk: Peaks | None = None) -> F32:
    """Q of one group (rows, h_q, d) for `kind` (peaked needs the group's `peaks`)."""
    q = normal_block(seed, group, "q", 0, rows, h_q, d)
    if kind is InputKind.UNIFORM:
        q.fill(0.0)
    elif kind is InputKind.PEAKED:
        assert pk is not None, "peaked queries need the group's peaks"
        shift_queries(q, pk)
    return q
