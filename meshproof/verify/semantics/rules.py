"""Which rule of a domain a situation applies, typed: the situation engine (situations.py)
runs three domains -- the algebra (symbolic.py), the ranges (ranges.py) and the rounding
bounds (rounding.py) -- on the same operands. A `Rule` names the op's rule and carries its
operator; `apply` calls that rule of any domain through the `Rules` protocol, so mypy
checks every domain against every rule (they were reached by method name, unchecked), and
a rule with no case fails at `assert_never`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol, TypeVar, assert_never

from meshproof.model.op_semantics import Binary, Compare, Lost, Reduction, Unary
from meshproof.model.schedule import Op

T = TypeVar("T")


class Rules(Protocol[T]):
    """The rules a domain of the situation engine has, over its values T."""

    def recv(self, rank: int, op: Op, sent: T | Lost) -> T: ...
    def full(self, rank: int, op: Op) -> T: ...
    def arange(self, rank: int, op: Op) -> T: ...
    def cast(self, rank: int, op: Op, x: T) -> T: ...
    def reshape(self, rank: int, op: Op, x: T) -> T: ...
    def view_slice(self, rank: int, op: Op, x: T) -> T: ...
    def trans(self, rank: int, op: Op, x: T) -> T: ...
    def unary(self, rank: int, op: Op, fn: Unary, x: T) -> T: ...
    def reduce(self, rank: int, op: Op, fn: Reduction, x: T) -> T: ...
    def binary(self, rank: int, op: Op, fn: Binary, a: T, b: T) -> T: ...
    def dot(self, rank: int, op: Op, a: T, b: T) -> T: ...
    def compare(self, rank: int, op: Op, fn: Compare, a: T, b: T) -> T: ...
    def where(self, rank: int, op: Op, cond: T, a: T, b: T) -> T: ...


class Plain(Enum):
    """The rules without an operator."""

    RECV = "recv"
    FULL = "full"
    ARANGE = "arange"
    CAST = "cast"
    RESHAPE = "reshape"
    VIEW = "view"
    TRANS = "trans"
    DOT = "dot"
    WHERE = "where"


@dataclass(frozen=True, slots=True)
class UnaryRule:
    fn: Unary


@dataclass(frozen=True, slots=True)
class ReduceRule:
    fn: Reduction


@dataclass(frozen=True, slots=True)
class BinaryRule:
    fn: Binary


@dataclass(frozen=True, slots=True)
class CompareRule:
    fn: Compare


Rule = Plain | UnaryRule | ReduceRule | BinaryRule | CompareRule


def one_operand(fn: Unary | Reduction) -> UnaryRule | ReduceRule:
    """The rule of a one-operand op by its operator's type (reduce is unary's sibling)."""
    return UnaryRule(fn) if isinstance(fn, Unary) else ReduceRule(fn)


def apply(domain: Rules[T], rule: Rule, rank: int, op: Op, args: Sequence[T]) -> T:
    """`rule` of `domain` on `args` (as many as the rule takes)."""
    match rule:
        case UnaryRule(fn):
            return domain.unary(rank, op, fn, args[0])
        case ReduceRule(fn):
            return domain.reduce(rank, op, fn, args[0])
        case BinaryRule(fn):
            return domain.binary(rank, op, fn, args[0], args[1])
        case CompareRule(fn):
            return domain.compare(rank, op, fn, args[0], args[1])
        case Plain.RECV:
            return domain.recv(rank, op, args[0])
        case Plain.FULL:
            return domain.full(rank, op)
        case Plain.ARANGE:
            return domain.arange(rank, op)
        case Plain.CAST:
            return domain.cast(rank, op, args[0])
        case Plain.RESHAPE:
            return domain.reshape(rank, op, args[0])
        case Plain.VIEW:
            return domain.view_slice(rank, op, args[0])
        case Plain.TRANS:
            return domain.trans(rank, op, args[0])
        case Plain.DOT:
            return domain.dot(rank, op, args[0], args[1])
        case Plain.WHERE:
            return domain.where(rank, op, args[0], args[1], args[2])
        case _:
            assert_never(rule)
