"""verify/semantics/rounding_witness_families.py: inputs aimed at the roundings that make
up the bound. Each family stays within the assumption (f16 values, |x| <= B), and each
reaches close to the stated bound on the kernel whose culprit it aims at -- never above
it (a found error above the bound would be a soundness bug)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from helpers import REPO_ROOT

from meshproof.model.channels import derive_channels
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.schedule import Schedule
from meshproof.model.trace import trace
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.properties import Property
from meshproof.verify.result import NumericResult
from meshproof.verify.semantics import semantic_analysis
from meshproof.verify.semantics.rounding_witness import worst_element
from meshproof.verify.semantics.rounding_witness_families import (
    aimed,
    constant_v,
    constant_v_scan,
    m_boundary,
    p_boundary,
    score_cells,
)

DESIGN = str(REPO_ROOT / "examples/f16_design.py") + "::mesh_f16_design"
DESIGN_ARGS = {"mesh_rows": 2, "mesh_cols": 4, "S_q": 1, "S_kv_per_rank": 16, "h_q": 1,
               "h_kv": 1, "d_head": 8, "msg_dtype": "f32"}


def _schedule(kernel: str, args: dict[str, Any], **opts: Any) -> Schedule:
    ref = resolve_kernel(kernel)
    return trace(ref, build_launch(ref, LaunchOptions(args=tuple(sorted(args.items())),
                                                      **opts)))


def _found_and_bound(kernel: str, args: dict[str, Any], b: float, family: Any,
                     **opts: Any) -> tuple[float, float]:
    s = _schedule(kernel, args, **opts)
    p = verify(s, VerifyConfig(queue_depth=s.launch.queue_depth, input_bound=b,
                               only=frozenset({Property.NUMERIC_SAFETY}), rounding_tolerance=1.0)
               ).property("numeric_safety")
    assert isinstance(p, NumericResult) and p.error_bound is not None
    table = derive_channels(s)
    sem = semantic_analysis(s, table, None, b)
    assert sem.analysis is not None and sem.problem is not None
    stores = [(o.rank, o.store) for o in sem.analysis.outputs if o.verdict.equal]
    worst = worst_element(s, table, sem.problem, stores, family(sem.problem, b))
    assert worst is not None
    return worst.error, p.error_bound + (p.error_floor or 0.0) / worst.max_v


@pytest.mark.parametrize("b", [0.5, 1.0, 3.0, 16.0])
def test_every_aimed_input_is_an_f16_value_within_the_input_bound(b: float) -> None:
    s = _schedule("mesh_mlo_1d", {"d_head": 4, "S_kv_per_rank": 8, "n_ranks": 3}, pes=3)
    sem = semantic_analysis(s, derive_channels(s), None, b)
    assert sem.problem is not None
    for name, x in aimed(sem.problem, b):
        for part in (x.q, x.k, x.v):
            for a in part.values():
                assert np.all(np.abs(a) <= b), name
                assert np.array_equal(a.astype(np.float16).astype(np.float64), a), name


def test_p_at_f16_midpoints_comes_close_to_the_bound_of_an_f32_merge() -> None:
    """The mechanism of the f32 built-ins: p cast to f16 for the PV dot, then the f16 store
    (bound 9.8e-4 at B = 1); every p just above a midpoint of [1/2, 1) reaches 8e-4."""
    found, bound = _found_and_bound("mesh_mlo_1d", {}, 1.0, p_boundary)
    assert 0.75 * bound <= found <= bound, (found, bound)


def test_keys_at_both_ends_of_an_f16_score_cell_come_close_to_the_bound() -> None:
    """f16 scores at B = 16 (bound 0.425 with an f32 merge): keys held as one f16 score
    whose exact scores differ by almost two roundings reach about 0.34."""
    found, bound = _found_and_bound(DESIGN, DESIGN_ARGS, 16.0, score_cells,
                                    wiring="cube_mesh", cubes=8)
    assert 0.7 * bound <= found <= bound, (found, bound)


def test_maxima_at_both_ends_of_an_f16_cell_come_close_to_the_bound_of_f16_messages() -> None:
    """The running max sent in f16 at B = 16 (bound 0.251): slices whose maxima round in
    opposite directions reach about 0.21."""
    found, bound = _found_and_bound("mesh_mlo_1d", {"msg_dtype": "f16"}, 16.0, m_boundary)
    assert 0.75 * bound <= found <= bound, (found, bound)
    assert math.isfinite(found)


def test_constant_v_shows_the_16_bit_merge_arithmetic_within_the_bound() -> None:
    """All-f16 merges at B = 1 (bound 2.3e-2: the merge arithmetic and the rescale
    factors): V constant along the keys leaves only o's and ℓ's own roundings, which show
    and stay within the bound."""
    def family(problem: Any, b: float) -> list[tuple[str, Any]]:
        return [x for s in range(2) for x in constant_v(problem, b, s, 8)]
    args = {**DESIGN_ARGS, "msg_dtype": "f16"}
    found, bound = _found_and_bound(DESIGN, args, 1.0, family, wiring="cube_mesh", cubes=8)
    assert 1e-4 < found <= bound, (found, bound)


@pytest.mark.parametrize("b", [0.5, 1.0, 2.5, 16.0])
def test_the_constant_v_scan_walks_the_f16_values_of_the_top_binade_within_b(b: float) -> None:
    """Every scanned V is an f16 value within |x| <= B, constant along the keys, one value
    per feature, from the bottom of the binade of B's largest values (the binade below B
    when B is a power of two) up, none twice."""
    s = _schedule("mesh_mlo_1d", {"d_head": 4, "S_kv_per_rank": 8, "n_ranks": 3}, pes=3)
    sem = semantic_analysis(s, derive_channels(s), None, b)
    assert sem.problem is not None
    scan = constant_v_scan(sem.problem, b, 0)
    seen = []
    for name, x in scan:
        for part in (x.q, x.k, x.v):
            for a in part.values():
                assert np.all(np.abs(a) <= b), name
                assert np.array_equal(a.astype(np.float16).astype(np.float64), a), name
        for a in x.v.values():
            assert np.all(a == a[:1]), name          # constant along the keys
        seen.extend(next(iter(x.v.values()))[0, 0, :].tolist())
    lo = 2.0 ** (math.ceil(math.log2(b)) - 1)
    assert seen[0] == lo and max(seen) <= b and min(seen) >= lo
    assert len(set(seen)) >= len(seen) - 3     # only the last input wraps round
    assert [n for n, _ in constant_v_scan(sem.problem, b, 0, 2)] == [n for n, _ in scan[:2]]


def test_a_constant_v_scan_reaches_further_into_the_16_bit_merge_bound() -> None:
    """All-f16 merges at B = 1 (bound 2.3e-2): over a few seeded Q and K, constants at the
    bottom of [1/2, 1) find an output 2.8e-3·max|V| off (random constants found 1.4e-3,
    which left the bound 16x above the worst found); never above the bound."""
    def family(problem: Any, b: float) -> list[tuple[str, Any]]:
        return [x for s in (12, 13) for x in constant_v_scan(problem, b, s, 8)]
    args = {**DESIGN_ARGS, "msg_dtype": "f16"}
    found, bound = _found_and_bound(DESIGN, args, 1.0, family, wiring="cube_mesh", cubes=8)
    assert 2.5e-3 < found <= bound, (found, bound)
