"""Groups of ranks that communicate, and classes of groups with the same program.

A group is a connected component of the channel graph over the ranks that run ops: its
ranks exchange messages only among themselves, so the harness gives each group its own
Q/K/V and the simulator evaluates each group on its own. Groups whose programs and
message matching are identical (up to which endpoints run them) form a class; a class
is evaluated once with a leading batch axis over its member groups (the headline decode
panel is 64 such groups of one class).
"""

from __future__ import annotations

from dataclasses import dataclass

from meshproof.model.channels import ChannelTable, OpRef, communication_groups
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
    """Connected components over ranks with ops (model.channels.communication_groups)."""
    return tuple(Group(i, ranks)
                 for i, ranks in enumerate(communication_groups(schedule, table)))


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
