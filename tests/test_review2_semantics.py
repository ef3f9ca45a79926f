"""Second adversarial review of the semantic properties (issue 9): attention_equivalence,
exactly_once_merge and numeric_safety on kernels of tests/kernels/review2_semantics.py.

One test per finding. Tests of real bugs are `xfail(strict=True)`: they state what meshproof
should say, fail today, and flip (then must lose the marker) when the bug is fixed. Plain
tests pin what already works, each with the simulator as independent evidence.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import kernel_spec, trace_kernel

from meshproof.model.channels import derive_channels
from meshproof.model.schedule import GroupMode, Schedule
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
AE, EO, NS = "attention_equivalence", "exactly_once_merge", "numeric_safety"
Opts = dict[str, object]


def _schedule(name: str, **opts: object) -> Schedule:
    return trace_kernel(kernel_spec(f"review2_semantics.py::{name}"), **{**LINE, **opts})


def _verify(name: str, tolerance: float | None = None, **opts: object) -> Verdict:
    s = _schedule(name, **opts)
    return verify(s, VerifyConfig(queue_depth=s.launch.queue_depth, only=SEMANTIC,
                                  tolerance=tolerance))


def _prop(name: str, prop: str, **opts: object) -> PropertyResult:
    return _verify(name, **opts).property(prop)


def _sim(name: str, **opts: object) -> SimNumeric:
    result = simulate(_schedule(name, **opts), SimConfig(inputs=InputKind.NORMAL, timing=False))
    assert result.numeric is not None
    return result.numeric


def _max_abs_v(schedule: Schedule) -> float:
    groups = find_groups(schedule, derive_channels(schedule))
    layout = group_layout(schedule, groups[0], AttentionShape.from_schedule(schedule))
    return float(np.abs(make_inputs(layout, (0,), InputKind.NORMAL, 0).v).max())


# --- false "proved" ----------------------------------------------------------------------


@pytest.mark.parametrize(("name", "opts"), [
    ("bias_cancel", {}),                                  # (o + 1e30) - 1e30 in f32
    ("bias_cancel_f16", {"pes": 2, "args": (("n_ranks", 2),)}),   # (ℓ + 2048) in f16 - 2048
])
def test_the_rounding_bound_covers_a_large_constant_added_and_removed(name: str,
                                                                       opts: Opts) -> None:
    p = _prop(name, NS, **opts)
    assert isinstance(p, NumericResult)
    sim = _sim(name, **opts)
    assert sim.max_abs_err is not None
    if p.status is Status.PROVED and p.error_bound is not None:
        limit = p.error_bound * _max_abs_v(_schedule(name, **opts)) + (p.error_floor or 0.0)
        assert sim.max_abs_err <= limit, (sim.max_abs_err, limit)


def test_everything_proved_means_the_simulator_agrees() -> None:
    v = _verify("shift_1e7")
    proved = all(v.property(p).status is Status.PROVED for p in (AE, NS))
    assert not proved or _sim("shift_1e7").ok


# --- false "violated" --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["shift_1e3", "shift_neg_1e3"])
def test_a_constant_bias_on_every_score_keeps_exactly_once(name: str) -> None:
    assert _sim(name).ok
    assert _prop(name, AE).status is Status.PROVED
    assert _prop(name, EO).status is Status.PROVED


def test_a_scale_off_by_2_to_the_minus_19_is_violated_below_f16_resolution() -> None:
    """By the spec (2^-20 tolerance, a 1e-6 witness), though the simulator cannot see it."""
    p = _prop("scale_2m19", AE)
    assert p.status is Status.VIOLATED
    assert p.counterexample is not None
    assert _sim("scale_2m19").ok
    assert _prop("scale_2m21", AE).status is Status.PROVED


# --- mistakes caught (each confirmed by the simulator) ------------------------------------


@pytest.mark.parametrize(("name", "opts", "says"), [
    ("tiled_p_tile_max", {}, "not rescaled"),
    ("tiled_o_wrong_alpha", {}, "not rescaled"),
    ("mixed_peers", {"args": (("n_ranks", 3),)}, "not rescaled"),
    ("max_of_v", {}, ""),
    ("split_d_bad", {"args": (("h_q", 1),)}, ""),
    ("k_off_by_one", {}, "unevenly"),
    ("kv_rows_shifted", {}, "V of another row"),
    ("final_then_local", {}, "unevenly"),
    ("q_no_trans", {"args": (("S_q", 2), ("h_kv", 2))}, "another query row"),
    ("prefill_peer_rows", {"pes": 2}, "another query row"),
    ("scratch_partial", {"outputs": ("scratch_ptr",)}, "unevenly"),
])
def test_mistakes_are_violated_and_the_simulator_agrees(name: str, opts: Opts,
                                                        says: str) -> None:
    p = _prop(name, AE, **opts)
    assert p.status is Status.VIOLATED, p.message
    assert says in p.message
    assert not _sim(name, **opts).ok


def test_merging_partials_of_other_groups_is_violated() -> None:
    v = _verify("tiled_ok", groups=GroupMode.PE)
    assert v.property(AE).status is Status.VIOLATED
    assert "another attention problem" in v.property(AE).message
    assert v.property(EO).status is Status.VIOLATED


@pytest.mark.parametrize("name", ["subset_max", "sum_of_maxima", "neg_neg_max",
                                  "log_exp_scores"])
def test_a_common_factor_that_is_not_the_max_is_attention_but_unsafe(name: str) -> None:
    v = _verify(name)
    assert v.property(AE).status is Status.PROVED
    assert v.property(NS).status is Status.VIOLATED


def test_o_in_f16_over_many_keys_is_violated() -> None:
    p = _prop("o_f16", NS, args=(("S_kv_per_rank", 32768),))
    assert p.status is Status.VIOLATED
    assert "o in f16" in p.message or "65504" in p.message


# --- correct idioms proved; out of scope unknown ----------------------------------------


@pytest.mark.parametrize(("name", "opts"), [
    ("tiled_ok", {}),
    ("tiled_four", {}),
    ("store_then_final", {}),
    ("scale_2m21", {}),
    ("ell_bf16", {}),
    ("prefill_pair", {"pes": 2}),
    ("scratch_partial", {"outputs": ("o_ptr",)}),
    ("split_d", {"args": (("h_q", 1),)}),   # the scores as two dots over halves of d_head
])
def test_correct_idioms_are_proved(name: str, opts: Opts) -> None:
    # numeric_safety at a stated tolerance: these idioms' rounding bounds (1.4e-2..3.9e-2
    # ·max|V| at |inputs| <= 16) are above the simulator's 1e-2
    v = _verify(name, 0.1, **opts)
    for prop in (AE, EO, NS):
        assert v.property(prop).status is Status.PROVED, (prop, v.property(prop).message)
    assert _sim(name, **opts).ok


def test_scores_clamped_before_the_softmax_are_violated_where_keys_dominate() -> None:
    """Out of the algebra (a max over rows of a clamped value), but not attention: the
    witness search makes a block of keys dominate until the clamp acts."""
    p = _prop("clamped_scores", AE)
    assert p.status is Status.VIOLATED
    text = p.message + "".join(d.format() for d in p.counterexample.diagnostics) \
        if p.counterexample else p.message
    assert "scaled by 4 (they dominate" in text and "40-digit" in text
