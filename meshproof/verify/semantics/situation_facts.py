"""What the situation memo knows of a value (`Facts`: canonical form id, interval,
rounding error, why there is none), and how a rank holds a value: `Held`, a facts id and a
key-row shift packed in one int. situations.py computes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NewType

from meshproof.model.schedule import Op
from meshproof.verify.semantics.atom_base import frame, frame_parts
from meshproof.verify.semantics.canon import GROUPS, QROWS, ROWS
from meshproof.verify.semantics.ranges import Interval
from meshproof.verify.semantics.reasons import UndefinedKind
from meshproof.verify.semantics.rounding import Err

OPAQUE_CID = -1


@dataclass(frozen=True, slots=True)
class Gone:
    """An opaque value, as its facts record it (the rank and op where it became opaque)."""

    reason: str
    rank: int
    op: Op
    lost: bool
    undefined: UndefinedKind | None


@dataclass(frozen=True, slots=True)
class Facts:
    """What the analysis knows of one value, in its canonical frame."""

    cid: int                        # canonical form (OPAQUE_CID: none)
    interval: Interval
    err: Err | None
    why: str | None                 # why there is no error bound
    gone: Gone | None = None


Held = NewType("Held", int)
"""A value as a rank holds it, packed in one int (the per-op cost is a few int operations
and one dict lookup): its facts id in the low 32 bits, the shift of its key rows above."""

_FID = (1 << 32) - 1
_SHIFT = 32


def held(fid: int, shift: int) -> Held:
    return Held(fid + (shift << _SHIFT))


def fid_of(x: Held) -> int:
    return x & _FID


def shift_of(x: Held) -> int:
    return x >> _SHIFT


def _joint(sa: int, ha: int, sb: int, hb: int) -> tuple[int, int, int]:
    """The situation frame of two operands moved by different parts (a query against a
    key tile): per part, the smaller frame of the operands it moves; each operand's
    frame relative to it, with the parts that do not move it zeroed (they carry no
    information, and keying on them would split one situation by absolute rows)."""
    pa, pb = frame_parts(sa), frame_parts(sb)
    base: list[int] = []
    rel_a: list[int] = []
    rel_b: list[int] = []
    for bit, x, y in zip((ROWS, QROWS, GROUPS), pa, pb, strict=True):
        in_a, in_b = bool(ha & bit), bool(hb & bit)
        b0 = (x if x < y else y) if in_a and in_b else x if in_a else y if in_b else 0
        base.append(b0)
        rel_a.append(x - b0 if in_a else 0)
        rel_b.append(y - b0 if in_b else 0)
    return frame(*base), frame(*rel_a), frame(*rel_b)

