"""attention_equivalence (verify/attention.py): correct idioms proved, realistic mistakes
violated with a witness and named at their lines, never a false "proved"."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from semantic_helpers import CASES, KERNELS, SEED, TREES, run, text_of

from meshproof.model.schedule import Scalar
from meshproof.verify.result import PropertyResult, Status


def prop(kernel: str, **opts: object) -> PropertyResult:
    return run(kernel, **opts).property("attention_equivalence")


_text = text_of


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
    p = prop(f"{KERNELS / 'review_merge.py'}::good", pes=2,
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


@settings(max_examples=25, deadline=None)
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


@settings(max_examples=25, deadline=None)
@given(_mixed())
def test_merge_trees_mixing_representations_are_attention_and_merge_once(
        case: tuple[int, str, str]) -> None:
    tiles, plan, reprs = case
    v = run(TREES, pes=1, args={"plan": plan, "tiles": tiles, "reprs": reprs,
                                "S_kv_per_rank": 12})
    for name in ("attention_equivalence", "exactly_once_merge"):
        p = v.property(name)
        assert p.status is Status.PROVED, (plan, reprs, name, _text(p))


@settings(max_examples=20, deadline=None)
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
