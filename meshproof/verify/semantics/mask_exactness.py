"""Which mask values the machine holds exactly (the rounding domain's rule for masks).

Positions (`tl.arange` plus host constants) are integers; comparisons of them are 0/1
indicators; `tl.where` of constants selects one. Each is exact in f32 while its magnitude
stays below 2^24 (spec/semantics.md §7), so the rounding domain gives them no error and a
select passes on its chosen branch's.
"""

from __future__ import annotations

import math

import numpy as np

from meshproof.verify.semantics.bounds import lin_interval
from meshproof.verify.semantics.guards import Idx, Ind, pens, without_pens
from meshproof.verify.semantics.inequalities import POSITION_LIMIT
from meshproof.verify.semantics.rat import Rat


def exact_mask_value(form: Rat) -> bool | None:
    """Whether a position or an indicator value is exact on the machine (None: the form is
    neither). A position is an integer affine form of digits below 2^24 in magnitude; an
    indicator form Σ c·prod Ind(G) is a select of constants, exact when it has one term of
    an f32 coefficient or integer coefficients whose magnitudes add up below 2^24."""
    lin = form.as_lin()
    if lin is not None and lin.coeffs and all(isinstance(a, Idx) for a, _ in lin.coeffs):
        if isinstance(lin.const, float) or lin.const.denominator != 1 or \
                any(c.denominator != 1 for _, c in lin.coeffs):
            return False
        top = abs(lin.const) + sum(abs(c) * max(abs(lo), abs(hi))
                                   for a, c in lin.coeffs if isinstance(a, Idx)
                                   for _, lo, hi in a.box)
        return top < POSITION_LIMIT
    if form.den or form.inf or not form.num.terms:
        return None
    terms = form.num.terms
    if any(m.unit.coeffs or m.unit.const or not m.vars or
           any(not isinstance(a, Ind) for a, _ in m.vars) for m, _ in terms):
        return None
    if len(terms) == 1:
        c = float(terms[0][1])
        return float(np.float32(c)) == terms[0][1]
    return all(c.denominator == 1 for _, c in terms) and \
        sum(abs(c) for _, c in terms) < POSITION_LIMIT


def finite_magnitude(form: Rat, b: float, d: int) -> float:
    """max |value| over the points where a masked linear form (s + Pen(G)) is finite:
    there every penalty is 0 (inf: not a masked linear form, or no bound)."""
    lin = form.as_lin()
    if lin is None or not pens(lin):
        return math.inf
    iv = lin_interval(without_pens(lin), b, d)
    return math.inf if iv is None else max(abs(iv[0]), abs(iv[1]))
