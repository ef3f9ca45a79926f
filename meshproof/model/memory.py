"""Buffer contents of one rank in program order: which store last wrote each element.

Memory is a flat buffer per pointer and per rank (spec/tl.md §2), so a load reads what the
same rank stored there before it, else the buffer's input. exactly_once_merge needs both
directions: what a load reads (a spilled partial keeps its counts), and which stores still
hold elements when the rank ends (a fully rewritten provisional store is no output).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass

from meshproof.model.schedule import Op, OpKind, RankProgram


@dataclass(frozen=True, slots=True)
class LoadSource:
    writers: tuple[Op, ...]   # the stores whose elements the load reads, in program order
    uncovered: bool           # some loaded elements were never stored: the buffer's input


class _Buffer:
    """Disjoint segments [start, end) sorted by start, each with the store that wrote it."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.writers: list[Op] = []

    def _overlap(self, lo: int, hi: int) -> tuple[int, int]:
        """Index range of the segments that intersect [lo, hi)."""
        i = bisect_right(self.starts, lo) - 1
        if i < 0 or self.ends[i] <= lo:
            i += 1
        j = bisect_right(self.starts, hi - 1)
        return i, max(i, j)

    def write(self, lo: int, hi: int, op: Op) -> None:
        i, j = self._overlap(lo, hi)
        keep_s: list[int] = []
        keep_e: list[int] = []
        keep_w: list[Op] = []
        if i < j and self.starts[i] < lo:      # the left segment survives in part
            keep_s.append(self.starts[i])
            keep_e.append(lo)
            keep_w.append(self.writers[i])
        keep_s.append(lo)
        keep_e.append(hi)
        keep_w.append(op)
        if i < j and self.ends[j - 1] > hi:    # the right segment survives in part
            keep_s.append(hi)
            keep_e.append(self.ends[j - 1])
            keep_w.append(self.writers[j - 1])
        self.starts[i:j] = keep_s
        self.ends[i:j] = keep_e
        self.writers[i:j] = keep_w

    def read(self, lo: int, hi: int) -> LoadSource:
        i, j = self._overlap(lo, hi)
        covered = sum(min(hi, self.ends[k]) - max(lo, self.starts[k]) for k in range(i, j))
        writers = {w.index: w for w in self.writers[i:j]}
        return LoadSource(tuple(writers[k] for k in sorted(writers)), covered < hi - lo)


@dataclass(frozen=True, slots=True)
class RankMemory:
    loads: dict[int, LoadSource]   # op index of every load that reads stored elements
    live_stores: frozenset[int]    # op indices of the stores that still hold elements
    # per store op index: the element ranges [lo, hi) of its buffer it still holds at the end
    live_ranges: dict[int, tuple[tuple[int, int], ...]]


def rank_memory(program: RankProgram) -> RankMemory:
    buffers: dict[str, _Buffer] = {}
    loads: dict[int, LoadSource] = {}
    for op in [o for o in program.ops if o.ptr is not None]:   # loads and stores only
        if op.kind not in (OpKind.LOAD, OpKind.STORE):
            continue
        lo, hi = op.offset, op.offset + math.prod(op.shape)
        buf = buffers.setdefault(op.ptr or "", _Buffer())
        if op.kind is OpKind.STORE:
            if hi > lo:
                buf.write(lo, hi, op)
        elif hi > lo and buf.starts:
            source = buf.read(lo, hi)
            if source.writers:
                loads[op.index] = source
    live = frozenset(w.index for buf in buffers.values() for w in buf.writers)
    ranges: dict[int, list[tuple[int, int]]] = {}
    for buf in buffers.values():
        for lo, hi, w in zip(buf.starts, buf.ends, buf.writers, strict=True):
            ranges.setdefault(w.index, []).append((lo, hi))
    return RankMemory(loads, live, {k: tuple(v) for k, v in ranges.items()})
