"""Witness inputs are the simulator's: one seeded generator (model/inputs.py).

A witness printed by `meshproof verify` on "seeded N(0,1) inputs (seed s" must be the
input `meshproof simulate --seed s` feeds, row for row, in every group, so the user can
run the failing case in the simulator and see the same numbers.
"""

from __future__ import annotations

import numpy as np
import pytest

from meshproof.model.channels import derive_channels
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.problem import attention_problem
from meshproof.model.schedule import GroupMode
from meshproof.model.trace import trace
from meshproof.sim.groups import find_groups
from meshproof.sim.harness import attention_shape, group_layout, make_inputs
from meshproof.sim.inputs import InputKind
from meshproof.verify.semantics.witness import make_inputs as witness_inputs
from meshproof.verify.semantics.witness import seeded_families


@pytest.mark.parametrize(("name", "opts"), [("mesh_mlo_2d", {}),
                                            ("ring_mlo", {}),
                                            ("mesh_mlo_1d", {"groups": GroupMode.CUBE})])
@pytest.mark.parametrize("seed", [0, 2])
def test_a_seeded_witness_input_is_what_simulate_seed_feeds(name: str, opts: dict[str, object],
                                                              seed: int) -> None:
    ref = resolve_kernel(name)
    launch = build_launch(ref, LaunchOptions.from_mapping(opts, "test"))
    schedule = trace(ref, launch)
    spec = schedule.launch
    problem = attention_problem(schedule, spec.groups, spec.outputs, spec.softmax_scale)
    verifier = witness_inputs(problem, seed)
    groups = find_groups(schedule, derive_channels(schedule))
    shape = attention_shape(schedule)
    for group in groups:
        layout = group_layout(schedule, group, shape)
        sim = make_inputs(layout, (group.index,), InputKind.NORMAL, seed)
        assert np.array_equal(verifier.q[group.index], sim.q[0].astype(np.float64))
        assert np.array_equal(verifier.k[group.index], sim.k[0].astype(np.float64))
        assert np.array_equal(verifier.v[group.index], sim.v[0].astype(np.float64))


def test_the_seeded_families_say_how_to_reproduce_them() -> None:
    ref = resolve_kernel("mesh_mlo_2d")
    schedule = trace(ref, build_launch(ref, LaunchOptions()))
    spec = schedule.launch
    problem = attention_problem(schedule, spec.groups, spec.outputs, spec.softmax_scale)
    texts = [f.text for f in seeded_families(problem) if f.seed is not None]
    assert "seeded N(0,1) inputs (seed 1: `meshproof simulate --seed 1` feeds them" in texts


def test_the_simulator_checks_the_ranks_the_verifier_judges() -> None:
    """One attention problem: the simulator's shard and Q block of each rank are the
    verifier's (model/problem.py), for decode and prefill."""
    for name in ("mesh_mlo_2d", "ring_mlo"):
        ref = resolve_kernel(name)
        schedule = trace(ref, build_launch(ref, LaunchOptions()))
        spec = schedule.launch
        problem = attention_problem(schedule, spec.groups, spec.outputs, spec.softmax_scale)
        shape = attention_shape(schedule)
        for group in find_groups(schedule, derive_channels(schedule)):
            for role in group_layout(schedule, group, shape).roles:
                kv = problem.kv_base(role.rank)
                assert role.shard == (None if kv is None else kv // problem.S_kv_per_rank)


def test_a_witness_is_sized_before_any_input_is_made() -> None:
    """Issue 28, item 2: a witness for a shard of 1e11 keys asked numpy for 23 TiB (exit
    70). It is sized first: past its share of the memory the search is refused with the
    reason, and the properties it decides say unknown."""
    from helpers import kernel_spec, trace_kernel

    from meshproof.verify.semantics.witness import (
        WitnessTooLarge,
        check_witness_size,
        witness_bytes,
    )

    small = trace_kernel("mesh_mlo_1d")
    problem = attention_problem(small, small.launch.groups, small.launch.outputs, None)
    check_witness_size(small, problem, available=1 << 30)      # a few KiB: fits
    huge = trace_kernel(kernel_spec("no_allreduce.py::no_allreduce"),
                        args=(("S_q", 1), ("S_kv_per_rank", 10**11), ("h_q", 1),
                              ("h_kv", 1), ("d_head", 8)))
    problem = attention_problem(huge, huge.launch.groups, huge.launch.outputs, None)
    assert witness_bytes(huge, problem) > 10**14
    with pytest.raises(WitnessTooLarge, match="no input was tried"):
        check_witness_size(huge, problem, available=1 << 34)


def test_properties_needing_a_too_large_witness_are_unknown_with_the_reason() -> None:
    """A kernel that is not attention (each rank stores its own partial) at 1e11 keys per
    rank: the departure is found symbolically, but no witness fits in memory."""
    from helpers import WIDE, kernel_spec, verify_kernel

    from meshproof.verify.result import Status

    verdict = verify_kernel(kernel_spec("no_allreduce.py::no_allreduce"), WIDE,
                            args=(("S_q", 1), ("S_kv_per_rank", 10**11), ("h_q", 1),
                                  ("h_kv", 1), ("d_head", 8)))
    for name in ("exactly_once_merge", "attention_equivalence"):
        result = verdict.property(name)
        assert result.status is Status.UNKNOWN, result.message
        assert "no input was tried" in result.message
