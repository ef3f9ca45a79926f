"""Attention masks a launch declares, and the sequence positions of each rank's rows.

`--mask causal|causal:OFFSET|window:W|padding:LEN`, optionally `@zigzag`, `@striped` or
`@contiguous` (spec/simulator.md §4): the simulator's reference is then softmax over the keys
the predicate allows --

- causal:   key position <= query position + OFFSET (OFFSET 0 unless given);
- window:W: query - W < key <= query (the last W keys up to the query's own);
- padding:LEN: key < LEN (keys at LEN and past it are padding).

Positions: a group's query (and key) rows are the harness's rows in group order -- block
b of a prefill group holds rows [b*S_q, (b+1)*S_q) -- and by default row r is sequence
position r. A mask without `@layout` keeps the layout of the kernel's own mask (where the
kernel holds its rows is the kernel's, what it hides is the launch's). `@zigzag` is the
load-balanced causal layout of ring-flash-attention's zigzag ring: with n blocks, block b
holds chunks b and 2n-1-b of the sequence (each half a block), so its rows t < S/2 are
positions b*S/2 + t and the others (2n-1-b)*S/2 + t - S/2.
`@striped` is the round-robin layout of ring-flash-attention's stripe ring (and of Striped
Attention): block b of n holds every n-th position, row t being position b + n*t.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
import numpy.typing as npt

from meshproof.errors import LaunchError

Positions = npt.NDArray[np.int64]
Allowed = npt.NDArray[np.bool_]


class MaskKind(Enum):
    CAUSAL = "causal"
    WINDOW = "window"
    PADDING = "padding"


class Layout(Enum):
    """Which sequence position each harness row of a group holds."""

    CONTIGUOUS = "contiguous"
    ZIGZAG = "zigzag"
    STRIPED = "striped"


_SYNTAX = re.compile(r"^(causal|window|padding)(?::(-?\d+))?(?:@(\w+))?$")
MASK_HELP = ("causal (key <= query), causal:OFFSET (key <= query + OFFSET), window:W "
             "(query - W < key <= query) or padding:LEN (key < LEN), optionally followed by "
             "@zigzag (block b holds chunks b and 2n-1-b), @striped (block b of n holds "
             "positions b + n*t) or @contiguous (without one: the kernel's own layout, else "
             "contiguous)")


@dataclass(frozen=True, slots=True)
class Mask:
    """A mask predicate over (query position, key position) and the rows' layout."""

    kind: MaskKind
    param: int = 0                  # causal: the offset; window: W; padding: LEN
    layout: Layout = Layout.CONTIGUOUS
    # False for a mask written without `@layout`: the launch then takes the kernel's own
    # layout (model/launch.py); not part of the mask's identity once resolved
    layout_stated: bool = field(default=True, compare=False)

    @staticmethod
    def parse(text: str) -> Mask:
        """`causal`, `causal:2`, `window:4`, `padding:10`, `causal@zigzag`, ...; anything
        else is one LaunchError saying what is accepted."""
        m = _SYNTAX.match(text.strip())
        if m is None:
            raise LaunchError(f"--mask {text!r} is not a mask: write {MASK_HELP}")
        kind, number, layout = MaskKind(m.group(1)), m.group(2), m.group(3)
        if kind is not MaskKind.CAUSAL and number is None:
            raise LaunchError(f"--mask {text!r}: {kind.value} needs its size, e.g. "
                              f"--mask {kind.value}:4")
        param = int(number) if number is not None else 0
        if kind is not MaskKind.CAUSAL and param < 1:
            raise LaunchError(f"--mask {text!r}: the {kind.value} size must be at least 1")
        try:
            lay = Layout(layout) if layout is not None else Layout.CONTIGUOUS
        except ValueError:
            raise LaunchError(f"--mask {text!r}: unknown layout @{layout}; the layouts are "
                              "@zigzag, @striped, @contiguous (or none: the kernel's own)"
                              ) from None
        return Mask(kind, param, lay, layout_stated=layout is not None)

    @property
    def text(self) -> str:
        """The mask as --mask spells it (what JSON and headers carry)."""
        size = "" if self.kind is MaskKind.CAUSAL and self.param == 0 else f":{self.param}"
        lay = "" if self.layout is Layout.CONTIGUOUS else f"@{self.layout.value}"
        return f"{self.kind.value}{size}{lay}"

    def allowed(self, q_pos: Positions, k_pos: Positions) -> Allowed:
        """(queries, keys): which key each query attends to."""
        q, k = q_pos[:, None], k_pos[None, :]
        if self.kind is MaskKind.CAUSAL:
            return np.asarray(k <= q + self.param)
        if self.kind is MaskKind.WINDOW:
            return np.asarray((k <= q) & (k > q - self.param))
        return np.asarray(np.broadcast_to(k < self.param, (len(q_pos), len(k_pos))))



def block_positions(layout: Layout, block: int, n_blocks: int, rows: int) -> Positions:
    """Sequence positions of the `rows` rows of block `block` of `n_blocks`."""
    t = np.arange(rows, dtype=np.int64)
    if layout is Layout.CONTIGUOUS:
        return block * rows + t
    if layout is Layout.STRIPED:
        return block + n_blocks * t
    half = rows // 2
    if 2 * half != rows:
        raise LaunchError(f"the zigzag layout (--mask ...@zigzag) splits each block in two "
                          f"chunks, but a block has {rows} rows; use an even S_q and "
                          "S_kv_per_rank")
    return np.where(t < half, block * half + t, (2 * n_blocks - 1 - block) * half + t - half)


def masked_attention(q: npt.NDArray[Any], k: npt.NDArray[Any], v: npt.NDArray[Any],
                     scale: Any, allowed: Allowed,
                     exp: Callable[[npt.NDArray[Any]], npt.NDArray[Any]] = np.exp
                     ) -> npt.NDArray[Any]:
    """The masked reference, defined once for the verifier and the simulator: for q
    (rows, h_q, d), k and v (keys, h_kv, d) and `allowed` (rows, keys), each query row's
    softmax over the keys it may see, and 0 for a row that sees none (FlashAttention
    writes 0 there; it is not nan). Works on float64 arrays and, with `exp` given, on
    object arrays of high-precision numbers."""
    h_q, h_kv = q.shape[1], k.shape[1]
    g = h_q // h_kv
    out = np.zeros(q.shape, dtype=q.dtype)
    rows = np.flatnonzero(allowed.any(axis=1))
    if rows.size == 0:
        return out
    sees = allowed[rows]
    for hq in range(h_q):
        kk, vv = k[:, hq // g, :], v[:, hq // g, :]
        s = (q[rows, hq, :] @ kk.T) * scale
        m = np.where(sees, s, s.min(axis=1, keepdims=True)).max(axis=1, keepdims=True)
        p = np.where(sees, exp(np.where(sees, s, m) - m), 0)
        out[rows, hq, :] = (p @ vv) / p.sum(axis=1, keepdims=True)
    return out
