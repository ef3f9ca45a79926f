"""η of a normalisation o / ℓ of partners (rules B, D and E of spec/semantics.md §7).

Partners (relations.py: equal tilt tokens) were built from the same machine weights by the
same machine factors, so every per-key factor of the tilt is the same function of the key
in o and in ℓ. Their quotient is a convex combination of V with tilted weights, and the
chain

    exact -> argument-rounded (rule E) -> tilted (rule B) -> own roundings (rule D)

bounds it step by step; the triangle inequality adds the steps:

- rule E, first, on the exact weights: the roundings of the exp arguments `s̃ - max s̃`
  move the weights by a total variation of at most K* (rounding_rules_exparg.py), so the
  output by at most `K*·spread(V) <= 2·K*·max|V|`;
- rule B, the rest of the tilt (the score errors, exp's rounding, the rescale factors, a
  narrowed max's offset), of spread S <= 2·(tilt - arg) whatever the weights are then:
  `2·tanh(S/4)·max|V|`;
- rule F, after the tilt: the rescale factors' roundings, each a common factor of the
  part it rescales, move the output by at most `Σκ·spread(V) <= 2·Σκ·max|V|`
  (rounding_rules_rescale.py), and the tilt of rule B is then the rest without them;
- rule D, the own roundings of o and ℓ: `expm1(own_o + own_ℓ)·max|V|`.

`arg` is the part of the tilt bound that rule E covers instead (0 where it does not
apply), so `tilt - arg` bounds the rest. Without rule E (K* = 0, arg = 0) this is the
plain partners bound; the smaller of the two is kept (both are sound).
"""

from __future__ import annotations

import math
from typing import NamedTuple


class PartnersBound(NamedTuple):
    """η = tilt + argument + rescale + own, each term's share for the culprits."""

    tilt: float
    argument: float
    own: float
    rescale: float = 0.0     # rule F: 2·Σκ (rounding_rules_rescale.py)

    @property
    def eta(self) -> float:
        return self.tilt + self.argument + self.rescale + self.own


def _expm1(x: float) -> float:
    try:
        return math.expm1(x)
    except OverflowError:
        return math.inf


def partners_bound(eps: float, rest: float, kstar: float, own: float,
                   rest_f: float = math.inf, rest_ef: float = math.inf,
                   kappa: float = math.inf) -> PartnersBound:
    """η of o / ℓ for partners whose tilt is bounded by `eps`, of which all but `rest` is
    the exp-argument rounding that rule E bounds by `kstar`, all but `rest_f` the rescale
    roundings that rule F bounds by `kappa` (Σκ), all but `rest_ef` both, and whose own
    errors add to `own`. The least of the four chains (none, E, F, E and F)."""
    own_eta = _expm1(own)
    best = PartnersBound(2.0 * math.tanh(eps / 2.0), 0.0, own_eta)
    options = []
    if kstar > 0.0 and rest < eps:
        options.append(PartnersBound(2.0 * math.tanh(max(rest, 0.0) / 2.0), 2.0 * kstar,
                                     own_eta))
    if math.isfinite(kappa):
        if rest_f < eps:
            options.append(PartnersBound(2.0 * math.tanh(max(rest_f, 0.0) / 2.0), 0.0,
                                         own_eta, 2.0 * kappa))
        if rest_ef < eps:
            options.append(PartnersBound(2.0 * math.tanh(max(rest_ef, 0.0) / 2.0),
                                         2.0 * kstar, own_eta, 2.0 * kappa))
    for o in options:
        if o.eta < best.eta:
            best = o
    return best


__all__ = ["PartnersBound", "partners_bound"]
