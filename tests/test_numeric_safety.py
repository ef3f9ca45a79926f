"""numeric_safety (verify/numeric_safety.py): exp arguments, 16-bit ranges, empty partials,
all static and at the launch's real sizes."""

from __future__ import annotations

import pytest
from semantic_helpers import CASES, KERNELS, TREES, run, text_of

from meshproof.model.topology import Endpoint
from meshproof.verify.result import NumericResult, PropertyResult, Status

NAME = "numeric_safety"


def prop(kernel: str, **opts: object) -> PropertyResult:
    return run(kernel, **opts).property(NAME)


_text = text_of


@pytest.mark.parametrize(("name", "bound"), [("mesh_mlo_1d", "0.00119"),
                                             ("mesh_mlo_2d", "0.00119"), ("ring_mlo", "0.00119"),
                                             ("mesh_kv", "0.00125")])
def test_built_in_kernels_are_numerically_safe(name: str, bound: str) -> None:
    """No hazard, and the rounding bound is within the simulator's 1e-2 at the default
    |inputs| <= 16 (issue 27): proved at the defaults, the bound and its assumptions
    stated."""
    p = prop(name)
    assert p.status is Status.PROVED, _text(p)
    assert f"|computed - exact| <= {bound}·max|V|" in p.message
    assert "tolerance 1e-2·max|V| (the simulator's for a schedule using f16)" in p.message
    assert "f32 exp within 1 ulp" in p.message


@pytest.mark.parametrize("name", ["lse_merge", "exp2_consistent", "tiled_flash", "eps_guard"])
def test_exp_arguments_of_correct_idioms_are_dominated(name: str) -> None:
    # no hazard; their rounding bounds (1.4e-2..1.5e-1·max|V|) are judged at 0.2
    assert prop(f"{CASES}::{name}", pes=4, tolerance=0.2).status is Status.PROVED


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


def test_ell_in_f32_at_headline_keys_per_rank_has_no_hazard_and_a_bound_above_tolerance(
        ) -> None:
    """No value overflows (ℓ stays in f32), so what is left is the rounding bound: stated,
    and above the simulator's 1e-2, so unknown (not proved, and not violated: no input is
    shown to exceed it)."""
    p = prop("mesh_mlo_1d", args={"S_kv_per_rank": 131072})
    assert p.status is Status.UNKNOWN and isinstance(p, NumericResult)
    assert p.error_bound is not None and p.error_bound > p.tolerance == 1e-2
    assert p.message.startswith("the rounding bound 1.7e-2·max|V| exceeds the "
                                "tolerance 1e-2·max|V| (the simulator's for a schedule using "
                                "f16) for |inputs| <= 16: ")


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
    assert prop(f"{HAZARDS}::floor_guard", tolerance=0.1).status is Status.PROVED   # 2.9e-2


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
    assert prop(f"{HAZARDS}::peer_max", tolerance=0.1).status is Status.PROVED


# --- the score assumption (--score-bound) and the tolerance (--tolerance) ------------------


def test_a_score_bound_does_not_hide_a_stale_reference_point() -> None:
    """Realistic mistake caught under the user's assumption: m + m_in as the reference
    point still overflows exp with every score inside |scale·q·kᵀ| <= 30 (the witness
    shrinks Q and K to stay inside it, and says which values it used)."""
    p = prop(f"{CASES}::sum_ref_point", pes=4, score_bound=30.0)
    assert p.status is Status.VIOLATED
    text = _text(p)
    assert "not m + m_in" in text and "|scale·q·kᵀ| <= 30" in text
    assert "with Q = 16, K = -16" not in text   # that input is outside the assumption


def test_a_score_bound_does_not_hide_an_f16_ell_overflow() -> None:
    """ℓ counts keys, whatever the scores: 131072 in f16 overflows under any S."""
    p = prop("mesh_mlo_1d", args={"msg_dtype": "f16", "S_kv_per_rank": 131072},
             score_bound=30.0)
    assert p.status is Status.VIOLATED and "ℓ in f16 can reach 131072 > 65504" in _text(p)


def test_a_score_bound_tightens_the_rounding_bound_and_is_stated() -> None:
    """The correct idiom: a soft-capped kernel states its score range; the bound shrinks
    with S (never grows) and the verdict and its JSON carry the assumption."""
    free = prop("mesh_mlo_1d", pes=4)
    capped = prop("mesh_mlo_1d", pes=4, score_bound=1.0)
    assert isinstance(free, NumericResult) and isinstance(capped, NumericResult)
    assert free.error_bound is not None and capped.error_bound is not None
    assert capped.error_bound < free.error_bound
    assert capped.score_bound == 1.0 and free.score_bound is None
    doc = capped.to_json()
    assert doc["score_bound"] == 1.0 and doc["tolerance"] == 1e-2
    assert doc["assumption"] == ("|inputs| <= 16, |scale·q·kᵀ| <= 1; tolerance 1e-2·max|V| "
                                 "(the simulator's for a schedule using f16)")


def test_proved_needs_the_bound_within_the_tolerance_and_says_where_it_holds() -> None:
    p = prop("mesh_mlo_1d", pes=4, tolerance=5e-2)
    assert p.status is Status.PROVED and isinstance(p, NumericResult)
    assert p.error_bound is not None and p.error_bound < p.tolerance == 5e-2
    assert "within the tolerance 5e-2·max|V| wherever max|V| >= " in p.message
    tight = prop("mesh_mlo_1d", pes=4, tolerance=1e-3)
    assert tight.status is Status.UNKNOWN
    assert "exceeds the tolerance 1e-3·max|V| (stated)" in tight.message
