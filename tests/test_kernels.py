"""The batch-on-batch decode kernel (B=8) and the 8-cube snake prefill, at validation
sizes: proved where they are right, caught where the wiring or the path is wrong."""

from __future__ import annotations

from helpers import WIDE, trace_kernel, verify_kernel
from hypothesis import given, settings
from hypothesis import strategies as st

from meshproof.kernels.mesh_kv import snake_path
from meshproof.model.schedule import GroupMode, OpKind
from meshproof.model.topology import Direction
from meshproof.sim.api import simulate
from meshproof.verify.api import VerifyConfig
from meshproof.verify.properties import Property
from meshproof.verify.result import Status

STEP = {"E": (0, 1), "W": (0, -1), "S": (1, 0), "N": (-1, 0)}


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 5))
def test_the_snake_visits_every_cell_once_through_grid_neighbours(rows: int, cols: int) -> None:
    cells = {snake_path(r, rows, cols)[0]: divmod(r, cols) for r in range(rows * cols)}
    assert sorted(cells) == list(range(rows * cols))   # a position for every cell, once
    for r in range(rows * cols):
        position, length, up, down = snake_path(r, rows, cols)
        assert length == rows * cols
        here = divmod(r, cols)
        if position + 1 < length:   # `up` steps to the next position's cell
            step = STEP[up]
            assert cells[position + 1] == (here[0] + step[0], here[1] + step[1])
        if position > 0:
            step = STEP[down]
            assert cells[position - 1] == (here[0] + step[0], here[1] + step[1])
            assert Direction(down).opposite.value == snake_path(
                cells[position - 1][0] * cols + cells[position - 1][1], rows, cols)[2]


def test_snake_on_2x4_is_e_along_row_0_s_then_w_along_row_1() -> None:
    # (position, towards the next, towards the previous) of cells 0..7; the first cell's
    # "previous" and the last one's "next" are never used
    assert [snake_path(r, 2, 4)[:1] + snake_path(r, 2, 4)[2:] for r in range(8)] == [
        (0, "E", "N"), (1, "E", "W"), (2, "E", "W"), (3, "S", "W"),
        (7, "S", "E"), (6, "W", "E"), (5, "W", "E"), (4, "W", "N")]   # cell 7 follows 3


def test_8_cube_prefill_is_proved_and_simulated_in_7_steps() -> None:
    verdict = verify_kernel("mesh_kv_snake", WIDE)
    assert verdict.ok and verdict.launch.n_cubes == 8
    schedule = trace_kernel("mesh_kv_snake")
    result = simulate(schedule)
    assert result.ok and result.numeric is not None and len(result.numeric.per_rank) == 8
    assert result.timing is not None and result.timing.comm_steps == 7
    assert [p.endpoint.pe for p in schedule.active] == [0] * 8


def test_the_1d_line_over_a_2x4_group_fails_at_the_row_boundary_with_its_line() -> None:
    verdict = verify_kernel("mesh_kv", wiring="cube_mesh", cubes=8,
                            args=(("rank_axis", 1),))
    legality = verdict.property(Property.DIRECTION_LEGALITY)
    assert legality.status is Status.VIOLATED
    assert legality.message.startswith("32 op(s) on 2 rank(s) use links cube_mesh lacks: "
                                       "cube 3 pe 0 E, cube 4 pe 0 W")
    assert legality.counterexample is not None
    first = legality.counterexample.diagnostics[0].format()
    assert first.startswith("meshproof/kernels/mesh_kv.py:")
    assert "rank (cube 3, pe 0): error: send E uses a link the wiring does not have" in first


def test_batch_on_batch_decode_is_proved_with_one_problem_per_user() -> None:
    verdict = verify_kernel("mesh_mlo_2d_batch", WIDE)
    assert verdict.ok and verdict.launch.groups is GroupMode.PE
    schedule = trace_kernel("mesh_mlo_2d_batch")
    assert len(schedule.active) == 64        # all 8 PEs of all 8 cubes
    gemms = sum(1 for p in schedule.active for op in p.ops if op.kind is OpKind.DOT)
    assert gemms == 2 * 64                   # 2 per rank, as every decode kernel
    for prog in schedule.active:             # PE p talks only to PE p of other cubes
        assert all(op.dir is not None for op in prog.comm_ops)
    result = simulate(schedule)
    assert result.ok and result.numeric is not None
    assert result.numeric.groups == 8 and len(result.numeric.per_rank) == 64


