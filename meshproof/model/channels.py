"""Channels derived from a schedule: per directed link, its sends and recvs in order.

The k-th send on a link matches the k-th recv on its far side (FIFO, one writer, one
reader). A link is named by its sending port `(endpoint, dir)`; a recv on `(B, d)` reads
the link `(B's d-neighbour, opposite(d))`.

The table is columnar (`CommColumns`: one row per comm op, numpy arrays), so a 64x64 mesh's
three million comm ops cost a few dozen bytes each and the back-ends that walk every comm
op (legality, matching, the Kahn run, the deadlock certificate) do it with array
operations. `Channel.sends`/`recvs`, `ChannelTable.position` and `port_use` are read-only
views over the columns with the per-op records (`OpRef`, `PortUse`) the diagrams use.

This module derives the table; the table, its columns and views are channel_table.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from meshproof.model.channel_table import (
    _OPPOSITE_CODE,
    DIR_CODE,
    DIRECTIONS,
    STATUSES,
    Channel,
    ChannelTable,
    CommColumns,
    OpRef,
    PortStatus,
    PortUse,
    RefSeq,
)
from meshproof.model.schedule import Op, OpKind, Schedule
from meshproof.model.topology import Endpoint


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
    used_ports = _distinct(rank.astype(np.int64) * 4 + dcode)
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
        ends = sorted(set(_distinct(ranks[rows]).tolist()) & parent.keys())
        for r in ends[1:]:
            join(ends[0], r)
    members: dict[int, list[int]] = {}
    for r in active:
        members.setdefault(find(r), []).append(r)
    return tuple(tuple(sorted(rs)) for rs in sorted(members.values(), key=min))


def _distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values, as np.unique gives them: np.unique without an
    inverse imports numpy.ma (6 ms of every `meshproof verify`)."""
    ordered = np.sort(values, kind="stable")
    keep = np.empty(len(ordered), dtype=bool)
    keep[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _rows(refs: Sequence[OpRef]) -> np.ndarray:
    if isinstance(refs, RefSeq):
        return refs.rows
    return np.zeros(0, dtype=np.int64)


__all__ = ["communication_groups", "derive_channels"]
