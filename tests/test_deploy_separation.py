"""launch_separation: launches at once use disjoint endpoints and no link into another."""

from __future__ import annotations

from meshproof.deploy.deployment import Deployment, build_deployment
from meshproof.deploy.separation import launch_separation
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.trace import trace
from meshproof.verify.result import Status

SHAPES = (("S_kv_per_rank", 8), ("d_head", 4), ("h_q", 1), ("h_kv", 1), ("S_q", 1))


def _deploy(*launches: tuple[str, int]) -> Deployment:
    built = []
    for kernel, start in launches:
        ref = resolve_kernel(kernel)
        built.append((ref, build_launch(ref, LaunchOptions(mesh="2x4", cube_start=start,
                                                           args=SHAPES))))
    return build_deployment("test", built, trace)


def test_the_two_kv_groups_of_a_sip_are_separated() -> None:
    result = launch_separation(_deploy(("mesh_mlo_2d_batch", 0), ("mesh_mlo_2d_batch", 8)))
    assert result.status is Status.PROVED
    assert result.message == ("the 2 launches use disjoint endpoints (128 in all) and none of "
                              "their 3072 send/recv ops reaches another launch")


def test_overlapping_launches_are_caught() -> None:
    """A realistic mistake: the second group placed at cube 4 (rows 1-2), not 8."""
    result = launch_separation(_deploy(("mesh_mlo_2d", 0), ("mesh_mlo_2d", 4)))
    assert result.status is Status.VIOLATED
    assert [(o.first, o.second, o.cubes) for o in result.overlaps] == [(0, 1, (4, 5, 6, 7))]
    assert result.message.startswith("launch 1 (mesh_mlo_2d at cubes 0..7) and launch 2 "
                                     "(mesh_mlo_2d at cubes 4..11) both launch cube(s) 4..7")


def test_a_launch_that_sends_into_another_is_caught_with_its_line() -> None:
    """The physical-rank bug at cube 8 sends N into the group at cubes 0..7."""
    result = launch_separation(_deploy(("mesh_mlo_2d", 0),
                                       ("mesh_mlo_2d_physical_rank", 8)))
    assert result.status is Status.VIOLATED and not result.overlaps
    crossing = result.crossings[0]
    assert (crossing.launch, crossing.other, crossing.peer.cube) == (1, 0, 4)
    assert "op(s) of launch 2 (mesh_mlo_2d_physical_rank at cubes 8..15) reach launch 1" \
        in result.message
    first = result.diagnostics[0]
    assert first.startswith("meshproof/kernels/mesh_mlo.py:")
    assert "rank (cube 8, pe 0): error: launch 2 (mesh_mlo_2d_physical_rank at cubes 8..15): " \
           "send N sends to (cube 4, pe 0), an endpoint of launch 1" in first
    doc = result.to_json(timings=False)
    assert doc["name"] == "launch_separation" and doc["status"] == "violated"
    assert doc["crossings"][0]["launch"] == 2 and doc["crossings"][0]["other"] == 1
