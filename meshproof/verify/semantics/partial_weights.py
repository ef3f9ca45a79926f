"""The weights of an output's partials over key rows: runs of rows of one weight, their sums
and ratios, and why uneven weights are not attention (double or missing merges).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

from meshproof.verify.semantics.partials import Mismatch, Partial, Reason, Shape

Runs = list[tuple[int, int, tuple[Fraction, Fraction]]]


def runs(parts: list[Partial]) -> Runs:
    """Per row interval, the total weight of the partials (merged where equal)."""
    cuts = sorted({x for p in parts for x in (p.lo, p.hi)})
    out: Runs = []
    for lo, hi in itertools.pairwise(cuts):
        w = [p.weight for p in parts if p.lo <= lo and hi <= p.hi]
        if not w:
            continue
        total = _weight_sum(w)
        if out and out[-1][1] == lo and out[-1][2] == total:
            out[-1] = (out[-1][0], hi, total)
        else:
            out.append((lo, hi, total))
    return out


def _weight_sum(ws: list[tuple[Fraction, Fraction]]) -> tuple[Fraction, Fraction]:
    """Σ c_i·exp(e_i) as one (c, e) (exact when the exponents agree)."""
    if all(e == ws[0][1] for _, e in ws):
        return sum((c for c, _ in ws), Fraction(0)), ws[0][1]
    top = max(e for _, e in ws)
    total = sum(float(c) * math.exp(float(e - top)) for c, e in ws)
    return Fraction(total), top


def ratio(a: tuple[Fraction, Fraction], b: tuple[Fraction, Fraction]) -> float:
    if not b[0]:
        return math.inf
    try:
        return float(a[0] / b[0]) * math.exp(float(a[1] - b[1]))
    except OverflowError:
        return math.inf


def _weight_reasons(shape: Shape, n: int) -> list[Reason]:
    if not shape.num:
        return []
    out = []
    num_w = runs(shape.num)
    if not _uniform(num_w, n):
        out.append(Reason(Mismatch.UNEVEN, "the numerator weighs the key rows unevenly: "
                          f"{_describe(num_w, n)}"))
    if shape.den is not None:
        den_w = runs(shape.den)
        if not _uniform(den_w, n):
            out.append(Reason(Mismatch.UNEVEN, "the denominator weighs the key rows unevenly: "
                              f"{_describe(den_w, n)}"))
        elif _uniform(num_w, n) and not math.isclose(ratio(num_w[0][2], den_w[0][2]), 1.0):
            out.append(Reason(Mismatch.NUM_DEN_DIFFER,
                              "numerator and denominator weigh the key rows differently"))
    return out


def _uniform(w: Runs, n: int) -> bool:
    return len(w) == 1 and w[0][0] == 0 and w[0][1] == n and w[0][2][0] > 0


def lightest(w: Runs) -> tuple[Fraction, Fraction] | None:
    ref: tuple[Fraction, Fraction] | None = None
    for _, _, pw in w:
        if pw[0] > 0 and (ref is None or ratio(pw, ref) < 1):
            ref = pw
    return ref


def _describe(w: Runs, n: int) -> str:
    if not w:
        return "every key row is missing"
    ref = lightest(w)
    out = []
    covered = 0
    for lo, hi, pw in w:
        covered += hi - lo
        r = ratio(pw, ref) if ref is not None else 0.0
        if abs(r - 1) > 1e-9:
            out.append(f"rows {lo}..{hi - 1} weigh {r:g}")
    if covered < n:
        out.append(f"{n - covered} of {n} rows are missing")
    return "; ".join(out) or "rows outside the group are included"
