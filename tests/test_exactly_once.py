"""exactly_once_merge (verify/exactly_once.py): counts at key-row granularity on what the
outputs finally hold."""

from __future__ import annotations

import pytest
from semantic_helpers import AE, CASES, EMPTY_FIRST, EO, KERNELS, TREES, LineKernels, run, text_of

from meshproof.model.schedule import GroupMode
from meshproof.verify.result import PropertyResult, Status

NAME = "exactly_once_merge"


def prop(kernel: str, **opts: object) -> PropertyResult:
    return run(kernel, **opts).property(NAME)


_text = text_of

# kernels of a line of PEs, verified for the three semantic properties only
NORM = LineKernels("normalisation_cases.py")
ONLINE = LineKernels("online_softmax_variants.py")
ROUND = LineKernels("rounding_cases.py", pes=2, input_bound=16.0)


@pytest.mark.parametrize("name", ["mesh_mlo_1d", "mesh_mlo_2d", "ring_mlo", "mesh_kv"])
def test_built_in_kernels_merge_every_key_row_once(name: str) -> None:
    p = prop(name)
    assert p.status is Status.PROVED, p.message


@pytest.mark.parametrize("name", ["tiled_flash", "spill", "lse_merge", "no_rescale"])
def test_tiles_spills_and_rescalings_count_once(name: str) -> None:
    # no_rescale is not attention, but it merges every row once: rescaling is not merging
    assert prop(f"{CASES}::{name}", pes=4).status is Status.PROVED


def test_a_forwarded_running_state_counts_rows_more_than_once() -> None:
    p = prop("mesh_mlo_1d_forward_running_state")
    assert p.status is Status.VIOLATED
    assert "merged more than once" in _text(p)


def test_a_prefill_that_stops_a_step_early_misses_the_farthest_slice() -> None:
    p = prop("mesh_kv_skip_last")
    assert p.status is Status.VIOLATED
    text = _text(p)
    assert "0 time(s) in the numerator" in text and "never merged" in text
    assert "the last merge into this output is at" in text


@pytest.mark.parametrize("name,words", [
    ("times_two", "2 time(s) in the numerator"),
    ("plus_self", "a double merge"),
    ("tiny_f32", "which is 0 in f32 on the machine"),
    ("tiny_f16", "which is 0 in f16 on the machine"),
    ("store_q", "0 time(s)"),
    ("store_max", "0 time(s)"),
    ("zeros_after", "0 time(s)"),
    ("sum_of_keys", "0 time(s)"),
])
def test_what_the_output_finally_holds_is_counted(name: str, words: str) -> None:
    p = prop(f"{CASES}::{name}", pes=4)
    assert p.status is Status.VIOLATED, _text(p)
    assert words in _text(p)


def test_a_factor_two_and_a_self_addition_agree() -> None:
    two = prop(f"{CASES}::times_two", pes=4)
    twice = prop(f"{CASES}::plus_self", pes=4)
    cex2, cex1 = two.counterexample, twice.counterexample
    assert cex2 is not None and cex1 is not None
    assert cex2.details is not None and cex1.details is not None
    assert cex2.details.to_json() == cex1.details.to_json()


def test_a_forgotten_all_reduce_on_an_unwired_launch_is_violated() -> None:
    p = prop(f"{KERNELS / 'no_allreduce.py'}::no_allreduce", pes=1, cubes=2, wiring="pe_line",
             args={"S_q": 1, "S_kv_per_rank": 8, "h_q": 1, "h_kv": 1, "d_head": 8})
    assert p.status is Status.VIOLATED
    assert "never merged" in _text(p)


def test_per_cube_groups_make_independent_rings_separate_problems() -> None:
    from meshproof.model.schedule import GroupMode

    p = prop(f"{KERNELS / 'no_allreduce.py'}::no_allreduce", pes=1, cubes=2, wiring="pe_line",
             groups=GroupMode.CUBE,
             args={"S_q": 1, "S_kv_per_rank": 8, "h_q": 1, "h_kv": 1, "d_head": 8})
    assert p.status is Status.PROVED


