"""Channels derived from a schedule: per directed link, its sends and recvs in order.

The k-th send on a link matches the k-th recv on its far side (FIFO, one writer, one
reader). A link is named by its sending port `(endpoint, dir)`; a recv on `(B, d)` reads
the link `(B's d-neighbour, opposite(d))`.

The table is columnar (`CommColumns`: one row per comm op, numpy arrays), so a 64x64 mesh's
three million comm ops cost a few dozen bytes each and the back-ends that walk every comm
op (legality, matching, the Kahn run, the deadlock certificate) do it with array
operations. `Channel.sends`/`recvs`, `ChannelTable.position` and `port_use` are read-only
views over the columns with the per-op records (`OpRef`, `PortUse`) the diagrams use.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import overload

import numpy as np

from meshproof.model.schedule import Op, OpKind, Schedule
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


def _op_codes(schedule: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """Per op of every rank (concatenated): -1, or for a comm op 4 * is_send + direction
    code + 8 * payload id + 2**32 * the value id it sends or defines; and the offset of
    each rank's ops. Equal ops are shared objects across ranks (model/tracer.py's
    OpTable), so codes are computed per distinct op, by identity."""
    code_of: dict[int, int] = {}
    payloads: dict[tuple[object, ...], int] = {}
    chunks: list[np.ndarray] = []
    base = [0]
    for prog in schedule.programs:
        ids = list(map(id, prog.ops))
        get = code_of.get
        codes = [get(i, -2) for i in ids]
        if -2 in codes:
            for i, op in zip(ids, prog.ops, strict=True):
                if i not in code_of:
                    code_of[i] = _code(op, payloads)
            codes = [code_of[i] for i in ids]
        chunks.append(np.array(codes, dtype=np.int64))
        base.append(base[-1] + len(codes))
    flat = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)
    return flat, np.array(base, dtype=np.int64)


def _code(op: Op, payloads: dict[tuple[object, ...], int]) -> int:
    if not op.kind.is_comm:
        return -1
    assert op.dir is not None
    payload = payloads.setdefault((op.shape, op.dtype, op.nbytes), len(payloads))
    if op.kind is OpKind.SEND:
        args = op.value_args
        value = args[0] if args else 0
    else:
        value = op.out or 0
    return (4 if op.kind is OpKind.SEND else 0) + DIR_CODE[op.dir] + 8 * payload + \
        (value << 32)


def derive_channels(schedule: Schedule) -> ChannelTable:
    wiring, launch = schedule.wiring, schedule.launch
    programs = schedule.programs
    n_ranks = len(programs)
    codes, op_base = _op_codes(schedule)
    comm_pos = np.flatnonzero(codes >= 0)
    rank = (np.searchsorted(op_base, comm_pos, side="right") - 1).astype(np.int32)
    op = (comm_pos - op_base[rank]).astype(np.int32)
    c = codes[comm_pos]
    send, dcode = (c & 4) > 0, c & 3
    row_of = np.full(len(codes), -1, dtype=np.int64)
    row_of[comm_pos] = np.arange(len(comm_pos))
    start = np.searchsorted(rank, np.arange(n_ranks + 1), side="left").astype(np.int64)
    # Ports: per (rank, dir) the far endpoint and its status, looked up once each.
    eps = [p.endpoint for p in programs]
    used_ports = np.unique(rank.astype(np.int64) * 4 + dcode)
    ports: dict[int, PortUse] = {}
    peer_key = np.full(n_ranks * 4, -1, dtype=np.int64)
    status = np.zeros(n_ranks * 4, dtype=np.int8)
    pes = 1 + max([launch.pes - 1, *(e.pe for e in eps)], default=0)
    for p in used_ports.tolist():
        ep, d = eps[p // 4], DIRECTIONS[p % 4]
        peer = wiring.neighbour(ep, d)
        st = PortStatus.NO_LINK if peer is None else \
            PortStatus.OUTSIDE if not launch.is_launched(peer) else PortStatus.OK
        ports[p] = PortUse(st, peer)
        status[p] = STATUSES.index(st)
        if peer is not None:
            pes = max(pes, peer.pe + 1)
    for p, use in ports.items():
        if use.peer is not None:
            peer_key[p] = use.peer.cube * pes + use.peer.pe
    port = rank.astype(np.int64) * 4 + dcode
    op_status = status[port]
    # A channel is named by its sending port (endpoint key * 4 + dir code): a send's own
    # port, a recv's peer's port back; a recv on a port the wiring lacks has no sender and
    # is keyed on the receiver's side (after every real channel) so that it still shows up
    # (as NO_LINK) instead of vanishing.
    own_key = np.array([e.cube * pes + e.pe for e in eps], dtype=np.int64)
    send_key = own_key[rank] * 4 + dcode
    recv_peer = peer_key[port]
    recv_key = recv_peer * 4 + _OPPOSITE_CODE[dcode]
    orphan = ~send & (recv_peer < 0)
    top = (own_key.max(initial=0) + peer_key.max(initial=0) + 2) * 4
    key = np.where(send, send_key, np.where(orphan, top + send_key, recv_key))
    keys, channel = np.unique(key, return_inverse=True)
    channel = channel.astype(np.int32)
    # k: the op's position among the sends (or recvs) of its channel, in program order
    # (one writer and one reader per channel: row order is program order).
    group = channel.astype(np.int64) * 2 + send
    order = np.argsort(group, kind="stable")
    sorted_group = group[order]
    first = np.searchsorted(sorted_group, sorted_group, side="left")
    k = np.empty(len(order), dtype=np.int32)
    k[order] = np.arange(len(order)) - first
    partner = _partners(group, k, order, sorted_group)
    side_start = np.searchsorted(sorted_group, np.arange(2 * len(keys) + 1), side="left")
    cols = CommColumns(start, rank, op, send, dcode.astype(np.int8), op_status, channel, k,
                       partner, port, op_base, row_of, order.astype(np.int64),
                       side_start.astype(np.int64), ((c & 0xFFFFFFFF) >> 3).astype(np.int32),
                       (c >> 32).astype(np.int32))
    channels = _channels(schedule, cols, keys, top, pes)
    return ChannelTable(channels, cols, ports)


def _partners(group: np.ndarray, k: np.ndarray, order: np.ndarray,
              sorted_group: np.ndarray) -> np.ndarray:
    """Per row, the row of the k-th op on the other side of its channel (-1 if none)."""
    other = group ^ 1
    lo = np.searchsorted(sorted_group, other, side="left")
    hi = np.searchsorted(sorted_group, other, side="right")
    has = k < hi - lo
    partner = np.full(len(group), -1, dtype=np.int64)
    partner[has] = order[(lo + k)[has]]
    return partner


def _channels(schedule: Schedule, cols: CommColumns, keys: np.ndarray, top: int,
              pes: int) -> tuple[Channel, ...]:
    wiring, launch = schedule.wiring, schedule.launch
    out: list[Channel] = []
    for i, key in enumerate(keys.tolist()):
        is_orphan = key >= top
        base = key - top if is_orphan else key
        src, d = Endpoint(base // 4 // pes, base // 4 % pes), DIRECTIONS[base % 4]
        recvs = RefSeq(cols, cols.side(i, False))
        sends = RefSeq(cols, cols.side(i, True))
        if is_orphan:
            # Named by the receiving port, with no source: nobody can ever write it.
            out.append(Channel(src, d, None, PortStatus.NO_LINK, sends, recvs, orphan=True))
            continue
        dst = wiring.neighbour(src, d)
        if dst is None:
            st = PortStatus.NO_LINK
        elif not launch.is_launched(dst) or not launch.is_launched(src):
            st = PortStatus.OUTSIDE
        else:
            st = PortStatus.OK
        out.append(Channel(src, d, dst, st, sends, recvs))
    return tuple(out)


def communication_groups(schedule: Schedule, table: ChannelTable) -> tuple[tuple[int, ...], ...]:
    """Connected components over the ranks that run ops, joined by the wiring's links
    between two such ranks (and by every channel whose both ends are launched and wired).

    Components follow the *wiring*, not just the messages actually exchanged: a kernel
    that forgot to communicate must still be judged against every shard it could reach
    (else "each rank merges its own shard once" would pass). Independent rings of one
    launch (64 cubes each running its own 8-PE line) stay separate because no link joins
    them. Ordered by their first rank; ranks sorted."""
    active = [r for r, p in enumerate(schedule.programs) if p.ops]
    parent = {r: r for r in active}
    index = {schedule.programs[r].endpoint: r for r in active}

    def find(r: int) -> int:
        while parent[r] != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    def join(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    for link in schedule.wiring.links:
        if link.src in index and link.dst in index:
            join(index[link.src], index[link.dst])
    ranks = table.cols.rank
    for ch in table.channels:
        if ch.status is not PortStatus.OK:
            continue
        rows = np.concatenate([_rows(ch.sends), _rows(ch.recvs)])
        ends = sorted(set(np.unique(ranks[rows]).tolist()) & parent.keys())
        for r in ends[1:]:
            join(ends[0], r)
    members: dict[int, list[int]] = {}
    for r in active:
        members.setdefault(find(r), []).append(r)
    return tuple(tuple(sorted(rs)) for rs in sorted(members.values(), key=min))


def _rows(refs: Sequence[OpRef]) -> np.ndarray:
    if isinstance(refs, RefSeq):
        return refs.rows
    return np.zeros(0, dtype=np.int64)
