"""Why a value has no exact form: outside the algebra (`NotModelled`) or undefined on the
machine for every input that reaches it (`Undefined`: 0/0, inf - inf, log 0, ...).

The two are kept apart because they decide differently: an undefined value is a numeric
hazard (numeric_safety's empty-partial rule), a value outside the algebra only leaves a
property unknown. Both carry their reason in words for the diagnostic at the op's line.
"""

from __future__ import annotations

from enum import Enum


class UndefinedKind(Enum):
    INF_MINUS_INF = "inf_minus_inf"       # exp(-inf - (-inf)) of an empty partial
    ZERO_TIMES_INF = "zero_times_inf"
    ZERO_OVER_ZERO = "zero_over_zero"     # normalising an empty partial
    INF_OVER_INF = "inf_over_inf"
    DIVIDE_BY_ZERO = "divide_by_zero"
    LOG_OF_ZERO = "log_of_zero"           # log 0 (an empty partial's ℓ)
    LOG_OF_NEGATIVE = "log_of_negative"
    EXP_OF_INF = "exp_of_inf"
    NAN_CONSTANT = "nan_constant"


class NotModelled(Exception):
    """The exact form of a result is outside the algebra; the message says why."""


class Scramble(NotModelled):
    """A dot whose contraction pairs the wrong indices: the caller substitutes a fresh
    symbol (atoms.Scrambled) and carries on, so later mistakes are still found."""


class Undefined(Exception):
    """The result is undefined (nan or an unbounded value) on the machine: `kind` says
    which, the message says it in words."""

    def __init__(self, kind: UndefinedKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
