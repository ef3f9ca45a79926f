"""numeric_safety (verify/numeric_safety.py): exp arguments, 16-bit ranges, empty partials,
all static and at the launch's real sizes."""

from __future__ import annotations

import pytest
from semantic_helpers import CASES, KERNELS, TREES, run, text_of

from meshproof.model.topology import Endpoint
from meshproof.verify.result import PropertyResult, Status

NAME = "numeric_safety"


def prop(kernel: str, **opts: object) -> PropertyResult:
    return run(kernel, **opts).property(NAME)


_text = text_of


@pytest.mark.parametrize("name", ["mesh_mlo_1d", "mesh_mlo_2d", "ring_mlo", "mesh_kv"])
def test_built_in_kernels_are_numerically_safe(name: str) -> None:
    p = prop(name)
    assert p.status is Status.PROVED, _text(p)
    assert "|inputs| <= 16" in p.message


@pytest.mark.parametrize("name", ["lse_merge", "exp2_consistent", "tiled_flash", "eps_guard"])
def test_exp_arguments_of_correct_idioms_are_dominated(name: str) -> None:
    assert prop(f"{CASES}::{name}", pes=4).status is Status.PROVED


def test_a_sum_of_maxima_as_reference_point_is_violated_at_its_line() -> None:
    p = prop(f"{CASES}::sum_ref_point", pes=4)
    assert p.status is Status.VIOLATED
    text = _text(p)
    assert "semantic_cases.py:" in text and "not m + m_in" in text


def test_ell_in_f16_at_headline_keys_per_rank_overflows_without_simulation() -> None:
    p = prop("mesh_mlo_1d", args={"msg_dtype": "f16", "S_kv_per_rank": 131072})
    assert p.status is Status.VIOLATED
    text = _text(p)
    assert "ℓ in f16 can reach 131072 > 65504" in text
    assert "mesh_mlo.py:52" in text   # the line that sends ℓ


def test_ell_in_f32_at_headline_keys_per_rank_is_proved() -> None:
    p = prop("mesh_mlo_1d", args={"S_kv_per_rank": 131072})
    assert p.status is Status.PROVED


def test_an_unguarded_merge_of_an_empty_slice_is_violated() -> None:
    p = prop("mesh_mlo_1d", pes=2, empty_shards=(Endpoint(0, 0),))
    assert p.status is Status.VIOLATED
    assert "exp(-inf - (-inf))" in _text(p) or "inf - inf" in _text(p)


def test_a_guarded_merge_tree_with_an_empty_slice_stays_finite() -> None:
    p = prop(TREES, pes=1, args={"plan": "((t0 e) (e t1))", "tiles": 2})
    assert p.status is Status.PROVED


def test_a_larger_input_bound_is_stated_in_the_verdict() -> None:
    from meshproof.model.launch import LaunchOptions, build_launch
    from meshproof.model.loader import resolve_kernel
    from meshproof.model.trace import trace
    from meshproof.verify.api import VerifyConfig, verify

    ref = resolve_kernel("mesh_mlo_1d")
    launch = build_launch(ref, LaunchOptions(args=(("msg_dtype", "f16"),)))
    v = verify(trace(ref, launch), VerifyConfig(input_bound=64.0))
    assert "|inputs| <= 64" in v.property(NAME).message


# --- undefined outputs on the machine ---------------------------------------------------

HAZARDS = f"{KERNELS / 'hazard_cases.py'}"


def test_a_reference_point_of_maximum_m_0_makes_the_output_nan_on_the_machine() -> None:
    p = prop(f"{HAZARDS}::floor_zero")
    assert p.status is Status.VIOLATED
    assert "is nan on the machine" in text_of(p) and "the divisor can be 0 in f32" in text_of(p)
    assert prop(f"{HAZARDS}::floor_guard").status is Status.PROVED


def test_a_far_reference_point_underflows_every_weight_to_zero() -> None:
    p = prop(f"{HAZARDS}::far_reference")
    assert p.status is Status.VIOLATED and "nan on the machine" in text_of(p)


def test_a_stored_nan_is_an_undefined_output() -> None:
    p = prop(f"{HAZARDS}::store_nan", pes=1)
    assert p.status is Status.VIOLATED and "fills a tensor with nan" in text_of(p)


def test_a_positive_exp_argument_on_another_rank_is_found() -> None:
    """Rank 0 rescales its first incoming partial by its own max and is lucky half of the
    time; the search looks at every rank."""
    p = prop(f"{HAZARDS}::own_max_against_peer")
    assert p.status is Status.VIOLATED and "reaches" in text_of(p)
    assert prop(f"{HAZARDS}::peer_max").status is Status.PROVED
