"""The inputs of one group as the simulator holds them: Q as an array, K and V as sources.

The generator itself is `meshproof.model.inputs` (counter-based, reproducible per block of
rows, shared with the verifier). Q is small and made whole; K and V are never made whole:
a `KVSource` hands out rows as pieces (views into the generator's pool where a piece lies
inside one tile), so the evaluator streams them and the float64 reference reads the pool
(spec/simulator.md §4, §5). An `ArraySource` has the same interface over explicit arrays:
the inputs of a rounding witness that `meshproof simulate --witness FILE` replays.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from meshproof.model.inputs import (
    InputKind,
    Peaks,
    Piece,
    RowPatch,
    max_abs,
    normal_block,
    peaks,
    pieces,
    queries,
)
from meshproof.sim.rounding import F32

__all__ = ["ArraySource", "GroupInput", "InputKind", "KVRows", "KVSource", "given_input",
           "group_input"]


@dataclass(frozen=True, slots=True)
class KVSource:
    """K or V of one group: `rows` rows of (heads, d), f16 values, generated on demand."""

    seed: int
    group: int
    tensor: str          # "k" or "v"
    rows: int
    heads: int
    d: int
    patch: RowPatch | None = None

    @property
    def row_elements(self) -> int:
        return self.heads * self.d

    def pieces(self, row_lo: int, row_hi: int) -> Iterator[Piece]:
        return pieces(self.seed, self.group, self.tensor, row_lo, row_hi, self.heads,
                      self.d, self.patch)

    def block(self, row_lo: int, row_hi: int) -> F32:
        """Rows [row_lo, row_hi) as a new (rows, heads, d) array."""
        return normal_block(self.seed, self.group, self.tensor, row_lo, row_hi, self.heads,
                            self.d, self.patch)

    def max_abs(self) -> float:
        best = max_abs(self.seed, self.group, self.tensor, 0, self.rows, self.heads, self.d)
        if self.patch is not None and self.patch.values.size:
            best = max(best, float(np.abs(self.patch.values).max()))
        return best


@dataclass(frozen=True, slots=True, eq=False)
class ArraySource:
    """K or V of one group given whole: `data` (rows, heads, d) float32 holding f16 values
    (read-only). Hands out rows as `KVSource` does: `pieces` yields one view."""

    data: F32

    def __post_init__(self) -> None:
        if self.data.ndim != 3 or self.data.dtype != np.float32:
            raise ValueError(f"an ArraySource needs a (rows, heads, d) float32 array, not "
                             f"{self.data.dtype} of shape {self.data.shape}")
        view = self.data.view()       # read-only here, the caller's array untouched
        view.setflags(write=False)
        object.__setattr__(self, "data", view)

    @property
    def rows(self) -> int:
        return int(self.data.shape[0])

    @property
    def heads(self) -> int:
        return int(self.data.shape[1])

    @property
    def d(self) -> int:
        return int(self.data.shape[2])

    @property
    def row_elements(self) -> int:
        return self.heads * self.d

    def _rows(self, row_lo: int, row_hi: int) -> None:
        if not 0 <= row_lo <= row_hi <= self.rows:
            raise ValueError(f"bad row range [{row_lo}, {row_hi}) of {self.rows} rows; "
                             f"need 0 <= row_lo <= row_hi <= {self.rows}")

    def pieces(self, row_lo: int, row_hi: int) -> Iterator[Piece]:
        self._rows(row_lo, row_hi)
        if row_hi > row_lo:
            yield Piece(row_lo, row_hi, self.data[row_lo:row_hi], True)

    def block(self, row_lo: int, row_hi: int) -> F32:
        """Rows [row_lo, row_hi) as a new (rows, heads, d) array."""
        self._rows(row_lo, row_hi)
        out: F32 = self.data[row_lo:row_hi].copy()
        return out

    def max_abs(self) -> float:
        return float(np.abs(self.data).max()) if self.data.size else 0.0


# what a group's K or V is: rows of the seeded generator, or given arrays
KVRows = KVSource | ArraySource


@dataclass(frozen=True, slots=True)
class GroupInput:
    """One group's Q (q_rows, h_q, d) and its K and V sources."""

    group: int
    q: F32
    k: KVRows
    v: KVRows
    peaks: Peaks | None


def group_input(seed: int, group: int, kind: InputKind, q_rows: int, kv_rows: int,
                h_q: int, h_kv: int, d: int, scale: float) -> GroupInput:
    pk = peaks(seed, group, kv_rows, h_kv, d, scale) if kind is InputKind.PEAKED else None
    q = queries(seed, group, kind, q_rows, h_q, d, pk)
    k = KVSource(seed, group, "k", kv_rows, h_kv, d, pk.patch if pk is not None else None)
    v = KVSource(seed, group, "v", kv_rows, h_kv, d)
    return GroupInput(group, q, k, v, pk)


def given_input(group: int, q: F32, k: F32, v: F32) -> GroupInput:
    """One group's inputs from explicit (rows, heads, d) float32 arrays of f16 values."""
    return GroupInput(group, q, ArraySource(k), ArraySource(v), None)
