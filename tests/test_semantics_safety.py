"""verify/semantics/safety.py: numeric_safety's checks of the values a kernel computes --
reciprocals and logs kept in 16 bits, reference points other than the max, empty slices
normalised or merged unguarded -- on kernels of a line of PEs, each verified for the three
semantic properties only."""

from __future__ import annotations

import pytest
from semantic_helpers import AE, EMPTY_FIRST, NS, LineKernels

from meshproof.model.channels import derive_channels
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.schedule import Op, Schedule
from meshproof.model.tolerance import source_of, tolerance_for, tolerance_of, tolerance_source
from meshproof.model.trace import trace
from meshproof.verify.result import Status
from meshproof.verify.semantics import semantic_analysis
from meshproof.verify.semantics.safety import Safety, check_safety

NORM = LineKernels("normalisation_cases.py")
ONLINE = LineKernels("online_softmax_variants.py")
ROUND = LineKernels("rounding_cases.py", pes=2, input_bound=16.0)


# --- reciprocals, logs and reference points (tests/kernels/normalisation_cases.py) -----


def test_reciprocal_of_a_small_sum_in_f16_is_not_proved_safe() -> None:
    assert NORM.prop("twin_max", NS).status is not Status.PROVED


def test_log_of_a_small_value_is_bounded_from_below_too() -> None:
    assert NORM.prop("log_small", NS).status is not Status.PROVED


# these idioms' safety (no hazard) is what is pinned, at a stated tolerance
IDIOM_TOLERANCE = 2e-2


def test_a_reference_point_above_the_max_is_proved_safe() -> None:
    assert NORM.prop("headroom_plain", NS, tolerance=IDIOM_TOLERANCE).status is Status.PROVED
    plain = NORM.prop("headroom_plain", NS)   # within the simulator's 1e-2 since issue 27
    assert plain.status is Status.PROVED, plain.message


# --- empty slices ----------------------------------------------------------------------


def test_an_empty_slice_divided_by_its_own_l_is_not_proved_finite() -> None:
    p = NORM.prop("local_check_f32", NS, empty_shards=EMPTY_FIRST)
    assert p.status is not Status.PROVED


def test_an_lse_merge_that_normalises_an_empty_slice_is_violated() -> None:
    p = NORM.prop("guarded_local_norm", NS, empty_shards=EMPTY_FIRST)
    assert p.status is Status.VIOLATED


def test_an_unguarded_merge_with_an_empty_slice_is_violated() -> None:
    p = NORM.prop("headroom_plain", NS, empty_shards=EMPTY_FIRST)
    assert p.status is Status.VIOLATED
    assert "exp(-inf - (-inf))" in p.message


# --- common factors, 16-bit state (tests/kernels/online_softmax_variants.py, ...) ------


@pytest.mark.parametrize("name", ["subset_max", "sum_of_maxima", "neg_neg_max",
                                  "log_exp_scores"])
def test_a_common_factor_that_is_not_the_max_is_attention_but_unsafe(name: str) -> None:
    v = ONLINE.verify(name)
    assert v.property(AE).status is Status.PROVED
    assert v.property(NS).status is Status.VIOLATED


def test_o_in_f16_over_many_keys_is_violated() -> None:
    p = ONLINE.prop("o_f16", NS, args=(("S_kv_per_rank", 32768),))
    assert p.status is Status.VIOLATED
    assert "o in f16" in p.message or "65504" in p.message


def test_a_rescale_cast_to_f16_from_a_running_max_at_minus_inf_is_safe() -> None:
    assert ROUND.sim("tiled_alpha_f16").ok
    assert ROUND.prop("tiled_alpha_f16", AE).status is Status.PROVED
    p = ROUND.prop("tiled_alpha_f16", NS)
    assert p.status is not Status.VIOLATED, p.message


# --- the one walk (check_safety gathers what the tolerance and the culprits read) --------


def _walked(schedule: Schedule) -> tuple[Safety, list[tuple[int, Op]]]:
    """check_safety's result, and the first (rank, op) of every distinct op with a
    result as numeric_safety's own walk for the culprits found them before the walks
    were one."""
    table = derive_channels(schedule)
    sem = semantic_analysis(schedule, table, None, 16.0)
    assert sem.analysis is not None and sem.problem is not None
    a = sem.analysis
    safety = check_safety(schedule, table, a.problem, a.forms, 16.0,
                          [(o.rank, o.store) for o in a.outputs])
    seen: set[int] = set()
    firsts = []
    for r, prog in enumerate(schedule.programs):
        for op in prog.ops:
            if id(op) in seen or op.out is None:
                continue
            seen.add(id(op))
            firsts.append((r, op))
    return safety, firsts


@pytest.mark.parametrize("name", ["mesh_mlo_1d", "mesh_mlo_2d", "ring_mlo", "mesh_kv",
                                  *(f"rounding_cases::{k}" for k in (
                                      "plain", "qk_bf16", "f16_scores", "reciprocal_bf16",
                                      "tiled_o_f16_before_div", "two_ranks_differ"))])
def test_the_safety_walk_gathers_what_the_tolerance_and_the_culprits_walked_for(
        name: str) -> None:
    if name.startswith("rounding_cases::"):
        schedule = ROUND.schedule(name.split("::")[1])
    else:
        ref = resolve_kernel(name)
        schedule = trace(ref, build_launch(ref, LaunchOptions.from_mapping({}, "test")))
    safety, firsts = _walked(schedule)
    assert safety.firsts == firsts
    assert tolerance_of(safety.dtypes) == tolerance_for(schedule)
    assert source_of(tolerance_of(safety.dtypes)[1]) == tolerance_source(schedule)
