"""The relocatable trace: program_id(1) - cube_start is the only reading that is not
observed; anything else makes the caller trace every placement."""

from __future__ import annotations

import pytest

from meshproof.deploy.placement_trace import (
    CubeStart,
    PhysicalCube,
    PlacementObserved,
    _Observer,
    trace_relocatable,
)
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.trace import trace


def _pair() -> tuple[PhysicalCube, CubeStart, _Observer]:
    seen = _Observer()
    return PhysicalCube(11, seen), CubeStart(8, seen), seen


def test_the_local_cube_index_is_a_plain_int() -> None:
    cube, start, seen = _pair()
    local = cube - start
    assert local == 3 and type(local) is int and seen.what == ""


@pytest.mark.parametrize("use", [
    lambda c, s: c == 11, lambda c, s: s == 8, lambda c, s: bool(s), lambda c, s: int(c),
    lambda c, s: c // 4, lambda c, s: c - 8, lambda c, s: 8 - s, lambda c, s: s + 1,
    lambda c, s: ([0] * 20)[c], lambda c, s: hash(c), lambda c, s: f"{s}",
    lambda c, s: isinstance(c, int), lambda c, s: c.__class__, lambda c, s: s - c,
    lambda c, s: range(c), lambda c, s: {c: 1}, lambda c, s: divmod(c, 4),
])
def test_every_other_reading_is_observed(use: object) -> None:
    cube, start, seen = _pair()
    with pytest.raises(PlacementObserved):
        use(cube, start)  # type: ignore[operator]
    assert seen.what


def test_a_cube_start_of_another_trace_is_not_the_launch_s() -> None:
    cube, _, _ = _pair()
    other = CubeStart(8, _Observer())
    with pytest.raises(PlacementObserved):
        cube - other


def _launch(kernel: str, start: int = 0):  # type: ignore[no-untyped-def]
    ref = resolve_kernel(kernel)
    return ref, build_launch(ref, LaunchOptions(mesh="2x4", cube_start=start))


def test_a_kernel_that_subtracts_cube_start_traces_as_it_does_normally() -> None:
    ref, launch = _launch("mesh_mlo_2d_batch", 8)
    schedule, why = trace_relocatable(ref, launch, track_cube_start=True)
    assert why == "" and schedule == trace(ref, launch)


def test_a_kernel_that_calls_int_is_not_relocatable() -> None:
    ref, launch = _launch("mesh_mlo_2d_physical_rank")
    schedule, why = trace_relocatable(ref, launch, track_cube_start=True)
    assert schedule is None and why == "uses program_id(axis=1) via __int__"


def test_an_explicit_cube_start_is_a_constant_and_program_id_alone_is_observed() -> None:
    ref, launch = _launch("mesh_mlo_2d")
    schedule, why = trace_relocatable(ref, launch, track_cube_start=False)
    assert schedule is None
    assert why == "uses program_id(axis=1) other than as program_id(1) - cube_start"
