"""Issue 3's acceptance cases: the reference kernels, right and deliberately wrong.

Each case goes through the Python API (trace -> verify) and, where the CLI adds something
(exit codes, printed diagnostics), through `meshproof verify` in-process as well.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO_ROOT, WIDE_TOLERANCE, CliResult, line_of, trace_kernel

from meshproof.kernels import mesh_mlo
from meshproof.model.schedule import OpKind
from meshproof.model.topology import Direction, Endpoint
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.details import ConfinementDetails, DeadlockDetails, MergeCount, MergeDetails
from meshproof.verify.properties import Property
from meshproof.verify.result import Diagnostic, Role, Status, Verdict

Run = Callable[[Sequence[str]], CliResult]
MLO_FILE = Path(mesh_mlo.__file__)
MLO_DISPLAY = "meshproof/kernels/mesh_mlo.py"
SEED_ARGS = (("S_q", 1), ("S_kv_per_rank", 16), ("h_q", 1), ("h_kv", 1), ("d_head", 8))


@cache
def verdict_of(kernel: str, depth: int | None = None, **options: Any) -> Verdict:
    """Verdicts are pure functions of (kernel, launch, D): share them between tests."""
    schedule = trace_kernel(kernel, **options)
    # numeric_safety at a stated tolerance: the built-ins' rounding bounds (2.6e-2..3.3e-2
    # at these shapes) are above the simulator's 1e-2 (test_numeric_safety.py pins that)
    return verify(schedule, VerifyConfig(queue_depth=depth, rounding_tolerance=WIDE_TOLERANCE))


def status(verdict: Verdict, name: str) -> Status:
    return verdict.property(name).status


def diagnostics(verdict: Verdict, name: str) -> tuple[Diagnostic, ...]:
    cx = verdict.property(name).counterexample
    assert cx is not None, f"{name} has no counterexample"
    return cx.diagnostics


def assert_all_proved(verdict: Verdict) -> None:
    assert [p.name for p in verdict.properties] == list(Property)
    bad = {p.name: (p.status.value, p.message) for p in verdict.properties
           if p.status is not Status.PROVED}
    assert not bad
    assert verdict.ok and verdict.exit_code == 0


def source_line(d: Diagnostic) -> tuple[str, int]:
    assert d.source is not None, d
    return d.source.file, d.source.line


# --- mesh_mlo_1d on an 8-PE line -----------------------------------------------------------

def test_mesh_mlo_1d_line_proved_at_depth_3() -> None:
    v = verdict_of("mesh_mlo_1d", queue_depth=3)
    assert v.launch.queue_depth == 3 and v.launch.pes == 8 and v.launch.wiring == "pe_line"
    assert_all_proved(v)
    assert v.min_queue_depth == 3
    assert v.rendezvous is Status.VIOLATED
    dl = v.property("deadlock_freedom")
    assert "order certificate" in dl.certificate and dl.counterexample is None


def test_mesh_mlo_1d_line_deadlocks_at_depth_2_listing_blocked_ranks() -> None:
    v = verdict_of("mesh_mlo_1d", queue_depth=2)
    assert v.violated() == (Property.DEADLOCK_FREEDOM,)
    assert v.exit_code == 1 and v.min_queue_depth == 3
    cx = v.property("deadlock_freedom").counterexample
    assert cx is not None and isinstance(cx.details, DeadlockDetails)
    assert cx.details.queue_depth == 2
    blocked = cx.details.blocked
    assert [b.endpoint for b in blocked] == [Endpoint(0, pe) for pe in range(8)]
    # D=2: every rank sends its 3-message triplet first, so it blocks on the third send
    third_send = line_of(MLO_FILE, "tl.send(dir=direction, src=t[2])")
    assert {b.op for b in blocked} == {OpKind.SEND}
    assert {str(b.source) for b in blocked} == {f"{MLO_DISPLAY}:{third_send}"}
    assert cx.to_json()["blocked"][0] == {
        "cube": 0, "pe": 0, "op_index": blocked[0].op_index, "op": "send",
        "dir": blocked[0].dir.value if blocked[0].dir else None,
        "source": f"{MLO_DISPLAY}:{third_send}"}
    diags = cx.diagnostics
    assert [(d.endpoint.cube, d.endpoint.pe) for d in diags if d.endpoint] == \
        [(0, pe) for pe in range(8)]
    for d in diags:
        assert d.role is Role.BLOCKED and source_line(d) == (MLO_DISPLAY, third_send)
        assert re.fullmatch(rf"{MLO_DISPLAY}:{third_send}: rank \(cube 0, pe [0-7]\): error: "
                            r"blocked at send [EW] \(message 2\): .*", d.format()), d.format()
    cycle = cx.details.wait_for_cycle
    assert len(cycle) >= 2 and all(c.cube == 0 for c in cycle)
    assert cx.to_json()["wait_for_cycle"] == [[c.cube, c.pe] for c in cycle]


def test_mesh_mlo_1d_line_rendezvous_deadlocks() -> None:
    v = verdict_of("mesh_mlo_1d", queue_depth=0)
    assert v.violated() == (Property.DEADLOCK_FREEDOM,)
    assert v.rendezvous is Status.VIOLATED
    assert verdict_of("mesh_mlo_1d", queue_depth=3).rendezvous is Status.VIOLATED


def test_verify_config_depth_overrides_the_launch() -> None:
    schedule = trace_kernel("mesh_mlo_1d", queue_depth=3)
    assert status(verify(schedule, VerifyConfig(queue_depth=2)), "deadlock_freedom") is \
        Status.VIOLATED
    assert status(verify(schedule), "deadlock_freedom") is Status.PROVED


def test_mesh_mlo_1d_line_cli(run_cli: Run) -> None:
    ok = run_cli(["verify", "mesh_mlo_1d", "--queue-depth", "3", "--tolerance", "0.1"])
    assert ok.code == 0, ok.out + ok.err
    # at the simulator's tolerance too: its rounding bound is 1.2e-3·max|V| (issue 27)
    assert run_cli(["verify", "mesh_mlo_1d", "--queue-depth", "3"]).code == 0
    assert "min_queue_depth: 3" in ok.out
    bad = run_cli(["verify", "mesh_mlo_1d", "--queue-depth", "2"])
    assert bad.code == 1 and bad.err == ""
    blocked = re.findall(rf"^{MLO_DISPLAY}:\d+: rank \(cube 0, pe (\d)\): error: blocked at send",
                         bad.out, re.M)
    assert sorted(blocked) == [str(pe) for pe in range(8)]


# --- mesh_mlo_1d over 8 cubes of a 4x4 SIP ---------------------------------------------------

CUBE_LINE = {"wiring": "cube_mesh", "cubes": 8, "args": (("rank_axis", 1),)}


def test_mesh_mlo_1d_on_cube_mesh_uses_missing_links_at_cubes_3_and_4() -> None:
    v = verdict_of("mesh_mlo_1d", **CUBE_LINE)
    assert status(v, "direction_legality") is Status.VIOLATED
    diags = diagnostics(v, "direction_legality")
    assert {(d.endpoint.cube, d.endpoint.pe, d.dir) for d in diags if d.endpoint} == \
        {(3, 0, Direction.E), (4, 0, Direction.W)}
    lines = set(range(line_of(MLO_FILE, "tl.send(dir=direction, src=t[0])"),
                      line_of(MLO_FILE, 'o = tl.recv(dir=direction') + 1))
    for d in diags:
        file, line = source_line(d)
        assert file == MLO_DISPLAY and line in lines
        assert d.role is Role.ILLEGAL and d.op_kind in (OpKind.SEND, OpKind.RECV)
    by_cube = {d.endpoint.cube: d for d in diags if d.endpoint}
    assert "cube 4 (SIP 0, row 1, col 0)" in by_cube[4].message
    assert "no W link" in by_cube[4].message and "IpcqInvalidDirection" in by_cube[4].message
    assert "no E link" in by_cube[3].message
    # both directions of the broken hop, sends and recvs, on both sides
    assert {(d.endpoint.cube, d.op_kind) for d in diags if d.endpoint} == \
        {(3, OpKind.SEND), (3, OpKind.RECV), (4, OpKind.SEND), (4, OpKind.RECV)}
    assert status(v, "launch_confinement") is Status.PROVED
    assert v.exit_code == 1


def test_mesh_mlo_1d_on_cube_mesh_cli_json_lists_both(run_cli: Run) -> None:
    import json

    r = run_cli(["verify", "mesh_mlo_1d", "--wiring", "cube_mesh", "--cubes", "8", "--arg",
                 "rank_axis=1", "--json"])
    assert r.code == 1
    prop = {p["name"]: p for p in json.loads(r.out)["properties"]}["direction_legality"]
    assert prop["status"] == "violated"
    found = {(d["cube"], d["dir"]) for d in prop["counterexample"]["diagnostics"]}
    assert found == {(3, "E"), (4, "W")}
    assert all(re.fullmatch(rf"{MLO_DISPLAY}:\d+", d["source"])
               for d in prop["counterexample"]["diagnostics"])


def test_mesh_mlo_1d_on_cube_mesh_cli_text_lists_both_with_lines(run_cli: Run) -> None:
    r = run_cli(["verify", "mesh_mlo_1d", "--wiring", "cube_mesh", "--cubes", "8", "--arg",
                 "rank_axis=1"])
    assert r.code == 1
    section = r.out.split("\ndirection_legality:", 1)[1].split("\n\n", 1)[0]
    for cube, d in ((3, "E"), (4, "W")):  # both ranks, each with file:line
        assert re.search(rf"^{MLO_DISPLAY}:\d+: rank \(cube {cube}, pe 0\): error: \w+ {d} uses "
                         "a link the wiring does not have", section, re.M), (cube, d)


# --- mesh_mlo_2d and the cube_start bug ------------------------------------------------------

@pytest.mark.parametrize(("mesh", "cube_start", "system"), [
    ("1x4", 0, None), ("2x4", 0, None), ("4x4", 0, None), ("2x4", 8, None), ("2x4", 16, "2x4x4"),
])
def test_mesh_mlo_2d_proved(mesh: str, cube_start: int, system: str | None) -> None:
    from meshproof.model.topology import parse_system

    opts: dict[str, Any] = {"mesh": mesh, "cube_start": cube_start}
    if system:
        opts["system"] = parse_system(system)
    v = verdict_of("mesh_mlo_2d", **opts)
    assert v.launch.cube_start == cube_start and v.launch.wiring == "cube_mesh"
    assert_all_proved(v)
    assert v.min_queue_depth == 3


def test_mesh_mlo_2d_physical_rank_leaves_its_launch() -> None:
    v = verdict_of("mesh_mlo_2d_physical_rank", mesh="2x4", cube_start=8)
    assert status(v, "launch_confinement") is Status.VIOLATED
    assert status(v, "deadlock_freedom") is Status.VIOLATED
    assert status(v, "direction_legality") is Status.PROVED
    diags = diagnostics(v, "launch_confinement")
    hops = {(d.endpoint.cube, d.dir, (d.peer.cube, d.peer.pe)) for d in diags
            if d.endpoint and d.peer}
    assert (8, Direction.N, (4, 0)) in hops
    assert all(peer[0] < 8 and d is Direction.N for _, d, peer in hops)
    first = next(d for d in diags if d.endpoint and d.endpoint.cube == 8 and
                 d.op_kind is OpKind.SEND)
    assert "(cube 4, pe 0), which is outside the launch" in first.message
    assert source_line(first)[0] == MLO_DISPLAY
    cx = v.property("launch_confinement").counterexample
    assert cx is not None and isinstance(cx.details, ConfinementDetails)
    assert Endpoint(4, 0) in cx.details.outside_endpoints
    assert [4, 0] in cx.to_json()["outside_endpoints"]
    assert v.min_queue_depth is None and v.exit_code == 1


# --- ring_mlo -------------------------------------------------------------------------------

def test_ring_mlo_proved_on_pe_ring() -> None:
    v = verdict_of("ring_mlo", wiring="pe_ring")
    assert_all_proved(v)


def test_ring_mlo_wraparound_is_illegal_on_pe_line() -> None:
    v = verdict_of("ring_mlo", wiring="pe_line")
    assert status(v, "direction_legality") is Status.VIOLATED
    diags = diagnostics(v, "direction_legality")
    assert {(d.endpoint.pe, d.dir) for d in diags if d.endpoint} == \
        {(7, Direction.E), (0, Direction.W)}
    assert all(d.source is not None and d.source.file == MLO_DISPLAY for d in diags)


# --- the known-bad merges and orders ---------------------------------------------------------

def merge_counts(v: Verdict) -> tuple[MergeCount, ...]:
    cx = v.property("exactly_once_merge").counterexample
    assert cx is not None and isinstance(cx.details, MergeDetails)
    return cx.details.counts


def test_forward_running_state_merges_twice() -> None:
    small = verdict_of("mesh_mlo_1d_forward_running_state", pes=3)
    assert small.violated() == (Property.EXACTLY_ONCE_MERGE, Property.ATTENTION_EQUIVALENCE)
    counts = merge_counts(small)
    assert any(c.numerator == 2 and c.denominator == 2 for c in counts)
    assert all(c.numerator != 1 for c in counts)
    diag = diagnostics(small, "exactly_once_merge")[0]
    assert diag.role is Role.MERGE and "merged more than once" in diag.message
    assert re.fullmatch(rf"{MLO_DISPLAY}:\d+: rank \(cube 0, pe \d\): error: output counts the "
                        r"partial of shard \(cube 0, pe \d\) \(key rows \d+\.\.\d+\) 2 "
                        r"time\(s\) .*", diag.format())
    full = verdict_of("mesh_mlo_1d_forward_running_state")
    assert full.violated() == (Property.EXACTLY_ONCE_MERGE, Property.ATTENTION_EQUIVALENCE)
    assert all(c.numerator >= 2 for c in merge_counts(full))


@pytest.mark.parametrize("depth", [0, 2, 16])
def test_recv_first_deadlocks_at_every_depth(depth: int) -> None:
    v = verdict_of("mesh_mlo_1d_recv_first", queue_depth=depth)
    assert status(v, "deadlock_freedom") is Status.VIOLATED
    assert v.min_queue_depth is None and v.rendezvous is Status.VIOLATED
    cx = v.property("deadlock_freedom").counterexample
    assert cx is not None and isinstance(cx.details, DeadlockDetails)
    assert {b.op for b in cx.details.blocked} == {OpKind.RECV}


def test_mesh_kv_skip_last_never_merges_a_slice() -> None:
    v = verdict_of("mesh_kv_skip_last")
    assert status(v, "exactly_once_merge") is Status.VIOLATED
    counts = merge_counts(v)
    assert any(c.numerator == 0 for c in counts)
    assert any("never merged" in d.message for d in diagnostics(v, "exactly_once_merge"))
    assert status(v, "deadlock_freedom") is Status.PROVED


# --- the seeds' kbench kernel ----------------------------------------------------------------

@pytest.mark.parametrize("depth", [3, 4])
def test_seed_kernel_protocol_proved_but_not_attention(seeds_dir: Path, depth: int) -> None:
    """The study's kernel is legal, matched and deadlock-free, but it does not compute
    attention (K reshaped, not transposed; no scale; o normalised twice)."""
    spec = f"{seeds_dir / 'attention_mesh_mlo.py'}::attention_mesh_mlo_kernel"
    v = verdict_of(spec, queue_depth=depth, args=SEED_ARGS)
    assert v.launch.pes == 8 and dict(v.launch.args)["n_ranks"] == 8
    assert v.violated() == (Property.EXACTLY_ONCE_MERGE, Property.ATTENTION_EQUIVALENCE)
    for name in ("direction_legality", "launch_confinement", "channel_matching",
                 "deadlock_freedom", "numeric_safety"):
        assert status(v, name) is Status.PROVED
    assert v.min_queue_depth == 3


def test_seed_kernel_cli(run_cli: Run, seeds_dir: Path) -> None:
    rel = Path("..") / "shared" / "seeds" / "attention_mesh_mlo.py"
    assert (REPO_ROOT / rel).resolve() == (seeds_dir / "attention_mesh_mlo.py")
    args = [a for name, value in SEED_ARGS for a in ("--arg", f"{name}={value}")]
    r = run_cli(["verify", f"{rel}::attention_mesh_mlo_kernel", *args, "--queue-depth", "3"])
    assert r.code == 1, r.out + r.err
    assert "line 111 divides by ℓ again" in r.out
    r2 = run_cli(["verify", f"{rel}::attention_mesh_mlo_kernel", *args, "--queue-depth", "2"])
    assert r2.code == 1
