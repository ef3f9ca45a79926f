"""Key-row counts of what a stored output holds (exactly_once_merge's reading of a form).

Counted on the normal form, at key-row granularity: in the numerator (partials with a V
factor) and the common denominator, each partial ``w · exp(c·QK(b) + R) · ...`` counts its
rows with its weight w; the rescaling exp(R) is not merging and does not count. Counts are
relative to the lightest row of the denominator (of the numerator without one).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

from meshproof.model.problem import Problem
from meshproof.verify.semantics.judge import B_ROW, Runs, lightest, ratio
from meshproof.verify.semantics.poly_atoms import RowSum
from meshproof.verify.semantics.rational import Rat
from meshproof.verify.semantics.tensor_atoms import Input, Score
from meshproof.verify.semantics.views import Piece, linear_terms, pieces, split_value


@dataclass(frozen=True, slots=True)
class Counts:
    """Per key row, how often a stored output counts it (relative to its lightest row)."""

    num: tuple[tuple[int, int, float], ...]         # (lo, hi, count) over rows 0..n-1
    den: tuple[tuple[int, int, float], ...] | None
    foreign: bool            # it counts keys of another attention problem
    mixed: bool              # weights of one key row applied to V of another
    no_denominator: bool = False   # the output is not divided by one common ℓ


def _score(p: Piece) -> Score | None:
    scores = [a for a, _ in p.body.unit.coeffs if isinstance(a, Score)]
    if len(scores) != 1 or scores[0].j != B_ROW or len(p.body.unit.coeffs) != 1:
        return None
    return scores[0]


def count_rows(form: Rat, problem: Problem, group: int) -> Counts | None:
    """Counts of what the output holds, whatever it is; None when the numerator is not
    linear in partials (a product of partials has no per-row count)."""
    if form.inf:
        return Counts(((0, problem.kv_rows(group), 0.0),), None, False, False, True)
    num = linear_terms(form)
    single = len(form.den) == 1 and form.den[0][1] == 1
    den = linear_terms(Rat(form.den[0][0])) if single else None
    if num is None and any(isinstance(a, RowSum) for a in form.num.variables()):
        return None
    num = num or []
    cuts = {p for t in num + (den or []) for p in (t.sum.lo, t.sum.hi)}
    foreign = mixed = False

    def tally(parts: list[Piece], with_value: bool) -> Runs:
        nonlocal foreign, mixed
        out: list[tuple[int, int, tuple[Fraction, Fraction]]] = []
        for p in parts:
            score = _score(p)
            if score is None or p.rest.key:
                continue
            value: Input | None = None
            if with_value:
                sv = split_value(p.body)
                if sv is None:
                    continue
                value = sv[1]
            if score.group != group or (value is not None and value.group != group):
                foreign = True   # another problem's keys, or another problem's V
                continue
            if value is not None and value.row != B_ROW:
                mixed = True
            assert isinstance(p.unit.const, Fraction)
            out.append((p.lo, p.hi, (p.coef, p.unit.const)))
        return _merged(out)

    num_w = tally(pieces(num, cuts), True)
    den_w = tally(pieces(den, cuts), False) if den is not None else None
    ref = lightest(den_w if den_w else num_w)
    n = problem.kv_rows(group)
    return Counts(tuple(_counts(num_w, n, ref)),
                  tuple(_counts(den_w if den_w is not None else [], n, ref)),
                  foreign, mixed, den_w is None)


def _merged(items: list[tuple[int, int, tuple[Fraction, Fraction]]]) -> Runs:
    from meshproof.verify.semantics.judge import _weight_sum

    cuts = sorted({x for lo, hi, _ in items for x in (lo, hi)})
    out: Runs = []
    for lo, hi in itertools.pairwise(cuts):
        ws = [w for a, b, w in items if a <= lo and hi <= b]
        if not ws:
            continue
        total = _weight_sum(ws)
        if not total[0]:
            continue
        if out and out[-1][1] == lo and out[-1][2] == total:
            out[-1] = (out[-1][0], hi, total)
        else:
            out.append((lo, hi, total))
    return out


def _counts(w: Runs, n: int, ref: tuple[Fraction, Fraction] | None
            ) -> list[tuple[int, int, float]]:
    """(lo, hi, count) per run of key rows relative to `ref`; rows 0..n-1 without any
    partial count 0."""
    out: list[tuple[int, int, float]] = []
    pos = 0
    for lo, hi, pw in w:
        if lo > pos:
            out.append((pos, min(lo, n), 0.0))
        out.append((lo, hi, ratio(pw, ref) if ref is not None else float(pw[0])))
        pos = max(pos, hi)
    if pos < n:
        out.append((pos, n, 0.0))
    return out
