"""verify/semantics/rounding.py: the first-order rounding bound numeric_safety states.

Each rule has a mistake the bound must not cover (numeric_safety unknown, with the op) and
a correct idiom that gets a bound the simulator stays under; kernels of a line of PEs
(casts to bf16, constants added and removed, f16 subnormals, 16-bit tile state) are
simulated on inputs within the verdict's |x| <= bound and must stay within the stated
η·max|V| + τ."""

from __future__ import annotations

import pytest
from semantic_helpers import AE, CASES, EO, KERNELS, SEMANTIC, TREES, LineKernels, max_abs, run

from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.trace import trace
from meshproof.sim.api import simulate
from meshproof.sim.config import InputKind, SimConfig
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.result import NumericResult, Status

NORMALISATION = KERNELS / "normalisation_cases.py"
ONLINE_SOFTMAX = KERNELS / "online_softmax_variants.py"
NS = "numeric_safety"

# kernels of a line of PEs, verified for the three semantic properties only
NORM = LineKernels("normalisation_cases.py")
ONLINE = LineKernels("online_softmax_variants.py")
ROUND = LineKernels("rounding_cases.py", pes=2, input_bound=16.0)
CASES_LINE = LineKernels("semantic_cases.py")
Opts = dict[str, object]


def _bound(kernel: str, **opts: object) -> NumericResult:
    p = run(kernel, **opts).property(NS)
    assert isinstance(p, NumericResult)
    return p


def _simulated(kernel: str, **opts: object) -> tuple[float, float]:
    ref = resolve_kernel(kernel)
    args = tuple(sorted(opts.pop("args", {}).items()))  # type: ignore[attr-defined]
    opts = LaunchOptions.from_mapping({"args": args, **opts}, "test")
    schedule = trace(ref, build_launch(ref, opts))
    sim = simulate(schedule, SimConfig(inputs=InputKind.NORMAL, timing=False)).numeric
    assert sim is not None and sim.max_abs_err is not None
    return sim.max_abs_err, sim.max_abs_v


@pytest.mark.parametrize(("kernel", "opts"), [
    (f"{CASES}::exp2_consistent", {"pes": 4}),                  # exp2: ℓ >= 1 with k = ln 2
    (f"{NORMALISATION}::headroom_plain", {"pes": 4}),           # ℓ >= exp(-20)
    (TREES, {"pes": 1, "args": {"plan": "((t0 e) (e t1))", "tiles": 2}}),  # max(.., -1e30)
    (f"{ONLINE_SOFTMAX}::tiled_ok", {"pes": 4, "wiring": "pe_line"}),  # running state from -inf / 0
    ("mesh_kv", {}),
])
def test_correct_idioms_get_a_bound_the_simulator_stays_under(kernel: str,
                                                              opts: dict[str, object]) -> None:
    p = _bound(kernel, **dict(opts))
    # within the simulator's 1e-2 since issue 27: proved, the bound stated
    assert p.status is Status.PROVED and p.error_bound is not None, p.message
    assert "rounding bound of the outputs" in p.message
    err, v_max = _simulated(kernel, **dict(opts))
    assert err <= p.error_bound * v_max + (p.error_floor or 0.0)


@pytest.mark.parametrize(("kernel", "opts"), [
    # a constant added to o, rounded at |o + 1e30|
    (f"{ONLINE_SOFTMAX}::bias_cancel", {"pes": 4, "wiring": "pe_line"}),
    # ℓ + 2048 sent in f16
    (f"{ONLINE_SOFTMAX}::bias_cancel_f16", {"pes": 2, "wiring": "pe_line", "args": {"n_ranks": 2}}),
    # scores + 1e7 keep no fraction in f32
    (f"{ONLINE_SOFTMAX}::shift_1e7", {"pes": 4, "wiring": "pe_line"}),
])
def test_roundings_that_destroy_the_output_are_violated_with_a_witness(
        kernel: str, opts: dict[str, object]) -> None:
    """The bound cannot cover them (or passes the tolerance), and a witness on the
    simulator's arithmetic shows the error against 40-digit attention."""
    p = _bound(kernel, **dict(opts))
    assert p.status is Status.VIOLATED, p.message
    assert "on the simulator's arithmetic, where attention is" in p.message
    assert "(40 digits)" in p.message
    assert p.counterexample is not None


def test_a_kernel_whose_outputs_are_not_attention_states_no_bound_and_is_not_unknown() -> None:
    """attention_equivalence judges such outputs; numeric_safety's other checks stand."""
    p = _bound("mesh_mlo_1d_normalised_merge", pes=4)
    assert p.status is Status.PROVED and p.error_bound is None


