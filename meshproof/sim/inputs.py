"""The inputs of one group as the simulator holds them: Q as an array, K and V as sources.

The generator itself is `meshproof.model.inputs` (counter-based, reproducible per block of
rows, shared with the verifier). Q is small and made whole; K and V are never made whole:
a `KVSource` hands out rows as pieces (views into the generator's pool where a piece lies
inside one tile), so the evaluator streams them and the float64 reference reads the pool
(spec/simulator.md §4, §5).
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

__all__ = ["GroupInput", "InputKind", "KVSource", "group_input"]


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


@dataclass(frozen=True, slots=True)
class GroupInput:
    """One group's Q (q_rows, h_q, d) and its K and V sources."""

    group: int
    q: F32
    k: KVSource
    v: KVSource
    peaks: Peaks | None


def group_input(seed: int, group: int, kind: InputKind, q_rows: int, kv_rows: int,
                h_q: int, h_kv: int, d: int, scale: float) -> GroupInput:
    pk = peaks(seed, group, kv_rows, h_kv, d, scale) if kind is InputKind.PEAKED else None
    q = queries(seed, group, kind, q_rows, h_q, d, pk)
    k = KVSource(seed, group, "k", kv_rows, h_kv, d, pk.patch if pk is not None else None)
    v = KVSource(seed, group, "v", kv_rows, h_kv, d)
    return GroupInput(group, q, k, v, pk)
