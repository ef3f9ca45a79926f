"""Deadlock freedom as a Promela model, for SPIN (`meshproof export --promela FILE`).

An independent cross-check of deadlock_freedom at small sizes (spec/verify.md §2): the
per-rank schedules as SPIN processes over FIFO channels, so that an explicit-state search
of every interleaving can be compared with meshproof's Kahn-network decision.

* One `chan` per directed link the schedule uses, of depth D (`[D] of { bit }`; D = 0 is
  a rendezvous channel, as IPCQ's D = 0). Its messages carry nothing: only when a send or
  recv can happen matters to deadlock.
* One `active proctype` per launched rank that sends or receives, its comm ops in program
  order: `c!0` for a send, `c?_` for a recv. Compute ops are local and never block: left
  out.
* A link towards an endpoint outside the launch has no process at its far end: its sends
  fill the queue and then block, its recvs block (machine.md §4). An op on a port the
  wiring lacks never completes: `false`.

SPIN's safety search reports a deadlock as an *invalid end state*: a process blocked
before its end. Every process ends at its last op, so an invalid end state is exactly a
reachable state where some rank is blocked forever.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshproof.errors import OptionError
from meshproof.model.channel_table import NO_LINK, ChannelTable, CommColumns, PortStatus
from meshproof.model.schedule import Schedule

MAX_RANKS = 64          # explicit-state search past this is hopeless; refuse, say why
MAX_COMM_OPS = 4_000


@dataclass(frozen=True, slots=True)
class PromelaModel:
    """The model's text and its size."""

    text: str
    processes: int
    channels: int
    comm_ops: int


def _exclusive(names: dict[int, str], cols: CommColumns, r: int, depth: int) -> list[str]:
    """`xs`/`xr`: this rank is its links' only sender / receiver (every channel has one
    writer and one reader), which lets SPIN's partial-order reduction treat its sends
    and recvs as independent of other processes. Buffered channels only (SPIN refuses
    them on rendezvous channels)."""
    if depth == 0:
        return []
    lo, hi = int(cols.start[r]), int(cols.start[r + 1])
    sends: set[str] = set()
    recvs: set[str] = set()
    for g in range(lo, hi):
        ch = int(cols.channel[g])
        if ch in names:
            (sends if cols.send[g] else recvs).add(names[ch])
    return [f"  xs {n};" for n in sorted(sends)] + [f"  xr {n};" for n in sorted(recvs)]


def _pe_name(cube: int, pe: int) -> str:
    return f"c{cube}p{pe}"


def promela_model(schedule: Schedule, table: ChannelTable, depth: int) -> PromelaModel:
    """The Promela model of `schedule` at queue depth `depth` (0: rendezvous)."""
    cols = table.cols
    active = [r for r in range(len(schedule.programs)) if cols.start[r + 1] > cols.start[r]]
    if len(active) > MAX_RANKS or cols.n > MAX_COMM_OPS:
        raise OptionError(
            f"export --promela is for small launches ({len(active)} ranks and {cols.n} comm "
            f"ops here; at most {MAX_RANKS} ranks and {MAX_COMM_OPS} comm ops): SPIN's "
            "explicit-state search would not finish; export a smaller mesh")
    names: dict[int, str] = {}
    lines = [f"/* meshproof: {schedule.launch.header(depth)} */",
             f"/* deadlock freedom at queue depth {depth}"
             f"{' (rendezvous)' if depth == 0 else ''}: spin -a, then pan; an invalid end "
             "state is a deadlock */", ""]
    for i, ch in enumerate(table.channels):
        if ch.status is PortStatus.NO_LINK or ch.orphan:
            continue
        dst = f"{_pe_name(ch.dst.cube, ch.dst.pe)}" if ch.dst else "none"
        name = f"l{i}_{_pe_name(ch.src.cube, ch.src.pe)}_{ch.dir.value}_{dst}"
        names[i] = name
        note = " /* towards an endpoint outside the launch: no process reads it */" \
            if ch.status is PortStatus.OUTSIDE else ""
        lines.append(f"chan {name} = [{depth}] of {{ bit }};{note}")
    lines.append("")
    ranks, ops, sends = cols.rank.tolist(), cols.op.tolist(), cols.send.tolist()
    status, channel = cols.status.tolist(), cols.channel.tolist()
    for r in active:
        ep = schedule.programs[r].endpoint
        lines.append(f"active proctype rank_{_pe_name(ep.cube, ep.pe)}() {{")
        lines += _exclusive(names, cols, r, depth)
        for g in range(int(cols.start[r]), int(cols.start[r + 1])):
            assert ranks[g] == r
            op = schedule.programs[r].ops[ops[g]]
            where = f"/* #{op.index} {op.kind.value} {op.dir.value if op.dir else '?'} " \
                    f"{op.source} */"
            if status[g] == NO_LINK:
                lines.append(f"  false; {where[:-3]}: no such link */")
            elif sends[g]:
                lines.append(f"  {names[channel[g]]}!0; {where}")
            else:
                lines.append(f"  {names[channel[g]]}?_; {where}")
        lines.append("}")
        lines.append("")
    return PromelaModel("\n".join(lines), len(active), len(names), cols.n)

