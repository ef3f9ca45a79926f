"""Placement search: every cube_start of one launch, every property; one shared trace
only when the kernel reads its placement as program_id(1) - cube_start."""

from __future__ import annotations

import pytest
from helpers import kernel_spec

from meshproof.deploy.placements import (
    PlacementSearch,
    describe_cubes,
    placement_starts,
    search_placements,
    trace_placements,
)
from meshproof.model.launch import LaunchOptions
from meshproof.model.loader import resolve_kernel
from meshproof.model.topology import System
from meshproof.model.trace import trace
from meshproof.panels import HEADLINE_SYSTEM
from meshproof.verify.api import verify

SIP = System()          # one 4x4 SIP, 8 PEs per cube
SHAPES = (("S_kv_per_rank", 8), ("d_head", 4), ("h_q", 1), ("h_kv", 1), ("S_q", 1))


def _search(kernel: str, system: System = SIP, mesh: str | None = "2x4",
            retrace: bool = False, **kw: object) -> PlacementSearch:
    opts = LaunchOptions.from_mapping({"system": system, "mesh": mesh, "args": SHAPES, **kw},
                                      "test")
    return search_placements(resolve_kernel(kernel), opts, trace, verify, retrace=retrace)


def _probe(name: str) -> PlacementSearch:
    opts = LaunchOptions(system=SIP, mesh="2x4", args=SHAPES, wiring="cube_mesh")
    return search_placements(resolve_kernel(kernel_spec(f"placement_probes.py::{name}")),
                             opts, trace, verify)


def test_row_then_column_2x4_on_one_sip_is_legal_at_0_4_8_only() -> None:
    search = _search("mesh_mlo_2d")
    assert [r.cube_start for r in search.rows] == list(range(9))
    assert search.legal == (0, 4, 8)
    assert search.relocated  # one trace served the nine placements
    bad = {r.cube_start: r for r in search.rows if not r.ok}
    assert set(bad) == {1, 2, 3, 5, 6, 7}
    # a launch over three rows: the row ends have no E/W link (IpcqInvalidDirection)
    assert bad[1].violated[0] == "direction_legality"
    assert bad[1].message.startswith("direction_legality: meshproof/kernels/mesh_mlo.py:")
    assert "rank (cube 3, pe 0): error: send E" in bad[1].message
    # the proved placements after the first carry its proofs, by relocation
    assert [r.carried_from for r in search.rows if r.ok] == [None, 0, 0]


def test_a_numeric_verdict_no_placement_changes_is_reported_once_not_per_placement(
        ) -> None:
    """f16 messages at |inputs| <= 16: numeric_safety is violated (a rounding witness) at
    every placement, and no placement can change it; the kernel is legal where its
    protocol is."""
    opts = LaunchOptions(system=SIP, mesh="2x4", args=(*SHAPES, ("msg_dtype", "f16")))
    search = search_placements(resolve_kernel("mesh_mlo_2d"), opts, trace, verify)
    assert search.legal == (0, 4, 8) and search.undecided == ()
    assert search.independent_at == 0 and search.shared_by == (0, 4, 8)
    numeric = {p.name.value: p for p in search.independent}["numeric_safety"]
    assert numeric.status.value == "violated"
    assert search.independent_text().startswith(
        "judged once, at cube_start 0, for every legal placement (the same dataflow): "
        "exactly_once_merge proved; attention_equivalence proved; numeric_safety violated: "
        "with ")
    # an illegal placement stays illegal, by what the placement changes
    assert search.rows[1].violated[0] == "direction_legality"
    assert all("numeric_safety" not in r.violated for r in search.rows)
    assert search.rows[0].message == "all 4 placement properties proved"


def test_a_placement_that_computes_differently_is_judged_there() -> None:
    """Realistic mistake: the same messages over the same links, but exp2 for exp at
    cube_start 4 only; the shared semantic verdict must not cover it."""
    search = _probe("exp2_at_four")
    assert search.legal == (0, 8) and search.shared_by == (0, 8)
    at4 = search.rows[4]
    assert at4.own_dataflow and at4.violated == ("attention_equivalence",)
    assert at4.message.startswith("attention_equivalence: tests/kernels/placement_probes.py:")


def test_the_variant_that_ignores_cube_start_is_legal_only_at_0() -> None:
    search = _search("mesh_mlo_2d_physical_rank")
    assert search.legal == (0,)
    assert not search.relocated and "int" in search.traced_how   # it calls int(program_id)
    at8 = search.rows[8]
    assert at8.violated[:1] == ("launch_confinement",)
    assert "send N sends to (cube 4, pe 0), which is outside the launch" in at8.message


@pytest.fixture(scope="module")
def headline_2d() -> PlacementSearch:
    return _search("mesh_mlo_2d", HEADLINE_SYSTEM)


def _headline_legal() -> tuple[int, ...]:
    return tuple(16 * sip + start for sip in range(4) for start in (0, 4, 8))


def test_2x4_on_the_headline_system_is_legal_at_rows_0_1_and_2_of_each_sip(
        headline_2d: PlacementSearch) -> None:
    assert len(headline_2d.rows) == 57
    assert headline_2d.legal == _headline_legal()


