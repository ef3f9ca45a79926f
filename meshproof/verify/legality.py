"""direction_legality and launch_confinement: every port used exists and stays inside.

Both are decided by enumerating the schedule's finite set of comm ops against the wiring
table: the enumeration is the proof (no search is involved, so no solver is needed). The
enumeration is one array comparison over the channel table's columns; only the ops that
break a property are looked at one by one.
"""

from __future__ import annotations

import time

import numpy as np

from meshproof.model.channel_table import NO_LINK, OUTSIDE, ChannelTable, OpRef
from meshproof.model.topology import Endpoint
from meshproof.verify.properties import CheckContext, Property
from meshproof.verify.result import Counterexample, Diagnostic, PropertyResult, Role, Status


def _refs_with(table: ChannelTable, status: int) -> list[OpRef]:
    """The comm ops whose port has `status`, in rank and program order."""
    cols = table.cols
    return [cols.ref(int(g)) for g in np.flatnonzero(cols.status == status)]


def direction_legality(ctx: CheckContext) -> PropertyResult:
    start = time.perf_counter()
    schedule, table = ctx.schedule, ctx.channels
    wiring = schedule.wiring
    diags: list[Diagnostic] = []
    for ref in _refs_with(table, NO_LINK):
        prog = schedule.programs[ref.rank]
        op = prog.ops[ref.op]
        assert op.dir is not None
        reason = wiring.missing_link_reason(prog.endpoint, op.dir)
        diags.append(Diagnostic(
            f"{op.kind.value} {op.dir.value} uses a link the wiring does not have "
            f"(IpcqInvalidDirection): {reason}", Role.ILLEGAL, op.source, prog.endpoint,
            op.index, op.kind, op.dir))
    seconds = time.perf_counter() - start
    if not diags:
        return PropertyResult(Property.DIRECTION_LEGALITY, Status.PROVED,
                              f"all {table.cols.n} send/recv ops use links of {wiring.name}",
                              seconds=seconds, certificate="enumeration of comm ops")
    dirs: dict[Endpoint, set[str]] = {}
    for d in diags:
        if d.endpoint is not None and d.dir is not None:
            dirs.setdefault(d.endpoint, set()).add(d.dir.value)
    ranks = sorted(dirs)
    summary = (f"{len(diags)} op(s) on {len(ranks)} rank(s) use links {wiring.name} lacks: "
               + ", ".join(f"cube {e.cube} pe {e.pe} {'/'.join(sorted(dirs[e]))}"
                           for e in ranks))
    return PropertyResult(Property.DIRECTION_LEGALITY, Status.VIOLATED, summary,
                          Counterexample(summary, tuple(diags)), seconds,
                          "enumeration of comm ops")


def launch_confinement(ctx: CheckContext) -> PropertyResult:
    start = time.perf_counter()
    schedule, table = ctx.schedule, ctx.channels
    launch = schedule.launch
    diags: list[Diagnostic] = []
    port_use = table.port_use
    for ref in _refs_with(table, OUTSIDE):
        use = port_use[ref]
        prog = schedule.programs[ref.rank]
        op = prog.ops[ref.op]
        assert op.dir is not None and use.peer is not None
        verb = "sends to" if op.kind.value == "send" else "receives from"
        diags.append(Diagnostic(
            f"{op.kind.value} {op.dir.value} {verb} {use.peer.describe()}, which is outside "
            f"the launch (cubes {launch.cube_start}..{launch.cube_start + launch.n_cubes - 1}"
            f", pes 0..{launch.pes - 1}) and runs nothing", Role.OUTSIDE, op.source,
            prog.endpoint, op.index, op.kind, op.dir, use.peer))
    seconds = time.perf_counter() - start
    if not diags:
        return PropertyResult(Property.LAUNCH_CONFINEMENT, Status.PROVED,
                              f"all {table.cols.n} send/recv ops stay inside the launch",
                              seconds=seconds, certificate="enumeration of comm ops")
    pairs = sorted({(d.endpoint, d.dir.value, d.peer) for d in diags
                    if d.endpoint and d.dir and d.peer})
    summary = f"{len(diags)} op(s) leave the launch: " + ", ".join(
        f"cube {e.cube} pe {e.pe} {d} -> cube {p.cube} pe {p.pe}" for e, d, p in pairs)
    from meshproof.verify.details import ConfinementDetails  # for a counterexample only

    outside = ConfinementDetails(tuple(sorted({p for _, _, p in pairs})))
    return PropertyResult(Property.LAUNCH_CONFINEMENT, Status.VIOLATED, summary,
                          Counterexample(summary, tuple(diags), outside),
                          seconds, "enumeration of comm ops")
