"""Adversarial review of the semantic properties (issue 9): attention_equivalence,
exactly_once_merge and numeric_safety on kernels of tests/kernels/review_semantics.py.

Every finding has one test. Tests of real bugs are `xfail(strict=True)`: they state what
meshproof should say, fail today, and flip (then must lose the marker) when the bug is
fixed. Plain tests pin what already works: correct idioms proved, mistakes caught, and the
simulator's independent evidence that each mistaken kernel really computes something else.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import kernel_spec, trace_kernel

from meshproof.model.channels import derive_channels
from meshproof.model.schedule import Schedule
from meshproof.model.topology import Endpoint
from meshproof.sim.api import SimConfig, simulate
from meshproof.sim.groups import find_groups
from meshproof.sim.harness import AttentionShape, group_layout, make_inputs
from meshproof.sim.inputs import InputKind
from meshproof.sim.result import NumericResult as SimNumeric
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.properties import Property
from meshproof.verify.result import NumericResult, PropertyResult, Status, Verdict

SEMANTIC = frozenset({Property.ATTENTION_EQUIVALENCE, Property.EXACTLY_ONCE_MERGE,
                      Property.NUMERIC_SAFETY})
LINE = {"pes": 4, "wiring": "pe_line"}
EMPTY_FIRST = (Endpoint(0, 0),)       # --empty-shard 0,0


def _schedule(name: str, **opts: object) -> Schedule:
    file = "semantic_cases.py" if name in ("lse_merge",) else "review_semantics.py"
    return trace_kernel(kernel_spec(f"{file}::{name}"), **{**LINE, **opts})


def _verify(name: str, tolerance: float | None = None, **opts: object) -> Verdict:
    s = _schedule(name, **opts)
    return verify(s, VerifyConfig(queue_depth=s.launch.queue_depth, only=SEMANTIC,
                                  tolerance=tolerance))


def _prop(name: str, prop: str, tolerance: float | None = None,
          **opts: object) -> PropertyResult:
    return _verify(name, tolerance, **opts).property(prop)


def _sim(name: str, **opts: object) -> SimNumeric:
    result = simulate(_schedule(name, **opts), SimConfig(inputs=InputKind.NORMAL, timing=False))
    assert result.numeric is not None
    return result.numeric


AE, EO, NS = "attention_equivalence", "exactly_once_merge", "numeric_safety"


# --- the simulator's evidence (passes today; keeps the findings honest) -------------------

# Kernels that some semantic property proves today, although the simulator shows that the
# stored output is not attention (out of tolerance, or nan/inf).
WRONG_BUT_PROVED = ["headroom_eps", "twin_max_eps", "twin_max", "exp_const_zero",
                    "underflow_pair", "log_small", "subnormal_f16_send"]


@pytest.mark.parametrize("name", WRONG_BUT_PROVED)
def test_the_simulator_sees_each_mistake(name: str) -> None:
    assert not _sim(name).ok


@pytest.mark.parametrize("name", ["headroom_plain", "guarded", "split_scale", "fixup_store"])
def test_the_simulator_accepts_each_correct_or_tolerable_kernel(name: str) -> None:
    args = (("h_q", 2), ("h_kv", 1)) if name == "fixup_store" else ()
    assert _sim(name, args=args).ok


# --- false "proved" ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["headroom_eps", "twin_max_eps"])
def test_eps_guard_over_a_shifted_reference_point_is_not_proved(name: str) -> None:
    assert _prop(name, AE).status is not Status.PROVED


def test_reciprocal_of_a_small_sum_in_f16_is_not_proved_safe() -> None:
    assert _prop("twin_max", NS).status is not Status.PROVED


@pytest.mark.parametrize("prop", [AE, EO])
def test_exp_of_a_constant_is_what_the_machine_holds(prop: str) -> None:
    assert _prop("exp_const_zero", prop).status is not Status.PROVED


@pytest.mark.parametrize("prop", [AE, NS])
def test_a_product_of_factors_that_underflows_is_not_proved(prop: str) -> None:
    assert _prop("underflow_pair", prop).status is not Status.PROVED


def test_log_of_a_small_value_is_bounded_from_below_too() -> None:
    assert _prop("log_small", NS).status is not Status.PROVED


def test_an_empty_slice_divided_by_its_own_l_is_not_proved_finite() -> None:
    p = _prop("local_check_f32", NS, empty_shards=EMPTY_FIRST)
    assert p.status is not Status.PROVED


def test_an_lse_merge_that_normalises_an_empty_slice_is_violated() -> None:
    p = _prop("guarded_local_norm", NS, empty_shards=EMPTY_FIRST)
    assert p.status is Status.VIOLATED


def _max_abs_v(schedule: Schedule) -> float:
    groups = find_groups(schedule, derive_channels(schedule))
    layout = group_layout(schedule, groups[0], AttentionShape.from_schedule(schedule))
    return float(np.abs(make_inputs(layout, (0,), InputKind.NORMAL, 0).v).max())


def test_the_rounding_bound_covers_f16_subnormals() -> None:
    s = _schedule("subnormal_f16_send")
    p = _verify("subnormal_f16_send").property(NS)
    assert isinstance(p, NumericResult)
    sim = _sim("subnormal_f16_send")
    assert sim.max_abs_err is not None
    assert p.status is not Status.PROVED or p.error_bound is None or \
        sim.max_abs_err <= p.error_bound * _max_abs_v(s) + (p.error_floor or 0.0)


def test_numerator_and_denominator_scales_must_be_the_same() -> None:
    assert _prop("split_scale", AE).status is not Status.PROVED


@pytest.mark.parametrize("name", ["unnormalised", "sum_of_normalised"])
def test_exactly_once_needs_a_denominator_to_count(name: str) -> None:
    assert _prop(name, EO).status is not Status.PROVED


def test_verifier_and_simulator_agree_on_a_kernel_that_stores_on_one_rank() -> None:
    proved = _prop("root_only", AE).status is Status.PROVED
    assert proved == _sim("root_only").ok


# --- false "violated" --------------------------------------------------------------------


def test_a_guarded_kernel_with_an_empty_slice_is_not_violated() -> None:
    assert _prop("guarded", EO, empty_shards=EMPTY_FIRST).status is not Status.VIOLATED


def test_a_store_partly_rewritten_by_a_fix_up_is_judged_on_what_remains() -> None:
    p = _prop("fixup_store", AE, args=(("h_q", 2), ("h_kv", 1)))
    assert p.status is not Status.VIOLATED


# --- crashes -----------------------------------------------------------------------------


def test_a_store_past_the_end_of_the_output_is_violated_not_a_crash() -> None:
    assert _prop("global_offset", AE).status is Status.VIOLATED


def test_a_recv_of_another_shape_is_not_a_crash() -> None:
    p = _prop("trans_send", AE, pes=2, args=(("n_ranks", 2),))
    assert p.status is Status.VIOLATED


# --- correct idioms refused, vacuous bounds ----------------------------------------------


# these idioms' rounding bounds are 1.4e-2..1.5e-2·max|V| at |inputs| <= 16, above the
# simulator's 1e-2: their safety (no hazard) is what is pinned, at a stated tolerance
IDIOM_TOLERANCE = 2e-2


def test_a_reference_point_above_the_max_is_proved_safe() -> None:
    assert _prop("headroom_plain", NS, IDIOM_TOLERANCE).status is Status.PROVED
    plain = _prop("headroom_plain", NS)   # at the default tolerance: above it, unknown
    assert plain.status is Status.UNKNOWN and "exceeds the tolerance 1e-2" in plain.message


def test_the_lse_merge_has_a_finite_rounding_bound() -> None:
    p = _prop("lse_merge", NS)
    assert isinstance(p, NumericResult) and p.status is not Status.VIOLATED
    assert p.error_bound is not None and p.error_bound < 1.0   # 1.5e-1: stated, not proved
    assert _prop("lse_merge", NS, 0.2).status is Status.PROVED


# --- what works (regression guards) ------------------------------------------------------


@pytest.mark.parametrize(("name", "props"), [
    ("headroom_plain", (AE, EO)),          # a reference point above the max still cancels
    ("guarded", (AE, EO, NS)),             # FlashInfer #4051 guard, every slice non-empty
    ("root_only", (AE, EO, NS)),           # only rank 0 stores
])
def test_correct_idioms_are_proved(name: str, props: tuple[str, ...]) -> None:
    v = _verify(name, IDIOM_TOLERANCE)
    for prop in props:
        assert v.property(prop).status is Status.PROVED, (prop, v.property(prop).message)


@pytest.mark.parametrize(("name", "args", "says"), [
    ("rows_heads_swapped", (("S_q", 2), ("h_q", 2), ("h_kv", 1)), "another query row"),
    ("reshape_not_trans_out", (("S_q", 2), ("h_q", 4), ("h_kv", 2)), "another query row"),
    ("unnormalised", (), "never divided"),
    ("sum_of_normalised", (), "more than one softmax denominator"),
])
def test_layout_and_normalisation_mistakes_are_violated(name: str,
                                                        args: tuple[tuple[str, int], ...],
                                                        says: str) -> None:
    p = _prop(name, AE, args=args)
    assert p.status is Status.VIOLATED
    assert says in p.message
    assert not _sim(name, args=args).ok


def test_an_unguarded_merge_with_an_empty_slice_is_violated() -> None:
    p = _prop("headroom_plain", NS, empty_shards=EMPTY_FIRST)
    assert p.status is Status.VIOLATED
    assert "exp(-inf - (-inf))" in p.message
