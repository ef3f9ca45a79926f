"""Moving a schedule to another placement, and when its proofs move with it."""

from __future__ import annotations

from dataclasses import replace

from helpers import WIDE

from meshproof.deploy.relocation import carry_proofs, is_moved, relocate, same_links
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.topology import Endpoint, System
from meshproof.model.trace import trace
from meshproof.verify.api import verify

SYSTEM = System(2, 4, 4, 8)


def _trace(kernel: str, start: int, system: System = SYSTEM):  # type: ignore[no-untyped-def]
    ref = resolve_kernel(kernel)
    launch = build_launch(ref, LaunchOptions(system=system, mesh="2x4", cube_start=start))
    return trace(ref, launch), launch


def test_relocating_equals_tracing_there() -> None:
    at0, _ = _trace("mesh_mlo_2d_batch", 0)
    at16, launch16 = _trace("mesh_mlo_2d_batch", 16)
    moved = relocate(at0, launch16)
    assert moved == at16 and is_moved(at0, at16) and same_links(at0, at16)
    assert moved.programs[9].endpoint == Endpoint(17, 1)


def test_proofs_move_only_to_the_same_schedule_over_the_same_links() -> None:
    at0, _ = _trace("mesh_mlo_2d", 0)
    verdict = verify(at0, WIDE)
    at8, _ = _trace("mesh_mlo_2d", 8)
    carried = carry_proofs(verdict, at0, at8)
    assert carried is not None and carried.ok and carried.launch == at8.launch
    assert all(p.certificate.startswith("as at cube_start 0 (the same schedule moved")
               for p in carried.properties)
    # cubes 4..11 are a 2x4 over rows 1-2: the same links; 1..8 is not
    at1, _ = _trace("mesh_mlo_2d", 1)
    assert carry_proofs(verdict, at0, at1) is None
    # SIP 1's rows 2-3: the ports the schedule uses reach the same neighbours
    at24, _ = _trace("mesh_mlo_2d", 24)
    assert carry_proofs(verdict, at0, at24) is not None
    # the same ops on a wiring without those links: nothing carries over
    ref = resolve_kernel("mesh_mlo_2d")
    elsewhere = relocate(at0, build_launch(ref, LaunchOptions(
        system=SYSTEM, mesh="2x4", cube_start=8, wiring="pe_line")))
    assert not is_moved(at0, elsewhere)          # its launch names another wiring
    assert not same_links(at0, elsewhere)        # and c8p0's E port reaches c8p1
    assert carry_proofs(verdict, at0, elsewhere) is None


def test_a_violated_verdict_never_moves() -> None:
    bad, _ = _trace("mesh_mlo_2d", 1)
    verdict = verify(bad)
    assert not verdict.ok
    other, _ = _trace("mesh_mlo_2d", 2)
    assert carry_proofs(verdict, bad, other) is None


def test_another_launch_is_not_a_move() -> None:
    at0, _ = _trace("mesh_mlo_2d", 0)
    changed = replace(at0.launch, queue_depth=3)
    at8, _ = _trace("mesh_mlo_2d", 8)
    assert not is_moved(replace(at0, launch=changed), at8)
    assert not is_moved(at0, _trace("mesh_mlo_2d_batch", 8)[0])
