"""attention_equivalence (verify/attention.py): correct idioms proved, realistic mistakes
violated with a witness and named at their lines, never a false "proved"; the numpy
simulator as independent evidence that each mistaken kernel computes something else."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from semantic_helpers import AE, CASES, EO, KERNELS, NS, SEED, TREES, LineKernels, run, text_of

from meshproof.model.schedule import GroupMode, Scalar
from meshproof.verify.result import PropertyResult, Status


def prop(kernel: str, **opts: object) -> PropertyResult:
    return run(kernel, **opts).property("attention_equivalence")


_text = text_of

# kernels of a line of PEs, verified for the three semantic properties only
NORM = LineKernels("normalisation_cases.py")
ONLINE = LineKernels("online_softmax_variants.py")
ROUND = LineKernels("rounding_cases.py", pes=2, input_bound=16.0)
Opts = dict[str, object]


@pytest.mark.parametrize("name", ["mesh_mlo_1d", "mesh_mlo_2d", "ring_mlo", "mesh_kv"])
def test_built_in_kernels_are_attention(name: str) -> None:
    p = prop(name)
    assert p.status is Status.PROVED, p.message
    assert "for all inputs" in p.message


@pytest.mark.parametrize("name", ["reference_line", "lse_merge", "exp2_consistent",
                                  "eps_guard", "tiled_flash", "spill"])
def test_correct_idioms_are_proved(name: str) -> None:
    p = prop(f"{CASES}::{name}", pes=4)
    assert p.status is Status.PROVED, _text(p)


def test_blocked_gqa_is_proved_and_interleaved_gqa_is_violated() -> None:
    gqa = {"h_q": 4, "h_kv": 2}
    assert prop(f"{CASES}::reference_line", pes=2, args=gqa).status is Status.PROVED
    bad = prop(f"{CASES}::interleaved_gqa", pes=2, args=gqa)
    assert bad.status is Status.VIOLATED
    assert "h // 2" in _text(bad)


MISTAKES = {
    "store_q": "the output holds Q, not a merge of partials",
    "store_max": "the output holds a running max (m), not a merge",
    "zeros_after": "the output holds a constant, not a merge",
    "times_two": "is scaled by 2",
    "plus_self": "a double merge",
    "ell_only_twice": "the received ℓ is scaled by 2",
    "tiny_f32": "which is 0 in f32 on the machine",
    "tiny_f16": "which is 0 in f16 on the machine",
    "no_rescale": "not rescaled by exp(m_old - m_new)",
    "exp2_once": "not rescaled by exp(m_old - m_new)",
    "swap_m_ell": "maximum of a running max (m) and ℓ",
    "ell_by_max": "maximum of ℓ and ℓ",
    "normalise_first": "is already divided by the softmax denominator",
    "sum_of_keys": "scores of several key rows added together",
    "no_scale": "are scaled by 1; the reference uses 0.353553",
}


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_mistakes_are_violated_with_a_witness_and_named(name: str) -> None:
    p = prop(f"{CASES}::{name}", pes=4)
    assert p.status is Status.VIOLATED, _text(p)
    text = _text(p)
    assert MISTAKES[name] in text
    assert "witness: on seeded N(0,1) inputs" in text
    assert "semantic_cases.py:" in text


VIEWS = KERNELS / "view_cases.py"


def test_a_swap_of_o_in_row_chunks_through_views_is_proved() -> None:
    """tl.view selects exactly its elements: each head's rows, sent, merged and stored
    on their own, are attention (and every other property holds)."""
    verdict = run(f"{VIEWS}::chunked", pes=2)
    assert [p.name.value for p in verdict.properties if p.status is not Status.PROVED] == []


@pytest.mark.parametrize("name", ["same_chunk_twice", "factor_of_other_row"])
def test_views_of_the_wrong_rows_are_violated(name: str) -> None:
    p = prop(f"{VIEWS}::{name}", pes=2)
    assert p.status is Status.VIOLATED, _text(p)
    assert "view_cases.py:" in _text(p)


def test_the_seed_kernel_is_violated_with_its_causes_at_their_lines() -> None:
    if not SEED.exists():
        pytest.skip("../shared/seeds is not present")
    p = prop(f"{SEED}::attention_mesh_mlo_kernel",
             args={"S_q": 1, "S_kv_per_rank": 16, "h_q": 1, "h_kv": 1, "d_head": 8},
             queue_depth=3)
    text = _text(p)
    assert p.status is Status.VIOLATED
    assert "use a reshape of K (line 10), not its transpose" in text  # the K "transpose"
    assert "scaled by 1; the reference uses 0.353553" in text  # no 1/sqrt(d)
    assert "already divided by the softmax denominator" in text    # o / ℓ again
    assert "line 111 divides by ℓ again" in text


def test_the_normalised_merge_variant_is_caught_statically() -> None:
    p = prop("mesh_mlo_1d_normalised_merge")
    assert p.status is Status.VIOLATED
    assert "already divided by the softmax denominator" in _text(p)


def test_a_launch_with_no_output_is_unknown_not_proved() -> None:
    p = prop(f"{KERNELS / 'pair_merges.py'}::good", pes=2,
             args={})
    assert p.status is not Status.PROVED or "equal" in p.message


def test_forgotten_all_reduce_on_an_unwired_launch_is_violated() -> None:
    p = prop(f"{KERNELS / 'no_allreduce.py'}::no_allreduce", pes=1, cubes=2, wiring="pe_line",
             args={"S_q": 1, "S_kv_per_rank": 8, "h_q": 1, "h_kv": 1, "d_head": 8})
    assert p.status is Status.VIOLATED
    assert "rows are missing" in _text(p)


# --- random merge trees ------------------------------------------------------------------

def _trees(tiles: int) -> st.SearchStrategy[str]:
    leaves = st.sampled_from([f"t{i}" for i in range(tiles)] + ["e"])

    def build(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.tuples(children, children).map(lambda p: f"({p[0]} {p[1]})")

    return st.recursive(leaves, build, max_leaves=6)


def _uses_each_tile_once(plan: str, tiles: int) -> bool:
    toks = plan.replace("(", " ").replace(")", " ").split()
    return sorted(t for t in toks if t != "e") == [f"t{i}" for i in range(tiles)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(st.sampled_from([2, 4]).flatmap(lambda n: st.tuples(st.just(n), _trees(n))))
def test_random_merge_trees_over_the_tiles_are_proved(case: tuple[int, str]) -> None:
    tiles, plan = case
    if not _uses_each_tile_once(plan, tiles):
        return
    p = prop(TREES, pes=1, args={"plan": plan, "tiles": tiles})
    assert p.status is Status.PROVED, (plan, _text(p))


MUTATION_WORDS = {
    "drop_rescale": "not rescaled",
    "twice": "scaled by 2",
    "swap": "maximum of",
    "exp2": "not rescaled",
    "normalise": "normalised",
}


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(sorted(MUTATION_WORDS)), st.sampled_from(["((t2 t0) (t3 t1))",
                                                               "(t3 ((t1 t0) t2))",
                                                               "(((t0 t1) t2) t3)"]),
       st.integers(0, 2))
def test_single_mutations_of_a_correct_merge_are_violated(mutation: str, plan: str,
                                                          at: int) -> None:
    args: dict[str, Scalar] = {"plan": plan, "tiles": 4, "mutation": mutation, "at": at}
    p = prop(TREES, pes=1, args=args)
    assert p.status is Status.VIOLATED, (plan, mutation, at, _text(p))
    assert "witness:" in _text(p)
    assert MUTATION_WORDS[mutation] in _text(p)


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_the_simulator_confirms_each_mistake(name: str) -> None:
    """The witness is not an artefact of the verifier: the numpy simulator, fed its own
    inputs, finds the same kernel out of tolerance."""
    from meshproof.model.launch import LaunchOptions, build_launch
    from meshproof.model.loader import resolve_kernel
    from meshproof.model.trace import trace
    from meshproof.sim.api import simulate
    from meshproof.sim.config import SimConfig

    ref = resolve_kernel(f"{CASES}::{name}")
    sim = simulate(trace(ref, build_launch(ref, LaunchOptions(pes=4))), SimConfig(timing=False))
    assert sim.numeric is not None and not sim.numeric.ok, sim.numeric


# --- random merge trees mixing the four representations ----------------------------------


@st.composite
def _mixed(draw: st.DrawFn) -> tuple[int, str, str]:
    """A tree over every tile once plus up to two empty partials, in a random order and
    association, each merge in a random representation (merge_trees.REPRESENTATIONS)."""
    tiles = draw(st.sampled_from([2, 3, 4]))
    leaves = [f"t{i}" for i in draw(st.permutations(list(range(tiles))))]
    for _ in range(draw(st.integers(0, 2))):
        leaves.insert(draw(st.integers(0, len(leaves))), "e")

    def tree(xs: list[str]) -> str:
        if len(xs) == 1:
            return xs[0]
        k = draw(st.integers(1, len(xs) - 1))
        return f"({tree(xs[:k])} {tree(xs[k:])})"

    return tiles, tree(leaves), draw(st.text(alphabet="mlpsr", min_size=1, max_size=4))


@settings(max_examples=12, deadline=None)
@given(_mixed())
def test_merge_trees_mixing_representations_are_attention_and_merge_once(
        case: tuple[int, str, str]) -> None:
    tiles, plan, reprs = case
    v = run(TREES, pes=1, args={"plan": plan, "tiles": tiles, "reprs": reprs,
                                "S_kv_per_rank": 12})
    for name in ("attention_equivalence", "exactly_once_merge"):
        p = v.property(name)
        assert p.status is Status.PROVED, (plan, reprs, name, _text(p))


@settings(max_examples=10, deadline=None)
@given(_mixed(), st.sampled_from(sorted(MUTATION_WORDS)), st.integers(0, 8))
def test_single_mutations_in_mixed_trees_are_violated_with_a_40_digit_witness(
        case: tuple[int, str, str], mutation: str, at: int) -> None:
    tiles, plan, reprs = case
    merges = plan.count("(")
    args: dict[str, Scalar] = {"plan": plan, "tiles": tiles, "reprs": reprs,
                               "mutation": mutation, "at": at % merges, "S_kv_per_rank": 12}
    p = prop(TREES, pes=1, args=args)
    if p.status is not Status.VIOLATED and _harmless(plan, at % merges, mutation, reprs):
        return
    assert p.status is Status.VIOLATED, (plan, reprs, mutation, at, _text(p))
    assert "evaluated in 40-digit" in _text(p)


def _harmless(plan: str, at: int, mutation: str, reprs: str) -> bool:
    """A mutation that changes nothing: one side holds only empty partials (its weight
    is 0: doubling or not rescaling it is exact), or "normalise" on an incoming side that
    another representation already handed back normalised (ℓ = 1)."""
    merges = _merges(plan)
    left, right = merges[at]
    if any(all(leaf == "e" for leaf in side) for side in (left, right)):
        return True
    if mutation == "normalise" and len(right) > 1:
        inner = next(i for i, (lf, rt) in enumerate(merges) if lf + rt == right)
        return reprs[inner % len(reprs)] != "m"
    return False


def _merges(plan: str) -> list[tuple[list[str], list[str]]]:
    """The merges of a plan in the order the kernel runs them (children first), each as
    the leaves of its two sides."""
    tokens = plan.replace("(", " ( ").replace(")", " ) ").split()
    pos = 0
    out: list[tuple[list[str], list[str]]] = []

    def walk() -> list[str]:
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok != "(":
            return [tok]
        left, right = walk(), walk()
        pos += 1
        out.append((left, right))
        return left + right

    walk()
    return out


# --- the merge formulas real systems use, and issue 17's classes -------------------------

FORMS = f"{KERNELS / 'merge_forms.py'}"
HAZARDS = f"{KERNELS / 'hazard_cases.py'}"


@pytest.mark.parametrize("name", ["lse_textbook", "flashinfer_merge_state", "ringflash_log1p",
                                  "ringflash_log1p_op", "ringflash_sigmoid", "lerp_merge",
                                  "alpha_beta", "shifted_normalise", "times_reciprocal",
                                  "tree_attention", "gqa_broadcast"])
def test_merge_formulas_of_real_systems_are_attention(name: str) -> None:
    p = prop(f"{FORMS}::{name}")
    assert p.status is Status.PROVED, _text(p)


@pytest.mark.parametrize("name", ["sglang_base2_into_natural", "lse_double_weight",
                                  "lerp_wrong_weight"])
def test_wrong_merge_formulas_are_violated_with_a_40_digit_witness(name: str) -> None:
    p = prop(f"{FORMS}::{name}")
    assert p.status is Status.VIOLATED, _text(p)
    assert "evaluated in 40-digit" in _text(p)


def test_a_far_reference_point_is_attention_not_float64_noise() -> None:
    """Weights exp(s - m - 738) are float64 subnormals: only the exact form (and a
    40-digit re-check) tells the output is attention."""
    assert prop(f"{HAZARDS}::far_reference").status is Status.PROVED


@pytest.mark.parametrize(("name", "pes"), [("store_q", 1), ("store_nan", 1)])
def test_a_kernel_that_never_loads_kv_is_violated_with_a_witness(name: str, pes: int) -> None:
    p = prop(f"{HAZARDS}::{name}", pes=pes)
    assert p.status is Status.VIOLATED
    assert "witness:" in _text(p)


def test_a_rank_that_never_loads_its_slice_leaves_it_unmerged() -> None:
    p = prop(f"{HAZARDS}::idle_slice")
    assert p.status is Status.VIOLATED
    assert "rows are missing" in _text(p) and "40-digit" in _text(p)
    assert prop(f"{HAZARDS}::every_slice").status is Status.PROVED


def test_a_rank_rescaling_by_its_own_max_is_violated() -> None:
    p = prop(f"{HAZARDS}::own_max_against_peer")
    assert p.status is Status.VIOLATED and "40-digit" in _text(p)
    assert prop(f"{HAZARDS}::peer_max").status is Status.PROVED


def test_the_lse_ring_keeps_one_form_size_whatever_the_number_of_ranks() -> None:
    from meshproof.model.channels import derive_channels
    from meshproof.model.launch import LaunchOptions, build_launch
    from meshproof.model.loader import resolve_kernel
    from meshproof.model.trace import trace
    from meshproof.verify.semantics import semantic_analysis

    sizes = []
    for n in (4, 8, 16):
        ref = resolve_kernel(f"{FORMS}::lse_textbook")
        opts = LaunchOptions(wiring="cube_ring", cubes=n, pes=1,
                             args=(("n_ranks", n), ("rank_axis", 1)))
        schedule = trace(ref, build_launch(ref, opts))
        a = semantic_analysis(schedule, derive_channels(schedule)).analysis
        assert a is not None
        forms = [o.form for o in a.outputs if o.form is not None]
        sizes.append({(len(f.num.terms), tuple(len(p.terms) for p, _ in f.den))
                      for f in forms})
    assert sizes[0] == sizes[1] == sizes[2] == {(1, (1,))}, sizes


# --- normalisation and store layout (tests/kernels/normalisation_cases.py) -------------


# Kernels whose stored output the simulator shows is not attention (out of tolerance, or
# nan/inf), although a semantic property once proved them: the tests below and those of
# test_semantics_safety.py and test_semantics_rounding.py must not prove them again.
WRONG_BUT_PROVED = ["headroom_eps", "twin_max_eps", "twin_max", "exp_const_zero",
                    "underflow_pair", "log_small", "subnormal_f16_send"]


@pytest.mark.parametrize("name", WRONG_BUT_PROVED)
def test_the_simulator_sees_each_mistake(name: str) -> None:
    assert not NORM.sim(name).ok


@pytest.mark.parametrize("name", ["headroom_plain", "guarded", "split_scale", "fixup_store"])
def test_the_simulator_accepts_each_correct_or_tolerable_kernel(name: str) -> None:
    args = (("h_q", 2), ("h_kv", 1)) if name == "fixup_store" else ()
    assert NORM.sim(name, args=args).ok


@pytest.mark.parametrize("name", ["headroom_eps", "twin_max_eps"])
def test_eps_guard_over_a_shifted_reference_point_is_not_proved(name: str) -> None:
    assert NORM.prop(name, AE).status is not Status.PROVED


@pytest.mark.parametrize("prop", [AE, EO])
def test_exp_of_a_constant_is_what_the_machine_holds(prop: str) -> None:
    assert NORM.prop("exp_const_zero", prop).status is not Status.PROVED


@pytest.mark.parametrize("prop", [AE, NS])
def test_a_product_of_factors_that_underflows_is_not_proved(prop: str) -> None:
    assert NORM.prop("underflow_pair", prop).status is not Status.PROVED


def test_numerator_and_denominator_scales_must_be_the_same() -> None:
    assert NORM.prop("split_scale", AE).status is not Status.PROVED


def test_verifier_and_simulator_agree_on_a_kernel_that_stores_on_one_rank() -> None:
    proved = NORM.prop("root_only", AE).status is Status.PROVED
    assert proved == NORM.sim("root_only").ok


def test_a_store_partly_rewritten_by_a_fix_up_is_judged_on_what_remains() -> None:
    p = NORM.prop("fixup_store", AE, args=(("h_q", 2), ("h_kv", 1)))
    assert p.status is not Status.VIOLATED


def test_a_store_past_the_end_of_the_output_is_violated_not_a_crash() -> None:
    assert NORM.prop("global_offset", AE).status is Status.VIOLATED


def test_a_recv_of_another_shape_is_not_a_crash() -> None:
    p = NORM.prop("trans_send", AE, pes=2, args=(("n_ranks", 2),))
    assert p.status is Status.VIOLATED


@pytest.mark.parametrize(("name", "props"), [
    ("headroom_plain", (AE, EO)),          # a reference point above the max still cancels
    ("guarded", (AE, EO, NS)),             # FlashInfer #4051 guard, every slice non-empty
    ("root_only", (AE, EO, NS)),           # only rank 0 stores
])
def test_correct_normalisations_are_proved(name: str, props: tuple[str, ...]) -> None:
    # numeric_safety at a stated tolerance: these idioms' rounding bounds (1.4e-2..1.5e-2
    # ·max|V| at |inputs| <= 16) are above the simulator's 1e-2
    v = NORM.verify(name, tolerance=2e-2)
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
    p = NORM.prop(name, AE, args=args)
    assert p.status is Status.VIOLATED
    assert says in p.message
    assert not NORM.sim(name, args=args).ok


# --- online softmax variants (tests/kernels/online_softmax_variants.py) ----------------


def test_a_scale_off_by_2_to_the_minus_19_is_violated_below_f16_resolution() -> None:
    """By the spec (2^-20 tolerance, a 1e-6 witness), though the simulator cannot see it."""
    p = ONLINE.prop("scale_2m19", AE)
    assert p.status is Status.VIOLATED
    assert p.counterexample is not None
    assert ONLINE.sim("scale_2m19").ok
    assert ONLINE.prop("scale_2m21", AE).status is Status.PROVED


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
    p = ONLINE.prop(name, AE, **opts)
    assert p.status is Status.VIOLATED, p.message
    assert says in p.message
    assert not ONLINE.sim(name, **opts).ok


def test_merging_partials_of_other_groups_is_violated() -> None:
    v = ONLINE.verify("tiled_ok", groups=GroupMode.PE)
    assert v.property(AE).status is Status.VIOLATED
    assert "another attention problem" in v.property(AE).message
    assert v.property(EO).status is Status.VIOLATED


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
def test_correct_online_softmax_variants_are_proved(name: str, opts: Opts) -> None:
    # numeric_safety at a stated tolerance: these idioms' rounding bounds (1.4e-2..3.9e-2
    # ·max|V| at |inputs| <= 16) are above the simulator's 1e-2
    v = ONLINE.verify(name, tolerance=0.1, **opts)
    for prop in (AE, EO, NS):
        assert v.property(prop).status is Status.PROVED, (prop, v.property(prop).message)
    assert ONLINE.sim(name, **opts).ok


def test_scores_clamped_before_the_softmax_are_violated_where_keys_dominate() -> None:
    """Out of the algebra (a max over rows of a clamped value), but not attention: the
    witness search makes a block of keys dominate until the clamp acts."""
    p = ONLINE.prop("clamped_scores", AE)
    assert p.status is Status.VIOLATED
    text = p.message + "".join(d.format() for d in p.counterexample.diagnostics) \
        if p.counterexample else p.message
    assert "scaled by 4 (they dominate" in text and "40-digit" in text


# --- groups and outputs (tests/kernels/rounding_cases.py) ------------------------------


def test_a_late_store_over_half_the_output_is_violated() -> None:
    p = ROUND.prop("overwrite_half", AE)
    assert p.status is Status.VIOLATED
    assert "another query row or q head" in p.message
    assert ROUND.prop("overwrite_half", EO).status is Status.VIOLATED
    assert not ROUND.sim("overwrite_half").ok


@pytest.mark.parametrize("name", ["peer_q", "peer_v"])
def test_another_users_inputs_are_not_attention(name: str) -> None:
    p = ROUND.prop(name, AE, groups=GroupMode.PE)
    assert p.status is Status.VIOLATED
    assert "attention problem" in p.message and "another" in p.message


def test_a_rank_that_reads_no_kv_is_named_in_the_verdict() -> None:
    """By the spec (§1 Shards) a launched rank that loads no KV holds no shard, and the
    reference is over the keys loaded; the header's shard count is what shows it."""
    p = ROUND.prop("skips_last", AE, pes=4, args=(("n_ranks", 4),))
    assert p.status is Status.PROVED
    assert "4 rank(s) with 3 KV shard(s)" in p.message


def test_a_store_past_the_end_of_the_output_is_a_lost_write() -> None:
    """Told by a typed result (analysis.Unplaced.outside), not by the message's wording."""
    bad = prop(f"{CASES}::store_past_end", pes=2)
    assert bad.status is Status.VIOLATED
    assert "land outside the output buffer" in bad.message
    assert "stores beyond the end of the output (24 > 16 elements)" in _text(bad)
    assert prop(f"{CASES}::reference_line", pes=2).status is Status.PROVED