@pytest.mark.scale
@pytest.mark.parametrize("kernel", ["mesh_mlo_2d_batch", "mesh_kv_snake"])
def test_the_new_2x4_kernels_on_the_headline_system(kernel: str) -> None:
    assert _search(kernel, HEADLINE_SYSTEM).legal == _headline_legal()


def test_a_launch_across_a_sip_boundary_is_illegal(headline_2d: PlacementSearch) -> None:
    row = headline_2d.rows[12]   # SIP 0 row 3 + SIP 1 row 0
    assert row.cubes_text() == "SIP 0 row 3 cols 0-3; SIP 1 row 0 cols 0-3"
    assert not row.ok and row.violated[0] == "direction_legality"


def test_pe_level_kernels_are_legal_at_every_cube() -> None:
    search = _search("mesh_mlo_1d", mesh=None, cubes=1)
    assert search.legal == tuple(range(16)) and search.relocated


@pytest.mark.parametrize("probe", ["special_at_eight", "swallows_the_signal"])
def test_a_kernel_that_branches_on_cube_start_is_traced_at_every_placement(
        probe: str) -> None:
    """Realistic mistake the relocation must not hide: correct except at cube 8."""
    search = _probe(probe)
    assert not search.relocated and "cube_start via __eq__" in search.traced_how
    assert search.legal == (0, 4)        # at 8 it computes rows 2..3 and leaves its launch
    assert "launch_confinement" in search.rows[8].violated


def test_int_of_program_id_is_traced_at_every_placement_and_still_correct() -> None:
    search = _probe("int_of_program_id")
    assert not search.relocated and "via __int__" in search.traced_how
    assert search.legal == (0, 4, 8)


def test_a_kernel_that_tells_types_apart_is_caught_by_the_comparison() -> None:
    search = _probe("tells_types_apart")
    assert not search.relocated and "traces differently" in search.traced_how
    assert search.legal == (0, 4, 8)


@pytest.mark.parametrize("kernel", ["mesh_mlo_2d", "mesh_mlo_2d_batch", "mesh_kv_snake",
                                    kernel_spec("placement_probes.py::special_at_eight")])
def test_every_shared_trace_equals_the_normal_trace_there(kernel: str) -> None:
    ref = resolve_kernel(kernel)
    launches = placement_starts(ref, LaunchOptions(system=SIP, mesh="2x4", args=SHAPES,
                                                   wiring="cube_mesh"))
    traces = trace_placements(ref, launches, trace, track_cube_start=True)
    for launch, schedule in zip(launches, traces.schedules, strict=True):
        assert schedule == trace(ref, launch)


def test_retrace_verifies_every_placement_from_scratch() -> None:
    search = _search("mesh_mlo_2d", retrace=True)
    assert search.legal == (0, 4, 8) and not search.relocated
    assert all(r.carried_from is None for r in search.rows)


def test_placements_json_has_exactly_the_issue_keys() -> None:
    doc = _search("mesh_mlo_2d").to_json()
    assert set(doc) == {"schema", "placements", "placement_independent"} and \
        doc["schema"] == "meshproof/placements-v1"
    assert doc["placement_independent"]["cube_start"] == 0
    # numeric_safety is proved within the simulator's 1e-2 (issue 27), reported once
    assert [p["status"] for p in doc["placement_independent"]["properties"]] == \
        ["proved", "proved", "proved"]
    for p in doc["placements"]:
        assert set(p) == {"cube_start", "cubes", "ok", "violated", "message"}
        assert p["cubes"] == list(range(p["cube_start"], p["cube_start"] + 8))
    first = doc["placements"][0]
    assert first["ok"] and first["violated"] == [] and first["message"] == \
        "all 4 placement properties proved"


def test_describe_cubes_names_sips_rows_and_columns() -> None:
    assert describe_cubes(SIP, tuple(range(8))) == "SIP 0 rows 0-1 cols 0-3"
    assert describe_cubes(SIP, tuple(range(1, 9))) == \
        "SIP 0 row 0 cols 1-3, row 1 cols 0-3, row 2 col 0"
    assert describe_cubes(HEADLINE_SYSTEM, (15, 16)) == "SIP 0 row 3 col 3; SIP 1 row 0 col 0"


def test_in_a_trace_child_the_relocatable_trace_says_the_same() -> None:
    """As every command traces: the relocatable trace runs in the child process too."""
    from meshproof.model.isolation import IsolatedTracer

    opts = LaunchOptions(system=SIP, mesh="2x4", args=SHAPES, wiring="cube_mesh")
    good = search_placements(resolve_kernel("mesh_mlo_2d"), opts, IsolatedTracer(), verify)
    assert good.relocated and good.legal == (0, 4, 8)
    probe = resolve_kernel(kernel_spec("placement_probes.py::special_at_eight"))
    bad = search_placements(probe, opts, IsolatedTracer(), verify)
    assert not bad.relocated and "cube_start via __eq__" in bad.traced_how
    assert bad.legal == (0, 4)
