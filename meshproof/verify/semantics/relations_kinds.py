"""The relations value numbers give (relations.py): what joins the memo key of a rescale, a
union, a normalisation and an exp of a difference."""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple


class Relation(IntEnum):
    NONE = 0        # not a rescale, union or normalisation of weights
    SAME = 1        # the same machine reference point
    NARROWED = 2    # a rescale from a narrowing of the partial's reference point
    PARTNERS = 3    # o / ℓ built from the same weights by the same factors
    OTHER = 4       # nothing shared is known
    MAXED = 5       # exp(x - max(x)): SAME, and the max key's argument is 0 (rule E)


class Related(NamedTuple):
    """The relation of an op's operands, part of its situation's memo key (a tuple of
    ints and a float: hashed in C, once per op of every rank)."""

    relation: Relation
    offset: float = 0.0      # NARROWED: |narrowed - reference| <= offset
    factor: int = 1          # MUL: the operand that is the rescale factor
    keys: int = 0            # MAXED: the keys of the block (the max's axis)


NONE = Related(Relation.NONE)
_SAME = Related(Relation.SAME)
_OTHER = Related(Relation.OTHER)
_PARTNERS = Related(Relation.PARTNERS)
_SAME_AT = (Related(Relation.SAME, factor=0), Related(Relation.SAME, factor=1))
_OTHER_AT = (Related(Relation.OTHER, factor=0), Related(Relation.OTHER, factor=1))

__all__ = ["NONE", "Related", "Relation"]
