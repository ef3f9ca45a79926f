"""The Perfetto / Chrome trace (sim/perfetto.py) against the trace-event format's rules:
flows bound to their slices, named threads with tid >= 1, whole-ns timestamps, and
queue-occupancy counters per link."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from helpers import trace_kernel

from meshproof.model.channels import derive_channels
from meshproof.sim.api import simulate
from meshproof.sim.config import SimConfig
from meshproof.sim.perfetto import perfetto_trace, write_trace

TIMING_ONLY = SimConfig(numerics=False)
PHASES = {"X", "M", "s", "f", "C"}
METADATA = {"process_name", "process_sort_index", "thread_name", "thread_sort_index"}


def _whole_ns(us: float) -> bool:
    return abs(us * 1000 - round(us * 1000)) < 1e-6


def check_trace_events(doc: dict[str, Any]) -> list[str]:
    """Every rule of the trace-event format this trace relies on; the broken ones."""
    bad: list[str] = []
    events = doc["traceEvents"]
    if doc.get("displayTimeUnit") not in ("ms", "ns"):
        bad.append("displayTimeUnit must be ms or ns")
    named_threads, named_procs = set(), set()
    slices: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        ph = e.get("ph")
        if ph not in PHASES:
            bad.append(f"unknown phase {ph!r}")
            continue
        if not (isinstance(e.get("pid"), int) and e["pid"] >= 1 and
                isinstance(e.get("tid"), int) and e["tid"] >= 1):
            bad.append(f"pid/tid must be integers >= 1: {e}")
        if ph == "M":
            if e["name"] not in METADATA or "args" not in e:
                bad.append(f"bad metadata event {e}")
            if e["name"] == "thread_name":
                named_threads.add((e["pid"], e["tid"]))
            if e["name"] == "process_name":
                named_procs.add(e["pid"])
            continue
        if not (isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0 and _whole_ns(e["ts"])):
            bad.append(f"ts must be a non-negative whole number of ns: {e}")
        if ph == "X":
            if not (e["dur"] >= 0 and _whole_ns(e["dur"]) and e.get("cat") and e.get("name")):
                bad.append(f"bad complete event {e}")
            slices[(e["pid"], e["tid"])].append(e)
        if ph == "C" and not all(isinstance(v, (int, float)) for v in e["args"].values()):
            bad.append(f"counter args must be numbers: {e}")
    for key in slices:
        if key not in named_threads or key[0] not in named_procs:
            bad.append(f"thread {key} has slices but no thread_name / process_name")
    bad += _check_flows(events, slices)
    return bad


def _enclosing(slices: list[dict[str, Any]], e: dict[str, Any]) -> list[dict[str, Any]]:
    """Slices of the flow's category that hold its ts strictly inside (not on an edge)."""
    ts = round(e["ts"] * 1000)
    return [x for x in slices if x["cat"] == e["cat"] and
            round(x["ts"] * 1000) < ts < round((x["ts"] + x["dur"]) * 1000)]


def _check_flows(events: list[dict[str, Any]],
                 slices: dict[tuple[int, int], list[dict[str, Any]]]) -> list[str]:
    bad: list[str] = []
    ends: dict[str, dict[Any, dict[str, Any]]] = {"s": {}, "f": {}}
    for e in events:
        if e["ph"] in ends:
            if e["id"] in ends[e["ph"]]:
                bad.append(f"flow id {e['id']} used twice for {e['ph']}")
            ends[e["ph"]][e["id"]] = e
    if set(ends["s"]) != set(ends["f"]):
        bad.append("every flow start needs one end with the same id")
    for fid, s in ends["s"].items():
        f = ends["f"].get(fid)
        if f is None:
            continue
        if (s["cat"], s["name"]) != (f["cat"], f["name"]) or f.get("bp") != "e" or \
                s["ts"] > f["ts"]:
            bad.append(f"flow {fid}: ends disagree or go back in time")
        for end in (s, f):
            if len(_enclosing(slices[(end["pid"], end["tid"])], end)) != 1:
                bad.append(f"flow {fid} {end['ph']} is not inside exactly one slice of its "
                           "category")
    return bad


def _trace(kernel: str, **options: object) -> tuple[dict[str, Any], int]:
    schedule = trace_kernel(kernel, **options)
    result = simulate(schedule, TIMING_ONLY)
    assert result.run is not None
    return perfetto_trace(schedule, derive_channels(schedule), result.run), \
        result.op_log.ipcq_send


def test_the_fan_out_trace_follows_the_format() -> None:
    doc, sends = _trace("mesh_mlo_1d")
    assert check_trace_events(doc) == []
    assert sum(1 for e in doc["traceEvents"] if e["ph"] == "s") == sends == 168


def test_the_2d_trace_follows_the_format_and_names_every_track() -> None:
    doc, _ = _trace("mesh_mlo_2d", mesh="2x4", wiring="cube_mesh")
    assert check_trace_events(doc) == []
    threads = [e for e in doc["traceEvents"] if e["name"] == "thread_name"]
    assert threads and all(e["tid"] == 1 and e["args"]["name"] == "ops" for e in threads)


def _counters(doc: dict[str, Any]) -> dict[tuple[int, str], list[int]]:
    tracks: dict[tuple[int, str], list[int]] = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "C":
            tracks[(e["pid"], e["name"])].append(e["args"]["messages"])
    return tracks


def test_queue_counters_show_a_link_filling_to_its_depth() -> None:
    """At D = 3 the fan-out's three sends per direction fill the queue: the near-deadlock
    is a counter at its depth."""
    doc, _ = _trace("mesh_mlo_1d", queue_depth=3)
    tracks = _counters(doc)
    assert tracks and all(name.startswith("queue ") and "(depth 3)" in name
                          for _, name in tracks)
    assert all(min(v) >= 0 and max(v) <= 3 and v[-1] == 0 for v in tracks.values())
    assert max(max(v) for v in tracks.values()) == 3
    timestamps = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "C":
            timestamps[(e["pid"], e["name"])].append(e["ts"])
    assert all(ts == sorted(ts) for ts in timestamps.values())


def test_the_trace_file_is_deterministic(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for path in (a, b):
        write_trace(path, _trace("ring_mlo", wiring="pe_ring")[0])
    assert a.read_bytes() == b.read_bytes()
    assert check_trace_events(json.loads(a.read_text(encoding="utf-8"))) == []
