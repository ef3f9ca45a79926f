"""What the interval and rounding rules read of the analysis, as protocols.

The rules of ranges.py and rounding.py read the symbolic forms (and, for rounding, the
intervals) of an op's result and operands by key. Two things answer: the situation memo
while it computes one situation (situations._View: operands from their facts, the result
so far) and the finished analysis (situations.Forms). Protocols keep both the rules and
the memo free of each other's imports.
"""

from __future__ import annotations

from typing import Protocol

from meshproof.model.evaluate import Key, Lost
from meshproof.model.schedule import DType, Op
from meshproof.verify.semantics.layouts import Value
from meshproof.verify.semantics.relations import Related
from meshproof.verify.semantics.symbolic_core import Opaque

Interval = tuple[float, float]


class FormReader(Protocol):
    def canonical(self, key: Key) -> Value | Opaque | None:
        """The value in its canonical frame (None: not computed)."""

    def cid_of(self, key: Key) -> int | None:
        """Its canonical id (None: opaque or not computed)."""

    def by_cid(self, cid: int) -> Value:
        """The canonical value of an id."""


class RoundingReader(FormReader, Protocol):
    def interval(self, key: Key) -> Interval:
        """The value's interval under |inputs| <= B."""

    def recv_source(self, rank: int, op: Op) -> Key | Lost:
        """The value a recv receives (Lost: none)."""

    def related(self) -> Related:
        """The relation of the operands of the op being computed (relations.py)."""

    def dtype_of(self, rank: int, vid: int) -> DType | None:
        """The dtype the machine holds a value in (None: not numbered)."""


class WhyStore(Protocol):
    """Per value, why it has no rounding bound."""

    def get(self, key: Key, default: None = None, /) -> str | None: ...

    def setdefault(self, key: Key, why: str, /) -> str: ...
