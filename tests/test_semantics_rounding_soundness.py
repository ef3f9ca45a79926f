"""verify/semantics/rounding.py against the machine: on random merge trees (every merge
representation: online softmax, log-sum-exp, log(1 + exp), sigmoid, lerp) and random
lines of the built-ins (f32 and f16 messages), at random input bounds, no input the
witness search tries -- its structured families, V signed by each key's weight error and
a short hill climb -- exceeds the stated bound η·max|V| + τ (spec/semantics.md §7)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from semantic_helpers import SEMANTIC, TREES

from meshproof.model.channels import derive_channels
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.trace import trace
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.result import NumericResult
from meshproof.verify.semantics import semantic_analysis
from meshproof.verify.semantics.rounding_witness import (
    climb,
    families,
    signed_v,
    worst_element,
)

BOUNDS = st.sampled_from([0.5, 1.0, 4.0, 16.0])


def _plan(draw: st.DrawFn, tiles: list[int], depth: int = 0) -> str:
    if len(tiles) == 1:
        return f"t{tiles[0]}"
    cut = draw(st.integers(1, len(tiles) - 1))
    return f"({_plan(draw, tiles[:cut], depth + 1)} {_plan(draw, tiles[cut:], depth + 1)})"


@st.composite
def trees(draw: st.DrawFn) -> tuple[str, dict[str, object], dict[str, object]]:
    tiles = draw(st.integers(2, 4))
    order = draw(st.permutations(list(range(tiles))))
    reprs = "".join(draw(st.lists(st.sampled_from("mlps"), min_size=1, max_size=3)))
    args = {"plan": _plan(draw, list(order)), "tiles": tiles, "reprs": reprs,
            "S_kv_per_rank": 4 * tiles, "d_head": draw(st.sampled_from([2, 4, 8]))}
    return str(TREES), args, {"pes": 1}


@st.composite
def lines(draw: st.DrawFn) -> tuple[str, dict[str, object], dict[str, object]]:
    args = {"msg_dtype": draw(st.sampled_from(["f32", "f16"])), "S_kv_per_rank": 8,
            "n_ranks": draw(st.integers(2, 5)), "d_head": draw(st.sampled_from([4, 8]))}
    return "mesh_mlo_1d", args, {"pes": int(args["n_ranks"])}  # type: ignore[call-overload]


def _check(kernel: str, args: dict[str, object], opts: dict[str, object], b: float) -> None:
    ref = resolve_kernel(kernel)
    launch = build_launch(ref, LaunchOptions(args=tuple(sorted(args.items())),  # type: ignore[arg-type]
                                             **opts))  # type: ignore[arg-type]
    schedule = trace(ref, launch)
    config = VerifyConfig(queue_depth=launch.spec.queue_depth, only=SEMANTIC, input_bound=b,
                          rounding_tolerance=1.0)
    p = verify(schedule, config).property("numeric_safety")
    assert isinstance(p, NumericResult)
    if p.error_bound is None:
        return
    table = derive_channels(schedule)
    sem = semantic_analysis(schedule, table, None, b)
    assert sem.analysis is not None and sem.problem is not None
    stores = [(o.rank, o.store) for o in sem.analysis.outputs if o.verdict.equal]
    worst = worst_element(schedule, table, sem.problem, stores, families(sem.problem, b,
                                                                          math.inf))
    if worst is None:
        return
    worst = climb(schedule, table, sem.problem, signed_v(schedule, table, sem.problem,
                                                         worst, b), b, math.inf, 20)
    limit = p.error_bound + (p.error_floor or 0.0) / worst.max_v
    assert worst.error <= limit, (kernel, args, b, worst.family, worst.error, limit)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees(), BOUNDS)
def test_no_input_beats_the_bound_of_a_random_merge_tree(
        case: tuple[str, dict[str, object], dict[str, object]], b: float) -> None:
    _check(*case, b)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines(), BOUNDS)
def test_no_input_beats_the_bound_of_a_random_line(
        case: tuple[str, dict[str, object], dict[str, object]], b: float) -> None:
    _check(*case, b)


@pytest.mark.parametrize("name", ["mesh_mlo_1d", "mesh_mlo_2d", "ring_mlo", "mesh_kv"])
@pytest.mark.parametrize("b", [1.0, 16.0])
def test_no_input_beats_the_bound_of_a_built_in(name: str, b: float) -> None:
    ref = resolve_kernel(name)
    opts: dict[str, object] = {}
    if ref.name == "mesh_mlo_2d":
        opts = {"mesh": "2x4"}
    _check(name, {}, opts, b)
