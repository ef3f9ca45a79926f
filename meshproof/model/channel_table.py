"""The channel table: per comm op one row of numpy columns (`CommColumns`), per directed link
its sends and recvs (`Channel`), and the read-only views with the per-op records the
diagrams use (`OpRef`, `PortUse`, `ChannelTable.position`, `port_use`). channels.py
derives it from a schedule.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import overload

import numpy as np

from meshproof.model.schedule import Op
from meshproof.model.topology import Direction, Endpoint


class PortStatus(Enum):
    OK = "ok"                    # the wiring has the port and the far end is launched
    NO_LINK = "no_link"          # the wiring has no such port: IpcqInvalidDirection
    OUTSIDE = "outside_launch"   # the far end exists but runs nothing in this launch


STATUSES = tuple(PortStatus)            # column code -> status
OK, NO_LINK, OUTSIDE = 0, 1, 2          # the codes of STATUSES
DIRECTIONS = tuple(sorted(Direction, key=lambda d: d.value))  # column code -> direction
DIR_CODE = {d: i for i, d in enumerate(DIRECTIONS)}
_OPPOSITE_CODE = np.array([DIR_CODE[d.opposite] for d in DIRECTIONS], dtype=np.int64)


@dataclass(frozen=True, slots=True)
class OpRef:
    """An op by rank index (into `Schedule.programs`) and op index."""

    rank: int
    op: int


@dataclass(frozen=True, slots=True)
class PortUse:
    """Where one comm op points: its port status and the far endpoint if any."""

    status: PortStatus
    peer: Endpoint | None


@dataclass(frozen=True, slots=True, eq=False)
class CommColumns:
    """Every comm op of a schedule, rank by rank in program order (row g = comm op g).

    `start[r]:start[r+1]` are rank r's rows; `row_of[op_base[r] + i]` is the row of op i
    of rank r (-1 for ops that are not comm ops)."""

    start: np.ndarray      # int64 [ranks + 1]
    rank: np.ndarray       # int32: the op's rank index
    op: np.ndarray         # int32: its index in the rank's program
    send: np.ndarray       # bool: send (else recv)
    dir: np.ndarray        # int8: DIRECTIONS code
    status: np.ndarray     # int8: STATUSES code of the op's port
    channel: np.ndarray    # int32: channel index
    k: np.ndarray          # int32: position on the channel
    partner: np.ndarray    # int64: row of the matching op (the k-th of the other side), -1
    port: np.ndarray       # int64: rank * 4 + dir, the op's port
    op_base: np.ndarray    # int64 [ranks + 1]: offset of rank r's ops in row_of
    row_of: np.ndarray     # int64 [all ops]
    # rows sorted by (channel, side): side 2c = recvs of channel c, 2c + 1 = its sends,
    # each in program order; side s is by_side[side_start[s]:side_start[s + 1]]
    by_side: np.ndarray    # int64
    side_start: np.ndarray  # int64 [2 * channels + 1]
    payload: np.ndarray    # int32: one id per distinct (shape, dtype, bytes) carried
    value: np.ndarray      # int32: the id of the value a send sends or a recv defines

    @property
    def n(self) -> int:
        return len(self.op)

    def row(self, ref: OpRef) -> int:
        """The row of a comm op, -1 if `ref` is not one."""
        base = self.op_base
        if not 0 <= ref.rank < len(base) - 1 or not 0 <= ref.op < base[ref.rank + 1] - \
                base[ref.rank]:
            return -1
        return int(self.row_of[base[ref.rank] + ref.op])

    def ref(self, g: int) -> OpRef:
        return OpRef(int(self.rank[g]), int(self.op[g]))

    def side(self, channel: int, sends: bool) -> np.ndarray:
        s = 2 * channel + int(sends)
        return self.by_side[self.side_start[s]:self.side_start[s + 1]]


class RefSeq(Sequence[OpRef]):
    """The ops of one side of a channel, in program order: a view over column rows."""

    __slots__ = ("_cols", "_rows")

    def __init__(self, cols: CommColumns, rows: np.ndarray) -> None:
        self._cols = cols
        self._rows = rows

    @property
    def rows(self) -> np.ndarray:
        return self._rows

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, i: int) -> OpRef: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[OpRef, ...]: ...

    def __getitem__(self, i: int | slice) -> OpRef | tuple[OpRef, ...]:
        if isinstance(i, slice):
            return tuple(self._cols.ref(int(g)) for g in self._rows[i])
        return self._cols.ref(int(self._rows[i]))

    def __iter__(self) -> Iterator[OpRef]:
        cols = self._cols
        for r, o in zip(cols.rank[self._rows].tolist(), cols.op[self._rows].tolist(),
                        strict=True):
            yield OpRef(r, o)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RefSeq):
            return self._cols is other._cols and np.array_equal(self._rows, other._rows)
        return isinstance(other, (tuple, list)) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


@dataclass(frozen=True, slots=True)
class Channel:
    """A directed link `src --dir--> dst` and the ops that use it, in program order."""

    src: Endpoint
    dir: Direction
    dst: Endpoint | None
    status: PortStatus
    sends: Sequence[OpRef]
    recvs: Sequence[OpRef]
    # True for recvs on a port the wiring lacks: then `src` is the *receiving* endpoint.
    orphan: bool = False

    @property
    def name(self) -> str:
        return f"{self.src.label}_{self.dir.value}" + ("_in" if self.orphan else "")


class _PositionView(Mapping[OpRef, tuple[int, int]]):
    """comm op -> (channel index, position k on it)."""

    __slots__ = ("_cols",)

    def __init__(self, cols: CommColumns) -> None:
        self._cols = cols

    def __getitem__(self, ref: OpRef) -> tuple[int, int]:
        g = self._cols.row(ref) if isinstance(ref, OpRef) else -1
        if g < 0:
            raise KeyError(ref)
        return int(self._cols.channel[g]), int(self._cols.k[g])

    def __contains__(self, ref: object) -> bool:
        return isinstance(ref, OpRef) and self._cols.row(ref) >= 0

    def __iter__(self) -> Iterator[OpRef]:
        cols = self._cols
        for r, o in zip(cols.rank.tolist(), cols.op.tolist(), strict=True):
            yield OpRef(r, o)

    def __len__(self) -> int:
        return self._cols.n


class _PortUseView(Mapping[OpRef, PortUse]):
    """comm op -> its port's status and far endpoint (one shared record per port)."""

    __slots__ = ("_cols", "_ports")

    def __init__(self, cols: CommColumns, ports: dict[int, PortUse]) -> None:
        self._cols = cols
        self._ports = ports

    def __getitem__(self, ref: OpRef) -> PortUse:
        g = self._cols.row(ref) if isinstance(ref, OpRef) else -1
        if g < 0:
            raise KeyError(ref)
        return self._ports[int(self._cols.port[g])]

    def __contains__(self, ref: object) -> bool:
        return isinstance(ref, OpRef) and self._cols.row(ref) >= 0

    def __iter__(self) -> Iterator[OpRef]:
        return iter(_PositionView(self._cols))

    def __len__(self) -> int:
        return self._cols.n


@dataclass(frozen=True, slots=True, eq=False)
class ChannelTable:
    """Every channel of a schedule, and for each comm op its channel, position and port."""

    channels: tuple[Channel, ...]
    cols: CommColumns
    ports: dict[int, PortUse]     # rank * 4 + dir code -> the port's use

    def channel_status(self) -> np.ndarray:
        """Per channel its STATUSES code."""
        return np.array([STATUSES.index(ch.status) for ch in self.channels], dtype=np.int8)

    @property
    def position(self) -> Mapping[OpRef, tuple[int, int]]:
        """Per comm op (rank, op): its channel index and its position k on the channel."""
        return _PositionView(self.cols)

    @property
    def port_use(self) -> Mapping[OpRef, PortUse]:
        return _PortUseView(self.cols, self.ports)

    def match(self, ref: OpRef, op: Op | None = None) -> OpRef | None:
        """The op on the other side of `ref`'s message, if there is one."""
        g = self.cols.row(ref)
        if g < 0:
            raise KeyError(ref)
        p = int(self.cols.partner[g])
        return self.cols.ref(p) if p >= 0 else None