# --- the bound against the simulator on kernels of a line of PEs -----------------------


def test_the_rounding_bound_covers_f16_subnormals() -> None:
    s = NORM.schedule("subnormal_f16_send")
    p = NORM.verify("subnormal_f16_send").property(NS)
    assert isinstance(p, NumericResult)
    sim = NORM.sim("subnormal_f16_send")
    assert sim.max_abs_err is not None
    assert p.status is not Status.PROVED or p.error_bound is None or \
        sim.max_abs_err <= p.error_bound * max_abs(s)[0] + (p.error_floor or 0.0)


def test_the_lse_merge_has_a_finite_rounding_bound() -> None:
    p = CASES_LINE.prop("lse_merge", NS)
    assert isinstance(p, NumericResult) and p.status is not Status.VIOLATED
    assert p.error_bound is not None and p.error_bound < 1.0   # 1.5e-1: stated, not proved
    assert CASES_LINE.prop("lse_merge", NS, tolerance=0.2).status is Status.PROVED


@pytest.mark.parametrize(("name", "opts"), [
    ("bias_cancel", {}),                                  # (o + 1e30) - 1e30 in f32
    ("bias_cancel_f16", {"pes": 2, "args": (("n_ranks", 2),)}),   # (ℓ + 2048) in f16 - 2048
])
def test_the_rounding_bound_covers_a_large_constant_added_and_removed(name: str,
                                                                       opts: Opts) -> None:
    p = ONLINE.prop(name, NS, **opts)
    assert isinstance(p, NumericResult)
    sim = ONLINE.sim(name, **opts)
    assert sim.max_abs_err is not None
    if p.status is Status.PROVED and p.error_bound is not None:
        limit = p.error_bound * max_abs(ONLINE.schedule(name, **opts))[0] + (p.error_floor or 0.0)
        assert sim.max_abs_err <= limit, (sim.max_abs_err, limit)


def test_everything_proved_means_the_simulator_agrees() -> None:
    v = ONLINE.verify("shift_1e7")
    proved = all(v.property(p).status is Status.PROVED for p in (AE, NS))
    assert not proved or ONLINE.sim("shift_1e7").ok


# --- casts, constants and 16-bit state (tests/kernels/rounding_cases.py) ---------------


SMALL = (("d_head", 2), ("S_kv_per_rank", 64))     # scores small: the bound is tight-ish


def _stated_bound(name: str, bound: float, **opts: object) -> tuple[float, float]:
    p = ROUND.prop(name, NS, bound, **opts)
    assert isinstance(p, NumericResult)
    # stated, whether within the tolerance (proved) or above it (unknown, bound kept)
    assert p.status is not Status.VIOLATED and p.error_bound is not None, p.message
    return p.error_bound, p.error_floor or 0.0


def _within_bound(name: str, bound: float, kind: InputKind, seed: int,
                  **opts: object) -> tuple[float, float]:
    """(simulated max error, stated limit η·max|V| + τ) on inputs within |x| <= bound."""
    eta, tau = _stated_bound(name, bound, **opts)
    max_v, max_x = max_abs(ROUND.schedule(name, **opts), kind, seed)
    assert max_x <= bound   # the inputs satisfy the verdict's assumption
    err = ROUND.sim(name, kind, seed, **opts).max_abs_err
    assert err is not None
    return err, eta * max_v + tau


@pytest.mark.parametrize("name", ["through_subnormals", "headroom_100"])
def test_a_floor_above_max_v_is_not_proved(name: str) -> None:
    v = ROUND.verify(name)
    assert not ROUND.sim(name).ok
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


def test_scores_scaled_back_up_are_violated_with_a_witness_within_the_stated_bound() -> None:
    """Scores kept in f16 at 1/4096 of their size: the bound (above the tolerance) holds,
    and a witness shows an error above the tolerance too."""
    p = ROUND.prop("undo_prescale", NS, 8.0, args=SMALL)
    assert isinstance(p, NumericResult) and p.status is Status.VIOLATED, p.message
    assert p.error_bound is not None and p.counterexample is not None
    found = p.counterexample.to_json()["witness"]["error"]
    assert p.tolerance < found <= p.error_bound


def test_q_and_k_cast_to_bf16_are_bounded_like_q_and_k_loaded_as_bf16() -> None:
    """The two kernels compute the same numbers (the simulator rounds a bf16 load and a
    bf16 cast alike), so one cannot be bounded tighter than the other."""
    loaded = ROUND.prop("qk_load_bf16", NS, 4.0, args=(("d_head", 2),))
    cast = ROUND.prop("qk_bf16", NS, 4.0, args=(("d_head", 2),))
    assert loaded.status is Status.UNKNOWN
    assert cast.status is Status.UNKNOWN, cast.message


