"""Rounding sizes of the machine's dtypes, as the rounding rules use them.

Round to nearest is monotone, so a representable bound X of an exact value bounds the
rounded value too, and the largest rounding error over |x| <= X is half the spacing of
X's binade -- of the binade below when X is a power of two, which is itself exact
(spec/semantics.md §7, rule H). Relative roundings are read in log space: RN(x) =
x·(1 + δ) with |δ| <= u/(1 + u), so |log(1 + δ)| <= log(1 + u) <= u, and roundings add
up exactly, not to first order.
"""

from __future__ import annotations

import math

from meshproof.model.schedule import DType

UNIT = {DType.F16: 2.0 ** -11, DType.BF16: 2.0 ** -8, DType.F32: 2.0 ** -24}
TINY = {DType.F16: 2.0 ** -25, DType.BF16: 2.0 ** -134, DType.F32: 2.0 ** -150}
_PRECISION = {DType.F16: 11, DType.BF16: 8, DType.F32: 24}
_MIN_NORMAL_EXP = {DType.F16: -14, DType.BF16: -126, DType.F32: -126}
_U32 = UNIT[DType.F32]


def half_ulp(dtype: DType, mag: float) -> float:
    """The largest |RN(x) - x| over |x| <= mag in `dtype` (subnormals included)."""
    if not mag > 0:
        return 0.0
    if math.isinf(mag) or math.isnan(mag):
        return math.inf
    m, e = math.frexp(mag)       # mag = m·2^e, 0.5 <= m < 1: the binade [2^(e-1), 2^e)
    e -= 1
    if m == 0.5:
        e -= 1                   # a power of two is exact: the binade below decides
    e = max(e, _MIN_NORMAL_EXP[dtype])
    return math.ldexp(1.0, e - _PRECISION[dtype])


def rounded_bound(dtype: DType, mag: float) -> float:
    """A bound of |RN(x)| over |x| <= mag (monotone rounding: mag plus its half ulp)."""
    return mag + half_ulp(dtype, mag)


def accumulation(n: int, term: float) -> float:
    """|fl(Σ t_i) - Σ t_i| over n terms |t_i| <= term, summed in f32 in any order: every
    partial sum of any summation tree is at most k·term for its k terms, and the caterpillar
    majorises every tree, so the error is at most Σ_{k=2..n} hu32(k·term) (rule G)."""
    if n <= 1 or term <= 0:
        return 0.0
    if math.isinf(term):
        return math.inf
    total, k = 0.0, 2
    while k <= n:
        _, e = math.frexp(k * term)                  # k·term in [2^(e-1), 2^e)
        h = math.ldexp(1.0, max(e - 1, -126) - 24)   # the binade's half ulp
        top = math.ldexp(1.0, e)
        last = min(n, max(k, math.ceil(top / term) - 1))
        while last > k and last * term >= top:
            last -= 1
        total += (last - k + 1) * h
        k = last + 1
    return total


def log_accumulation(n: int) -> float:
    """Each term of an f32 sum of n positive terms passes at most n - 1 roundings, in any
    order: a factor within e^(±(n - 1)·u32) of its exact weight (rule G, relative)."""
    return max(n - 1, 0) * _U32


def log_rounding(dtype: DType) -> float:
    """One relative rounding to `dtype` in log space."""
    return UNIT[dtype]


# exp and exp2 of f32 within one ulp of the exact value (spec/simulator.md §2): 2^-23
# relative, 2·u32 in log space; in 16 bits the f32 result is then rounded to the dtype
EXP_ULP = 2.0 * _U32


__all__ = ["EXP_ULP", "TINY", "UNIT", "accumulation", "half_ulp", "log_accumulation",
           "log_rounding", "rounded_bound"]
