"""The output bound numeric_safety states, read off the finished rounding domain.

Per stored output, (η, τ) with |computed - exact| <= η·max|V| + τ elementwise
(spec/semantics.md §7 item 5), the store's own rounding added; or why none is stated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from meshproof.model.evaluate import Key
from meshproof.model.schedule import Op, ValueRef
from meshproof.verify.semantics.culprits import Mechanism, attributed
from meshproof.verify.semantics.layouts import Value
from meshproof.verify.semantics.rounding import Err, Kind
from meshproof.verify.semantics.symbolic_core import Opaque
from meshproof.verify.semantics.ulp import TINY, UNIT
from meshproof.verify.semantics.views import convex_output


@dataclass(frozen=True, slots=True)
class OutputBound:
    """|computed - exact| <= eta·max|V| + tau for one stored output."""

    eta: float
    tau: float
    parts: tuple[float, ...] = ()     # η by mechanism (culprits.py)


@dataclass(frozen=True, slots=True)
class NoBound:
    """Why no rounding bound is stated for one stored output. `attention` is whether the
    output's exact value is a normalised attention output (then the missing bound matters:
    numeric_safety is unknown); else attention_equivalence judges it and no bound is due."""

    reason: str
    attention: bool
    parts: tuple[float, ...] = ()     # a bound too large to state, by mechanism


class ErrorReader(Protocol):
    """The finished analysis, as the output bound reads it."""

    def canonical(self, key: Key) -> Value | Opaque | None: ...

    def err(self, key: Key) -> Err | None: ...

    def why(self, key: Key) -> str | None: ...


def output_error_bounds(forms: ErrorReader, stores: list[tuple[int, Op]],
                        input_bound: float) -> list[OutputBound | NoBound]:
    """Per stored output, (η, τ) with |computed - exact| <= η·max|V| + τ, or why not."""
    out: list[OutputBound | NoBound] = []
    for rank, store in stores:
        arg = store.args[0]
        assert isinstance(arg, ValueRef)
        key = (rank, arg.id)
        res = forms.canonical(key)
        attention = res is not None and not isinstance(res, Opaque) and convex_output(res.form)
        e = forms.err(key)
        if e is None or e.kind is not Kind.OUT:
            out.append(NoBound(forms.why(key) or f"{store.source}: the stored value is not a "
                               "normalised output", attention))
            continue
        if UNIT[store.dtype] > UNIT[e.dtype]:
            # the store's own rounding, at most u·|stored| <= u·(1 + η)·max|V|
            grown = e.eps + UNIT[store.dtype] * (1.0 + e.eps)
            e = Err(e.kind, grown, store.dtype, e.floor + TINY[store.dtype],
                    parts=attributed([(e.eps, e.parts)], grown, Mechanism.STORE, False))
        if not (math.isfinite(e.eps) and math.isfinite(e.floor)) or e.eps >= 1:
            out.append(NoBound(f"{store.source}: the rounding bound is {e.eps:.3g}·max|V| "
                               "or more: no digit of the output is guaranteed", attention,
                               e.parts))
            continue
        if e.floor >= (1 - e.eps) * input_bound:
            # η·max|V| + τ >= max|V| even at the largest max|V| the inputs allow
            out.append(NoBound(f"{store.source}: the rounding bound's absolute part "
                               f"{e.floor:.3g} is at least max|V| can be (|inputs| <= "
                               f"{input_bound:g}): no digit of the output is guaranteed",
                               attention))
            continue
        out.append(OutputBound(e.eps, e.floor, e.parts))
    return out


__all__ = ["ErrorReader", "NoBound", "OutputBound", "output_error_bounds"]
