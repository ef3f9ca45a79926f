"""The situation memo is exact: the memoised analysis equals the unmemoised one.

Translation validation of situations.py: for every built-in kernel, every kernel of the
semantic test zoo and random merge trees, the analysis with the memo (each situation
computed once, shared by every rank that meets it) and without it (every op of every rank
computed afresh) must give the same value -- form, layout, interval, rounding error and the
reason for a missing one -- for every value of every rank, and the same verdict for every
stored output. A rule that read something a situation does not key on (a rank, a query
base, whether an operand was received) would show here as a difference.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from semantic_helpers import KERNELS, TREES

from meshproof.model.channels import derive_channels
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.problem import ProblemUnavailable, attention_problem
from meshproof.model.schedule import GroupMode, OpKind, Schedule
from meshproof.model.trace import trace
from meshproof.verify.semantics.analysis import Analysis, analyse
from meshproof.verify.semantics.budget import unbounded
from meshproof.verify.semantics.layouts import Value
from meshproof.verify.semantics.symbolic_core import Opaque

ZOO = ("semantic_cases.py", "merge_forms.py", "hazard_cases.py", "normalisation_cases.py",
       "online_softmax_variants.py", "rounding_cases.py", "pair_merges.py")
ZOO_STRIDE = 4
BUILTINS = ("mesh_mlo_1d", "mesh_mlo_2d", "ring_mlo", "mesh_kv")


def _zoo() -> list[object]:
    """Every kernel of the zoo modules: public functions taking `tl` by keyword.

    `make test` runs every ZOO_STRIDE-th kernel of each module (the first among them);
    the rest carry the `scale` mark and run with `make bench`: the whole zoo is 140
    kernels and 100 s of a 2-core machine, and the sample keeps every module's rules.
    """
    out: list[object] = []
    for name in ZOO:
        path = KERNELS / name
        module = _load(path)
        kernels = [attr for attr, fn in sorted(vars(module).items())
                   if not attr.startswith("_") and inspect.isfunction(fn)
                   and "tl" in inspect.signature(fn).parameters
                   and inspect.signature(fn).parameters["tl"].kind
                   is inspect.Parameter.KEYWORD_ONLY]
        out += [pytest.param(f"{path}::{attr}", id=f"{name}::{attr}",
                             marks=() if i % ZOO_STRIDE == 0 else (pytest.mark.scale,))
                for i, attr in enumerate(kernels)]
    return out


def _load(path: Path) -> object:
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"_zoo_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _schedule(kernel: str, **opts: object) -> Schedule:
    ref = resolve_kernel(kernel)
    args = tuple(sorted(opts.pop("args", {}).items()))  # type: ignore[attr-defined]
    return trace(ref, build_launch(ref, LaunchOptions.from_mapping({"args": args, **opts}, "test")))


def _analyses(schedule: Schedule) -> tuple[Analysis, Analysis] | None:
    spec = schedule.launch
    try:
        problem = attention_problem(schedule, spec.groups, spec.outputs, spec.softmax_scale)
    except ProblemUnavailable:   # no attention problem: nothing for the memo to get wrong
        return None
    table = derive_channels(schedule)
    return (analyse(schedule, table, problem, unbounded(), memo=True),
            analyse(schedule, table, problem, unbounded(), memo=False))


def _text(v: Value | Opaque | None) -> str:
    if v is None:
        return "-"
    if isinstance(v, Opaque):
        # the rank is any rank where the op met the situation (the first, with the memo)
        return f"opaque: {v.reason} at {v.op.source}"
    sizes = ";".join(",".join(str(d.size) for d in axis) for axis in v.layout.axes)
    return f"{sizes}|{v.layout.shape}|{v.form.key}"


def assert_memo_exact(schedule: Schedule) -> None:
    pair = _analyses(schedule)
    if pair is None:
        return
    memo, plain = pair
    for r, values in enumerate(plain.forms.evaluation.values):
        for vid in values:
            key = (r, vid)
            got = memo.forms.get(key)
            assert _text(got) == _text(plain.forms.get(key)), key
            if isinstance(got, Opaque):
                assert any(op is got.op for op in schedule.programs[got.rank].ops), key
            assert memo.forms.interval(key) == plain.forms.interval(key), key
            assert memo.forms.err(key) == plain.forms.err(key), key
            assert memo.forms.why(key) == plain.forms.why(key), key
    assert [(o.rank, o.store.index, o.verdict) for o in memo.outputs] == \
        [(o.rank, o.store.index, o.verdict) for o in plain.outputs]


@pytest.mark.parametrize("name", BUILTINS)
def test_the_memo_equals_the_unmemoised_analysis_on_every_builtin(name: str) -> None:
    assert_memo_exact(_schedule(name))


@pytest.mark.parametrize("kernel", _zoo())
def test_the_memo_equals_the_unmemoised_analysis_on_the_zoo(kernel: str) -> None:
    try:
        schedule = _schedule(kernel)
    except Exception as exc:   # kernels that need arguments or refuse a default launch
        pytest.skip(f"no default launch: {exc}")
    assert_memo_exact(schedule)


def test_the_memo_shares_situations_across_ranks() -> None:
    """The correct idiom: a 2x4 mesh meets far fewer situations than it has values."""
    pair = _analyses(_schedule("mesh_mlo_2d"))
    assert pair is not None
    memo, plain = pair
    assert memo.forms.domain.misses * 2 < plain.forms.domain.misses


@pytest.mark.parametrize("name", ["mesh_kv", "mesh_mlo_1d"])
def test_the_memo_equals_the_unmemoised_analysis_across_groups(name: str) -> None:
    """Three cubes, each its own attention problem (and, for the prefill, its own query
    rows): the frames translate groups and query rows as well as key rows."""
    assert_memo_exact(_schedule(name, cubes=3, groups=GroupMode.CUBE))


def test_groups_and_query_blocks_share_situations() -> None:
    """The correct idiom of a panel: 64 independent cubes meet no more situations than 2
    (each group's values are another group's translated), so the cost does not grow with
    the number of groups."""
    counts = []
    for cubes in (2, 4):
        pair = _analyses(_schedule("mesh_kv", cubes=cubes, groups=GroupMode.CUBE))
        assert pair is not None
        counts.append(pair[0].forms.domain.misses)
    assert counts[0] == counts[1]


def test_a_query_against_key_tiles_is_one_situation_whatever_their_rows() -> None:
    """Q (query rows, no key rows) dotted with each rank's K tile (other key rows): the key
    rows of the tile are the only frame part the query lacks, so every rank meets the same
    situation -- a frame that kept the query's meaningless key-row part would split it by
    absolute rows (one situation per rank)."""
    pair = _analyses(_schedule("mesh_mlo_1d"))
    assert pair is not None
    dots = {(r, op.source.line) for r, op in pair[0].forms.domain.fresh
            if op.kind is OpKind.DOT}
    lines = {line for _, line in dots}
    assert len(dots) == len(lines)


def test_a_partial_of_another_group_still_differs_under_translation() -> None:
    """The realistic mistake the translation must not hide: ranks of one group merging
    another group's partial (groups by PE on a kernel that merges along the line) stay
    "another attention problem", memoised or not."""
    schedule = _schedule(str(KERNELS / "online_softmax_variants.py") + "::tiled_ok",
                         groups=GroupMode.PE)
    assert_memo_exact(schedule)
    pair = _analyses(schedule)
    assert pair is not None
    assert any("another attention problem" in r.text
               for o in pair[0].outputs for r in o.verdict.reasons)


@settings(max_examples=8, deadline=None)
@given(st.sampled_from([2, 3, 4]), st.data())
def test_the_memo_equals_the_unmemoised_analysis_on_random_merge_trees(
        tiles: int, data: st.DataObject) -> None:
    _memo_exact_on_a_random_merge_tree(tiles, data)


@pytest.mark.scale      # the same, five times as many trees: make bench
@settings(max_examples=40, deadline=None)
@given(st.sampled_from([2, 3, 4]), st.data())
def test_the_memo_equals_the_unmemoised_analysis_on_many_random_merge_trees(
        tiles: int, data: st.DataObject) -> None:
    _memo_exact_on_a_random_merge_tree(tiles, data)


def _memo_exact_on_a_random_merge_tree(tiles: int, data: st.DataObject) -> None:
    leaves = [f"t{i}" for i in data.draw(st.permutations(list(range(tiles))))]
    if data.draw(st.booleans()):
        leaves.insert(data.draw(st.integers(0, len(leaves))), "e")

    def tree(xs: list[str]) -> str:
        if len(xs) == 1:
            return xs[0]
        k = data.draw(st.integers(1, len(xs) - 1))
        return f"({tree(xs[:k])} {tree(xs[k:])})"

    plan = tree(leaves)
    reprs = data.draw(st.text(alphabet="mlpsr", min_size=1, max_size=3))
    mutation = data.draw(st.sampled_from(["", "drop_rescale", "twice", "swap", "exp2"]))
    args: dict[str, object] = {"plan": plan, "tiles": tiles, "reprs": reprs,
                               "S_kv_per_rank": 12}
    if mutation:
        args.update(mutation=mutation, at=0)
    assert_memo_exact(_schedule(TREES, pes=4, args=args))


MASKED = [("ring_prefill_causal_naive", {}), ("ring_prefill_causal_zigzag", {}),
          ("ring_prefill_causal_off_by_one", {}), ("ring_prefill_causal_striped", {}),
          ("mesh_prefill_causal_2d", {}), ("line_decode_window", {}),
          ("ring_prefill_padded", {}),
          ("ring_prefill_causal_zigzag", {"mask": "causal"}),
          ("mesh_kv", {"mask": "causal"}),
          ("ring_prefill_causal_zigzag", {"args": {"key_tile": 2}})]   # key tiles (tiles.py)


@pytest.mark.parametrize(("name", "opts"), MASKED, ids=lambda x: str(x))
def test_the_memo_equals_the_unmemoised_analysis_on_masked_launches(
        name: str, opts: dict[str, object]) -> None:
    """Guards on BOUND move with the key part of a frame (γ' = γ - c·δ_k), guards on
    free digits never move: every value and verdict is the unmemoised one."""
    assert_memo_exact(_schedule(name, **opts))


@pytest.mark.parametrize("args", [
    {"kind": 1, "param": 5}, {"kind": 2, "param": 19}, {"kind": 0, "param": 1, "lead": 1},
    {"kind": 1, "param": 3, "zigzag": 1}, {"kind": 0, "param": 0, "nomask": 1}])
def test_the_memo_equals_the_unmemoised_analysis_on_masked_variants(
        args: dict[str, int]) -> None:
    kind = ("causal", "window", "padding")[args["kind"]]
    mask = kind + (f":{args['param']}" if kind != "causal" or args["param"] else "") + \
        ("@zigzag" if args.get("zigzag") else "")
    base = {"n_ranks": 8, "S_q": 8, "S_kv_per_rank": 8, "h_q": 2, "h_kv": 1, "d_head": 4}
    assert_memo_exact(_schedule(str(KERNELS / "masked_variants.py") + "::ring_masked",
                                pes=8, wiring="pe_ring", harness="prefill", mask=mask,
                                args={**base, **args}))
