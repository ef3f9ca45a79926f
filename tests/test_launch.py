"""Launches: grid, cube_start, launch-filled arguments, --arg parsing, panels."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from helpers import kernel_spec, trace_kernel
from hypothesis import given, settings
from hypothesis import strategies as st

from meshproof.cli.options import parse_arg
from meshproof.deploy.launches import resolve_launches
from meshproof.errors import ConfigError, LaunchError, TopologyError, WiringError
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.schedule import GroupMode, Harness, OpKind
from meshproof.model.topology import Direction, Endpoint, System
from meshproof.model.trace import trace
from meshproof.panels import (
    ALL_PANEL_NAMES,
    CAUSAL_PANEL_NAMES,
    PANEL_NAMES,
    PANELS,
    SCALES,
    get_panel,
)


def offsets(sched: Any, ep: Endpoint) -> list[int]:
    prog = sched.program(ep)
    assert prog is not None
    return [op.offset for op in prog.ops if op.kind is OpKind.LOAD]


def test_program_id_1_is_the_physical_cube_id() -> None:
    sched = trace_kernel(kernel_spec("probes.py::program_ids_kernel"), cubes=8, cube_start=8,
                         pes=2, wiring="cube_mesh")
    assert [p.endpoint for p in sched.programs] == \
        [Endpoint(c, pe) for c in range(8, 16) for pe in range(2)]
    for cube in range(8, 16):
        for pe in range(2):
            # program_id(0), program_id(1), num_programs(0), num_programs(1)
            assert offsets(sched, Endpoint(cube, pe)) == [pe, cube, 2, 8]


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.data())
def test_program_ids_for_random_placements(sips: int, pes: int, data: st.DataObject) -> None:
    system = System(sips, 2, 2, 4)
    start = data.draw(st.integers(0, system.n_cubes - 1))
    cubes = data.draw(st.integers(1, system.n_cubes - start))
    sched = trace_kernel(kernel_spec("probes.py::program_ids_kernel"), system=system,
                         cubes=cubes, cube_start=start, pes=pes, wiring="cube_mesh")
    assert len(sched.programs) == cubes * pes
    for prog in sched.programs:
        assert start <= prog.endpoint.cube < start + cubes
        assert offsets(sched, prog.endpoint) == [prog.endpoint.pe, prog.endpoint.cube, pes, cubes]


def launch_args(**opts: Any) -> list[int]:
    sched = trace_kernel(kernel_spec("probes.py::launch_args_kernel"), **opts)
    first = sched.active[0].endpoint
    return [o - 1 for o in offsets(sched, first)]  # n_ranks, cube_start, mesh_rows, mesh_cols


def test_launch_filled_arguments() -> None:
    assert launch_args(pes=6) == [6, 0, 0, 0]                        # rank_axis 0: n = pes
    assert launch_args(cubes=4, cube_start=4, wiring="cube_mesh",
                       args=(("rank_axis", 1),)) == [4, 4, 0, 0]    # rank_axis 1: n = cubes
    assert launch_args(mesh="2x3", cube_start=2, wiring="cube_mesh",
                       args=(("rank_axis", 1),)) == [6, 2, 2, 3]    # --mesh sets cubes, rows, cols
    # an explicit --arg wins over the launch
    assert launch_args(pes=6, args=(("n_ranks", 3), ("cube_start", 5))) == [3, 5, 0, 0]


def test_mesh_and_cubes() -> None:
    ref = resolve_kernel("mesh_mlo_2d")
    spec = build_launch(ref, LaunchOptions()).spec  # built-in default mesh 2x4
    assert (spec.n_cubes, spec.arg("mesh_rows"), spec.arg("mesh_cols")) == (8, 2, 4)
    spec = build_launch(ref, LaunchOptions(mesh="1x4", cube_start=12)).spec
    assert (spec.n_cubes, spec.cube_start, spec.cubes) == (4, 12, range(12, 16))
    with pytest.raises(TopologyError, match="malformed mesh '2x'"):
        build_launch(ref, LaunchOptions(mesh="2x"))
    with pytest.raises(LaunchError, match=r"cubes 12\.\.19 do not fit the system 1x4x4"):
        build_launch(ref, LaunchOptions(mesh="2x4", cube_start=12))


def test_builtin_defaults_and_overrides() -> None:
    ref = resolve_kernel("mesh_mlo_1d")
    spec = build_launch(ref, LaunchOptions()).spec
    assert dict(spec.args) == {"S_q": 1, "S_kv_per_rank": 16, "h_q": 1, "h_kv": 1, "d_head": 8,
                               "n_ranks": 8, "rank_axis": 0, "cube_start": 0, "sm_scale": None,
                               "msg_dtype": "f32", "p_dtype": "f16", "key_tile": None}
    launch = build_launch(ref, LaunchOptions(args=(("S_q", 3), ("n_ranks", 4))))
    assert launch.spec.arg("S_q") == 3 and launch.spec.arg("n_ranks") == 4
    # call args follow the kernel's parameter order; pointers are not among them
    assert [n for n, _ in launch.call_args] == ["S_q", "S_kv_per_rank", "h_q", "h_kv", "d_head",
                                                "n_ranks", "rank_axis", "cube_start", "sm_scale",
                                                "msg_dtype", "p_dtype", "key_tile"]
    assert spec.queue_depth == 4 and spec.sharded == ("k_ptr", "v_ptr")
    assert spec.wiring == "pe_line" and spec.harness is Harness.DECODE
    assert spec.kernel_file == "meshproof/kernels/mesh_mlo.py"


def test_launch_errors() -> None:
    ref = resolve_kernel(kernel_spec("broken.py::needs_arg_kernel"))
    with pytest.raises(LaunchError) as info:
        build_launch(ref, LaunchOptions())
    assert str(info.value).endswith("needs argument(s) width: pass --arg width=VALUE")
    with pytest.raises(LaunchError, match=r"has no parameter\(s\) heigth; its parameters: "
                                          "x_ptr, width"):
        build_launch(ref, LaunchOptions(args=(("heigth", 1),)))
    with pytest.raises(LaunchError, match="x_ptr are buffers that meshproof provides"):
        build_launch(ref, LaunchOptions(args=(("x_ptr", 1), ("width", 1))))
    with pytest.raises(LaunchError, match="--sharded names k_ptr, which are not buffer"):
        build_launch(ref, LaunchOptions(args=(("width", 1),), sharded=("k_ptr",)))
    # the default --sharded is ignored by kernels without k_ptr / v_ptr
    assert build_launch(ref, LaunchOptions(args=(("width", 1),))).spec.sharded == ()
    mlo = resolve_kernel("mesh_mlo_1d")
    for opts, match in [(LaunchOptions(pes=0), "--pes 0 launches no PE: launch 1..8"),
                        (LaunchOptions(pes=9), "--pes 9 does not fit"),
                        (LaunchOptions(cubes=0), "--cubes 0 is out of range 1..4096"),
                        (LaunchOptions(cubes=100000), "--cubes 100000 is out of range"),
                        (LaunchOptions(cubes=17), r"cubes 0\.\.16 do not fit the system"),
                        (LaunchOptions(cube_start=-1), r"cubes -1\.\.-1 do not fit"),
                        (LaunchOptions(queue_depth=-1), "queue depth -1 is out of range"),
                        (LaunchOptions(queue_depth=1 << 17), "out of range 0..65536")]:
        with pytest.raises(LaunchError, match=match):
            build_launch(mlo, opts)
    assert build_launch(mlo, LaunchOptions(queue_depth=0)).spec.queue_depth == 0
    with pytest.raises(WiringError, match="unknown wiring 'ring'"):
        build_launch(mlo, LaunchOptions(wiring="ring"))


def test_launch_spec_queries_and_json() -> None:
    ref = resolve_kernel("mesh_mlo_1d")
    spec = build_launch(ref, LaunchOptions(cubes=2, cube_start=3, pes=4,
                                           args=(("rank_axis", 1),), wiring="cube_ring")).spec
    assert spec.is_launched(Endpoint(3, 3)) and spec.is_launched(Endpoint(4, 0))
    assert not spec.is_launched(Endpoint(5, 0)) and not spec.is_launched(Endpoint(3, 4))
    assert spec.to_json() == {
        "kernel": "mesh_mlo_1d", "kernel_file": "meshproof/kernels/mesh_mlo.py",
        "wiring": "cube_ring", "system": "1x4x4", "pes": 4, "cubes": 2, "cube_start": 3,
        "args": {"S_q": 1, "S_kv_per_rank": 16, "cube_start": 3, "d_head": 8, "h_kv": 1,
                 "h_q": 1, "n_ranks": 2, "rank_axis": 1, "sm_scale": None,
                 "msg_dtype": "f32", "p_dtype": "f16", "key_tile": None},
        "queue_depth": 4, "sharded": ["k_ptr", "v_ptr"], "harness": "decode",
        "groups": "launch", "outputs": ["o_ptr"], "softmax_scale": None, "empty_shards": []}


def test_cube_ring_wiring_closes_over_the_launched_cubes() -> None:
    ref = resolve_kernel("ring_mlo")
    launch = build_launch(ref, LaunchOptions(wiring="cube_ring", cubes=4, cube_start=6,
                                             args=(("rank_axis", 1),)))
    w = launch.wiring
    assert w.neighbour(Endpoint(9, 0), Direction.E) == Endpoint(6, 0)
    assert w.neighbour(Endpoint(6, 0), Direction.W) == Endpoint(9, 0)
    assert w.neighbour(Endpoint(5, 0), Direction.E) is None


@pytest.mark.parametrize("item,expected", [
    ("n_ranks=8", ("n_ranks", 8)), ("sm_scale=1.5", ("sm_scale", 1.5)),
    ("flag=False", ("flag", False)), ("name='x'", ("name", "x")), ("name=x", ("name", "x")),
    ("v=None", ("v", None)), ("v=-3", ("v", -3)), ("v=1e3", ("v", 1000.0)),
    ("expr=a=b", ("expr", "a=b")), (" S_q = 16", ("S_q", 16)), ("empty=", ("empty", "")),
    ("v=0x10", ("v", 16)),
])
def test_parse_arg_python_literals_falling_back_to_strings(item: str,
                                                           expected: tuple[str, object]) -> None:
    name, value = parse_arg(item)
    assert (name, value) == expected
    assert type(value) is type(expected[1])


@pytest.mark.parametrize("item,match", [
    ("n_ranks", "is not NAME=VALUE"), ("=3", "is not NAME=VALUE"),
    ("2x=3", "is not NAME=VALUE"), ("v=[1, 2]", "only numbers, booleans, strings and None"),
    ("v={'a': 1}", "only numbers"), ("v=(1,)", "only numbers"),
])
def test_parse_arg_rejects(item: str, match: str) -> None:
    with pytest.raises(LaunchError, match=match):
        parse_arg(item)


def _resolve(**kw: Any) -> Any:
    """The one launch the keys describe (as any front end resolves them)."""
    (one,) = resolve_launches(LaunchOptions.from_mapping(kw, "test")).launches
    return one


def test_resolve_launch_panel_presets_and_overrides() -> None:
    ref, launch = _resolve(panel="multi_user_decode")
    spec = launch.spec
    assert (ref.name, spec.wiring, spec.n_cubes, spec.arg("mesh_rows"), spec.arg("mesh_cols"),
            spec.arg("rank_axis")) == ("mesh_mlo_2d", "cube_mesh", 4, 1, 4, 1)
    ref, launch = _resolve(panel="single_user_decode", args={"S_kv_per_rank": 8},
                           queue_depth=2)
    assert launch.spec.arg("S_kv_per_rank") == 8 and launch.spec.arg("n_ranks") == 8
    assert launch.spec.queue_depth == 2
    # another kernel than the panel's is a choice the user did not see: an error
    with pytest.raises(LaunchError, match="both choose the kernel"):
        _resolve(kernel="mesh_mlo_1d_recv_first", panel="single_user_decode")
    _, launch = _resolve(kernel="mesh_mlo_1d", panel="single_user_decode")
    assert launch.spec.kernel == "mesh_mlo_1d"
    with pytest.raises(LaunchError, match="name a KERNEL"):
        _resolve()
    with pytest.raises(LaunchError, match="unknown panel 'decode'"):
        _resolve(panel="decode")
    with pytest.raises(LaunchError, match="unknown scale 'big'"):
        get_panel("single_user_decode", "big")
    # --pes launches the first N PEs of 8-PE cubes, with or without a panel
    _, launch = _resolve(kernel="mesh_mlo_1d", system="2x4x4", pes=4)
    assert launch.spec.system == System(2, 4, 4, 8) and launch.spec.pes == 4
    _, launch = _resolve(kernel="mesh_mlo_1d", pes=4)
    assert launch.spec.system == System(1, 4, 4, 8) and launch.spec.pes == 4
    assert launch.wiring.neighbour(Endpoint(0, 3), Direction.E) == Endpoint(0, 4)
    _, launch = _resolve(panel="single_user_decode", pes=4)
    assert launch.spec.system == System(1, 4, 4, 8) and launch.spec.pes == 4
    _, launch = _resolve(kernel="mesh_mlo_1d", pes=16)
    assert launch.spec.system == System(1, 4, 4, 16) and launch.spec.pes == 16


def test_panels_table_matches_the_study() -> None:
    assert PANEL_NAMES == ("single_user_prefill", "multi_user_prefill", "single_user_decode",
                           "multi_user_decode")
    expected = {  # kernel, wiring, S_q, n_ranks, rank_axis (DESIGN §7)
        "single_user_prefill": ("mesh_kv", "pe_line", 16, 8, 0),
        "multi_user_prefill": ("mesh_kv", "cube_mesh", 16, 4, 1),
        "single_user_decode": ("mesh_mlo_1d", "pe_line", 1, 8, 0),
        "multi_user_decode": ("mesh_mlo_2d", "cube_mesh", 1, 4, 1),
    }
    for name, (kernel, wiring, s_q, n, axis) in expected.items():
        p = PANELS["validation"][name]
        assert (p.kernel, p.wiring, p.S_q, p.n_ranks, p.rank_axis) == (kernel, wiring, s_q, n, axis)
    assert PANELS["validation"]["multi_user_decode"].mesh == (1, 4)
    # headline multi-user: all 8 kv groups at once, on 2x4 sub-meshes at cube_start 0 and 8
    # of each of 4 SIPs; decode is batch on batch (PE p of every cube serves user p)
    for name, kernel, wiring, users in (
            ("multi_user_decode", "mesh_mlo_2d_batch", "cube_mesh_all_pes", 8),
            ("multi_user_prefill", "mesh_kv_snake", "cube_mesh", 1)):
        head = PANELS["headline"][name]
        assert (head.kernel, head.wiring, head.mesh, head.cubes, head.users) == \
            (kernel, wiring, (2, 4), 8, users)
        assert head.launches == (0, 8, 16, 24, 32, 40, 48, 56) and head.is_deployment
        assert head.groups is (GroupMode.PE if users == 8 else GroupMode.LAUNCH)


def test_the_causal_panels_are_the_naive_and_zigzag_rings_at_1m_tokens() -> None:
    assert CAUSAL_PANEL_NAMES == ("causal_prefill_naive", "causal_prefill_zigzag")
    assert ALL_PANEL_NAMES == PANEL_NAMES + CAUSAL_PANEL_NAMES
    for name, layout in zip(CAUSAL_PANEL_NAMES, ("naive", "zigzag"), strict=True):
        head = get_panel(name, "headline")
        assert (head.kernel, head.wiring, head.cubes, head.n_ranks) == \
            (f"ring_prefill_causal_{layout}", "pe_ring", 64, 8)
        args = dict(head.args)
        assert args["S_q"] == args["S_kv_per_rank"] == (1 << 20) // 8
        assert (args["h_q"], args["h_kv"], args["d_head"]) == (1, 1, 128)
        assert head.groups is GroupMode.CUBE and head.system.n_cubes == 64


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("name", ALL_PANEL_NAMES)
def test_every_panel_traces(name: str, scale: str) -> None:
    panel = get_panel(name, scale)
    ref = resolve_kernel(panel.kernel)
    sched = trace(ref, build_launch(ref, panel.launch_options()))
    active = sched.active
    n_cubes = sched.launch.n_cubes
    if panel.rank_axis == 1:
        # PEs 0..users-1 of every launched cube serve a user each; the others return at once
        assert [p.endpoint.pe for p in active] == list(range(panel.users)) * panel.n_ranks
    else:
        assert len(active) == panel.n_ranks * n_cubes
    gemms = sum(1 for p in active for op in p.ops if op.kind is OpKind.DOT)
    if "decode" in name:
        assert gemms == 2 * len(active)  # exactly 2 GEMMs per rank (2 * n_ranks per ring)
    comm = [op for p in active for op in p.comm_ops]
    assert comm and all(op.source.line > 0 for op in comm)
    sends = sum(1 for op in comm if op.kind is OpKind.SEND)
    assert sends == len(comm) - sends  # every message sent is received somewhere


def test_2d_kernel_that_ignores_cube_start_sends_out_of_its_launch() -> None:
    from meshproof.model.channel_table import PortStatus
    from meshproof.model.channels import derive_channels

    good = trace_kernel("mesh_mlo_2d", mesh="2x4", cube_start=8, wiring="cube_mesh")
    bad = trace_kernel("mesh_mlo_2d_physical_rank", mesh="2x4", cube_start=8,
                       wiring="cube_mesh")
    good_use = derive_channels(good).port_use
    assert {u.status for u in good_use.values()} == {PortStatus.OK}
    outside = {(bad.programs[ref.rank].endpoint, u.peer)
               for ref, u in derive_channels(bad).port_use.items()
               if u.status is PortStatus.OUTSIDE}
    # physical rank 8 is row 2 of a 2-row mesh: it talks N to cube 4, outside the launch
    assert (Endpoint(8, 0), Endpoint(4, 0)) in outside
    assert all(peer is not None and peer.cube < 8 for _, peer in outside)


def test_an_unknown_harness_is_a_launch_error() -> None:
    ref = resolve_kernel("mesh_mlo_1d")
    with pytest.raises(ConfigError, match=r"^test: harness 'chat' is not a harness: use one "
                                          r"of decode, prefill$"):
        LaunchOptions.from_mapping({"harness": "chat"}, "test")
    prefill = LaunchOptions.from_mapping({"harness": "prefill"}, "test")
    assert build_launch(ref, prefill).spec.harness is Harness.PREFILL
    with pytest.raises(LaunchError, match=r"unknown harness 'chat' for mesh_mlo_1d; the "
                                          r"simulator has decode, prefill"):
        build_launch(replace(ref, harness="chat"), LaunchOptions())


def test_sm_scale_and_softmax_scale_must_agree() -> None:
    # --arg sm_scale=0.5 --softmax-scale 0.25 used 0.5 without a word.
    ref = resolve_kernel("mesh_mlo_1d")
    with pytest.raises(LaunchError, match=r"--arg sm_scale=0\.5 and --softmax-scale 0\.25 "
                       r"disagree: the kernel would scale its scores by 0\.5 and the "
                       r"reference by 0\.25"):
        build_launch(ref, LaunchOptions(args=(("sm_scale", 0.5),), softmax_scale=0.25))
    launch = build_launch(ref, LaunchOptions(args=(("sm_scale", 0.25),), softmax_scale=0.25))
    assert dict(launch.call_args)["sm_scale"] == 0.25
    assert dict(build_launch(ref, LaunchOptions(softmax_scale=0.25)).call_args)["sm_scale"] \
        == 0.25
