"""Rule F: the rounding of a rescale factor, weighed by the share of the part it rescales.

A merge rescales a part X (an ℓ or o over X's keys, referenced at x̃) by the factor
`α̃ = exp(k·(x̂ - ỹ))`, x̂ X's reference point or a narrowing of it, ỹ the new one. Let
`z̃ = ỹ - x̂` (machine numbers) and z = y - x >= 0 the exact one (the exact argument's
interval is <= 0), `|z̃ - z| <= e_arg` (the errors of x̂ and ỹ). The factor's rounding `r`
(the difference rounded in f32 then its dtype, exp, the factor's casts) is 0 at z̃ = 0
(`x - x = 0`, `exp(0) = 1` exactly) and otherwise at most `δ(z̃) = k·ρ_e + c0` for |z̃| in
the binade [2^e, 2^(e+1)) (ρ_e as in rule E, c0 the part that does not grow with z̃).

**The share.** X and the other operands of the union P they join are referenced at the
same ỹ, so P's exact form is `Σ_P e^(s_j - y)` and `ℓ_P >= ℓ_P,lo` (max-domination). X's
share of the final weights is at most its share within P, which under weights tilted by
at most Θ_X on X's keys and Θ_P on P's (the tilt of each key inside P, before this step;
what is added later multiplies the whole of P alike and cancels) is

    W <= (ℓ_X,hi / ℓ_P,lo)·e^(Θ_X + Θ_P)·e^(-k·z) <= min(1, L·e^(-k·max(0, z̃ - e_arg)))

**The step.** Multiplying X's weights by e^r, |r| <= δ, moves X's share from W' <= W to
`W'e^r / (W'e^r + 1 - W')` and a convex combination of V by at most the change times
spread(V). Over W' <= W the change is at most

    κ(W, δ) = max(f₊(min(W, 1/(1 + e^(δ/2)))), f₋(min(W, 1/(1 + e^(-δ/2)))))

(f± the share shift at r = ±δ, each unimodal with its peak tanh(δ/4) there). κ of the
rescale is the largest over the binades of z̃ (per binade at its left end: W decreases in
z̃ and δ is the binade's), 0 at z̃ = 0.

**Over a tree** the rescale steps come after the exact weights were tilted (rules E and
B), in an order where every merge comes after the merges inside it; each moves the output
by at most κ·spread(V), so all of them by `Σκ·spread(V)`, while the tilt lemma bounds the
same step by `tanh(S_R/4)·spread(V)`: partners keep the smaller (rounding_rules_partners).
A value carries `rsc` (the part of its tilt these roundings are, settled at a union),
`ef` (the part rules E and F cover together), Σκ, and the last rescale not yet settled.
The Σκ of o is not computed (o's magnitude does not bound its share); partners read ℓ's.
The two factors of a max-merge are not taken as complementary (one of them exp(0) = 1):
that needs the value numbers to show ỹ = maximum(x̂, x̂') of the very numbers in the
factors, so both roundings are counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from meshproof.model.schedule import DType
from meshproof.verify.semantics.rounding_rules_exparg import rho, round_up_binade

_LOWEST = -150      # below 2^-150 a difference of machine numbers is 0 or exact
_TAIL = 14          # binades up to 2^14; past 2^15 one term, κ <= W


@dataclass(frozen=True, slots=True)
class Factor:
    """A rescale factor exp(k·(x̂ - ỹ)) with an exact argument <= 0, as its exp made it."""

    dtype: DType     # the difference's dtype (its rounding: rule E's ρ)
    scale: float     # k: 1 for exp, ln 2 for exp2
    sub: float       # the difference's rounding charged in the tilt (log units)
    e_arg: float     # |z̃ - z| <= e_arg (argument units)
    zcap: float      # |z̃| <= zcap


@dataclass(frozen=True, slots=True)
class Pending:
    """A rescale X·α not yet settled by a union."""

    factor: Factor
    delta: float     # the factor's whole rounding as charged in the tilt
    theta: float     # X's tilt before the rescale, a narrowed max's offset included
    lx: float        # ℓ_X <= lx (exact, at x); inf for o


@dataclass(frozen=True, slots=True)
class Rescale:
    """Rule F's part of a weight's tilt (see the module docstring)."""

    rsc: float = 0.0
    ef: float = 0.0
    kappa: float = 0.0
    pend: Pending | None = None


def factor_of(dtype: DType, scale: float, eps: float, lead: float, ref: float,
              mag: float, hi: float) -> Factor | None:
    """The factor exp(k·a) of an argument a = x̂ - ỹ with abs error eps = lead + ref +
    its rounding, |a| <= mag, exact a <= hi; None unless hi <= 0."""
    if not hi <= 0.0 or not math.isfinite(mag) or not math.isfinite(eps):
        return None
    sub = max(eps - lead - ref, 0.0)
    return Factor(dtype, scale, sub * scale, lead + ref, mag + lead + ref)


def pending(rescale: Rescale | None, arg: float, f: Factor, delta: float, theta: float,
            lx: float) -> Rescale:
    """X's rule-F state after X·α (X's rule-E part `arg`): what X settled kept, the
    rescale pending."""
    kept = rescale or Rescale(0.0, arg, 0.0)
    return Rescale(kept.rsc, kept.ef, kept.kappa, Pending(f, delta, theta, lx))


def _kap(w: float, d: float) -> float:
    """The largest share shift of a part of share <= w scaled by e^r, |r| <= d."""
    if d <= 0.0 or w <= 0.0:
        return 0.0
    wp = min(w, 1.0 / (1.0 + math.exp(d / 2.0)))
    wm = min(w, 1.0 / (1.0 + math.exp(-d / 2.0)))
    up = wp * (1.0 - wp) * math.expm1(d) / (wp * math.exp(d) + 1.0 - wp)
    down = wm * (1.0 - wm) * -math.expm1(-d) / (wm * math.exp(-d) + 1.0 - wm)
    return max(up, down, 0.0)


@lru_cache(maxsize=4096)
def _kappa(dtype: DType, scale: float, c0: float, big: float, e_arg: float, zcap: float
           ) -> float:
    worst = _kap(min(1.0, big), scale * rho(dtype, _LOWEST) + c0)
    for e in range(_LOWEST, _TAIL + 1):
        left = math.ldexp(1.0, e)
        if left > zcap:
            break
        w = min(1.0, big * math.exp(-scale * max(0.0, left - e_arg)))
        worst = max(worst, _kap(w, scale * rho(dtype, e) + c0))
    far = math.ldexp(1.0, _TAIL + 1)
    if zcap >= far:      # κ <= W, and W is e^-(k·2^15) there
        worst = max(worst, min(1.0, big * math.exp(-scale * max(0.0, far - e_arg))))
    return worst * (1.0 + 1e-9) + 1e-300


def rescale_kappa(p: Pending, theta_p: float, low_p: float) -> float:
    """κ of the pending rescale p settled into a union whose keys' tilt is <= theta_p and
    whose exact value is >= low_p (max-domination)."""
    f = p.factor
    if not (low_p > 0.0 and math.isfinite(p.lx)):
        return math.inf
    log_big = math.log(max(p.lx, 1e-300) / low_p) + p.theta + theta_p
    big = math.inf if log_big > 700.0 else math.exp(log_big)
    c0 = max(p.delta - f.sub, 0.0)
    # rounding every parameter up only raises κ (it grows in each)
    up = round_up_binade
    return _kappa(f.dtype, f.scale, up(c0), up(big), up(f.e_arg), up(f.zcap))


# A weight's tilt, E's part of it and its rule-F state: what a union reads of an operand
Operand = tuple[float, float, "Rescale | None"]


def settle(operands: list[Operand], tilt: float, low_p: float | None) -> Rescale | None:
    """The rule-F state of a union (the same reference point) of operands (tilt, arg,
    state) whose union's tilt is `tilt`; `low_p` the union's exact lower bound (None: o,
    whose Σκ is not computed). Each pending rescale is settled: its rounding moves from
    the rest of the tilt into rsc and ef, its κ into Σκ."""
    if not any(r is not None for _, _, r in operands):
        return None
    theta_p = max(t for t, _, _ in operands)
    rest_f, rest_ef, kappa = 0.0, 0.0, 0.0
    for eps, arg, r in operands:
        rsc, ef = (r.rsc, r.ef) if r is not None else (0.0, arg)
        if r is not None:
            kappa += r.kappa
            if r.pend is not None:
                kappa += math.inf if low_p is None else rescale_kappa(r.pend, theta_p,
                                                                      low_p)
                rsc += r.pend.delta
                ef += r.pend.delta
        rest_f = max(rest_f, eps - rsc)
        rest_ef = max(rest_ef, eps - ef)
    return Rescale(max(tilt - rest_f, 0.0), max(tilt - rest_ef, 0.0), kappa)


def state(r: Rescale | None, arg: float) -> tuple[float, float, float]:
    """(rsc, ef, Σκ) of a weight: no rule F is (0, arg, 0)."""
    return (r.rsc, r.ef, r.kappa) if r is not None else (0.0, arg, 0.0)


__all__ = ["Factor", "Pending", "Rescale", "factor_of", "pending", "rescale_kappa",
           "settle", "state"]