def test_a_merge_tree_over_tiles_counts_each_tile_once() -> None:
    p = prop(TREES, pes=1, args={"plan": "((t2 (t0 e)) (t3 t1))", "tiles": 4})
    assert p.status is Status.PROVED


def test_a_pure_communication_kernel_is_vacuously_proved() -> None:
    prog = '{"0,0": [["s", "E", 4, "f32"]], "0,1": [["r", "W", 4, "f32"]]}'
    p = prop(f"{KERNELS / 'random_program.py'}::random_program", pes=2, args={"prog": prog})
    assert p.status is Status.PROVED and p.message.startswith("vacuous")


def test_a_kernel_that_only_stores_zeros_is_not_vacuous() -> None:
    p = prop(f"{CASES}::zeros_after", pes=4)
    assert p.status is Status.VIOLATED


# --- merge formulas of real systems; a rank that never loads its slice -------------------

FORMS = f"{KERNELS / 'merge_forms.py'}"
HAZARDS = f"{KERNELS / 'hazard_cases.py'}"


@pytest.mark.parametrize("name", ["lse_textbook", "flashinfer_merge_state", "ringflash_log1p",
                                  "ringflash_sigmoid", "lerp_merge", "alpha_beta",
                                  "shifted_normalise", "times_reciprocal", "tree_attention",
                                  "gqa_broadcast"])
def test_merge_formulas_of_real_systems_count_every_row_once(name: str) -> None:
    p = prop(f"{FORMS}::{name}")
    assert p.status is Status.PROVED, text_of(p)


@pytest.mark.parametrize("name", ["lse_double_weight", "lerp_wrong_weight"])
def test_a_wrong_weight_is_violated_with_an_equal_scores_witness(name: str) -> None:
    p = prop(f"{FORMS}::{name}")
    assert p.status is Status.VIOLATED, text_of(p)
    assert "Q = 0 (every score equal)" in text_of(p) and "40-digit" in text_of(p)


def test_a_slice_never_loaded_is_never_merged_and_the_witness_names_its_rows() -> None:
    p = prop(f"{HAZARDS}::idle_slice")
    assert p.status is Status.VIOLATED
    assert "never merged" in text_of(p)
    assert "V = 1 on key rows 112..127" in text_of(p)   # the last of 8 ranks
    assert prop(f"{HAZARDS}::every_slice").status is Status.PROVED


def test_wrong_counts_without_a_witness_are_unknown_not_violated() -> None:
    """A base-2 log-sum-exp merged with natural-log formulas weighs every shard alike when
    all scores are equal: no equal-scores input shows a wrong count."""
    p = prop(f"{FORMS}::sglang_base2_into_natural")
    assert p.status is Status.UNKNOWN, text_of(p)


# --- denominators, empty slices, biases and groups on a line of PEs --------------------


@pytest.mark.parametrize("name", ["unnormalised", "sum_of_normalised"])
def test_exactly_once_needs_a_denominator_to_count(name: str) -> None:
    assert NORM.prop(name, EO).status is not Status.PROVED


def test_a_guarded_kernel_with_an_empty_slice_is_not_violated() -> None:
    assert NORM.prop("guarded", EO, empty_shards=EMPTY_FIRST).status is not Status.VIOLATED


@pytest.mark.parametrize("name", ["shift_1e3", "shift_neg_1e3"])
def test_a_constant_bias_on_every_score_keeps_exactly_once(name: str) -> None:
    assert ONLINE.sim(name).ok
    assert ONLINE.prop(name, AE).status is Status.PROVED
    assert ONLINE.prop(name, EO).status is Status.PROVED


def test_another_users_v_is_not_counted_once() -> None:
    v = ROUND.verify("peer_v", groups=GroupMode.PE)
    assert v.property(AE).status is Status.VIOLATED
    assert v.property(EO).status is Status.VIOLATED, v.property(EO).message
