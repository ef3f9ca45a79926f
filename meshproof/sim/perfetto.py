"""Chrome / Perfetto trace JSON of a timing run: open it at ui.perfetto.dev or in Chrome
DevTools' Performance panel.

- One process per rank that runs ops (named by its endpoint), with one named thread
  (`tid` 1, `thread_name` "ops"): tid 0 is what viewers use for "no thread", and an
  unnamed track reads as noise.
- One complete slice ("X") per op, from when the rank reached it to when it finished
  (waiting included, with the wait in its args).
- One flow per message: "s" inside the send's slice and "f" (`bp: "e"`, bound to the
  enclosing slice) inside the recv's, both in the middle of the op's execution and in
  the slices' category (`ipcq`). Viewers bind a flow end to the slice that encloses it
  in the same category; an end exactly on a slice boundary, or in another category,
  binds to nothing (Chrome draws no arrow) or to the neighbouring slice.
- Counter tracks ("C") of queue occupancy per link, in the sending rank's process: a
  message holds its slot from the start of its send to the end of its recv, as in the
  timing model, so a link at its depth D (a near-deadlock) is a flat top at D.
- Timestamps and durations in microseconds, rounded to whole nanoseconds.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from meshproof.model.channel_table import ChannelTable
from meshproof.model.schedule import OpKind, Schedule
from meshproof.outputs import check_writable, write_text
from meshproof.sim.timing import OpEvent, TimingRun

PERFETTO_FLAG = "--perfetto"
PERFETTO_SCHEMA = "meshproof/perfetto-v1"
OPS_TID = 1

_CATEGORY = {OpKind.LOAD: "dma", OpKind.STORE: "dma", OpKind.SEND: "ipcq",
             OpKind.RECV: "ipcq", OpKind.DOT: "gemm"}


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


def _us(ns: int) -> float:
    """Whole nanoseconds as microseconds (what the format's `ts` and `dur` are in)."""
    return ns / 1000


def _mid(ev: OpEvent) -> int:
    """The middle of the op's execution (after any wait): inside its slice, never on an
    edge when it runs 2 ns or more, and a send's middle comes before its recv's (the
    recv cannot start before the message has arrived)."""
    return (_ns(ev.start) + _ns(ev.end)) // 2


def _rank_events(schedule: Schedule, run: TimingRun) -> tuple[list[dict[str, Any]],
                                                               dict[int, int]]:
    events: list[dict[str, Any]] = []
    pids: dict[int, int] = {}
    for r, evs in enumerate(run.events):
        if not evs:
            continue
        pid = len(pids) + 1
        pids[r] = pid
        ep = schedule.programs[r].endpoint
        events += [
            {"ph": "M", "name": "process_name", "pid": pid, "tid": OPS_TID,
             "args": {"name": f"{ep.label} (cube {ep.cube}, pe {ep.pe})"}},
            {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": OPS_TID,
             "args": {"sort_index": pid}},
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": OPS_TID,
             "args": {"name": "ops"}},
            {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": OPS_TID,
             "args": {"sort_index": 0}}]
        ops = schedule.programs[r].ops
        for e in evs:
            op = ops[e.op]
            name = op.kind.value + (f" {op.dir.value}" if op.dir is not None else "")
            ready, end = _ns(e.ready), _ns(e.end)
            events.append({
                "ph": "X", "name": name, "cat": _CATEGORY.get(op.kind, "vector"),
                "pid": pid, "tid": OPS_TID, "ts": _us(ready), "dur": _us(end - ready),
                "args": {"op": e.op, "source": str(op.source), "shape": list(op.shape),
                         "dtype": op.dtype.value, "bytes": op.nbytes,
                         "wait_us": _us(_ns(e.start) - ready), "via": e.via}})
    return events, pids


def _flows(table: ChannelTable, run: TimingRun, pids: dict[int, int]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for n, m in enumerate(run.messages):
        if m.recv is None or m.recv.rank not in pids:
            continue
        send_ev = run.events[m.send.rank][m.send.op]
        recv_ev = run.events[m.recv.rank][m.recv.op]
        flow = {"cat": "ipcq", "name": table.channels[m.channel].name, "id": n + 1}
        events.append({**flow, "ph": "s", "pid": pids[m.send.rank], "tid": OPS_TID,
                       "ts": _us(_mid(send_ev))})
        events.append({**flow, "ph": "f", "bp": "e", "pid": pids[m.recv.rank],
                       "tid": OPS_TID, "ts": _us(_mid(recv_ev))})
    return events


def _queue_counters(schedule: Schedule, table: ChannelTable, run: TimingRun,
                    pids: dict[int, int], depth: int) -> list[dict[str, Any]]:
    """Occupancy of every link that carried a message: +1 when a send starts (it took a
    slot), -1 when its recv ends (the slot is free again)."""
    if depth < 1:
        return []  # rendezvous: nothing is ever queued
    deltas: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for m in run.messages:
        deltas[m.channel][_ns(run.events[m.send.rank][m.send.op].start)] += 1
        if m.recv is not None:
            deltas[m.channel][_ns(run.events[m.recv.rank][m.recv.op].end)] -= 1
    events: list[dict[str, Any]] = []
    for ch_i in sorted(deltas):
        ch = table.channels[ch_i]
        sender = ch.sends[0].rank if ch.sends else None
        if sender is None or sender not in pids:
            continue
        dst = ch.dst.label if ch.dst is not None else "?"
        name = f"queue {ch.dir.value} -> {dst} (depth {depth})"
        level = 0
        points = [(0, 0), *sorted(deltas[ch_i].items())]
        for ts, delta in points:
            level += delta
            events.append({"ph": "C", "name": name, "pid": pids[sender], "tid": OPS_TID,
                           "ts": _us(ts), "args": {"messages": level}})
    return events


def perfetto_trace(schedule: Schedule, table: ChannelTable, run: TimingRun,
                   queue_depth: int | None = None) -> dict[str, Any]:
    """The trace of `run` (timed at `queue_depth`, default the launch's)."""
    depth = schedule.launch.queue_depth if queue_depth is None else queue_depth
    events, pids = _rank_events(schedule, run)
    events += _flows(table, run, pids)
    events += _queue_counters(schedule, table, run, pids, depth)
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"kernel": schedule.launch.kernel, "schema": PERFETTO_SCHEMA,
                          "queue_depth": depth}}


def check_trace_target(path: Path) -> None:
    """Fail fast, before simulating, on a trace path that cannot be written."""
    check_writable(path, PERFETTO_FLAG)


def write_trace(path: Path, trace: dict[str, Any]) -> None:
    """Write the trace JSON atomically: never a partial file."""
    check_trace_target(path)
    write_text(path, json.dumps(trace, sort_keys=True, separators=(",", ":"), allow_nan=False))
