"""Rule E: the rounding of the exp argument `s̃ - max(s̃)`, weighed by the keys it moves.

A block of N keys computes `p_j = exp(k·(s̃_j - m̃))` with `m̃ = max_j s̃_j` taken on the
machine (a max is exact), so every key's argument `-z_j`, `z_j = m̃ - s̃_j >= 0`, is a
difference of two machine numbers, rounded once in f32 and once more to the op's dtype
(model/machine.py). Its rounding `k_j` satisfies `|k_j| <= ρ(z_j)` with, for z_j in the
binade [2^e, 2^(e+1)), `ρ_e = hu32(2^e) + hu_dt(2^e)` (round to nearest is monotone, and
the f32 result stays within [2^e, 2^(e+1)], whose 16-bit rounding is off by at most the
binade's half spacing). The max key has z = 0, hence k = 0 exactly: `s - s = 0` and
`exp(0) = 1`.

**The bound.** Read the rounded weights as the exact ones tilted key by key, `w'_j ∝
w_j·e^(k·k_j)`, with w the exact softmax weights (the first step of the chain of
spec/semantics.md §7; the score errors and the rest of the tilt come after it, by the
tilt lemma, whatever the weights are then). For any tilt,

    TV(w, w') <= Σ_j w_j·|e^(k·k_j) - 1| / Σ_j w_j·e^(k·k_j)
              <= Σ_j w_j·(e^(kρ_j) - 1) / Σ_j w_j·e^(-kρ_j)  =: R

(`w'_j - w_j = w_j(e^(kk_j) - 1)/Z' + w_j(1/Z' - 1/Z)`: the second sum is |Z - Z'|/Z', so
Σ|w' - w| <= 2Σ w_j|e^(kk_j) - 1|/Z'), and a convex combination moves by at most
TV·spread(V) <= 2·R·max|V|. Over many blocks (every key in exactly one, with its max key)
R is a mediant of the blocks' ratios, so the largest block ratio bounds it: a union keeps
the larger K*.

Within a block, the exact weight of key j against the max key j0 is `e^(k(s_j - s_j0))
<= C·e^(-k·z_j)` with `C = e^(2k·e_s)` for the score error e_s (`|s̃ - s| <= e_s`), and
the max key contributes 0 to the numerator and at least its own weight to the
denominator. So R <= K for every block whenever

    g(K) = (N - 1)·max_z C·e^(-kz)·(e^(kρ(z)) - 1 - K·e^(-kρ(z)))⁺ - K <= 0,

because `Num - K·Den <= Σ_{j≠j0} w_j (n_j - K d_j)⁺ - K·w_j0`. g decreases in K; the
least such K (K*, by bisection, the upper end kept) is what `exp_argument_bound` returns.
Per binade the sup over z is at its left end 2^e (e^(-kz) is largest there, ρ is the
binade's); below the smallest binade considered e^(-kz) <= 1 and ρ is that binade's; past
`zmax` (the machine difference's bound) there are no keys. K* grows with N, zmax and
C, so rounding zmax and the slack up (for the cache) only raises it.

At B = 16 with f16 scores and 16 keys per block this replaces a tilt of hu16(|s - m| <=
1448) = 0.5 (charged to every key) by about 1e-2.
"""

from __future__ import annotations

import math
from functools import lru_cache

from meshproof.model.schedule import DType

_PRECISION = {DType.F16: 11, DType.BF16: 8, DType.F32: 24}
_MIN_NORMAL = {DType.F16: -14, DType.BF16: -126, DType.F32: -126}
_LOWEST = -150      # below 2^-150 the f32 difference is 0 or exact: one region
_TAIL = 13          # binades up to 2^13; past 2^14 one tail term (e^(-kz) is 0 there)


def _half(dtype: DType, e: int) -> float:
    """Half the spacing of dtype in the binade [2^e, 2^(e+1)) (subnormals: the smallest)."""
    return math.ldexp(1.0, max(e, _MIN_NORMAL[dtype]) - _PRECISION[dtype])


def rho(dtype: DType, e: int) -> float:
    """ρ_e: the rounding of a difference in [2^e, 2^(e+1)) computed in f32 and rounded to
    `dtype` (twice when dtype is narrower than f32)."""
    r = _half(DType.F32, e)
    return r + _half(dtype, e) if dtype is not DType.F32 else r


def _binades(dtype: DType, zmax: float, scale: float) -> list[tuple[float, float]]:
    """(largest e^(-kz), ρ·k) per region of z in [0, zmax]: the lowest region (0, 2^-150),
    then each binade from its left end, then a tail past 2^_TAIL."""
    out = [(1.0, scale * rho(dtype, _LOWEST))]
    top = _TAIL if not math.isfinite(zmax) else min(_TAIL, math.frexp(zmax)[1] - 1)
    for e in range(_LOWEST, top + 1):
        left = math.ldexp(1.0, e)
        if left > zmax:
            break
        out.append((math.exp(-scale * left), scale * rho(dtype, e)))
    if zmax > math.ldexp(1.0, _TAIL + 1):
        # z >= 2^(_TAIL+1): ρ(z) <= 2·2^-8·z, so e^(-kz)·e^(kρ) <= e^(-kz/2), at most
        # e^(-k·2^_TAIL): folded in as a term with ρ as large as its own weight allows
        w = math.exp(-scale * math.ldexp(1.0, _TAIL))
        out.append((w, 1.0))
    return out


def _g(k: float, n: int, c: float, regions: list[tuple[float, float]]) -> float:
    worst = 0.0
    for w, r in regions:
        worst = max(worst, c * w * (math.expm1(r) - k * math.exp(-r)))
    return (n - 1) * worst - k


@lru_cache(maxsize=4096)
def _k_star(n: int, dtype: DType, zmax: float, scale: float, slack: float) -> float:
    c = math.exp(2.0 * scale * slack)
    regions = _binades(dtype, zmax, scale)
    hi = (n - 1) * max(c * w * math.expm1(r) for w, r in regions)
    if hi <= 0.0:
        return 0.0
    lo = 0.0
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        if _g(mid, n, c, regions) <= 0.0:
            hi = mid
        else:
            lo = mid
    return hi


def round_up_binade(x: float) -> float:
    """x rounded up to 1/1024 of its binade (a few cache entries, never below x)."""
    if not math.isfinite(x) or x <= 0.0:
        return max(x, 0.0)
    m, e = math.frexp(x)
    return math.ldexp(math.ceil(m * 1024.0) / 1024.0, e)


def exp_argument_bound(n: int, dtype: DType, zmax: float, scale: float,
                       score_error: float) -> float:
    """K*: the rounding of the arguments of `exp(k·(s̃ - max s̃))` over a block of n keys
    moves a convex combination by at most K*·spread(V). `dtype` is the difference's,
    `zmax` bounds m̃ - s̃, `scale` is k (1 for exp, ln 2 for exp2), `score_error` bounds
    |s̃ - s| in the argument's units."""
    if n <= 1:
        return 0.0     # the only key is the max: its argument is 0 exactly
    if not math.isfinite(score_error):
        return math.inf
    return _k_star(n, dtype, round_up_binade(zmax), scale, round_up_binade(score_error))


__all__ = ["exp_argument_bound", "rho", "round_up_binade"]
