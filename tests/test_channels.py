"""model/channels.py: the columnar channel table agrees with the definition of channels
(spec/schedule-ir.md §2), computed here op by op, on random programs and the built-ins."""

from __future__ import annotations

import pytest
import randprog
from helpers import trace_kernel

from meshproof.model.channel_table import PortStatus
from meshproof.model.channels import derive_channels
from meshproof.model.loader import resolve_kernel
from meshproof.model.schedule import OpKind, Schedule
from meshproof.model.topology import Direction, Endpoint

KERNEL = resolve_kernel(randprog.KERNEL_SPEC)
Port = tuple[Endpoint, Direction]


def reference(schedule: Schedule) -> dict[tuple[int, int], tuple[str, int, PortStatus,
                                                                 Endpoint | None]]:
    """Per comm op (rank, op): its channel's name, its k on it, its port status and peer,
    straight from the definition."""
    wiring, launch = schedule.wiring, schedule.launch
    sides: dict[tuple[Port, bool, bool], list[tuple[int, int]]] = {}
    out = {}
    for r, prog in enumerate(schedule.programs):
        for op in prog.ops:
            if not op.kind.is_comm:
                continue
            assert op.dir is not None
            peer = wiring.neighbour(prog.endpoint, op.dir)
            status = PortStatus.NO_LINK if peer is None else \
                PortStatus.OK if launch.is_launched(peer) else PortStatus.OUTSIDE
            send = op.kind is OpKind.SEND
            if send:
                port, orphan = (prog.endpoint, op.dir), False
            elif peer is None:
                port, orphan = (prog.endpoint, op.dir), True
            else:
                port, orphan = (peer, op.dir.opposite), False
            side = sides.setdefault((port, orphan, send), [])
            name = f"{port[0].label}_{port[1].value}" + ("_in" if orphan else "")
            out[(r, op.index)] = (name, len(side), status, peer)
            side.append((r, op.index))
    return out


def check(schedule: Schedule) -> None:
    table = derive_channels(schedule)
    want = reference(schedule)
    cols = table.cols
    assert cols.n == len(want)
    names = [ch.name for ch in table.channels]
    assert names == sorted(set(names), key=names.index)  # no channel twice
    for g in range(cols.n):
        ref = cols.ref(g)
        name, k, status, peer = want[(ref.rank, ref.op)]
        assert table.channels[int(cols.channel[g])].name == name
        assert table.position[ref] == (int(cols.channel[g]), k)
        assert table.port_use[ref].status is status and table.port_use[ref].peer == peer
        other = table.match(ref)
        ch = table.channels[int(cols.channel[g])]
        side = ch.recvs if cols.send[g] else ch.sends
        assert other == (side[k] if k < len(side) else None)
    for ch in table.channels:  # each side in program order, one writer and one reader
        for refs in (ch.sends, ch.recvs):
            assert [want[(x.rank, x.op)][1] for x in refs] == list(range(len(refs)))
            assert len({x.rank for x in refs}) <= 1


@pytest.mark.parametrize("seed", range(4))
def test_random_programs_have_the_channels_of_the_definition(seed: int) -> None:
    for ex in randprog.seeded_examples(seed, 40):
        check(randprog.trace_example(ex, KERNEL))


@pytest.mark.parametrize(("kernel", "options"), [
    ("mesh_mlo_1d", {}),
    ("mesh_mlo_2d", {"mesh": "4x4", "wiring": "cube_mesh"}),
    ("mesh_mlo_1d", {"cubes": 8, "wiring": "cube_mesh", "args": (("rank_axis", 1),)}),
    ("mesh_mlo_1d", {"pes": 4, "args": (("n_ranks", 8),)}),
    ("ring_mlo", {}),
])
def test_built_in_launches_have_the_channels_of_the_definition(
        kernel: str, options: dict[str, object]) -> None:
    check(trace_kernel(kernel, **options))
