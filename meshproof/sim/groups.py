"""Groups of ranks evaluated together, and classes of groups with the same program.

A group is one attention problem of the launch (model/problem.py: the whole launch, each
cube or each PE index, as `--groups` says) restricted to the ranks that run ops, joined
with every rank it exchanges messages with: the harness gives each group its own Q/K/V,
so messages must stay inside a group. Groups whose programs and message matching are
identical (up to which endpoints run them) form a class; a class is evaluated once with a
leading batch axis over its member groups (the headline decode panel is 64 such groups of
one class).
"""

from __future__ import annotations

from dataclasses import dataclass

from meshproof.errors import HarnessError
from meshproof.model.channel_table import ChannelTable, OpRef, PortStatus
from meshproof.model.problem import group_ranks
from meshproof.model.schedule import Op, OpKind, Schedule


@dataclass(frozen=True, slots=True)
class Group:
    """Ranks (indices into `Schedule.programs`, sorted by endpoint) that talk together."""

    index: int
    ranks: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class GroupClass:
    """Groups with one program shape. `members` are group indices, in order."""

    representative: int
    members: tuple[int, ...]


def find_groups(schedule: Schedule, table: ChannelTable) -> tuple[Group, ...]:
    """The launch's attention problems over the ranks that run ops, joined by messages;
    a message between two problems is refused (each problem has its own inputs)."""
    active = [r for r, p in enumerate(schedule.programs) if p.ops]
    problem = {r: i for i, ranks in enumerate(group_ranks(schedule, schedule.launch.groups))
               for r in ranks}
    parent = {r: r for r in active}

    def find(r: int) -> int:
        while parent[r] != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    first: dict[int, int] = {}
    for r in active:
        if problem[r] in first:
            parent[find(r)] = find(first[problem[r]])
        else:
            first[problem[r]] = r
    for ch in table.channels:
        if ch.status is not PortStatus.OK:
            continue
        ends = sorted({ref.rank for ref in (*ch.sends, *ch.recvs)} & parent.keys())
        for r in ends[1:]:
            a, b = find(ends[0]), find(r)
            if a != b:
                _refuse_crossing(schedule, ends[0], r)
    members: dict[int, list[int]] = {}
    for r in active:
        members.setdefault(find(r), []).append(r)
    units = sorted((tuple(sorted(rs)) for rs in members.values()), key=min)
    return tuple(Group(i, ranks) for i, ranks in enumerate(units))


def _refuse_crossing(schedule: Schedule, a: int, b: int) -> None:
    ea, eb = schedule.programs[a].endpoint, schedule.programs[b].endpoint
    raise HarnessError(
        f"ranks {ea.describe()} and {eb.describe()} exchange messages but belong to different "
        f"attention problems (--groups {schedule.launch.groups.value}): each problem gets its "
        "own Q, K and V, so the simulator cannot give them one input; pass --groups launch "
        "(or the grouping the kernel implements)")


def _op_key(op: Op) -> tuple[object, ...]:
    # Everything that affects evaluation; the source line and endpoints do not.
    return (op.kind, op.args, op.out, op.shape, op.dtype, op.dir, op.axis, op.keepdims,
            op.perm, op.ptr, op.offset, op.fill)


def group_signature(schedule: Schedule, table: ChannelTable, group: Group) -> tuple[object, ...]:
    local = {r: i for i, r in enumerate(group.ranks)}
    parts: list[object] = []
    for r in group.ranks:
        ops = schedule.programs[r].ops
        partners: list[object] = []
        for op in ops:
            if op.kind is OpKind.RECV:
                ref = OpRef(r, op.index)
                partner = table.match(ref, op) if ref in table.position else None
                partners.append(None if partner is None or partner.rank not in local
                                else (local[partner.rank], partner.op))
        parts.append((tuple(_op_key(op) for op in ops), tuple(partners)))
    return tuple(parts)


def group_classes(schedule: Schedule, table: ChannelTable,
                  groups: tuple[Group, ...]) -> tuple[GroupClass, ...]:
    by_sig: dict[tuple[object, ...], list[int]] = {}
    for g in groups:
        by_sig.setdefault(group_signature(schedule, table, g), []).append(g.index)
    classes = [GroupClass(ms[0], tuple(ms)) for ms in by_sig.values()]
    return tuple(sorted(classes, key=lambda c: c.representative))
