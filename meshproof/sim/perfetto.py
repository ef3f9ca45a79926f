"""Chrome / Perfetto trace JSON of a timing run: open it at ui.perfetto.dev.

One process per rank that runs ops (named by its endpoint), one complete slice ("X") per
op spanning from when the rank reached it to when it finished (waiting included, with the
wait in its args), and one flow pair ("s" at the send, "f" at the recv) per message.
Timestamps are numbers in microseconds, as the format wants.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from meshproof.model.channels import ChannelTable
from meshproof.model.schedule import OpKind, Schedule
from meshproof.outputs import check_writable, write_text
from meshproof.sim.timing import TimingRun

PERFETTO_FLAG = "--perfetto"

_US = 1e6
_CATEGORY = {OpKind.LOAD: "dma", OpKind.STORE: "dma", OpKind.SEND: "ipcq",
             OpKind.RECV: "ipcq", OpKind.DOT: "gemm"}


def perfetto_trace(schedule: Schedule, table: ChannelTable, run: TimingRun) -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    pids: dict[int, int] = {}
    for r, evs in enumerate(run.events):
        if not evs:
            continue
        pid = len(pids) + 1
        pids[r] = pid
        ep = schedule.programs[r].endpoint
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                       "args": {"name": f"{ep.label} (cube {ep.cube}, pe {ep.pe})"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                       "args": {"sort_index": pid}})
        ops = schedule.programs[r].ops
        for e in evs:
            op = ops[e.op]
            name = op.kind.value + (f" {op.dir.value}" if op.dir is not None else "")
            events.append({
                "ph": "X", "name": name, "cat": _CATEGORY.get(op.kind, "vector"),
                "pid": pid, "tid": 0, "ts": e.ready * _US, "dur": (e.end - e.ready) * _US,
                "args": {"op": e.op, "source": str(op.source), "shape": list(op.shape),
                         "dtype": op.dtype.value, "bytes": op.nbytes,
                         "wait_us": (e.start - e.ready) * _US, "via": e.via}})
    for n, m in enumerate(run.messages):
        if m.recv is None or m.recv.rank not in pids:
            continue
        recv_ev = run.events[m.recv.rank][m.recv.op]
        send_ev = run.events[m.send.rank][m.send.op]
        flow = {"cat": "message", "name": table.channels[m.channel].name, "id": n + 1}
        # Each end must lie inside its op's slice: the send's start, the recv's start.
        events.append({**flow, "ph": "s", "pid": pids[m.send.rank], "tid": 0,
                       "ts": send_ev.start * _US})
        events.append({**flow, "ph": "f", "bp": "e", "pid": pids[m.recv.rank], "tid": 0,
                       "ts": recv_ev.start * _US})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"kernel": schedule.launch.kernel, "schema": "meshproof/perfetto-v1"}}


def check_trace_target(path: Path) -> None:
    """Fail fast, before simulating, on a trace path that cannot be written."""
    check_writable(path, PERFETTO_FLAG)


def write_trace(path: Path, trace: dict[str, Any]) -> None:
    """Write the trace JSON atomically: never a partial file."""
    check_trace_target(path)
    write_text(path, json.dumps(trace, sort_keys=True, separators=(",", ":"), allow_nan=False))
