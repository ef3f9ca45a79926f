"""Culprits: which roundings make up a rounding bound, and what to change.

Every error the rounding domain carries is broken down by *mechanism* (its `parts`, which
sum to the error): each op's own increase goes to the mechanism of the op, and what an op
inherits from its operands keeps their shares -- the worst operand's for a union, all of
them for a product -- scaled down where a rule cancels some of it (a rescale from the
partial's own reference point drops the max's error). Mechanisms, not kernel lines, are
carried, so attribution never splits a situation of the memo; the lines are found
afterwards on the worst output's cone (`sites`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from meshproof.model.schedule import Op, OpKind
from meshproof.verify.semantics.rational import Rat
from meshproof.verify.semantics.tensor_atoms import Score
from meshproof.verify.semantics.views import describe


class Mechanism(Enum):
    SCORES = "the rounding of the scores"
    NARROWED_MAX = "the narrowing of the running max m sent in a message"
    EXP = "the rounding of the exp argument s - m and of exp"
    RESCALE = "the rescale factors exp(m - m_new)"
    MERGE = "the merge arithmetic (ℓ·a + ℓ'·b, o·a + o'·b)"
    ACCUMULATION = "the accumulation of sums and dots"
    CAST = "the casts of p, of V or of the messages"
    STORE = "the normalisation o / ℓ and the output store"
    REFERENCE = "reference points that are not the same machine number"


REMEDY = {
    Mechanism.SCORES: "compute q·kᵀ with f32 accumulation and output (tl.dot(q, k, "
                      "out_dtype=\"f32\")) and keep the scores in f32 until exp, or assume "
                      "a smaller --score-bound",
    Mechanism.NARROWED_MAX: "send m in f32 (ℓ and o may travel in 16 bits: their rounding "
                            "is relative and does not shift a partial)",
    Mechanism.EXP: "subtract and exponentiate in f32",
    Mechanism.RESCALE: "compute the rescale factors exp(m - m_new) in f32",
    Mechanism.MERGE: "keep the running ℓ and o in f32",
    Mechanism.ACCUMULATION: "accumulate in f32 over fewer terms per dot or sum (a smaller "
                            "tile)",
    Mechanism.CAST: "this is the floor of a 16-bit kernel (p or V cast for the PV dot, 16-bit "
                    "messages); keep the cast values in f32 to go below it",
    Mechanism.STORE: "this is the floor of a 16-bit output; store in f32 to go below it",
    Mechanism.REFERENCE: "rescale each partial from the max it was computed with (the same "
                         "machine number), so that o and ℓ share their reference point",
}
ORDER = tuple(Mechanism)
_INDEX = {m: i for i, m in enumerate(ORDER)}
Parts = tuple[float, ...]


def _has_score(form: Rat) -> bool:
    return any(isinstance(a, Score) for m, _ in form.num.terms for a, _ in m.unit.coeffs)


def mechanism_of(op: Op, kind: str, form: Rat | None, relation: str) -> Mechanism:
    """The mechanism of the rounding an op adds to a value of `kind` (rounding.Kind's
    value) and exact `form`, under the relation of its operands (relations.Relation's
    name, lower case)."""
    k = op.kind
    weight = kind in ("rel", "oscale")
    if k in (OpKind.EXP, OpKind.EXP2):
        return Mechanism.EXP if form is None or _has_score(form) else Mechanism.RESCALE
    if k is OpKind.DIV and kind == "out":
        return Mechanism.STORE
    if kind == "out" and k in (OpKind.CAST, OpKind.STORE, OpKind.DIV):
        return Mechanism.STORE
    if k in (OpKind.CAST, OpKind.RECV, OpKind.LOAD):
        if weight or kind == "exact":
            return Mechanism.CAST
        what = describe(form) if form is not None else ""
        return Mechanism.NARROWED_MAX if what == "a running max (m)" else Mechanism.SCORES
    if weight and k in (OpKind.MUL, OpKind.ADD):
        if relation == "narrowed":
            return Mechanism.NARROWED_MAX
        if relation == "other":
            return Mechanism.REFERENCE
        return Mechanism.MERGE
    if weight and k in (OpKind.SUM, OpKind.DOT):
        return Mechanism.ACCUMULATION
    if k is OpKind.SUB and form is not None and describe(form) != "scores":
        return Mechanism.EXP
    if kind == "out":
        return Mechanism.MERGE
    return Mechanism.SCORES


def attributed(args: Sequence[tuple[float, Parts]], total: float, mech: Mechanism,
               union: bool) -> Parts:
    """The parts of a result whose error is `total`: inherited from the operands (the
    largest one's for a union), scaled down to `total` or topped up at `mech`."""
    inherited = [0.0] * len(ORDER)
    chosen = [max(args, key=lambda a: a[0])] if union and args else args
    for _, parts in chosen:
        if not parts:
            continue
        for i, x in enumerate(parts):
            inherited[i] += x
    have = sum(inherited)
    if have > total > 0:
        return tuple(x * total / have for x in inherited)
    if have > total:
        return tuple(0.0 for _ in inherited)
    inherited[_INDEX[mech]] += total - have
    return tuple(inherited)


def moved(parts: Parts, mech: Mechanism, taken: float, rest: float, added: float
          ) -> Parts:
    """Parts of a bound in which `taken` of `mech`'s share is bounded another way: the
    remaining parts scaled to `rest`, then `added` at `mech` (rule E's K* replacing the
    exp argument's rounding in the tilt)."""
    left = list(parts) if parts else [0.0] * len(ORDER)
    left[_INDEX[mech]] = max(left[_INDEX[mech]] - taken, 0.0)
    out = list(attributed([(sum(left), tuple(left))], rest, mech, False))
    out[_INDEX[mech]] += added
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Culprit:
    """One mechanism's share of the bound, with the kernel lines where it happens."""

    mechanism: Mechanism
    share: float
    sites: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"mechanism": self.mechanism.name.lower(), "what": self.mechanism.value,
                "share": float(f"{self.share:.3g}"), "sites": list(self.sites),
                "remedy": REMEDY[self.mechanism]}


