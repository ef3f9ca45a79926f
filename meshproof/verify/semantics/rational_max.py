"""Maxima and minima of normal forms: linear forms whose maximum is one `Max` atom.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.maxima import Elem, Max, Ranges
from meshproof.verify.semantics.rat import NEG_INF, POS_INF, Rat
from meshproof.verify.semantics.reasons import NotModelled

# --- maxima ----------------------------------------------------------------------------


def _elems(lin: Lin, is_min: bool) -> list[Elem] | None:
    """The members a linear form contributes to a max; None if it is the absorbing
    infinity (+inf for max, -inf for min)."""
    if lin.infinite:
        neutral = -1 if not is_min else 1
        return [] if lin.infinite == neutral else None
    for atom, c in lin.coeffs:
        if isinstance(atom, Max) and atom.is_min == is_min and c == 1:
            rest = Lin(lin.const, tuple((a, k) for a, k in lin.coeffs if a is not atom))
            return [Elem(e.body + rest, e.rows) for e in atom.elems]
    return [Elem(lin)]


def maximum(a: Rat, b: Rat, is_min: bool = False) -> Rat:
    la, lb = a.as_lin(), b.as_lin()
    if la is None or lb is None:
        raise NotModelled(f"takes the {'minimum' if is_min else 'maximum'} of values that are "
                          "not linear forms of scores and maxima (e.g. of sums of "
                          "exponentials)")
    ea, eb = _elems(la, is_min), _elems(lb, is_min)
    if ea is None or eb is None:
        return POS_INF if not is_min else NEG_INF
    return make_max(ea + eb, is_min)


def make_max(elems: Iterable[Elem], is_min: bool) -> Rat:
    ranged: dict[Lin, Ranges] = {}
    plain: dict[str, Lin] = {}
    best: Fraction | None = None
    for e in elems:
        if e.rows is not None:
            if e.rows.empty:
                continue
            ranged[e.body] = ranged[e.body] | e.rows if e.body in ranged else e.rows
        elif not e.body.coeffs:
            assert isinstance(e.body.const, Fraction)
            c = e.body.const
            if best is None or (c < best if is_min else c > best):
                best = c
        else:
            plain[e.body.key] = e.body
    out = [Elem(b, r) for b, r in ranged.items()] + [Elem(b) for b in plain.values()]
    if best is not None:
        out.append(Elem(Lin(best)))
    if not out:
        return NEG_INF if not is_min else POS_INF
    if len(out) == 1 and out[0].rows is None:
        return Rat.of_lin(out[0].body)
    return Rat.atom(Max.make(out, is_min))
