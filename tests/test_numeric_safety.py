"""numeric_safety (verify/numeric_safety.py): exp arguments, 16-bit ranges, empty partials,
all static and at the launch's real sizes."""

from __future__ import annotations

import pytest
from semantic_helpers import CASES, TREES, run, text_of

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