def sites(ops: Iterable[tuple[Op, str, Rat | None]]) -> dict[Mechanism, list[str]]:
    """Per mechanism, the kernel lines of the ops that add to it, in program order: `ops`
    are (op, its value's kind, its exact form), one per distinct op."""
    out: dict[Mechanism, list[str]] = {}
    for op, kind, form in ops:
        if kind == "exact" and op.kind is not OpKind.CAST:
            continue
        if op.kind in (OpKind.RESHAPE, OpKind.TRANS, OpKind.MAX, OpKind.MAXIMUM,
                       OpKind.MINIMUM, OpKind.SEND, OpKind.NEG, OpKind.FULL,
                       OpKind.RECV) or \
                (op.kind is OpKind.LOAD and kind == "exact"):
            continue
        if op.kind is OpKind.CAST and kind == "exact":
            continue
        mech = mechanism_of(op, kind, form, "same")
        where = str(op.source)
        if where not in out.setdefault(mech, []):
            out[mech].append(where)
        # a rescale may be from another reference point
        if mech is Mechanism.MERGE and op.kind is OpKind.MUL and \
                where not in out.setdefault(Mechanism.REFERENCE, []):
            out[Mechanism.REFERENCE].append(where)
    return out


def ranked(parts: Parts, sites: dict[Mechanism, list[str]]) -> tuple[Culprit, ...]:
    """The mechanisms by share of the bound, largest first (shares below 1% left out)."""
    total = sum(parts)
    if not parts or total <= 0:
        return ()
    out = [Culprit(m, x / total, tuple(sites.get(m, ())[:3]))
           for m, x in zip(ORDER, parts, strict=True) if x / total >= 0.01]
    return tuple(sorted(out, key=lambda c: (-c.share, c.mechanism.name)))


def sentence(culprits: Iterable[Culprit]) -> str:
    """The largest contribution in words, with the remedy."""
    for c in culprits:
        where = f" at {', '.join(c.sites)}" if c.sites else ""
        return (f"{c.mechanism.value}{where} contributes {c.share:.0%} of the bound: "
                f"{REMEDY[c.mechanism]}")
    return ""


__all__ = [
    "REMEDY",
    "Culprit",
    "Mechanism",
    "attributed",
    "mechanism_of",
    "moved",
    "ranked",
    "sentence",
    "sites",
]
