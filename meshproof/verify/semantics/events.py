"""Departures: the ops where a kernel's values stop being those of an online softmax.

The symbolic domain records an event when an op does something an attention kernel does
not need (normalises twice, adds partials with different reference points or overlapping
key rows, weighs a partial by a constant, takes a constant that is 0 on the machine, forms
scores with a scale). When an output is not attention, the events in its dependency cone
say, at their lines and in words, where it went wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from meshproof.model.schedule import Op
from meshproof.verify.semantics.poly_terms import Poly
from meshproof.verify.semantics.rational import Rat
from meshproof.verify.semantics.tensor_atoms import Score, Scrambled
from meshproof.verify.semantics.views import describe, partial_rows, reference_points, short

__all__ = ["Departure", "Event", "Recorder", "Silent", "describe", "line"]


class Departure(Enum):
    OPAQUE = "opaque"                  # the value left the algebra (its reason says why)
    CONTRACTION = "contraction"        # a dot that does not form q·kᵀ
    NORMALISED_TWICE = "normalised_twice"
    MERGES_NORMALISED = "merges_normalised"
    REFERENCE_POINTS = "reference_points"
    OVERLAP = "overlap"
    WEIGHTED = "weighted"
    MACHINE_ZERO = "machine_zero"
    SCALE = "scale"                    # scores exponentiated with this coefficient
    MERGE = "merge"                    # an ordinary merge (where rows were last added)
    MASK = "mask"                      # the tl.where (or dot) that decides a masked pair


@dataclass(frozen=True, slots=True)
class Event:
    kind: Departure
    rank: int
    op: Op
    message: str
    value: float = 0.0


def _overlap(a: Sequence[tuple[int, int, object]], b: Sequence[tuple[int, int, object]]
             ) -> tuple[int, int] | None:
    for lo1, hi1, _ in a:
        for lo2, hi2, _ in b:
            lo, hi = max(lo1, lo2), min(hi1, hi2)
            if lo < hi:
                return lo, hi
    return None


def _denominators(form: Rat) -> set[Poly]:
    return {f for f, _ in form.den}


def line(op: Op) -> str:
    """An op's line in words: every op is attributed to the kernel's own file."""
    return f"line {op.source.line}"


class Recorder:
    """Collects departure events per value while the symbolic domain evaluates."""

    def __init__(self) -> None:
        self.events: dict[tuple[int, int], list[Event]] = {}
        self.key: tuple[int, int] = (0, 0)
        self.pos_origin: dict[str, Op] = {}       # a denominator -> the op that divided by it
        self.o_origin: dict[str, Op] = {}         # ... -> the first o normalised by it

    def add(self, kind: Departure, op: Op, message: str, value: float = 0.0) -> None:
        self.events.setdefault(self.key, []).append(Event(kind, self.key[0], op, message,
                                                          value))

    def produced(self, op: Op, result: Rat) -> None:
        """Remember where a normalised o first appears (e.g. dot(softmax(s), V))."""
        if describe(result) == "o (normalised)":
            for f in _denominators(result):
                self.o_origin.setdefault(f.key, op)

    def divided(self, op: Op, dividend: Rat, divisor: Rat, result: Rat) -> None:
        before = _denominators(dividend)
        new = _denominators(result) - before
        for f in new:
            self.pos_origin.setdefault(f.key, op)
        if before and new:
            old = sorted(before, key=lambda f: f.key)
            origin = next((self.pos_origin[f.key] for f in old if f.key in self.pos_origin),
                          None)
            first_o = next((self.o_origin[f.key] for f in old if f.key in self.o_origin),
                           None)
            what = "o" if "o" in describe(dividend) else describe(dividend)
            at = f" at {line(first_o)}" if first_o is not None else ""
            by = f" (tl.{origin.kind.value} at {line(origin)})" if origin is not None else ""
            self.add(Departure.NORMALISED_TWICE, op,
                     f"{what}{at} is already divided by the softmax denominator{by}; "
                     f"{line(op)} divides by {short(divisor)} again")

    def added(self, op: Op, a: Rat, b: Rat, result: Rat) -> None:
        ra, rb = partial_rows(a), partial_rows(b)
        if ra and rb and a.den == b.den:
            for key in ra.keys() & rb.keys():
                both = _overlap(ra[key], rb[key])
                if both is not None:
                    self.add(Departure.OVERLAP, op,
                             f"{line(op)} adds the partial of key rows {both[0]}..{both[1] - 1}"
                             f" to {short(a)}, which already holds them (a double merge)")
                    return
        if ra and rb:
            self.add(Departure.MERGE, op, f"{line(op)} merges partials")
        na, nb = _denominators(a), _denominators(b)
        if na and nb and na != nb:
            self.add(Departure.MERGES_NORMALISED, op,
                     f"{line(op)} adds o values already divided by different softmax "
                     "denominators (merge unnormalised partials and divide once at the end)")
        points = reference_points(result)
        if any(len(v) > 1 for v in points.values()):
            self.add(Departure.REFERENCE_POINTS, op,
                     f"{line(op)} adds partials scaled by different reference points "
                     "exp(-m): one side is not rescaled by exp(m_old - m_new)")

    def weighted(self, op: Op, factor: float, scaled: Rat, received: bool) -> None:
        if factor == 1 or not (partial_rows(scaled) or
                               describe(scaled) == "exponential weights"):
            return
        who = "the received " if received else ""
        self.add(Departure.WEIGHTED, op,
                 f"{who}{short(scaled)} is scaled by {factor:g} at {line(op)}", factor)

    def machine_zero(self, op: Op, value: float, dtype: str) -> None:
        self.add(Departure.MACHINE_ZERO, op,
                 f"{line(op)} uses {value:.3g}, which is 0 in {dtype} on the machine")

    def exponent(self, op: Op, arg: Rat) -> None:
        lin = arg.as_lin()
        if lin is None:
            return
        for a, c in lin.coeffs:
            if isinstance(a, (Score, Scrambled)):
                self.add(Departure.SCALE, op, f"the scores exponentiated at {line(op)} "
                         f"(tl.{op.kind.value}) are scaled by {float(c):.6g}", float(c))
                return


class Silent(Recorder):
    """A recorder that records nothing (the memoised evaluation: events are recomputed
    for the cones of failing outputs)."""

    def add(self, kind: Departure, op: Op, message: str, value: float = 0.0) -> None:
        return None

    def produced(self, op: Op, result: Rat) -> None:
        return None

    def divided(self, op: Op, dividend: Rat, divisor: Rat, result: Rat) -> None:
        return None

    def added(self, op: Op, a: Rat, b: Rat, result: Rat) -> None:
        return None

    def weighted(self, op: Op, factor: float, scaled: Rat, received: bool) -> None:
        return None

    def machine_zero(self, op: Op, value: float, dtype: str) -> None:
        return None

    def exponent(self, op: Op, arg: Rat) -> None:
        return None