def test_batch_on_batch_on_cube_mesh_uses_links_pes_1_to_7_do_not_have() -> None:
    verdict = verify_kernel("mesh_mlo_2d_batch", wiring="cube_mesh")
    legality = verdict.property(Property.DIRECTION_LEGALITY)
    assert legality.status is Status.VIOLATED and legality.counterexample is not None
    diags = legality.counterexample.diagnostics
    assert {d.endpoint.pe for d in diags if d.endpoint} == set(range(1, 8))
    assert all(str(d.source).startswith("meshproof/kernels/mesh_mlo.py:") for d in diags)
    assert set(verdict.violated()) == {Property.DIRECTION_LEGALITY, Property.DEADLOCK_FREEDOM,
                                       Property.EXACTLY_ONCE_MERGE,
                                       Property.ATTENTION_EQUIVALENCE}


def test_fewer_users_than_pes_leave_the_other_pes_silent() -> None:
    schedule = trace_kernel("mesh_mlo_2d_batch", args=(("users", 3),))
    assert sorted({p.endpoint.pe for p in schedule.active}) == [0, 1, 2]
    assert verify_kernel("mesh_mlo_2d_batch", WIDE, args=(("users", 3),)).ok


def test_one_wrong_user_is_caught_and_only_that_user() -> None:
    from helpers import kernel_spec

    from meshproof.model.schedule import GroupMode as G

    options = {"mesh": "2x4", "wiring": "cube_mesh_all_pes", "groups": G.PE,
               "args": (("S_q", 1), ("S_kv_per_rank", 16), ("h_q", 2), ("h_kv", 1),
                        ("d_head", 8))}
    kernel = kernel_spec("batch_probes.py::user_three_skips_the_columns")
    verdict = verify_kernel(kernel, **options)
    merge = verdict.property(Property.EXACTLY_ONCE_MERGE)
    assert merge.status is Status.VIOLATED and merge.counterexample is not None
    assert {d.endpoint.pe for d in merge.counterexample.diagnostics if d.endpoint} == {3}
    result = simulate(trace_kernel(kernel, **options))
    assert result.numeric is not None and not result.numeric.ok
    bad = {r.endpoint.pe for r in result.numeric.per_rank if not r.ok}
    assert bad == {3} and len(result.numeric.per_rank) == 64


def test_the_physical_rank_kernel_shows_its_bug_at_its_default_launch() -> None:
    """At cube_start 0 physical and logical cube ids agree and the bug hides; the
    built-in's own launch starts at cube 8, and its description says so."""
    from meshproof.kernels import BUILTIN_KERNELS

    info = BUILTIN_KERNELS["mesh_mlo_2d_physical_rank"]
    assert info.cube_start == 8 and "cube_start 8" in info.description
    schedule = trace_kernel("mesh_mlo_2d_physical_rank")
    assert schedule.launch.cube_start == 8
    verdict = verify_kernel("mesh_mlo_2d_physical_rank",
                            VerifyConfig(only=frozenset({Property.LAUNCH_CONFINEMENT})))
    assert verdict.property("launch_confinement").status is Status.VIOLATED
    hidden = verify_kernel("mesh_mlo_2d_physical_rank",
                           VerifyConfig(only=frozenset({Property.LAUNCH_CONFINEMENT})),
                           cube_start=0)
    assert hidden.property("launch_confinement").status is Status.PROVED


def test_every_known_bad_built_in_shows_its_bug_at_its_default_launch() -> None:
    """A deliberately wrong built-in run as `meshproof verify NAME` (or `simulate NAME`,
    for the masked one the verifier cannot judge yet) is caught, never passed."""
    from meshproof.kernels import BUILTIN_KERNELS
    from meshproof.sim.config import SimConfig

    for name, info in BUILTIN_KERNELS.items():
        if not info.known_bad:
            continue
        if info.mask is not None:
            result = simulate(trace_kernel(name), SimConfig(timing=False))
            assert result.numeric is not None and not result.numeric.ok, name
            continue
        verdict = verify_kernel(name, WIDE)
        assert any(p.status is Status.VIOLATED for p in verdict.properties), name