@pytest.mark.parametrize("name", ["plain", "div_scale", "headroom_90"])
def test_correct_kernels_are_proved_and_within_their_bound(name: str) -> None:
    v = ROUND.verify(name, 4.0)
    for prop in (AE, EO, NS):
        assert v.property(prop).status is Status.PROVED, (prop, v.property(prop).message)
    err, limit = _within_bound(name, 4.0, InputKind.NORMAL, 1)
    assert err <= limit


def test_f16_scores_are_violated_above_the_tolerance_and_proved_at_a_small_score_bound(
        ) -> None:
    """Scores kept in f16 (spacing 2^-11 relative): at |inputs| <= 4 the bound is 1.6e-2,
    above the simulator's 1e-2, and the aimed witness families (KV slices whose maxima sit
    at the two ends of one f16 cell) reach 1.5e-2, within the bound: violated; stating
    the score range |scale·q·kᵀ| <= 1 brings it under: proved, the assumption in the
    verdict."""
    v = ROUND.verify("f16_scores", 4.0)
    assert v.property(AE).status is v.property(EO).status is Status.PROVED
    ns = v.property(NS)
    assert isinstance(ns, NumericResult) and ns.status is Status.VIOLATED, ns.message
    assert "(rounding bound 1.6e-2·max|V|)" in ns.message
    assert ns.counterexample is not None and ns.error_bound is not None
    found = ns.counterexample.to_json()["witness"]["error"]
    assert 1e-2 < found <= ns.error_bound
    s = ROUND.schedule("f16_scores")
    capped = verify(s, VerifyConfig(queue_depth=s.launch.queue_depth, only=SEMANTIC,
                                    input_bound=4.0, score_bound=1.0)).property(NS)
    assert isinstance(capped, NumericResult) and capped.status is Status.PROVED
    assert capped.score_bound == 1.0 and capped.error_bound is not None
    assert capped.error_bound < 1e-2 < ns.error_bound  # type: ignore[attr-defined]
    assert "for |inputs| <= 4, |scale·q·kᵀ| <= 1; tolerance 1e-2·max|V|" in capped.message


@pytest.mark.parametrize("name", ["tiled_o_bf16", "tiled_o_f16_before_div"])
def test_tiles_with_16_bit_state_are_proved_and_within_their_bound(name: str) -> None:
    args = (("S_kv_per_rank", 64),)
    for prop in (AE, EO):
        assert ROUND.prop(name, prop, 4.0, args=args).status is Status.PROVED
    # the first seed whose N(0,1) inputs lie within the verdict's |x| <= 4 (a few
    # elements of a draw pass 4 now and then; which seed depends on the generator)
    schedule = ROUND.schedule(name, args=args)
    seed = next(s for s in range(50)
                if max_abs(schedule, InputKind.NORMAL, s)[1] <= 4.0)
    err, limit = _within_bound(name, 4.0, InputKind.NORMAL, seed, args=args)
    assert err <= limit


# --- issue 27: one rule per op kind, the study's f16 design -----------------------------


def test_every_op_kind_has_a_rounding_rule_or_is_handled_before_the_table() -> None:
    from meshproof.model.schedule import OpKind
    from meshproof.verify.semantics.rounding import _RULES, HANDLED_BEFORE

    missing = [k for k in OpKind if k not in _RULES and k not in HANDLED_BEFORE
               and k not in (OpKind.SEND, OpKind.STORE)]
    assert not missing, f"no rounding rule for {missing}"


F16_DESIGN = "examples/f16_design.py::mesh_f16_design"
F16_ARGS = {"mesh_rows": 2, "mesh_cols": 4, "S_q": 1, "S_kv_per_rank": 16, "h_q": 1,
            "h_kv": 1, "d_head": 8}


def _f16_design(bound: float, **args: object) -> NumericResult:
    from helpers import REPO_ROOT
    p = run(str(REPO_ROOT / F16_DESIGN), wiring="cube_mesh", cubes=8,
            args={**F16_ARGS, **args}, input_bound=bound).property(NS)
    assert isinstance(p, NumericResult)
    return p


def test_f16_scores_at_16_are_violated_with_a_witness_at_the_store() -> None:
    """The mistake: scores kept in f16 at |inputs| <= 16 (spacing 0.5 at 724)."""
    p = _f16_design(16.0)
    assert p.status is Status.VIOLATED, p.message
    assert "f16_design.py:63" in p.message and "(40 digits)" in p.message
    assert p.counterexample is not None
    details = p.counterexample.to_json()["witness"]
    assert details["error"] > 1e-2 and details["inputs"] is not None
    assert set(details["inputs"]) == {"q", "k", "v"}


