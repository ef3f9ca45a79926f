"""Communication groups follow the wiring: a kernel that forgets to all-reduce is caught.

Independent rings of one launch (64 cubes, each its own 8-PE line) stay separate groups.
"""

from __future__ import annotations

from pathlib import Path

from helpers import WIDE

from meshproof.model.channels import communication_groups, derive_channels
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.schedule import GroupMode, Schedule
from meshproof.model.topology import System
from meshproof.model.trace import trace
from meshproof.sim.api import SimConfig, simulate
from meshproof.verify.api import verify
from meshproof.verify.result import Status

KERNEL = f"{Path(__file__).parent / 'kernels' / 'no_allreduce.py'}::no_allreduce"
SHAPES = (("S_q", 1), ("S_kv_per_rank", 16), ("h_q", 1), ("h_kv", 1), ("d_head", 8))


def _trace(spec: str, opts: LaunchOptions) -> Schedule:
    kernel = resolve_kernel(spec)
    return trace(kernel, build_launch(kernel, opts))


def test_a_kernel_without_its_all_reduce_violates_exactly_once() -> None:
    schedule = _trace(KERNEL, LaunchOptions(args=SHAPES))
    result = verify(schedule).property("exactly_once_merge")
    assert result.status is Status.VIOLATED
    assert "wrong merge count(s) on 8 rank(s)" in result.message
    assert "never merged" in result.message


def test_a_kernel_without_its_all_reduce_is_out_of_tolerance() -> None:
    schedule = _trace(KERNEL, LaunchOptions(args=SHAPES))
    assert not simulate(schedule, SimConfig(timing=False)).ok


def test_independent_lines_in_one_launch_are_separate_groups() -> None:
    schedule = _trace("mesh_mlo_1d", LaunchOptions(system=System(1, 2, 2, 8), cubes=4,
                                                   groups=GroupMode.CUBE))
    groups = communication_groups(schedule, derive_channels(schedule))
    assert len(groups) == 4 and all(len(g) == 8 for g in groups)
    assert verify(schedule, WIDE).ok


def test_by_default_the_whole_launch_is_one_attention_problem() -> None:
    """Groups come from the launch, not the wiring: four unjoined lines are not attention
    over the launch's KV."""
    schedule = _trace("mesh_mlo_1d", LaunchOptions(system=System(1, 2, 2, 8), cubes=4))
    v = verify(schedule)
    assert v.property("attention_equivalence").status is Status.VIOLATED
    assert v.property("exactly_once_merge").status is Status.VIOLATED

