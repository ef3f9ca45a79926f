"""Third adversarial review of the semantic properties (issue 9): the rounding bound of
numeric_safety under bf16 casts, divisions by constants and f32 subnormals; groups and
shards. Kernels: tests/kernels/review3_semantics.py.

One test per finding. Tests of real bugs are `xfail(strict=True)`: they state what meshproof
should say, fail today, and flip (then must lose the marker) when the bug is fixed. Plain
tests pin what already works, with the simulator as independent evidence.
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
LINE = {"pes": 2, "wiring": "pe_line"}
AE, EO, NS = "attention_equivalence", "exactly_once_merge", "numeric_safety"
SMALL = (("d_head", 2), ("S_kv_per_rank", 64))     # scores small: the bound is tight-ish
Opts = dict[str, object]


def _schedule(name: str, **opts: object) -> Schedule:
    return trace_kernel(kernel_spec(f"review3_semantics.py::{name}"), **{**LINE, **opts})


def _verify(name: str, bound: float = 16.0, **opts: object) -> Verdict:
    s = _schedule(name, **opts)
    return verify(s, VerifyConfig(queue_depth=s.launch.queue_depth, only=SEMANTIC,
                                  input_bound=bound))


def _prop(name: str, prop: str, bound: float = 16.0, **opts: object) -> PropertyResult:
    return _verify(name, bound, **opts).property(prop)


def _sim(name: str, kind: InputKind = InputKind.NORMAL, seed: int = 0,
         **opts: object) -> SimNumeric:
    result = simulate(_schedule(name, **opts), SimConfig(inputs=kind, seed=seed,
                                                         timing=False))
    assert result.numeric is not None
    return result.numeric


def _max_abs(schedule: Schedule, kind: InputKind, seed: int) -> tuple[float, float]:
    """(max|V|, max|Q, K, V|) of the group's inputs, as the simulator draws them."""
    groups = find_groups(schedule, derive_channels(schedule))
    layout = group_layout(schedule, groups[0], AttentionShape.from_schedule(schedule))
    x = make_inputs(layout, (0,), kind, seed)
    return float(np.abs(x.v).max()), max(float(np.abs(t).max()) for t in (x.q, x.k, x.v))


def _stated_bound(name: str, bound: float, **opts: object) -> tuple[float, float]:
    p = _prop(name, NS, bound, **opts)
    assert isinstance(p, NumericResult)
    # stated, whether within the tolerance (proved) or above it (unknown, bound kept)
    assert p.status is not Status.VIOLATED and p.error_bound is not None, p.message
    return p.error_bound, p.error_floor or 0.0


def _within_bound(name: str, bound: float, kind: InputKind, seed: int,
                  **opts: object) -> tuple[float, float]:
    """(simulated max error, stated limit η·max|V| + τ) on inputs within |x| <= bound."""
    eta, tau = _stated_bound(name, bound, **opts)
    max_v, max_x = _max_abs(_schedule(name, **opts), kind, seed)
    assert max_x <= bound   # the inputs satisfy the verdict's assumption
    err = _sim(name, kind, seed, **opts).max_abs_err
    assert err is not None
    return err, eta * max_v + tau


# --- false "proved" ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["through_subnormals", "headroom_100"])
def test_a_floor_above_max_v_is_not_proved(name: str) -> None:
    v = _verify(name)
    assert not _sim(name).ok
    assert v.property(AE).status is Status.PROVED   # exact real arithmetic: by the spec
    assert v.property(NS).status is not Status.PROVED, v.property(NS).message


@pytest.mark.parametrize(("bound", "kind", "seed"), [
    (4.0, InputKind.NORMAL, 1),
    (8.0, InputKind.PEAKED, 2),
])
def test_v_cast_to_bf16_is_within_the_stated_bound(bound: float, kind: InputKind,
                                                   seed: int) -> None:
    err, limit = _within_bound("v_bf16", bound, kind, seed, args=SMALL)
    assert err <= limit, (err, limit)


def test_scores_scaled_back_up_are_within_the_stated_bound() -> None:
    err, limit = _within_bound("undo_prescale", 8.0, InputKind.PEAKED, 1, args=SMALL)
    assert err <= limit, (err, limit)


def test_q_and_k_cast_to_bf16_are_bounded_like_q_and_k_loaded_as_bf16() -> None:
    """The two kernels compute the same numbers (the simulator rounds a bf16 load and a
    bf16 cast alike), so one cannot be bounded tighter than the other."""
    loaded = _prop("qk_load_bf16", NS, 4.0, args=(("d_head", 2),))
    cast = _prop("qk_bf16", NS, 4.0, args=(("d_head", 2),))
    assert loaded.status is Status.UNKNOWN
    assert cast.status is Status.UNKNOWN, cast.message