def test_f16_scores_with_f32_messages_at_1_are_proved() -> None:
    """The idiom: the same partial with the merge in f32 at |inputs| <= 1."""
    p = _f16_design(1.0, msg_dtype="f32")
    assert p.status is Status.PROVED, p.message
    assert p.error_bound is not None and p.error_bound < 6e-3


def test_the_culprit_of_f16_scores_is_the_score_line_with_its_remedy() -> None:
    p = _f16_design(16.0)
    assert "the rounding of the scores at examples/f16_design.py:21 (f16) contributes" in \
        p.message
    assert 'out_dtype="f32"' in p.message
    assert p.culprits and p.culprits[0].mechanism.name == "SCORES"
    # op, kernel line, dtype, share: the dtype is the one the line's op rounds to
    first = p.to_json()["culprits"][0]
    assert first["sites"] == ["examples/f16_design.py:21"] and first["dtypes"] == ["f16"]


def test_the_culprit_of_f16_messages_is_the_narrowed_max_at_the_send() -> None:
    p = _bound("mesh_mlo_1d", args={"msg_dtype": "f16"})
    assert p.status is Status.VIOLATED
    first = p.culprits[0]
    assert first.mechanism.name == "NARROWED_MAX" and first.share > 0.9
    assert first.sites == ("meshproof/kernels/mesh_mlo.py:52",) and first.dtypes == ("f16",)
    assert "send m in f32" in p.message
    shares = [c["share"] for c in p.to_json()["culprits"]]
    assert shares == sorted(shares, reverse=True)


def test_a_proved_bound_names_its_largest_shares() -> None:
    p = _bound("mesh_mlo_2d")
    assert p.status is Status.PROVED
    assert "largest shares: " in p.message
    assert {c.mechanism.name for c in p.culprits[:3]} == {"STORE", "CAST", "SCORES"}
    assert all(len(c.dtypes) == len(c.sites) and set(c.dtypes) <= {"f16", "bf16", "f32"}
               for c in p.culprits)


# --- sigmoid and the log-sum-exp merges (tests/kernels/merge_forms.py) -------------------


MERGE_FORMS = KERNELS / "merge_forms.py"


@pytest.mark.parametrize("name", ["sigmoid_pair", "lse_textbook", "flashinfer_merge_state"])
def test_log_sum_exp_merges_are_proved_at_the_default_tolerance(name: str) -> None:
    """The idioms: partials carried as (lse, normalised o); m̃ + log X̃ cancels m̃'s error,
    and a convex combination costs its worst part."""
    p = _bound(f"{MERGE_FORMS}::{name}", pes=4, args={"n_ranks": 4})
    assert p.status is Status.PROVED, p.message
    assert p.error_bound is not None and p.error_bound < 1e-2
    err, v_max = _simulated(f"{MERGE_FORMS}::{name}", pes=4, args={"n_ranks": 4})
    assert err <= p.error_bound * v_max + (p.error_floor or 0.0)


def test_a_sigmoid_of_an_lse_difference_in_f16_is_violated_with_a_witness() -> None:
    """The mistake: the lse difference taken in f16 (spacing 0.5 near 700)."""
    p = _bound(f"{MERGE_FORMS}::sigmoid_pair_f16", pes=4, args={"n_ranks": 4})
    assert p.status is Status.VIOLATED, p.message
    assert "(40 digits)" in p.message


def test_o_times_the_reciprocal_of_l_is_a_normalisation_of_partners() -> None:
    """The idiom: one reciprocal per row, o · (1/ℓ), judged as o / ℓ."""
    p = ROUND.prop("reciprocal", NS, 4.0, tolerance=2e-3)
    assert isinstance(p, NumericResult) and p.status is Status.PROVED, p.message
    err, limit = _within_bound("reciprocal", 4.0, InputKind.NORMAL, 1)
    assert err <= limit


def test_a_reciprocal_of_l_in_bf16_is_violated_below_its_precision() -> None:
    """The mistake, for a kernel that needs 2e-3: ℓ rounded to bf16 (2^-9) first."""
    p = ROUND.prop("reciprocal_bf16", NS, 4.0, tolerance=2e-3)
    assert isinstance(p, NumericResult) and p.status is Status.VIOLATED, p.message
    assert p.culprits and p.culprits[0].mechanism.name == "CAST"
