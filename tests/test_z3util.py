"""Solver helpers (verify/z3util.py): budgets, the SMT-LIB builder."""

from __future__ import annotations

import z3

from meshproof.verify.z3util import Budget, check, new_solver


def test_huge_timeouts_are_clamped_not_wrapped_to_a_millisecond() -> None:
    # Z3 keeps the timeout in 32 bits: 2**32 + 1 ms used to become 1 ms (instant unknown).
    budget = Budget(timeout_s=(2**32 + 1) / 1000, rlimit=0)
    solver = new_solver(budget)
    x = z3.Int("x")
    solver.add(x * x * x + 7 * x == 123456789012345)
    assert check(solver).reason != "timeout"
