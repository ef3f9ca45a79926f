"""What a domain implements to give the schedule IR a meaning: `OpSemantics`, one method per
op family, and the enums and records its methods take (the unary, binary, reduction and
comparison functions; a message that never arrives; the stores a load reads back).
model/evaluate.py runs a schedule for one domain.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Generic, Protocol, TypeVar

from meshproof.model.schedule import Op

V = TypeVar("V")
Key = tuple[int, int]   # (rank index, value id)
OpsProgress = Callable[[int, int], None]   # (ops run, ops in all)


class Unary(Enum):
    EXP = "exp"
    EXP2 = "exp2"
    LOG = "log"
    LOG2 = "log2"
    LOG1P = "log1p"
    SIGMOID = "sigmoid"
    NEG = "neg"


class Binary(Enum):
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    MAXIMUM = "maximum"
    MINIMUM = "minimum"


class Reduction(Enum):
    MAX = "max"
    SUM = "sum"


class Compare(Enum):
    """A comparison making a mask (1 where it holds, else 0)."""

    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    EQ = "eq"
    NE = "ne"


E = TypeVar("E", Unary, Reduction)


@dataclass(frozen=True, slots=True)
class Lost:
    """A recv whose message never arrives, and why."""

    reason: str


@dataclass(frozen=True, slots=True)
class Reload(Generic[V]):
    """What a load reads back: the stores of the same rank (in program order, with the
    values they stored) and whether some element was never stored (the buffer's input)."""

    stores: tuple[tuple[Op, V], ...]
    uncovered: bool


class OpSemantics(Protocol[V]):
    """A meaning of the IR, one method per op family (the op is passed for its
    attributes: shape, dtype, axis, perm, ptr, offset, fill, source)."""

    def const(self, rank: int, op: Op, value: float) -> V:
        """A Python scalar operand of `op`."""

    def load(self, rank: int, op: Op, reload: Reload[V] | None) -> V: ...

    def full(self, rank: int, op: Op) -> V: ...

    def recv(self, rank: int, op: Op, sent: V | Lost) -> V: ...

    def cast(self, rank: int, op: Op, x: V) -> V: ...

    def reshape(self, rank: int, op: Op, x: V) -> V: ...

    def view_slice(self, rank: int, op: Op, x: V) -> V:
        """Elements [op.offset, op.offset + prod(op.shape)) of x, row-major, as op.shape."""

    def trans(self, rank: int, op: Op, x: V) -> V: ...

    def unary(self, rank: int, op: Op, fn: Unary, x: V) -> V: ...

    def binary(self, rank: int, op: Op, fn: Binary, a: V, b: V) -> V: ...

    def reduce(self, rank: int, op: Op, fn: Reduction, x: V) -> V: ...

    def dot(self, rank: int, op: Op, a: V, b: V) -> V: ...

    def arange(self, rank: int, op: Op) -> V:
        """Positions `op.fill`, `op.fill` + 1, ... (op.shape[0] of them)."""

    def compare(self, rank: int, op: Op, fn: Compare, a: V, b: V) -> V: ...

    def where(self, rank: int, op: Op, cond: V, a: V, b: V) -> V: ...

    def cycle(self, rank: int, op: Op) -> V:
        """A value that depends on itself through messages."""