# --- exactly_once_merge with another problem's V ------------------------------------------


def test_another_users_v_is_not_counted_once() -> None:
    v = _verify("peer_v", groups=GroupMode.PE)
    assert v.property(AE).status is Status.VIOLATED
    assert v.property(EO).status is Status.VIOLATED, v.property(EO).message


# --- false "violated" --------------------------------------------------------------------


def test_a_rescale_cast_to_f16_from_a_running_max_at_minus_inf_is_safe() -> None:
    assert _sim("tiled_alpha_f16").ok
    assert _prop("tiled_alpha_f16", AE).status is Status.PROVED
    p = _prop("tiled_alpha_f16", NS)
    assert p.status is not Status.VIOLATED, p.message


# --- what works -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["plain", "div_scale", "headroom_90"])
def test_correct_kernels_are_proved_and_within_their_bound(name: str) -> None:
    v = _verify(name, 4.0)
    for prop in (AE, EO, NS):
        assert v.property(prop).status is Status.PROVED, (prop, v.property(prop).message)
    err, limit = _within_bound(name, 4.0, InputKind.NORMAL, 1)
    assert err <= limit


def test_f16_scores_are_unknown_above_the_tolerance_and_proved_at_a_small_score_bound(
        ) -> None:
    """Scores kept in f16 (spacing 2^-11 relative): at |inputs| <= 4 the bound is 2.7e-1,
    above the simulator's 1e-2, so unknown, though the bound still holds; stating the score
    range |scale·q·kᵀ| <= 1 brings it to 6.1e-3: proved, the assumption in the verdict."""
    v = _verify("f16_scores", 4.0)
    assert v.property(AE).status is v.property(EO).status is Status.PROVED
    ns = v.property(NS)
    assert ns.status is Status.UNKNOWN
    assert ns.message.startswith("the first-order rounding bound 2.7e-1·max|V| exceeds the "
                                 "tolerance 1e-2·max|V| (the simulator's for a schedule "
                                 "using f16) for |inputs| <= 4: ")
    err, limit = _within_bound("f16_scores", 4.0, InputKind.NORMAL, 1)
    assert err <= limit
    s = _schedule("f16_scores")
    capped = verify(s, VerifyConfig(queue_depth=s.launch.queue_depth, only=SEMANTIC,
                                    input_bound=4.0, score_bound=1.0)).property(NS)
    assert isinstance(capped, NumericResult) and capped.status is Status.PROVED
    assert capped.score_bound == 1.0 and capped.error_bound is not None
    assert capped.error_bound < 1e-2 < ns.error_bound  # type: ignore[attr-defined]
    assert "for |inputs| <= 4, |scale·q·kᵀ| <= 1; tolerance 1e-2·max|V|" in capped.message


def test_a_late_store_over_half_the_output_is_violated() -> None:
    p = _prop("overwrite_half", AE)
    assert p.status is Status.VIOLATED
    assert "another query row or q head" in p.message
    assert _prop("overwrite_half", EO).status is Status.VIOLATED
    assert not _sim("overwrite_half").ok


@pytest.mark.parametrize("name", ["peer_q", "peer_v"])
def test_another_users_inputs_are_not_attention(name: str) -> None:
    p = _prop(name, AE, groups=GroupMode.PE)
    assert p.status is Status.VIOLATED
    assert "attention problem" in p.message and "another" in p.message


@pytest.mark.parametrize("name", ["tiled_o_bf16", "tiled_o_f16_before_div"])
def test_tiles_with_16_bit_state_are_proved_and_within_their_bound(name: str) -> None:
    args = (("S_kv_per_rank", 64),)
    for prop in (AE, EO):
        assert _prop(name, prop, 4.0, args=args).status is Status.PROVED
    # the first seed whose N(0,1) inputs lie within the verdict's |x| <= 4 (a few
    # elements of a draw pass 4 now and then; which seed depends on the generator)
    schedule = _schedule(name, args=args)
    seed = next(s for s in range(50)
                if _max_abs(schedule, InputKind.NORMAL, s)[1] <= 4.0)
    err, limit = _within_bound(name, 4.0, InputKind.NORMAL, seed, args=args)
    assert err <= limit


def test_a_rank_that_reads_no_kv_is_named_in_the_verdict() -> None:
    """By the spec (§1 Shards) a launched rank that loads no KV holds no shard, and the
    reference is over the keys loaded; the header's shard count is what shows it."""
    p = _prop("skips_last", AE, pes=4, args=(("n_ranks", 4),))
    assert p.status is Status.PROVED
    assert "4 rank(s) with 3 KV shard(s)" in p.message
