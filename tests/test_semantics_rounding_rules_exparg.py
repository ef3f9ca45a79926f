"""verify/semantics/rounding_rules_exparg.py: rule E, the rounding of exp(s̃ - max s̃)'s
argument weighed by the keys it moves. The lemma against blocks rounded as the machine
rounds them (f32, then the dtype), an adversarial block that comes close to K*, and the
idiom it proves: f16 scores with an f32 merge at |inputs| <= 2."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from meshproof.model.schedule import DType
from meshproof.verify.semantics.rounding_rules_exparg import exp_argument_bound, rho

_NP = {DType.F16: np.float16, DType.F32: np.float32}


def _tv(s: np.ndarray, k: np.ndarray) -> float:
    """Total variation between softmax(s) and softmax(s) tilted by e^k (float64, the
    differences through expm1: no cancellation)."""
    w = np.exp(s - s.max())
    w /= w.sum()
    mu = float(np.sum(w * np.exp(k)))
    return float(np.sum(np.maximum(w * np.expm1(k - math.log(mu)), 0.0)))


def _machine_tilt(s_held: np.ndarray, dtype: DType) -> tuple[np.ndarray, float]:
    """The argument roundings k_j = z_j - RN(z_j) of z = m̃ - s̃ (f32, then dtype)."""
    m = s_held.max()
    z = m - s_held                                     # exact: float64 holds it
    zr = z.astype(np.float32).astype(_NP[dtype]).astype(np.float64)
    return z - zr, float(z.max())


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 32), st.sampled_from([DType.F16, DType.F32]),
       st.sampled_from([1.0, 8.0, 64.0, 700.0]), st.integers(0, 2 ** 31))
def test_no_block_of_machine_arguments_moves_the_weights_by_more_than_k_star(
        n: int, dtype: DType, mag: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    s = rng.uniform(-mag, mag, n)
    if rng.random() < 0.5:      # keys clustered near the max: the heavy ones round
        s = s.max() - rng.exponential(2.0, n)
    if rng.random() < 0.3:      # ties at binades' left ends: the largest roundings
        e = rng.integers(-3, 4, n).astype(float)
        s = -np.exp2(e) * (1.0 + 2.0 ** -11)
        s[0] = 0.0
    held = s.astype(_NP[dtype]).astype(np.float64)     # scores as the machine holds them
    e_s = float(np.max(np.abs(held - s)))
    k, zmax = _machine_tilt(held, dtype)
    # the tilt is read against the exact weights (the first step of the chain)
    bound = exp_argument_bound(n, dtype, zmax, 1.0, e_s)
    assert _tv(s, k) <= bound * (1 + 1e-9) + 1e-300


def test_an_adversarial_block_comes_within_a_factor_two_of_k_star() -> None:
    """The mistake rule E must still cover: a key at z = 1 + 2^-11, a tie that f16 rounds
    down by ρ = 2^-11 (its weight grows by e^ρ), next to the max key."""
    z = 1.0 + 2.0 ** -11
    s = np.array([0.0, -z])
    k, zmax = _machine_tilt(s, DType.F16)
    assert k[1] == 2.0 ** -11                       # rounded to 1: ties to even
    found = _tv(s, k)
    bound = exp_argument_bound(2, DType.F16, zmax, 1.0, 0.0)
    assert found <= bound
    assert found >= 0.7 * bound, (found, bound)


def test_k_star_is_far_below_the_half_ulp_it_replaces() -> None:
    """At B = 16, d_head 8, f16 scores: |s - m| <= 1448 rounds by 0.5 in f16, but the keys
    it moves weigh e^-512: K* over 16 keys is about 1e-2 of that."""
    plain = 0.5
    k = exp_argument_bound(16, DType.F16, 1448.0, 1.0, 0.43)
    assert k < 1e-2 * plain
    assert k > rho(DType.F16, 0)   # not vacuous: the keys at z near 4 weigh e^-4 each


def test_f16_scores_with_an_f32_merge_are_proved_at_2() -> None:
    """The idiom rule E proves: the study's partial (f16 scores, p = exp(s - max s) in
    f16) with the merge in f32 at |inputs| <= 2. Charging hu16(|s - m|) to every key put
    it at 1.65e-2 (unknown); weighed by the keys it moves it is below 1e-2."""
    from helpers import REPO_ROOT
    from semantic_helpers import run

    from meshproof.verify.result import NumericResult, Status

    args = {"mesh_rows": 2, "mesh_cols": 4, "S_q": 1, "S_kv_per_rank": 16, "h_q": 1,
            "h_kv": 1, "d_head": 8, "msg_dtype": "f32"}
    p = run(str(REPO_ROOT / "examples/f16_design.py::mesh_f16_design"), wiring="cube_mesh",
            cubes=8, args=args, input_bound=2.0).property("numeric_safety")
    assert isinstance(p, NumericResult) and p.status is Status.PROVED, p.message
    assert p.error_bound is not None and p.error_bound < 1e-2


def test_one_key_or_no_score_bound() -> None:
    assert exp_argument_bound(1, DType.F16, 100.0, 1.0, 0.1) == 0.0
    assert exp_argument_bound(4, DType.F16, 100.0, 1.0, math.inf) == math.inf


def test_exp2_reads_the_argument_in_log2_units() -> None:
    e = exp_argument_bound(8, DType.F16, 64.0, 1.0, 0.0)
    e2 = exp_argument_bound(8, DType.F16, 64.0, math.log(2.0), 0.0)
    assert e2 > 0.0 and e2 != e


# --- when rule E applies: exp(x - max(x)) over the kept last axis (relations.py) --------


def _ops(second: str) -> list[object]:
    from meshproof.model.schedule import Op, OpKind, SourceLoc, ValueRef

    at = SourceLoc("k.py", 1)
    s = Op(0, OpKind.LOAD, (), 1, (4, 8), DType.F16, at, ptr="k")
    if second == "max":
        m = Op(1, OpKind.MAX, (ValueRef(1),), 2, (4, 1), DType.F16, at, axis=1)
    elif second == "max over rows":
        m = Op(1, OpKind.MAX, (ValueRef(1),), 2, (1, 8), DType.F16, at, axis=0)
    else:   # a max moved by a view: its axis is no longer the one it was taken over
        m = Op(1, OpKind.MAX, (ValueRef(1),), 2, (4, 1), DType.F16, at, axis=1)
    ops: list[object] = [s, m]
    arg = 2
    if second == "viewed max":
        ops.append(Op(2, OpKind.RESHAPE, (ValueRef(2),), 5, (1, 4), DType.F16, at))
        arg = 5
    ops.append(Op(3, OpKind.SUB, (ValueRef(1), ValueRef(arg)), 3, (4, 8), DType.F16, at))
    ops.append(Op(4, OpKind.EXP, (ValueRef(3),), 4, (4, 8), DType.F16, at))
    return ops


def _relation_of_exp(second: str) -> object:
    from meshproof.model.schedule import Op
    from meshproof.verify.semantics.relations import ValueNumbers

    vn = ValueNumbers()
    ops = _ops(second)
    for op in ops[:-1]:
        assert isinstance(op, Op)
        vn.related(0, op)
        vn.note(0, op, mag=1.0)
    last = ops[-1]
    assert isinstance(last, Op)
    return vn.related(0, last)


def test_exp_of_scores_minus_their_row_max_is_related_as_maxed() -> None:
    from meshproof.verify.semantics.relations import Relation

    rel = _relation_of_exp("max")
    assert rel.relation is Relation.MAXED and rel.keys == 8   # type: ignore[attr-defined]


def test_a_max_over_another_axis_or_moved_by_a_view_gets_no_rule_e() -> None:
    """The mistakes: no key of the row need have argument 0, so K* would not hold."""
    from meshproof.verify.semantics.relations import Relation

    for second in ("max over rows", "viewed max"):
        rel = _relation_of_exp(second)
        assert rel.relation is Relation.SAME, second   # type: ignore[attr-defined]
