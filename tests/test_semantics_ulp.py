"""verify/semantics/ulp.py: half ulps at a magnitude and f32 accumulation bounds, against
brute force (the f16 number line, random summation trees)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from meshproof.model.schedule import DType
from meshproof.verify.semantics.ulp import accumulation, half_ulp


def test_half_ulp_is_the_largest_f16_rounding_below_a_magnitude() -> None:
    """Every f16 rounding of |x| <= X is within half_ulp(X), and half_ulp(X) is attained
    (the binade below a power of two)."""
    grid = np.linspace(0.0, 2048.0, 200_001)
    err = np.abs(grid.astype(np.float16).astype(np.float64) - grid)
    for top in (1.0, 2.0, 3.0, 724.0, 1024.0, 1448.0, 2048.0):
        seen = float(err[grid <= top].max())
        assert seen <= half_ulp(DType.F16, top)
        assert seen >= 0.9 * half_ulp(DType.F16, top)   # tight: the grid nearly attains it
    assert half_ulp(DType.F16, 724.0) == 0.25 and half_ulp(DType.F16, 1024.0) == 0.25
    assert half_ulp(DType.F16, 1e-7) == 2.0 ** -25          # subnormal spacing


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-16, 16, allow_nan=False), min_size=2, max_size=32),
       st.lists(st.floats(-16, 16, allow_nan=False), min_size=32, max_size=32),
       st.randoms(use_true_random=False))
def test_accumulation_bounds_every_f32_summation_order(a: list[float], b: list[float],
                                                       rnd: object) -> None:
    """Products of f16 values are exact in f32; any summation tree stays within the
    rule-G bound of the exact dot."""
    x = np.array(a, dtype=np.float16).astype(np.float64)
    y = np.array(b[:len(a)], dtype=np.float16).astype(np.float64)
    terms = [np.float32(p) for p in x * y]
    exact = math.fsum(float(t) for t in terms)
    bound = accumulation(len(terms), float(np.max(np.abs(x)) * np.max(np.abs(y))))
    pool = list(terms)
    while len(pool) > 1:          # a random tree: merge two random partial sums in f32
        i, j = sorted(rnd.sample(range(len(pool)), 2))   # type: ignore[attr-defined]
        s = np.float32(pool[i] + pool[j])
        pool = [p for k, p in enumerate(pool) if k not in (i, j)] + [s]
    assert abs(float(pool[0]) - exact) <= bound


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0.01, 1.0), st.floats(-1.0, 1.0), st.floats(-1, 1)),
                min_size=1, max_size=12), st.floats(0.0, 3.0))
def test_the_tilt_lemma(rows: list[tuple[float, float, float]], spread: float) -> None:
    """A tilt whose log-ratio spans S moves a convex combination by at most
    (max v - min v)·tanh(S/4) (spec/semantics.md §7, the partners' rule)."""
    w = np.array([r[0] for r in rows])
    v = np.array([r[1] for r in rows])
    t = np.array([r[2] for r in rows]) * spread / 2.0     # |t| <= S/2: spans at most S
    exact = float(w @ v / w.sum())
    tilted = float((w * np.exp(t)) @ v / (w * np.exp(t)).sum())
    assert abs(tilted - exact) <= (v.max() - v.min()) * math.tanh(spread / 4.0) + 1e-12


def test_a_16_bit_op_computed_in_f32_rounds_twice_and_the_bound_counts_both() -> None:
    """The machine computes a 16-bit op in f32 and rounds the f32 result to 16 bits: the
    difference of two f16 values need not be an f32 number, and rounding it twice can be
    off by more than f16's half ulp (a tie made by the f32 rounding), never by more than
    the two half ulps (rounding.py's `twice`)."""
    import numpy as np

    from meshproof.model.schedule import DType
    from meshproof.verify.semantics.ulp import half_ulp

    big = 2.0 - 2.0 ** -10                   # magnitudes in [1, 2): f16 spacing 2^-10
    x = 1.0 + 3 * 2.0 ** -11 - 2.0 ** -26    # just below the tie between 1 + 2^-10 and
    # 1 + 2^-9: f32 rounds it onto the tie, which goes to the even neighbour, up
    twice = float(np.float16(np.float32(x)))
    once = float(np.float16(x))
    assert abs(twice - x) > half_ulp(DType.F16, big)    # more than f16's half ulp ...
    assert abs(once - x) <= half_ulp(DType.F16, big)
    assert abs(twice - x) <= half_ulp(DType.F16, big) + half_ulp(DType.F32, big)
