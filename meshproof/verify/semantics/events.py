"""Departures: the ops where a kernel's values stop being those of an online softmax.

The interpreter records an event when an op does something an attention kernel does not
need (normalises twice, adds partials with different reference points or overlapping key
rows, weighs a partial by a constant, takes a constant that is 0 on the machine, forms
scores with a scale). When an output is not attention, the events in its dependency cone
say, at their lines and in words, where it went wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from meshproof.model.schedule import Op
from meshproof.verify.semantics.index import BOUND
from meshproof.verify.semantics.scalars import Pieces
from meshproof.verify.semantics.terms import QK, Input, Max, Poly, Pos, Scrambled


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


@dataclass(frozen=True, slots=True)
class Event:
    kind: Departure
    rank: int
    op: Op
    message: str
    value: float = 0.0


@dataclass(frozen=True, slots=True)
class Template:
    """An event as one op's evaluation records it, before it is placed: the same op on
    operands equal up to a shift of key rows records the same templates (interp.py's
    memo), so a key-row range in the message is kept apart and shifted when rendered."""

    kind: Departure
    text: str                           # the message; with `rows`, the part before them
    value: float = 0.0
    rows: tuple[int, int] | None = None  # key rows [lo, hi) in the value's own frame
    tail: str = ""                      # with `rows`, the part after them

    def moved(self, delta: int) -> Template:
        if self.rows is None or not delta:
            return self
        lo, hi = self.rows
        return Template(self.kind, self.text, self.value, (lo + delta, hi + delta), self.tail)

    def event(self, rank: int, op: Op, delta: int) -> Event:
        text = self.text
        if self.rows is not None:
            lo, hi = self.rows
            text = f"{text}{lo + delta}..{hi - 1 + delta}{self.tail}"
        return Event(self.kind, rank, op, text, self.value)


def describe(form: Poly) -> str:
    """What a value is, in the words of an online softmax."""
    if form.inf:
        return "an infinite constant"
    if form.as_const() is not None:
        return "a constant"
    lin = form.as_lin()
    if lin is not None:
        atoms = [a for a, _ in lin.coeffs]
        if any(isinstance(a, Max) for a in atoms):
            return "a running max (m)"
        if any(isinstance(a, QK) for a in atoms):
            return "scores"
        kinds = {a.tensor for a in atoms if isinstance(a, Input)}
        if kinds:
            return "/".join(sorted(kinds))
        return "a log-sum-exp value"
    has_v = any(isinstance(a, Input) and a.tensor == "V" for b, _ in form.terms
                for a, _ in b.factors)
    normalised = any(isinstance(a, Pos) and k < 0 for b, _ in form.terms for a, k in b.factors)
    summed = any(isinstance(w, Pieces) for _, w in form.terms)
    if has_v:
        return "o (normalised)" if normalised else "o"
    if summed:
        return "ℓ" if not normalised else "a normalised sum of exponentials"
    if normalised:
        return "softmax probabilities"
    return "exponential weights"


def partial_rows(form: Poly) -> dict[str, Pieces]:
    """Per partial shape (score and V element, without the reference point), its rows."""
    out: dict[str, Pieces] = {}
    for body, w in form.terms:
        if not isinstance(w, Pieces):
            continue
        score = [a for a, _ in body.expo if isinstance(a, QK) and BOUND in a.digits]
        if not score:   # only true scores have key rows (a scrambled dot's are synthetic)
            continue
        key = ",".join(a.key for a in score) + "|" + ",".join(
            a.key for a, _ in body.factors if not isinstance(a, Pos))
        out[key] = out[key] + w if key in out else w
    return out


def reference_points(form: Poly) -> dict[str, set[str]]:
    """Per partial shape, the distinct reference points exp(R) its terms carry."""
    out: dict[str, set[str]] = {}
    for body, w in form.terms:
        if not isinstance(w, Pieces):
            continue
        score = [a for a, _ in body.expo if isinstance(a, QK) and BOUND in a.digits]
        rest = [f"{c}*{a.key}" for a, c in body.expo if a not in score]
        key = ",".join(a.key for a in score) + "|" + ",".join(
            a.key for a, _ in body.factors if not isinstance(a, Pos))
        out.setdefault(key, set()).add(";".join(rest))
    return out


def _overlap(a: Pieces, b: Pieces) -> tuple[int, int] | None:
    for lo1, hi1, _ in a.parts:
        for lo2, hi2, _ in b.parts:
            lo, hi = max(lo1, lo2), min(hi1, hi2)
            if lo < hi:
                return lo, hi
    return None


def _negatives(form: Poly) -> set[Pos]:
    return {a for b, _ in form.terms for a, k in b.factors if isinstance(a, Pos) and k < 0}


class Recorder:
    """Collects the departure events of the op being evaluated (`take` hands them over);
    `key` is the value it defines."""

    def __init__(self) -> None:
        self.current: list[Template] = []
        self.key: tuple[int, int] = (0, 0)
        self.pos_origin: dict[str, Op] = {}       # a denominator -> the op that divided by it

    def add(self, kind: Departure, op: Op, message: str, value: float = 0.0) -> None:
        del op  # always the op being evaluated: the event is placed there
        self.current.append(Template(kind, message, value))

    def take(self) -> tuple[Template, ...]:
        out = tuple(self.current)
        self.current.clear()
        return out

    def divided(self, op: Op, dividend: Poly, result: Poly) -> None:
        before = _negatives(dividend)
        new = _negatives(result) - before
        for p in new:
            self.pos_origin.setdefault(p.key, op)
        if before and new:
            first = min((self.pos_origin[p.key] for p in before if p.key in self.pos_origin),
                        key=lambda o: o.index, default=None)
            where = f" (divided at {first.source})" if first is not None else ""
            self.add(Departure.NORMALISED_TWICE, op,
                     f"{describe(dividend)} is already divided by a softmax denominator"
                     f"{where}; {op.source} divides it again")

    def added(self, op: Op, a: Poly, b: Poly, result: Poly) -> None:
        ra, rb = partial_rows(a), partial_rows(b)
        for key in ra.keys() & rb.keys():
            both = _overlap(ra[key], rb[key])
            if both is not None:
                self.current.append(Template(
                    Departure.OVERLAP, f"{op.source} adds the partial of key rows ", 0.0,
                    both, f" to {describe(a)} that already holds them (a double merge)"))
                return
        if ra and rb:
            self.add(Departure.MERGE, op, f"{op.source} merges partials")
        na, nb = _negatives(a), _negatives(b)
        if na and nb and na != nb:
            self.add(Departure.MERGES_NORMALISED, op,
                     f"{op.source} adds {describe(a)} values normalised by different softmax "
                     "denominators (merge unnormalised partials, divide once at the end)")
        points = reference_points(result)
        if any(len(v) > 1 for v in points.values()):
            self.add(Departure.REFERENCE_POINTS, op,
                     f"{op.source} adds partials scaled by different reference points "
                     "exp(-m): one side is not rescaled by exp(m_old - m_new)")

    def weighted(self, op: Op, factor: float, scaled: Poly, received: bool) -> None:
        if factor == 1 or not (partial_rows(scaled) or
                               describe(scaled) == "exponential weights"):
            return
        who = "the received " if received else ""
        self.add(Departure.WEIGHTED, op,
                 f"{who}{describe(scaled)} is scaled by {factor:g} at {op.source}", factor)

    def machine_zero(self, op: Op, value: float, dtype: str) -> None:
        self.add(Departure.MACHINE_ZERO, op,
                 f"{op.source} uses {value:g}, which is 0 in {dtype} on the machine")

    def exponent(self, op: Op, arg: Poly) -> None:
        lin = arg.as_lin()
        if lin is None:
            return
        for a, c in lin.coeffs:
            if isinstance(a, (QK, Scrambled)):
                self.add(Departure.SCALE, op, f"the scores exponentiated at {op.source} "
                         f"({op.kind.value}) are scaled by {float(c):.6g}", float(c))
                return
